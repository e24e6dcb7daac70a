"""Gavel workloads: throughput table, generator, trace reader, co-location model, examples."""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import linprog

from schedlab.errors import InputError
from schedlab.instance import Instance, instance_from_dict, load_instance
from schedlab.workloads import (
    GAVEL_SCALE_FACTOR_MIX,
    add_colocation,
    colocation_factors,
    compact_instance_dict,
    example_instances,
    gavel_prices,
    generate_gavel_instance,
    gpu_intensity,
    instance_from_gavel_trace,
    load_gavel_throughputs,
    save_instance_compact,
    small_six_jobs_instance,
    write_example_instances,
)

INSTANCES = Path(__file__).resolve().parent.parent / "instances" / "gavel"
SMALL_CLUSTER = {"v100": 4, "p100": 4, "k80": 4}


def _durations_s(instance: Instance) -> np.ndarray:
    """Sampled V100 durations back from total_steps / T[v100] (s)."""
    table = load_gavel_throughputs()
    return np.array([
        j.total_steps / table.throughput(j.job_type, j.scale_factor)["v100"]  # type: ignore[operator, arg-type]
        for j in instance.jobs
    ])


def _assert_colocation_valid(instance: Instance) -> int:
    """Symmetric, same accelerators both ways, <= solo, only single-GPU jobs; returns #pairs."""
    jobs = {j.id: j for j in instance.jobs}
    pairs = 0
    for job in instance.jobs:
        for other, by_acc in (job.colocated_throughput or {}).items():
            assert job.scale_factor == 1 and jobs[other].scale_factor == 1
            back = jobs[other].colocated_throughput
            assert back is not None and set(back[job.id]) == set(by_acc)
            for acc, value in by_acc.items():
                assert 0.0 <= value <= job.throughput[acc]
                if job.throughput[acc] > 0:
                    assert value < job.throughput[acc]
            pairs += job.id < other
    return pairs


# ------------------------------------------------------------------- throughput table


def test_throughput_table_contents() -> None:
    table = load_gavel_throughputs()
    assert table.accelerators == ("v100", "p100", "k80")
    assert len(table.job_types) == 26
    assert len(table.combinations()) == 82
    assert table.missing == (("LM (batch size 20)", 8),)
    assert not table.has("LM (batch size 20)", 8)
    for single in ("A3C", "CycleGAN", "Recommendation (batch size 512)"):
        assert table.scale_factors(single) == [1]
    assert table.scale_factors("ResNet-50 (batch size 64)") == [1, 2, 4, 8]
    # Literal values of Gavel's table, read by hand from the trace.
    assert table.throughput("ResNet-18 (batch size 64)", 8) == {
        "v100": 255.82913926317391, "p100": 120.03699011475503, "k80": 42.64410449114462}
    assert table.throughput("ResNet-50 (batch size 128)", 2)["k80"] == 0.0
    for job_type, sf in table.combinations():
        values = table.throughput(job_type, sf)
        assert set(values) == {"v100", "p100", "k80"}
        assert all(v >= 0 and math.isfinite(v) for v in values.values())
        assert values["v100"] > 0
    with pytest.raises(KeyError, match="LM"):
        table.throughput("LM (batch size 20)", 8)
    assert gavel_prices() == {"v100": 2.48, "p100": 1.46, "k80": 0.45}


# ------------------------------------------------------------------- generator


def test_generator_is_deterministic_and_seed_dependent() -> None:
    a = generate_gavel_instance(50, SMALL_CLUSTER, seed=7, jobs_per_hour=4.0,
                                priority_mix=True, colocation=True, colocation_partners=3)
    b = generate_gavel_instance(50, SMALL_CLUSTER, seed=7, jobs_per_hour=4.0,
                                priority_mix=True, colocation=True, colocation_partners=3)
    c = generate_gavel_instance(50, SMALL_CLUSTER, seed=8, jobs_per_hour=4.0,
                                priority_mix=True, colocation=True, colocation_partners=3)
    assert a.to_dict() == b.to_dict()
    assert a.content_hash() == b.content_hash()
    assert a.content_hash() != c.content_hash()
    assert [j.job_type for j in a.jobs] != [j.job_type for j in c.jobs]


def test_purposes_use_separate_streams() -> None:
    base = generate_gavel_instance(200, seed=3)
    poisson = generate_gavel_instance(200, seed=3, jobs_per_hour=10.0, priority_mix=True)
    for x, y in zip(base.jobs, poisson.jobs, strict=True):
        assert (x.job_type, x.scale_factor, x.total_steps) == (y.job_type, y.scale_factor,
                                                                y.total_steps)
    assert all(j.arrival == 0.0 for j in base.jobs)


def test_poisson_arrivals() -> None:
    rate = 6.0
    inst = generate_gavel_instance(2000, seed=11, jobs_per_hour=rate, multi_gpu=False)
    arrivals = np.array([j.arrival for j in inst.jobs])
    assert arrivals[0] == 0.0
    gaps = np.diff(arrivals)
    assert np.all(gaps >= 0)
    mean = 3600.0 / rate
    # The sample mean of 1999 exponential gaps has a standard error of mean / sqrt(1999) ~ 2.2%.
    assert abs(gaps.mean() - mean) < 0.08 * mean
    assert stats.kstest(gaps, "expon", args=(0.0, mean)).pvalue > 1e-3
    assert abs(gaps.std() / gaps.mean() - 1.0) < 0.1  # coefficient of variation of Exp is 1


def test_scale_factor_mix_and_durations() -> None:
    inst = generate_gavel_instance(4000, seed=5)
    counts = Counter(j.scale_factor for j in inst.jobs)
    for sf, p in GAVEL_SCALE_FACTOR_MIX.items():
        assert abs(counts[sf] / 4000 - p) < 0.025, (sf, counts)
    table = load_gavel_throughputs()
    for job in inst.jobs:
        assert table.has(job.job_type, job.scale_factor)  # type: ignore[arg-type]
    single = [j for j in inst.jobs if j.scale_factor == 1]
    assert {j.job_type for j in single} == set(table.job_types)
    minutes = np.log10(_durations_s(inst) / 60.0)
    assert minutes.min() >= 1.5 - 1e-9 and minutes.max() <= 4.0 + 1e-9
    assert abs((minutes >= 3.0).mean() - 0.2) < 0.025
    assert generate_gavel_instance(300, seed=5, multi_gpu=False).jobs[0].scale_factor == 1
    assert {j.scale_factor for j in generate_gavel_instance(300, seed=5, multi_gpu=False).jobs} \
        == {1}


@pytest.mark.parametrize("cluster", [None, SMALL_CLUSTER, {"v100": 2, "k80": 2}, {"p100": 1}])
def test_generated_instances_validate(cluster: dict[str, int] | None) -> None:
    inst = generate_gavel_instance(120, cluster, seed=2, jobs_per_hour=3.0,
                                   priority_mix=True, entities=3, slo_factor=(1.2, 2.0, 10.0))
    again = instance_from_dict(inst.to_dict())
    assert again == inst
    types = set(inst.types)
    counts = {k: p.count for k, p in inst.cluster.accelerators.items()}
    for job in inst.jobs:
        assert set(job.throughput) == types
        # Every job fits some pool with a positive throughput there.
        assert any(counts[k] >= job.scale_factor and job.throughput[k] > 0 for k in types)
        assert job.slo_s is not None and job.total_steps is not None
    for acc, pool in inst.cluster.accelerators.items():
        assert pool.cost_per_hour == gavel_prices()[acc]
    assert [j.entity for j in inst.jobs[:4]] == ["e0", "e1", "e2", "e0"]
    assert {j.weight for j in inst.jobs} <= {1.0, 5.0}


def test_priority_mix_and_slo() -> None:
    inst = generate_gavel_instance(3000, seed=4, priority_mix=True, slo_factor=2.0)
    fives = sum(j.weight == 5.0 for j in inst.jobs) / 3000
    assert abs(fives - 0.2) < 0.03
    durations = _durations_s(inst)
    # total_steps is rounded to whole steps: the recovered duration is off by <= 0.5 / T_v100.
    table = load_gavel_throughputs()
    v100 = np.array([table.throughput(j.job_type, j.scale_factor)["v100"] for j in inst.jobs])
    slo = np.array([j.slo_s or 0.0 for j in inst.jobs])
    assert np.all(np.abs(slo - 2.0 * durations) <= 2.0 * 0.5 / v100 + 1e-9 * slo)
    custom = generate_gavel_instance(100, seed=4, priority_mix={1.0: 0.5, 2.0: 0.5})
    assert {j.weight for j in custom.jobs} == {1.0, 2.0}


def test_generator_rejects_bad_input() -> None:
    with pytest.raises(InputError, match="a100"):
        generate_gavel_instance(3, {"a100": 4})
    with pytest.raises(InputError, match="jobs_per_hour"):
        generate_gavel_instance(3, jobs_per_hour=0.0)
    with pytest.raises(InputError, match="num_jobs"):
        generate_gavel_instance(-1)
    assert generate_gavel_instance(0).jobs == []


# ------------------------------------------------------------------- co-location


def test_colocation_factors_in_range_and_pair_totals() -> None:
    table = load_gavel_throughputs()
    for acc in table.accelerators:
        totals = []
        for a in table.job_types:
            assert 0.3 <= gpu_intensity(a, acc) <= 1.0
            for b in table.job_types:
                f_a, f_b = colocation_factors(a, b, acc)
                assert 0.0 < f_a <= 0.9 and 0.0 < f_b <= 0.9
                assert (f_b, f_a) == colocation_factors(b, a, acc)
                totals.append(f_a + f_b)
        # Packing helps some pairs and hurts others; typically between 1.0 and 1.5.
        assert min(totals) < 1.0 < max(totals)
        assert 1.0 <= float(np.median(totals)) <= 1.5
    # Light jobs pack better than heavy ones.
    light = sum(colocation_factors("A3C", "A3C", "v100"))
    heavy = sum(colocation_factors("ResNet-50 (batch size 128)", "CycleGAN", "k80"))
    assert light > 1.5 > 1.0 > heavy


def test_colocation_all_pairs_symmetric() -> None:
    inst = generate_gavel_instance(30, SMALL_CLUSTER, seed=9, colocation=True)
    singles = sum(j.scale_factor == 1 for j in inst.jobs)
    assert 0 < singles < 30  # multi-GPU jobs present and not packed
    assert _assert_colocation_valid(inst) == singles * (singles - 1) // 2


def test_colocation_random_partners() -> None:
    inst = generate_gavel_instance(40, SMALL_CLUSTER, seed=9, multi_gpu=False)
    packed = add_colocation(inst, partners_per_job=3, seed=1)
    pairs = _assert_colocation_valid(packed)
    assert 40 * 3 / 2 <= pairs <= 40 * 3
    assert all(len(j.colocated_throughput or {}) >= 3 for j in packed.jobs)
    assert add_colocation(inst, partners_per_job=3, seed=1) == packed
    assert inst.jobs[0].colocated_throughput is None  # the input is not modified


# ------------------------------------------------------------------- trace and examples


def test_trace_instance_matches_original() -> None:
    trace = load_instance(INSTANCES / "trace-1000.json.gz")
    assert len(trace.jobs) == 1000
    assert trace.name == "trace-1000"
    assert {k: p.count for k, p in trace.cluster.accelerators.items()} == {
        "v100": 36, "p100": 36, "k80": 36}
    assert trace.params.round_s == 360.0
    # Literal values copied by hand from gavel-trace-1000.json, jobs 0 and 1.
    first = trace.jobs[0]
    assert first.id == "0"
    assert first.arrival == 0.0
    assert first.job_type == "ResNet-18 (batch size 64)"
    assert first.scale_factor == 8
    assert first.total_steps == 17484476.26110642
    assert first.weight == 1.0
    assert first.throughput == {"v100": 255.82913926317391, "p100": 120.03699011475503,
                                "k80": 42.64410449114462}
    second = trace.jobs[1]
    assert (second.id, second.job_type, second.scale_factor) == (
        "1", "Transformer (batch size 16)", 1)
    assert second.arrival == 163.057381940201
    assert second.total_steps == 343170.46864225325
    assert Counter(j.scale_factor for j in trace.jobs) == {1: 687, 2: 105, 4: 152, 8: 56}


def test_trace_reader_round_trip_and_errors(tmp_path: Path) -> None:
    trace: dict[str, Any] = {
        "meta": {"cluster_spec": {"v100": 2, "k80": 1}, "round_s": 120},
        "jobs": [
            {"job_id": 0, "arrival_time_s": 0.0, "job_type": "A3C", "scale_factor": 1,
             "total_steps": 100.0, "priority_weight": 2.0,
             "throughputs_steps_per_s": {"v100": 7.0, "k80": 3.0}},
            {"job_id": 1, "arrival_time_s": 10.0, "job_type": "A3C", "scale_factor": 1,
             "total_steps": 50.0, "priority_weight": 1.0,
             "throughputs_steps_per_s": {"v100": 7.0, "k80": 3.0}},
        ],
    }
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    inst = instance_from_gavel_trace(path, num_jobs=1)
    assert [j.id for j in inst.jobs] == ["0"] and inst.jobs[0].weight == 2.0
    assert inst.params.round_s == 120.0
    assert inst.cluster.accelerators["k80"].cost_per_hour == 0.45
    del trace["jobs"][1]["total_steps"]
    path.write_text(json.dumps(trace))
    with pytest.raises(InputError) as err:
        instance_from_gavel_trace(path)
    assert "jobs[1]" in str(err.value) and "total_steps" in str(err.value)
    trace["jobs"][1]["total_steps"] = -5.0
    path.write_text(json.dumps(trace))
    with pytest.raises(InputError, match=r"jobs\[1\]\.total_steps"):
        instance_from_gavel_trace(path)


@pytest.mark.parametrize(
    "file_name",
    ["small-6jobs.json", "cluster-108gpus-300jobs.json", "colocation-24jobs.json",
     "small-4jobs.yaml", "trace-1000.json.gz"],
)
def test_shipped_instances_load(file_name: str) -> None:
    inst = load_instance(INSTANCES / file_name)
    assert inst.name != "unnamed"
    assert inst.description and len(inst.description) > 40
    raw = (INSTANCES / file_name).read_bytes()
    if file_name.endswith(".gz"):
        raw = gzip.decompress(raw)
    assert b"schedlab/instance@1" in raw


def test_shipped_examples_are_reproducible(
    tmp_path: Path, assert_same_data: Callable[..., None]
) -> None:
    """Regenerated examples equal the shipped files to relative 1e-9 (not bit for bit: a
    library update may move the last bit of a derived float)."""
    for file_name, instance in example_instances().items():
        shipped = load_instance(INSTANCES / file_name)
        assert_same_data(instance.to_dict(), shipped.to_dict(), what=file_name)
    written = write_example_instances(tmp_path)
    assert {p.name for p in written} == set(example_instances())
    for path in written:
        assert_same_data(load_instance(path).to_dict(),
                         load_instance(INSTANCES / path.name).to_dict(), what=path.name)
    big = load_instance(INSTANCES / "cluster-108gpus-300jobs.json")
    assert len(big.jobs) == 300 and big.cluster.total_gpus == 108
    assert all(j.arrival == 0.0 for j in big.jobs)
    assert all(p.cost_per_hour is not None for p in big.cluster.accelerators.values())
    coloc = load_instance(INSTANCES / "colocation-24jobs.json")
    assert _assert_colocation_valid(coloc) == 24 * 23 // 2


def test_compact_files_round_trip(tmp_path: Path) -> None:
    inst = generate_gavel_instance(5, SMALL_CLUSTER, seed=1, entities=2, colocation=True)
    for name in ("x.json", "x.yaml", "x.json.gz"):
        save_instance_compact(inst, tmp_path / name)
        assert load_instance(tmp_path / name) == inst
    data = compact_instance_dict(inst)
    assert list(data)[:2] == ["schema", "name"]
    assert "steps_done" not in data["jobs"][0] and "weight" in data["jobs"][0]


def test_small_six_jobs_max_min_fairness_by_lp() -> None:
    """The hand derivation of docs/workloads.md, checked by an independent LP."""
    inst = load_instance(INSTANCES / "small-6jobs.json")
    assert inst == small_six_jobs_instance()
    types = inst.types
    gpus = np.array([inst.cluster.accelerators[k].count for k in types], dtype=float)
    thr = np.array([[j.throughput.get(k, 0.0) for k in types] for j in inst.jobs])
    t_eq = thr @ gpus / gpus.sum()
    assert t_eq.tolist() == [6.0, 6.0, 3.0, 3.0, 3.0, 3.0]
    num_j, num_k = thr.shape
    nv = num_j * num_k + 1  # X[j,k] row-major, then t
    cost = np.zeros(nv)
    cost[-1] = -1.0
    rows, rhs = [], []
    for j in range(num_j):
        row = np.zeros(nv)
        row[j * num_k:(j + 1) * num_k] = -thr[j] / t_eq[j]
        row[-1] = 1.0
        rows.append(row)
        rhs.append(0.0)
        row = np.zeros(nv)
        row[j * num_k:(j + 1) * num_k] = 1.0
        rows.append(row)
        rhs.append(1.0)
    for k in range(num_k):
        row = np.zeros(nv)
        row[k:num_j * num_k:num_k] = 1.0
        rows.append(row)
        rhs.append(gpus[k])
    res = linprog(cost, A_ub=np.array(rows), b_ub=rhs, bounds=[(0, None)] * nv, method="highs")
    assert res.status == 0
    assert res.x[-1] == pytest.approx(10 / 13, rel=1e-9)
    x = res.x[:-1].reshape(num_j, num_k)
    v100, k80 = types.index("v100"), types.index("k80")
    assert x[:2, v100] == pytest.approx([6 / 13, 6 / 13], abs=1e-9)
    assert x[:2, k80] == pytest.approx([0.0, 0.0], abs=1e-9)
    assert x[2:, v100].sum() == pytest.approx(14 / 13, abs=1e-9)
    assert x[2:, k80].sum() == pytest.approx(2.0, abs=1e-9)
    normalized = (thr * x).sum(axis=1) / t_eq
    assert normalized == pytest.approx([10 / 13] * 6, abs=1e-9)
