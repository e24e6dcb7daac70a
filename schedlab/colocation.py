"""Co-location entries of an instance as arrays (Gavel space sharing).

An instance lists, on every job a, ``colocated_throughput = {b: {k: Tc}}``: the steps/s of a
while it shares GPUs of type k with job b.  With every pair of J jobs listed that is J(J-1)
entries of K numbers (4 million entries at J = 2000), too many to walk per element each time a
formulation, the content hash or the checker reads them.  :class:`Colocation` holds the same
entries over unordered pairs p = {a, b} (job positions a < b) as arrays, built by
:func:`colocation_of` in one pass over the dicts (a few list comprehensions, no per-entry
Python statement) and cached on the Instance (:meth:`schedlab.instance.Instance.colocation`).

Arrays (P pairs sorted by (a, b), K types in the instance's order, side 0 = job a, 1 = job b):

* ``present[p, s]``: the job of side s lists the other one (an entry, possibly with no type);
* ``listed[p, k, s]``: that entry names type k;
* ``throughput[p, k, s]``: Tc, steps/s of the side's job beside the other on type k (0 where
  not listed).

A valid instance lists every pair on both jobs for the same types (:meth:`Colocation.symmetric`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import methodcaller
from typing import cast

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: What one job lists: {other job id: {accelerator type: steps/s}}, or None.
Entries = Mapping[str, Mapping[str, float]] | None


class ColocationError(ValueError):
    """An entry names an unknown job or type, or a job itself (the instance validator turns
    this into an error naming the field)."""


@dataclass(frozen=True)
class Colocation:
    """Co-located pairs of an instance as arrays (module docstring)."""

    types: tuple[str, ...]  # K, the order of the type axis
    first: IntArray  # (P,) job position a
    second: IntArray  # (P,) job position b > a
    present: BoolArray  # (P, 2)
    listed: BoolArray  # (P, K, 2)
    throughput: FloatArray  # (P, K, 2) steps/s, 0 where not listed

    @property
    def num_pairs(self) -> int:
        """P."""
        return len(self.first)

    def symmetric(self) -> bool:
        """Every pair listed on both jobs, for the same types (what validation demands)."""
        return bool(self.present.all()) and bool(
            np.array_equal(self.listed[:, :, 0], self.listed[:, :, 1]))

    def update_digest(self, digest: hashlib._Hash) -> None:
        """Feed canonical bytes of these arrays to ``digest``: the type names sorted (so the
        order of the cluster's types does not matter, as in the instance's canonical JSON),
        P, then a, b (little-endian int64), present and listed (one byte each) and the
        throughputs (little-endian float64), the type axis in sorted-name order.  Every value
        and every listed/unlisted flag changes the bytes."""
        order = sorted(range(len(self.types)), key=lambda k: self.types[k])
        names = [self.types[k] for k in order]
        digest.update(b"\x00schedlab/colocation@1\x00")
        digest.update(json.dumps(names, separators=(",", ":")).encode())
        digest.update(np.int64(self.num_pairs).astype("<i8").tobytes())
        digest.update(np.ascontiguousarray(self.first, dtype="<i8").tobytes())
        digest.update(np.ascontiguousarray(self.second, dtype="<i8").tobytes())
        digest.update(np.ascontiguousarray(self.present, dtype=np.uint8).tobytes())
        digest.update(np.ascontiguousarray(self.listed[:, order, :], dtype=np.uint8).tobytes())
        digest.update(
            np.ascontiguousarray(self.throughput[:, order, :], dtype="<f8").tobytes())


def colocation_of(
    job_ids: Sequence[str], entries: Sequence[Entries], types: Sequence[str]
) -> Colocation:
    """:class:`Colocation` of jobs ``job_ids`` whose ``colocated_throughput`` are ``entries``.

    Raises :class:`ColocationError` when an entry names an unknown job, the job itself, or a
    type not in ``types``.  Asymmetric listings are kept as they are (``present``/``listed``
    say which side lists what)."""
    num_jobs, num_types = len(job_ids), len(types)
    owners = [j for j, d in enumerate(entries) if d]
    dicts: list[Mapping[str, Mapping[str, float]]] = [d for d in entries if d]
    sizes = np.fromiter(map(len, dicts), dtype=np.int64, count=len(dicts))
    total = int(sizes.sum())
    index = {job: j for j, job in enumerate(job_ids)}
    partners = list(chain.from_iterable(dicts))
    try:
        dst = np.fromiter(map(index.__getitem__, partners), dtype=np.int64, count=total)
    except KeyError as exc:
        raise ColocationError(f"unknown job id {exc.args[0]!r}") from None
    src = np.repeat(np.asarray(owners, dtype=np.int64), sizes)
    if np.any(src == dst):
        raise ColocationError("a job cannot be co-located with itself")
    inner = list(chain.from_iterable(d.values() for d in dicts))
    values, listed_e = _entry_values(inner, types)
    low, high = np.minimum(src, dst), np.maximum(src, dst)
    size = max(num_jobs, 1)
    keys, pair = _unique_keys(low * size + high)
    side = (src > dst).astype(np.int64)
    present = np.zeros((len(keys), 2), dtype=bool)
    present[pair, side] = True
    listed = np.zeros((len(keys), num_types, 2), dtype=bool)
    listed[pair, :, side] = listed_e
    throughput = np.zeros((len(keys), num_types, 2))
    throughput[pair, :, side] = values
    return Colocation(
        types=tuple(types),
        first=keys // size,
        second=keys % size,
        present=present,
        listed=listed,
        throughput=throughput,
    )


def _entry_values(
    inner: list[Mapping[str, float]], types: Sequence[str]
) -> tuple[FloatArray, BoolArray]:
    """(values (E, K), listed (E, K)) of E entries {type: steps/s}, flattened by C-level
    iteration (chain, map), with no Python statement per entry.  When every entry names the
    same types in the same order (what generators and profilers write) the flat values are
    one reshape; otherwise each name is looked up."""
    total, num_types = len(inner), len(types)
    kpos = {acc: k for k, acc in enumerate(types)}
    lengths = np.fromiter(map(len, inner), dtype=np.int64, count=total)
    cells = int(lengths.sum())
    # dict.values (a C method) is the fast way in; methodcaller serves any other Mapping
    values_of = cast(Callable[[Mapping[str, float]], Iterable[float]], dict.values)
    try:
        value = np.fromiter(chain.from_iterable(map(values_of, inner)), dtype=float,
                            count=cells)
    except TypeError:  # a Mapping that is not a dict
        value = np.fromiter(chain.from_iterable(map(methodcaller("values"), inner)),
                            dtype=float, count=cells)
    names = list(chain.from_iterable(inner))
    values = np.zeros((total, num_types))
    listed = np.zeros((total, num_types), dtype=bool)
    width = int(lengths[0]) if total else 0
    if total and bool(np.all(lengths == width)) and width <= num_types and all(
        names[i::width].count(names[i]) == total for i in range(width)
    ):
        head = names[:width]
        if any(name not in kpos for name in head):
            unknown = next(name for name in head if name not in kpos)
            raise ColocationError(f"unknown accelerator {unknown!r}")
        cols = [kpos[name] for name in head]
        values[:, cols] = value.reshape(total, width)
        listed[:, cols] = True
        return values, listed
    try:
        column = np.fromiter(map(kpos.__getitem__, names), dtype=np.int64, count=cells)
    except KeyError as exc:
        raise ColocationError(f"unknown accelerator {exc.args[0]!r}") from None
    row = np.repeat(np.arange(total, dtype=np.int64), lengths)
    values[row, column] = value
    listed[row, column] = True
    return values, listed


def _unique_keys(keys: IntArray) -> tuple[IntArray, IntArray]:
    """(sorted distinct keys, position of each key among them): ``np.unique`` with
    ``return_inverse``, by one argsort (several times faster on the nearly sorted keys of a
    listing)."""
    order = np.argsort(keys)
    ordered = keys[order]
    new = np.empty(len(keys), dtype=bool)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    inverse = np.empty(len(keys), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return ordered[new], inverse
