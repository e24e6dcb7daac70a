"""Workload generators and trace readers that produce Instances.

- :mod:`schedlab.workloads.throughputs`: Gavel's measured throughput table, GPU prices and
  the co-location (space-sharing) interference model.
- :mod:`schedlab.workloads.gavel`: the Gavel-style job generator, the Gavel trace reader and
  the example instances of ``instances/gavel/``.
- :mod:`schedlab.workloads.throughput_files`: throughput tables from files (schedlab's layout
  or Gavel's raw one) and :func:`~schedlab.workloads.throughput_files.resolve_throughputs`
  (a shipped table's name, ``gavel`` or ``shockwave-tacc``, or a file).
- :mod:`schedlab.workloads.shockwave`: Shockwave's trace generator (draw for draw), its
  dynamic batch-size schedules (:mod:`~schedlab.workloads.shockwave_adaptation`) and the
  example instances of ``instances/shockwave/``; :mod:`~schedlab.workloads.shockwave_trace`
  writes and reads Shockwave's ``.trace`` format.
- :mod:`schedlab.workloads.titan`: Titan's fine-tuning tasks (base models, requested GPUs,
  speed profiles, label sets of the concept hierarchy) and ``instances/titan/``.

See docs/workloads.md.
"""

from schedlab.workloads.gavel import (
    GAVEL_CLUSTER,
    GAVEL_PRIORITY_MIX,
    GAVEL_SCALE_FACTOR_MIX,
    GAVEL_SLO_FACTORS,
    compact_instance_dict,
    example_instances,
    generate_gavel_instance,
    instance_from_gavel_trace,
    save_instance_compact,
    small_six_jobs_instance,
    write_example_instances,
)
from schedlab.workloads.shockwave import (
    draw_shockwave_jobs,
    generate_shockwave_instance,
)
from schedlab.workloads.throughputs import (
    ThroughputTable,
    add_colocation,
    build_throughput_table,
    colocation_factors,
    gavel_prices,
    gpu_intensity,
    load_gavel_throughputs,
    load_throughputs,
)

__all__ = [
    "GAVEL_CLUSTER",
    "GAVEL_PRIORITY_MIX",
    "GAVEL_SCALE_FACTOR_MIX",
    "GAVEL_SLO_FACTORS",
    "ThroughputTable",
    "add_colocation",
    "build_throughput_table",
    "colocation_factors",
    "compact_instance_dict",
    "draw_shockwave_jobs",
    "example_instances",
    "gavel_prices",
    "generate_gavel_instance",
    "generate_shockwave_instance",
    "gpu_intensity",
    "instance_from_gavel_trace",
    "load_gavel_throughputs",
    "load_throughputs",
    "save_instance_compact",
    "small_six_jobs_instance",
    "write_example_instances",
]
