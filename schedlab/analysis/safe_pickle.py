"""Reading other projects' result pickles without running their code.

``pickle.load`` on a file someone else wrote can run any code the file names.  The authors'
result files (Shockwave's simulation and physical-run pickles, for instance) hold plain data --
dicts, lists, numbers, numpy arrays -- plus, at most, a few of their own small classes.
:func:`load_restricted` reads such a file with an unpickler whose ``find_class`` resolves only
the globals on an allow-list: the plain containers, numpy's array and scalar reconstructors,
and named stand-ins for the authors' classes (a :class:`StandIn` keeps the pickled object's
state as a dict and runs none of its methods).  Any other global stops the load with
:class:`RestrictedPickleError` naming it.  Reduce calls on allowed globals are still calls, so
the allow-list holds only constructors of plain data.
"""

from __future__ import annotations

import collections
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from schedlab.errors import InputError


class RestrictedPickleError(InputError):
    """A pickle named a global outside the allow-list (or is not a pickle at all)."""


class StandIn:
    """An object of a class we do not import: its pickled state, as a dict, in ``state``.
    Pickle makes it without ``__init__`` and hands the state to ``__setstate__``."""

    qualname = "StandIn"

    def __init__(self, *args: Any) -> None:
        self.state: dict[str, Any] = {"args": args} if args else {}

    def __setstate__(self, state: Any) -> None:
        self.state = dict(state) if isinstance(state, Mapping) else {"state": state}

    def _key(self) -> str:
        state = getattr(self, "state", {})
        return repr(sorted(state.items(), key=lambda kv: str(kv[0])))

    def __reduce__(self) -> tuple[Any, ...]:  # never re-pickled as the authors' class
        raise TypeError(f"a stand-in for {self.qualname} cannot be pickled")

    def __repr__(self) -> str:
        return f"<stand-in {self.qualname} {getattr(self, 'state', {})!r}>"

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StandIn) and self._key() == other._key()

    def __lt__(self, other: object) -> bool:
        return isinstance(other, StandIn) and self._key() < other._key()


def stand_in(qualname: str) -> type[StandIn]:
    """A :class:`StandIn` subclass named ``qualname`` (for messages and ``repr``)."""
    return type(qualname.rsplit(".", 1)[-1], (StandIn,), {"qualname": qualname})


def _numpy_globals() -> dict[tuple[str, str], Any]:
    """numpy's array and scalar reconstructors under both of their module names."""
    core = np._core.multiarray if hasattr(np, "_core") else np.core.multiarray  # type: ignore[attr-defined]
    found: dict[tuple[str, str], Any] = {("numpy", "dtype"): np.dtype,
                                         ("numpy", "ndarray"): np.ndarray}
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        found[(module, "scalar")] = core.scalar
        found[(module, "_reconstruct")] = core._reconstruct
    return found


#: Globals every restricted load resolves: plain containers and numbers, numpy data.
PLAIN_DATA: dict[tuple[str, str], Any] = {
    ("builtins", "set"): set, ("builtins", "frozenset"): frozenset,
    ("builtins", "list"): list, ("builtins", "dict"): dict, ("builtins", "tuple"): tuple,
    ("builtins", "int"): int, ("builtins", "float"): float, ("builtins", "complex"): complex,
    ("builtins", "bytearray"): bytearray,
    ("collections", "OrderedDict"): collections.OrderedDict,
    **_numpy_globals(),
}


class _Restricted(pickle.Unpickler):
    def __init__(self, file: Any, allowed: Mapping[tuple[str, str], Any], source: str) -> None:
        super().__init__(file)
        self._allowed = allowed
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise RestrictedPickleError(
                f"names the global {module}.{name}, which is not on the allow-list of plain "
                "data; refusing to load it", file=self._source, field="pickle") from None


def load_restricted(path: str | Path,
                    stand_ins: Mapping[str, str] | None = None) -> Any:
    """The object in pickle file ``path``, resolving only plain-data globals and the
    ``stand_ins`` ({"module": "Class"} pairs given as {"module.Class": ...} keys; values are
    the stand-in's display name) as :class:`StandIn` subclasses.

    Raises:
        RestrictedPickleError: the file names another global, or is not a readable pickle.
        InputError: the file cannot be opened.
    """
    source = str(path)
    allowed: dict[tuple[str, str], Any] = dict(PLAIN_DATA)
    for qualname, label in (stand_ins or {}).items():
        module, _, name = qualname.rpartition(".")
        allowed[(module, name)] = stand_in(label or qualname)
    try:
        with open(path, "rb") as handle:
            return _Restricted(handle, allowed, source).load()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=source) from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
            IndexError) as exc:
        raise RestrictedPickleError(f"not a readable pickle ({exc})", file=source,
                                    field="pickle") from None


__all__ = ["PLAIN_DATA", "RestrictedPickleError", "StandIn", "load_restricted", "stand_in"]
