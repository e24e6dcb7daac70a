"""The exact fast paths of max-min fairness reach the reference model's optimum.

Random small instances repeat job templates (so aggregation matters), list co-location pairs
(complete, partial, asymmetric), and are solved by the reference Pyomo model
(``method="pyomo"``) and by every fast path; optima agree to 1e-6 relative and the checker
finds nothing on the fast solutions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedlab.check import check
from schedlab.formulations.gavel import fast
from schedlab.formulations.gavel.data import gavel_data
from schedlab.formulations.gavel.models import MaxMinFairness
from schedlab.instance import Instance, instance_from_dict
from schedlab.solution import Solution, Status
from schedlab.solvers import SolverOptions

TYPES = ("v100", "p100", "k80")
REL_TOL = 1e-6
SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


# ----------------------------------------------------------------------- instances


@st.composite
def instances(draw: Any, *, pairs: bool = False) -> Instance:
    """2-9 jobs drawn from 1-3 templates on 1-3 types; with ``pairs``, co-location pairs whose
    throughput depends on the templates only, some pairs left out, some asymmetric."""
    num_types = draw(st.integers(1, 3))
    types = TYPES[:num_types]
    counts = {k: draw(st.integers(1, 4)) for k in types}
    num_templates = draw(st.integers(1, 3))
    templates = []
    for _ in range(num_templates):
        speeds = {
            k: draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5]))
            for k in types
        }
        if not any(speeds.values()):
            speeds[types[0]] = 1.0
        scale = 1 if pairs or max(counts.values()) < 2 else draw(st.sampled_from([1, 1, 2]))
        weight = draw(st.sampled_from([1.0, 1.0, 2.0]))
        templates.append((speeds, scale, weight))
    num_jobs = draw(st.integers(2, 9))
    chosen = draw(st.lists(st.integers(0, num_templates - 1), min_size=num_jobs,
                           max_size=num_jobs))
    jobs: list[dict[str, Any]] = []
    for i, t in enumerate(chosen):
        speeds, scale, weight = templates[t]
        jobs.append({
            "id": f"j{i}",
            "scale_factor": scale,
            "weight": weight,
            "throughput": {k: v for k, v in speeds.items() if v > 0},
        })
    if pairs:
        factor = {
            (a, b, k): draw(st.sampled_from([0.3, 0.6, 0.9]))
            for a in range(num_templates) for b in range(num_templates) for k in types
        }
        drop_some = draw(st.booleans())
        asymmetric = draw(st.booleans())
        for a in range(num_jobs):
            for b in range(a + 1, num_jobs):
                if drop_some and draw(st.integers(0, 3)) == 0:
                    continue
                ta, tb = chosen[a], chosen[b]
                common = [k for k in types
                          if k in jobs[a]["throughput"] and k in jobs[b]["throughput"]]
                if not common:
                    continue
                skew = 0.5 if asymmetric and ta == tb else 1.0
                jobs[a].setdefault("colocated_throughput", {})[jobs[b]["id"]] = {
                    k: factor[ta, tb, k] * jobs[a]["throughput"][k] for k in common
                }
                jobs[b].setdefault("colocated_throughput", {})[jobs[a]["id"]] = {
                    k: skew * factor[tb, ta, k] * jobs[b]["throughput"][k] for k in common
                }
    document = {
        "schema": "schedlab/instance@1",
        "name": "random-fast",
        "cluster": {"accelerators": {k: {"count": n} for k, n in counts.items()}},
        "jobs": jobs,
        "params": {"num_rounds": 0},
    }
    return instance_from_dict(document, source="hypothesis")


def reference(instance: Instance, **kwargs: Any) -> Solution:
    """The plain Pyomo model's solution."""
    return MaxMinFairness(method="pyomo", num_rounds=0, **kwargs).solve(instance)


def fast_solution(instance: Instance, path: str | None = None, aggregate: bool = True,
                  **kwargs: Any) -> Solution:
    """The fast path's solution (``path`` forced when given)."""
    formulation = MaxMinFairness(method="fast", num_rounds=0, **kwargs)
    formulation.name = "gavel.max_min_fairness"
    return fast.solve_max_min_fast(formulation, instance, SolverOptions(), path=path,
                                   aggregate=aggregate)


def assert_same_optimum(instance: Instance, ref: Solution, got: Solution) -> None:
    """Both optimal, objectives within 1e-6 relative, bound >= objective, checker clean
    (or both infeasible, when a job fits nowhere)."""
    if ref.status == Status.INFEASIBLE:
        assert got.status == Status.INFEASIBLE
        assert got.diagnostics == ref.diagnostics
        return
    assert ref.status == Status.OPTIMAL
    assert got.status == Status.OPTIMAL, got.diagnostics
    assert ref.objective is not None and got.objective is not None
    assert got.objective == pytest.approx(ref.objective, rel=REL_TOL, abs=1e-9)
    assert got.bound is not None and got.bound >= got.objective - 1e-12
    assert got.gap is not None and got.gap <= 1e-6
    assert check(instance, got) == []
    assert set(got.allocation) == set(ref.allocation)


# ----------------------------------------------------------- properties, every path


@SETTINGS
@given(instances(), st.sampled_from([None, "aggregated_lp", "capacity_master"]),
       st.booleans())
def test_solo_paths_match_reference(instance: Instance, path: str | None,
                                    aggregate: bool) -> None:
    ref = reference(instance)
    got = fast_solution(instance, path, aggregate)
    assert_same_optimum(instance, ref, got)
    if got.status == Status.OPTIMAL:
        assert got.metrics["fast_path"] == (path or "aggregated_lp")


@SETTINGS
@given(instances(), st.sampled_from(["aggregated_lp", "capacity_master"]))
def test_agnostic_variant_matches_reference(instance: Instance, path: str) -> None:
    ref = reference(instance, heterogeneity_aware=False)
    got = fast_solution(instance, path, heterogeneity_aware=False)
    assert_same_optimum(instance, ref, got)
    if got.status == Status.OPTIMAL:
        assert got.metrics["heterogeneity_aware"] is False


@SETTINGS
@given(instances(pairs=True), st.sampled_from(["aggregated_lp", "pair_column_generation"]),
       st.booleans())
def test_space_sharing_paths_match_reference(instance: Instance, path: str,
                                             aggregate: bool) -> None:
    listed = bool(gavel_data(instance, space_sharing=True).pair_allowed.any())
    ref = reference(instance, space_sharing=True)
    got = fast_solution(instance, path if listed else None, aggregate, space_sharing=True)
    assert_same_optimum(instance, ref, got)
    if listed and got.status == Status.OPTIMAL:
        assert got.metrics["fast_path"] == path


@SETTINGS
@given(instances(pairs=True))
def test_space_sharing_agnostic_matches_reference(instance: Instance) -> None:
    ref = reference(instance, space_sharing=True, heterogeneity_aware=False)
    got = fast_solution(instance, space_sharing=True, heterogeneity_aware=False)
    assert_same_optimum(instance, ref, got)


# ------------------------------------------------------------------ hand-solved cases


def _doc(jobs: list[dict[str, Any]], counts: dict[str, int]) -> Instance:
    return instance_from_dict({
        "schema": "schedlab/instance@1", "name": "hand",
        "cluster": {"accelerators": {k: {"count": n} for k, n in counts.items()}},
        "jobs": jobs, "params": {"num_rounds": 0},
    }, source="hand")


def test_two_jobs_one_gpu_share_it() -> None:
    """Two identical jobs, one GPU: each runs half the time, so t = 1/2."""
    inst = _doc([{"id": "a", "throughput": {"v100": 3.0}},
                 {"id": "b", "throughput": {"v100": 3.0}}], {"v100": 1})
    got = fast_solution(inst)
    assert got.objective == pytest.approx(0.5, rel=1e-9)
    assert got.metrics["classes"] == 1
    assert got.allocation == {"a": {"v100": pytest.approx(0.5)}, "b": {"v100": pytest.approx(0.5)}}


def test_packing_beats_time_sharing() -> None:
    """Co-located at 0.8 of their solo speed, both run all the time: t = 0.8."""
    coloc = {"v100": 0.8}
    inst = _doc([
        {"id": "a", "throughput": {"v100": 1.0}, "colocated_throughput": {"b": coloc}},
        {"id": "b", "throughput": {"v100": 1.0}, "colocated_throughput": {"a": coloc}},
    ], {"v100": 1})
    got = fast_solution(inst, space_sharing=True)
    assert got.objective == pytest.approx(0.8, rel=1e-9)
    assert len(got.colocated_allocation) == 1
    assert got.colocated_allocation[0].fraction == pytest.approx(1.0)


def test_same_class_pairs_use_a_cycle() -> None:
    """Six identical jobs, all pairs listed, three GPUs: one class, one same-class pair;
    disaggregated along a 6-cycle, every job gets the same total pair share."""
    ids = [f"j{i}" for i in range(6)]
    jobs = [{"id": j, "throughput": {"v100": 1.0},
             "colocated_throughput": {o: {"v100": 0.7} for o in ids if o != j}} for j in ids]
    inst = _doc(jobs, {"v100": 3})
    got = fast_solution(inst, space_sharing=True)
    ref = reference(inst, space_sharing=True)
    assert_same_optimum(inst, ref, got)
    assert got.metrics["classes"] == 1 and got.metrics["pair_classes"] == 1
    assert got.objective == pytest.approx(0.7, rel=1e-9)
    assert len(got.colocated_allocation) == 6  # the cycle, not all 15 pairs
    share = dict.fromkeys(ids, 0.0)
    for p in got.colocated_allocation:
        for j in p.jobs:
            share[j] += p.fraction
    assert all(v == pytest.approx(1.0) for v in share.values())


def test_partial_listing_splits_the_class() -> None:
    """Identical solo rows but only some pairs listed: the jobs must not be aggregated."""
    coloc = {"v100": 0.9}
    inst = _doc([
        {"id": "a", "throughput": {"v100": 1.0}, "colocated_throughput": {"b": coloc}},
        {"id": "b", "throughput": {"v100": 1.0}, "colocated_throughput": {"a": coloc}},
        {"id": "c", "throughput": {"v100": 1.0}},
    ], {"v100": 2})
    got = fast_solution(inst, space_sharing=True)
    assert got.metrics["classes"] == 3
    assert_same_optimum(inst, reference(inst, space_sharing=True), got)


def test_unrunnable_job_is_infeasible() -> None:
    inst = _doc([{"id": "a", "scale_factor": 4, "throughput": {"v100": 1.0}},
                 {"id": "b", "throughput": {"v100": 1.0}}], {"v100": 2})
    got = fast_solution(inst)
    assert got.status == Status.INFEASIBLE
    assert "job a" in got.diagnostics[0]


def test_method_fast_through_the_formulation() -> None:
    """``MaxMinFairness(method="fast").solve`` takes the fast path and says which."""
    inst = _doc([{"id": f"j{i}", "throughput": {"v100": 1.0 + i % 2, "k80": 0.5}}
                 for i in range(8)], {"v100": 2, "k80": 2})
    got = MaxMinFairness(method="fast", num_rounds=3).solve(inst)
    assert got.metrics["fast_path"] == "aggregated_lp"
    assert got.metrics["classes"] == 2
    assert len(got.rounds) == 3
    assert check(inst, got) == []
    assert got.objective == pytest.approx(reference(inst).objective, rel=REL_TOL)


# ------------------------------------------------------------------------ building blocks


@given(st.integers(1, 12), st.integers(1, 12))
def test_northwest_corner_transports_uniformly(rows: int, cols: int) -> None:
    src, dst, units = fast.northwest_corner(rows, cols)
    out = np.bincount(src, weights=units, minlength=rows)
    into = np.bincount(dst, weights=units, minlength=cols)
    assert np.all(out == cols) and np.all(into == rows)
    assert len(units) <= rows + cols - 1
    assert units.max() <= min(rows, cols)
    assert len(set(zip(src.tolist(), dst.tolist(), strict=True))) == len(src)


def test_cost_hull_and_level() -> None:
    """Two patterns: fair 1 at cost 1 (slope 1) and fair 3 at cost 5 (slope 2 beyond)."""
    hull = fast.cost_hull(np.array([[1.0, 3.0]]), np.array([[1.0, 5.0]]),
                          np.array([[True, True]]))
    assert hull.segments.tolist() == [2]
    assert hull.ends[0].tolist() == [1.0, 3.0]
    assert hull.slopes[0].tolist() == [1.0, 2.0]
    # total slope 0.5 * 1 < 1 up to t = 1, then 0.5 * 2 = 1 >= 1: the best level is t = 1
    assert fast.best_level(hull, np.array([0.5])) == 1.0
    z = fast.shares_at_level(hull, 2.0, 2)
    assert z.tolist() == [[0.5, 0.5]]


def test_classes_group_identical_jobs() -> None:
    inst = _doc([{"id": f"j{i}", "throughput": {"v100": 2.0 if i < 3 else 1.0, "k80": 1.0}}
                 for i in range(5)], {"v100": 1, "k80": 1})
    classes = fast.classify_jobs(gavel_data(inst))
    assert classes.num_classes == 2
    assert classes.count.tolist() == [3.0, 2.0]
    assert classes.members(1).tolist() == [3, 4]


def test_unknown_path_is_an_error() -> None:
    inst = _doc([{"id": "a", "throughput": {"v100": 1.0}}], {"v100": 1})
    with pytest.raises(ValueError, match="unknown fast path"):
        fast_solution(inst, path="nope")


@pytest.mark.parametrize("num_types", [1, 3, 5, 64])
def test_allocation_dicts_equal_a_per_share_loop(num_types: int) -> None:
    """The grouped construction gives the dicts of the plain loop over every share: the same
    keys in the same order, the same Python floats, shares at or below eps dropped, values
    clipped into [0, 1]."""
    from types import SimpleNamespace

    from schedlab.formulations.gavel.data import allocation_dicts

    rng = np.random.default_rng(num_types)
    x = rng.random((300, num_types))
    x[rng.random(x.shape) < 0.4] = 0.0
    x[3] = 1.2  # above 1: clipped
    x[4] = -1e-12  # solver dust below 0: dropped
    x[5] = 1e-9  # at eps: dropped
    data = SimpleNamespace(job_ids=[f"j{i}" for i in range(300)],
                           types=[f"t{k}" for k in range(num_types)])
    got, pairs = allocation_dicts(data, x)  # type: ignore[arg-type]
    expected: dict[str, dict[str, float]] = {}
    for j, job in enumerate(data.job_ids):
        expected[job] = {}
        for k, acc in enumerate(data.types):
            share = min(max(float(x[j, k]), 0.0), 1.0)
            if share > 1e-9:
                expected[job][acc] = share
    assert got == expected and pairs == []
    assert list(got) == list(expected)
    assert all(list(got[job]) == list(expected[job]) for job in got)


def test_gavel_data_reads_every_field_as_the_jobs_say() -> None:
    """gavel_data's arrays, job by job from the Instance's own fields: throughput NaN-free with
    0 where a type is unlisted or the gang does not fit, R_j = total - done and 0 when
    total_steps is unknown (validation keeps steps_done <= total_steps)."""
    from schedlab.instance import instance_from_dict

    rng = np.random.default_rng(11)
    jobs: list[dict[str, Any]] = []
    for i in range(40):
        job: dict[str, Any] = {
            "id": f"j{i}", "scale_factor": int(rng.choice([1, 2, 4])),
            "weight": float(rng.uniform(0.5, 2)),
            "throughput": {k: float(rng.uniform(0.1, 3)) for k in ("v100", "p100", "k80")
                           if rng.random() < 0.7},
            "time_in_system_s": float(rng.uniform(0, 100)),
            "isolated_time_s": float(rng.uniform(0, 100))}
        if rng.random() < 0.8:
            job["total_steps"] = float(rng.uniform(10, 1000))
            job["steps_done"] = float(rng.uniform(0, 1)) * job["total_steps"]
        jobs.append(job)
    instance = instance_from_dict({
        "schema": "schedlab/instance@1", "name": "fields",
        "cluster": {"accelerators": {"v100": {"count": 4}, "p100": {"count": 2},
                                     "k80": {"count": 1}}},
        "jobs": jobs})
    data = gavel_data(instance)
    assert data.job_ids == [job.id for job in instance.jobs]
    for j, job in enumerate(instance.jobs):
        for k, acc in enumerate(data.types):
            fits = job.scale_factor <= instance.cluster.accelerators[acc].count
            expected = job.throughput.get(acc, 0.0) if fits else 0.0
            assert data.throughput[j, k] == expected
            assert data.allowed[j, k] == (expected > 0)
        assert data.scale_factor[j] == job.scale_factor and data.weight[j] == job.weight
        remaining = 0.0 if job.total_steps is None else job.total_steps - job.steps_done
        assert data.remaining_steps[j] == remaining
        assert data.time_in_system[j] == job.time_in_system_s
        assert data.isolated_time[j] == job.isolated_time_s


@pytest.mark.parametrize("multiplier", [None, 0])
def test_group_rows_are_the_distinct_rows(monkeypatch: pytest.MonkeyPatch,
                                          multiplier: int | None) -> None:
    """Class ids = the distinct rows numbered by first appearance, with their counts, as a
    dict over row tuples gives them; multiplier 0 makes every digest collide, so the
    fallback (sorting the rows themselves) is checked too."""
    if multiplier is not None:
        monkeypatch.setattr(fast, "_ROW_DIGEST_MULTIPLIER", np.uint64(multiplier))
    rng = np.random.default_rng(5)
    keys = rng.integers(-3, 3, size=(400, 4))
    keys[200:] = keys[rng.integers(0, 200, 200)]  # repeated rows
    ids, counts = fast._group_rows(keys)
    first_seen: dict[tuple[int, ...], int] = {}
    expected = [first_seen.setdefault(tuple(row), len(first_seen)) for row in keys.tolist()]
    assert ids.tolist() == expected
    assert counts.tolist() == [expected.count(c) for c in range(len(first_seen))]
