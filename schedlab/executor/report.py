"""The replay report: per job, predicted (simulator on the same plan) vs realized JCT.

Per job: steps of work, the steps predicted and realized by the end of the plan, the
predicted and realized JCT (instance seconds from arrival; realized = (wall time the last
step ended - replay start) x time scale - arrival), their relative error
``(realized - predicted) / predicted``, the realized switch seconds (segment start -> first
step start, summed, instance seconds), the predicted switch overhead and the faults.  The
summary holds the median and largest |relative error| over the jobs that finished in both.
The file is written atomically; its JSON Schema is :func:`replay_report_json_schema`
(``schedlab schema replay``).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from schedlab.executor.plan import Plan
from schedlab.executor.predict import Prediction
from schedlab.instance import write_json_atomic

REPLAY_SCHEMA = "schedlab/replay@1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JobReport(_Model):
    """One job: predicted vs realized."""

    job: str
    job_type: str
    work_steps: int = Field(description="steps the job had to run")
    predicted_steps: float = Field(description="steps predicted by the end of the plan")
    realized_steps: int = Field(description="steps run by the end of the replay")
    finished: bool = Field(description="realized: all steps ran")
    predicted_jct_s: float | None = Field(description="instance s; None: not within the plan")
    realized_jct_s: float | None = Field(description="instance s; None: not finished")
    relative_error: float | None = Field(
        description="(realized - predicted) / predicted JCT; None unless both finished")
    segments: int = Field(description="segments the job ran")
    restores: int = Field(description="segments that began by restoring a checkpoint")
    switch_s: float = Field(description="realized instance s from segment starts to first "
                            "steps, summed over the job's segments")
    predicted_switch_s: float = Field(description="switch overhead the prediction charged")
    faults: list[dict[str, Any]] = Field(default_factory=list)


class Summary(_Model):
    """The whole replay."""

    jobs: int
    finished: int
    predicted_finished: int
    compared: int = Field(description="jobs with both JCTs")
    median_abs_error: float | None
    max_abs_error: float | None
    faults: int
    wall_s: float


class ReplayReport(_Model):
    """What ``schedlab replay`` writes."""

    schema_: Literal["schedlab/replay@1"] = Field(default="schedlab/replay@1", alias="schema")
    solution: str
    instance: str
    plan: Literal["rounds", "schedule"]
    backend: str
    mode: Literal["wall", "steps"]
    time_scale: float
    threads: int
    checkpoint_every_s: float
    jobs: list[JobReport]
    segments: list[dict[str, Any]] = Field(description="the journal's segment records")
    summary: Summary

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict with the ``schema`` key."""
        return self.model_dump(mode="json", by_alias=True)

    def save(self, path: str | Path) -> None:
        """Write as JSON atomically."""
        write_json_atomic(path, self.to_dict())


def build_report(plan: Plan, prediction: Prediction, records: list[dict[str, Any]], *,
                 solution: str, instance: str, backend: str, segment_steps: bool,
                 time_scale: float, threads: int, checkpoint_every_s: float,
                 wall_s: float) -> ReplayReport:
    """The report of a replay whose journal holds ``records``."""
    jobs: list[JobReport] = []
    for job_id, job in plan.jobs.items():
        mine = sorted((r for r in records if r["job"] == job_id), key=lambda r: r["segment"])
        realized_steps = mine[-1]["steps_after"] if mine else 0
        finish = next((r["finish_s"] for r in mine if r.get("finish_s") is not None), None)
        finished = realized_steps >= job.work_steps
        realized = None if finish is None else finish - job.arrival_s
        if job.work_steps == 0:
            realized, finished = 0.0, True
        predicted_finish = prediction.finish_s.get(job_id)
        predicted = None if predicted_finish is None else predicted_finish - job.arrival_s
        error = None
        if realized is not None and predicted is not None and predicted > 0:
            error = (realized - predicted) / predicted
        jobs.append(JobReport(
            job=job_id, job_type=job.spec.name, work_steps=job.work_steps,
            predicted_steps=prediction.steps.get(job_id, 0.0), realized_steps=realized_steps,
            finished=finished, predicted_jct_s=predicted, realized_jct_s=realized,
            relative_error=error, segments=len(mine),
            restores=sum(1 for r in mine if r["restored"]),
            switch_s=sum(r["switch_s"] or 0.0 for r in mine),
            predicted_switch_s=sum(prediction.segment_overhead_s.get(s.index, 0.0)
                                   for s in plan.segments if s.job == job_id),
            faults=[f | {"segment": r["segment"]} for r in mine for f in r["faults"]]))
    errors = [abs(j.relative_error) for j in jobs if j.relative_error is not None]
    summary = Summary(
        jobs=len(jobs), finished=sum(j.finished for j in jobs),
        predicted_finished=sum(j.predicted_jct_s is not None for j in jobs),
        compared=len(errors),
        median_abs_error=statistics.median(errors) if errors else None,
        max_abs_error=max(errors) if errors else None,
        faults=sum(len(j.faults) for j in jobs), wall_s=wall_s)
    return ReplayReport(solution=solution, instance=instance, plan=plan.kind,  # type: ignore[arg-type]
                        backend=backend, mode="steps" if segment_steps else "wall",
                        time_scale=time_scale, threads=threads,
                        checkpoint_every_s=checkpoint_every_s, jobs=jobs,
                        segments=sorted(records, key=lambda r: r["segment"]),
                        summary=summary)


def replay_report_json_schema() -> dict[str, Any]:
    """JSON Schema of the replay report file."""
    schema = ReplayReport.model_json_schema(by_alias=True)
    schema["$id"] = REPLAY_SCHEMA
    return schema
