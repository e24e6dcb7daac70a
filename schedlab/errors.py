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
