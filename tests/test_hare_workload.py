"""Hare workloads (schedlab.workloads.hare): determinism, the mixes by frequency, task seconds
re-derived from Gavel's table, every job runnable, switch costs, the example, file round-trip,
bad arguments."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

from schedlab.errors import InputError
from schedlab.instance import load_instance, save_instance
from schedlab.workloads.hare import (
    HARE_CLUSTER,
    HARE_MODELS,
    example_instances,
    generate_hare_instance,
    write_example_instances,
)
from schedlab.workloads.throughputs import load_gavel_throughputs
from schedlab.world.hare_switching import (
    COLD_RESTART_S,
    HARE_RESIDENT_S,
    MODEL_MEMORY_GB,
)

REL = 1e-9
EXAMPLES = Path(__file__).resolve().parent.parent / "instances" / "hare"


def test_default_cluster_is_160_heterogeneous_gpus() -> None:
    inst = generate_hare_instance(5)
    counts = {k: p.count for k, p in inst.cluster.accelerators.items()}
    assert counts == {"k80": 64, "p100": 48, "v100": 48} == dict(HARE_CLUSTER)
    assert inst.cluster.total_gpus == 160


def test_same_seed_same_instance_other_seed_differs() -> None:
    a = generate_hare_instance(40, seed=3, arrivals="poisson")
    b = generate_hare_instance(40, seed=3, arrivals="poisson")
    c = generate_hare_instance(40, seed=4, arrivals="poisson")
    for x, y in zip(a.jobs, b.jobs, strict=True):
        assert x.id == y.id and x.rounds == y.rounds and x.tasks_per_round == y.tasks_per_round
        assert x.arrival == pytest.approx(y.arrival, rel=REL)
        assert x.task_seconds is not None and y.task_seconds is not None
        for k in x.task_seconds:
            assert x.task_seconds[k] == pytest.approx(y.task_seconds[k], rel=REL)
    assert [j.id for j in a.jobs] != [j.id for j in c.jobs]


def test_mixes_by_frequency() -> None:
    n = 4000
    inst = generate_hare_instance(n, seed=11)
    # Each share's standard deviation is at most sqrt(0.25 x 0.75 / 4000) = 0.0068; 0.03 is
    # more than 4 of them.
    models = Counter(j.job_type for j in inst.jobs)
    assert set(models) == set(HARE_MODELS)
    for model in HARE_MODELS:
        assert models[model] / n == pytest.approx(1 / 8, abs=0.03)
    tasks = Counter(j.tasks_per_round for j in inst.jobs)
    assert set(tasks) == {1, 2, 4, 8}
    for m in (1, 2, 4, 8):
        assert tasks[m] / n == pytest.approx(1 / 4, abs=0.03)
    weights = Counter(j.weight for j in inst.jobs)
    assert set(weights) == {1.0, 2.0, 3.0, 4.0, 5.0}
    for w in weights:
        assert weights[w] / n == pytest.approx(1 / 5, abs=0.03)
    rounds = [j.rounds for j in inst.jobs]
    assert min(rounds) == 2 and max(rounds) == 10
    # V100 task seconds log-uniform in [10, 60]: median sqrt(600) = 24.5 s.
    v100 = sorted(j.task_seconds["v100"] for j in inst.jobs if j.task_seconds)
    assert 10.0 <= v100[0] and v100[-1] <= 60.0
    assert v100[n // 2] == pytest.approx(math.sqrt(600.0), rel=0.05)
    assert all(j.arrival == 0.0 for j in inst.jobs)


def test_task_seconds_follow_gavel_speeds() -> None:
    table = load_gavel_throughputs()
    resnet = table.throughput("ResNet-50 (batch size 64)", 1)
    lm = table.throughput("LM (batch size 20)", 1)
    inst = generate_hare_instance(300, seed=2)
    for job in inst.jobs:
        p = job.task_seconds
        assert p is not None and set(p) == {"k80", "p100", "v100"}
        if job.job_type in ("ResNet-50", "VGG19", "Inception-v3"):
            row = resnet
        elif job.job_type == "DeepSpeech":
            row = lm
        else:
            continue
        # p[k] / p[v100] = S_v100 / S_k
        for k in ("k80", "p100"):
            assert p[k] / p["v100"] == pytest.approx(row["v100"] / row[k], rel=REL)


def test_every_job_runnable_on_a_present_type() -> None:
    inst = generate_hare_instance(200, seed=5, cluster={"k80": 3, "v100": 0, "p100": 2})
    present = {k for k, pool in inst.cluster.accelerators.items() if pool.count > 0}
    assert present == {"k80", "p100"}
    for job in inst.jobs:
        assert job.task_seconds and set(job.task_seconds) <= present
        assert all(v > 0 for v in job.task_seconds.values())
        assert job.rounds and job.rounds >= 1 and job.tasks_per_round in (1, 2, 4, 8)


def test_switch_costs_follow_the_chosen_model() -> None:
    hare = generate_hare_instance(30, seed=1)
    cold = generate_hare_instance(30, seed=1, switch="default")
    none = generate_hare_instance(30, seed=1, switch=None)
    for jh, jc, jn in zip(hare.jobs, cold.jobs, none.jobs, strict=True):
        model = jh.job_type
        assert model is not None
        assert jh.model_memory_gb == pytest.approx(MODEL_MEMORY_GB[model], rel=REL)
        assert isinstance(jh.switch_seconds, dict) and isinstance(jc.switch_seconds, dict)
        for k in ("k80", "p100", "v100"):
            # every model fits next to a task on these GPUs: resident, at most Table 1's Hare
            assert jh.switch_seconds[k] <= HARE_RESIDENT_S[model] * (1 + REL)
            # cold: the Default row plus a copy of at most 0.06 s
            assert COLD_RESTART_S[model] <= jc.switch_seconds[k] <= COLD_RESTART_S[model] + 0.06
        assert jn.switch_seconds is None


def test_poisson_arrivals_rate() -> None:
    inst = generate_hare_instance(3000, seed=7, arrivals="poisson", jobs_per_hour=120.0)
    times = [j.arrival for j in inst.jobs]
    assert times[0] == 0.0 and times == sorted(times)
    # mean gap 30 s; the sample mean of 2999 gaps has a std of 30/sqrt(2999) = 0.55 s
    assert times[-1] / (len(times) - 1) == pytest.approx(30.0, abs=3.0)


def test_file_round_trip(tmp_path: Path) -> None:
    inst = generate_hare_instance(25, seed=9, arrivals="poisson")
    target = tmp_path / "hare.json"
    save_instance(inst, target)
    back = load_instance(target)
    assert back.model_dump() == inst.model_dump()


def test_example_instance_is_shipped_and_small(tmp_path: Path) -> None:
    written = write_example_instances(tmp_path)
    assert [p.name for p in written] == ["small-6jobs-4gpus.json"]
    shipped = load_instance(EXAMPLES / "small-6jobs-4gpus.json")
    fresh = load_instance(written[0])
    example = example_instances()["small-6jobs-4gpus.json"]
    assert len(shipped.jobs) == 6 and shipped.cluster.total_gpus == 4
    for a, b, c in zip(shipped.jobs, fresh.jobs, example.jobs, strict=True):
        assert a.id == b.id == c.id
        assert a.rounds == b.rounds == c.rounds and a.rounds is not None and a.rounds <= 3
        assert a.tasks_per_round == b.tasks_per_round
        assert a.task_seconds is not None and b.task_seconds is not None
        for k in a.task_seconds:
            assert a.task_seconds[k] == pytest.approx(b.task_seconds[k], rel=REL)


@pytest.mark.parametrize("kwargs, field", [
    ({"num_jobs": 0}, "num_jobs"),
    ({"cluster": {"k80": 0}}, "cluster"),
    ({"cluster": {"t4": 4}}, "cluster"),
    ({"arrivals": "burst"}, "arrivals"),
    ({"arrivals": "poisson", "jobs_per_hour": 0.0}, "jobs_per_hour"),
    ({"rounds": (3, 2)}, "rounds"),
    ({"task_s": (0.0, 5.0)}, "task_s"),
    ({"tasks_per_round": {0: 1.0}}, "tasks_per_round"),
    ({"switch": "warm"}, "switch_model"),
])
def test_bad_arguments(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"num_jobs": 5, **kwargs}
    with pytest.raises(InputError) as info:
        generate_hare_instance(**args)  # type: ignore[arg-type]
    assert info.value.field == field
