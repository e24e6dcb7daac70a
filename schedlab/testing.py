"""Conformance batteries for formulations and online policies, as a public API.

Like scikit-learn's ``check_estimator``: a plug-in (or a new built-in) calls
:func:`check_formulation` / :func:`check_policy` with its registered name and gets either an
:class:`AssertionError` naming the first check that failed, or a :class:`KitReport` listing
the checks that ran and those skipped, with the reason (docs/plugins.md).

**Formulations** (:func:`check_formulation`), on the formulation's own
:meth:`~schedlab.formulations.base.Method.example_instance`:

1. ``solve``: the solve returns a solution (status optimal, feasible or time_limit) that
   names the formulation;
2. ``checker``: :func:`schedlab.check.check` finds no violation;
3. ``objective``: ``objective_of(instance, solution)`` (when the formulation declares one)
   re-derives ``solution.objective`` within relative 1e-6 (of max(1, |value|));
4. ``status``: ``optimal`` carries a bound and a gap within :data:`DEFAULT_GAP_TOLERANCE`, or
   within the recorded tolerance where smaller (``metrics["gap_tolerance"]``, else
   ``params.mip_gap``) -- the rule of :func:`schedlab.solution.settle_status`;
   a heuristic (``solver == "none"``) is at most ``feasible``;
5. ``bound``: a bound is on the right side of the objective -- for a maximization bound >=
   objective, for a minimization bound <= objective (``objective_sense``; a formulation that
   reports a bound must declare it);
6. ``gap``: gap = |objective - bound| / max(|objective|, 1e-10), within 1e-6;
7. ``json``: the solution written as JSON and read back is equal to it;
8. ``bad_instance``: removing a field from the first job that the formulation needs makes
   it raise :class:`~schedlab.errors.InputError` whose field or message names that field.

**Policies** (:func:`check_policy`), on a small seeded workload run in the simulator
(:func:`policy_workload`: Gavel-style jobs, or Shockwave's dynamic-adaptation jobs for a
policy whose ``workload_kind`` is ``"shockwave"``):

1. ``valid``: every decision is valid (:func:`decision_problems`: active jobs only, each at
   most once, a type where it can run, whole gangs, no more GPUs of a type than exist);
2. ``no_mutation``: ``decide`` leaves the state it reads unchanged (deep comparison);
3. ``deterministic``: a second fresh policy decides the same on the same run (same seed);
4. ``reset``: after :meth:`~schedlab.policies.base.Policy.reset` the counters are zero, and
   the policy reused after a run on another workload (same job ids) decides as a fresh one;
5. ``random_states``: valid, unmutated and reproducible decisions on
   :func:`random_cluster_state` s;
6. ``failed_solves``: with every HiGHS run made to fail, a policy that solves (it called
   HiGHS) counts ``failed_solves`` and still decides validly.
"""

from __future__ import annotations

import copy
import math
import random
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schedlab.check import check
from schedlab.errors import InputError, SchedlabError, SolverError
from schedlab.formulations.base import Method
from schedlab.instance import Instance, instance_from_dict
from schedlab.policies.base import Policy
from schedlab.policies.goodput_registry import is_goodput_policy
from schedlab.policies.registry import get_policy
from schedlab.policies.state import Assignment, ClusterState, JobState
from schedlab.registry import get_formulation
from schedlab.simulator import jobs_from_instance, simulate
from schedlab.simulator.engine import InvalidDecisionError
from schedlab.solution import OPTIMAL_GAP_TOLERANCE, Solution, Status, load_solution
from schedlab.solvers import SolverOptions
from schedlab.solvers.faults import failing_highs
from schedlab.workloads.gavel import generate_gavel_instance
from schedlab.workloads.shockwave import generate_shockwave_instance
from schedlab.workloads.titan import generate_titan_instance

#: Relative gap an ``optimal`` status may carry (a smaller recorded tolerance wins):
#: HiGHS' default relative MIP gap, the status rule's.
DEFAULT_GAP_TOLERANCE = OPTIMAL_GAP_TOLERANCE
#: Relative tolerance of the objective, bound and gap comparisons (of max(1, |value|)).
REL_TOL = 1e-6
#: The cluster of the policy workload and of the random states: 2 GPUs of each type.
KIT_CLUSTER = {"v100": 2, "p100": 2, "k80": 2}
#: The cluster of the Shockwave-kind policy workload: one type, as Shockwave's.
SHOCKWAVE_KIT_CLUSTER = {"v100": 6}
#: GPUs of the Titan-kind policy workload (one type, nodes of 4).
TITAN_KIT_GPUS = 16


@dataclass
class KitReport:
    """What a battery did: the checks that passed, in order, and those skipped (and why)."""

    name: str
    passed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


class _Battery:
    """Runs named checks, turning the first failure into one clear AssertionError."""

    def __init__(self, what: str, name: str) -> None:
        self.what = what
        self.report = KitReport(name)

    def fail(self, step: str, reason: str) -> AssertionError:
        return AssertionError(f"{self.what}({self.report.name!r}) failed {step}: {reason}")

    def ok(self, step: str) -> None:
        self.report.passed.append(step)

    def skip(self, step: str, reason: str) -> None:
        self.report.skipped[step] = reason


def _close(a: float, b: float, rel: float = REL_TOL) -> bool:
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


# --------------------------------------------------------------------------- formulations


def check_formulation(name: str, *, options: SolverOptions | None = None) -> KitReport:
    """Run the formulation battery (module docstring) on the registered formulation ``name``.

    Raises :class:`AssertionError` naming the first failed check; returns the
    :class:`KitReport` otherwise.  ``options`` are the solver options of the solves (default:
    HiGHS, no time limit).
    """
    kit = _Battery("check_formulation", name)
    form = get_formulation(name)
    try:
        instance = form.example_instance()
    except NotImplementedError as exc:
        raise kit.fail("example", str(exc)) from None
    if not isinstance(instance, Instance):
        raise kit.fail("example", f"example_instance() returned {type(instance).__name__}, "
                       "not an Instance")
    solution = form.solve(instance, options)
    if solution.formulation != name or not solution.status.has_solution:
        raise kit.fail("solve", f"solving its example {instance.name!r} gave status "
                       f"{solution.status.value} for formulation {solution.formulation!r} "
                       f"({'; '.join(solution.diagnostics) or 'no diagnostics'})")
    kit.ok("solve")
    violations = check(instance, solution)
    if violations:
        raise kit.fail("checker", f"{len(violations)} violation(s), first: {violations[0]}")
    kit.ok("checker")
    _check_objective(kit, form, instance, solution)
    _check_status(kit, instance, solution)
    _check_bound(kit, form, solution)
    _check_gap(kit, solution)
    _check_json(kit, solution)
    _check_bad_instance(kit, form, instance, options)
    return kit.report


def _check_objective(kit: _Battery, form: Method, instance: Instance,
                     solution: Solution) -> None:
    objective_of: Callable[[Instance, Solution], float | None] | None = getattr(
        form, "objective_of", None)
    if objective_of is None:
        kit.skip("objective", "the formulation has no objective_of")
        return
    derived = objective_of(instance, solution)
    if derived is None:
        kit.skip("objective", "objective_of declares no objective (None)")
        return
    claimed = solution.objective
    if claimed is None or not _close(claimed, derived):
        raise kit.fail("objective", f"the solution claims {claimed!r} but objective_of "
                       f"re-derives {derived!r} from its allocation / schedule")
    kit.ok("objective")


def _gap_tolerance(instance: Instance, solution: Solution) -> float:
    """The status rule's tolerance (:func:`~schedlab.solution.settle_status`): the default,
    or the recorded / the instance's MIP gap where smaller."""
    recorded = solution.metrics.get("gap_tolerance")
    if isinstance(recorded, int | float):
        return min(DEFAULT_GAP_TOLERANCE, float(recorded))
    if instance.params.mip_gap is not None:
        return min(DEFAULT_GAP_TOLERANCE, instance.params.mip_gap)
    return DEFAULT_GAP_TOLERANCE


def _check_status(kit: _Battery, instance: Instance, solution: Solution) -> None:
    if solution.solver == "none" and solution.status == Status.OPTIMAL:
        raise kit.fail("status", "a heuristic (solver 'none') claims optimal; it proves "
                       "nothing, so it is feasible")
    if solution.status == Status.OPTIMAL:
        tolerance = _gap_tolerance(instance, solution)
        if solution.bound is None or solution.gap is None:
            raise kit.fail("status", f"optimal without a bound and a gap (bound "
                           f"{solution.bound!r}, gap {solution.gap!r}): optimal needs a proof")
        if solution.gap > tolerance * (1 + 1e-9) + 1e-12:
            raise kit.fail("status", f"optimal with gap {solution.gap:.6g} above the tolerance "
                           f"{tolerance:g} (objective {solution.objective!r}, bound "
                           f"{solution.bound!r})")
    kit.ok("status")


def _check_bound(kit: _Battery, form: Method, solution: Solution) -> None:
    bound, objective = solution.bound, solution.objective
    if bound is None or objective is None:
        kit.skip("bound", "no bound reported")
        return
    sense = getattr(form, "objective_sense", None)
    slack = REL_TOL * max(1.0, abs(objective))
    if sense == "maximize":
        wrong = bound < objective - slack
    elif sense == "minimize":
        wrong = bound > objective + slack
    else:
        raise kit.fail("bound", "the solution reports a bound but the formulation declares no "
                       "objective_sense ('minimize' or 'maximize') to judge it by")
    if wrong:
        side = ">=" if sense == "maximize" else "<="
        raise kit.fail("bound", f"for a {sense[:3]}imization the bound must be {side} the "
                       f"objective, got bound {bound!r} and objective {objective!r}")
    kit.ok("bound")


def _check_gap(kit: _Battery, solution: Solution) -> None:
    gap, bound, objective = solution.gap, solution.bound, solution.objective
    if gap is None:
        kit.skip("gap", "no gap reported")
        return
    if bound is None or objective is None:
        raise kit.fail("gap", f"gap {gap!r} without both an objective and a bound")
    expected = abs(objective - bound) / max(abs(objective), 1e-10)
    if gap < 0 or abs(gap - expected) > REL_TOL * max(1.0, expected):
        raise kit.fail("gap", f"gap {gap!r} but |objective - bound| / |objective| = "
                       f"{expected!r} (objective {objective!r}, bound {bound!r})")
    kit.ok("gap")


def _check_json(kit: _Battery, solution: Solution) -> None:
    with tempfile.TemporaryDirectory(prefix="schedlab-kit-") as folder:
        path = Path(folder) / "solution.json"
        solution.save(path)
        loaded = load_solution(path)
    if loaded != solution:
        differ = sorted(k for k in Solution.model_fields
                        if getattr(loaded, k) != getattr(solution, k))
        raise kit.fail("json", f"the solution read back from JSON differs in {differ}")
    kit.ok("json")


def _rejects(form: Method, instance: Instance) -> bool:
    """True when ``form.validate`` refuses ``instance`` with an InputError."""
    try:
        form.validate(instance)
    except InputError:
        return True
    return False


def _check_bad_instance(kit: _Battery, form: Method, instance: Instance,
                        options: SolverOptions | None) -> None:
    """Remove each field set on the first job in turn; the first removal that ``validate``
    rejects must make ``solve`` raise an InputError naming the field."""
    lean = instance.model_dump(mode="json", by_alias=True, exclude_none=True,
                               exclude_defaults=True)
    if not lean.get("jobs"):
        kit.skip("bad_instance", "the example has no job")
        return
    tried: list[str] = []
    for key in [k for k in lean["jobs"][0] if k != "id"]:
        document = copy.deepcopy(lean)
        del document["jobs"][0][key]
        try:
            bad = instance_from_dict(document, source=f"{instance.name} without jobs[0].{key}")
        except InputError:
            continue  # the instance itself is invalid without it: not the formulation's call
        tried.append(key)
        if not _rejects(form, bad):
            continue
        try:
            form.solve(bad, options)
        except InputError as exc:
            where = f"{exc.field or ''} {exc}"
            if key not in where:
                raise kit.fail("bad_instance", f"without jobs[0].{key} it raised an InputError "
                               f"that does not name the field: {exc}") from None
            kit.ok("bad_instance")
            return
        raise kit.fail("bad_instance", f"validate() rejects the example without jobs[0].{key} "
                       "but solve() accepts it")
    raise kit.fail("bad_instance", f"removing any one of {tried} from the first job of the "
                   "example was accepted: no field the formulation needs was found to remove")


# ------------------------------------------------------------------------------ policies


def policy_workload(seed: int = 0, kind: str = "gavel") -> Instance:
    """The policy battery's workload for a policy's ``workload_kind``.

    ``gavel``: 12 Gavel-style jobs on the 6 GPUs of :data:`KIT_CLUSTER` (seed ``seed``), all
    arriving at 0 s so that they contend from the first round, with co-located throughputs for
    the 1-GPU pairs and two entities (the users of Gandiva-fair, the groups of hierarchical
    policies).  ``shockwave``: 12 Shockwave dynamic-adaptation jobs on the 6 V100s of
    :data:`SHOCKWAVE_KIT_CLUSTER`, all arriving at 0 s.  ``titan``: 12 ViT-B fine-tuning tasks
    on :data:`TITAN_KIT_GPUS` GPUs, all arriving at 0 s."""
    if kind == "shockwave":
        return generate_shockwave_instance(12, SHOCKWAVE_KIT_CLUSTER, seed=seed, mean_gap_s=None,
                                           name=f"kit-policies-shockwave-{seed}")
    if kind == "titan":
        return generate_titan_instance(12, gpus=TITAN_KIT_GPUS, model="vit-base", seed=seed,
                                       day_s=1.0, name=f"kit-policies-titan-{seed}")
    if kind != "gavel":
        raise InputError(f"unknown workload kind {kind!r} (gavel, shockwave or titan)",
                         field="workload_kind")
    return generate_gavel_instance(12, KIT_CLUSTER, seed=seed, colocation=True, entities=2,
                                   name=f"kit-policies-{seed}")


def random_cluster_state(seed: int, *, num_jobs: int = 8, kind: str = "gavel") -> ClusterState:
    """A random, self-consistent ClusterState (seeded) of the workload ``kind``.

    Jobs come from :func:`policy_workload`'s generator (throughputs, gangs, co-location,
    users; Shockwave's batch-size schedules); a random subset has finished, the others are
    active with random progress (steps or epochs done, attained GPU-seconds, seconds per type),
    and a random subset of the active jobs that fits the cluster ran in the previous round
    (``last_accelerator``, ``last_round_run``)."""
    rng = random.Random(seed)
    if kind == "shockwave":
        instance = generate_shockwave_instance(num_jobs, SHOCKWAVE_KIT_CLUSTER, seed=seed)
    elif kind == "titan":
        instance = generate_titan_instance(num_jobs, gpus=TITAN_KIT_GPUS, model="vit-base",
                                           seed=seed)
    else:
        instance = generate_gavel_instance(num_jobs, KIT_CLUSTER, seed=seed, jobs_per_hour=4.0,
                                           colocation=True, entities=2)
    counts = {k: p.count for k, p in instance.cluster.accelerators.items()}
    jobs = jobs_from_instance(instance)
    round_s = 360.0
    round_index = rng.randrange(1, 50)
    now = round_index * round_s + max(j.arrival for j in jobs)
    free = dict(counts)
    active: list[JobState] = []
    finished: list[JobState] = []
    for js in jobs:
        runnable = [k for k, v in js.throughput.items()
                    if v > 0 and js.scale_factor <= counts[k]]
        ran = rng.uniform(0.0, now - js.arrival)
        share = {k: rng.random() for k in runnable}
        total = sum(share.values()) or 1.0
        js.time_on = {k: ran * share.get(k, 0.0) / total for k in counts}
        js.executed_s = sum(js.time_on.values())
        js.attained_service_s = js.executed_s * js.scale_factor
        js.rounds_run = int(js.executed_s // round_s)
        js.start_time = js.arrival if js.executed_s > 0 else None
        if rng.random() < 0.25:
            js.steps_done = js.total_steps
            js.finish_time = js.arrival + ran
            finished.append(js)
            continue
        js.steps_done = rng.uniform(0.0, 0.95) * js.total_steps
        if js.dynamic:  # epochs done, and the throughput of the epoch it is in
            js.throughput = js.current_throughput()
        fits = [k for k in runnable if free[k] >= js.scale_factor]
        if fits and rng.random() < 0.5:
            k = rng.choice(fits)
            free[k] -= js.scale_factor
            js.last_accelerator = k
            js.last_round_run = round_index - 1
            js.last_gpu_ids = tuple(range(js.scale_factor))
        active.append(js)
    cluster = instance.cluster
    return ClusterState(now=now, round_index=round_index, round_s=round_s, cluster=cluster,
                        active=active, finished=finished, job_set_version=seed + 1, seed=seed)


def decision_problems(state: ClusterState, decision: list[Assignment]) -> list[str]:
    """Why ``decision`` is invalid for ``state`` (empty: valid), from the simulator's rules
    re-derived here: only active jobs, each job at most once, a known type where the job has a
    throughput (co-located pairs: both co-located throughputs), whole gangs no larger than the
    pool, and per type at most its GPUs in use (a pair holds max(s_a, s_b) GPUs once)."""
    problems: list[str] = []
    active = {js.id: js for js in state.active}
    gpus = state.gpus
    used = dict.fromkeys(gpus, 0)
    seen: set[str] = set()
    pairs: dict[frozenset[str], str] = {}
    for a in decision:
        js = active.get(a.job)
        if js is None:
            problems.append(f"job {a.job!r} is not active")
            continue
        if a.accelerator not in gpus:
            problems.append(f"job {a.job!r} on unknown accelerator {a.accelerator!r}")
            continue
        if a.partner is None:
            if a.job in seen:
                problems.append(f"job {a.job!r} is assigned more than once")
            seen.add(a.job)
            if js.throughput.get(a.accelerator, 0.0) <= 0:
                problems.append(f"job {a.job!r} has no throughput on {a.accelerator}")
            used[a.accelerator] += js.scale_factor
            continue
        key = frozenset((a.job, a.partner))
        if key in pairs:
            if pairs[key] != a.accelerator:
                problems.append(f"pair {sorted(key)} on two types")
            continue  # the mirrored assignment of a pair already counted
        mate = active.get(a.partner)
        if mate is None or a.partner == a.job:
            problems.append(f"job {a.job!r} has an invalid partner {a.partner!r}")
            continue
        for one, other in ((js, mate), (mate, js)):
            if one.id in seen:
                problems.append(f"job {one.id!r} is assigned more than once")
            seen.add(one.id)
            rate = (one.colocated_throughput or {}).get(other.id, {}).get(a.accelerator, 0.0)
            if rate <= 0:
                problems.append(f"job {one.id!r} has no co-located throughput with "
                                f"{other.id!r} on {a.accelerator}")
        pairs[key] = a.accelerator
        used[a.accelerator] += max(js.scale_factor, mate.scale_factor)
    for acc, n in used.items():
        if n > gpus[acc]:
            problems.append(f"{n} GPUs of {acc} in use but the cluster has {gpus[acc]}")
    return problems


def _copy_state(state: ClusterState) -> ClusterState:
    """A deep copy sharing the cluster object (policies may key their set-up on it)."""
    return copy.deepcopy(state, memo={id(state.cluster): state.cluster})


Decide = Callable[[ClusterState], list[Assignment]]


def _decide_checked(kit: _Battery, decide: Decide, state: ClusterState,
                    step: str) -> list[Assignment]:
    """``decide(state)``, checked: no exception, the state unchanged, a valid decision."""
    before = _copy_state(state)
    try:
        decision = list(decide(state))
    except AssertionError:
        raise
    except Exception as exc:  # any failure of the policy is the check's finding
        raise kit.fail(step, f"decide() raised {type(exc).__name__} at round "
                       f"{state.round_index}: {exc}") from exc
    if state != before:
        raise kit.fail("no_mutation", f"decide() changed the state it was given at round "
                       f"{state.round_index}")
    problems = decision_problems(state, decision)
    if problems:
        raise kit.fail("valid", f"invalid decision at round {state.round_index} "
                       f"({step}): {problems[0]}")
    return decision


def _simulated_decisions(kit: _Battery, policy: Policy, workload: Instance, step: str, *,
                         seed: int, max_rounds: int, round_s: float) -> list[list[Assignment]]:
    """Every decision of ``policy`` in one simulated run of ``workload``, each checked by
    :func:`_decide_checked`."""
    decisions: list[list[Assignment]] = []
    decide = policy.decide

    def recording(state: ClusterState) -> list[Assignment]:
        decision = _decide_checked(kit, decide, state, step)
        decisions.append(decision)
        return decision

    policy.decide = recording  # type: ignore[method-assign]
    try:
        simulate(workload, policy=policy, seed=seed, max_rounds=max_rounds, round_s=round_s)
    except SchedlabError as exc:
        raise kit.fail(step, f"the simulation failed: {exc}") from None
    finally:
        del policy.decide
    if not decisions:
        raise kit.fail(step, "the policy was never asked to decide")
    return decisions


def check_policy(name: str, *, seed: int = 0, max_rounds: int = 30, round_s: float = 1800.0,
                 random_states: int = 3, policy_options: dict[str, Any] | None = None
                 ) -> KitReport:
    """Run the policy battery (module docstring) on the registered policy ``name``.

    Each run: :func:`policy_workload` (``seed``) in :func:`schedlab.simulator.simulate` for at
    most ``max_rounds`` rounds of ``round_s`` s; then ``random_states`` random states.
    Raises :class:`AssertionError` naming the first failed check; returns the
    :class:`KitReport` otherwise.  A policy of goodput jobs (``pollux``, ``sia``) gets its
    own battery (:func:`_check_goodput_policy`; ``policy_options`` are passed to it, e.g. a
    smaller search budget).
    """
    kit = _Battery("check_policy", name)
    if is_goodput_policy(name):
        return _check_goodput_policy(kit, name, seed=seed, max_rounds=max_rounds,
                                     options=policy_options or {})
    kind = get_policy(name).workload_kind
    workload = policy_workload(seed, kind)
    run: dict[str, Any] = {"seed": seed, "max_rounds": max_rounds, "round_s": round_s}
    decisions = _simulated_decisions(kit, get_policy(name), workload, "valid", **run)
    kit.ok("valid")
    kit.ok("no_mutation")

    again = get_policy(name)
    if _simulated_decisions(kit, again, workload, "deterministic", **run) != decisions:
        raise kit.fail("deterministic", "a second fresh policy decided differently on the same "
                       "run (same workload and seed)")
    kit.ok("deterministic")
    again.reset()
    counters = (again.solver_time_s, again.solves, again.decisions, again.failed_solves)
    if any(counters):
        raise kit.fail("reset", f"reset() left the counters (solver s, solves, decisions, "
                       f"failed solves) at {counters}")
    # Reused after a run on another workload whose jobs have the same ids (the simulator
    # calls reset() before each run): anything remembered from it would steer the decisions.
    _simulated_decisions(kit, again, policy_workload(seed + 1, kind), "reset", **run)
    if _simulated_decisions(kit, again, workload, "reset", **run) != decisions:
        raise kit.fail("reset", "the policy reused after another run decided differently "
                       "from a fresh one: memory of the earlier run survived reset()")
    kit.ok("reset")

    for i in range(random_states):
        state = random_cluster_state(seed * 1000 + i, kind=kind)
        first = _decide_checked(kit, get_policy(name).decide, state, "random_states")
        if _decide_checked(kit, get_policy(name).decide, state, "random_states") != first:
            raise kit.fail("random_states", f"two fresh policies decided random state {i} "
                           "differently")
    kit.ok("random_states")

    failing = get_policy(name)
    with failing_highs() as runs:
        _simulated_decisions(kit, failing, workload, "failed_solves", **run)
    if runs[0] == 0:
        kit.skip("failed_solves", "the policy never called HiGHS")
    elif failing.failed_solves == 0:
        raise kit.fail("failed_solves", f"every one of its {runs[0]} HiGHS runs failed but "
                       "failed_solves stayed 0")
    else:
        kit.ok("failed_solves")
    return kit.report


def _goodput_decisions(kit: _Battery, name: str, world: str, seed: int, max_rounds: int,
                       step: str, options: dict[str, Any]) -> list[Any]:
    """The allocations of every round of ``name`` on four jobs of Pollux's workload 6 (two
    CIFAR-10, two NCF) on 16 x 4 GPUs in ``world``; a refused decision fails ``step``."""
    from schedlab.policies.goodput_registry import goodput_policy
    from schedlab.simulator.goodput_run import simulate_goodput
    from schedlab.workloads.goodput import pollux_workload

    specs = pollux_workload(6, jobs=8)
    specs = [specs[i] for i in (0, 1, 6, 7)]
    options = {"seed": seed, **options} if name == "pollux" else options
    try:
        run = simulate_goodput(specs, {"aws": (16, 4)}, goodput_policy(name, **options),
                               world=world, max_rounds=max_rounds, keep_log=True)
    except InvalidDecisionError as exc:
        raise kit.fail(step, str(exc)) from None
    return [[(job["name"], job["allocation"]) for job in row["jobs"]] for row in run.log]


def _check_goodput_policy(kit: _Battery, name: str, *, seed: int, max_rounds: int,
                          options: dict[str, Any]) -> KitReport:
    """The battery of a policy of goodput jobs (``pollux``, ``sia``): valid decisions in
    both worlds (the simulator checks every round), the same decisions from a fresh policy
    with the same seed, and a solver failure that is reported, not hidden."""
    first = _goodput_decisions(kit, name, "pollux", seed, max_rounds, "valid", options)
    _goodput_decisions(kit, name, "sia", seed, max_rounds, "valid", options)
    if not any(alloc for row in first for _, alloc in row):
        raise kit.fail("valid", "the policy never gave a job a GPU")
    kit.ok("valid")
    kit.skip("no_mutation", "a goodput state is immutable (frozen dataclasses)")
    if _goodput_decisions(kit, name, "pollux", seed, max_rounds, "deterministic", options) != first:
        raise kit.fail("deterministic", "a second fresh policy decided differently on the same "
                       "run (same workload and seed)")
    kit.ok("deterministic")
    with failing_highs() as runs:
        try:
            _goodput_decisions(kit, name, "pollux", seed, 3, "failed_solves", options)
        except SolverError:
            kit.ok("failed_solves")
        else:
            if runs[0]:
                raise kit.fail("failed_solves", f"every one of its {runs[0]} HiGHS runs "
                               "failed and the policy went on without saying so")
            kit.skip("failed_solves", "the policy never called HiGHS")
    return kit.report
