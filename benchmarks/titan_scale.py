"""Titan's round ILP at scale: 64, 256 and 1 024 runnable tasks on as many GPUs.

Usage::

    python benchmarks/titan_scale.py            # all three sizes (about a minute here)
    python benchmarks/titan_scale.py --quick    # 64 and 256 only (about 10 s)

It prints one line per (size, variant) as it finishes, the last column the seconds since the
start; nothing is written unless ``--json FILE`` asks for it.

**Rounds.**  n tasks on a pool of G = n GPUs (the runnable set is capped at G, as in the
code, so n = G is the largest round a pool of G holds), a 120 s round.  Tasks are drawn with
``numpy.random.default_rng(seed)`` (seed 0), one at a time:

* base model: one of vit-base, vit-large (image label sets: CIFAR-10, CIFAR-100,
  Fashion-MNIST, ImageNette, Food-101, Cat-vs-Dog) or roberta-base, roberta-large (text:
  AG News, DBpedia-14, TREC, Yahoo Answers, Emotion), uniformly; a label set of its kind
  uniformly; its own dataset name (no two tasks share a dataset);
* requested GPUs r: 1 (40%), 2 (10%), 4 (5%), 8 (40%), 16 (5%); its duration on r GPUs
  log-uniform in [5 min, 10 h]; the profile {1, 2, 4, 8, 16, 32}: d(a) = d(r) (r/a)^0.85
  (sub-linear scaling); ``max_gpus`` = min(32, 4 r);
* 75% have started (a fraction of work left uniform in (0.05, 1)), 25% are pending and
  unstarted -- only those can merge.

**Variants** (each one run, the solve's wall time as reported by HiGHS through the matrix
model, and ``build`` = the G cap, the merge candidates and the arrays):

* ``none``: no merge candidates (Titan without the merger);
* ``code``: the merge rule as the code applies it (benefit >= 1.1, then the log10 row rule:
  with the default joint-epoch factor 1/1.55, beta <= 1.1625, so at most a few pairs pass);
* ``all``: every pair the rule admits without the row rule (same base model, unstarted,
  similarity >= 0.55, beta >= 1.1): a stress test with many pair columns.

The ``pyomo`` column times the same ILP built as a Pyomo model (``RoundIlp.build``'s rows from
the same arrays) and solved through the persistent Pyomo interface (the baseline the matrix
path is compared with); ``ratio`` = pyomo / matrix (wall, build + solve).  Objectives of the
two are compared (they solve the same ILP).  Target: 256 tasks on 256 GPUs in <= 1 s per
round, proven optimal (else the gap stated).  Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import math
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyomo.environ as pyo

from schedlab.formulations.arrays import add_rows, linear_expression
from schedlab.formulations.titan.merge import MergeRule
from schedlab.formulations.titan.round_ilp import round_problem, solve_problem
from schedlab.formulations.titan.tasks import TitanTask
from schedlab.instance import write_json_atomic
from schedlab.solvers import PersistentSolver, SolverOptions

log = logging.getLogger("titan_scale")

IMAGE = ["cifar10", "cifar100", "fashion_mnist", "imagenette", "food101", "cat_vs_dog"]
TEXT = ["ag_news", "dbpedia14", "trec_coarse", "yahoo_answers", "emotion"]
MODELS = {"vit-base": IMAGE, "vit-large": IMAGE, "roberta-base": TEXT,
          "roberta-large": TEXT}
REQUESTS = ([1, 2, 4, 8, 16], [0.40, 0.10, 0.05, 0.40, 0.05])
COUNTS = (1, 2, 4, 8, 16, 32)
ROUND_S = 120.0
SIZES = (64, 256, 1024)


def make_tasks(n: int, seed: int = 0) -> list[TitanTask]:
    """n tasks of the module docstring."""
    from schedlab.world.concept_hierarchy import label_sets

    sets = label_sets()
    rng = np.random.default_rng(seed)
    tasks = []
    for i in range(n):
        model = str(rng.choice(list(MODELS)))
        label_set = str(rng.choice(MODELS[model]))
        request = int(rng.choice(REQUESTS[0], p=REQUESTS[1]))
        at_request = float(np.exp(rng.uniform(np.log(300.0), np.log(36000.0))))
        profile = {a: at_request * (request / a) ** 0.85 for a in COUNTS}
        started = bool(rng.random() < 0.75)
        remaining = float(rng.uniform(0.05, 1.0)) if started else 1.0
        tasks.append(TitanTask(
            id=f"t{i}", base_model=model, classes=tuple(sets[label_set]), duration_s=profile,
            max_gpus=min(32, 4 * request), label_set=label_set, dataset=f"{label_set}-{i}",
            remaining=remaining, started=started))
    return tasks


@dataclass
class Row:
    """One measured round."""

    tasks: int
    gpus: int
    variant: str
    pairs: int
    columns: int
    build_s: float
    solve_s: float
    status: str
    gap: float | None
    objective: float | None
    pyomo_s: float | None = None
    pyomo_objective: float | None = None


def pyomo_solve(problem: Any, options: SolverOptions) -> tuple[float, float | None]:
    """The same ILP as a Pyomo model through the persistent interface: (wall s, objective)."""
    t0 = time.perf_counter()
    lower, _, cost, integer = problem.lower_upper_cost()
    m = pyo.ConcreteModel()
    m.v = pyo.Var(range(len(lower)), bounds=(0, 1),
                  domain=lambda _, i: pyo.Binary if integer[i] else pyo.Reals)
    columns = [m.v[i] for i in range(len(lower))]
    for name, matrix, lo, up in problem.rows():
        add_rows(m, name, matrix, columns, lo, up)
    m.objective = pyo.Objective(expr=linear_expression(cost, columns), sense=pyo.minimize)
    result = PersistentSolver(options).solve(m)
    return time.perf_counter() - t0, result.objective


def warm_similarity() -> MergeRule:
    """A rule whose similarity cache holds S of every two label sets of one kind (an online
    policy keeps its rule from round to round, so it pays each S once)."""
    from schedlab.world.concept_hierarchy import label_sets

    sets = label_sets()
    rule = MergeRule()
    for kind in (IMAGE, TEXT):
        for a, b in itertools.combinations_with_replacement(kind, 2):
            one = TitanTask(id="a", base_model="m", classes=tuple(sets[a]), duration_s={1: 1.0},
                            max_gpus=1, label_set=a)
            two = TitanTask(id="b", base_model="m", classes=tuple(sets[b]), duration_s={1: 1.0},
                            max_gpus=1, label_set=b)
            rule.similarity_of(one, two)
    return rule


def run(size: int, variant: str, tasks: list[TitanTask], options: SolverOptions,
        baseline: bool, warm: MergeRule) -> Row:
    rule = None
    if variant != "none":
        rule = MergeRule(row_rule=(variant == "code"))
        rule._cache.update(warm._cache)
    t0 = time.perf_counter()
    problem = round_problem(tasks, size, ROUND_S, rule=rule)
    prepared = time.perf_counter() - t0
    decision = solve_problem(problem, options)
    row = Row(tasks=len(tasks), gpus=size, variant=variant, pairs=len(problem.pairs),
              columns=problem.num_x + problem.num_tasks, build_s=prepared + decision.build_s,
              solve_s=decision.solve_s, status=decision.status.value, gap=decision.gap,
              objective=decision.objective)
    if baseline:
        row.pyomo_s, row.pyomo_objective = pyomo_solve(problem, options)
    return row


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else \
        format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="64 and 256 tasks only")
    parser.add_argument("--no-pyomo", action="store_true", help="skip the Pyomo baseline")
    parser.add_argument("--json", "--out", dest="json", type=Path, default=None, metavar="FILE",
                        help="write the rows as JSON")
    parser.add_argument("--time-limit", type=float, default=30.0,
                        help="per solve, s (the code's max_seconds; default 30)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    options = SolverOptions(time_limit_s=args.time_limit)
    t0 = time.perf_counter()
    warm = warm_similarity()
    log.info("similarity of every two label sets of a kind: %.2f s (once; not in the rows)",
             time.perf_counter() - t0)
    rows = []
    header = (f"{'tasks':>6} {'GPUs':>5} {'variant':>7} {'pairs':>6} {'columns':>8} "
              f"{'build s':>8} {'solve s':>8} {'status':>10} {'gap':>9} {'pyomo s':>8} "
              f"{'ratio':>6} {'obj diff':>9} {'elapsed s':>9}")
    print(header, flush=True)
    for size in SIZES[:2] if args.quick else SIZES:
        tasks = make_tasks(size)
        for variant in ("none", "code", "all"):
            row = run(size, variant, tasks, options, baseline=not args.no_pyomo, warm=warm)
            rows.append(row)
            total = row.build_s + row.solve_s
            ratio = row.pyomo_s / total if row.pyomo_s else None
            diff = None
            if row.pyomo_objective is not None and row.objective is not None:
                diff = abs(row.pyomo_objective - row.objective) / max(1.0, abs(row.objective))
            print(f"{row.tasks:>6} {row.gpus:>5} {row.variant:>7} {row.pairs:>6} "
                  f"{row.columns:>8} {row.build_s:>8.3f} {row.solve_s:>8.3f} "
                  f"{row.status:>10} {fmt(row.gap, '.1e'):>9} {fmt(row.pyomo_s, '.3f'):>8} "
                  f"{fmt(ratio, '.1f'):>6} {fmt(diff, '.1e'):>9} "
                  f"{time.perf_counter() - t0:>9.1f}", flush=True)
    if args.json is not None:
        write_json_atomic(args.json, {"machine": platform.platform(),
                                      "load_average": os.getloadavg()[0],
                                      "rows": [asdict(r) for r in rows]})
        log.info("wrote %s", args.json)


if __name__ == "__main__":
    main()
