"""Titan (SoCC'22): scheduling foundation-model fine-tuning tasks, merging similar ones.

Titan fine-tunes many downstream tasks of a few shared foundation models. Two tasks that
fine-tune the same base model on semantically close label sets may be trained jointly (merged),
and a per-round integer program chooses merges and GPU counts. Modules: ``hierarchy`` (the
WordNet 3.0 concept hierarchy of the shipped label sets, Wu-Palmer class similarity and task
similarity). See docs/formulations/titan.md.
"""
