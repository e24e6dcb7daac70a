"""Measure the four switch kinds of zoo jobs into a throughput file (resumable).

    python scripts/measure_switches.py --out results/switches.json \\
        --models resnet18,resnet50,transformer,lstm,recommender,gpt --sizes tiny,small \\
        --batch-size 8 --repeats 3

Each job's four cells (cold, pipelined, warm, resident) are measured with
:func:`schedlab.profiler.switching.measure_switches` and written into the file before the
next job starts; a job whose four cells are already in the file is skipped, so a run that
stops can be restarted with the same command.  ``schedlab profile-table FILE`` prints the
table.  docs/switch-costs.md holds the numbers this produced.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

from schedlab.profiler.matrix import (
    SWITCH_KINDS,
    ThroughputFile,
    current_host,
    load_throughputs,
)
from schedlab.profiler.switching import measure_switches
from schedlab.profiler.zoo import JobSpec

log = logging.getLogger("measure_switches")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--models", default="resnet18,resnet50,transformer,lstm,recommender,gpt")
    parser.add_argument("--sizes", default="tiny,small")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--cpu-threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="device label")
    parser.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    devices = {args.device: "CPU worker process" if args.backend == "cpu" else "cuda:0"}
    data = (load_throughputs(args.out) if args.out.exists()
            else ThroughputFile(host=current_host(args.cpu_threads, devices)))
    for size in args.sizes.split(","):
        for model in args.models.split(","):
            spec = JobSpec(model, size, args.batch_size)
            done = [data.switch_seconds(spec.name, args.device, k) for k in SWITCH_KINDS]
            if all(value is not None for value in done):
                log.info("%s: in the file already", spec.name)
                continue
            with tempfile.TemporaryDirectory() as workdir:
                cells = measure_switches(spec, args.device, args.backend, SWITCH_KINDS,
                                         repeats=args.repeats, cpu_threads=args.cpu_threads,
                                         workdir=Path(workdir), warmup=args.warmup)
            for cell in cells:
                data.upsert(cell)
                log.info("%s %s: %s s (%s)", spec.name, cell.switch, cell.seconds, cell.status)
            data.save(args.out)


if __name__ == "__main__":
    main()
