"""Hare's switch-cost models (schedlab.world.hare_switching), by hand."""

from __future__ import annotations

import pytest

from schedlab.errors import InputError
from schedlab.instance import instance_from_dict
from schedlab.world.hare_switching import (
    GPU_MEMORY_GB,
    MODEL_MEMORY_GB,
    ColdRestart,
    HareStyle,
    Pipelined,
    SwitchContext,
    can_retain,
    job_model,
    speculative_residency,
    switch_model,
    switch_seconds_map,
)

#: The seed's Table 1 (ms): (default, PipeSwitch, Hare) per model.
TABLE_1_MS = {
    "VGG19": (3288.94, 4.01, 2.77), "ResNet-50": (5961.16, 4.75, 2.04),
    "Inception-v3": (7807.43, 5.03, 2.46), "BERT-base": (9016.99, 12.57, 5.03),
    "Transformer": (5257.17, 10.34, 5.79), "DeepSpeech": (5125.64, 8.91, 4.27),
    "FastGCN": (5327.24, 2.86, 1.83), "GraphSAGE": (5213.54, 2.42, 0.96),
}


def ctx(model: str = "m", gpu: str = "v100", memory: float = 1.26,
        gpu_memory: float = 16.0, resident: bool = False) -> SwitchContext:
    return SwitchContext(model=model, gpu_type=gpu, model_memory_gb=memory,
                         gpu_memory_gb=gpu_memory, resident=resident)


def test_cold_restart_by_hand() -> None:
    # 2 s restart + 1.26 GB over 15.75 GB/s x 0.8 = 12.6 GB/s -> 0.1 s.
    model = ColdRestart(restart_s={"m": 2.0})
    assert model.seconds(ctx()) == pytest.approx(2.1, rel=1e-12)
    assert model.seconds(ctx(resident=True)) == pytest.approx(2.1, rel=1e-12)
    # A100: 31.5 x 0.8 = 25.2 GB/s -> 0.05 s; an unlisted model takes the fallback 3 s.
    assert model.seconds(ctx(gpu="a100")) == pytest.approx(2.05, rel=1e-12)
    assert model.seconds(ctx(model="other")) == pytest.approx(3.1, rel=1e-12)


def test_pipelined_by_hand() -> None:
    # 2.42 ms + 1/8 x 1.26 GB / 12.6 GB/s = 2.42 ms + 12.5 ms.
    model = Pipelined()
    assert model.seconds(ctx()) == pytest.approx(0.01492, rel=1e-12)
    quarter = Pipelined(overhead_s=0.0, first_group_fraction=0.25, efficiency=1.0)
    assert quarter.seconds(ctx(gpu="k80", memory=3.15)) == pytest.approx(0.05, rel=1e-12)
    assert model.seconds(ctx(resident=True)) == model.seconds(ctx())


def test_hare_style_by_hand() -> None:
    model = HareStyle(resident_s={"m": 0.004})
    # resident: min(4 ms, pipelined 14.92 ms); not resident: the pipelined load.
    assert model.seconds(ctx(resident=True)) == pytest.approx(0.004, rel=1e-12)
    assert model.seconds(ctx(resident=False)) == pytest.approx(0.01492, rel=1e-12)
    # A tiny model loads faster than the resident figure: Hare never pays more than a load.
    assert model.seconds(ctx(memory=0.0, resident=True)) == pytest.approx(0.00242, rel=1e-12)


@pytest.mark.parametrize("gpu", ["k80", "p100", "v100", "t4"])
def test_defaults_have_table_1_shape(gpu: str) -> None:
    cold, pipe, hare = ColdRestart(), Pipelined(), HareStyle()
    for name, (default_ms, _pipe_ms, hare_ms) in TABLE_1_MS.items():
        c = ctx(model=name, gpu=gpu, memory=MODEL_MEMORY_GB[name],
                gpu_memory=GPU_MEMORY_GB[gpu], resident=True)
        assert cold.seconds(c) > 3.0
        # the default row plus the copy, at most 0.06 s (575 MB at 12.6 GB/s)
        assert default_ms / 1000 <= cold.seconds(c) <= default_ms / 1000 + 0.06
        assert 0.00242 <= pipe.seconds(c) <= 0.01257
        assert hare.seconds(c) <= min(hare_ms / 1000, pipe.seconds(c)) + 1e-15
        assert hare.seconds(c) <= 0.006


def test_switch_model_kinds() -> None:
    assert isinstance(switch_model("default"), ColdRestart)
    assert isinstance(switch_model("pipelined"), Pipelined)
    assert isinstance(switch_model("hare"), HareStyle)
    with pytest.raises(InputError, match="unknown switch model"):
        switch_model("warm")  # type: ignore[arg-type]


def test_bad_contexts() -> None:
    with pytest.raises(InputError, match="model_memory_gb"):
        ctx(memory=-1.0)
    with pytest.raises(InputError, match="bandwidth"):
        Pipelined().seconds(ctx(gpu="h100"))
    with pytest.raises(InputError, match="first_group_fraction"):
        Pipelined(first_group_fraction=0.0)


def test_speculative_residency_by_hand() -> None:
    memory = {"a": 3.0, "b": 4.0, "c": 2.0, "d": 1.0}
    # 16 GB GPU, half for the next task: 8 GB for models.  Latest first: d (1), c (3),
    # b (7); a would make 10 > 8 -> stop.  The repeat of c counts once.
    assert speculative_residency(["a", "b", "c", "c", "d"], memory, 16.0) == {"b", "c", "d"}
    # Greedy stops at the first model that does not fit (a is not tried after b fails).
    assert speculative_residency(["a", "b"], memory, 12.0) == {"b"}
    assert speculative_residency(["d", "b"], memory, 6.0) == set()
    assert speculative_residency([], memory, 16.0) == set()
    assert can_retain(8.0, 16.0) and not can_retain(8.01, 16.0)


def test_job_model() -> None:
    assert job_model("ResNet-50 (batch size 64)", "j1") == "ResNet-50"
    assert job_model("VGG19", "j1") == "VGG19"
    assert job_model(None, "BERT-base") == "BERT-base"


def test_switch_seconds_map_by_hand() -> None:
    instance = instance_from_dict({
        "cluster": {"accelerators": {"v100": {"count": 1}, "k80": {"count": 1}}},
        "jobs": [
            {"id": "a", "job_type": "m", "rounds": 1, "tasks_per_round": 1,
             "task_seconds": {"v100": 1.0}, "model_memory_gb": 1.26},
            {"id": "b", "job_type": "big", "rounds": 1, "tasks_per_round": 1,
             "task_seconds": {"v100": 1.0, "k80": 2.0}},
        ],
    })
    memories = {"big": 7.0}
    hare = HareStyle(resident_s={"m": 0.004, "big": 0.001})
    sigma = switch_seconds_map(instance, hare, model_memory_gb=memories)
    # a: only v100; resident (1.26 <= 8) -> 4 ms.
    assert sigma["a"] == {"v100": pytest.approx(0.004, rel=1e-12)}
    # b: 7 GB fits next to a task on a 16 GB V100 (1 ms) but not on a 12 GB K80 (7 > 6):
    # there it is loaded, 2.42 ms + 7/8 GB / 12.6 GB/s.
    assert sigma["b"]["v100"] == pytest.approx(0.001, rel=1e-12)
    assert sigma["b"]["k80"] == pytest.approx(0.00242 + 0.875 / 12.6, rel=1e-12)
    cold = switch_seconds_map(instance, ColdRestart(restart_s={}), model_memory_gb=memories,
                              resident=False, jobs=["b"])
    assert set(cold) == {"b"}
    assert cold["b"]["k80"] == pytest.approx(3.0 + 7.0 / 12.6, rel=1e-12)
    with pytest.raises(InputError, match="no model memory"):
        switch_seconds_map(instance, hare, model_memory_gb={})
