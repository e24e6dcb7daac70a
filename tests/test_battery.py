"""One conformance battery that runs over every registered formulation automatically.

Like scikit-learn's ``check_estimator``: a new formulation is registered, and this battery
runs on it with the example instance of its paper: the checker finds nothing, the status is
honest, the objective is finite and reproduces from the Solution JSON, and a bad instance
gets a clear error.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import schedlab
from schedlab.check import check
from schedlab.errors import InputError
from schedlab.instance import instance_from_dict, load_instance
from schedlab.registry import formulations
from schedlab.solution import Solution, Status

INSTANCES = Path(__file__).resolve().parents[1] / "instances"

#: The example instance each family of formulations is tried on.
EXAMPLES = {
    "gavel": INSTANCES / "gavel" / "small-6jobs.json",
    "gavel.packed": INSTANCES / "gavel" / "colocation-24jobs.json",
    "saturn": INSTANCES / "saturn" / "three-jobs.json",
    "shockwave": INSTANCES / "shockwave" / "tiny-6jobs.json",
    "titan": INSTANCES / "titan" / "round-6tasks.json",
    "hare": INSTANCES / "hare" / "small-6jobs-4gpus.json",
    "hare.exact": INSTANCES / "hare" / "exact-3jobs-2gpus.json",
    "hare.exact_milp": INSTANCES / "hare" / "exact-3jobs-2gpus.json",
}


def example_for(name: str) -> Path:
    paper = name.split(".")[0]
    if name.endswith("_packed"):
        return EXAMPLES[f"{paper}.packed"]
    if name in EXAMPLES:  # a method with its own example (hare.exact*: small enough to prove)
        return EXAMPLES[name]
    return EXAMPLES[paper]


NAMES = sorted(formulations())


def test_registry_is_not_empty() -> None:
    assert "gavel.max_min_fairness" in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_battery(name: str, tmp_path: Path) -> None:
    inst = load_instance(example_for(name))
    sol = schedlab.solve(inst, name)
    assert sol.formulation == name
    # Heuristics cannot prove optimality: they report feasible.
    assert sol.status in (Status.OPTIMAL, Status.FEASIBLE), sol.diagnostics
    if sol.solver != "none" and name != "saturn.time_indexed_wct":
        # optimal, or stopped at the instance's looser mip_gap: feasible, and it says so
        downgraded = any("not within the optimality tolerance" in d for d in sol.diagnostics)
        assert sol.status == Status.OPTIMAL or downgraded, sol.diagnostics
    assert check(inst, sol) == [] and sol.violations == []
    assert sol.objective is not None and math.isfinite(sol.objective)
    if sol.bound is not None and sol.gap is not None:
        assert sol.gap >= 0
    assert sol.instance.hash == inst.content_hash()
    # JSON round trip
    path = tmp_path / "sol.json"
    sol.save(path)
    again = Solution.model_validate(json.loads(path.read_text()))
    assert again == sol
    # The round mechanism ran and the checker accepted it.
    if name.startswith("gavel."):
        assert len(sol.rounds) == inst.params.num_rounds


@pytest.mark.parametrize("name", NAMES)
def test_battery_rejects_an_instance_without_what_it_needs(name: str) -> None:
    bare = instance_from_dict(
        {"cluster": {"accelerators": {"v100": {"count": 1}}}, "jobs": [{"id": "a"}]}
    )
    with pytest.raises(InputError, match=r"jobs\[0\]"):
        schedlab.solve(bare, name)
