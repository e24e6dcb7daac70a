"""The ``schedlab`` command line: exit codes, one-line errors, reports and files written.

Most tests call :func:`schedlab.cli.main` in-process (fast); a few run ``python -m schedlab``
in a subprocess to check the real exit code and that stderr is one line with no traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import require_formulation, tiny_instance

from schedlab.cli import main
from schedlab.instance import load_instance
from schedlab.solution import Solution, Status, load_solution

GAVEL = "gavel.max_min_fairness"
REPO = Path(__file__).resolve().parent.parent


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``main(argv)`` in-process -> (exit code, stdout, stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_subprocess(*argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m schedlab argv`` in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-m", "schedlab", *argv],
        capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
    )


def assert_one_error_line(err: str, *fragments: str) -> None:
    """stderr is exactly one ``error:`` line, no traceback, naming every fragment."""
    lines = err.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {err!r}"
    assert lines[0].startswith("error: "), lines[0]
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"


# ------------------------------------------------------------------------ bad input


def _with(mutate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    data = tiny_instance()
    mutate(data)
    return data


BAD_INSTANCES: list[tuple[str, dict[str, Any], str, str]] = [
    # (test id, document, field path expected in the message, words expected in the reason)
    ("negative-throughput",
     _with(lambda d: d["jobs"][1]["throughput"].update(v100=-4.0)),
     "jobs[1].throughput.v100", "greater than or equal to 0"),
    ("unknown-accelerator",
     _with(lambda d: d["jobs"][1]["throughput"].update(a100=9.0)),
     "jobs[1].throughput.a100", "unknown accelerator"),
    ("duplicate-id",
     _with(lambda d: d["jobs"][2].update(id="a")),
     "jobs[2].id", "duplicate job id"),
    ("zero-gpus",
     _with(lambda d: d["cluster"].update(accelerators={"k80": {"count": 0}})),
     "cluster.accelerators", "zero GPUs"),
    ("missing-cluster",
     _with(lambda d: d.pop("cluster")),
     "cluster", "required"),
    ("wrong-type",
     _with(lambda d: d["jobs"][0].update(scale_factor="two")),
     "jobs[0].scale_factor", "integer"),
    ("typo-field",
     _with(lambda d: d["jobs"][0].update(thruput={"k80": 1.0})),
     "jobs[0].thruput", "unknown field"),
]


@pytest.mark.parametrize("command", ["validate", "solve"])
@pytest.mark.parametrize(("doc", "field", "reason"),
                         [pytest.param(d, f, r, id=i) for i, d, f, r in BAD_INSTANCES])
def test_bad_instance_exits_2_naming_file_and_field(
    capsys: pytest.CaptureFixture[str], write_instance: Callable[..., Path],
    command: str, doc: dict[str, Any], field: str, reason: str,
) -> None:
    path = write_instance(doc, name="bad.json")
    code, out, err = run_main(capsys, command, str(path))
    assert code == 2
    assert_one_error_line(err, str(path), field, reason)
    assert out == ""


def test_nan_literal_throughput(capsys: pytest.CaptureFixture[str],
                                write_instance: Callable[..., Path]) -> None:
    text = json.dumps(tiny_instance(), indent=2).replace('"v100": 4.0', '"v100": NaN')
    assert "NaN" in text
    path = write_instance(text=text, name="nan.json")
    code, _, err = run_main(capsys, "validate", str(path))
    assert code == 2
    assert_one_error_line(err, "nan.json", "jobs[1].throughput.v100", "finite")


def test_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "no-such-instance.json"
    code, _, err = run_main(capsys, "solve", str(path))
    assert code == 2
    assert_one_error_line(err, "no-such-instance.json", "no such file")


def test_invalid_json(capsys: pytest.CaptureFixture[str],
                      write_instance: Callable[..., Path]) -> None:
    path = write_instance(text='{"cluster": {"accelerators": {"k80": {"count": 2}}},\n'
                               '"jobs": [ {"id": "a",} ]}', name="broken.json")
    code, _, err = run_main(capsys, "validate", str(path))
    assert code == 2
    assert_one_error_line(err, "broken.json", "invalid JSON", "line 2")


def test_empty_file(capsys: pytest.CaptureFixture[str],
                    write_instance: Callable[..., Path]) -> None:
    path = write_instance(text="", name="empty.json")
    code, _, err = run_main(capsys, "validate", str(path))
    assert code == 2
    assert_one_error_line(err, "empty.json", "empty")


def test_unknown_formulation(capsys: pytest.CaptureFixture[str], tiny_file: Path,
                             stand_ins: object) -> None:
    code, _, err = run_main(capsys, "solve", str(tiny_file), "--formulation", "gavel.nope")
    assert code == 2
    assert_one_error_line(err, "--formulation", "unknown formulation 'gavel.nope'",
                          "testing.max_total_throughput")


def test_unknown_solver(capsys: pytest.CaptureFixture[str], tiny_file: Path,
                        stand_ins: object) -> None:
    code, _, err = run_main(capsys, "solve", str(tiny_file), "-f",
                            "testing.max_total_throughput", "--solver", "cplex")
    assert code == 2
    assert_one_error_line(err, "--solver", "unknown solver 'cplex'", "highs")


def test_gurobi_not_installed(capsys: pytest.CaptureFixture[str], tiny_file: Path,
                              stand_ins: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gurobipy", None)  # import gurobipy -> ImportError
    code, _, err = run_main(capsys, "solve", str(tiny_file), "-f",
                            "testing.max_total_throughput", "--solver", "gurobi")
    assert code == 2
    assert_one_error_line(err, "gurobi", "not installed", "pip install")


@pytest.mark.parametrize("argv", [
    ["solve", "x.json", "--time-limit", "-1"],
    ["solve", "x.json", "--time-limit", "soon"],
    ["solve", "x.json", "--mip-gap", "nan"],
    ["solve", "x.json", "--threads", "0"],
    ["solve", "x.json", "--lp-method", "barrier"],
    ["solve"],
    ["schema", "result"],
    ["frobnicate"],
    [],
])
def test_usage_errors_exit_2_with_one_line(capsys: pytest.CaptureFixture[str],
                                           argv: list[str]) -> None:
    code, _, err = run_main(capsys, *argv)
    assert code == 2
    assert_one_error_line(err, "--help")


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "solve", "--help")
    assert code == 0
    assert "--formulation" in out and "--time-limit" in out


# ---------------------------------------------------------------------------- solve


def test_solve_prints_report_and_writes_checkable_out(
    capsys: pytest.CaptureFixture[str], tiny_file: Path, tmp_path: Path, stand_ins: object,
) -> None:
    out_path = tmp_path / "results" / "sol.json"
    code, out, err = run_main(capsys, "solve", str(tiny_file), "-f",
                              "testing.max_total_throughput", "--out", str(out_path))
    assert code == 0, err
    for word in ("status", "optimal", "objective", "bound", "gap", "time build",
                 "time solve", "time extract", "time check", "k80", "v100",
                 "effective throughput"):
        assert word in out, word
    solution = load_solution(out_path)
    assert solution.status == Status.OPTIMAL
    assert solution.instance.hash == load_instance(tiny_file).content_hash()
    # c needs v100 (5/s), a prefers v100: the LP optimum puts b (2 GPUs) on k80.
    assert solution.objective == pytest.approx(3.0 + 2.0 + 5.0)
    assert not list(out_path.parent.glob(".sol.json.*")), "temporary file left behind"

    code, out, err = run_main(capsys, "check", str(tiny_file), str(out_path))
    assert code == 0, err
    assert "ok" in out and err == ""


def test_solve_quiet_prints_one_line(capsys: pytest.CaptureFixture[str], tiny_file: Path,
                                     stand_ins: object) -> None:
    code, out, _ = run_main(capsys, "solve", str(tiny_file), "-f",
                            "testing.max_total_throughput", "--quiet")
    assert code == 0
    assert len(out.splitlines()) == 1 and out.startswith("optimal objective=")


def test_solve_truncates_large_instances(capsys: pytest.CaptureFixture[str],
                                         write_instance: Callable[..., Path],
                                         stand_ins: object) -> None:
    data = tiny_instance()
    data["cluster"]["accelerators"] = {"k80": {"count": 40}, "v100": {"count": 40}}
    data["jobs"] = [{"id": f"job{i:03d}", "throughput": {"k80": 1.0 + i, "v100": 2.0 + i}}
                    for i in range(45)]
    path = write_instance(data, name="many.json")
    code, out, _ = run_main(capsys, "solve", str(path), "-f", "testing.max_total_throughput")
    assert code == 0
    assert "job019" in out and "job020" not in out
    assert "... 25 more" in out


def test_infeasible_exits_1_with_diagnostics(capsys: pytest.CaptureFixture[str],
                                             tiny_file: Path, tmp_path: Path,
                                             stand_ins: object) -> None:
    out_path = tmp_path / "sol.json"
    code, out, err = run_main(capsys, "solve", str(tiny_file), "-f", "testing.infeasible",
                              "--out", str(out_path))
    assert code == 1
    assert "infeasible" in out and "test diagnostic" in out
    assert "Traceback" not in err
    # The honest infeasible result is recorded; `check` refuses it as nothing to check.
    assert load_solution(out_path).status == Status.INFEASIBLE
    code, out, _ = run_main(capsys, "check", str(tiny_file), str(out_path))
    assert code == 1 and "nothing to check" in out


def test_checker_violations_exit_1(capsys: pytest.CaptureFixture[str], tiny_file: Path,
                                   stand_ins: object) -> None:
    code, out, _ = run_main(capsys, "solve", str(tiny_file), "-f", "testing.over_capacity")
    assert code == 1
    assert "violation" in out and "accelerator k80" in out


@pytest.mark.parametrize(("formulation", "code", "message"), [
    ("testing.crash", 1, "simulated crash"),
    ("testing.interrupted", 130, "interrupted"),
])
def test_failed_solve_leaves_no_out_file(capsys: pytest.CaptureFixture[str], tiny_file: Path,
                                         tmp_path: Path, stand_ins: object, formulation: str,
                                         code: int, message: str) -> None:
    out_path = tmp_path / "sol.json"
    got, _, err = run_main(capsys, "solve", str(tiny_file), "-f", formulation,
                           "--out", str(out_path))
    assert got == code
    assert_one_error_line(err, message)
    assert list(tmp_path.iterdir()) == [tiny_file], "a partial file was left behind"


def test_failed_solve_keeps_previous_out_file(capsys: pytest.CaptureFixture[str],
                                              tiny_file: Path, tmp_path: Path,
                                              stand_ins: object) -> None:
    out_path = tmp_path / "sol.json"
    out_path.write_text("previous result\n")
    code, _, _ = run_main(capsys, "solve", str(tiny_file), "-f", "testing.crash",
                          "--out", str(out_path))
    assert code == 1
    assert out_path.read_text() == "previous result\n"


def test_out_is_a_directory(capsys: pytest.CaptureFixture[str], tiny_file: Path,
                            tmp_path: Path, stand_ins: object) -> None:
    code, _, err = run_main(capsys, "solve", str(tiny_file), "-f",
                            "testing.max_total_throughput", "--out", str(tmp_path))
    assert code == 2
    assert_one_error_line(err, "--out", "directory")


def test_gavel_max_min_fairness_end_to_end(capsys: pytest.CaptureFixture[str],
                                           tiny_file: Path, tmp_path: Path) -> None:
    require_formulation(GAVEL)
    out_path = tmp_path / "sol.json"
    code, out, err = run_main(capsys, "solve", str(tiny_file), "--out", str(out_path))
    assert code == 0, out + err
    assert "optimal" in out
    solution = load_solution(out_path)
    assert solution.formulation == GAVEL
    assert set(solution.allocation) <= {"a", "b", "c"}
    code, _, err = run_main(capsys, "check", str(tiny_file), str(out_path))
    assert code == 0, err


# ---------------------------------------------------------------------------- check


def _solution_for(instance_path: Path, allocation: dict[str, dict[str, float]],
                  path: Path, *, hash_: str | None = None) -> Path:
    instance = load_instance(instance_path)
    solution = Solution.model_validate({
        "instance": {"name": instance.name, "hash": hash_ or instance.content_hash()},
        "formulation": "hand.written", "status": "feasible", "allocation": allocation,
    })
    solution.save(path)
    return path


def test_check_reports_violations(capsys: pytest.CaptureFixture[str], tiny_file: Path,
                                  tmp_path: Path) -> None:
    sol = _solution_for(tiny_file, {"a": {"k80": 0.7, "v100": 0.6}, "c": {"k80": 0.5}},
                        tmp_path / "sol.json")
    code, out, _ = run_main(capsys, "check", str(tiny_file), str(sol))
    assert code == 1
    assert "shares sum to 1.3" in out
    assert "no throughput there" in out


def test_check_warns_on_hash_mismatch(capsys: pytest.CaptureFixture[str], tiny_file: Path,
                                      tmp_path: Path) -> None:
    sol = _solution_for(tiny_file, {"a": {"v100": 1.0}}, tmp_path / "sol.json",
                        hash_="sha256:" + "0" * 64)
    code, out, err = run_main(capsys, "check", str(tiny_file), str(sol))
    assert code == 0
    assert err.startswith("warning: ") and len(err.splitlines()) == 1
    assert "ok" in out


def test_check_bad_solution_file(capsys: pytest.CaptureFixture[str], tiny_file: Path,
                                 tmp_path: Path) -> None:
    sol = tmp_path / "sol.json"
    sol.write_text(json.dumps({"instance": {"name": "tiny", "hash": "x"},
                               "formulation": "f", "status": "great"}))
    code, _, err = run_main(capsys, "check", str(tiny_file), str(sol))
    assert code == 2
    assert_one_error_line(err, "sol.json", "status")


# ------------------------------------------------------------- validate, formulations, schema


def test_validate_summary(capsys: pytest.CaptureFixture[str], tiny_file: Path) -> None:
    code, out, err = run_main(capsys, "validate", str(tiny_file))
    assert code == 0 and err == ""
    assert out.strip() == f"ok {tiny_file}: tiny: 3 jobs; 4 GPUs (k80 x2, v100 x2)"


def test_validate_many_files_one_bad(capsys: pytest.CaptureFixture[str], tiny_file: Path,
                                     tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    code, out, err = run_main(capsys, "validate", str(tiny_file), str(missing))
    assert code == 2
    assert "ok" in out
    assert_one_error_line(err, "missing.json")


def test_formulations_lists_stand_ins(capsys: pytest.CaptureFixture[str],
                                      stand_ins: object) -> None:
    code, out, _ = run_main(capsys, "formulations")
    assert code == 0
    assert "testing.max_total_throughput" in out
    assert "maximize total throughput" in out


def test_formulations_lists_gavel(capsys: pytest.CaptureFixture[str]) -> None:
    require_formulation(GAVEL)
    code, out, _ = run_main(capsys, "formulations", "--quiet")
    assert code == 0
    assert GAVEL in out.split()


@pytest.mark.parametrize("kind", ["instance", "solution"])
def test_schema_prints_json(capsys: pytest.CaptureFixture[str], kind: str) -> None:
    code, out, _ = run_main(capsys, "schema", kind)
    assert code == 0
    schema = json.loads(out)
    assert schema["$id"] == f"schedlab/{kind}@1"
    assert "properties" in schema


def test_shipped_instances_validate(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(path for pattern in ("*/*.json", "*/*.json.gz", "*/*.yaml", "*/*.yml")
                   for path in (REPO / "instances").glob(pattern))
    if not files:
        pytest.skip("no instance files shipped yet")
    code, out, err = run_main(capsys, "validate", *map(str, files))
    assert code == 0, err
    assert len(out.splitlines()) == len(files)


# ------------------------------------------------------------------------- subprocess


def test_subprocess_bad_throughput(write_instance: Callable[..., Path]) -> None:
    doc = tiny_instance()
    doc["jobs"][1]["throughput"]["v100"] = -1
    path = write_instance(doc, name="negative.json")
    proc = run_subprocess("solve", str(path))
    assert proc.returncode == 2
    assert_one_error_line(proc.stderr, "negative.json", "jobs[1].throughput.v100")
    assert proc.stdout == ""


def test_subprocess_unknown_formulation(tiny_file: Path) -> None:
    proc = run_subprocess("solve", str(tiny_file), "--formulation", "no.such")
    assert proc.returncode == 2
    assert_one_error_line(proc.stderr, "unknown formulation 'no.such'")


def test_subprocess_schema_and_version() -> None:
    proc = run_subprocess("schema", "solution")
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["$id"] == "schedlab/solution@1"
    proc = run_subprocess("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("schedlab ")


# ------------------------------------------------------------------ no solver chatter

#: What HiGHS's banner and log lines look like ("Running HiGHS 1.x ...: Copyright (c) ...").
SOLVER_CHATTER = ("HiGHS", "Copyright", "Running", "THIRD_PARTY", "Model status")


def assert_no_solver_chatter(*texts: str) -> None:
    for text in texts:
        for word in SOLVER_CHATTER:
            assert word not in text, f"solver output {word!r} leaked: {text[:400]!r}"


def test_simulate_with_lp_policy_prints_no_solver_output() -> None:
    # A fresh interpreter: HiGHS prints its banner once per process, at the first Highs().
    proc = run_subprocess("simulate", "--workload", "gavel", "--jobs", "8",
                          "--policy", GAVEL, "-q")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"{GAVEL} jobs_per_hour=6 ")
    assert_no_solver_chatter(proc.stdout, proc.stderr)


def test_solve_prints_no_solver_output() -> None:
    proc = run_subprocess("solve", "instances/gavel/small-6jobs.json")
    assert proc.returncode == 0, proc.stderr
    assert "optimal" in proc.stdout
    assert_no_solver_chatter(proc.stdout, proc.stderr)


def test_library_simulation_prints_no_solver_output() -> None:
    code = (
        "from schedlab.instance import load_instance\n"
        "from schedlab.policies.registry import get_policy\n"
        "from schedlab.simulator.engine import simulate\n"
        "from schedlab.api import solve\n"
        "inst = load_instance('instances/gavel/small-6jobs.json')\n"
        f"simulate(inst, policy=get_policy('{GAVEL}'))\n"
        f"solve(inst, '{GAVEL}')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert_no_solver_chatter(proc.stderr)


def test_new_highs_is_silent(capfd: pytest.CaptureFixture[str]) -> None:
    from schedlab.solvers import new_highs

    h = new_highs()
    h.run()
    out, err = capfd.readouterr()
    assert_no_solver_chatter(out, err)


# ---------------------------------------------------------------------- solve --rounds


def test_solve_rounds_zero_skips_the_round_mechanism(
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    small = REPO / "instances" / "gavel" / "small-6jobs.json"
    out_path = tmp_path / "sol.json"
    code, out, err = run_main(capsys, "solve", str(small), "--rounds", "0",
                              "--out", str(out_path))
    assert code == 0, err
    assert "rounds:" not in out
    solution = load_solution(out_path)
    assert solution.status == Status.OPTIMAL
    assert solution.rounds == []
    assert solution.allocation
    code, out, err = run_main(capsys, "solve", str(small), "--rounds", "3",
                              "--out", str(out_path))
    assert code == 0, err
    assert len(load_solution(out_path).rounds) == 3
    code, _, err = run_main(capsys, "solve", str(small), "--rounds", "-1")
    assert code == 2
    assert_one_error_line(err, "--rounds", ">= 0")


def test_solve_help_says_what_rounds_cost(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "solve", "--help")
    assert code == 0
    text = " ".join(out.split())
    assert "0 solves the policy only" in text
    assert "10,000 jobs x 20 rounds" in text


# ------------------------------------------------------------------------ README / CI


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    commands = [line for line in readme.splitlines() if line.startswith("pip install ")]
    assert len(commands) == 2, "README's Quick start has exactly two set-up commands"
    assert commands[1] in ci.splitlines()
    assert "torch" not in commands[0] or "torch==" in commands[0]


def test_one_simulation_builds_its_job_stream_once(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A single run simulates the stream the input checks built (one build, not two); a
    sweep of two seeds builds one stream for the checks and one per run."""
    from schedlab.analysis import sweep

    built: list[tuple[int, Any]] = []
    original = sweep.WorkloadSpec.build

    def counting(self: Any, seed: int, jobs_per_hour: Any, round_s: Any = None) -> Any:
        built.append((seed, jobs_per_hour))
        return original(self, seed, jobs_per_hour, round_s)

    monkeypatch.setattr(sweep.WorkloadSpec, "build", counting)
    assert main(["simulate", "--policy", "fifo", "--jobs", "12", "-q"]) == 0
    assert built == [(0, 6.0)]
    built.clear()
    assert main(["simulate", "--policy", "fifo", "--jobs", "12", "--seeds", "0,1",
                 "--workers", "1", "-q"]) == 0
    assert sorted(built) == [(0, 6.0), (0, 6.0), (1, 6.0)]
    capsys.readouterr()


def test_single_run_table_has_the_types_a_sweep_reads_back() -> None:
    """The single-run table equals a CSV round trip of the run's frame (what a sweep reads
    from its run file): ids that look like numbers become numbers, None becomes NaN, ints
    and strings as read_csv types them; floats equal to their last bit or one ulp."""
    import io

    import numpy as np
    import pandas as pd

    from schedlab.cli.simulate import _as_read_back

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({
        "policy": ["fifo"] * 5, "job": ["0", "1", "2", "3", "4"], "seed": [0] * 5,
        "finish": rng.random(5) * 1e5, "start": [None, 1.5, None, 2.0, 3.25],
        "user": [None, "a", "b", None, "c"], "preemptions": [0, 1, 2, 3, 4],
        "ok": [True, False, True, True, False], "jobs_per_hour": [float("nan")] * 5})
    expected = pd.read_csv(io.StringIO(frame.to_csv(index=False)))
    got = _as_read_back(frame)
    assert list(got.columns) == list(expected.columns)
    assert list(got.dtypes) == list(expected.dtypes)
    pd.testing.assert_frame_equal(got, expected, check_exact=False, rtol=1e-15)
