"""Errors a user can act on.

Every error that a user can cause (a bad file, an unknown name, a solver that is not
installed) is a :class:`SchedlabError`.  The CLI prints ``str(error)`` on one line and exits
with :attr:`SchedlabError.exit_code`; it never shows a traceback for these.
"""

from __future__ import annotations


class SchedlabError(Exception):
    """Base class of all user-facing errors; ``exit_code`` is what the CLI returns."""

    exit_code: int = 1


class InputError(SchedlabError):
    """Bad input: a file, a field path inside it, and the reason.  Exit code 2."""

    exit_code = 2

    def __init__(self, reason: str, *, file: str | None = None, field: str | None = None) -> None:
        self.file = file
        self.field = field
        self.reason = reason
        parts = [p for p in (file, field) if p]
        prefix = ": ".join(parts)
        super().__init__(f"{prefix}: {reason}" if prefix else reason)


class UnknownNameError(InputError):
    """An unknown formulation, policy or solver name."""


class SolverUnavailableError(InputError):
    """The named solver is not installed (or its licence refuses the model)."""


class SolverError(SchedlabError):
    """The solver ran but failed in a way that is not the user's input.  Exit code 1."""

    exit_code = 1


#: The command that installs the torch the profiler and the replay are tested with (README).
TORCH_INSTALL = "pip install torch==2.13.0"


def require_torch(command: str) -> None:
    """Import torch, or raise an :class:`InputError` (one line, exit 2) saying that
    ``schedlab <command>`` needs it and how to install it: torch is an optional dependency,
    so its absence is the user's to fix, not an internal error.  A torch that is present but
    fails to import (a broken wheel, a missing system library) says so with the reason."""
    try:
        import torch  # noqa: F401  (imported for its side effect only: proof it loads)
    except ModuleNotFoundError as exc:
        if exc.name != "torch":  # torch is there, one of its own imports is missing
            raise InputError(f"schedlab {command} needs torch, which fails to import "
                             f"({exc}); reinstall it: {TORCH_INSTALL}") from None
        raise InputError(f"schedlab {command} needs torch, which is not installed: "
                         f"{TORCH_INSTALL}") from None
    except ImportError as exc:
        raise InputError(f"schedlab {command} needs torch, which fails to import ({exc}); "
                         f"reinstall it: {TORCH_INSTALL}") from None
