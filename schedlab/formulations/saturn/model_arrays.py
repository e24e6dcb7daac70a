"""The coefficient arrays of Saturn's MILPs (``saturn.models``), built in numpy.

:class:`StartGrid` holds the time-indexed model's start binaries x[j,o,n,t] (one column each,
in the model's order: job, option, node, slot) and gives its row blocks as sparse matrices;
:class:`DisjunctiveColumns` does the same for the disjunctive model over the columns
[y..., z..., q..., S...].  The models (``saturn.models``) hand these matrices to
:mod:`schedlab.formulations.arrays`, one Pyomo row per matrix row.  Zero coefficients are
dropped (Pyomo's algebra drops ``0 * x`` too).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from schedlab.formulations.arrays import csr_from_entries
from schedlab.formulations.saturn.data import SaturnData

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _matrix(rows: IntArray, cols: IntArray, values: FloatArray,
            shape: tuple[int, int]) -> sp.csr_matrix:
    """CSR matrix of the entries, terms in column order within each row, zeros dropped."""
    out = sp.csr_matrix((values, (rows, cols)), shape=shape)
    out.eliminate_zeros()
    out.sort_indices()
    return out


def with_column(matrix: sp.csr_matrix, column: FloatArray) -> sp.csr_matrix:
    """``matrix`` with one more column on the right (one value per row; its terms last)."""
    extra = sp.csr_matrix(np.asarray(column, dtype=float).reshape(-1, 1))
    out = sp.hstack([matrix, extra], format="csr")
    out.eliminate_zeros()
    return out


@dataclass(frozen=True)
class StartGrid:
    """Start binaries x[j,o,n,t]: job j starts option o on node n at slot t, for every option
    that fits the node and every t with ``release[j] <= t <= horizon - p[j,o]``.

    Per column: ``j``, ``o``, ``n``, ``t``; ``p`` slots, ``g`` GPUs and ``runtime`` s of the
    option.  ``capacity[n]`` = G_n.
    """

    j: IntArray
    o: IntArray
    n: IntArray
    t: IntArray
    p: IntArray
    g: FloatArray
    runtime: FloatArray
    capacity: FloatArray
    num_jobs: int

    @classmethod
    def build(cls, data: SaturnData, slots: dict[tuple[int, int], int], release: list[int],
              horizon: int) -> StartGrid:
        """The grid of ``data`` with ``slots[j, o]`` slots per option, ``release[j]`` the first
        slot of job j and ``horizon`` the number of slots."""
        parts: list[tuple[int, int, int, IntArray, int, int, float]] = []
        for j, opts in enumerate(data.options):
            for o, opt in enumerate(opts):
                for n, node in enumerate(data.nodes):
                    if opt.gpus <= node.gpus:
                        ts = np.arange(release[j], horizon - slots[j, o] + 1, dtype=np.int64)
                        parts.append((j, o, n, ts, slots[j, o], opt.gpus, opt.runtime))
        counts = [len(part[3]) for part in parts]

        def ints(k: int) -> IntArray:
            return np.repeat(np.array([part[k] for part in parts], dtype=np.int64), counts)

        def floats(k: int) -> FloatArray:
            return np.repeat(np.array([part[k] for part in parts], dtype=float), counts)

        return cls(
            j=ints(0), o=ints(1), n=ints(2),
            t=np.concatenate([part[3] for part in parts]) if parts else np.zeros(0, np.int64),
            p=ints(4), g=floats(5), runtime=floats(6),
            capacity=np.array([nd.gpus for nd in data.nodes], dtype=float),
            num_jobs=data.num_jobs,
        )

    @property
    def size(self) -> int:
        """Columns."""
        return len(self.j)

    def keys(self) -> list[tuple[int, int, int, int]]:
        """(j, o, n, t) of every column, in order."""
        return list(zip(self.j.tolist(), self.o.tolist(), self.n.tolist(), self.t.tolist(),
                        strict=True))

    def by_job(self, values: npt.ArrayLike) -> sp.csr_matrix:
        """(J x columns): ``values[i]`` in row j of column i."""
        return _matrix(self.j, np.arange(self.size), np.asarray(values, dtype=float),
                       (self.num_jobs, self.size))

    def by_node(self, values: npt.ArrayLike) -> sp.csr_matrix:
        """(nodes x columns): ``values[i]`` in row n of column i."""
        return _matrix(self.n, np.arange(self.size), np.asarray(values, dtype=float),
                       (len(self.capacity), self.size))

    def usage(self) -> tuple[IntArray, sp.csr_matrix]:
        """((n, tau) of every slot some start covers, sorted; the matrix of g x over the
        starts covering it: t <= tau < t + p on node n)."""
        covers = np.repeat(np.arange(self.size), self.p)
        step = np.arange(len(covers)) - np.repeat(np.cumsum(self.p) - self.p, self.p)
        tau = self.t[covers] + step
        span = int(tau.max()) + 1 if len(tau) else 1
        keys, row = np.unique(self.n[covers] * span + tau, return_inverse=True)
        node_tau = np.column_stack([keys // span, keys % span]).astype(np.int64)
        return node_tau, _matrix(row.reshape(-1), covers, self.g[covers],
                                 (len(keys), self.size))

    def by_choice(self) -> tuple[sp.csr_matrix, list[tuple[int, int, int]]]:
        """(rows sum_t x[j,o,n,t], one per (j, o, n) in column order; those keys)."""
        width = max(int(self.o.max()) + 1, 1) if self.size else 1
        nodes = len(self.capacity)
        code = (self.j * width + self.o) * nodes + self.n
        keys, row = np.unique(code, return_inverse=True)  # columns are sorted by (j, o, n)
        choice = [(int(k // (width * nodes)), int(k // nodes % width), int(k % nodes))
                  for k in keys.tolist()]
        return _matrix(row.reshape(-1), np.arange(self.size), np.ones(self.size),
                       (len(keys), self.size)), choice


@dataclass(frozen=True)
class DisjunctiveColumns:
    """Column layout of the disjunctive model: y[j,o,n] (the model's ``Y`` order), z[j,n,u]
    (``Z`` order: job, node, GPU), q[i,j] (``P`` order: i < j), S[j].  ``run`` and ``gpus``:
    r_o and g_o of each y column; ``y_job``, ``y_node``: its job and node."""

    y_job: IntArray
    y_node: IntArray
    run: FloatArray
    gpus: FloatArray
    node_gpus: IntArray
    num_jobs: int
    num_pairs: int

    @classmethod
    def build(cls, data: SaturnData, yon: list[tuple[int, int, int]],
              num_pairs: int) -> DisjunctiveColumns:
        """The layout for the y keys ``yon`` (grouped by job, in job order)."""
        return cls(
            y_job=np.array([j for j, _, _ in yon], dtype=np.int64).reshape(-1),
            y_node=np.array([n for _, _, n in yon], dtype=np.int64).reshape(-1),
            run=np.array([data.options[j][o].runtime for j, o, _ in yon], dtype=float),
            gpus=np.array([data.options[j][o].gpus for j, o, _ in yon], dtype=float),
            node_gpus=np.array([nd.gpus for nd in data.nodes], dtype=np.int64),
            num_jobs=data.num_jobs,
            num_pairs=num_pairs,
        )

    @property
    def num_y(self) -> int:
        """y columns."""
        return len(self.y_job)

    @property
    def z_col(self) -> int:
        """First z column."""
        return self.num_y

    @property
    def q_col(self) -> int:
        """First q column."""
        return self.num_y + self.num_jobs * int(self.node_gpus.sum())

    @property
    def s_col(self) -> int:
        """First S column."""
        return self.q_col + self.num_pairs

    @property
    def width(self) -> int:
        """Columns (without C)."""
        return self.s_col + self.num_jobs

    def z_index(self, job: IntArray, node: IntArray, gpu: IntArray) -> IntArray:
        """Column of z[job, node, gpu]."""
        offset = np.concatenate(([0], np.cumsum(self.node_gpus)[:-1]))
        return self.z_col + job * int(self.node_gpus.sum()) + offset[node] + gpu

    def q_index(self, first: IntArray, second: IntArray) -> IntArray:
        """Column of q[first, second], first < second."""
        jobs = self.num_jobs
        return self.q_col + first * jobs - first * (first + 1) // 2 + (second - first - 1)

    def y_of_job(self, job: int) -> IntArray:
        """y columns of ``job``, in order."""
        return np.flatnonzero(self.y_job == job)

    def by_job_y(self, values: FloatArray) -> sp.csr_matrix:
        """(J x width): ``values[i]`` of y column i in the row of its job."""
        return _matrix(self.y_job, np.arange(self.num_y), values, (self.num_jobs, self.width))

    def gpu_rows(self) -> sp.csr_matrix:
        """Rows (j, n) in (job, node) order: sum_u z[j,n,u] - sum_o g_o y[j,o,n] (z first)."""
        nodes = len(self.node_gpus)
        per_job = int(self.node_gpus.sum())
        z_job = np.repeat(np.arange(self.num_jobs), per_job)
        z_node = np.tile(np.repeat(np.arange(nodes), self.node_gpus), self.num_jobs)
        rows = np.concatenate([z_job * nodes + z_node, self.y_job * nodes + self.y_node])
        cols = np.concatenate([self.z_col + np.arange(len(z_job)), np.arange(self.num_y)])
        values = np.concatenate([np.ones(len(z_job)), -self.gpus])
        position = np.concatenate([np.zeros(len(z_job)), np.ones(self.num_y)])
        return csr_from_entries(rows, cols, values, (self.num_jobs * nodes, self.width),
                                position)

    def end_rows(self) -> sp.csr_matrix:
        """Rows j: S_j + D_j = S_j + sum r_o y[j,o,n] (S first)."""
        jobs = np.arange(self.num_jobs)
        rows = np.concatenate([jobs, self.y_job])
        cols = np.concatenate([self.s_col + jobs, np.arange(self.num_y)])
        values = np.concatenate([np.ones(self.num_jobs), self.run])
        position = np.concatenate([np.zeros(self.num_jobs), np.ones(self.num_y)])
        return csr_from_entries(rows, cols, values, (self.num_jobs, self.width), position)

    def clash_rows(self, first: IntArray, second: IntArray, node: IntArray, gpu: IntArray,
                   big_m: float, *, after: bool) -> sp.csr_matrix:
        """One row per clash (first < second, node, gpu).  ``after=False`` (``before``):
        S_a + D_a + M q + M z_a + M z_b - S_b with a = first, b = second; ``after=True``:
        S_b + D_b - M q + M z_a + M z_b - S_a.  Terms in that order."""
        count = len(first)
        lead, last = (second, first) if after else (first, second)
        per_row = np.bincount(self.y_job, minlength=self.num_jobs)[lead]
        start_of_job = np.concatenate(([0], np.cumsum(np.bincount(
            self.y_job, minlength=self.num_jobs))[:-1]))
        rows_y = np.repeat(np.arange(count), per_row)
        step = np.arange(len(rows_y)) - np.repeat(np.cumsum(per_row) - per_row, per_row)
        cols_y = start_of_job[lead][rows_y] + step
        tail = int(per_row.max()) + 1 if count else 1
        ids = np.arange(count)
        rows = np.concatenate([ids, rows_y, ids, ids, ids, ids])
        cols = np.concatenate([self.s_col + lead, cols_y, self.q_index(first, second),
                               self.z_index(first, node, gpu), self.z_index(second, node, gpu),
                               self.s_col + last])
        values = np.concatenate([np.ones(count), self.run[cols_y],
                                 np.full(count, -big_m if after else big_m),
                                 np.full(count, big_m), np.full(count, big_m),
                                 -np.ones(count)])
        position = np.concatenate([np.zeros(count), 1 + step, np.full(count, tail),
                                   np.full(count, tail + 1), np.full(count, tail + 2),
                                   np.full(count, tail + 3)])
        return csr_from_entries(rows, cols, values, (count, self.width), position)
