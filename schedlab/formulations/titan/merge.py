r"""Titan's merge rule, merged durations and merge benefit.

**Rule.**  Two tasks A, B may be fine-tuned jointly (merged) only when

1. they fine-tune the same ``base_model``;
2. neither has started (a started task keeps running alone);
3. their datasets differ (as the public code requires; two tasks on one dataset are not
   multi-task learning) -- a task without a dataset differs from every other;
4. their task similarity S(A, B) >= the threshold ``params.similarity_threshold``
   (default :data:`DEFAULT_SIMILARITY_THRESHOLD`), S computed from the class labels on the
   concept hierarchy (:func:`hierarchy_similarity`; injectable for tests); a task without
   class labels has no similarity and never passes;
5. the benefit rule accepts them (below).

**Merged duration.**  A pair's duration profile M_AB(a) is its entry in the instance's
``merges`` when that entry gives ``duration_s`` (measured).  Otherwise the default model, the
public code's intended form: under joint training each member needs phi times the epochs it
needs alone (phi = the entry's ``joint_epoch_factor``, else the rule's, default
:data:`JOINT_EPOCH_FACTOR` = 1/1.55: the seed's Fashion-MNIST + CIFAR-100 example is 1.55x
faster jointly than back to back), and the merged task runs at the first member's speed (same
backbone).  With both members' work W known (``total_steps``),
M_AB(a) = phi (W_A + W_B) / (W_A / d_A(a)) = phi (1 + W_B / W_A) d_A(a); without it the
members' work is taken at the same per-unit speed and M_AB(a) = phi (d_A(a) + d_B(a)).
"First" is the member that comes first in the instance.  A pair can use at most
max_gpus_A + max_gpus_B GPUs (as the code).

**Benefit.**  At the GPU count a the pair would get, with M_X(a) = d_X(min(a, max_gpus_X))
the members alone,

.. math::

    \beta(a) = \frac{M_A + M_B + \min(M_A, M_B)}{2 M_{AB}},

the two tasks' average JCT run back to back shortest first over their average JCT merged.
Merge only when beta >= 1.1 (:data:`BENEFIT_THRESHOLD`).  In a round of the round ILP, once
10 or more merge-option rows exist (rows of the pairs accepted before, each pair's 0 option
included, as the code counts them), a further pair also needs beta >= log10(rows) + 0.1
(:func:`benefit_threshold`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from schedlab.formulations.titan.speed import duration_at, profile_from_field, sum_profiles
from schedlab.formulations.titan.tasks import TitanTask
from schedlab.instance import Instance

FloatArray = npt.NDArray[np.float64]

#: S(A, B) of two label lists (with their label sets, None when unknown), in [0, 1].
Similarity = Callable[[Sequence[str], Sequence[str], str | None, str | None], float]

#: Least benefit ratio of a merge (the public code's ``reweight < 1.1: continue``).
BENEFIT_THRESHOLD = 1.1
#: From this many merge-option rows in a round on, a pair also needs log10(rows) + 0.1.
ROW_RULE_FROM = 10
#: Default joint-epoch factor: the seed's example is 1.55x faster merged than back to back.
JOINT_EPOCH_FACTOR = 1.0 / 1.55
#: Default least task similarity of a merged pair (docs/formulations/titan.md says which
#: label-set pairs it admits).
DEFAULT_SIMILARITY_THRESHOLD = 0.55


#: The code's dataset order (``common/applications.py`` lines 6 and 9, ``/`` written ``#``):
#: a merged pair's first member is the task whose dataset comes first.
CODE_DATASET_ORDER: Mapping[str, int] = {
    name: i for names in (
        ("wnli", "rte", "mrpc", "stsb", "sst2", "qnli", "qqp", "mnli", "ag_news",
         "wikitext-103", "snli"),
        ("Bingsu#Cat_and_Dog", "frgfm#imagenette", "cifar100", "fashion_mnist", "mnist",
         "food101", "imagenet-split-0", "imagenet-split-1", "imagenet-split-2"))
    for i, name in enumerate(names)}


def code_first(a: TitanTask, b: TitanTask) -> TitanTask:
    """The member TitanSched's merged job copies: the one whose dataset comes first in
    :data:`CODE_DATASET_ORDER`; ``a`` when either dataset is not in it."""
    rank_a = CODE_DATASET_ORDER.get(a.dataset or "")
    rank_b = CODE_DATASET_ORDER.get(b.dataset or "")
    if rank_a is None or rank_b is None:
        return a
    return b if rank_b < rank_a else a


def hierarchy_similarity(labels_a: Sequence[str], labels_b: Sequence[str],
                         label_set_a: str | None = None,
                         label_set_b: str | None = None) -> float:
    """S(A, B) on the shipped concept hierarchy (imported on first use)."""
    from schedlab.world.concept_hierarchy import task_similarity

    return float(task_similarity(labels_a, labels_b, label_set_a=label_set_a,
                                 label_set_b=label_set_b))


def merge_benefit(alone_a: npt.ArrayLike, alone_b: npt.ArrayLike,
                  merged: npt.ArrayLike) -> FloatArray:
    """beta = (M_A + M_B + min(M_A, M_B)) / (2 M_AB), elementwise."""
    a = np.asarray(alone_a, dtype=float)
    b = np.asarray(alone_b, dtype=float)
    return np.asarray((a + b + np.minimum(a, b)) / (2.0 * np.asarray(merged, dtype=float)),
                      dtype=float)


def benefit_threshold(rows_before: int, base: float = BENEFIT_THRESHOLD) -> float:
    """The least beta of a pair when ``rows_before`` merge-option rows exist in the round:
    ``base``, and from :data:`ROW_RULE_FROM` rows on also log10(rows) + 0.1."""
    if rows_before >= ROW_RULE_FROM:
        return max(base, math.log10(rows_before) + 0.1)
    return base


@dataclass(frozen=True)
class PairVerdict:
    """Whether A and B may merge, and every reason they may not (empty when they may)."""

    tasks: tuple[str, str]
    reasons: tuple[str, ...]
    similarity: float | None
    gpus: int | None
    benefit: float | None

    @property
    def may_merge(self) -> bool:
        """True when no rule rejects the pair."""
        return not self.reasons


@dataclass
class MergeRule:
    """The rule of the module docstring with its parameters.

    ``entries``: the instance's pair entries by unordered pair; ``similarity``: S(A, B)
    (default :func:`hierarchy_similarity`); ``benefit_base``: the least beta (0 switches the
    benefit rule off, for experiments); ``row_rule``: the round ILP's log10 rule on or off.
    Similarities are cached per pair of label lists.

    ``code_quirks`` (default off) merges as TitanSched's code does where it departs from the
    design, read in ``client/job/foundation_model.py`` and ``alg/scheduler/titan_mtask.py``
    at f71cf44:

    * *the second member rides free*: ``MtaskFoundationModelJob.__init__`` (lines 633-637)
      copies every attribute of its first member A -- the one whose dataset comes first in
      the code's dataset list (lines 628-631; :data:`CODE_DATASET_ORDER`), not the earlier
      task -- including ``max_progress``, so the pair trains A's work alone at A's speed:
      M_AB(a) = d_A(a), and its benefit is (W_A + W_B + min(W_A, W_B)) / (2 W_A)
      (``reweight``, lines 675-677; the same as beta here when both members train at one
      speed);
    * *the stale loop variable*: ``mtask_builder`` (lines 52-53 there) caps a pair's GPU
      options with ``job.max_num_gpus``, where ``job`` is left over from the loop over the
      pending jobs (lines 13-16): the last never-started task of the round, not the pair;
    * *no similarity*: ``mtask_builder`` pairs any two never-started tasks of different
      datasets (lines 37-41) and compares no class labels, so rule 4 is skipped."""

    threshold: float = DEFAULT_SIMILARITY_THRESHOLD
    joint_epoch_factor: float = JOINT_EPOCH_FACTOR
    benefit_base: float = BENEFIT_THRESHOLD
    row_rule: bool = True
    code_quirks: bool = False
    entries: Mapping[frozenset[str], tuple[dict[int, float] | None, float | None]] = field(
        default_factory=dict)
    similarity: Similarity | None = None
    _cache: dict[tuple[object, ...], float] = field(default_factory=dict, repr=False)

    @classmethod
    def for_instance(cls, instance: Instance, *, similarity: Similarity | None = None,
                     joint_epoch_factor: float = JOINT_EPOCH_FACTOR,
                     benefit_base: float = BENEFIT_THRESHOLD,
                     row_rule: bool = True) -> MergeRule:
        """The rule with the instance's threshold (``params.similarity_threshold``) and
        pair entries (``merges``)."""
        threshold = instance.params.similarity_threshold
        entries = {
            frozenset(e.tasks): (profile_from_field(e.duration_s) if e.duration_s else None,
                                 e.joint_epoch_factor)
            for e in instance.merges or []}
        return cls(threshold=DEFAULT_SIMILARITY_THRESHOLD if threshold is None else threshold,
                   joint_epoch_factor=joint_epoch_factor, benefit_base=benefit_base,
                   row_rule=row_rule, entries=entries, similarity=similarity)

    # ------------------------------------------------------------------ parts of the rule
    def similarity_of(self, a: TitanTask, b: TitanTask) -> float:
        """S(A, B) (cached; symmetric)."""
        key_a, key_b = (a.classes, a.label_set), (b.classes, b.label_set)
        key = (key_a, key_b) if repr(key_a) <= repr(key_b) else (key_b, key_a)
        if key not in self._cache:
            measure = self.similarity or hierarchy_similarity
            self._cache[key] = float(measure(list(a.classes), list(b.classes), a.label_set,
                                             b.label_set))
        return self._cache[key]

    def static_reasons(self, a: TitanTask, b: TitanTask) -> list[str]:
        """Rules 1-3 (base model, not started, datasets), cheapest first."""
        reasons = []
        if a.base_model != b.base_model:
            reasons.append(f"different base models ({a.base_model} vs {b.base_model})")
        for task in (a, b):
            if task.started:
                reasons.append(f"task {task.id} has started")
        if a.dataset is not None and a.dataset == b.dataset:
            reasons.append(f"same dataset {a.dataset}")
        return reasons

    def merged_profile(self, a: TitanTask, b: TitanTask) -> dict[int, float]:
        """M_AB as a {gpus: seconds} profile; ``a`` is the first member (with
        ``code_quirks``: the code's first member trains alone, class docstring)."""
        measured, factor = self.entries.get(frozenset((a.id, b.id)), (None, None))
        if measured is not None:
            return dict(measured)
        if self.code_quirks:
            return dict(code_first(a, b).duration_s)
        phi = self.joint_epoch_factor if factor is None else factor
        if a.work is not None and b.work is not None:
            scale = phi * (1.0 + b.work / a.work)
            return {c: scale * s for c, s in a.duration_s.items()}
        return sum_profiles(a.duration_s, b.duration_s, phi)

    @staticmethod
    def pair_max_gpus(a: TitanTask, b: TitanTask) -> int:
        """The most GPUs a merged pair can use: the sum of its members'."""
        return a.max_gpus + b.max_gpus

    def benefit(self, a: TitanTask, b: TitanTask, gpus: npt.ArrayLike,
                merged: Mapping[int, float] | None = None) -> FloatArray:
        """beta(a) at each count of ``gpus`` (module docstring)."""
        g = np.asarray(gpus, dtype=float)
        alone_a = duration_at(a.duration_s, np.minimum(g, a.max_gpus))
        alone_b = duration_at(b.duration_s, np.minimum(g, b.max_gpus))
        profile = self.merged_profile(a, b) if merged is None else merged
        return merge_benefit(alone_a, alone_b, duration_at(profile, g))

    def verdict(self, a: TitanTask, b: TitanTask, gpus: int,
                least_benefit: float | None = None) -> PairVerdict:
        """Every rule on the pair at ``gpus`` GPUs; ``least_benefit`` defaults to
        ``benefit_base``.  The similarity is computed only when rules 1-3 hold."""
        reasons = self.static_reasons(a, b)
        similarity = None
        unlabelled = [task.id for task in (a, b) if not task.classes]
        # rule 4 only when rules 1-3 hold; the code's rule compares no labels (docstring)
        if not (reasons or self.code_quirks):
            if unlabelled:
                reasons.append(f"no class labels for task {' and '.join(unlabelled)}: no "
                               "task similarity")
            else:
                similarity = self.similarity_of(a, b)
                if similarity < self.threshold:
                    reasons.append(f"task similarity {similarity:.4g} < threshold "
                                   f"{self.threshold:.4g}")
        beta = float(self.benefit(a, b, [gpus])[0])
        need = self.benefit_base if least_benefit is None else least_benefit
        if beta < need:
            alone = duration_at(a.duration_s, [min(gpus, a.max_gpus)])[0], duration_at(
                b.duration_s, [min(gpus, b.max_gpus)])[0]
            merged = duration_at(self.merged_profile(a, b), [gpus])[0]
            back_to_back = (sum(alone) + min(alone)) / 2.0
            reasons.append(f"benefit {beta:.4g} < {need:.4g} at {gpus} GPUs (average JCT "
                           f"back to back shortest first {back_to_back:.6g} s, merged "
                           f"{merged:.6g} s)")
        return PairVerdict(tasks=(a.id, b.id), reasons=tuple(reasons), similarity=similarity,
                           gpus=gpus, benefit=beta)


def explain_pair(instance: Instance, first: str, second: str, *, gpus: int | None = None,
                 rule: MergeRule | None = None) -> PairVerdict:
    """Why tasks ``first`` and ``second`` of ``instance`` may or may not merge, at ``gpus``
    GPUs (default: the pool's count, at most the pair's maximum -- what ``titan.merge_offline``
    gives a group).  The first member is the one earlier in the instance."""
    from schedlab.errors import InputError
    from schedlab.formulations.titan.tasks import titan_tasks

    tasks = {t.id: t for t in titan_tasks(instance, "titan explain")}
    order = {job.id: i for i, job in enumerate(instance.jobs)}
    for name in (first, second):
        if name not in tasks:
            raise InputError(f"unknown task {name!r}", field="tasks")
    a, b = sorted((tasks[first], tasks[second]), key=lambda t: order[t.id])
    merge_rule = rule or MergeRule.for_instance(instance)
    count = gpus if gpus is not None else min(instance.cluster.total_gpus,
                                              merge_rule.pair_max_gpus(a, b))
    return merge_rule.verdict(a, b, count)
