"""``schedlab profile``: measure zoo jobs into a throughput file (docs/profiler.md)."""

from __future__ import annotations

import argparse
from typing import Any

from schedlab.errors import SchedlabError


def add_profile_command(sub: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    """Register ``profile`` on the top-level subparsers ``sub``."""
    profile = sub.add_parser("profile", parents=[common], help="measure zoo jobs (in progress)")
    profile.set_defaults(handler=_cmd_profile)


def _cmd_profile(args: argparse.Namespace) -> int:
    raise SchedlabError("schedlab profile: being built in this session")
