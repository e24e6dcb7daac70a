"""The layers of schedlab, bottom to top: a module imports only modules of its own layer or of
layers below it (docs/architecture.md, "Layers"; tests/test_layers.py enforces it).

:data:`LAYERS` is the one map from module to layer, bottom first:

* ``base``: the Instance and Solution formats and what every layer uses (errors, atomic
  writes, documents, defaults, co-location, GC pauses, fairness measures, the placement of
  gangs on GPU ids, process helpers: orphans, claims, progress; lazy imports; and this map);
* ``solvers``: the solver interface (HiGHS, Gurobi, matrix models); knows no paper;
* ``world``: models of the hardware and the jobs, with their sources (parallelism cost model,
  published scaling, Hare's switch costs, the concept hierarchy of class labels);
* ``workloads``: generators and readers that produce Instances;
* ``formulations``: the papers' optimization models, their registry and the independent
  checker (``check`` re-derives objectives through the registry, and ``gavel.pop`` checks
  its sub-solutions, so the four are one layer);
* ``policies``: online policies and the state they read (they solve formulations; nothing in
  the formulations imports a policy);
* ``profiler``: measurements on real hardware and their file format (it builds Instances
  through the workloads; the simulator reads its measured switch costs);
* ``simulator``: the round-based, elastic and node-level simulators that drive policies;
* ``executor``: replays plans on real jobs (it runs the profiler's zoo);
* ``api``: the public entry points, ``schedlab.solve`` (the package itself and
  ``schedlab.api``) and the plug-in test kit ``schedlab.testing``; no internal layer uses them;
* ``analysis``: sweeps, metrics, tables and plots;
* ``cli``: the command line.

A prefix names a module and every module under it (``schedlab.profiler`` covers
``schedlab.profiler.matrix``); the longest matching prefix decides.  The package itself,
``schedlab``, is matched exactly (every module is under it).  Besides its prefixes, the cli
layer holds every module named ``cli`` or ``*_cli``, or inside a package so named
(:data:`CLI_NAMES`): the sub-commands that still live next to their package
(``schedlab.profiler.cli`` and the like) while they move into ``schedlab/cli/``.
"""

from __future__ import annotations

#: The package whose modules are mapped.
ROOT = "schedlab"

#: (layer name, module prefixes), bottom layer first.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", (
        "schedlab.atomic",
        "schedlab.claims",
        "schedlab.colocation",
        "schedlab.defaults",
        "schedlab.documents",
        "schedlab.errors",
        "schedlab.fairness",
        "schedlab.gcpause",
        "schedlab.instance",
        "schedlab.layers",
        "schedlab.lazy",
        "schedlab.orphans",
        "schedlab.placement",
        "schedlab.progress",
        "schedlab.solution",
    )),
    ("solvers", ("schedlab.solvers",)),
    ("world", ("schedlab.world",)),
    ("workloads", ("schedlab.workloads",)),
    ("formulations", (
        "schedlab.check",
        "schedlab.check_titan",
        "schedlab.formulations",
        "schedlab.registry",
    )),
    ("policies", ("schedlab.policies",)),
    ("profiler", ("schedlab.profiler",)),
    ("simulator", ("schedlab.simulator",)),
    ("executor", ("schedlab.executor",)),
    ("api", ("schedlab", "schedlab.api", "schedlab.testing")),
    ("analysis", ("schedlab.analysis",)),
    ("cli", ("schedlab.__main__", "schedlab.cli")),
)

#: The layer of every module named ``cli`` or ending in ``_cli``, or inside such a package.
CLI_LAYER = "cli"
#: (exact name, suffix) of the module names that are in :data:`CLI_LAYER` wherever they are.
CLI_NAMES: tuple[str, str] = ("cli", "_cli")


def layer_names() -> tuple[str, ...]:
    """The layer names, bottom first."""
    return tuple(name for name, _ in LAYERS)


def _matches(prefix: str, module: str) -> bool:
    if prefix == ROOT:
        return module == ROOT
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` (0 = bottom) of ``module`` (a dotted name under
    :data:`ROOT`), or None when no prefix covers it."""
    parts = module.split(".")
    if parts[0] == ROOT and any(p == CLI_NAMES[0] or p.endswith(CLI_NAMES[1])
                                for p in parts[1:]):
        return layer_names().index(CLI_LAYER)
    best: tuple[int, int] | None = None  # (prefix length, layer index)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if _matches(prefix, module) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return None if best is None else best[1]
