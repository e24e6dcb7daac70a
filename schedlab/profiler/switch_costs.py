"""Hare's switch-cost model from measured switch seconds: :func:`hare_switch_from_profile`.

A throughput file's switch cells (:mod:`schedlab.profiler.switching`, docs/switch-costs.md)
give, per zoo job and device, the measured seconds of a ``cold``, ``pipelined`` and
``resident`` switch.  :func:`hare_switch_from_profile` maps each Hare model to a zoo job and
each GPU type to a profiled device and returns the
:class:`~schedlab.world.hare_switching.MeasuredSwitch` that replaces the formulas of
:mod:`schedlab.world.hare_switching` (which says what each kind takes).

It lives in the profiler, not next to the models, because it reads the profiler's file
format (:mod:`schedlab.profiler.matrix`) and the models sit below the formulations, which
never import the profiler (docs/architecture.md, "Layers").  Titan's counterpart,
:func:`schedlab.simulator.switch.titan_switch_from_profile`, returns the simulator's model and
stays in the simulator, above the profiler.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from schedlab.errors import InputError
from schedlab.profiler.matrix import ThroughputFile, load_throughputs
from schedlab.world.hare_switching import SWITCH_KINDS, MeasuredSwitch, SwitchKind

#: The measured switch kind behind each switch model: (not resident, resident).
_PROFILE_KINDS: Mapping[SwitchKind, tuple[str, str | None]] = {
    "default": ("cold", None), "pipelined": ("pipelined", None),
    "hare": ("pipelined", "resident"),
}


def hare_switch_from_profile(
    profile: str | Path | ThroughputFile,
    kind: SwitchKind,
    models: Mapping[str, str],
    devices: Mapping[str, str],
) -> MeasuredSwitch:
    """The ``kind`` switch model from a throughput file's measured switch seconds.

    ``models`` maps each Hare model name (:func:`~schedlab.world.hare_switching.job_model`)
    to the zoo job measured for it (``model/size@batch``); ``devices`` maps each GPU type to
    the profile's device label.
    ``default`` takes the ``cold`` cells, ``pipelined`` the ``pipelined`` cells, ``hare`` the
    ``pipelined`` cells plus the ``resident`` cells
    (:mod:`schedlab.world.hare_switching`, "Measured costs").  A missing cell is an
    :class:`~schedlab.errors.InputError` naming the job, kind and device."""
    data = profile if isinstance(profile, ThroughputFile) else load_throughputs(profile)
    source = None if isinstance(profile, ThroughputFile) else str(profile)
    if kind not in _PROFILE_KINDS:
        raise InputError(f"unknown switch model {kind!r} (known: {', '.join(SWITCH_KINDS)})",
                         field="switch_model")
    load_kind, resident_kind = _PROFILE_KINDS[kind]

    def table(measured_kind: str) -> dict[tuple[str, str], float]:
        out: dict[tuple[str, str], float] = {}
        for model, job in models.items():
            for gpu_type, device in devices.items():
                seconds = data.switch_seconds(job, device, measured_kind)
                if seconds is None:
                    raise InputError(f"no {measured_kind} switch measured for {job!r} on "
                                     f"{device!r} (model {model!r}, GPU type {gpu_type!r})",
                                     file=source, field="cells")
                out[model, gpu_type.lower()] = seconds
        return out

    resident = table(resident_kind) if resident_kind is not None else None
    return MeasuredSwitch(table(load_kind), resident, kind)
