"""Four inputs a fuzzer found that formulations got wrong (the checker caught each, exit 1);
each is now a one-line rejection at validation (exit 2, the field named) or a right answer.

1. a co-located throughput of 1e20 (gavel.max_min_fairness_packed said ``unbounded``: HiGHS
   refused the rows holding coefficients >= 1e15 and the LP left was t alone);
2. ``cluster.nodes: []`` (the Saturn formulations split the pools into nodes, the checker
   read the empty list as "no node exists");
3. an arrival of 1e30 s (saturn.greedy: 1e30 + 180 == 1e30, a job that ran for 0 s);
4. a Shockwave job with no throughput on the cluster's type (both window modes gave it
   rounds there).

Limits: docs/instance-format.md ("Limits"); the Shockwave rule: docs/formulations/shockwave.md.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from schedlab.api import solve
from schedlab.check import check
from schedlab.cli import main
from schedlab.errors import InputError, SolverError
from schedlab.instance import MAX_SECONDS, MAX_THROUGHPUT, instance_from_dict, load_instance
from schedlab.solution import load_solution
from schedlab.solvers import matrix_model

INSTANCES = Path(__file__).resolve().parent.parent / "instances"
COLOCATION = INSTANCES / "gavel" / "colocation-24jobs.json"
THREE_JOBS = INSTANCES / "saturn" / "three-jobs.json"
SHOCKWAVE = INSTANCES / "shockwave" / "tiny-6jobs.json"


def _document(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _mutant(path: Path, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    document = copy.deepcopy(_document(path))
    change(document)
    return document


def _solve_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path, document: dict[str, Any],
               formulation: str) -> tuple[int, list[str], Path, Path]:
    path = tmp_path / "mutant.json"
    path.write_text(json.dumps(document))
    out = tmp_path / "solution.json"
    code = main(["solve", str(path), "-f", formulation, "-q", "--out", str(out)])
    err = capsys.readouterr().err
    return code, [line for line in err.splitlines() if line.strip()], path, out


def _assert_rejected(code: int, lines: list[str], path: Path, out: Path,
                     *fragments: str) -> None:
    assert code == 2, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: {path}: "), lines
    assert "Traceback" not in lines[0] and "internal error" not in lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert not out.exists()


def _set_colocated(value: float) -> Callable[[dict[str, Any]], None]:
    """Jobs 0 and 1 of the co-location instance share V100s at ``value`` steps/s each."""
    def change(document: dict[str, Any]) -> None:
        document["jobs"][0]["colocated_throughput"]["1"]["v100"] = value
        document["jobs"][1]["colocated_throughput"]["0"]["v100"] = value
    return change


# ------------------------------------------------------------ 1. huge co-located throughput


def test_a_colocated_throughput_of_1e20_is_one_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    document = _mutant(COLOCATION, _set_colocated(1e20))
    code, lines, path, out = _solve_cli(capsys, tmp_path, document,
                                        "gavel.max_min_fairness_packed")
    _assert_rejected(code, lines, path, out, "jobs[0].colocated_throughput.1.v100",
                     "1e+20 steps/s", f"limit {MAX_THROUGHPUT:g}")


@pytest.mark.parametrize("field", ["throughput", "colocated"])
def test_throughputs_above_the_limit_are_refused(field: str) -> None:
    def change(document: dict[str, Any]) -> None:
        if field == "throughput":
            document["jobs"][3]["throughput"]["k80"] = MAX_THROUGHPUT * 1.5
        else:
            _set_colocated(MAX_THROUGHPUT * 1.5)(document)
    where = "jobs[3].throughput.k80" if field == "throughput" else \
        "jobs[0].colocated_throughput.1.v100"
    with pytest.raises(InputError) as caught:
        instance_from_dict(_mutant(COLOCATION, change), source="x.json")
    assert caught.value.field == where
    assert "steps/s is above the limit" in caught.value.reason


def test_a_colocated_throughput_at_the_limit_solves_and_checks(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """At the limit the LP still reports shares the checker re-derives the objective from."""
    document = _mutant(COLOCATION, _set_colocated(MAX_THROUGHPUT))
    code, lines, path, out = _solve_cli(capsys, tmp_path, document,
                                        "gavel.max_min_fairness_packed")
    assert code == 0, lines
    solution = load_solution(out)
    assert solution.status.value == "optimal"
    assert check(load_instance(path), solution) == []


def test_rows_highs_refuses_fail_the_solve_instead_of_reading_as_unbounded() -> None:
    """Past validation (an Instance changed in code), the model's coefficients reach 1e18:
    HiGHS refuses those rows, and the solve now says so rather than solving without them."""
    instance = instance_from_dict(_document(COLOCATION))
    instance.jobs[0].colocated_throughput["1"]["v100"] = 1e20  # type: ignore[index]
    instance.jobs[1].colocated_throughput["0"]["v100"] = 1e20  # type: ignore[index]
    with pytest.raises(SolverError, match="HiGHS refused"):
        solve(instance.model_copy(), "gavel.max_min_fairness_packed")


def test_the_matrix_model_refuses_what_highs_refuses() -> None:
    model = matrix_model()
    model.add_columns([0.0], [np.inf], [1.0])
    model.add_rows([-np.inf], [1.0], starts=[0, 1], columns=[0], values=[2.0])
    with pytest.raises(SolverError, match="refused the model's rows"):
        model.add_rows([-np.inf], [1.0], starts=[0, 1], columns=[0], values=[1e16])
    with pytest.raises(SolverError, match="refused a coefficient change"):
        model.set_coefficients([0], [0], [1e16])


# ------------------------------------------------------------------- 2. an empty node list


@pytest.mark.parametrize("formulation", ["saturn.current_practice", "saturn.greedy"])
def test_an_empty_node_list_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                        formulation: str) -> None:
    document = _mutant(THREE_JOBS, lambda d: d["cluster"].update(nodes=[]))
    code, lines, path, out = _solve_cli(capsys, tmp_path, document, formulation)
    _assert_rejected(code, lines, path, out, "cluster.nodes", "is empty")


def test_nodes_left_out_are_split_from_the_pool(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    """Without ``nodes`` the pool (1 node x 4 GPUs) is the node: current practice runs A, B,
    C one after another on all 4 GPUs, 100 + 70 + 60 = 230 s (the file's description)."""
    document = _mutant(THREE_JOBS, lambda d: d["cluster"].pop("nodes"))
    code, lines, path, out = _solve_cli(capsys, tmp_path, document, "saturn.current_practice")
    assert code == 0, lines
    solution = load_solution(out)
    assert solution.objective == pytest.approx(230.0)
    assert check(load_instance(path), solution) == []


# ----------------------------------------------------------------------- 3. a huge arrival


def _arrive_at(seconds: float) -> Callable[[dict[str, Any]], None]:
    return lambda document: document["jobs"][0].update(arrival=seconds)


@pytest.mark.parametrize("formulation", ["saturn.greedy", "saturn.time_indexed"])
def test_an_arrival_of_1e30_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                        formulation: str) -> None:
    document = _mutant(THREE_JOBS, _arrive_at(1e30))
    code, lines, path, out = _solve_cli(capsys, tmp_path, document, formulation)
    _assert_rejected(code, lines, path, out, "jobs[0].arrival", "1e+30 s",
                     f"limit {MAX_SECONDS:g} s")


def test_an_arrival_at_the_limit_keeps_the_duration(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    """A arrives at 1e9 s, long after B and C are done (70 + 60 s on 4 GPUs): it runs alone on
    its fastest configuration, fsdp on 4 GPUs for 100 s, so the makespan is 1e9 + 100 s."""
    document = _mutant(THREE_JOBS, _arrive_at(MAX_SECONDS))
    code, lines, path, out = _solve_cli(capsys, tmp_path, document, "saturn.greedy")
    assert code == 0, lines
    solution = load_solution(out)
    assert solution.objective == MAX_SECONDS + 100.0
    a = next(e for e in solution.schedule if e.job == "A")
    assert (a.start, a.end - a.start, a.gpus) == (MAX_SECONDS, 100.0, 4)
    assert check(load_instance(path), solution) == []


@pytest.mark.parametrize(("where", "change"), [
    ("jobs[0].configs[1].runtime_s",
     lambda d: d["jobs"][0]["configs"][1].update(runtime_s=2e9)),
    ("jobs[1].slo_s", lambda d: d["jobs"][1].update(slo_s=1e12)),
    ("params.round_s", lambda d: d.update(params={"round_s": 1e10})),
    ("params.now_s", lambda d: d.update(params={"now_s": 1e10})),
    ("jobs[2].switch_seconds", lambda d: d["jobs"][2].update(switch_seconds=1e10)),
    ("jobs[2].task_seconds.a100-80gb",
     lambda d: d["jobs"][2].update(task_seconds={"a100-80gb": 1e10})),
])
def test_other_times_above_the_limit_are_refused(where: str,
                                                 change: Callable[[dict[str, Any]], None]) -> None:
    with pytest.raises(InputError) as caught:
        instance_from_dict(_mutant(THREE_JOBS, change), source="x.json")
    assert caught.value.field == where
    assert f"{MAX_SECONDS:g} s" in caught.value.reason


# ------------------------------------------------ 4. Shockwave job with no throughput there


@pytest.mark.parametrize("formulation", ["shockwave.nash_welfare_convex",
                                         "shockwave.nash_welfare"])
@pytest.mark.parametrize(("throughput", "got"), [({}, "got none"), ({"v100": 0.0}, "got 0")])
def test_a_shockwave_job_that_cannot_run_is_one_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, formulation: str,
        throughput: dict[str, float], got: str) -> None:
    document = _mutant(SHOCKWAVE, lambda d: d["jobs"][1].update(throughput=throughput))
    instance_from_dict(document)  # a valid instance: only the window problem needs it
    code, lines, path, out = _solve_cli(capsys, tmp_path, document, formulation)
    _assert_rejected(code, lines, path, out, "jobs[1].throughput.v100", got, "never run")


def test_the_shipped_shockwave_window_still_checks(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    code, lines, path, out = _solve_cli(capsys, tmp_path, _document(SHOCKWAVE),
                                        "shockwave.nash_welfare_convex")
    assert code == 0, lines
    assert check(load_instance(path), load_solution(out)) == []
