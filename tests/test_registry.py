"""The one registry: built-in tables, lazy listing, plug-ins through entry points.

Plug-ins are installed without pip: a module and a ``<name>-<version>.dist-info`` folder
(``METADATA``, ``entry_points.txt``) written into ``tmp_path``, which is put on ``sys.path``;
``importlib.metadata`` discovers them as it would an installed distribution.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import schedlab
from schedlab import registry
from schedlab.cli import main
from schedlab.errors import UnknownNameError
from schedlab.formulations.builtin import BUILTIN_FORMULATIONS
from schedlab.formulations.gavel.models import MaxMinFairness
from schedlab.policies.builtin import BUILTIN_POLICIES, GAVEL_POLICY_ALIASES
from schedlab.policies.registry import get_policy, policies
from schedlab.testing import check_formulation, check_policy

PLUGIN_SOURCE = '''
"""A third-party formulation: a two-variable LP on the Formulation base."""

import pyomo.environ as pyo

from schedlab.formulations.base import Formulation
from schedlab.instance import instance_from_dict


class TwoVariableLp(Formulation):
    """Jobs a and b share one accelerator type of n GPUs: x_a, x_b in [0, 1] are their shares
    of time; maximize T_a x_a + T_b x_b s.t. s_a x_a + s_b x_b <= n (steps/s)."""

    description = "demo: two jobs' time shares on one accelerator type"
    objective_sense = "maximize"

    def example_instance(self):
        return instance_from_dict({
            "name": "demo", "cluster": {"accelerators": {"v100": {"count": 1}}},
            "jobs": [{"id": "a", "total_steps": 10, "throughput": {"v100": 3.0}},
                     {"id": "b", "total_steps": 10, "throughput": {"v100": 2.0}}]})

    def validate(self, instance):
        instance.require("throughput", formulation=self.name)

    def build(self, instance):
        acc = instance.types[0]
        a, b = instance.jobs
        m = pyo.ConcreteModel()
        m.x = pyo.Var([0, 1], bounds=(0.0, 1.0))
        m.capacity = pyo.Constraint(expr=a.scale_factor * m.x[0] + b.scale_factor * m.x[1]
                                    <= instance.cluster.accelerators[acc].count)
        m.objective = pyo.Objective(expr=a.throughput[acc] * m.x[0]
                                    + b.throughput[acc] * m.x[1], sense=pyo.maximize)
        return m

    def extract(self, model, instance, result):
        solution = self.empty_solution(instance, result)
        acc = instance.types[0]
        solution.allocation = {job.id: {acc: float(model.x[i].value)}
                               for i, job in enumerate(instance.jobs)
                               if (model.x[i].value or 0.0) > 1e-9}
        return solution

    def objective_of(self, instance, solution):
        acc = instance.types[0]
        return sum(job.throughput[acc] * solution.allocation.get(job.id, {}).get(acc, 0.0)
                   for job in instance.jobs)


class NotAFormulation:
    pass
'''

POLICY_PLUGIN_SOURCE = '''
"""A third-party package registering two policies from one callable, and one by class."""

from schedlab.policies.base import Policy
from schedlab.policies.state import Assignment


class ArrivalOrder(Policy):
    """Jobs in arrival order, each on its fastest type with room (or the first, by name)."""

    def __init__(self, fastest=True):
        super().__init__()
        self.fastest = fastest

    def decide(self, state):
        self.decisions += 1
        free = dict(state.gpus)
        out = []
        for job in state.active:
            types = sorted(k for k, v in job.throughput.items() if v > 0)
            if self.fastest:
                types.sort(key=lambda k: -job.throughput[k])
            for k in types:
                if free.get(k, 0) >= job.scale_factor:
                    free[k] -= job.scale_factor
                    out.append(Assignment(job.id, k))
                    break
        return out


def register_all(registry):
    registry.register("demo.arrival", ArrivalOrder, "demo: arrival order, fastest type")
    registry.register("demo.arrival_by_name", ArrivalOrder, "demo: arrival order, by name",
                      fastest=False)
'''


def install(root: Path, module: str, source: str, distribution: str, entry_points: str) -> None:
    """Write ``module.py`` and ``<distribution>-0.1.dist-info`` into ``root``."""
    (root / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = root / f"{distribution}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points), encoding="utf-8")


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The demo formulation (and a broken, a non-formulation and a name-stealing entry point)
    and the demo policies, on ``sys.path`` for one test."""
    install(tmp_path, "schedlab_demo_plugin", PLUGIN_SOURCE, "schedlab_demo_plugin", """
        [schedlab.formulations]
        demo.two_variable_lp = schedlab_demo_plugin:TwoVariableLp
        demo.not_a_formulation = schedlab_demo_plugin:NotAFormulation
        gavel.max_min_fairness = schedlab_demo_plugin:TwoVariableLp
        """)
    install(tmp_path, "schedlab_demo_policies", POLICY_PLUGIN_SOURCE, "schedlab_demo_policies", """
        [schedlab.policies]
        demo_policies = schedlab_demo_policies:register_all
        demo.arrival_class = schedlab_demo_policies:ArrivalOrder
        """)
    install(tmp_path, "schedlab_broken_plugin", "", "schedlab_broken_plugin", """
        [schedlab.formulations]
        demo.broken = schedlab_no_such_module:Thing
        """)
    monkeypatch.syspath_prepend(str(tmp_path))
    for module in ("schedlab_demo_plugin", "schedlab_demo_policies"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    return tmp_path


# ------------------------------------------------------------------------------ plug-ins


def test_a_plugin_formulation_is_listed_solved_and_conforms(
    plugins: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="schedlab.registry"):
        assert main(["formulations", "-q"]) == 0
    listed = capsys.readouterr().out.split()
    assert "demo.two_variable_lp" in listed
    assert {name for name, *_ in BUILTIN_FORMULATIONS} <= set(listed)  # built-ins still list
    # the broken plug-in is named in a warning, and so is the one that is no formulation
    assert any("demo.broken" in r.getMessage() and "failed to load" in r.getMessage()
               for r in caplog.records)
    assert any("demo.not_a_formulation" in r.getMessage() and "not a subclass" in r.getMessage()
               for r in caplog.records)
    assert main(["formulations"]) == 0
    table = capsys.readouterr().out
    assert "entry point demo.two_variable_lp" in table and "schedlab_demo_plugin" in table

    report = check_formulation("demo.two_variable_lp")
    assert "bad_instance" in report.passed and not report.skipped
    # by hand: one GPU, a runs at 3 steps/s and b at 2, so x_a = 1, x_b = 0 and 3 steps/s
    solution = schedlab.solve(registry.get_formulation("demo.two_variable_lp").example_instance(),
                              "demo.two_variable_lp")
    assert solution.objective == pytest.approx(3.0, rel=1e-9)
    assert solution.allocation == {"a": {"v100": pytest.approx(1.0, rel=1e-9)}}


def test_a_broken_plugin_gives_a_clear_error_and_cannot_steal_a_name(plugins: Path) -> None:
    with pytest.raises(UnknownNameError, match=r"formulation 'demo.broken' is not available: .*"
                       r"entry point demo.broken = schedlab_no_such_module:Thing.*failed to load"):
        registry.get_formulation("demo.broken")
    with pytest.raises(UnknownNameError, match="not a subclass of Method"):
        registry.get_formulation("demo.not_a_formulation")
    assert isinstance(registry.get_formulation("gavel.max_min_fairness"), MaxMinFairness)
    assert registry.formulations()["gavel.max_min_fairness"].origin == registry.BUILT_IN


def test_plugin_policies_from_a_registrar_and_a_class(
    plugins: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["policies", "-q"]) == 0
    listed = capsys.readouterr().out.split()
    assert {"demo.arrival", "demo.arrival_by_name", "demo.arrival_class", "fifo",
            "gavel.max_min_fairness"} <= set(listed)
    assert get_policy("demo.arrival_by_name").fastest is False  # type: ignore[attr-defined]
    assert get_policy("demo.arrival_by_name", fastest=True).fastest is True  # type: ignore[attr-defined]
    assert "failed_solves" in check_policy("demo.arrival").skipped
    out = tmp_path / "runs.csv"
    code = main(["simulate", "--policy", "demo.arrival", "--jobs", "4", "--cluster", "1:1:1",
                 "--jobs-per-hour", "4", "--seeds", "0", "--out", str(out), "-q"])
    assert code == 0 and out.exists()


def test_plugins_leave_with_their_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(tmp_path, "schedlab_demo_plugin", PLUGIN_SOURCE, "schedlab_demo_plugin", """
        [schedlab.formulations]
        demo.two_variable_lp = schedlab_demo_plugin:TwoVariableLp
        """)
    monkeypatch.delitem(sys.modules, "schedlab_demo_plugin", raising=False)
    with monkeypatch.context() as patched:
        patched.syspath_prepend(str(tmp_path))
        assert "demo.two_variable_lp" in registry.formulations()
    assert "demo.two_variable_lp" not in registry.formulations()
    with pytest.raises(UnknownNameError, match=r"unknown formulation 'demo\.two_variable_lp'"):
        registry.get_formulation("demo.two_variable_lp")


# ------------------------------------------------------------------------------ built-ins


def test_listing_imports_no_implementation() -> None:
    code = textwrap.dedent("""
        import sys
        from schedlab.policies.registry import policies
        from schedlab.registry import formulations
        names = list(formulations()) + list(policies())
        heavy = [m for m in ("schedlab.formulations.gavel.models", "schedlab.policies.gavel",
                             "schedlab.formulations.saturn.models", "schedlab.policies.fifo")
                 if m in sys.modules]
        print(len(names), heavy)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    count, heavy = out.stdout.split(" ", 1)
    expected = (len(BUILTIN_FORMULATIONS) + len(BUILTIN_POLICIES) + len(GAVEL_POLICY_ALIASES)
                + sum(name.startswith("gavel.") and name not in GAVEL_POLICY_ALIASES
                      for name, *_ in BUILTIN_FORMULATIONS))
    assert int(count) == expected and heavy.strip() == "[]"


def test_variants_defaults_and_names() -> None:
    entry = registry.formulations()["gavel.max_min_fairness_agnostic"]
    assert entry.factory == "schedlab.formulations.gavel.models:MaxMinFairness"
    assert entry.kwargs == {"heterogeneity_aware": False} and entry.cls is MaxMinFairness
    form = registry.get_formulation("gavel.max_min_fairness_agnostic", method="pyomo")
    assert isinstance(form, MaxMinFairness) and form.name == "gavel.max_min_fairness_agnostic"
    assert (form.heterogeneity_aware, form.method) == (False, "pyomo")
    assert policies()["gavel.min_makespan"].defaults == {"formulation": "gavel.min_makespan"}


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(UnknownNameError, match=r"unknown formulation 'nope' \(known: .*"
                       r"gavel\.max_min_fairness.*saturn\.time_indexed") as info:
        registry.get_formulation("nope")
    assert info.value.field == "--formulation" and info.value.exit_code == 2
    with pytest.raises(UnknownNameError, match=r"unknown policy 'nope' \(known: .*themis"):
        get_policy("nope")


def test_a_lazy_factory_that_cannot_load_breaks_only_its_name() -> None:
    with registry.FORMULATIONS.scoped():
        registry.register("testing.missing", "schedlab.no_such_module:Thing", "missing")
        assert "testing.missing" in registry.formulations()
        with pytest.raises(UnknownNameError, match=r"'testing.missing' is registered as "
                           r"'schedlab.no_such_module:Thing', which cannot be loaded"):
            registry.get_formulation("testing.missing")
        assert isinstance(registry.get_formulation("gavel.max_min_fairness"), MaxMinFairness)
    assert "testing.missing" not in registry.formulations()
