"""Titan workloads (schedlab.workloads.titan): the generator's rules re-derived from the
instance it writes, the mixes by frequency, the speed table against rows of Titan's measured
profiles, the example instance, bad arguments."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

from schedlab.errors import InputError
from schedlab.instance import load_instance
from schedlab.workloads.titan import (
    BASE_MODELS,
    DATASETS,
    GPU_OPTIONS,
    THROUGHPUT,
    example_instances,
    generate_titan_instance,
    size_classes,
    write_example_instances,
)
from schedlab.world.concept_hierarchy import label_sets

REL = 1e-9
EXAMPLES = Path(__file__).resolve().parent.parent / "instances" / "titan"


def test_task_count_follows_density_and_gpus() -> None:
    assert len(generate_titan_instance(gpus=64, density=1.0).jobs) == 64
    assert len(generate_titan_instance(gpus=64, density=1.5).jobs) == 96
    assert len(generate_titan_instance(gpus=32, density=2.0).jobs) == 64
    assert len(generate_titan_instance(gpus=32, density=1.0, jobs_per_gpu=0.5).jobs) == 16
    assert len(generate_titan_instance(7, gpus=32, density=2.0).jobs) == 7


def test_every_task_obeys_the_recipe() -> None:
    inst = generate_titan_instance(gpus=64, density=2.0, seed=5)
    sets = label_sets()
    assert inst.params.round_s == 120.0
    pool = inst.cluster.accelerators["v100"]
    assert (pool.count, pool.gpus_per_node) == (64, 4)
    arrivals = [job.arrival for job in inst.jobs]
    assert arrivals == sorted(arrivals) and 0 <= arrivals[0] and arrivals[-1] < 8 * 3600
    assert all(a == int(a) for a in arrivals)
    for job in inst.jobs:
        model = BASE_MODELS[job.base_model or ""]
        data = DATASETS[job.dataset or ""]
        assert data.family == model.family
        assert job.label_set == data.label_set
        assert tuple(job.classes or ()) == tuple(sets[data.label_set])
        # max_gpus = min(32, B // smallest local batch) for one of the drawn gradient steps
        possible = {min(32, model.base_batch * s // model.min_local_batch) for s in (1, 4, 8, 12)}
        assert job.max_gpus in possible
        profile = {int(a): s for a, s in (job.duration_s or {}).items()}
        assert sorted(profile) == [a for a in GPU_OPTIONS if a <= (job.max_gpus or 0)]
        assert job.scale_factor in (1, 2, 4, 8, 12, 16) and job.scale_factor <= job.max_gpus
        # the duration at the request is in [5 min, 10 h] and whole seconds
        d = profile[job.scale_factor]
        assert 300 <= d <= 36000 and d == int(d)
        # the work is the same at every count: d(a) x samples/s(a) = total_steps
        speeds = [table for table in THROUGHPUT[job.base_model or ""].values()
                  if len(table) == len(profile)]
        matches = [table for table in speeds
                   if all(math.isclose(profile[a] * table[GPU_OPTIONS.index(a)],
                                       job.total_steps or 0.0, rel_tol=1e-9)
                          for a in profile)]
        assert matches, job.id
        assert job.throughput["v100"] == pytest.approx(
            matches[0][GPU_OPTIONS.index(job.scale_factor)], rel=REL)


def test_mixes_by_frequency() -> None:
    inst = generate_titan_instance(4000, gpus=64, seed=1)
    n = len(inst.jobs)
    models = Counter(job.base_model for job in inst.jobs)
    # ViT-B 320, ViT-L 160, RoBERTa-base 120, RoBERTa-large 60 of 660
    for name, share in (("vit-base", 320 / 660), ("vit-large", 160 / 660),
                        ("roberta-base", 120 / 660), ("roberta-large", 60 / 660)):
        assert models[name] / n == pytest.approx(share, abs=0.03)
    gpus = Counter(job.scale_factor for job in inst.jobs)
    # about 40% on 1 GPU, 45% on 8 (the requests above max_gpus are cut to it)
    assert gpus[1] / n == pytest.approx(1163 / 2970, abs=0.03)
    assert gpus[8] / n == pytest.approx(1333 / 2970, abs=0.03)
    # durations log-uniform on [300, 36000]: the median is sqrt(300 x 36000) = 3286 s
    at_request = sorted((job.duration_s or {})[str(job.scale_factor)] for job in inst.jobs)
    assert at_request[n // 2] == pytest.approx(math.sqrt(300 * 36000), rel=0.1)


def test_size_classes_by_hand() -> None:
    # ranks int(0.3 x 10) = 3 and int(0.9 x 10) = 9 of the sorted values 1..10: 4 and 10
    assert size_classes([5, 1, 2, 3, 4, 6, 7, 8, 9, 10]) == (
        ["medium", "small", "small", "small", "small"] + ["medium"] * 5)
    assert size_classes([7.0]) == ["small"]


def test_single_model_traces_and_small_clusters() -> None:
    inst = generate_titan_instance(50, gpus=8, model="roberta-large", seed=2)
    assert {job.base_model for job in inst.jobs} == {"roberta-large"}
    assert max(job.scale_factor for job in inst.jobs) <= 8  # cut to the cluster


def test_speed_table_matches_titans_profiles_by_hand() -> None:
    # vit, batch 48 on 1 GPU: placement "1", local batch 48, step time 0.1731255205002551 s
    # (TitanSched fminfo/V100/vit_placements.csv), no accumulation: 48 / 0.17313 samples/s
    assert THROUGHPUT["vit-base"][1][0] == pytest.approx(48 / 0.1731255205002551, abs=0.01)
    # roberta-base, batch 16 on 1 GPU: step time 0.18872566367181978 s at local batch 16
    assert THROUGHPUT["roberta-base"][1][0] == pytest.approx(16 / 0.18872566367181978,
                                                             abs=0.01)


def test_same_seed_same_instance() -> None:
    a = generate_titan_instance(30, gpus=32, seed=4).to_dict()
    b = generate_titan_instance(30, gpus=32, seed=4).to_dict()
    c = generate_titan_instance(30, gpus=32, seed=5).to_dict()
    assert a == b
    assert a["jobs"] != c["jobs"]


def test_example_instance_regenerates(tmp_path: Path) -> None:
    shipped = load_instance(EXAMPLES / "small-10tasks-16gpus.json")
    assert shipped.to_dict() == example_instances()["small-10tasks-16gpus.json"].to_dict()
    written = write_example_instances(tmp_path)
    again = load_instance(written[0])
    for old, new in zip(shipped.jobs, again.jobs, strict=True):
        assert old.id == new.id and old.classes == new.classes
        for key, value in (old.duration_s or {}).items():
            assert (new.duration_s or {})[key] == pytest.approx(value, rel=REL)
        assert new.total_steps == pytest.approx(old.total_steps, rel=REL)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"model": "bert"}, "model"),
    ({"gpus": 30}, "gpus"),
    ({"num_jobs": 0}, "num_jobs"),
    ({"density": 0.0}, "density"),
    ({"min_duration_s": 10.0, "max_duration_s": 5.0}, "min_duration_s"),
])
def test_bad_arguments_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InputError) as info:
        generate_titan_instance(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field
