"""Titan's round ILP against an enumerator written here, on random small rounds.

The enumerator re-derives everything from the definitions (docs/formulations/titan.md):
the G cap (shortest T_rem at 1 GPU first), the options {1, 2, 3} u {4, 8, ..} up to
max_gpus, the merge rule with its row threshold, the costs max(T_rem, Delta) / (T_fair beta)
and both objectives -- the per-task one (U per task left out) and the public code's (a 0
option of cost U per task and 2U per pair) -- over every assignment.  The similarity is a
random table injected into the rule.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass

import pytest

from schedlab.formulations.titan.merge import MergeRule
from schedlab.formulations.titan.round_ilp import round_problem, solve_round
from schedlab.formulations.titan.tasks import TitanTask
from schedlab.solution import Status
from schedlab.solvers import SolverOptions

EXACT = SolverOptions(mip_gap=1e-9)
U = 1e4


# ------------------------------------------------------------------ the reference, by hand


def ref_duration(profile: dict[int, float], a: float) -> float:
    """Linear in 1/a between points; flat above; GPU-seconds kept below."""
    counts = sorted(profile)
    if a <= counts[0]:
        return profile[counts[0]] * counts[0] / a
    if a >= counts[-1]:
        return profile[counts[-1]]
    for lo, hi in itertools.pairwise(counts):
        if lo <= a <= hi:
            t = (1 / a - 1 / lo) / (1 / hi - 1 / lo)
            return profile[lo] + t * (profile[hi] - profile[lo])
    raise AssertionError("unreachable")


def ref_options(limit: int, gpus: int) -> list[int]:
    return [a for a in [1, 2, 3, *range(4, gpus + 1, 4)] if a <= min(limit, gpus)]


@dataclass
class RefCandidate:
    members: tuple[int, ...]       # task positions in the round
    options: list[int]
    cost: dict[int, float]


def reference(tasks: list[TitanTask], gpus: int, round_s: float,
              similarity: dict[frozenset[str], float] | None, threshold: float,
              phi: float) -> tuple[list[str], list[RefCandidate]]:
    """(ids in the round, candidates with their non-zero options and costs)."""
    one_gpu = [t.remaining * ref_duration(dict(t.duration_s), 1) for t in tasks]
    ordered = sorted(range(len(tasks)), key=lambda i: (one_gpu[i], i))
    inside = sorted(ordered[:gpus])  # back to the given order
    n = len(inside)
    fair = max(1, gpus // n)
    cands: list[RefCandidate] = []
    for pos, i in enumerate(inside):
        t = tasks[i]
        prof = dict(t.duration_s)
        t_fair = max(t.remaining * ref_duration(prof, min(fair, t.max_gpus)), round_s)
        opts = ref_options(t.max_gpus, gpus)
        cands.append(RefCandidate((pos,), opts, {
            a: max(t.remaining * ref_duration(prof, a), round_s) / t_fair for a in opts}))
    if similarity is not None:
        rows = 0
        for p, q in itertools.combinations(range(n), 2):
            a, b = tasks[inside[p]], tasks[inside[q]]
            if a.base_model != b.base_model or a.started or b.started or a.dataset == b.dataset:
                continue
            if similarity[frozenset((a.id, b.id))] < threshold:
                continue
            limit = a.max_gpus + b.max_gpus
            need = 1.1 if rows < 10 else max(1.1, math.log10(rows) + 0.1)
            pa, pb = dict(a.duration_s), dict(b.duration_s)

            def merged(g: float, pa: dict[int, float] = pa, pb: dict[int, float] = pb) -> float:
                return phi * (ref_duration(pa, g) + ref_duration(pb, g))

            def beta(g: int, a: TitanTask = a, b: TitanTask = b,
                     pa: dict[int, float] = pa, pb: dict[int, float] = pb) -> float:
                ma, mb = ref_duration(pa, min(g, a.max_gpus)), ref_duration(pb, min(g, b.max_gpus))
                return (ma + mb + min(ma, mb)) / (2 * merged(g))

            opts = [g for g in ref_options(limit, gpus) if beta(g) >= need]
            if not opts:
                continue
            t_fair = max(merged(min(fair, limit)), round_s)
            cands.append(RefCandidate((p, q), opts, {
                g: max(merged(g), round_s) / t_fair / beta(g) for g in opts}))
            rows += 1 + len(opts)
    return [tasks[i].id for i in inside], cands


def enumerate_round(n: int, gpus: int, cands: list[RefCandidate]) -> tuple[float, float, int]:
    """(min per-task objective, min code objective, feasible assignments), checking on every
    feasible assignment that code - per-task = 2 U P."""
    pairs = sum(1 for c in cands if len(c.members) == 2)
    best_task, best_code, count = math.inf, math.inf, 0
    for choice in itertools.product(*[[0, *c.options] for c in cands]):
        if sum(choice) > gpus:
            continue
        runs = [0] * n
        for c, a in zip(cands, choice, strict=True):
            if a:
                for m in c.members:
                    runs[m] += 1
        if max(runs, default=0) > 1:
            continue
        count += 1
        running = sum(c.cost[a] for c, a in zip(cands, choice, strict=True) if a)
        per_task = running + U * sum(1 - r for r in runs)
        code = running + sum(U * len(c.members) for c, a in zip(cands, choice, strict=True)
                             if not a)
        assert code - per_task == pytest.approx(2 * U * pairs, rel=1e-12)
        best_task, best_code = min(best_task, per_task), min(best_code, code)
    return best_task, best_code, count


# --------------------------------------------------------------------------- random rounds


def random_round(seed: int) -> tuple[list[TitanTask], int, dict[frozenset[str], float]]:
    rng = random.Random(seed)
    gpus = rng.choice([2, 3, 4, 6, 8])
    n = rng.randint(2, 4)
    tasks = []
    for i in range(n):
        counts = sorted(rng.sample([1, 2, 4, 8], rng.randint(1, 3)))
        base = rng.uniform(300, 900)
        profile = {c: base / c ** rng.uniform(0.5, 1.0) for c in counts}
        started = rng.random() < 0.2
        tasks.append(TitanTask(
            id=f"t{i}", base_model=rng.choice(["vit"] * 4 + ["roberta"]), classes=(f"c{i}",),
            duration_s=profile, max_gpus=rng.choice([max(counts), rng.randint(1, 8)]),
            dataset=rng.choice(["d0", "d1", "d2", "d3"]),
            remaining=rng.uniform(0.2, 1.0) if started else 1.0, started=started))
    similarity = {frozenset((a.id, b.id)): rng.random()
                  for a, b in itertools.combinations(tasks, 2)}
    return tasks, gpus, similarity


def rule_of(similarity: dict[frozenset[str], float], threshold: float = 0.3,
            phi: float = 0.55) -> MergeRule:
    def lookup(x: object, y: object, *_: object) -> float:
        return similarity[frozenset((f"t{x[0][1:]}", f"t{y[0][1:]}"))]  # type: ignore[index]

    return MergeRule(threshold=threshold, joint_epoch_factor=phi, similarity=lookup)


@pytest.mark.parametrize("seed", range(40))
def test_round_optimum_equals_enumeration(seed: int) -> None:
    tasks, gpus, similarity = random_round(seed)
    ids, cands = reference(tasks, gpus, 120.0, similarity, 0.3, 0.55)
    best_task, best_code, _ = enumerate_round(len(ids), gpus, cands)
    decision = solve_round(tasks, gpus, 120.0, rule=rule_of(similarity), options=EXACT)
    assert decision.status == Status.OPTIMAL
    assert sorted(decision.runnable) == sorted(ids)
    assert len(decision.candidates) == sum(1 for c in cands if len(c.members) == 2)
    assert decision.objective == pytest.approx(best_task, rel=1e-7)
    assert decision.code_objective == pytest.approx(best_code, rel=1e-9)


@pytest.mark.parametrize("seed", range(40))
def test_merging_is_never_worse_and_capacity_holds(seed: int) -> None:
    tasks, gpus, similarity = random_round(seed)
    with_merge = solve_round(tasks, gpus, 120.0, rule=rule_of(similarity), options=EXACT)
    alone = solve_round(tasks, gpus, 120.0, options=EXACT)
    assert with_merge.objective is not None and alone.objective is not None
    assert with_merge.objective <= alone.objective * (1 + 1e-7) + 1e-9
    by_id = {t.id: t for t in tasks}
    for decision in (with_merge, alone):
        used = sum(decision.gpus.values()) + sum(decision.pairs.values())
        assert used <= gpus
        for t, a in decision.gpus.items():
            assert a <= by_id[t].max_gpus
        for (a, b), g in decision.pairs.items():
            assert g <= by_id[a].max_gpus + by_id[b].max_gpus
            assert decision.gpus[a] == 0 and decision.gpus[b] == 0


@pytest.mark.parametrize("seed", range(40))
def test_a_merge_the_rule_rejects_is_never_chosen(seed: int) -> None:
    """Every chosen pair passes the rule, re-derived here at the GPUs it got."""
    tasks, gpus, similarity = random_round(seed + 1000)
    decision = solve_round(tasks, gpus, 120.0, rule=rule_of(similarity), options=EXACT)
    by_id = {t.id: t for t in tasks}
    for (a_id, b_id), g in decision.pairs.items():
        a, b = by_id[a_id], by_id[b_id]
        assert a.base_model == b.base_model and not a.started and not b.started
        assert a.dataset != b.dataset
        assert similarity[frozenset((a_id, b_id))] >= 0.3
        ma = ref_duration(dict(a.duration_s), min(g, a.max_gpus))
        mb = ref_duration(dict(b.duration_s), min(g, b.max_gpus))
        mab = 0.55 * (ref_duration(dict(a.duration_s), g) + ref_duration(dict(b.duration_s), g))
        assert (ma + mb + min(ma, mb)) / (2 * mab) >= 1.1


def test_cap_keeps_the_shortest_on_one_gpu() -> None:
    tasks = [TitanTask(id=f"t{i}", base_model="vit", classes=("c",),
                       duration_s={1: float(s)}, max_gpus=1)
             for i, s in enumerate([500, 100, 300, 200])]
    decision = solve_round(tasks, 2, 120.0)
    assert decision.runnable == ["t1", "t3"]
    assert decision.left_out == ["t2", "t0"]
    assert decision.gpus == {"t1": 1, "t3": 1}


def test_row_rule_by_hand() -> None:
    """Eight tasks of 100 s on 4 GPUs (max 4 each) in a pool of 8; pairs (in order) with
    measured merged durations set so that beta = 1.15 or 1.3.  Each accepted pair adds 6
    rows (the 0 option and 1, 2, 3, 4, 8 GPUs): thresholds 1.1, 1.1, then log10 12 + 0.1 =
    1.179 (t0+t3 and t0+t4 fail), and t0+t5 passes with 1.3."""
    tasks = [TitanTask(id=f"t{i}", base_model="vit", classes=("c",), duration_s={4: 100.0},
                       max_gpus=4, dataset=f"d{i}") for i in range(8)]
    beta = {("t0", "t1"): 1.15, ("t0", "t2"): 1.15, ("t0", "t3"): 1.15, ("t0", "t4"): 1.15,
            ("t0", "t5"): 1.3}
    # a member alone takes 400/a on a <= 4 GPUs (GPU-seconds kept below 4) and 100 s on 8
    # (capped at its max 4); a merged profile {4: M} takes 4M/a below 4 and M on 8, so
    # beta = 1.5 x 100 / M at every count: M = 150 / beta
    entries = {frozenset(p): ({4: 150.0 / b}, None) for p, b in beta.items()}
    rule = MergeRule(threshold=0.0, similarity=lambda *_: 1.0, entries=entries,
                     joint_epoch_factor=1.0)  # unlisted pairs: beta = 3d / 4d = 0.75
    problem = round_problem(tasks, 8, 120.0, rule=rule)
    assert [p.tasks for p in problem.pairs] == [("t0", "t1"), ("t0", "t2"), ("t0", "t5")]
    assert all(p.options == (1, 2, 3, 4, 8) for p in problem.pairs)
    no_rows = MergeRule(threshold=0.0, similarity=lambda *_: 1.0, entries=entries,
                        joint_epoch_factor=1.0, row_rule=False)
    assert len(round_problem(tasks, 8, 120.0, rule=no_rows).pairs) == 5


def test_costs_by_hand() -> None:
    """Two tasks on 4 GPUs, Delta = 120 s: f = 2.  a: {1: 1000, 4: 250} (perfect scaling),
    T_fair = 500; options 1..4 cost 1000/500, 500/500, 333.3/500, 250/500.  b: {1: 100}
    with max 1: T_fair = max(100, 120) = 120, option 1 costs max(100, 120) / 120 = 1."""
    a = TitanTask(id="a", base_model="vit", classes=("c",), duration_s={1: 1000.0, 4: 250.0},
                  max_gpus=4)
    b = TitanTask(id="b", base_model="vit", classes=("c",), duration_s={1: 100.0}, max_gpus=1)
    problem = round_problem([a, b], 4, 120.0)
    assert problem.fair_share == 2
    costs = {(int(c), int(g)): float(v) for c, g, v in zip(
        problem.column_candidate, problem.column_gpus, problem.column_cost, strict=True)}
    # candidates in T_rem(1) order: b (100 s) is 0, a is 1
    assert costs == pytest.approx({(0, 0): 0.0, (0, 1): 1.0, (1, 0): 0.0, (1, 1): 2.0,
                                   (1, 2): 1.0, (1, 3): 1000 / 3 / 500, (1, 4): 0.5})
    decision = solve_round([a, b], 4, 120.0, options=EXACT)
    # a can take at most 3 GPUs next to b: 1 + 2/3 < 2 (b left out: U) ...
    assert decision.gpus == {"a": 3, "b": 1}
    assert decision.objective == pytest.approx(1.0 + 2 / 3, rel=1e-9)


def test_candidate_benefits_equal_the_rules_pair_by_pair() -> None:
    """merge_candidates computes beta for all pairs at once; each must equal
    MergeRule.benefit of that pair (work known or not, factor and measured entries)."""
    from schedlab.formulations.titan.round_ilp import merge_candidates

    rng = random.Random(7)
    tasks = [TitanTask(id=f"t{i}", base_model="vit", classes=("c",),
                       duration_s={c: rng.uniform(100, 900) / c for c in (1, 2, 8)},
                       max_gpus=rng.choice([2, 4, 8]), dataset=f"d{i}",
                       work=rng.choice([None, rng.uniform(1, 5)]))
             for i in range(7)]
    entries = {frozenset(("t0", "t1")): ({4: 300.0}, None),
               frozenset(("t2", "t3")): (None, 0.4)}
    rule = MergeRule(threshold=0.0, similarity=lambda *_: 1.0, entries=entries,
                     benefit_base=0.0, row_rule=False)
    by_id = {t.id: t for t in tasks}
    candidates = merge_candidates(tasks, 12, rule)
    assert len(candidates) == 21
    for cand in candidates:
        a, b = by_id[cand.tasks[0]], by_id[cand.tasks[1]]
        expected = rule.benefit(a, b, list(cand.options))
        assert list(cand.benefit) == pytest.approx(list(expected), rel=1e-12)
        assert cand.options == tuple(g for g in (1, 2, 3, 4, 8, 12)
                                     if g <= a.max_gpus + b.max_gpus)
