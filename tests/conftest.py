"""Shared fixtures: tiny instance files and stand-in formulations for CLI tests."""

from __future__ import annotations

import copy
import json
import math
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyomo.environ as pyo
import pytest

from schedlab import registry
from schedlab.errors import SolverError
from schedlab.formulations.base import Formulation
from schedlab.instance import Instance
from schedlab.solution import InstanceRef, Solution, Status
from schedlab.solvers import SolveResult, SolverOptions

#: Two accelerator types, three jobs; job c cannot run on k80.
TINY_INSTANCE: dict[str, Any] = {
    "schema": "schedlab/instance@1",
    "name": "tiny",
    "cluster": {"accelerators": {"k80": {"count": 2}, "v100": {"count": 2}}},
    "jobs": [
        {"id": "a", "scale_factor": 1, "total_steps": 1000,
         "throughput": {"k80": 1.0, "v100": 3.0}},
        {"id": "b", "scale_factor": 2, "total_steps": 2000,
         "throughput": {"k80": 2.0, "v100": 4.0}},
        {"id": "c", "scale_factor": 1, "total_steps": 500,
         "throughput": {"v100": 5.0}},
    ],
}


def tiny_instance() -> dict[str, Any]:
    """A fresh deep copy of :data:`TINY_INSTANCE` to modify."""
    return copy.deepcopy(TINY_INSTANCE)


@pytest.fixture
def write_instance(tmp_path: Path) -> Callable[..., Path]:
    """``write_instance(data=None, name="tiny.json", text=None)`` -> path of the file written."""

    def write(data: Any = None, name: str = "tiny.json", text: str | None = None) -> Path:
        path = tmp_path / name
        if text is None:
            text = json.dumps(tiny_instance() if data is None else data, indent=2)
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def tiny_file(write_instance: Callable[..., Path]) -> Path:
    """The tiny instance as a JSON file."""
    return write_instance()


def default_sigint() -> None:
    """``preexec_fn`` of a command a test interrupts with SIGINT: Ctrl-C at its default
    disposition, so the command gets Python's KeyboardInterrupt even when the suite itself
    was started in the background (a shell starts background jobs with SIGINT ignored, the
    command would inherit that, and Python would then leave it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def has_formulation(name: str) -> bool:
    """True when the registry knows ``name`` (False while its module is not written yet)."""
    try:
        return name in registry.formulations()
    except ImportError:
        return False


def require_formulation(name: str) -> None:
    """Skip the calling test unless ``name`` is registered."""
    if not has_formulation(name):
        pytest.skip(f"formulation {name} is not registered yet")


# --------------------------------------------------------------- stand-in formulations


class MaxTotalThroughput(Formulation):
    """Test LP: maximize sum_j sum_k T[j,k] X[j,k] under the Gavel share constraints."""

    description = "test stand-in: maximize total throughput (LP, solved by the real solver)"

    def build(self, instance: Instance) -> pyo.ConcreteModel:
        m = pyo.ConcreteModel()
        pairs = [(j.id, k) for j in instance.jobs for k in j.throughput]
        m.X = pyo.Var(pairs, bounds=(0.0, 1.0))
        m.job_share = pyo.Constraint(
            [j.id for j in instance.jobs],
            rule=lambda m, j: sum(m.X[p] for p in pairs if p[0] == j) <= 1,
        )
        scale = {j.id: j.scale_factor for j in instance.jobs}
        m.capacity = pyo.Constraint(
            instance.types,
            rule=lambda m, k: sum(scale[p[0]] * m.X[p] for p in pairs if p[1] == k)
            <= instance.cluster.accelerators[k].count,
        )
        thr = {(j.id, k): t for j in instance.jobs for k, t in j.throughput.items()}
        m.obj = pyo.Objective(expr=sum(thr[p] * m.X[p] for p in pairs), sense=pyo.maximize)
        return m

    def extract(self, model: pyo.ConcreteModel, instance: Instance,
                result: SolveResult) -> Solution:
        solution = self.empty_solution(instance, result)
        if result.status.has_solution:
            for (job, acc) in model.X:
                solution.allocation.setdefault(job, {})[acc] = float(pyo.value(model.X[job, acc]))
            solution.metrics["effective_throughput"] = {
                j.id: sum(t * solution.allocation[j.id][k] for k, t in j.throughput.items())
                for j in instance.jobs
            }
        return solution


class _Canned(Formulation):
    """Base of stand-ins that skip the solver and return (or raise) something fixed."""

    def build(self, instance: Instance) -> pyo.ConcreteModel:
        return pyo.ConcreteModel()

    def extract(self, model: pyo.ConcreteModel, instance: Instance,
                result: SolveResult) -> Solution:
        raise NotImplementedError


class AlwaysInfeasible(_Canned):
    """Test stand-in: reports infeasible with a diagnostic."""

    description = "test stand-in: always infeasible"

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        return self.infeasible_solution(instance, "job b needs 2 GPUs (test diagnostic)")


class OverCapacity(_Canned):
    """Test stand-in: claims optimality but puts every job fully on the first type."""

    description = "test stand-in: a buggy allocation the checker must catch"

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        first = instance.types[0]
        return Solution(
            instance=InstanceRef(name=instance.name, hash=instance.content_hash()),
            formulation=self.name, status=Status.OPTIMAL, objective=1.0, bound=1.0, gap=0.0,
            allocation={job.id: {first: 1.0} for job in instance.jobs},
        )


class SolverCrash(_Canned):
    """Test stand-in: the solver fails mid-solve."""

    description = "test stand-in: the solver raises"

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        raise SolverError("solver 'highs' failed: simulated crash")


class Interrupted(_Canned):
    """Test stand-in: the user presses Ctrl-C mid-solve."""

    description = "test stand-in: interrupted"

    def solve(self, instance: Instance, options: SolverOptions | None = None) -> Solution:
        raise KeyboardInterrupt


STAND_INS: dict[str, type[Formulation]] = {
    "testing.max_total_throughput": MaxTotalThroughput,
    "testing.infeasible": AlwaysInfeasible,
    "testing.over_capacity": OverCapacity,
    "testing.crash": SolverCrash,
    "testing.interrupted": Interrupted,
}


@pytest.fixture
def stand_ins() -> Iterator[dict[str, type[Formulation]]]:
    """Register the ``testing.*`` formulations for one test, then remove them."""
    with registry.FORMULATIONS.scoped():
        for name, cls in STAND_INS.items():
            registry.register(name, cls)
        yield STAND_INS


def _close_documents(a: Any, b: Any, rel: float, where: str) -> list[str]:
    """Paths where two JSON-like documents differ (floats compared to relative ``rel``)."""
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or a is None:
        return [] if a == b else [f"{where}: {a!r} != {b!r}"]
    if isinstance(a, int | float) and isinstance(b, int | float):
        return [] if math.isclose(a, b, rel_tol=rel, abs_tol=0.0) else [f"{where}: {a!r} != {b!r}"]
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{where}: keys {sorted(set(a) ^ set(b))} differ"]
        return [d for k in a for d in _close_documents(a[k], b[k], rel, f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: lengths {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True))
                for d in _close_documents(x, y, rel, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


@pytest.fixture
def assert_same_data() -> Callable[..., None]:
    """``assert_same_data(a, b, rel=1e-9)``: two JSON-like documents are equal, floats to a
    relative tolerance (regenerated data must not depend on the last bit of a library)."""

    def check_documents(a: Any, b: Any, rel: float = 1e-9, what: str = "") -> None:
        diffs = _close_documents(a, b, rel, what or "document")
        assert not diffs, "\n".join(diffs[:10])

    return check_documents


@pytest.fixture
def assert_table_files() -> Callable[[Any, Path, str, list[int]], None]:
    """Checks shared by the paper tables' quick runs: the LaTeX holds the Markdown's rows
    (first cell escaped, same cell count); the manifest names the command, the seeds and each
    written file with its sha256; cached cells are plain JSON.  Called as
    ``assert_table_files(table_module, folder, "hare", [0])``."""
    import hashlib

    def check(module: Any, folder: Path, table: str, seeds: list[int]) -> None:
        markdown = (folder / module.MARKDOWN_NAME).read_text()
        latex = (folder / module.LATEX_NAME).read_text()
        md_rows = [ln for ln in markdown.splitlines() if ln.startswith("| ")]
        tex_rows = [ln for ln in latex.splitlines() if ln.endswith(r" \\")]
        assert len(tex_rows) == len(md_rows) > 1  # headers and rows, block by block
        assert latex.count(r"\begin{tabular}") == latex.count(r"\bottomrule") >= 1
        for md, tex in zip(md_rows, tex_rows, strict=True):
            cells = md[2:-2].split(" | ")
            assert tex.split(" & ")[0] == cells[0].replace("_", r"\_")
            assert len(tex.split(" & ")) == len(cells)
        assert "±" not in latex
        data = json.loads((folder / module.MANIFEST_NAME).read_text())
        assert data["command"][:4] == ["schedlab", "tables", table, "--quick"]
        assert data["seeds"] == seeds
        assert data["started"] <= data["finished"]
        names = [entry["name"] for entry in data["files"]]
        assert names[:3] == [module.MARKDOWN_NAME, module.CSV_NAME, module.LATEX_NAME]
        assert all(name.endswith(".png") for name in names[3:]) and len(names) > 3
        for entry in data["files"]:
            content = (folder / entry["name"]).read_bytes()
            assert entry["sha256"] == hashlib.sha256(content).hexdigest()
        for cell in (folder / module.CELLS_FOLDER).iterdir():  # cached cells: plain JSON
            assert cell.suffix == ".json" and isinstance(json.loads(cell.read_text()), dict)

    return check


def quick_cli_on_spec_cells(table: str, spec_folder: Path, out: Path) -> tuple[int, Path, str]:
    """``schedlab tables TABLE --quick`` (the command as before the experiment runner) into
    ``out`` holding a copy of the cells the shipped spec's quick variant computed in
    ``spec_folder``: the command must plan the same cells, so it computes and writes none
    again (asserted), and its Markdown and CSV must equal the spec run's.  Returns (exit
    code, ``out``, stdout)."""
    import contextlib
    import io
    import shutil

    from schedlab.cli import main

    shutil.copytree(spec_folder / "cells", out / "cells")
    before = {p.name: p.stat().st_mtime_ns for p in (out / "cells").iterdir()}
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["tables", table, "--quick", "--workers", "1", "--out", str(out)])
    assert {p.name: p.stat().st_mtime_ns for p in (out / "cells").iterdir()} == before
    for made in (f"{table}.md", f"{table}.csv"):
        assert (out / made).read_text() == (spec_folder / made).read_text()
    return code, out, buffer.getvalue()


def pytest_configure(config: pytest.Config) -> None:
    """Set the profiler's fork-server preload (torch and the zoo) before any test starts the
    fork server.  The server is one per process and imports its preload list once, when it
    starts; a command is one process and starts it for its own use, but the suite runs many
    commands in one process, and a sweep's local pool (schedlab.analysis.experiments) starting
    the server first left every later profiler worker importing torch itself (2-3 s each:
    test_profiler_cli took 66 s after test_experiment_cli, 15 s alone).  Without torch the
    list's imports are skipped by the server (an ImportError there is ignored)."""
    del config
    from schedlab.profiler import workers

    workers.context()
