"""The Titan policy (schedlab.policies.titan) in the elastic mode: a merge decided and run
by hand, the ablations' finish times by hand, the merge rule respected on generated
workloads, and the fallback when the solver fails."""

from __future__ import annotations

from typing import Any

import pytest

from schedlab.formulations.titan.merge import BENEFIT_THRESHOLD, MergeRule
from schedlab.instance import Instance, instance_from_dict
from schedlab.policies.elastic_state import ElasticState, Grant
from schedlab.policies.registry import get_policy
from schedlab.policies.titan import Titan
from schedlab.simulator.elastic import simulate_elastic
from schedlab.solvers.faults import failing_highs
from schedlab.workloads.titan import generate_titan_instance
from schedlab.world.concept_hierarchy import label_sets

REL = 1e-9
#: ViT-B's measured V100 load (TitanSched vit_context_switch.csv), 12 layers, 30 s checkpoint
VIT_LOAD_S = 4.16124963760376
CHECKPOINT_S = 30.0
PHI = 1 / 1.55


def _pair_instance() -> Instance:
    """Two ViT-B tasks (CIFAR-10 and CIFAR-100 labels, similarity 0.77) of equal work on
    2 GPUs, 1000 s on one GPU and 500 s on two, both at 0 s."""
    sets = label_sets()
    jobs = [{"id": name, "base_model": "vit-base", "dataset": name, "label_set": name,
             "classes": list(sets[name]), "duration_s": {"1": 1000.0, "2": 500.0},
             "max_gpus": 2, "scale_factor": 1, "total_steps": 1000.0}
            for name in ("cifar10", "cifar100")]
    return instance_from_dict({
        "schema": "schedlab/instance@1", "name": "pair",
        "cluster": {"accelerators": {"v100": {"count": 2, "gpus_per_node": 2}}},
        "jobs": jobs, "params": {"round_s": 120.0}})


def _finishes(result: Any) -> dict[str, float]:
    return {r.job: r.finish for r in result.jobs}


def test_titan_merges_the_pair_by_hand() -> None:
    # Round 0 (f = 1, T_fair = 1000 s per task): both alone on 1 GPU cost 1 + 1 = 2; the pair
    # M(a) = phi (1 + 1) d(a) = 1290.3 / 645.2 s on 1 / 2 GPUs, T_fair 1290.3 s, benefit
    # (1000 + 1000 + 1000) / (2 x 1290.3) = 1.1625 on either count: cost 0.43 on 2 GPUs.  It
    # merges on 2 GPUs and keeps them: 30 + 4.16 / 12 s switch, then 645.16 s.
    policy = Titan()
    result = simulate_elastic(_pair_instance(), policy)
    merged = PHI * 2 * 500.0
    expected = CHECKPOINT_S + VIT_LOAD_S / 12 + merged
    assert _finishes(result) == pytest.approx({"cifar10": expected, "cifar100": expected},
                                              rel=REL)
    assert policy.merges == 1
    for record in result.jobs:
        assert record.overhead_s == pytest.approx(expected - merged, rel=REL)
    # without the pipelined switch the whole 4.16 s load shows
    plain = simulate_elastic(_pair_instance(), get_policy("titan_no_pipeline"))
    for finish in _finishes(plain).values():
        assert finish == pytest.approx(CHECKPOINT_S + VIT_LOAD_S + merged, rel=REL)


def test_titan_without_the_merger_runs_both_alone_by_hand() -> None:
    # both on 1 GPU (cost 2; one on 2 GPUs leaves the other out at U = 1e4): 1000 s each
    result = simulate_elastic(_pair_instance(), get_policy("titan_no_merge"))
    expected = CHECKPOINT_S + VIT_LOAD_S / 12 + 1000.0
    assert _finishes(result) == pytest.approx({"cifar10": expected, "cifar100": expected},
                                              rel=REL)


class Watching(Titan):
    """Titan that checks every new pair it grants against the merge rule."""

    new_pairs: list[tuple[str, str]]

    def reset(self) -> None:
        super().reset()
        self.new_pairs = []

    def plan(self, state: ElasticState) -> list[Grant]:
        grants = super().plan(state)
        units = {u.id: u for u in state.units}
        rule: MergeRule = state.merge_rule
        used = 0
        for grant in grants:
            used += grant.gpus
            unit = units.get("+".join(grant.members)) or units.get(
                "+".join(reversed(grant.members)))
            if len(grant.members) == 1 or unit is not None:
                continue
            a, b = (state.tasks[m].task for m in grant.members)
            ua, ub = units[a.id], units[b.id]
            assert not ua.started and not ub.started
            assert a.base_model == b.base_model and a.dataset != b.dataset
            assert rule.similarity_of(a, b) >= rule.threshold
            first, second = sorted((a, b), key=lambda t: state.tasks[t.id].order)
            assert float(rule.benefit(first, second, [grant.gpus])[0]) >= BENEFIT_THRESHOLD
            assert grant.gpus <= a.max_gpus + b.max_gpus
            self.new_pairs.append((first.id, second.id))
        assert used <= state.gpus
        return grants


@pytest.mark.parametrize("seed", [0, 1, 4])
def test_merges_follow_the_rule_on_generated_workloads(seed: int) -> None:
    # 16 ViT-B tasks within 30 min on 8 GPUs: more runnable tasks than GPUs, so some wait
    # unstarted and merge (these seeds merge at least once in 40 rounds)
    inst = generate_titan_instance(16, gpus=8, model="vit-base", seed=seed, day_s=1800.0)
    policy = Watching()
    result = simulate_elastic(inst, policy, max_rounds=40)
    assert policy.decisions == len(result.rounds)
    assert policy.new_pairs
    finish = _finishes(result)
    for a, b in policy.new_pairs:  # merged members finish together
        assert finish[a] == finish[b]


def test_failed_solves_fall_back_and_are_counted() -> None:
    inst = _pair_instance()
    policy = Titan()
    with failing_highs():
        result = simulate_elastic(inst, policy)
    assert policy.failed_solves == policy.solves == len(result.rounds) > 0
    assert result.failed_solves == policy.failed_solves
    # the fallback: shortest first on its request (1 GPU each): both alone, 1000 s
    expected = CHECKPOINT_S + VIT_LOAD_S / 12 + 1000.0
    for finish in _finishes(result).values():
        assert finish == pytest.approx(expected, rel=REL)
