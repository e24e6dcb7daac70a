"""Co-location entries read as arrays (schedlab.colocation, Instance.colocation, gavel_data).

The arrays are compared with an independent per-entry walk over the instance's dicts written
here (what ``gavel_data`` did before the entries were read as arrays), on random instances with
partial listings, asymmetric values, ids that do not sort as positions, and sizes on both sides
of the validator's array threshold.  The content hash is checked against the canonical JSON
(instances without co-location) and for determinism and sensitivity (with co-location).
"""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pytest

from schedlab.check import check
from schedlab.colocation import ColocationError, colocation_of
from schedlab.errors import InputError
from schedlab.formulations.gavel.data import (
    GavelData,
    PairList,
    allocation_arrays,
    effective_throughput,
    gavel_data,
)
from schedlab.formulations.gavel.models import MaxMinFairness
from schedlab.instance import Instance, instance_from_dict
from schedlab.solution import PairShare, Status

TYPES = ("v100", "p100", "k80")


def random_document(seed: int, num_jobs: int, *, keep: float = 0.7,
                    shuffled_ids: bool = True) -> dict[str, Any]:
    """``num_jobs`` single-GPU jobs on 1-3 GPUs of each type; a fraction ``keep`` of the pairs
    listed (on both jobs, same types), values different on the two sides, ids whose string
    order differs from their positions when ``shuffled_ids``, dict orders shuffled."""
    rng = random.Random(seed)
    names = [f"j{i}" for i in range(num_jobs)]
    if shuffled_ids:
        rng.shuffle(names)
    jobs: list[dict[str, Any]] = []
    for name in names:
        types = [k for k in TYPES if rng.random() < 0.8] or ["k80"]
        jobs.append({"id": name, "throughput": {k: round(rng.uniform(0.5, 4.0), 3)
                                                for k in types}})
    for a in range(num_jobs):
        for b in range(a + 1, num_jobs):
            if rng.random() > keep:
                continue
            common = [k for k in TYPES if k in jobs[a]["throughput"]
                      and k in jobs[b]["throughput"] and rng.random() < 0.9]
            rng.shuffle(common)
            entry_a = {k: round(rng.uniform(0.0, 1.0) * jobs[a]["throughput"][k], 4)
                       for k in common}
            entry_b = {k: round(rng.uniform(0.0, 1.0) * jobs[b]["throughput"][k], 4)
                       for k in reversed(common)}
            jobs[a].setdefault("colocated_throughput", {})[jobs[b]["id"]] = entry_a
            jobs[b].setdefault("colocated_throughput", {})[jobs[a]["id"]] = entry_b
    for job in jobs:  # listing order of the partners is arbitrary
        partners = list(job.get("colocated_throughput", {}).items())
        rng.shuffle(partners)
        if partners:
            job["colocated_throughput"] = dict(partners)
    cluster = {k: {"count": rng.randint(1, 3)} for k in TYPES}
    return {"schema": "schedlab/instance@1", "name": f"coloc-{seed}",
            "cluster": {"accelerators": cluster}, "jobs": jobs, "params": {"num_rounds": 0}}


def walked_pairs(instance: Instance) -> tuple[list[tuple[int, int]], np.ndarray, np.ndarray]:
    """Pairs, Tc (P, K, 2) and allowed (P, K) by a per-entry walk over the dicts: pairs in
    order of the first job's position, then the partner's id; a pair is allowed on a type
    where it fits and one of the two throughputs is positive."""
    index = {job.id: j for j, job in enumerate(instance.jobs)}
    types = instance.types
    gpus = {k: instance.cluster.accelerators[k].count for k in types}
    pairs: list[tuple[int, int]] = []
    rows: list[list[list[float]]] = []
    allowed: list[list[bool]] = []
    for a, job in enumerate(instance.jobs):
        for other in sorted(job.colocated_throughput or {}):
            b = index[other]
            if b <= a:
                continue
            mine = (job.colocated_throughput or {})[other]
            theirs = (instance.jobs[b].colocated_throughput or {})[job.id]
            need = max(job.scale_factor, instance.jobs[b].scale_factor)
            pairs.append((a, b))
            row = [[mine.get(k, 0.0), theirs.get(k, 0.0)] if need <= gpus[k] else [0.0, 0.0]
                   for k in types]
            rows.append(row)
            allowed.append([sum(r) > 0 for r in row])
    return (pairs, np.array(rows, dtype=float).reshape(-1, len(types), 2),
            np.array(allowed, dtype=bool).reshape(-1, len(types)))


@pytest.mark.parametrize("seed,num_jobs,keep", [(0, 2, 1.0), (1, 7, 0.6), (2, 12, 0.5),
                                                (3, 40, 0.8), (4, 55, 1.0)])
def test_gavel_data_pairs_equal_the_per_entry_walk(seed: int, num_jobs: int, keep: float) -> None:
    """40 and 55 jobs list more than 2048 entries: the validator checks them on arrays."""
    instance = instance_from_dict(random_document(seed, num_jobs, keep=keep))
    data = gavel_data(instance, space_sharing=True)
    pairs, tc, allowed = walked_pairs(instance)
    assert list(data.pairs) == pairs
    np.testing.assert_array_equal(data.pair_throughput, tc)
    np.testing.assert_array_equal(data.pair_allowed, allowed)
    # solo throughputs: T[j,k] where listed, positive and the gang fits
    for j, job in enumerate(instance.jobs):
        for k, acc in enumerate(instance.types):
            assert data.throughput[j, k] == job.throughput.get(acc, 0.0)
            assert data.allowed[j, k] == (job.throughput.get(acc, 0.0) > 0)


def test_colocation_arrays_hold_every_entry() -> None:
    instance = instance_from_dict(random_document(5, 9, keep=0.7))
    coloc = instance.colocation()
    assert coloc.symmetric()
    assert np.all(coloc.first < coloc.second)
    keys = coloc.first * 9 + coloc.second
    assert np.all(np.diff(keys) > 0)  # sorted by (a, b), each pair once
    seen = 0
    for p, (a, b) in enumerate(zip(coloc.first.tolist(), coloc.second.tolist(), strict=True)):
        for side, (me, other) in enumerate(((a, b), (b, a))):
            entry = (instance.jobs[me].colocated_throughput or {})[instance.jobs[other].id]
            for k, acc in enumerate(instance.types):
                assert coloc.listed[p, k, side] == (acc in entry)
                assert coloc.throughput[p, k, side] == entry.get(acc, 0.0)
            seen += 1
    assert seen == sum(len(job.colocated_throughput or {}) for job in instance.jobs)


def test_colocation_keeps_one_sided_and_empty_entries() -> None:
    """Built from raw dicts (no validation): a one-sided entry and an entry naming no type."""
    coloc = colocation_of(["a", "b", "c"], [{"c": {"x": 1.5}}, {"c": {}}, None], ["x", "y"])
    assert coloc.first.tolist() == [0, 1] and coloc.second.tolist() == [2, 2]
    assert coloc.present.tolist() == [[True, False], [True, False]]
    assert coloc.listed[:, :, 0].tolist() == [[True, False], [False, False]]
    assert coloc.throughput[0, 0].tolist() == [1.5, 0.0]
    assert not coloc.symmetric()


@pytest.mark.parametrize("entries,words", [
    ([{"zz": {"x": 1.0}}, None], "unknown job id 'zz'"),
    ([{"a": {"x": 1.0}}, None], "itself"),
    ([{"b": {"w": 1.0}}, {"a": {"w": 1.0}}], "unknown accelerator 'w'"),
    ([{"b": {"x": 1.0, "w": 2.0}}, {"a": {"x": 1.0}}], "unknown accelerator 'w'"),
])
def test_colocation_of_rejects_unknown_names(entries: list[Any], words: str) -> None:
    with pytest.raises(ColocationError, match=words):
        colocation_of(["a", "b"], entries, ["x"])


@pytest.mark.parametrize("num_jobs", [6, 50])
@pytest.mark.parametrize("breakage,field,words", [
    ("unknown", "jobs[1].colocated_throughput.nobody", "unknown job id"),
    ("self", "jobs[1].colocated_throughput.j1", "itself"),
    ("accelerator", "jobs[0].colocated_throughput.j1.tpu", "unknown accelerator"),
    ("one_sided", "jobs[1].colocated_throughput.j0", "listed on both jobs"),
    ("types_differ", "jobs[0].colocated_throughput.j1", "listed on both jobs"),
])
def test_validation_names_the_first_bad_entry(num_jobs: int, breakage: str, field: str,
                                              words: str) -> None:
    """Below (6 jobs) and above (50 jobs: 2450 entries) the array threshold."""
    jobs = [{"id": f"j{i}", "throughput": {"v100": 1.0, "k80": 0.5}} for i in range(num_jobs)]
    for a in range(num_jobs):
        for b in range(num_jobs):
            if a != b:
                jobs[a].setdefault("colocated_throughput", {})[f"j{b}"] = {"v100": 0.5,
                                                                          "k80": 0.25}
    if breakage == "unknown":
        jobs[1]["colocated_throughput"]["nobody"] = {"v100": 0.1}
    elif breakage == "self":
        jobs[1]["colocated_throughput"]["j1"] = {"v100": 0.1}
    elif breakage == "accelerator":
        jobs[0]["colocated_throughput"]["j1"]["tpu"] = 0.1
    elif breakage == "one_sided":
        del jobs[0]["colocated_throughput"]["j1"]
    else:
        del jobs[1]["colocated_throughput"]["j0"]["k80"]
    document = {"cluster": {"accelerators": {"v100": {"count": 2}, "k80": {"count": 2}}},
                "jobs": jobs}
    with pytest.raises(InputError) as raised:
        instance_from_dict(document)
    assert raised.value.field == field
    assert words in str(raised.value)


def test_cache_follows_a_replaced_or_resized_dict() -> None:
    instance = instance_from_dict(random_document(6, 8, keep=1.0, shuffled_ids=False))
    before = instance.colocation().num_pairs
    assert before > 0
    instance.jobs[0].colocated_throughput = None
    after = instance.colocation()
    assert after.num_pairs == before  # the partners still list job 0 ...
    assert not after.present[after.first == 0, 0].any()  # ... but job 0 lists no one
    for job in instance.jobs:
        job.colocated_throughput = None
    assert instance.colocation().num_pairs == 0


# ------------------------------------------------------------------------ content hash


def sparse_fields_document() -> dict[str, Any]:
    """Two jobs using every dict-valued job field the hash treats apart (throughput listing
    different types, switch_seconds as a dict and as a number, duration_s, regimes)."""
    return {
        "schema": "schedlab/instance@1", "name": "dicts",
        "cluster": {"accelerators": {"v100": {"count": 2}, "k80": {"count": 1}}},
        "params": {"entity_weights": {"x": 1.0, "y": 2.0}},
        "jobs": [
            {"id": "a", "throughput": {"v100": 2.0, "k80": 1.0}, "entity": "x",
             "switch_seconds": {"v100": 3.0, "k80": 1.5}, "duration_s": {"1": 100.0, "2": 60.0}},
            {"id": "b", "throughput": {"k80": 1.0}, "switch_seconds": 2.0, "entity": "y",
             "regimes": {"16": 3.0, "32": 2.0}, "epochs": 2, "batch_schedule": [16, 32]},
        ],
    }


def reversed_dicts(value: Any) -> Any:
    """``value`` with every dict's key order reversed, at every depth."""
    if isinstance(value, dict):
        return {k: reversed_dicts(v) for k, v in reversed(list(value.items()))}
    if isinstance(value, list):
        return [reversed_dicts(v) for v in value]
    return value


def test_hash_is_free_of_dict_order_and_sees_every_value() -> None:
    document = sparse_fields_document()
    base = instance_from_dict(document).content_hash()
    assert instance_from_dict(reversed_dicts(document)).content_hash() == base

    def variant(path: tuple[Any, ...], value: Any) -> str:
        copy = json.loads(json.dumps(document))
        target = copy
        for key in path[:-1]:
            target = target[key]
        if value is None:
            del target[path[-1]]
        else:
            target[path[-1]] = value
        return instance_from_dict(copy).content_hash()

    changes = [
        (("jobs", 0, "throughput", "k80"), 1.5),           # a value
        (("jobs", 0, "throughput", "k80"), None),          # a listed type
        (("jobs", 1, "throughput", "v100"), 1.0),          # a type listed by another job
        (("jobs", 0, "switch_seconds", "k80"), 1.25),
        (("jobs", 1, "switch_seconds"), {"k80": 2.0}),     # number vs dict
        (("jobs", 0, "duration_s", "2"), 61.0),
        (("jobs", 1, "regimes", "32"), 2.5),
        (("jobs", 0, "entity"), "y"),
        (("jobs", 1, "weight"), 2.0),
        (("params", "entity_weights", "y"), 3.0),
        (("cluster", "accelerators", "k80", "count"), 2),
    ]
    hashes = {base} | {variant(path, value) for path, value in changes}
    assert len(hashes) == len(changes) + 1
    # the order of the jobs is part of the content
    swapped = json.loads(json.dumps(document))
    swapped["jobs"].reverse()
    assert instance_from_dict(swapped).content_hash() not in hashes


def test_hash_equal_for_equal_content_however_built() -> None:
    document = random_document(7, 6)
    for job in document["jobs"]:
        job.pop("colocated_throughput", None)
    instance = instance_from_dict(document)
    again = instance_from_dict(json.loads(json.dumps(instance.to_dict())))
    assert again.content_hash() == instance.content_hash()
    assert instance.model_copy().content_hash() == instance.content_hash()


def test_hash_with_colocation_is_deterministic_and_order_free() -> None:
    document = random_document(8, 10, keep=0.8)
    first = instance_from_dict(document).content_hash()
    again = instance_from_dict(json.loads(json.dumps(document))).content_hash()
    assert first == again
    # partner order, type order inside entries and cluster type order do not matter
    reordered = json.loads(json.dumps(document))
    for job in reordered["jobs"]:
        coloc = job.get("colocated_throughput")
        if coloc:
            job["colocated_throughput"] = {other: dict(reversed(list(entry.items())))
                                           for other, entry in reversed(list(coloc.items()))}
    accelerators = reordered["cluster"]["accelerators"]
    reordered["cluster"]["accelerators"] = dict(reversed(list(accelerators.items())))
    assert instance_from_dict(reordered).content_hash() == first


def test_hash_changes_with_every_kind_of_change() -> None:
    document = random_document(9, 8, keep=0.9, shuffled_ids=False)
    base = instance_from_dict(document).content_hash()
    hashes = {base}
    owner = next(job for job in document["jobs"] if job.get("colocated_throughput"))
    partner_id, entry = next(iter(owner["colocated_throughput"].items()))
    partner = next(job for job in document["jobs"] if job["id"] == partner_id)
    acc = next(iter(entry))

    def variant(change: Any) -> str:
        copy = json.loads(json.dumps(document))
        change(copy)
        return instance_from_dict(copy).content_hash()

    def job_of(copy: dict[str, Any], job_id: str) -> dict[str, Any]:
        return next(job for job in copy["jobs"] if job["id"] == job_id)

    def nudge(copy: dict[str, Any]) -> None:
        value = job_of(copy, owner["id"])["colocated_throughput"][partner_id][acc]
        job_of(copy, owner["id"])["colocated_throughput"][partner_id][acc] = value + 1e-9

    def unlist_type(copy: dict[str, Any]) -> None:
        del job_of(copy, owner["id"])["colocated_throughput"][partner_id][acc]
        del job_of(copy, partner_id)["colocated_throughput"][owner["id"]][acc]

    def unlist_pair(copy: dict[str, Any]) -> None:
        del job_of(copy, owner["id"])["colocated_throughput"][partner_id]
        del job_of(copy, partner_id)["colocated_throughput"][owner["id"]]

    def zero_instead_of_value(copy: dict[str, Any]) -> None:
        job_of(copy, partner_id)["colocated_throughput"][owner["id"]][acc] = 0.0

    def solo_change(copy: dict[str, Any]) -> None:
        job = job_of(copy, partner["id"])
        first = next(iter(job["throughput"]))
        job["throughput"][first] *= 2

    for change in (nudge, unlist_type, unlist_pair, zero_instead_of_value, solo_change):
        hashes.add(variant(change))
    assert len(hashes) == 6


# --------------------------------------------------------- arrays in, same answers out


def test_pair_list_behaves_like_the_list() -> None:
    pairs = PairList(np.array([[0, 3], [1, 2], [2, 5]]))
    assert len(pairs) == 3 and bool(pairs)
    assert pairs[1] == (1, 2) and pairs[-1] == (2, 5)
    assert list(pairs) == [(0, 3), (1, 2), (2, 5)]
    assert pairs == [(0, 3), (1, 2), (2, 5)] and pairs != [(0, 3)]
    assert list(pairs[1:]) == [(1, 2), (2, 5)]
    assert np.asarray(pairs, dtype=np.int64) is pairs.array
    assert not PairList(np.zeros((0, 2)))


def looped_throughput(data: GavelData, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    thr = (data.throughput * x).sum(axis=1)
    for p, (a, b) in enumerate(data.pairs):
        thr[a] += float((data.pair_throughput[p, :, 0] * y[p]).sum())
        thr[b] += float((data.pair_throughput[p, :, 1] * y[p]).sum())
    return thr


def test_effective_throughput_and_allocation_arrays_on_pairs() -> None:
    instance = instance_from_dict(random_document(10, 9, keep=0.8))
    data = gavel_data(instance, space_sharing=True)
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 0.2, data.throughput.shape)
    y = rng.uniform(0, 0.1, data.pair_allowed.shape)
    np.testing.assert_allclose(effective_throughput(data, x, y), looped_throughput(data, x, y),
                               rtol=1e-12)
    # shares named in either job order, twice for one pair, or for an unlisted pair
    a, b = data.pairs[0]
    ids = data.job_ids
    listed = {frozenset(pair) for pair in data.pairs}
    unlisted = next((i, j) for i in range(9) for j in range(i + 1, 9)
                    if frozenset((i, j)) not in listed)
    shares = [PairShare(jobs=(ids[b], ids[a]), accelerator=data.types[0], fraction=0.25),
              PairShare(jobs=(ids[a], ids[b]), accelerator=data.types[0], fraction=0.5),
              PairShare(jobs=(ids[unlisted[0]], ids[unlisted[1]]), accelerator=data.types[0],
                        fraction=0.5),
              PairShare(jobs=(ids[a], "nobody"), accelerator=data.types[0], fraction=0.5)]
    _, got = allocation_arrays(data, {}, shares)
    expected = np.zeros(data.pair_allowed.shape)
    expected[0, 0] = 0.75
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("seed", [11, 12])
def test_packed_optimum_matches_the_reference_and_checks(seed: int) -> None:
    """24 jobs with partial, asymmetric listings and shuffled ids: the fast path's optimum is
    the Pyomo model's, and the checker passes it."""
    instance = instance_from_dict(random_document(seed, 24, keep=0.6))
    solutions = {}
    for method in ("pyomo", "fast"):
        formulation = MaxMinFairness(method=method, space_sharing=True, num_rounds=0)
        formulation.name = "gavel.max_min_fairness_packed"
        solutions[method] = formulation.solve(instance)
    ref, fast = solutions["pyomo"], solutions["fast"]
    assert ref.status == fast.status == Status.OPTIMAL
    assert ref.objective is not None and fast.objective is not None
    assert fast.objective == pytest.approx(ref.objective, rel=1e-6)
    assert ref.instance.hash == fast.instance.hash == instance.content_hash()
    assert check(instance, fast) == []
