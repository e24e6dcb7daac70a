"""The context-switch model (schedlab.simulator.switch): the pipelined formula against an
event-by-event simulation of the two-stage pipeline, the documented defaults against the
measured numbers they quote, and the table look-up rule."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedlab.errors import InputError
from schedlab.simulator.switch import (
    BASE_MODELS,
    DEFAULT_CHECKPOINT_S,
    DEFAULT_GPU_COUNTS,
    SwitchCost,
    SwitchModel,
    pipelined_load_s,
)

REL = 1e-9
#: Titan's measured V100 context-switch times (TitanSched fminfo/V100/*_context_switch.csv,
#: column time_cost), copied here by hand from the files.
MEASURED_S = {"vit-base": 4.16124963760376, "vit-large": 14.137871026992798,
              "roberta-base": 30.399009466171265, "roberta-large": 19.345592975616455}
LAYERS = {"vit-base": 12, "vit-large": 24, "roberta-base": 12, "roberta-large": 24}


def _pipeline_by_events(load_s: float, layers: int, compute_s: float) -> float:
    """Exposed time of a transfer -> compute pipeline over ``layers`` layers, event by event:
    layer i is transferred after layer i-1 (transfers back to back), computed once it is
    transferred and layer i-1 is computed; exposed = last compute end - layers x compute."""
    transfer_end = 0.0
    compute_end = 0.0
    per_layer = load_s / layers
    for _ in range(layers):
        transfer_end += per_layer
        compute_end = max(compute_end, transfer_end) + compute_s
    return compute_end - layers * compute_s


def test_pipelined_load_by_hand() -> None:
    # lambda = 12 / 12 = 1 s per layer
    assert pipelined_load_s(12.0, 12) == pytest.approx(1.0, rel=REL)  # kappa = inf
    assert pipelined_load_s(12.0, 12, 0.0) == pytest.approx(12.0, rel=REL)  # nothing hides
    assert pipelined_load_s(12.0, 12, 0.5) == pytest.approx(1.0 + 11 * 0.5, rel=REL)
    assert pipelined_load_s(12.0, 12, 1.0) == pytest.approx(1.0, rel=REL)  # break-even


@settings(max_examples=200, deadline=None)
@given(load=st.floats(0.0, 100.0), layers=st.integers(1, 48),
       compute=st.floats(0.0, 10.0))
def test_pipelined_load_equals_an_event_simulation(load: float, layers: int,
                                                   compute: float) -> None:
    expected = _pipeline_by_events(load, layers, compute)
    assert pipelined_load_s(load, layers, compute) == pytest.approx(expected, rel=1e-9,
                                                                    abs=1e-9)
    assert pipelined_load_s(load, layers, compute) <= load + 1e-12


def test_defaults_quote_the_measured_loads() -> None:
    model = SwitchModel.defaults()
    assert set(model.models) == set(MEASURED_S) == set(BASE_MODELS)
    for name, load in MEASURED_S.items():
        for gpus in DEFAULT_GPU_COUNTS:
            plain = model.overhead_s(name, gpus, pipelined=False)
            piped = model.overhead_s(name, gpus, pipelined=True)
            assert plain == pytest.approx(30.0 + load, rel=REL)
            assert piped == pytest.approx(30.0 + load / LAYERS[name], rel=REL)
    assert DEFAULT_CHECKPOINT_S == 30.0
    # roberta-base, the slowest load: 60.40 s plain, 32.53 s pipelined
    assert model.overhead_s("roberta-base", 8, False) == pytest.approx(60.399009466171265)
    assert model.overhead_s("roberta-base", 8, True) == pytest.approx(32.53325078884761)


def test_table_lookup_takes_the_largest_listed_count_below() -> None:
    model = SwitchModel.from_table([("m", 1, 10.0, 2.0), ("m", 4, 20.0, 3.0),
                                    ("m", 8, 40.0, 5.0)], checkpoint_s=7.0)
    assert model.overhead_s("m", 1, False) == 17.0
    assert model.overhead_s("m", 3, False) == 17.0
    assert model.overhead_s("m", 4, True) == 10.0
    assert model.overhead_s("m", 7, False) == 27.0
    assert model.overhead_s("m", 32, True) == 12.0
    below = SwitchModel.from_table([("m", 4, 20.0, 3.0)], checkpoint_s=0.0)
    assert below.overhead_s("m", 1, False) == 20.0  # below the smallest: the smallest


def test_unknown_model_names_the_known_ones() -> None:
    with pytest.raises(InputError, match=r"no context-switch cost for base model 'bert'.*"
                                         r"roberta-base"):
        SwitchModel.defaults().overhead_s("bert", 1, False)


def test_bad_tables_are_refused() -> None:
    with pytest.raises(ValueError, match="longer than the non-pipelined"):
        SwitchCost(1.0, 2.0)
    with pytest.raises(ValueError, match="finite and >= 0"):
        SwitchCost(-1.0, 0.0)
    with pytest.raises(ValueError, match="finite and >= 0"):
        SwitchCost(math.inf, 0.0)
    with pytest.raises(ValueError, match="listed twice"):
        SwitchModel.from_table([("m", 1, 1.0, 1.0), ("m", 1, 2.0, 1.0)])
    with pytest.raises(ValueError, match="start at 1"):
        SwitchModel({("m", 0): SwitchCost(1.0, 1.0)})
    with pytest.raises(ValueError, match="checkpoint_s"):
        SwitchModel.defaults(checkpoint_s=-1.0)
    with pytest.raises(ValueError, match="at least one layer"):
        pipelined_load_s(1.0, 0)
