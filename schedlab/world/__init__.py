"""Models of the world the schedulers run in: what the hardware and the training jobs cost, and
what the jobs' datasets mean, as numbers and formulas with their sources -- no scheduling.

- :mod:`schedlab.world.parallelism`: Saturn's parallelism techniques and their analytic
  runtime / memory cost model (``schedlab.profiler`` re-exports it);
- :mod:`schedlab.world.scaling`, :mod:`schedlab.world.scaling_data`: runtimes calibrated to
  published multi-GPU speed-ups;
- :mod:`schedlab.world.hare_switching`: Hare's switch-cost models (the idle gap before a GPU
  runs a task of another job);
- :mod:`schedlab.world.concept_hierarchy`: WordNet's concept hierarchy of class labels and the
  task similarity Titan's merge rule reads.

This is the layer just above the base modules (docs/architecture.md, "Layers"): the workload
generators turn these models into Instances, and the formulations, the profiler and the
simulator read them too, so they import nothing of schedlab but the base modules.  Nothing is
imported here: ``import schedlab.world.X`` loads only X.
"""
