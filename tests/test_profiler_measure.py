"""The profiler's measurements: the stopping rule and CI math with fake step times (values
derived by hand or with scipy in the test), peak memory, worker failures, data-parallel and
technique cells on CPU, and the CUDA paths (skipped without a GPU)."""

from __future__ import annotations

import math
import os
import signal
from collections.abc import Callable

import pytest

torch = pytest.importorskip("torch")

from scipy import stats  # noqa: E402

from schedlab.cli.profile import gpu_label, parse_devices  # noqa: E402
from schedlab.errors import InputError  # noqa: E402
from schedlab.profiler.matrix import Settings  # noqa: E402
from schedlab.profiler.parallel import measure_scale_factor, measure_technique  # noqa: E402
from schedlab.profiler.regimes import epoch_seconds  # noqa: E402
from schedlab.profiler.timing import (  # noqa: E402
    AGREE_EVERY,
    PeakMemory,
    StopReason,
    mean_halfwidth,
    summarize,
    time_steps,
)
from schedlab.profiler.workers import WorkerError, _sigint_after, run_workers  # noqa: E402
from schedlab.profiler.zoo import JobSpec  # noqa: E402

CUDA = torch.cuda.is_available()
FAST = Settings(warmup_steps=1, min_steps=3, max_steps=50, max_seconds=0.3)


class FakeSteps:
    """A step function whose i-th call takes ``times[i % len(times)]`` seconds of a fake
    clock (warm-up calls included)."""

    def __init__(self, times: list[float]) -> None:
        self.times = times
        self.now = 0.0
        self.calls = 0

    def clock(self) -> float:
        return self.now

    def step(self) -> None:
        self.now += self.times[self.calls % len(self.times)]
        self.calls += 1


def _run(times: list[float], settings: Settings,
         agree: Callable[..., object] | None = None) -> tuple[FakeSteps, object]:
    fake = FakeSteps(times)
    timing = time_steps(fake.step, settings, clock=fake.clock,
                        agree=agree)  # type: ignore[arg-type]
    return fake, timing


# ------------------------------------------------------------------------ stopping rule


def test_constant_step_times_stop_at_min_steps() -> None:
    settings = Settings(warmup_steps=3, min_steps=5, max_steps=100, max_seconds=1e9)
    fake, timing = _run([0.01], settings)
    # zero variance: the half-width is 0 as soon as the CI may be checked (n = min_steps)
    assert timing.stopped_by == "precision"  # type: ignore[attr-defined]
    assert timing.steps_timed == 5  # type: ignore[attr-defined]
    assert fake.calls == 3 + 5
    assert all(d == pytest.approx(0.01, rel=1e-9)
               for d in timing.durations_s)  # type: ignore[attr-defined]


def test_noisy_steps_stop_at_max_steps() -> None:
    # 1 s and 3 s alternate: relative half-width stays far above 1e-6 at any n <= 12
    settings = Settings(warmup_steps=0, min_steps=2, max_steps=12, max_seconds=1e9,
                        target_relative_halfwidth=1e-6)
    _, timing = _run([1.0, 3.0], settings)
    assert timing.stopped_by == "max_steps"  # type: ignore[attr-defined]
    assert timing.steps_timed == 12  # type: ignore[attr-defined]


def test_max_seconds_stops_after_the_step_that_crosses_it() -> None:
    # timed steps 1, 3, 1 s: elapsed 1, 4, 5 -> crosses 4.5 s at the third step
    settings = Settings(warmup_steps=0, min_steps=10, max_steps=100, max_seconds=4.5)
    _, timing = _run([1.0, 3.0], settings)
    assert timing.stopped_by == "max_seconds"  # type: ignore[attr-defined]
    assert timing.durations_s == pytest.approx((1.0, 3.0, 1.0))  # type: ignore[attr-defined]


def test_max_seconds_still_times_two_steps() -> None:
    # one step is slower than max_seconds: a CI needs two, so two are timed
    settings = Settings(warmup_steps=1, min_steps=5, max_steps=100, max_seconds=0.5)
    _, timing = _run([2.0, 7.0], settings)
    assert timing.steps_timed == 2  # type: ignore[attr-defined]
    assert timing.stopped_by == "max_seconds"  # type: ignore[attr-defined]


def test_precision_stop_matches_an_independent_ci() -> None:
    times = [1.0, 1.2, 0.9, 1.1, 1.05, 0.95]
    settings = Settings(warmup_steps=0, min_steps=3, max_steps=500, max_seconds=1e9,
                        confidence=0.9, target_relative_halfwidth=0.04)
    _, timing = _run(times, settings)
    # first n >= 3 whose scipy t-interval has half-width / mean <= 0.04
    expected = None
    for n in range(3, 500):
        sample = [times[i % len(times)] for i in range(n)]
        low, high = stats.t.interval(0.9, n - 1, loc=sum(sample) / n, scale=stats.sem(sample))
        if (high - low) / 2 / (sum(sample) / n) <= 0.04:
            expected = n
            break
    assert expected is not None
    assert timing.steps_timed == expected  # type: ignore[attr-defined]
    assert timing.stopped_by == "precision"  # type: ignore[attr-defined]


def test_agree_overrides_the_local_decision() -> None:
    # rank 0 decided to stop at once: this rank stops at the first agreement, after
    # AGREE_EVERY timed steps, and agree is called on those steps only
    settings = Settings(warmup_steps=0, min_steps=5, max_steps=100, max_seconds=1e9)
    calls: list[StopReason | None] = []

    def agree(decision: StopReason | None) -> StopReason | None:
        calls.append(decision)
        return "max_steps"

    _, timing = _run([1.0, 2.0], settings, agree=agree)
    assert timing.steps_timed == AGREE_EVERY  # type: ignore[attr-defined]
    assert len(calls) == 1


def test_a_decision_between_agreements_waits_for_the_next() -> None:
    # locally max_steps at 10 timed steps; the group agrees at 8 (no) and 16 (yes)
    settings = Settings(warmup_steps=0, min_steps=5, max_steps=10, max_seconds=1e9)
    calls: list[StopReason | None] = []

    def agree(decision: StopReason | None) -> StopReason | None:
        calls.append(decision)
        return decision

    _, timing = _run([1.0, 2.0], settings, agree=agree)
    assert timing.steps_timed == 2 * AGREE_EVERY  # type: ignore[attr-defined]
    assert calls == [None, "max_steps"]


# ------------------------------------------------------------------------------ CI math


def test_ci_of_known_samples_against_scipy() -> None:
    samples = [1.0, 2.0, 3.0, 4.0]
    mean, half = mean_halfwidth(samples, 0.95)
    # mean 2.5, s^2 = (2.25+0.25+0.25+2.25)/3 = 5/3, half = t_{0.975,3} * sqrt(5/3) / 2
    assert mean == pytest.approx(2.5, rel=1e-12)
    assert half == pytest.approx(stats.t.ppf(0.975, 3) * math.sqrt(5 / 3) / 2, rel=1e-9)
    summary = summarize(samples, 0.95, samples_per_step=16)
    assert summary.steps_per_s == pytest.approx(0.4, rel=1e-12)
    assert summary.samples_per_s == pytest.approx(16 / 2.5, rel=1e-12)
    low, high = stats.t.interval(0.95, 3, loc=2.5, scale=stats.sem(samples))
    assert summary.steps_per_s_ci == pytest.approx((1 / high, 1 / low), rel=1e-9)


def test_unbounded_steps_per_s_interval_is_none() -> None:
    # n = 2: half = t_{0.975,1} * |10-1|/sqrt(2) / sqrt(2) = 12.706 * 4.5 > mean 5.5
    summary = summarize([1.0, 10.0], 0.95, samples_per_step=1)
    assert summary.step_s_halfwidth == pytest.approx(stats.t.ppf(0.975, 1) * 4.5, rel=1e-9)
    assert summary.steps_per_s_ci is None


def test_epoch_seconds_by_hand() -> None:
    assert epoch_seconds(1000, 16, 0.5) == pytest.approx(63 * 0.5, rel=1e-12)
    assert epoch_seconds(1024, 16, 0.25) == pytest.approx(64 * 0.25, rel=1e-12)


# ------------------------------------------------------------------------- peak memory


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux /proc only")
def test_cpu_peak_memory_sees_a_50_mib_tensor() -> None:
    memory = PeakMemory("cpu")
    memory.start()
    block = torch.ones(50 * 2 ** 20 // 4)  # 50 MiB of float32, every page written
    grown = memory.bytes()
    del block
    assert grown >= 0.8 * 50 * 2 ** 20


# ------------------------------------------------------------------------------ workers


def _raises(payload: dict[str, object]) -> None:
    raise RuntimeError(f"boom {payload['n']}")


def _killed(payload: dict[str, object]) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _answers(payload: dict[str, object]) -> object:
    return payload["n"]


def test_worker_exception_becomes_the_reason() -> None:
    with pytest.raises(WorkerError, match="RuntimeError: boom 7") as caught:
        run_workers(_raises, [{"n": 7}], timeout_s=60)
    assert caught.value.raised


def test_killed_worker_becomes_the_reason() -> None:
    with pytest.raises(WorkerError, match="exited with code -9") as caught:
        run_workers(_killed, [{"n": 1}], timeout_s=60)
    assert not caught.value.raised


def test_workers_answer_in_payload_order() -> None:
    assert run_workers(_answers, [{"n": 3}, {"n": 5}], timeout_s=60) == [3, 5]


def test_ctrl_c_while_workers_start_is_raised_after_all_started() -> None:
    """A SIGINT inside the start block is held (the block runs to its end), then raised."""
    ran: list[str] = []
    # the test's own handler: a suite started in the background inherits an ignored SIGINT
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with _sigint_after():
                os.kill(os.getpid(), signal.SIGINT)
                ran.append("after the signal")
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
    assert ran == ["after the signal"]


def test_an_ignored_ctrl_c_stays_ignored_while_workers_start() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with _sigint_after():
            os.kill(os.getpid(), signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


# ------------------------------------------------------------------ cells on CPU / CUDA


def test_ddp_cell_on_two_cpu_processes() -> None:
    spec = JobSpec("recommender", "tiny", 8)
    cell = measure_scale_factor(spec, "cpu", "cpu", 2, settings=FAST, timeout_s=120)
    assert cell.status == "ok", cell.reason
    assert cell.steps_per_s is not None and cell.steps_per_s > 0
    assert cell.samples_per_s == pytest.approx(cell.steps_per_s * 8 * 2, rel=1e-9)
    assert cell.steps_timed >= 2
    if cell.steps_per_s_ci is not None:
        assert cell.steps_per_s_ci[0] <= cell.steps_per_s <= cell.steps_per_s_ci[1]


def test_fsdp_technique_is_ok_or_infeasible_with_a_reason() -> None:
    spec = JobSpec("lstm", "tiny", 8)
    cell = measure_technique(spec, "cpu", "cpu", "fsdp", 2, settings=FAST, timeout_s=120)
    assert cell.status in ("ok", "infeasible")
    if cell.status == "ok":
        assert cell.step_s is not None and cell.step_s > 0
    else:
        assert cell.reason


def test_single_on_two_devices_is_infeasible() -> None:
    cell = measure_technique(JobSpec("lstm", "tiny", 8), "cpu", "cpu", "single", 2,
                             settings=FAST)
    assert cell.status == "infeasible" and "one device" in (cell.reason or "")


def test_gpu_labels_by_hand() -> None:
    assert gpu_label("NVIDIA H100 80GB HBM3") == "h100"
    assert gpu_label("NVIDIA A100-SXM4-40GB") == "a100"
    assert gpu_label("NVIDIA GeForce RTX 4090") == "rtx4090"
    assert gpu_label("Tesla V100-SXM2-16GB") == "v100"


@pytest.mark.skipif(CUDA, reason="needs a machine without CUDA")
def test_cuda_device_without_cuda_is_an_input_error() -> None:
    with pytest.raises(InputError, match="no CUDA device"):
        parse_devices(["cuda"])
    cell = measure_scale_factor(JobSpec("lstm", "tiny", 8), "gpu", "cuda", 1, settings=FAST)
    assert cell.status == "infeasible" and "CUDA" in (cell.reason or "")


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_cuda_solo_cell() -> None:
    (device,) = parse_devices(["cuda=testgpu"])
    assert device.backend == "cuda" and device.label == "testgpu"
    cell = measure_scale_factor(JobSpec("resnet18", "tiny", 16), "testgpu", "cuda", 1,
                                settings=FAST, timeout_s=300)
    assert cell.status == "ok", cell.reason
    assert cell.peak_memory_bytes is not None and cell.peak_memory_bytes > 0


@pytest.mark.skipif(not CUDA or torch.cuda.device_count() < 2, reason="needs 2 CUDA devices")
def test_cuda_ddp_and_fsdp_cells() -> None:
    spec = JobSpec("resnet18", "tiny", 16)
    ddp = measure_scale_factor(spec, "testgpu", "cuda", 2, settings=FAST, timeout_s=300)
    assert ddp.status == "ok", ddp.reason
    fsdp = measure_technique(spec, "testgpu", "cuda", "fsdp", 2, settings=FAST, timeout_s=300)
    assert fsdp.status in ("ok", "infeasible") and (fsdp.status == "ok" or fsdp.reason)
