"""Instance helpers: Instance.require."""

from __future__ import annotations

import pytest

from schedlab.errors import InputError
from schedlab.instance import instance_from_dict


def test_require_names_the_first_job_without_the_field() -> None:
    """None and an empty dict are missing; a zero number is set."""
    document = {"schema": "schedlab/instance@1", "name": "req",
                "cluster": {"accelerators": {"v100": {"count": 2}}},
                "jobs": [{"id": "a", "throughput": {"v100": 1.0}, "total_steps": 5.0},
                         {"id": "b", "throughput": {"v100": 0.5}},
                         {"id": "c", "throughput": {}}]}
    instance = instance_from_dict(document)
    with pytest.raises(InputError) as missing:
        instance.require("total_steps", formulation="f")
    assert missing.value.field == "jobs[1].total_steps"
    with pytest.raises(InputError) as empty:
        instance.require("throughput", formulation="f")
    assert empty.value.field == "jobs[2].throughput"
    instance.require("steps_done", formulation="f")  # 0.0 on every job: set
    instance.require("id", formulation="f")
