"""Optimization formulations, one module per paper, behind :class:`Formulation`."""

from schedlab.formulations.base import Formulation

__all__ = ["Formulation"]
