"""``sia``: Sia's scheduler (SOSP'23) as its artifact's simulator runs it, on goodput jobs
(docs/goodput.md, "sia").

Each round (siasosp23/artifacts ``sia-simulator/sia.py`` 576-842): build the goodput
matrix of the active jobs over Sia's configuration set, row-normalised, projected onto
types a job has not run on (:func:`~schedlab.formulations.sia.matrix.goodput_matrix`);
penalise leaving the previous configuration by the re-allocation factor; solve the ILP
(:func:`~schedlab.formulations.sia.ilp.solve_sia_ilp`, HiGHS by default, relative gap
1e-4 as the authors' CBC call); place each type's allocations with the authors' packer
(:func:`~schedlab.formulations.sia.placement.alloc_to_placement_fast`), from empty nodes
every round.  The previous configuration is the one this policy chose last round (the
code's ``prev_allocs_v2``); a job still paying its checkpoint-restore keeps it.

Options: ``p`` (-0.5) and ``lambda_n`` (1.1; -1.1 for p > 0), ``project_throughputs``
and ``share_max_replicas`` (on, the paper's runs), ``tie_break`` (off: the solver's
choice among tied optima, as the authors' code; on: the two-stage lexicographic
tie-break, deterministic), ``solver`` options.  Rigid jobs are not supported here yet.
"""

from __future__ import annotations

from schedlab.errors import InputError, SolverError
from schedlab.formulations.sia import (
    AdaptiveJob,
    goodput_matrix,
    model_goodput_fn,
    realloc_factor,
    restart_penalty_s,
    sia_configs,
    sia_problem,
    solve_sia_ilp,
)
from schedlab.formulations.sia.configs import ConfigSet
from schedlab.formulations.sia.placement import alloc_to_placement_fast
from schedlab.policies.goodput_state import Decision, GoodputState
from schedlab.solvers.base import SolverOptions


class Sia:
    """Sia's goodput ILP and placement (module docstring)."""

    name = "sia"

    def __init__(self, *, p: float = -0.5, lambda_n: float | None = None,
                 project_throughputs: bool = True, share_max_replicas: bool = True,
                 tie_break: bool = False, solver: str = "highs",
                 time_limit_s: float | None = None) -> None:
        self.p = p
        self.lambda_n = lambda_n
        self.project_throughputs = project_throughputs
        self.share_max_replicas = share_max_replicas
        self.tie_break = tie_break
        self.options = SolverOptions(solver=solver, time_limit_s=time_limit_s)
        self._previous: dict[str, int | None] = {}
        self._configs: tuple[tuple[tuple[str, int, int], ...], ConfigSet] | None = None
        self._solve_s = 0.0
        self._solves = 0

    def counters(self) -> tuple[float, int]:
        """Seconds in the solver and ILPs solved."""
        return self._solve_s, self._solves

    def _config_set(self, state: GoodputState) -> ConfigSet:
        key = tuple((t, state.nodes[t], state.gpus_per_node[t]) for t in state.types)
        if self._configs is None or self._configs[0] != key:
            self._configs = (key, sia_configs({t: (n, g) for t, n, g in key}))
        return self._configs[1]

    def decide(self, state: GoodputState) -> Decision:
        """The round's allocation (module docstring)."""
        configs = self._config_set(state)
        jobs = state.jobs
        for job in jobs:
            if job.category == "rigid":
                raise InputError(f"job {job.name!r} is rigid; the sia policy here takes "
                                 "adaptive and scale-gpus jobs only", field="category")
        adaptive = [AdaptiveJob(
            name=j.name,
            goodput={t: None if j.models.get(t) is None else model_goodput_fn(
                j.models[t], j.max_batch_size[t], j.atomic_bsz_range[t],  # type: ignore[arg-type]
                tune_bsz=j.tune_bsz) for t in state.types},
            max_replicas=dict(j.max_replicas), min_replicas=dict(j.min_replicas),
            one_gpu_throughput=dict(j.one_gpu_throughput)) for j in jobs]
        matrix = goodput_matrix(adaptive, configs, share_max_replicas=self.share_max_replicas,
                                project_throughputs=self.project_throughputs)
        previous = [self._previous.get(j.name) for j in jobs]
        problem = sia_problem(
            configs, [j.name for j in jobs], matrix,
            realloc=[realloc_factor(j.age, j.num_restarts, restart_penalty_s(j.name))
                     for j in jobs],
            previous=previous,
            locked=[j.scaling_underway and prev is not None
                    for j, prev in zip(jobs, previous, strict=True)],
            p=self.p, lambda_n=self.lambda_n)
        result = solve_sia_ilp(problem, self.options, tie_break=self.tie_break)
        self._solve_s += result.solve_s
        self._solves += 1
        if result.objective is None:
            raise SolverError(f"sia at t={state.now:g} s: the ILP found no solution "
                              f"({result.status})")
        self._previous = dict(zip(problem.names, result.choice, strict=True))
        per_type: dict[str, dict[str, tuple[int, int]]] = {}
        for name, config in result.allocations.items():
            if config is not None:
                per_type.setdefault(config.gpu_type, {})[name] = (config.nodes, config.gpus)
        decision: Decision = {}
        for gpu_type, allocations in per_type.items():
            free = [state.gpus_per_node[gpu_type]] * state.nodes[gpu_type]
            for name, ids in alloc_to_placement_fast(allocations, free).items():
                decision[name] = (gpu_type, tuple(ids))
        return decision
