"""Convert TitanSched's fine-tuning trajectories (``common/cache/hpo_task_info.npy``) into
``schedlab/data/titan/hpo_trajectories.json.gz``.

The ``.npy`` file holds a pickled dict ``{model: {dataset: {lr: {gradient steps: {metric:
[values], metric + "_epoch": [epochs], ...}}}}}``; it is read with schedlab's restricted
unpickler (plain data only, nothing of the file's runs).  Kept: for the 36 (model, dataset)
pairs the twelve traces of ``trace/main.zip`` use, every (lr, gradient steps) trajectory of the
dataset's metric as the code picks it (``standarized_metric``: F1 for MRPC and QQP, Pearson for
STS-B, accuracy otherwise), values and epochs as the same doubles.

Usage: python scripts/convert_titan_hpo.py <TitanSched checkout> <output .json.gz>
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from schedlab.analysis.safe_pickle import load_restricted
from schedlab.workloads.titan_paper import metric_key


def read_npy_pickle(path: Path) -> object:
    """The object pickled in a ``.npy`` file of dtype object, read restrictedly."""
    with open(path, "rb") as handle:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            np.lib.format.read_array_header_1_0(handle)
        else:
            np.lib.format.read_array_header_2_0(handle)
        stream = handle.read()
    with tempfile.NamedTemporaryFile(suffix=".pkl") as tmp:
        tmp.write(stream)
        tmp.flush()
        array = load_restricted(tmp.name)
    return array.tolist() if hasattr(array, "tolist") else array


def main(checkout: str, out: str) -> None:
    root = Path(checkout)
    report = read_npy_pickle(root / "common" / "cache" / "hpo_task_info.npy")
    assert isinstance(report, dict)
    used: set[tuple[str, str]] = set()
    for trace in sorted((root / "trace" / "main").glob("FM-*/workload-0.csv")):
        with open(trace, encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                model, dataset = row["application"].split("@")
                used.add((model, dataset))
    data: dict[str, dict[str, dict[str, dict[str, object]]]] = {}
    for model, dataset in sorted(used):
        key = metric_key(dataset)
        for lr, by_steps in report[model][dataset].items():
            for steps, trajectory in by_steps.items():
                data.setdefault(model, {}).setdefault(dataset, {}).setdefault(lr, {})[
                    str(steps)] = {"metric": key,
                                   "values": [float(v) for v in trajectory[key]],
                                   "epochs": [float(e) for e in trajectory[key + "_epoch"]]}
    text = json.dumps(data, separators=(",", ":"), sort_keys=True)
    with gzip.GzipFile(out, "wb", mtime=0) as handle:
        handle.write(text.encode("utf-8"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
