"""schedlab: GPU-cluster scheduling formulations behind one Instance -> Solution interface."""

from schedlab.api import solve
from schedlab.instance import Instance, load_instance
from schedlab.solution import Solution, Status

__all__ = ["Instance", "Solution", "Status", "load_instance", "solve"]
__version__ = "0.1.0"
