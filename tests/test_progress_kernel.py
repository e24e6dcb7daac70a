"""The array engine's compiled progress step (``schedlab.simulator.progress_kernel``).

* ``advance`` against the numpy step it replaces (``array_run._advance_by_type``): whole runs
  with the kernel and without it give the same records, bit for bit -- the two do the same
  IEEE operations on the same operands, so any difference is a bug, not rounding;
* ``advance_quiet`` (the quiet rounds of a fixed-point plan) against ``advance`` called round
  by round with no overhead, on random columns: the same state after the same rounds, and it
  stops before the first round in which a gang would finish, before an arrival and at the
  round limit;
* FIFO's fixed point: the rounds the engine runs without asking are still counted as
  decisions (one per round, as the reference loop asks every round).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from schedlab.policies.registry import get_policy
from schedlab.simulator import array_placement, array_run, simulate
from schedlab.simulator.engine import FINISH_TOLERANCE
from schedlab.workloads.gavel import generate_gavel_instance

kernel = pytest.importorskip("schedlab.simulator.progress_kernel")

L = 360.0


def _columns(rng: np.random.Generator, slots: int, types: int) -> dict[str, np.ndarray]:
    total = rng.uniform(1e3, 1e6, slots)
    return {
        "thr": rng.uniform(0.1, 3.0, (slots, types)),
        "total": total,
        "done": total * rng.uniform(0.0, 0.9, slots),
        "time_on": rng.uniform(0.0, 1e4, (slots, types)),
        "executed": rng.uniform(0.0, 1e4, slots),
        "attained": rng.uniform(0.0, 1e5, slots),
        "rounds_run": rng.integers(0, 50, slots),
        "last_round": np.full(slots, 7, dtype=np.int64),
        "last_type": rng.integers(0, types, slots),
        "scale": rng.choice([1, 2, 4, 8], slots).astype(np.int64),
        "started": np.ones(slots, dtype=bool),
    }


def _plan(rng: np.random.Generator, slots: int, types: int) -> tuple[np.ndarray, np.ndarray]:
    index = rng.permutation(slots)[: slots // 2].astype(np.int64)
    kind = np.sort(rng.integers(0, types, len(index))).astype(np.int64)  # grouped by type
    return index, kind


def _step(cols: dict[str, np.ndarray], index: np.ndarray, kind: np.ndarray, now: float,
          round_index: int, busy: np.ndarray) -> bool:
    """One round by ``advance`` (no overhead); True when some gang finished in it."""
    n = len(index)
    held, fin, fresh = np.zeros(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    part = np.zeros(len(busy))
    finished = kernel.advance(
        index, kind, np.zeros(n), L, round_index, FINISH_TOLERANCE, cols["thr"],
        cols["total"], cols["done"], cols["time_on"], cols["executed"], cols["attained"],
        cols["rounds_run"], cols["last_round"], cols["last_type"], cols["scale"],
        cols["started"], held, fin, fresh, part)
    for k in sorted(set(kind.tolist())):
        busy[k] += part[k]
    return bool(finished)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_quiet_rounds_equal_round_by_round_steps(seed: int) -> None:
    rng = np.random.default_rng(seed)
    slots, types = 60, 3
    cols = _columns(rng, slots, types)
    index, kind = _plan(rng, slots, types)
    # round by round until a gang finishes: the state before that round is the target
    stepped = {name: value.copy() for name, value in cols.items()}
    busy_step = np.array([5.0, 7.0, 11.0])
    rounds = 0
    while True:
        before = {name: value.copy() for name, value in stepped.items()}
        busy_before = busy_step.copy()
        if _step(stepped, index, kind, 1000.0 + rounds * L, 10 + rounds, busy_step):
            stepped, busy_step = before, busy_before
            break
        rounds += 1
    assert rounds > 0
    quiet = {name: value.copy() for name, value in cols.items()}
    busy_quiet = np.array([5.0, 7.0, 11.0])
    done, now = kernel.advance_quiet(
        index, kind, L, 1000.0, 10, 2**62, np.inf, FINISH_TOLERANCE, quiet["thr"],
        quiet["total"], quiet["done"], quiet["time_on"], quiet["executed"], quiet["attained"],
        quiet["rounds_run"], quiet["last_round"], quiet["scale"], busy_quiet, np.zeros(types))
    assert done == rounds
    expected_now = 1000.0
    for _ in range(rounds):
        expected_now += L
    assert now == expected_now
    for name in ("done", "time_on", "executed", "attained", "rounds_run", "last_round"):
        np.testing.assert_array_equal(quiet[name], stepped[name], err_msg=name)
    np.testing.assert_array_equal(busy_quiet, busy_step)


def test_quiet_rounds_stop_at_an_arrival_and_at_the_round_limit() -> None:
    rng = np.random.default_rng(5)
    cols = _columns(rng, 40, 2)
    cols["done"][:] = 0.0  # far from finishing
    cols["total"][:] = 1e12
    index, kind = _plan(rng, 40, 2)
    args = (FINISH_TOLERANCE, cols["thr"], cols["total"], cols["done"], cols["time_on"],
            cols["executed"], cols["attained"], cols["rounds_run"], cols["last_round"],
            cols["scale"], np.zeros(2), np.zeros(2))
    # rounds start at 0, 360, 720, 1080: an arrival at 1000 is admitted by the round at 1080
    done, now = kernel.advance_quiet(index, kind, L, 0.0, 0, 2**62, 1000.0, *args)
    assert (done, now) == (3, 1080.0)
    done, now = kernel.advance_quiet(index, kind, L, 0.0, 4, 6, np.inf, *args)
    assert (done, now) == (2, 720.0)
    done, _ = kernel.advance_quiet(index, kind, L, 0.0, 0, 2**62, 0.0, *args)
    assert done == 0  # a job already due: not one round


def _records(result: object) -> list[dict[str, object]]:
    return [dataclasses.asdict(job) for job in result.jobs]  # type: ignore[attr-defined]


@pytest.mark.parametrize("policy", ["fifo", "gavel.max_min_fairness", "srtf"])
def test_runs_with_and_without_the_kernel_are_identical(
        policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # 40 GPUs a type, with the run placement forced: the array engine's whole path
    monkeypatch.setattr(array_placement, "RUN_PLACEMENT_MIN_GPUS", 0)
    instance = generate_gavel_instance(400, {"v100": 40, "p100": 40, "k80": 40}, 3,
                                       jobs_per_hour=24.0)
    kw = {"round_s": instance.params.round_s, "keep_rounds": False, "engine": "arrays"}
    compiled = simulate(instance, policy=get_policy(policy), **kw)
    monkeypatch.setattr(array_run, "_KERNEL", False)  # the numpy steps
    plain = simulate(instance, policy=get_policy(policy), **kw)
    assert _records(compiled) == _records(plain)
    assert compiled.busy_gpu_s == plain.busy_gpu_s
    assert (compiled.num_rounds, compiled.num_job_rounds, compiled.decisions) == (
        plain.num_rounds, plain.num_job_rounds, plain.decisions)


def test_fifo_rounds_run_without_asking_still_count_as_decisions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    instance = generate_gavel_instance(300, {"v100": 30, "p100": 30, "k80": 30}, 1,
                                       jobs_per_hour=20.0)
    calls = {"quiet": 0}
    quiet = kernel.advance_quiet

    def counted(*args: object) -> tuple[int, float]:
        out = quiet(*args)
        calls["quiet"] += out[0]
        return out  # type: ignore[no-any-return]

    monkeypatch.setattr(kernel, "advance_quiet", counted)
    kw = {"round_s": instance.params.round_s, "keep_rounds": False}
    fast = simulate(instance, policy=get_policy("fifo"), engine="arrays", **kw)
    slow = simulate(instance, policy=get_policy("fifo"), engine="reference", **kw)
    assert calls["quiet"] > fast.num_rounds // 4  # most rounds of a long FIFO run are quiet
    assert fast.decisions == slow.decisions == slow.num_rounds
    assert [(j.job, j.finish, j.rounds_run) for j in fast.jobs] == [
        (j.job, j.finish, j.rounds_run) for j in slow.jobs]


@pytest.mark.parametrize("seed", range(6))
def test_compiled_plan_check_equals_the_numpy_check(seed: int) -> None:
    """``plan_kernel.group_plan`` against ``array_run._plan_groups`` on random plans, valid
    ones and ones broken each way (a slot named twice, finished, not admitted, a type where
    the job cannot run, a type out of range, a pool over-committed)."""
    from schedlab.policies.state import Assignment, SlotPlan
    from schedlab.simulator import plan_kernel

    rng = np.random.default_rng(seed)
    slots_total, types = 50, 3
    admitted = 45
    gone = rng.random(slots_total) < 0.2
    fit = rng.random((slots_total, types)) < 0.8
    scale = rng.choice([1, 2, 4], slots_total).astype(np.int64)
    capacity = np.array([20, 12, 30], dtype=np.int64)
    outcomes = set()
    for trial in range(200):
        ok = np.flatnonzero(~gone[:admitted])
        slots = rng.permutation(ok)[: rng.integers(0, 12)].astype(np.int64)
        kinds = np.array([rng.choice(np.flatnonzero(fit[s])) if fit[s].any() else 0
                          for s in slots], dtype=np.int64)
        breakage = trial % 7
        if len(slots) and breakage == 1:
            slots[-1] = slots[0]
        elif breakage == 2:
            slots = np.append(slots, np.flatnonzero(gone)[0])
            kinds = np.append(kinds, 0)
        elif breakage == 3:
            slots = np.append(slots, admitted + 1)
            kinds = np.append(kinds, 0)
        elif breakage == 4 and len(slots):
            kinds[0] = rng.choice(np.flatnonzero(~fit[slots[0]])) if not fit[slots[0]].all() \
                else types
        elif breakage == 5 and len(slots):
            kinds[0] = -1
        elif breakage == 6:
            capacity = np.array([2, 2, 2], dtype=np.int64)
        plan = SlotPlan([Assignment(str(s), "x") for s in slots], slots, kinds)
        numpy_groups = array_run._plan_groups(plan, admitted, gone, fit, scale, capacity,
                                              np.zeros(slots_total, dtype=np.int64))
        compiled = array_run._plan_groups(plan, admitted, gone, fit, scale, capacity,
                                          np.zeros(slots_total, dtype=np.int64), plan_kernel)
        capacity = np.array([20, 12, 30], dtype=np.int64)
        if numpy_groups is None:
            assert compiled is None
        else:
            assert compiled is not None
            assert [g.tolist() for g in compiled] == [np.asarray(g).tolist()
                                                      for g in numpy_groups]
        outcomes.add(numpy_groups is None)
    assert outcomes == {True, False}  # both valid and refused plans were drawn
