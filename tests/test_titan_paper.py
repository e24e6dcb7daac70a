"""The Titan ``paper`` preset: TitanSched's recorded traces with each task's work as its code
computes it, checked against the authors' published result files (their ``max_progress``
column), by hand, and against pandas 1.5.3's float parser."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from schedlab.errors import InputError
from schedlab.formulations.titan.merge import MergeRule
from schedlab.formulations.titan.round_ilp import merge_candidates, solve_round
from schedlab.formulations.titan.tasks import TitanTask
from schedlab.workloads.titan_paper import (
    PAPER_DENSITIES,
    TRACE_MODELS,
    completion_epochs,
    generate_titan_paper_instance,
    read_like_pandas1,
    read_trace,
    task_work,
)

# ------------------------------------------------------------------------ the reader


def test_pandas1_parser_is_one_ulp_above_on_this_target() -> None:
    # pandas 1.5.3 read_csv (the code's reader) gave repr 0.9071803852889668 for the text
    # "0.9071803852889667" (run in a scratch environment with pandas 1.5.3)
    value = read_like_pandas1("0.9071803852889667")
    assert value == float("0.9071803852889668")
    assert value == math.nextafter(float("0.9071803852889667"), 1.0)
    # short decimals and integers are exact either way
    assert read_like_pandas1("45") == 45.0
    assert read_like_pandas1("0.5") == 0.5
    assert read_like_pandas1("-2.5e3") == -2500.0
    for bad in ("", "x", "1.2.3", "1e"):
        with pytest.raises(ValueError):
            read_like_pandas1(bad)


# ---------------------------------------------------------------------------- the work


def test_work_of_published_rows() -> None:
    # the authors' result/main/srtf/FM-1-vit/srtf.csv: vit@frgfm#imagenette-0 has
    # max_progress 85221.0 = 9469 samples x 9 epochs
    vit = {t.name: t for t in read_trace(1.0, "vit")}
    assert task_work(vit["vit@frgfm#imagenette-0"]) == 85221.0
    # result/main/srtf/FM-1-roberta-base/srtf.csv: roberta-base@mrpc-0 has max_progress 9170
    # = 917 x 10: its target (the trajectory's best F1, 0.9071803852889667 at epoch 7.97) is
    # read one ulp higher and never reached; read exactly it is reached at epoch 7.97
    roberta = {t.name: t for t in read_trace(1.0, "roberta-base")}
    mrpc = roberta["roberta-base@mrpc-0"]
    assert task_work(mrpc) == 9170.0
    assert task_work(mrpc, targets="exact") == pytest.approx(917 * 7.97, rel=1e-12)
    assert completion_epochs("roberta-base", "mrpc", "1e-3", 8, 0.0) == pytest.approx(0.97)


def test_every_trace_and_its_instance() -> None:
    sizes = {}
    for density in PAPER_DENSITIES:
        for model in TRACE_MODELS:
            tasks = read_trace(density, model)
            sizes[(density, model)] = len(tasks)
            assert all(t.model == model for t in tasks)
    # trace sizes of all_trace_generation.sh: base 320 / 160 / 120 / 60 tasks x density
    assert sizes[(1.0, "vit")] == 320 and sizes[(2.0, "vit")] == 640
    assert sizes[(1.5, "roberta-large")] == 90
    assert sum(sizes.values()) == 2970
    instance = generate_titan_paper_instance(1.0, "vit")
    assert len(instance.jobs) == 320
    pool = instance.cluster.accelerators["v100"]
    assert pool.count == 32 and pool.nodes == 8
    first = instance.jobs[0]
    assert first.arrival == 45.0 and first.scale_factor == 1
    # ViT-B at batch 48 on 1 GPU: 277.26 samples/s, so 85221 samples take 307.37 s
    assert first.duration_s is not None
    assert first.duration_s["1"] == pytest.approx(85221 / 277.26, rel=1e-6)
    assert first.label_set == "imagenette"
    unlabelled = [j for j in instance.jobs if j.dataset and j.dataset.startswith("imagenet-")]
    assert unlabelled and all(j.classes is None for j in unlabelled)


@pytest.mark.parametrize(("density", "model", "field"), [
    (0.5, "vit", "density"), (-1.0, "vit", "density"), (math.nan, "vit", "density"),
    (1.0, "resnet", "model")])
def test_bad_preset_arguments(density: float, model: str, field: str) -> None:
    with pytest.raises(InputError) as caught:
        generate_titan_paper_instance(density, model)
    assert caught.value.field == field


# ------------------------------------------------------------ the merge rule by hand


def _task(name: str, dataset: str, *, model: str = "vit", started: bool = False,
          classes: tuple[str, ...] = ("c",)) -> TitanTask:
    # alone: 100 s on 1 GPU, 60 s on 2; same work, so the default merged profile is
    # phi (1 + 1) d_A = 2/1.55 d_A: 129.03 s on 1 GPU
    return TitanTask(id=name, base_model=model, classes=classes,
                     duration_s={1: 100.0, 2: 60.0}, max_gpus=1, dataset=dataset,
                     started=started, work=1.0)


def _similarity(table: dict[frozenset[str], float]):  # type: ignore[no-untyped-def]
    def measure(a, b, set_a, set_b):  # type: ignore[no-untyped-def]
        return table[frozenset((a[0], b[0]))]
    return measure


def test_a_burst_of_four_merges_the_pairs_derived_by_hand() -> None:
    # four ViT tasks, classes "a", "b", "c", "d"; S(a,b) = S(c,d) = 0.9, every other 0.1;
    # threshold 0.55.  A pair may use 1 + 1 = 2 GPUs.  beta on 1 GPU: (100 + 100 + 100) /
    # (2 x 200/1.55) = 1.1625; on 2 GPUs (each member alone still on its 1): 300 / (2 x
    # 120/1.55) = 1.9375; both >= 1.1, and 3 rows before the second pair keep the base 1.1
    tasks = [_task(n, f"ds{n}", classes=(n,)) for n in "abcd"]
    high = {frozenset(p) for p in ("ab", "cd")}
    table = {frozenset((x, y)): (0.9 if frozenset((x, y)) in high else 0.1)
             for x in "abcd" for y in "abcd" if x != y}
    rule = MergeRule(threshold=0.55, similarity=_similarity(table))
    rejected: Counter[str] = Counter()
    candidates = merge_candidates(tasks, 2, rule, rejected)
    assert [c.tasks for c in candidates] == [("a", "b"), ("c", "d")]
    assert candidates[0].options == (1, 2) and candidates[1].options == (1, 2)
    assert candidates[0].benefit == pytest.approx((300 / (2 * 200 / 1.55),
                                                   300 / (2 * 120 / 1.55)), rel=1e-12)
    assert rejected == Counter({"similarity": 4})
    # on 2 GPUs with the cap keeping 2 tasks only the shortest two are in the round; on 4
    # GPUs every task runs alone on 1 GPU or a pair on its 2: the round ILP's choice must be
    # among the candidates
    decision = solve_round(tasks, 4, 120.0, rule=rule)
    assert set(decision.pairs) <= {("a", "b"), ("c", "d")}


@pytest.mark.parametrize(("second", "reason"), [
    (_task("b", "ds2", model="roberta"), "model"),
    (_task("b", "ds2", started=True), "started"),
    (_task("b", "ds1"), "dataset"),
    (_task("b", "ds2", classes=()), "labels"),
])
def test_a_pair_failing_one_rule_is_not_offered_and_the_rule_is_named(
        second: TitanTask, reason: str) -> None:
    first = _task("a", "ds1")
    rule = MergeRule(threshold=0.0, similarity=lambda *args: 1.0)
    rejected: Counter[str] = Counter()
    assert merge_candidates([first, second], 2, rule, rejected) == []
    assert rejected == Counter({reason: 1})


def test_low_similarity_and_low_benefit_are_named() -> None:
    a, b = _task("a", "ds1"), _task("b", "ds2")
    rejected: Counter[str] = Counter()
    low = MergeRule(threshold=0.95, similarity=lambda *args: 0.5)
    assert merge_candidates([a, b], 2, low, rejected) == []
    # joint training no faster than back to back and no gain from a second GPU: phi = 1,
    # d(1) = d(2) = 100 s, so beta = 300 / (2 x 200) = 0.75 < 1.1 on 1 and 2 GPUs
    a = TitanTask(**{**a.__dict__, "duration_s": {1: 100.0, 2: 100.0}})
    b = TitanTask(**{**b.__dict__, "duration_s": {1: 100.0, 2: 100.0}})
    slow = MergeRule(threshold=0.0, similarity=lambda *args: 1.0, joint_epoch_factor=1.0)
    assert merge_candidates([a, b], 2, slow, rejected) == []
    assert rejected == Counter({"similarity": 1, "benefit": 1})


def test_code_quirks_train_the_first_datasets_work_alone() -> None:
    # with the code's quirks the pair copies the member whose dataset comes first in the
    # code's list (Cat_and_Dog before cifar100), whatever the task order: the merged pair
    # takes that member's 100 s on 1 GPU, beta = 300 / 200 = 1.5
    later = _task("x", "cifar100")
    earlier = _task("y", "Bingsu#Cat_and_Dog")
    earlier = TitanTask(**{**earlier.__dict__, "duration_s": {1: 100.0, 2: 60.0}})
    rule = MergeRule(threshold=0.0, similarity=lambda *args: 1.0, code_quirks=True)
    (candidate,) = merge_candidates([later, earlier], 2, rule)
    assert candidate.duration_s == {1: 100.0, 2: 60.0}
    assert candidate.benefit[0] == pytest.approx(1.5)
    # the stale loop variable: the pair's cap is the last never-started task's (1 GPU)
    assert candidate.max_gpus == 1 and candidate.options == (1,)


def test_an_unknown_label_set_is_one_line_naming_the_field(
        tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    from pathlib import Path

    from schedlab.cli import main

    folder = Path(str(tmp_path))
    source = (Path(__file__).resolve().parents[1] / "instances" / "titan"
              / "small-10tasks-16gpus.json")
    document = json.loads(source.read_text())
    for job in document["jobs"]:
        job["arrival"] = 0
    document["jobs"][2]["label_set"] = "bogus_set"
    bad = folder / "bad.json"
    bad.write_text(json.dumps(document))
    code = main(["solve", str(bad), "-f", "titan.merge_offline", "--out",
                 str(folder / "out.json")])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1
    assert "jobs[2].label_set" in err and "bogus_set" in err and str(bad) in err
    assert not (folder / "out.json").exists()
