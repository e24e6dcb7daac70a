"""Name -> policy of goodput jobs: ``pollux``, ``sia``, or any registered policy of fixed
gangs run on the jobs' requests (docs/goodput.md, "Other policies")."""

from __future__ import annotations

from typing import Any

from schedlab.policies.goodput_state import GoodputPolicy

#: The policies that plan goodput jobs themselves, name -> one line.
GOODPUT_POLICIES: dict[str, str] = {
    "pollux": "Pollux (OSDI'21): NSGA-II over per-node replicas, p = -1 power mean of "
              "restart-penalised speedups",
    "sia": "Sia (SOSP'23): ILP over (job, configuration) of normalised goodputs ^ -0.5",
}


def is_goodput_policy(name: str) -> bool:
    """True for a policy that plans goodput jobs itself (not a fixed-gang adapter)."""
    return name in GOODPUT_POLICIES


def goodput_policy(name: str, **options: Any) -> GoodputPolicy:
    """A new ``pollux`` or ``sia`` with ``options``, or the registered policy ``name`` run as
    fixed gangs (:class:`~schedlab.policies.goodput_static.StaticOnGoodput`); an unknown
    name is an :class:`~schedlab.errors.UnknownNameError` listing the known ones."""
    if name == "pollux":
        from schedlab.policies.pollux import Pollux

        return Pollux(**options)
    if name == "sia":
        from schedlab.policies.sia import Sia

        return Sia(**options)
    from schedlab.policies.goodput_static import StaticOnGoodput

    return StaticOnGoodput(name, **options)
