"""``schedlab replay``: run a Solution's plan with real zoo jobs (docs/executor.md)."""

from __future__ import annotations

import argparse
from typing import Any

from schedlab.errors import SchedlabError


def add_replay_command(sub: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    """Register ``replay`` on the top-level subparsers ``sub``."""
    replay = sub.add_parser("replay", parents=[common], help="replay a solution (in progress)")
    replay.set_defaults(handler=_cmd_replay)


def _cmd_replay(args: argparse.Namespace) -> int:
    raise SchedlabError("schedlab replay: being built in this session")
