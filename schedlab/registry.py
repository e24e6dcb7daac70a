"""Name -> implementation lookup, one mechanism for formulations and online policies.

A :class:`Registry` maps names (``"gavel.max_min_fairness"``, ``"tiresias"``) to
:class:`Entry` s.  An entry's *factory* is an object (a class or any callable) or a string
``"module:attribute"`` imported on first use, so listing the names imports no implementation
and a module that fails to import breaks only its own names.  A variant is a parameter of one
class: several names may share a factory with different default keyword arguments
(``gavel.max_min_fairness_agnostic`` is ``MaxMinFairness`` with ``heterogeneity_aware=False``);
:meth:`Registry.get` calls the factory with those defaults overridden by the caller's keyword
arguments and sets the result's ``name`` to the registered name.

Where names come from, in this order:

1. the built-in tables (:mod:`schedlab.formulations.builtin`, :mod:`schedlab.policies.builtin`),
   registered on first use;
2. :func:`register` / :func:`schedlab.policies.registry.register_policy` calls;
3. Python entry points of the groups ``schedlab.formulations`` and ``schedlab.policies``
   (installed third-party packages; docs/plugins.md).  An entry point's value is

   * a class (a :class:`~schedlab.formulations.base.Method` subclass -- a Formulation or a
     Heuristic -- or a policy class)
     or another callable returning one: registered under the entry point's name;
   * a callable with a parameter named ``registry``: called as ``fn(registry=<the
     Registry>)``, it registers any number of names with :meth:`Registry.register`;
   * a module: importing it registers its names (``schedlab.registry.register(...)`` at
     module level).

   Entry points are looked up again whenever ``sys.path`` changed since the last look (and on
   a name that is not known yet), so a plug-in put on the path is seen without a restart;
   :meth:`Registry.refresh` forces a new look.  A plug-in never replaces a built-in name (a
   warning says so).  A plug-in that fails to load is logged as a warning naming the entry
   point, the built-ins still list, and ``get`` of its name raises an
   :class:`~schedlab.errors.UnknownNameError` that says why.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import inspect
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Generic, TypeVar

from schedlab.errors import UnknownNameError
from schedlab.formulations.base import Method

log = logging.getLogger(__name__)

T = TypeVar("T")

#: ``Entry.origin`` of names registered by schedlab itself or by a direct ``register`` call.
BUILT_IN = "built-in"


@dataclass(frozen=True)
class Entry(Generic[T]):
    """A registered name: its factory, description and the keyword arguments of the variant.

    ``origin`` is :data:`BUILT_IN` or ``"entry point <name> = <value> (<distribution>)"``.
    """

    name: str
    factory: Callable[..., T] | str
    description: str = ""
    defaults: dict[str, Any] = field(default_factory=dict)
    origin: str = BUILT_IN
    kind: str = "name"
    option: str | None = None

    def resolve(self) -> Callable[..., T]:
        """The factory itself (a ``"module:attribute"`` string is imported now).

        Raises :class:`~schedlab.errors.UnknownNameError` naming the entry when the string
        cannot be loaded."""
        if not isinstance(self.factory, str):
            return self.factory
        module_name, _, attribute = self.factory.partition(":")
        try:
            target: Any = importlib.import_module(module_name)
            for part in attribute.split(".") if attribute else ():
                target = getattr(target, part)
        except (ImportError, AttributeError) as exc:
            raise UnknownNameError(
                f"{self.kind} {self.name!r} is registered as {self.factory!r}, which cannot "
                f"be loaded: {exc}", field=self.option) from exc
        factory: Callable[..., T] = target
        return factory

    @property
    def cls(self) -> Any:
        """The factory, resolved (:meth:`resolve`): for a formulation, its class."""
        return self.resolve()

    @property
    def kwargs(self) -> dict[str, Any]:
        """Alias of ``defaults``: the keyword arguments that make the variant."""
        return self.defaults

    def make(self, **overrides: Any) -> T:
        """A new object: the factory called with the variant's defaults and ``overrides``,
        its ``name`` set to the registered name."""
        obj = self.resolve()(**{**self.defaults, **overrides})
        obj.name = self.name  # type: ignore[attr-defined]
        return obj


@dataclass(frozen=True)
class _EntryPointKey:
    """One discovered entry point (the same name may come from two distributions)."""

    name: str
    value: str
    distribution: str

    @property
    def label(self) -> str:
        return f"entry point {self.name} = {self.value} ({self.distribution})"


class Registry(Generic[T]):
    """Names -> :class:`Entry` for one kind of object (module docstring).

    Args:
        kind: what the names name, for messages ("formulation", "policy").
        group: the entry-point group third-party packages register under.
        builtins: ``"module:function"`` registering the built-in names, called with
            ``registry=`` this registry on first use (imported lazily).
        base: entry-point classes must subclass this (None: any callable is accepted).
        option: the command-line option an unknown name is reported against.
    """

    def __init__(
        self,
        kind: str,
        group: str,
        *,
        builtins: str | None = None,
        base: type | None = None,
        option: str | None = None,
    ) -> None:
        self.kind = kind
        self.group = group
        self.base = base
        self.option = option
        self._builtins = builtins
        self._builtins_loaded = builtins is None
        self._entries: dict[str, Entry[T]] = {}
        self._lock = threading.RLock()
        self._loading: _EntryPointKey | None = None  # the entry point being loaded, if any
        self._from_entry_point: dict[_EntryPointKey, list[str]] = {}
        self._broken: dict[str, str] = {}  # entry-point name -> why it failed to load
        self._scanned_path: tuple[str, ...] | None = None
        self._in_builtins = False
        #: Names registered by a call of :meth:`register` at run time (not a built-in, not
        #: an entry point): a worker process started with spawn or forkserver lacks them.
        self._runtime: set[str] = set()

    # registering ---------------------------------------------------------------------------
    def register(
        self, name: str, factory: Callable[..., T] | str, description: str = "",
        **defaults: Any,
    ) -> None:
        """Register ``name`` -> ``factory(**defaults)``; a later registration replaces it.

        ``description`` defaults to the factory's ``description`` attribute when the factory
        is an object.  Called while an entry point loads, the name is recorded as that entry
        point's and may not replace a built-in name (a warning says so and it is ignored).
        """
        if not name:
            raise ValueError(f"a {self.kind} needs a name")
        if not description and not isinstance(factory, str):
            description = str(getattr(factory, "description", "") or "")
        with self._lock:
            loading = self._loading
            if loading is not None:
                current = self._entries.get(name)
                if current is not None and current.origin == BUILT_IN:
                    log.warning("%s: %s %r is built in; the plug-in's registration is ignored",
                                loading.label, self.kind, name)
                    return
                self._from_entry_point.setdefault(loading, []).append(name)
            if loading is None and not self._in_builtins:
                self._runtime.add(name)
            else:
                self._runtime.discard(name)
            self._entries[name] = Entry(
                name, factory, description, dict(defaults),
                origin=loading.label if loading is not None else BUILT_IN,
                kind=self.kind, option=self.option)
            self._broken.pop(name, None)

    def unregister(self, name: str) -> None:
        """Forget ``name`` (nothing happens when it is not registered)."""
        with self._lock:
            self._entries.pop(name, None)
            self._runtime.discard(name)

    @contextlib.contextmanager
    def scoped(self) -> Iterator[Registry[T]]:
        """Registrations made inside the ``with`` block are undone at its end (tests)."""
        with self._lock:
            self._load_builtins()
            saved = (dict(self._entries), dict(self._from_entry_point), dict(self._broken),
                     self._scanned_path, set(self._runtime))
        try:
            yield self
        finally:
            with self._lock:
                entries, loaded, broken, path, runtime = saved
                self._entries, self._from_entry_point, self._broken = entries, loaded, broken
                self._scanned_path, self._runtime = path, runtime

    def runtime_entries(self) -> list[Entry[T]]:
        """The entries registered at run time by :meth:`register` (not built in, not from an
        entry point), in name order: what a spawned worker must register again."""
        with self._lock:
            return [self._entries[name] for name in sorted(self._runtime)
                    if name in self._entries]

    # looking up ----------------------------------------------------------------------------
    def entries(self) -> dict[str, Entry[T]]:
        """Every registered name (built-ins and plug-ins), sorted, without importing any
        implementation given as a ``"module:attribute"`` string."""
        with self._lock:
            self._load_builtins()
            self._scan(force=False)
            return dict(sorted(self._entries.items()))

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return list(self.entries())

    def broken(self) -> dict[str, str]:
        """Entry-point names that failed to load, with the reason."""
        with self._lock:
            self._scan(force=False)
            return dict(self._broken)

    def entry(self, name: str) -> Entry[T]:
        """The entry of ``name``; an :class:`~schedlab.errors.UnknownNameError` (exit code 2)
        naming the known names, or why a plug-in of that name failed to load, otherwise."""
        with self._lock:
            self._load_builtins()
            found = self._entries.get(name)
            if found is None:  # perhaps a plug-in installed since the last look
                self._scan(force=True)
                found = self._entries.get(name)
            if found is not None:
                return found
            if name in self._broken:
                raise UnknownNameError(f"{self.kind} {name!r} is not available: "
                                       f"{self._broken[name]}", field=self.option)
            known = ", ".join(sorted(self._entries))
            raise UnknownNameError(f"unknown {self.kind} {name!r} (known: {known})",
                                   field=self.option)

    def get(self, name: str, **overrides: Any) -> T:
        """A new object registered as ``name`` (see :meth:`Entry.make`)."""
        return self.entry(name).make(**overrides)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.entries()

    def refresh(self) -> None:
        """Look for entry points again now (e.g. after installing a plug-in while the
        process runs without changing ``sys.path``)."""
        with self._lock:
            self._load_builtins()
            self._scan(force=True)

    # built-ins and entry points ------------------------------------------------------------
    def _load_builtins(self) -> None:
        if self._builtins_loaded or self._builtins is None:
            return
        module_name, _, attribute = self._builtins.partition(":")
        registrar = getattr(importlib.import_module(module_name), attribute)
        self._in_builtins = True
        try:
            registrar(registry=self)
        finally:
            self._in_builtins = False
        self._builtins_loaded = True

    def _scan(self, *, force: bool) -> None:
        """Load entry points not loaded yet; drop the names of entry points gone since."""
        path = tuple(sys.path)
        if not force and path == self._scanned_path:
            return
        self._scanned_path = path
        found: list[tuple[_EntryPointKey, importlib.metadata.EntryPoint]] = []
        for ep in importlib.metadata.entry_points(group=self.group):
            dist = ep.dist.name if ep.dist is not None else "unknown distribution"
            found.append((_EntryPointKey(ep.name, ep.value, dist), ep))
        present = {key for key, _ in found}
        for key in [k for k in self._from_entry_point if k not in present]:
            for name in self._from_entry_point.pop(key):
                current = self._entries.get(name)
                if current is not None and current.origin == key.label:
                    del self._entries[name]
            self._broken.pop(key.name, None)
        for key, ep in found:
            if key not in self._from_entry_point:
                self._load_entry_point(key, ep)

    def _load_entry_point(self, key: _EntryPointKey, ep: importlib.metadata.EntryPoint) -> None:
        self._from_entry_point[key] = []
        self._loading = key
        try:
            obj = ep.load()
            problem = self._adopt(key, obj)
        except Exception as exc:  # third-party code may raise anything
            problem = f"{type(exc).__name__}: {exc}"
        finally:
            self._loading = None
        if problem is not None:
            log.warning("%s %s failed to load and is skipped: %s", self.kind, key.label,
                        problem)
            self._broken[key.name] = f"its {key.label} failed to load ({problem})"

    def _adopt(self, key: _EntryPointKey, obj: Any) -> str | None:
        """Register what an entry point's value stands for; the problem, or None."""
        if isinstance(obj, ModuleType):
            return None  # importing it registered its names
        if isinstance(obj, type):
            if self.base is not None and not issubclass(obj, self.base):
                return f"{obj.__qualname__} is not a subclass of {self.base.__qualname__}"
            self.register(key.name, obj)
            return None
        if not callable(obj):
            return f"{key.value} is neither a class, a callable nor a module"
        if _takes_registry(obj):
            obj(registry=self)
        else:
            self.register(key.name, obj)
        return None


def _takes_registry(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` has a parameter named ``registry`` (a registrar, not a factory)."""
    try:
        return "registry" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins without a signature
        return False


# --------------------------------------------------------------------------- formulations

#: The formulation registry (group ``schedlab.formulations``).
FORMULATIONS: Registry[Method] = Registry(
    "formulation", "schedlab.formulations",
    builtins="schedlab.formulations.builtin:register_builtin_formulations",
    base=Method,
    option="--formulation",
)


def register(name: str, cls: type[Method] | Callable[..., Method] | str,
             description: str = "", **kwargs: Any) -> None:
    """Register formulation ``name`` -> ``cls(**kwargs)`` (a class, a factory or a
    ``"module:Class"`` string)."""
    FORMULATIONS.register(name, cls, description, **kwargs)


def formulations() -> dict[str, Entry[Method]]:
    """All registered formulations by name, sorted (built-ins and plug-ins)."""
    return FORMULATIONS.entries()


def get_formulation(name: str, **overrides: Any) -> Method:
    """The formulation registered as ``name``; a clear error naming the known ones otherwise."""
    return FORMULATIONS.get(name, **overrides)
