"""Titan's concept hierarchy: WordNet 3.0 hypernyms, Wu-Palmer, task similarity.

Expected values come from hand derivations on small DAGs and on WordNet paths written out
here, from a second Wu-Palmer written in this file (all hypernym paths enumerated, where the
module uses depth tables and breadth-first distances), and from NLTK itself where NLTK and a
WordNet 3.0 database are installed (``NLTK_DATA``; skipped otherwise, e.g. in CI).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import sys
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from schedlab.errors import InputError
from schedlab.world import concept_hierarchy as hierarchy
from schedlab.world.concept_hierarchy import (
    ConceptHierarchy,
    HypernymGraph,
    MappingRow,
    graph_from_document,
    label_sets,
    synset_of,
    task_similarity,
    wup,
)

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "build_wordnet_hierarchy.py"


# ---------------------------------------------------------------------------------------------
# An independent Wu-Palmer: every root-to-node path enumerated (NLTK's hypernym_paths).

def _paths(parents: Mapping[str, Sequence[str]], node: str) -> list[list[str]]:
    if not parents[node]:
        return [[node]]
    return [[*path, node] for p in parents[node] for path in _paths(parents, p)]


def _up(parents: Mapping[str, Sequence[str]], node: str) -> dict[str, int]:
    """Shortest upward distance to each ancestor, read off the enumerated paths."""
    dist: dict[str, int] = {}
    for path in _paths(parents, node):
        for i, n in enumerate(path):
            dist[n] = min(dist.get(n, len(path)), len(path) - 1 - i)
    return dist


def reference_wup(parents: Mapping[str, Sequence[str]], a: str, b: str) -> float:
    if a == b:
        return 1.0
    up_a, up_b = _up(parents, a), _up(parents, b)
    common = set(up_a) & set(up_b)

    def min_depth(n: str) -> int:
        return min(len(p) for p in _paths(parents, n)) - 1

    def max_depth(n: str) -> int:
        return max(len(p) for p in _paths(parents, n)) - 1

    deepest = max(min_depth(c) for c in common)
    candidates = sorted(c for c in common if min_depth(c) == deepest)
    subsumer = a if a in candidates else candidates[0]

    def distance(x: str, y: str) -> int:
        ux, uy = _up(parents, x), _up(parents, y)
        return min(ux[n] + uy[n] for n in ux if n in uy)

    depth = max_depth(subsumer) + 1
    return 2 * depth / (distance(a, subsumer) + distance(b, subsumer) + 2 * depth)


@pytest.fixture(scope="module")
def shipped_parents() -> dict[str, list[str]]:
    """Parents by node, read straight from the package-data JSON."""
    text = resources.files("schedlab").joinpath("data", "wordnet", "hypernyms.json").read_text(
        encoding="utf-8")
    doc = json.loads(text)
    parents: dict[str, list[str]] = {n["id"]: [] for n in doc["nodes"]}
    for edge in doc["edges"]:
        parents[edge["source"]].append(edge["target"])
    return parents


# ---------------------------------------------------------------------------------------------
# The rules on hand-made DAGs.

def _tie_dag() -> dict[str, list[str]]:
    """root <- a_left <- c_mid <- d_low, root <- b_right <- d_low; x, y <- d_low.

    min_depth: a_left 1, b_right 1, c_mid 2, d_low 2 (via b_right), max_depth(d_low) 3."""
    return {"root": [], "a_left": ["root"], "b_right": ["root"], "c_mid": ["a_left"],
            "d_low": ["c_mid", "b_right"], "x": ["d_low"], "y": ["d_low"]}


def test_subsumer_is_the_first_by_name_among_the_greatest_min_depths() -> None:
    graph = HypernymGraph(_tie_dag())
    assert graph.min_depth("d_low") == 2 and graph.max_depth("d_low") == 3
    assert graph.lowest_common_hypernyms("x", "y") == ["c_mid", "d_low"]
    # subsumer c_mid (not the lower d_low): D = max_depth(c_mid) + 1 = 3, l_x = l_y = 2.
    assert graph.wup("x", "y") == pytest.approx(6 / 10, rel=1e-12)
    assert reference_wup(_tie_dag(), "x", "y") == pytest.approx(6 / 10, rel=1e-12)
    # a is the subsumer when it is a candidate: D = max_depth(d_low) + 1 = 4, l = 0 and 1.
    assert graph.wup("d_low", "x") == pytest.approx(8 / 9, rel=1e-12)
    # ... but b is not preferred: c_mid again, l_x = 2, l_d = 1.
    assert graph.wup("x", "d_low") == pytest.approx(6 / 9, rel=1e-12)


def test_path_length_may_go_through_a_higher_common_hypernym() -> None:
    """x reaches s in 3 steps (x-m1-m2-s) but meets s at t in 1 + 1 (x-t, s-t)."""
    parents = {"root": [], "t": ["root"], "s": ["t"], "m2": ["s"], "m1": ["m2"],
               "x": ["m1", "t"], "y": ["s"]}
    graph = HypernymGraph(parents)
    assert graph.lowest_common_hypernyms("x", "y") == ["s"]
    assert graph.shortest_path_distance("x", "s") == 2
    # D = max_depth(s) + 1 = 3; l_x = 2, l_y = 1: 6 / (5 + 4).
    assert graph.wup("x", "y") == pytest.approx(6 / 9, rel=1e-12)
    assert reference_wup(parents, "x", "y") == pytest.approx(6 / 9, rel=1e-12)


def test_a_synset_with_itself_is_one_where_nltk_gives_less() -> None:
    """z's parents: deep (min depth 3) and shallow (1), so min_depth(z) = 2 and NLTK's
    subsumer of (z, z) is deep: 2 * 4 / (2 * 1 + 2 * 4) = 0.8."""
    parents = {"root": [], "u": ["root"], "v": ["u"], "deep": ["v"], "shallow": ["root"],
               "z": ["deep", "shallow"]}
    graph = HypernymGraph(parents)
    assert graph.nltk_wup("z", "z") == pytest.approx(0.8, rel=1e-12)
    assert graph.wup("z", "z") == 1.0


def test_graph_refuses_cycles_and_dangling_parents() -> None:
    with pytest.raises(ValueError, match="cycle"):
        HypernymGraph({"a": ["b"], "b": ["a"]})
    with pytest.raises(ValueError, match="closed upward"):
        HypernymGraph({"a": ["missing"]})


# ---------------------------------------------------------------------------------------------
# The shipped data.

#: Class lists as the datasets publish them (class-index order).
CIFAR10 = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
           "truck")


def test_shipped_label_sets() -> None:
    sets = label_sets()
    sizes = {"cifar10": 10, "cifar100": 100, "cifar100_coarse": 20, "fashion_mnist": 10,
             "imagenette": 10, "food101": 101, "cat_vs_dog": 2}
    for name, size in sizes.items():
        assert len(sets[name]) == size, name
        assert len(set(sets[name])) == size, name
    assert sets["cifar10"] == CIFAR10
    assert {"ag_news", "dbpedia14", "trec_coarse"} <= set(sets)
    assert len(sets["ag_news"]) == 4 and len(sets["dbpedia14"]) == 14


def test_every_shipped_label_resolves_without_its_set(shipped_parents: dict) -> None:
    """A label in several sets maps to one synset, so unqualified lookups never fail."""
    for name, labels in label_sets().items():
        for label in labels:
            synset = synset_of(label, name)
            assert synset in shipped_parents
            assert synset_of(label) == synset
    assert synset_of("cat", "cifar10") == synset_of("cat", "cat_vs_dog") == "cat.n.01"


def test_label_normalization() -> None:
    assert synset_of("T-shirt/top", "fashion_mnist") == synset_of("t_shirt_top")
    assert synset_of("MeanOfTransportation", "dbpedia14") == "conveyance.n.03"
    assert synset_of("large_man-made_outdoor_things") == synset_of(
        "Large man made outdoor things", "cifar100_coarse")


def test_cat_is_closer_to_dog_than_to_car(shipped_parents: dict) -> None:
    """By hand: cat.n.01 -> feline -> carnivore, dog.n.01 -> canine -> carnivore, and
    carnivore -> placental -> mammal -> vertebrate -> chordate -> animal -> organism ->
    living_thing -> whole -> object -> physical_entity -> entity (max depth 11): wup = 2 * 12 /
    (2 + 2 + 2 * 12).  car.n.01 meets cat at whole.n.02 (max depth 3, D = 4) 7 steps up and
    cat 10 steps up: 8 / 25."""
    chain = ["carnivore.n.01", "placental.n.01", "mammal.n.01", "vertebrate.n.01",
             "chordate.n.01", "animal.n.01", "organism.n.01", "living_thing.n.01",
             "whole.n.02", "object.n.01", "physical_entity.n.01", "entity.n.01"]
    for child, parent in itertools.pairwise(chain):
        assert shipped_parents[child] == [parent]
    assert "feline.n.01" in shipped_parents["cat.n.01"]
    assert "canine.n.02" in shipped_parents["dog.n.01"]
    cat_dog = wup("cat", "dog", "cifar10")
    cat_car = wup("cat", "automobile", "cifar10")
    assert cat_dog > cat_car
    assert cat_dog == pytest.approx(24 / 28, rel=1e-12)
    assert cat_car == pytest.approx(8 / 25, rel=1e-12)


def test_wup_equals_the_path_enumerating_reference(shipped_parents: dict) -> None:
    labels = ["cat", "dog", "automobile", "truck", "ship", "frog"]
    for a in labels:
        for b in labels:
            expected = reference_wup(shipped_parents, synset_of(a), synset_of(b))
            assert wup(a, b) == pytest.approx(expected, rel=1e-12), (a, b)
    pairs = [("apple", "cifar100", "apple_pie", "food101"), ("sandal", "fashion_mnist",
             "sneaker", "fashion_mnist"), ("church", "imagenette", "castle", "cifar100"),
             ("sports", "ag_news", "athlete", "dbpedia14")]
    for a, set_a, b, set_b in pairs:
        sa, sb = synset_of(a, set_a), synset_of(b, set_b)
        assert wup(sa, sb) == pytest.approx(reference_wup(shipped_parents, sa, sb), rel=1e-12)


def test_task_similarity_by_hand_on_two_by_two(shipped_parents: dict) -> None:
    a_labels, b_labels = ["cat", "dog"], ["automobile", "horse"]
    w = {(a, b): reference_wup(shipped_parents, synset_of(a), synset_of(b))
         for a in a_labels for b in b_labels}
    expected = 0.5 * (
        (max(w["cat", "automobile"], w["cat", "horse"])
         + max(w["dog", "automobile"], w["dog", "horse"])) / 2
        + (max(w["cat", "automobile"], w["dog", "automobile"])
           + max(w["cat", "horse"], w["dog", "horse"])) / 2)
    got = task_similarity(a_labels, b_labels, "cifar10", "cifar10")
    assert got == pytest.approx(expected, rel=1e-12)
    # S is symmetric in its two sets, and repeated labels count once.
    assert task_similarity(b_labels, a_labels) == pytest.approx(expected, rel=1e-12)
    assert task_similarity(["cat", "dog", "Dog"], b_labels) == pytest.approx(expected, rel=1e-12)


def test_task_similarity_uneven_sizes(shipped_parents: dict) -> None:
    """One label against three: (max_b w + mean_b w) / 2."""
    others = ["cat", "automobile", "frog"]
    w = [reference_wup(shipped_parents, "dog.n.01", synset_of(b)) for b in others]
    expected = 0.5 * (max(w) + sum(w) / 3)
    assert task_similarity(["dog"], others) == pytest.approx(expected, rel=1e-12)


def test_identical_sets_have_similarity_one() -> None:
    for name, labels in label_sets().items():
        assert task_similarity(labels, list(reversed(labels)), name, name) == 1.0
    # dog.n.01 is one of the synsets NLTK rates below 1 against itself; here it is 1.
    assert wup("dog", "dog") == 1.0
    assert task_similarity(["dog"], ["dog"]) == 1.0


def test_unknown_label_is_one_line_with_suggestions() -> None:
    with pytest.raises(InputError) as info:
        synset_of("catt", field="jobs[3].classes[0]")
    message = str(info.value)
    assert "\n" not in message
    assert "'catt'" in message and "'cat'" in message
    assert info.value.field == "jobs[3].classes[0]"
    assert message.startswith("jobs[3].classes[0]: ")
    with pytest.raises(InputError) as info:
        synset_of("dgo", "cifar10")
    assert "'dog'" in str(info.value) and "cifar10" in str(info.value)
    with pytest.raises(InputError, match="cifar10"):
        synset_of("cat", "cifar11")
    with pytest.raises(InputError, match="not a noun"):
        synset_of("run.v.01")
    with pytest.raises(InputError):
        task_similarity([], ["cat"])


def test_synset_names_in_the_shipped_graph_need_no_nltk(monkeypatch: pytest.MonkeyPatch,
                                                        shipped_parents: dict) -> None:
    monkeypatch.setitem(sys.modules, "nltk", None)
    monkeypatch.setitem(sys.modules, "nltk.corpus", None)
    shipped = hierarchy.shipped_hierarchy()
    fresh = ConceptHierarchy(shipped.graph, shipped.rows())
    assert fresh.synset_of("feline.n.01") == "feline.n.01"
    assert fresh.wup("feline.n.01", "cat") == pytest.approx(
        reference_wup(shipped_parents, "feline.n.01", "cat.n.01"), rel=1e-12)
    with pytest.raises(InputError) as info:
        fresh.synset_of("zebra.n.01", field="jobs[0].classes[1]")
    assert "schedlab[wordnet]" in str(info.value) and "\n" not in str(info.value)
    assert info.value.field == "jobs[0].classes[1]"


def test_ambiguous_label_names_its_sets() -> None:
    graph = HypernymGraph({"root.n.01": [], "a.n.01": ["root.n.01"], "b.n.01": ["root.n.01"]})
    rows = [MappingRow("one", "thing", "a.n.01"), MappingRow("two", "thing", "b.n.01"),
            MappingRow("two", "other", "a.n.01")]
    concepts = ConceptHierarchy(graph, rows)
    with pytest.raises(InputError) as info:
        concepts.synset_of("thing")
    assert "one" in str(info.value) and "two" in str(info.value)
    assert concepts.synset_of("thing", "two") == "b.n.01"
    # D = 1, l = 1 each: 2 / 4.
    assert concepts.wup("thing", "thing", "one") == 1.0
    assert concepts.wup("other", "thing", "two") == pytest.approx(0.5, rel=1e-12)


def test_synset_source_grows_the_graph() -> None:
    graph = HypernymGraph({"root.n.01": [], "a.n.01": ["root.n.01"]})
    calls: list[str] = []

    def source(name: str) -> tuple[str, dict[str, list[str]], dict[str, str]]:
        calls.append(name)
        return name, {name: ["mid.n.01"], "mid.n.01": ["root.n.01"], "root.n.01": []}, {}

    concepts = ConceptHierarchy(graph, [MappingRow("s", "a", "a.n.01")], synset_source=source)
    # new.n.01 -> mid -> root, a -> root: D = 1, l = 2 and 1.
    assert concepts.wup("new.n.01", "a") == pytest.approx(2 / 5, rel=1e-12)
    assert concepts.synset_of("new.n.01") == "new.n.01"
    assert calls == ["new.n.01"]


def test_networkx_view() -> None:
    graph = hierarchy.hypernym_graph()
    assert graph.has_edge("cat.n.01", "feline.n.01")
    assert graph.out_degree("entity.n.01") == 0
    assert "feline" in graph.nodes["cat.n.01"]["definition"]


# ---------------------------------------------------------------------------------------------
# The build script.

@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_wordnet_hierarchy", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FAKE_WORDNET: dict[str, list[tuple[str, str]]] = {
    "entity.n.01": [],
    "animal.n.01": [("entity.n.01", "hypernym")],
    "pet.n.01": [("animal.n.01", "hypernym")],
    "cat.n.01": [("pet.n.01", "hypernym"), ("animal.n.01", "hypernym")],
    "garfield.n.01": [("cat.n.01", "instance_hypernym")],
    "rock.n.01": [("entity.n.01", "hypernym")],
    "unrelated.n.01": [("rock.n.01", "hypernym")],
}


def test_script_builds_the_closure_of_a_fake_graph(script: ModuleType) -> None:
    rows = [MappingRow("toy", "garfield", "garfield.n.01"), MappingRow("toy", "pet", "pet.n.01")]
    doc = script.build_document(rows, FAKE_WORDNET.__getitem__, lambda n: f"gloss of {n}")
    assert [n["id"] for n in doc["nodes"]] == [
        "animal.n.01", "cat.n.01", "entity.n.01", "garfield.n.01", "pet.n.01"]
    assert {(e["source"], e["target"], e["kind"]) for e in doc["edges"]} == {
        ("animal.n.01", "entity.n.01", "hypernym"), ("pet.n.01", "animal.n.01", "hypernym"),
        ("cat.n.01", "pet.n.01", "hypernym"), ("cat.n.01", "animal.n.01", "hypernym"),
        ("garfield.n.01", "cat.n.01", "instance_hypernym")}
    assert doc["graph"]["label_synsets"] == 2 and doc["graph"]["nodes"] == 5
    assert json.loads(script.encode_document(doc)) == doc
    graph = graph_from_document(doc)
    assert graph.definition("cat.n.01") == "gloss of cat.n.01"
    # common hypernyms pet (min depth 2), animal (1), entity (0): the subsumer is pet,
    # D = max_depth(pet) + 1 = 3, l_garfield = 2 (via cat), l_pet = 0.
    assert graph.wup("garfield.n.01", "pet.n.01") == pytest.approx(6 / 8, rel=1e-12)


def test_script_lexnames_and_nltk_folder(script: ModuleType, tmp_path: Path) -> None:
    lines = script.lexnames_text().splitlines()
    assert len(lines) == 45
    assert lines[0] == "00\tadj.all\t3" and lines[3] == "03\tnoun.Tops\t1"
    assert lines[28] == "28\tnoun.time\t1" and lines[44] == "44\tadj.ppl\t3"
    for i, line in enumerate(lines):
        number, name, category = line.split("\t")
        assert int(number) == i
        assert category == {"adj": "3", "noun": "1", "verb": "2", "adv": "4"}[name.split(".")[0]]
    dict_dir = tmp_path / "dict"
    dict_dir.mkdir()
    (dict_dir / "data.noun").write_text("fake\n")
    (dict_dir / "index.noun").write_text("fake\n")
    corpus = script.prepare_nltk_data(dict_dir, tmp_path / "nltk_data")
    assert corpus == tmp_path / "nltk_data" / "corpora" / "wordnet"
    assert (corpus / "data.noun").read_text() == "fake\n"
    assert not (corpus / "data.noun").is_symlink()
    assert (corpus / "lexnames").read_text() == script.lexnames_text()
    with pytest.raises(FileNotFoundError):
        script.prepare_nltk_data(tmp_path / "nowhere", tmp_path / "other")


def test_script_checks_rows(script: ModuleType) -> None:
    names = {"cat.n.01": ("cat.n.01", "n"), "couch.n.01": ("sofa.n.01", "n"),
             "run.v.01": ("run.v.01", "v")}

    def lookup(name: str) -> tuple[str, str]:
        if name not in names:
            raise LookupError(f"no synset {name}")
        return names[name]

    script.check_rows([MappingRow("s", "cat", "cat.n.01")], lookup)
    for bad in ("couch.n.01", "run.v.01", "nothing.n.01"):
        with pytest.raises(ValueError, match=bad):
            script.check_rows([MappingRow("s", "x", bad)], lookup)


# ---------------------------------------------------------------------------------------------
# Against NLTK's WordNet (the wordnet extra and a WordNet 3.0 database under NLTK_DATA).

@pytest.fixture(scope="module")
def nltk_wordnet() -> Any:
    pytest.importorskip("nltk", reason="nltk is not installed (the schedlab[wordnet] extra)")
    from nltk.corpus import wordnet as wn

    try:
        version = wn.get_version()
    except LookupError:
        pytest.skip("NLTK finds no WordNet database (set NLTK_DATA; "
                    "scripts/build_wordnet_hierarchy.py --nltk-data DIR prepares one)")
    if version != "3.0":
        pytest.skip(f"NLTK reads WordNet {version}, not 3.0")
    return wn


def test_every_cifar100_pair_equals_nltk(nltk_wordnet: Any) -> None:
    labels = label_sets()["cifar100"]
    synsets = [synset_of(label, "cifar100") for label in labels]
    nltk_synsets = [nltk_wordnet.synset(s) for s in synsets]
    graph = hierarchy.shipped_hierarchy().graph
    pairs = 0
    for i, (a, na) in enumerate(zip(synsets, nltk_synsets, strict=True)):
        for j, (b, nb) in enumerate(zip(synsets, nltk_synsets, strict=True)):
            if i == j:
                assert wup(a, b) == 1.0
                assert graph.nltk_wup(a, b) == pytest.approx(na.wup_similarity(nb), abs=1e-12)
                continue
            expected = na.wup_similarity(nb)
            assert wup(labels[i], labels[j], "cifar100") == pytest.approx(expected, abs=1e-12)
            pairs += 1
    assert pairs == 100 * 99  # 4950 unordered pairs, each in both orders


def test_shipped_graph_is_what_the_script_builds_from_nltk(script: ModuleType,
                                                           nltk_wordnet: Any) -> None:
    rows = hierarchy.mapping_rows()
    built = script.build_from_wordnet(nltk_wordnet, rows)
    text = resources.files("schedlab").joinpath("data", "wordnet", "hypernyms.json").read_text(
        encoding="utf-8")
    assert json.loads(text) == built


def test_synsets_outside_the_shipped_graph_through_nltk(nltk_wordnet: Any) -> None:
    shipped = hierarchy.shipped_hierarchy()
    fresh = ConceptHierarchy(shipped.graph, shipped.rows())
    assert "zebra.n.01" not in fresh.graph
    expected = nltk_wordnet.synset("zebra.n.01").wup_similarity(nltk_wordnet.synset("horse.n.01"))
    assert fresh.wup("zebra.n.01", "horse", "cifar10") == pytest.approx(expected, abs=1e-12)
    assert "zebra.n.01" in fresh.graph
    assert not math.isnan(fresh.task_similarity(["zebra.n.01"], label_sets()["cifar10"]))
    with pytest.raises(InputError, match="no_such_thing"):
        fresh.synset_of("no_such_thing.n.01")
