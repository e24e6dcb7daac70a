"""The replay report (predicted vs realized JCT per job) and its JSON Schema."""

from __future__ import annotations

from typing import Any


def replay_report_json_schema() -> dict[str, Any]:
    """JSON Schema of the replay report file."""
    return {}
