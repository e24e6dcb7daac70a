r"""Sia's configuration set: the columns of its goodput matrix and of its ILP.

Written from the authors' code, read (siasosp23/artifacts at aaf7a0d, ``sia-simulator/``:
``sia.py`` 13-17 (the two lists), ``populate_valid_configs`` 100-144;
``simulator_config.py`` 9-15 (the default cluster and the node caps)).

A configuration is ``(gpu_type, nodes, gpus)``: ``gpus`` GPUs of one type on ``nodes`` nodes.
For a type with R GPUs per node and N_t nodes, with N'_t = min(N_t, cap_t):

.. math::

    \mathcal{C}_t = \{(n, g) \in L_R : n \le N'_t\},\qquad
    L_4 = \{(1,1), (1,2), (1,4), (2,8), (3,12), \dots, (16,64)\},\qquad
    L_{R \ne 4} = \{(1,1), (1,2), (1,4), (1,8), (2,16), \dots, (8,64)\}

(powers of two inside one node, whole nodes above, at most 64 GPUs), the types in cluster
order.  ``cap_t`` is :data:`MAX_PHYSICAL_NODES` (the largest placement the authors
profiled; a type not listed there is not capped).  Every R other than 4 takes the 8-GPU list,
as the code does, so a node of 2 or 16 GPUs gets configurations that do not match its size
(a warning says so).  The GPUs of a type are R N_t: the cap limits the configurations, not
the capacity.  The default Sia cluster (aws 6 x 4, dgx-ext 2 x 8, rtx 3 x 8) has 19 columns.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]

#: (nodes, GPUs) of a type with 4 GPUs per node (``sia.py`` 13-14).
CONFIGS_4GPU: tuple[tuple[int, int], ...] = (
    (1, 1), (1, 2), (1, 4), *((n, 4 * n) for n in range(2, 17)))
#: (nodes, GPUs) of a type with any other number of GPUs per node (``sia.py`` 16-17).
CONFIGS_8GPU: tuple[tuple[int, int], ...] = (
    (1, 1), (1, 2), (1, 4), (1, 8), *((n, 8 * n) for n in range(2, 9)))
#: The largest node count the authors profiled per GPU type (``simulator_config.py`` 15);
#: configurations never span more nodes.  Types not listed are not capped.
MAX_PHYSICAL_NODES: Mapping[str, int] = {"azure": 5, "aws": 16, "dgx": 2, "dgx-ext": 2,
                                         "quad": 1, "rtx": 3}
#: Sia's simulated heterogeneous cluster, type -> (nodes, GPUs per node), in cluster order
#: (``simulator_config.py`` 9-11): 64 GPUs.
DEFAULT_CLUSTER: Mapping[str, tuple[int, int]] = {"aws": (6, 4), "dgx-ext": (2, 8),
                                                  "rtx": (3, 8)}


@dataclass(frozen=True, order=True)
class Config:
    """``gpus`` GPUs of type ``gpu_type`` on ``nodes`` nodes (one column of the ILP)."""

    gpu_type: str
    nodes: int
    gpus: int


@dataclass(frozen=True)
class ConfigSet:
    """The columns of Sia's matrices and the cluster they live on.

    Args:
        types: the GPU types, in cluster order.
        nodes: nodes of each type.
        gpus_per_node: R of each type.
        configs: the columns, in column order (:func:`sia_configs` builds Sia's set; any set
            of configurations of these types may be given, e.g. a paper's small example).

    Derived arrays (one entry per column): ``column_type`` (index into ``types``),
    ``column_nodes``, ``column_gpus``; ``capacity`` (GPUs per type, R N_t).
    """

    types: tuple[str, ...]
    nodes: tuple[int, ...]
    gpus_per_node: tuple[int, ...]
    configs: tuple[Config, ...]
    column_type: IntArray = field(init=False, repr=False, compare=False)
    column_nodes: IntArray = field(init=False, repr=False, compare=False)
    column_gpus: IntArray = field(init=False, repr=False, compare=False)
    capacity: IntArray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not len(self.types) == len(self.nodes) == len(self.gpus_per_node):
            raise ValueError("types, nodes and gpus_per_node must have one entry per type")
        if len(set(self.types)) != len(self.types):
            raise ValueError(f"GPU types repeat: {self.types}")
        if min(self.nodes, default=1) < 0 or min(self.gpus_per_node, default=1) < 1:
            raise ValueError("nodes must be >= 0 and gpus_per_node >= 1 for every type")
        where = {name: t for t, name in enumerate(self.types)}
        for config in self.configs:
            if config.gpu_type not in where:
                raise ValueError(f"configuration {config} names a type outside {self.types}")
            if not 1 <= config.nodes <= config.gpus:
                raise ValueError(f"configuration {config} needs 1 <= nodes <= gpus")
        object.__setattr__(self, "column_type", np.array(
            [where[c.gpu_type] for c in self.configs], dtype=np.int64))
        object.__setattr__(self, "column_nodes", np.array(
            [c.nodes for c in self.configs], dtype=np.int64))
        object.__setattr__(self, "column_gpus", np.array(
            [c.gpus for c in self.configs], dtype=np.int64))
        object.__setattr__(self, "capacity", np.array(self.nodes, dtype=np.int64)
                           * np.array(self.gpus_per_node, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.configs)

    def type_index(self, gpu_type: str) -> int:
        """Position of ``gpu_type`` in cluster order (a ValueError naming the known types)."""
        try:
            return self.types.index(gpu_type)
        except ValueError:
            raise ValueError(f"unknown GPU type {gpu_type!r} (known: {self.types})") from None

    def columns(self, gpu_type: str) -> IntArray:
        """The column indices of ``gpu_type``'s configurations, in column order."""
        return np.flatnonzero(self.column_type == self.type_index(gpu_type))

    def index(self, config: Config) -> int:
        """The column of ``config`` (a ValueError when it is not in the set)."""
        try:
            return self.configs.index(config)
        except ValueError:
            raise ValueError(f"{config} is not a column of this configuration set") from None


def type_configs(nodes: int, gpus_per_node: int,
                 max_nodes: int | None = None) -> tuple[tuple[int, int], ...]:
    """(nodes, GPUs) of one type: :data:`CONFIGS_4GPU` when R = 4 else :data:`CONFIGS_8GPU`,
    those with at most min(nodes, max_nodes) nodes (``sia.py`` 108-113)."""
    if gpus_per_node not in (4, 8):
        log.warning("Sia's configuration lists are for 4- and 8-GPU nodes; a %d-GPU node "
                    "gets the 8-GPU list, as the authors' code does", gpus_per_node)
    usable = nodes if max_nodes is None else min(nodes, max_nodes)
    listed = CONFIGS_4GPU if gpus_per_node == 4 else CONFIGS_8GPU
    return tuple((n, g) for n, g in listed if n <= usable)


def sia_configs(cluster: Mapping[str, tuple[int, int]] | None = None,
                max_physical_nodes: Mapping[str, int] | None = None) -> ConfigSet:
    """Sia's configuration set of ``cluster`` (type -> (nodes, GPUs per node), in cluster
    order; default :data:`DEFAULT_CLUSTER`), nodes capped by ``max_physical_nodes``
    (default :data:`MAX_PHYSICAL_NODES`; types not in it are not capped)."""
    cluster = DEFAULT_CLUSTER if cluster is None else cluster
    caps = MAX_PHYSICAL_NODES if max_physical_nodes is None else max_physical_nodes
    configs: list[Config] = []
    for name, (nodes, per_node) in cluster.items():
        configs.extend(Config(name, n, g) for n, g in type_configs(nodes, per_node,
                                                                  caps.get(name)))
    return ConfigSet(types=tuple(cluster), nodes=tuple(n for n, _ in cluster.values()),
                     gpus_per_node=tuple(r for _, r in cluster.values()),
                     configs=tuple(configs))


def configs_of(types: Iterable[tuple[str, int, int]],
               configs: Iterable[tuple[str, int, int]]) -> ConfigSet:
    """A hand-made set: ``types`` as (name, nodes, GPUs per node), ``configs`` as
    (type, nodes, GPUs) in column order (e.g. the paper's Table 1 example)."""
    kinds = list(types)
    return ConfigSet(types=tuple(k[0] for k in kinds), nodes=tuple(k[1] for k in kinds),
                     gpus_per_node=tuple(k[2] for k in kinds),
                     configs=tuple(Config(*c) for c in configs))


__all__ = ["CONFIGS_4GPU", "CONFIGS_8GPU", "DEFAULT_CLUSTER", "MAX_PHYSICAL_NODES", "Config",
           "ConfigSet", "configs_of", "sia_configs", "type_configs"]
