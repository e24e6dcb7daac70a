"""Layering: every schedlab module imports only modules of its own layer or of lower ones.

The layers and which module is in which are :data:`schedlab.layers.LAYERS`
(docs/architecture.md, "Layers").  This test parses every ``.py`` file of the package with
:mod:`ast` (nothing is imported) and collects each import of a schedlab module wherever it
is: at module level, inside functions and methods, in ``try`` blocks, and under
``if TYPE_CHECKING:``.  Imports made only for type checking **count**: the annotation is
part of the code's meaning, mypy follows the import, and a type-only back-edge is the first
step to a runtime one (``JobState.shockwave_steps`` was one).  ``from schedlab.x import y``
is an import of ``schedlab.x.y`` when that is a module, else of ``schedlab.x``.  Modules named
in strings and imported lazily (the registries' ``"module:Class"`` tables,
``schedlab.__getattr__``) are not walked.

An upward import fails :func:`test_no_module_imports_a_higher_layer` with one line per edge:
importer (its layer) -> imported (its layer), file and line, and where the import sits.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

import schedlab
from schedlab import layers

PACKAGE_DIR = Path(schedlab.__file__).resolve().parent
REPO = PACKAGE_DIR.parent


@dataclass(frozen=True)
class Source:
    """One module of the walked package: its file, whether it is a package's ``__init__``,
    and its text."""

    path: str
    is_package: bool
    text: str


@dataclass(frozen=True)
class Import:
    """``importer`` imports ``imported`` at ``line`` of ``path``; ``where``: ``module``,
    ``function`` (inside a def) or ``TYPE_CHECKING``."""

    importer: str
    imported: str
    path: str
    line: int
    where: str


def package_sources(package_dir: Path = PACKAGE_DIR) -> dict[str, Source]:
    """Every module of the package under ``package_dir``, by dotted name."""
    out: dict[str, Source] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        try:
            shown = str(path.relative_to(REPO))
        except ValueError:
            shown = str(path)
        out[name] = Source(shown, is_package, path.read_text(encoding="utf-8"))
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


class _ImportCollector(ast.NodeVisitor):
    """The schedlab imports of one module, each with where it sits."""

    def __init__(self, module: str, source: Source, known: Iterable[str]) -> None:
        self.module = module
        self.source = source
        self.known = set(known)
        self.where = ["module"]
        self.found: list[Import] = []

    def _inside(self, where: str, nodes: Iterable[ast.AST]) -> None:
        self.where.append(where)
        for node in nodes:
            self.visit(node)
        self.where.pop()

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self.visit(node.test)
            self._inside("TYPE_CHECKING", node.body)
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        where = "TYPE_CHECKING" if self.where[-1] == "TYPE_CHECKING" else "function"
        self._inside(where, ast.iter_child_nodes(node))

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        where = "TYPE_CHECKING" if self.where[-1] == "TYPE_CHECKING" else "function"
        self._inside(where, ast.iter_child_nodes(node))

    def _add(self, imported: str, line: int) -> None:
        """Record one import (once per imported module and line: ``from m import a, b``)."""
        if imported != layers.ROOT and not imported.startswith(layers.ROOT + "."):
            return
        found = Import(self.module, imported, self.source.path, line, self.where[-1])
        if found not in self.found:
            self.found.append(found)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            package = self.module.split(".")
            if not self.source.is_package:
                package = package[:-1]
            package = package[:len(package) - (node.level - 1)]
            base = ".".join([*package, base] if base else package)
        for alias in node.names:
            candidate = f"{base}.{alias.name}"
            self._add(candidate if alias.name != "*" and candidate in self.known else base,
                      node.lineno)


def imports_of(module: str, source: Source, known: Iterable[str]) -> list[Import]:
    """Every import of a schedlab module in ``source`` (the text of ``module``); ``known``:
    the dotted names of the package's modules (to tell ``from pkg import module`` from
    ``from module import name``)."""
    collector = _ImportCollector(module, source, known)
    collector.visit(ast.parse(source.text, filename=source.path))
    return collector.found


def all_imports(sources: Mapping[str, Source]) -> list[Import]:
    """The imports of every module of ``sources``."""
    return [imp for module, source in sources.items()
            for imp in imports_of(module, source, sources)]


def upward(imports: Iterable[Import],
           layer_of: Callable[[str], int | None] = layers.layer_of) -> list[Import]:
    """The imports whose imported module is in a higher layer than its importer (modules
    without a layer are :func:`test_every_module_has_a_layer`'s business, not counted)."""
    out = []
    for imp in imports:
        low, high = layer_of(imp.importer), layer_of(imp.imported)
        if low is not None and high is not None and high > low:
            out.append(imp)
    return out


def describe(edges: Iterable[Import],
             layer_of: Callable[[str], int | None] = layers.layer_of) -> str:
    """One line per upward import: importer (layer) -> imported (layer)  file:line [where]."""
    names = layers.layer_names()

    def layer(module: str) -> str:
        index = layer_of(module)
        return "?" if index is None else names[index]

    return "\n".join(
        f"  {e.importer} ({layer(e.importer)}) -> {e.imported} ({layer(e.imported)})  "
        f"{e.path}:{e.line} [{e.where}]"
        for e in sorted(edges, key=lambda e: (e.path, e.line, e.imported)))


# ------------------------------------------------------------------------- the package


@pytest.fixture(scope="module")
def sources() -> dict[str, Source]:
    return package_sources()


def test_no_module_imports_a_higher_layer(sources: dict[str, Source]) -> None:
    edges = upward(all_imports(sources))
    assert not edges, (
        f"{len(edges)} upward import(s): a module may import only its own layer or lower ones "
        f"(layers bottom first: {', '.join(layers.layer_names())}; schedlab/layers.py, "
        "docs/architecture.md). Move the shared code down, or the importer up:\n"
        + describe(edges))


def test_every_module_has_a_layer(sources: dict[str, Source]) -> None:
    unmapped = sorted(m for m in sources if layers.layer_of(m) is None)
    assert not unmapped, ("modules in no layer; add them (or a prefix covering them) to "
                          "schedlab.layers.LAYERS: " + ", ".join(unmapped))


def test_every_prefix_names_a_module(sources: dict[str, Source]) -> None:
    prefixes = [p for _, ps in layers.LAYERS for p in ps]
    assert len(prefixes) == len(set(prefixes)), "a prefix is listed twice in LAYERS"
    names = layers.layer_names()
    assert len(names) == len(set(names)) and layers.CLI_LAYER in names
    stale = [p for p in prefixes if p not in sources]
    assert not stale, "LAYERS names modules that do not exist: " + ", ".join(stale)


def test_layer_of_the_documented_cases() -> None:
    names = layers.layer_names()

    def name(module: str) -> str | None:
        index = layers.layer_of(module)
        return None if index is None else names[index]

    assert name("schedlab") == "api"  # the package itself, matched exactly
    assert name("schedlab.api") == "api"
    assert name("schedlab.errors") == "base"
    assert name("schedlab.errors_extra") is None  # a prefix covers whole name parts only
    assert name("schedlab.solvers.matrix") == "solvers"
    assert name("schedlab.formulations.hare.model") == "formulations"
    assert name("schedlab.check") == name("schedlab.registry") == "formulations"
    assert name("schedlab.profiler.matrix") == "profiler"
    for cli in ("schedlab.cli", "schedlab.cli.profile", "schedlab.profiler.cli",
                "schedlab.executor.cli", "schedlab.analysis.sweep_cli", "schedlab.__main__"):
        assert name(cli) == "cli", cli
    assert name("schedlab.nowhere") is None
    assert names.index("formulations") < names.index("policies") < names.index("simulator")
    assert names.index("workloads") < names.index("formulations") < names.index("profiler")
    assert names.index("simulator") < names.index("analysis") < names.index("cli")


# -------------------------------------------------------------------------- the walker


def _synthetic(modules: Mapping[str, str]) -> dict[str, Source]:
    """A module map of source texts, as :func:`package_sources` returns (packages: names
    ending in ``/``)."""
    out = {}
    for name, text in modules.items():
        package = name.endswith("/")
        module = name.rstrip("/")
        path = module.replace(".", "/") + ("/__init__.py" if package else ".py")
        out[module] = Source(path, package, text)
    return out


def test_the_walker_reports_an_upward_import() -> None:
    """A solver importing the simulator is reported, with file and line; the downward and
    same-layer imports around it are not (so the main test cannot pass vacuously)."""
    sources = _synthetic({
        "schedlab.solvers/": "",
        "schedlab.solvers.fast": (
            "from schedlab.errors import InputError\n"
            "from schedlab.solvers import base\n"
            "\n"
            "from schedlab.simulator import simulate, jobs_from_instance\n"),
        "schedlab.solvers.base": "",
        "schedlab.simulator/": "from schedlab.solvers.fast import InputError\n",
        "schedlab.errors": "",
    })
    edges = upward(all_imports(sources))
    assert edges == [Import("schedlab.solvers.fast", "schedlab.simulator",
                            "schedlab/solvers/fast.py", 4, "module")]
    text = describe(edges)
    assert ("schedlab.solvers.fast (solvers) -> schedlab.simulator (simulator)  "
            "schedlab/solvers/fast.py:4 [module]") in text


def test_the_walker_finds_imports_in_functions_type_checking_and_relative_forms() -> None:
    sources = _synthetic({
        "schedlab.workloads/": "",
        "schedlab.workloads.gen": (
            "from __future__ import annotations\n"
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from schedlab.formulations.hare import model\n"
            "else:\n"
            "    import schedlab.errors\n"
            "def make():\n"
            "    from ..profiler.matrix import ThroughputFile\n"
            "    return ThroughputFile\n"
            "class Gen:\n"
            "    def run(self):\n"
            "        import schedlab.analysis.tables as t\n"
            "try:\n"
            "    from . import helper\n"
            "except ImportError:\n"
            "    pass\n"),
        "schedlab.workloads.helper": "",
        "schedlab.formulations.hare/": "",
        "schedlab.formulations.hare.model": "",
        "schedlab.profiler.matrix": "",
    })
    found = {(i.imported, i.line, i.where)
             for i in imports_of("schedlab.workloads.gen", sources["schedlab.workloads.gen"],
                                 sources)}
    assert found == {
        ("schedlab.formulations.hare.model", 4, "TYPE_CHECKING"),
        ("schedlab.errors", 6, "module"),
        ("schedlab.profiler.matrix", 8, "function"),
        ("schedlab.analysis.tables", 12, "function"),
        ("schedlab.workloads.helper", 14, "module"),
    }
    edges = upward(all_imports(sources))
    assert [(e.imported, e.where) for e in edges] == [
        ("schedlab.formulations.hare.model", "TYPE_CHECKING"),
        ("schedlab.profiler.matrix", "function"),
        ("schedlab.analysis.tables", "function"),
    ]


def test_a_package_init_resolves_relative_imports_from_itself() -> None:
    sources = _synthetic({
        "schedlab.policies/": "from .state import JobState\nfrom .. import simulator\n",
        "schedlab.policies.state": "",
        "schedlab.simulator/": "",
    })
    found = [(i.imported, i.line) for i in imports_of("schedlab.policies",
                                                      sources["schedlab.policies"], sources)]
    assert found == [("schedlab.policies.state", 1), ("schedlab.simulator", 2)]
    assert [e.imported for e in upward(all_imports(sources))] == ["schedlab.simulator"]


def test_a_layer_map_of_its_own() -> None:
    """:func:`upward` takes any layer function: two layers, one edge each way."""
    sources = _synthetic({
        "schedlab.low": "import schedlab.high\n",
        "schedlab.high": "import schedlab.low\n",
    })

    def two(module: str) -> int | None:
        return {"schedlab.low": 0, "schedlab.high": 1}.get(module)

    edges = upward(all_imports(sources), two)
    assert [(e.importer, e.imported) for e in edges] == [("schedlab.low", "schedlab.high")]
