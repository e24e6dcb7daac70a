"""Sia (Jayaram Subramanya et al., SOSP'23), Table 4 (and Table 3's Philly row): Sia, Pollux
and Gavel with TunedJobs on Sia's Philly workloads, with the metrics of Sia's
``print_run_stats.py``.

The paper's Table 4 (homogeneous cluster, 16 nodes x 4 T4, Philly workloads; average JCT /
p99 JCT / makespan / GPU-hours per job): Sia 1.9 h / 18.1 h / 21.4 h / 8.4, Pollux 2.0 / 19.3
/ 21.7 / 8.6, Gavel+TunedJobs 4.3 / 37.1 / 44.3 / 15.3 (Shockwave+TJ 3.6 / 32.8 / 35.0 / 12.5,
Themis+TJ 5.4 / 44.7 / 49.7 / 17.2).  Table 3 (heterogeneous: 6 x 4 aws + 2 x 8 dgx-ext +
3 x 8 rtx, Philly row): Sia 0.6 ± 0.1 h / 9.5 h / 14.2 ± 1.9 h / 4.0 ± 0.7, contention 6.9
(31); Pollux 1.0 ± 0.1 / 14.9 / 24.5 ± 7.9 / 5.6 ± 1.1, 7.2 (42); Gavel+TunedJobs 1.9 ± 0.3
/ 30.0 / 33.8 ± 8.6 / 9.0 ± 6.3, 9.9 (56).  No run output is stored in Sia's repository.

**What is run** (the cells, metrics and cache of :mod:`schedlab.analysis.tables.pollux`):
Sia's Philly workloads 1-8 by its recipe (:func:`~schedlab.workloads.goodput.
sia_philly_workload`: Pollux's workloads with every NCF job a CIFAR-10 one; Sia's own files
differ from the recipe in at most 5 other rows each and are not shipped), in Sia's world
(its job model: calibrated progress, per-application checkpoint-restore, a restart only when
a job's type or GPUs per node change), on 16 x 4 aws GPUs: ``sia`` (p = -0.5, HiGHS) and
``pollux`` (seeded) at 60 s rounds, ``gavel.max_min_fairness`` as TunedJobs at 360 s rounds
(Sia's ``--interval=360`` for Gavel).  The ``heterogeneous`` variant runs Table 3's cluster
from a user's checkout of Sia's per-type profiles (``settings.profiles``: its
``sia-simulator/traces`` folder, which schedlab cannot ship: the repository has no licence);
Pollux is left out there (Sia's heterogeneous Pollux is its Pollux-unaware variant, not
implemented).

**Metrics** as ``print_run_stats.py``: average JCT pooled over every job of every workload
(± = numpy's std of the workloads' averages), p99 = ``sorted(all)[int(0.99 n)]``, makespan
per workload = max(submission + JCT) - min(submission), averaged; GPU-hours per job = the
GPUs held in every round x the round length over the jobs (whole rounds; Sia's script takes
the interval from its ``--interval``, here each run's own); restarts per job; contention =
jobs submitted and not finished per round, the mean of the workloads' means and the max.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from schedlab.analysis.experiments.kind import TableKind
from schedlab.analysis.experiments.spec import Experiment
from schedlab.analysis.tables.cells import ratio
from schedlab.analysis.tables.output import Block, Document, Heading, pm
from schedlab.analysis.tables.pollux import (
    CELLS_FOLDER,
    CellResult,
    GoodputSettings,
    GoodputTable,
    Row,
    cell_result_key,
    change,
    compute_cell,
    describe_cell,
    goodput_table,
    hours,
    measured_block,
    plan_goodput_cells,
    ran_text,
    read_goodput_settings,
    to_frame,
    unfinished_note,
)

STEM = "sia"
#: Sia's Table 4 (homogeneous, Philly): policy -> avg JCT, p99 JCT, makespan (h), GPU-h/job.
PAPER_TABLE4: Mapping[str, Mapping[str, str]] = {
    "sia": {"avg_jct": "1.9", "p99": "18.1", "makespan": "21.4", "gpu_hours": "8.4"},
    "pollux": {"avg_jct": "2.0", "p99": "19.3", "makespan": "21.7", "gpu_hours": "8.6"},
    "gavel.max_min_fairness": {"avg_jct": "4.3", "p99": "37.1", "makespan": "44.3",
                               "gpu_hours": "15.3"},
    "shockwave": {"avg_jct": "3.6", "p99": "32.8", "makespan": "35.0", "gpu_hours": "12.5"},
    "themis": {"avg_jct": "5.4", "p99": "44.7", "makespan": "49.7", "gpu_hours": "17.2"},
}
#: Sia's Table 3 (heterogeneous), Philly row: the same and contention mean (max).
PAPER_TABLE3: Mapping[str, Mapping[str, str]] = {
    "sia": {"avg_jct": "0.6 ± 0.1", "p99": "9.5", "makespan": "14.2 ± 1.9",
            "gpu_hours": "4.0 ± 0.7", "contention": "6.9 (31)"},
    "pollux": {"avg_jct": "1.0 ± 0.1", "p99": "14.9", "makespan": "24.5 ± 7.9",
               "gpu_hours": "5.6 ± 1.1", "contention": "7.2 (42)"},
    "gavel.max_min_fairness": {"avg_jct": "1.9 ± 0.3", "p99": "30.0", "makespan": "33.8 ± 8.6",
                               "gpu_hours": "9.0 ± 6.3", "contention": "9.9 (56)"},
}
#: The paper's tables by ``settings.paper_table``: (caption, numbers, labels of the rows).
PAPERS: Mapping[str, tuple[str, Mapping[str, Mapping[str, str]]]] = {
    "4": ("Sia (SOSP'23) Table 4: homogeneous cluster (16 x 4 T4), Philly workloads",
          PAPER_TABLE4),
    "3": ("Sia (SOSP'23) Table 3: heterogeneous cluster (6 x 4 T4 + 2 x 8 A100 + 3 x 8 "
          "RTX), Philly row", PAPER_TABLE3),
}
#: The paper's row labels.
PAPER_LABELS: Mapping[str, str] = {
    "sia": "Sia", "pollux": "Pollux", "gavel.max_min_fairness": "Gavel+TunedJobs",
    "shockwave": "Shockwave+TunedJobs", "themis": "Themis+TunedJobs"}


def sia_settings(spec: Experiment) -> GoodputSettings:
    """The table's settings from ``sia.yaml`` (module docstring)."""
    base = GoodputSettings(table=STEM, generator="sia.philly", world="sia", reference="sia",
                           paper_table="4", makespan_from_first_submission=True)
    settings = read_goodput_settings(spec, table=STEM, base=base,
                                     settings_keys=("profiles", "paper_table"))
    if settings.paper_table == "stored":
        settings = replace(settings, paper_table="4")
    return settings


def document(table: GoodputTable) -> Document:
    """Sia's table: what was run, the measured rows beside the paper's, the paper's table."""
    cfg = table.settings
    seeds = len(cfg.seeds)
    caption, paper = PAPERS[cfg.paper_table]
    reference = table.reference
    ref_label = next(label for label, name, _ in cfg.policies if name == reference)
    rules = (f"world {cfg.world!r} (Sia's job model: calibrated progress, per-application "
             "checkpoint-restore, a restart only when a job's type or GPUs per node change)")
    parts: list[str | Heading | Block] = [
        ran_text(cfg, rules),
        "As Sia's print_run_stats.py: avg JCT pooled over every job of every workload (σ "
        "workloads = numpy std of the workloads' averages); p99 = sorted(all)[int(0.99 n)]; "
        "makespan = max(submission + JCT) - min(submission) per workload, averaged; GPU-h/job "
        "= GPUs held x round length summed over the rounds (whole rounds), over the jobs; "
        "restarts/job; contention = jobs submitted and not finished per round, mean of the "
        "workloads' means (max).",
        Heading(caption),
    ]
    columns: list[tuple[str, str, Callable[[Row], str]]] = [
        ("avg JCT (h)", "avg_jct", lambda r: hours(r, "avg_jct_s", seeds)),
        ("σ workloads (h)", "", lambda r: hours(r, "avg_jct_workload_std_s", seeds)),
        ("p99 JCT (h)", "p99", lambda r: hours(r, "p99_jct_s", seeds)),
        ("makespan (h)", "makespan", lambda r: hours(r, "makespan_s", seeds)),
        ("GPU-h/job", "gpu_hours", lambda r: pm(r.mean["gpu_hours_per_job"],
                                                r.std["gpu_hours_per_job"], ".1f", 1.0, seeds)),
        ("restarts/job", "", lambda r: pm(r.mean["restarts_per_job"],
                                          r.std["restarts_per_job"], ".2f", 1.0, seeds)),
        ("contention mean (max)", "contention" if cfg.paper_table == "3" else "",
         lambda r: f"{r.mean['contention_mean']:.1f} ({r.mean['contention_max']:.0f})"),
        (f"avg JCT vs {ref_label}", "", lambda r: change(r.mean["avg_jct_ratio"])),
        ("wall (s)", "", lambda r: f"{r.wall_s:.1f}"),
    ]
    parts.append(measured_block(table, paper, columns))
    parts += unfinished_note(table)
    if cfg.jobs is not None:
        parts.append(f"This run takes the first {cfg.jobs} jobs of each workload: the paper's "
                     "numbers are for all 160 jobs of 8 workloads, so compare directions only.")
    parts.append(Heading("The paper's numbers"))
    keys = ["avg_jct", "p99", "makespan", "gpu_hours"] + (
        ["contention"] if cfg.paper_table == "3" else [])
    titles = {"avg_jct": "avg JCT (h)", "p99": "p99 JCT (h)", "makespan": "makespan (h)",
              "gpu_hours": "GPU-h/job", "contention": "contention mean (max)"}
    parts.append(Block(header=["policy", *(titles[k] for k in keys)],
                       rows=[[PAPER_LABELS[name], *(numbers[k] for k in keys)]
                             for name, numbers in paper.items()]))
    sia, pollux = table.row("sia"), table.row("pollux")
    if sia is not None and pollux is not None:
        parts.append(
            f"Sia vs Pollux average JCT: measured "
            f"{change(ratio(sia.mean['avg_jct_s'], pollux.mean['avg_jct_s']))}; restarts per "
            f"job {sia.mean['restarts_per_job']:.2f} vs {pollux.mean['restarts_per_job']:.2f} "
            "(the paper, §5.4: 2.6 vs 5.1).")
    if cfg.paper_table == "3" and pollux is None:
        parts.append("Pollux's row of Table 3 is Sia's Pollux-unaware (8-GPU nodes split "
                     "into 4-GPU virtual nodes, one merged model per job), which is not "
                     "implemented: the pollux policy plans one GPU type.")
    cluster = "heterogeneous" if len(cfg.cluster) > 1 else "homogeneous"
    return Document(title=f"Sia (SOSP'23) Table {cfg.paper_table}: the Philly workloads on a "
                    f"{cluster} cluster", parts=parts)


KIND = TableKind(
    name=STEM, settings=sia_settings, plan=plan_goodput_cells, compute=compute_cell,
    dump=CellResult.to_json, load=CellResult.from_json, key=cell_result_key,
    describe=describe_cell, reduce=goodput_table, document=document, frame=to_frame,
    seeds=lambda settings: settings.seeds, cells_folder=CELLS_FOLDER)
