"""Titan (SoCC'22): scheduling foundation-model fine-tuning tasks, merging similar ones.

Titan fine-tunes many downstream tasks of a few shared foundation models. Two tasks that
fine-tune the same base model on semantically close label sets may be trained jointly (merged),
and a per-round integer program chooses merges and GPU counts. The WordNet 3.0 concept
hierarchy of the shipped label sets (Wu-Palmer class similarity and task similarity) is
:mod:`schedlab.world.concept_hierarchy`: the workload generator reads it too.  Modules:
``tasks`` (the Titan fields of an instance's jobs as ``TitanTask``), ``speed``
(a task's duration at any GPU count from its ``duration_s`` profile), ``merge`` (the merge rule,
merged durations and the benefit rule), ``round_ilp`` (one round's ILP, ``titan.round_ilp`` and
``solve_round`` for online policies), ``offline`` (``titan.merge_offline``: merges and order of
a batch, exact) and ``examples`` (the seed's case table, a six-task round). See
docs/formulations/titan.md.
"""
