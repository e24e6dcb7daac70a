"""Where a switch's seconds go: the parts of a warm switch, timed one by one, and what a new
process pays before it can build a model.

    python scripts/switch_breakdown.py --sizes tiny,small --batch-size 8 --repeats 5

Per zoo job (one process, ``--cpu-threads`` torch threads, medians over ``--repeats``):
``build`` (model + optimizer, random init), ``load`` (read + sha256 + ``torch.load`` of the
checkpoint), ``state`` (``load_state_dict`` of model and optimizer), ``first step`` (the
step right after loading) and ``step`` (a step of a job that has been running, the median of
the next steps).  Then, each in a new interpreter timed from the parent: ``python -c pass``,
``import torch`` and ``import schedlab.profiler.switching`` (what the spawn child imports).
Prints a Markdown table; docs/switch-costs.md quotes it.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from schedlab.profiler.checkpoint import load_latest
from schedlab.profiler.switching import prepare_switch_files
from schedlab.profiler.zoo import MODELS, JobSpec, TrainingJob


def _interpreter_seconds(code: str, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _parts(spec: JobSpec, folder: Path, repeats: int) -> dict[str, float]:
    files = prepare_switch_files(spec, folder)
    samples: dict[str, list[float]] = {k: [] for k in ("build", "load", "state", "first", "step")}
    for _ in range(repeats):
        with torch.random.fork_rng(devices=[]):
            t0 = time.perf_counter()
            job = TrainingJob(spec, seed=0)
            t1 = time.perf_counter()
            restored = load_latest(files.checkpoint_folder)
            t2 = time.perf_counter()
            assert restored.state is not None
            job.load_state(restored.state)
            t3 = time.perf_counter()
            job.step()
            t4 = time.perf_counter()
            steps = []
            for _ in range(3):
                s = time.perf_counter()
                job.step()
                steps.append(time.perf_counter() - s)
        for key, value in (("build", t1 - t0), ("load", t2 - t1), ("state", t3 - t2),
                           ("first", t4 - t3), ("step", statistics.median(steps))):
            samples[key].append(value)
    return {key: statistics.median(values) for key, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--sizes", default="tiny,small")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cpu-threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.cpu_threads)

    lines = ["| job | build | load | state | first step | step |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    with tempfile.TemporaryDirectory() as workdir:
        for size in args.sizes.split(","):
            for model in args.models.split(","):
                spec = JobSpec(model, size, args.batch_size)
                parts = _parts(spec, Path(workdir), args.repeats)
                lines.append(f"| {spec.name} | " + " | ".join(
                    f"{parts[k]:.4f}" for k in ("build", "load", "state", "first", "step"))
                    + " |")
    lines += ["", "| new interpreter | seconds |", "| --- | ---: |"]
    for label, code in (("python -c pass", "pass"), ("import torch", "import torch"),
                        ("import schedlab.profiler.switching",
                         "import schedlab.profiler.switching")):
        lines.append(f"| {label} | {_interpreter_seconds(code, args.repeats):.3f} |")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
