"""Optimization formulations, one module per paper, behind :class:`Formulation`."""

from schedlab.formulations.base import Formulation, Heuristic, Method

__all__ = ["Formulation", "Heuristic", "Method"]
