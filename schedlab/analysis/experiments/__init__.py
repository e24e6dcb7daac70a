"""Experiments: every paper table and every sweep is a declared experiment (workloads x
policies x seeds -> cells -> metrics -> report) run by one runner, locally or on Ray.

:mod:`.spec` holds the spec (``schedlab/experiment@1``), :mod:`.kind` a table kind's
contract, :mod:`.runner` the runner and :mod:`.backends` where cells run; each paper's spec
ships here as ``<paper>.yaml`` (``schedlab experiment show <paper>`` prints it).
"""
