"""Shockwave's workload generator: draws, batch-size schedules, instances, examples.

Expected values come from hand derivations of Shockwave's rules (docs/workloads.md), from a
second implementation of its draws written here with the libraries Shockwave itself uses
(``random.Random`` and numpy's ``RandomState``), and from the first rows of Shockwave's
published 120-job trace.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest

from schedlab.errors import InputError
from schedlab.instance import load_instance
from schedlab.workloads.shockwave import (
    draw_shockwave_jobs,
    generate_shockwave_instance,
    write_example_instances,
)
from schedlab.workloads.shockwave_adaptation import (
    JOB_TEMPLATES,
    accordion_schedule,
    gns_schedule,
    usable_batch_sizes,
)
from schedlab.workloads.throughputs import load_gavel_throughputs

EXAMPLES = Path(__file__).resolve().parent.parent / "instances" / "shockwave"

# ------------------------------------------------------------------ a second implementation

TEMPLATE_ORDER = (
    [("ResNet-18", b) for b in (32, 64, 128, 256)]
    + [("ResNet-50", b) for b in (16, 32, 64)]
    + [("Transformer", b) for b in (16, 32, 64, 128)]
    + [("LM", b) for b in (5, 10, 20, 40, 80)]
    + [("Recommendation", b) for b in (512, 1024, 2048, 4096, 8192)]
)


def reference_draws(num_jobs: int, seed: int, lam: float) -> list[tuple]:
    """Shockwave's generate_trace.py + utils.generate_job draws, written with the same
    libraries it uses (five random.Random streams and numpy's global RandomState)."""
    np_global = np.random.RandomState(seed)
    job_rng, gap_rng, dur_rng = (random.Random(seed + k) for k in (0, 1, 2))
    sf_rng, mode_rng = random.Random(seed + 3), random.Random(seed + 4)
    grid = np.linspace(0.2, 5, 100)
    out = []
    prev = None
    for _ in range(num_jobs):
        model, batch = job_rng.choice(TEMPLATE_ORDER)
        sf = 1
        if model != "Recommendation":
            r = sf_rng.uniform(0, 1)
            sf = 1 if r <= 0.6 else 2 if r <= 0.6 + 0.3 else 4 if r <= 0.6 + 0.3 + 0.09 else 8
        r = dur_rng.uniform(0, 1)
        if r < 0.72:
            part = grid[:20]
        elif r < 0.72 + 0.2:
            part = grid[20:50]
        elif r < 0.72 + 0.2 + 0.05:
            part = grid[50:90]
        else:
            part = grid[90:]
        duration = round(3600 * np_global.choice(part))
        r = mode_rng.uniform(0, 1)
        mode = "static" if r < 0 else "accordion" if r < 0.5 else "gns"
        if duration < 1000 and mode == "accordion":
            mode = "static"
        arrival = 0.0 if prev is None else prev - math.log(1.0 - gap_rng.random()) * lam
        prev = arrival
        out.append((model, batch, sf, float(duration), mode, float(int(arrival))))
    return out


def our_draws(num_jobs: int, seed: int, lam: float) -> list[tuple]:
    d = draw_shockwave_jobs(num_jobs, seed, mean_gap_s=lam)
    return [(*JOB_TEMPLATES[int(d.template[i])], int(d.scale_factor[i]), float(d.duration_s[i]),
             d.mode[i], float(d.arrival_s[i])) for i in range(num_jobs)]


@pytest.mark.parametrize("seed", [0, 1, 25, 123])
def test_draws_equal_shockwave_generator_draw_for_draw(seed: int) -> None:
    assert our_draws(300, seed, 40.0) == reference_draws(300, seed, 40.0)


def test_seed_25_reproduces_the_published_trace_rows() -> None:
    # First 12 rows of Shockwave's 120_0.2_5_100_40_25_..._multigpu_dynamic.trace:
    # (job type, scale factor, mode, duration s, arrival s).
    published = [
        ("LM", 10, 1, "gns", 1418, 0), ("ResNet-18", 32, 1, "accordion", 3338, 55),
        ("ResNet-50", 64, 1, "gns", 13462, 64), ("Transformer", 64, 1, "accordion", 2815, 73),
        ("Recommendation", 8192, 1, "gns", 3862, 109), ("LM", 80, 1, "accordion", 9273, 112),
        ("ResNet-18", 64, 1, "accordion", 2116, 172), ("Transformer", 32, 1, "gns", 1418, 230),
        ("ResNet-18", 64, 1, "accordion", 8575, 231),
        ("Transformer", 64, 1, "accordion", 1593, 277),
        ("Recommendation", 2048, 1, "accordion", 4385, 305),
        ("LM", 20, 2, "accordion", 1942, 346),
    ]
    ours = our_draws(12, 25, 40.0)
    assert [(m, b, s, mode, d, a) for m, b, s, d, mode, a in ours] == published


# ------------------------------------------------------------------------- distributions


def _within(observed: np.ndarray, expected: np.ndarray, n: int) -> bool:
    """Every frequency within 5 binomial standard deviations of its probability."""
    tolerance = 5 * np.sqrt(expected * (1 - expected) / n) + 1e-12
    return bool(np.all(np.abs(observed - expected) <= tolerance))


def test_distributions_on_a_large_draw() -> None:
    n = 20_000
    d = draw_shockwave_jobs(n, seed=7)
    slices = np.bincount(d.duration_slice, minlength=4) / n
    assert _within(slices, np.array([0.72, 0.20, 0.05, 0.03]), n)
    # durations are whole seconds of grid points inside the drawn slice
    grid_s = np.round(3600 * np.linspace(0.2, 5, 100))
    bounds = [(0, 20), (20, 50), (50, 90), (90, 100)]
    for k, (lo, hi) in enumerate(bounds):
        assert set(d.duration_s[d.duration_slice == k]) <= set(grid_s[lo:hi])
    templates = np.bincount(d.template, minlength=21) / n
    assert _within(templates, np.full(21, 1 / 21), n)
    models = np.array([JOB_TEMPLATES[t][0] for t in d.template])
    rec = models == "Recommendation"
    assert np.all(d.scale_factor[rec] == 1)
    dist = d.scale_factor[~rec]
    freq = np.array([np.mean(dist == s) for s in (1, 2, 4, 8)])
    assert _within(freq, np.array([0.6, 0.3, 0.09, 0.01]), len(dist))
    modes = np.array(d.mode)
    long = d.duration_s >= 1000
    assert np.all(modes[~long] != "accordion")
    freq = np.array([np.mean(modes[long] == m) for m in ("static", "accordion", "gns")])
    assert _within(freq, np.array([0.0, 0.5, 0.5]), int(long.sum()))
    gaps = np.diff(d.arrival_s)
    assert abs(gaps.mean() - 40.0) < 5 * 40.0 / math.sqrt(n - 1) + 1.0  # whole-second floor


def test_all_arrivals_at_zero_without_a_gap_and_single_gpu_option() -> None:
    d = draw_shockwave_jobs(50, seed=3, mean_gap_s=None, multi_gpu=False)
    assert np.all(d.arrival_s == 0) and np.all(d.scale_factor == 1)


# ------------------------------------------------------------------- batch-size schedules


def test_accordion_schedules_by_hand() -> None:
    # ResNet-18 from 32, 20 epochs: head 0-9 critical; 10-19 beyond 30% -> 256
    assert accordion_schedule("ResNet-18", 32, 20).tolist() == [32] * 10 + [256] * 10
    # 200 epochs: e <= 60 keeps 32 (first 30%), 150-159 critical again
    expected = [32] * 61 + [256] * 89 + [32] * 10 + [256] * 40
    assert accordion_schedule("ResNet-18", 32, 200).tolist() == expected
    # ResNet-50: e mod 30 < 10 critical; e <= 30 warm-up
    expected = [16] * 40 + [128] * 20 + [16] * 10 + [128] * 20 + [16] * 10
    assert accordion_schedule("ResNet-50", 16, 100).tolist() == expected
    # LM: epochs < 10 critical, e <= 12 warm-up (0.3 x 40)
    assert accordion_schedule("LM", 5, 40).tolist() == [5] * 13 + [80] * 27
    assert accordion_schedule("LM", 5, 10).tolist() == [5] * 10
    # Recommendation from 2048: head 40, windows 60-69 and 80-89
    expected = [2048] * 40 + [8192] * 20 + [2048] * 10 + [8192] * 10 + [2048] * 10 + [8192] * 10
    assert accordion_schedule("Recommendation", 2048, 100).tolist() == expected
    # ResNet-18 from 256: head of 20 epochs, and it is already the largest size
    assert accordion_schedule("ResNet-18", 256, 50).tolist() == [256] * 50
    assert accordion_schedule("Transformer", 64, 50).tolist() == [64] * 50


def test_gns_schedules_by_hand() -> None:
    # ResNet-18 from 32 on 1 GPU: x2 from 21, x4 from 31, x8 from 51; the last epoch of a
    # later range is left at b0 (the code's loop breaks before assigning it)
    expected = [32] * 21 + [64] * 10 + [128] * 20 + [256] * 8 + [32]
    assert gns_schedule("ResNet-18", 32, 1, 60).tolist() == expected
    # the first range reaches the last epoch
    assert gns_schedule("ResNet-18", 32, 1, 25).tolist() == [32] * 21 + [64] * 4
    assert gns_schedule("ResNet-18", 32, 1, 21).tolist() == [32] * 21  # needs E > 21
    assert gns_schedule("LM", 40, 1, 15).tolist() == [40] * 11 + [80] * 4
    assert gns_schedule("ResNet-18", 32, 8, 100).tolist() == [32] * 100  # no case on 8 GPUs
    assert gns_schedule("Transformer", 16, 1, 100).tolist() == [16] * 100
    # Recommendation from 512: x2 21-40, x4 41-70, x8 71-90, x16 91-; capped at 8192
    expected = [512] * 21 + [1024] * 20 + [2048] * 30 + [4096] * 20 + [8192] * 8 + [512]
    assert gns_schedule("Recommendation", 512, 1, 100).tolist() == expected


def test_usable_batch_sizes() -> None:
    assert usable_batch_sizes("ResNet-18", 32, 1, "gns") == (32, 64, 128, 256)
    assert usable_batch_sizes("ResNet-18", 32, 8, "gns") == (32,)
    assert usable_batch_sizes("LM", 20, 1, "accordion") == (20, 80)
    assert usable_batch_sizes("Transformer", 16, 1, "accordion") == (16,)
    assert usable_batch_sizes("ResNet-50", 64, 1, "static") == (64,)


# ------------------------------------------------------------------------------ instances


def test_instance_fields_follow_the_rules() -> None:
    inst = generate_shockwave_instance(40, seed=2)
    table = load_gavel_throughputs()
    samples = {"ResNet-18": 50_000, "ResNet-50": 100_000, "Transformer": 10_000,
               "LM": 59_675, "Recommendation": 117_907}
    assert inst.params.round_s == 120 and inst.params.window_rounds == 20
    assert inst.cluster.accelerators["v100"].count == 32
    draws = draw_shockwave_jobs(40, seed=2)
    for i, job in enumerate(inst.jobs):
        model, b0 = job.job_type.split(" (batch size ")[0], int(job.job_type[:-1].split()[-1])
        sf = job.scale_factor
        assert job.adaptation == draws.mode[i] and job.arrival == draws.arrival_s[i]
        t0 = table.throughput(job.job_type, sf)["v100"]
        steps = int(draws.duration_s[i] * t0)
        assert job.total_steps == steps
        assert job.epochs == math.ceil(steps / math.ceil(samples[model] / b0))
        assert job.batch_schedule is not None and job.regimes is not None
        assert len(job.batch_schedule) == job.epochs and job.batch_schedule[0] == b0
        assert set(job.batch_schedule) <= {int(b) for b in job.regimes}
        for b, seconds in job.regimes.items():
            t = table.throughput(f"{model} (batch size {b})", sf)["v100"]
            assert seconds == pytest.approx(samples[model] / int(b) / t, rel=1e-9)


def test_missing_throughput_uses_the_smaller_gang() -> None:
    # LM at batch size 20 on 8 GPUs is not in Gavel's table; seed 67 draws it as job 4
    draws = draw_shockwave_jobs(5, seed=67)
    i = 4
    assert JOB_TEMPLATES[int(draws.template[i])] == ("LM", 20) and draws.scale_factor[i] == 8
    inst = generate_shockwave_instance(i + 1, seed=67)
    job = inst.jobs[i]
    four = load_gavel_throughputs().throughput("LM (batch size 20)", 4)["v100"]
    assert job.throughput["v100"] == four
    assert "LM (batch size 20) on 8 GPUs uses its 4-GPU throughput" in (inst.description or "")


def test_same_seed_same_instance_other_seed_other() -> None:
    a = generate_shockwave_instance(30, seed=5).to_dict()
    b = generate_shockwave_instance(30, seed=5).to_dict()
    c = generate_shockwave_instance(30, seed=6).to_dict()
    assert a == b
    assert a["jobs"] != c["jobs"]


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"num_jobs": -1}, "num_jobs"),
    ({"seed": -3}, "seed"),
    ({"mean_gap_s": -40.0}, "mean_gap_s"),
    ({"mode_mix": {"static": 0.5, "gns": 0.4}}, "mode_mix"),
    ({"mode_mix": {"dynamic": 1.0}}, "mode_mix"),
    ({"scale_factor_mix": {1: 0.5, 3: 0.5}}, "scale_factor_mix"),
    ({"num_durations": 2}, "num_durations"),
    ({"min_duration_h": 0.0}, "min_duration_h"),
    ({"max_duration_h": 0.1}, "max_duration_h"),
    ({"cluster": {"tpu": 8}}, "cluster.tpu"),
    ({"cluster": {"v100": -2}}, "cluster.v100"),
    ({"round_s": 0.0}, "round_s"),
    ({"window_rounds": 0}, "window_rounds"),
])
def test_bad_parameters_give_one_input_error_naming_the_field(kwargs: dict, field: str) -> None:
    args = {"num_jobs": 5, **kwargs}
    with pytest.raises(InputError) as info:
        generate_shockwave_instance(**args)
    assert info.value.field == field


def _assert_close(a: object, b: object, where: str = "") -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _assert_close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_close(x, y, f"{where}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9), where
    else:
        assert a == b, where


def test_shipped_examples_regenerate(tmp_path: Path) -> None:
    written = write_example_instances(tmp_path)
    assert sorted(p.name for p in written) == sorted(p.name for p in EXAMPLES.glob("*.json"))
    for path in written:
        fresh, shipped = load_instance(path), load_instance(EXAMPLES / path.name)
        _assert_close(fresh.to_dict(), shipped.to_dict(), path.name)
    canonical = load_instance(EXAMPLES / "canonical-120jobs-32gpus.json")
    assert len(canonical.jobs) == 120 and canonical.cluster.total_gpus == 32


def test_cli_simulates_the_shockwave_workload(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from schedlab.cli import main

    out_file = tmp_path / "runs.csv"
    code = main(["simulate", "--workload", "shockwave", "--jobs", "6", "--policy", "fifo",
                 "--quiet", "--out", str(out_file)])
    out = capsys.readouterr().out
    assert code == 0
    assert "jobs_per_hour=90" in out  # the canonical 40 s mean gap
    import pandas as pd

    runs = pd.read_csv(out_file)
    # the command line's default throughputs are Shockwave's own (shockwave-tacc)
    expected = generate_shockwave_instance(6, seed=0, throughputs="shockwave-tacc")
    by_id = {str(row.job): row for row in runs.itertuples()}
    assert sorted(by_id) == sorted(j.id for j in expected.jobs)
    for job in expected.jobs:
        row = by_id[job.id]
        assert row.job_type == job.job_type and row.arrival == job.arrival
    # job 0 starts at once on the empty cluster and runs its batch-size schedule: its JCT is
    # the sum of its epochs' seconds
    first = expected.jobs[0]
    assert first.regimes is not None and first.batch_schedule is not None
    alone = sum(first.regimes[str(b)] for b in first.batch_schedule)
    assert by_id["0"].jct == pytest.approx(alone, rel=1e-9)
