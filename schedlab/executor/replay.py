"""The replay loop: run a plan's segments on a backend, handle faults, journal progress.

Timing.  With time scale X an instance second lasts 1/X wall seconds.  The replay starts at
wall time ``t0``; segment ``[a, b)`` starts at ``t0 + a / X`` and must stop at ``t0 + b / X``
(so a round's segments start together: rounds are barriers).  A segment starts only when its
slots are free and the job's previous segment has ended; a late start shows as switch time.
In the *steps-budget* mode (``segment_steps=True``) no clock is used: each segment runs
until the job has done its cumulative predicted whole steps
(:meth:`~schedlab.executor.predict.Prediction.whole_steps`), so progress is deterministic.

Checkpoints.  A job checkpoints at the end of a segment unless its next segment follows at
once on the same slots (then it stays resident), when it finishes, and every
``checkpoint_every_s`` wall seconds inside a segment.

Faults.  A worker that dies mid-segment (``died`` event) is replaced by a fresh one; a gang's
other members are replaced too (they would wait for it in a collective).  The job's progress
falls back to its newest good checkpoint; the lost work is what the worker had reported
beyond it.  The job then runs the rest of the same segment on the fresh worker(s) (until the
segment's end in wall-time mode, up to the same step target in the steps-budget mode).  A
checkpoint found corrupt on restore (checksum, refused payload, or a step count that is not
the one in its name) is skipped and the job restarts from the previous good one; both are
recorded as faults of the segment.

A worker that raises while running an order (``error`` event) stops the replay
(:class:`~schedlab.executor.backends.WorkerFailed`: a bug, not a fault), except in a gang:
there a member's collective fails within milliseconds of a peer's death, often before the
death is seen, so the error is a fault of kind ``gang_error`` handled like a death (at most
:data:`MAX_GANG_FAULTS` faults per segment; one poll's deaths are applied before its errors).

Restarts never block the loop.  :meth:`Backend.restart` kills the old worker and launches the
new one without waiting for it (importing torch and warming up takes seconds, longer than a
segment at a high time scale); the order goes to the new worker at once and waits for it,
and the loop goes on polling the other slots.  Events a replaced worker had sent in the same
poll are dropped (they describe the old worker).

Watchdog.  A segment whose workers have not all reported its end by its wall end plus a
grace of ``max(2 s, 2 x checkpoint interval)`` (:func:`hang_grace_s`) is a fault of kind
``hang``: the segment's workers (every rank of a gang) are killed and replaced, and the job
falls back to its newest checkpoint exactly as after a killed worker.  The watchdog's clock
for a segment starts when its order can actually start: while one of its workers is still
starting (a replacement) it has no deadline (the backend bounds a start by
:data:`~schedlab.executor.backends.READY_TIMEOUT_S`), and the deadline is
``max(wall end, start, now) + grace`` taken when the order is handed over and again when
its last worker reports ``ready`` (so neither a late launch nor a replacement's start counts
as a hang).  Events already waiting are read before a segment is declared hung.  In the
steps-budget mode, which has no wall end, the deadline is the segment's last sign of life
(its start, its workers being ready, a progress report, a rank's result) plus
``max(grace, STEPS_STALL_S)``.  So a stuck worker, a gang waiting for a dead peer or a
collective that never returns costs a bounded time and is reported, and a replay never
blocks forever.

Journal.  Every finished segment appends one JSON line (written, flushed and fsync'd) to
``<workdir>/journal.jsonl``; the first line holds the run's settings.  An interrupted replay
(Ctrl-C) leaves the journal's whole lines and whole checkpoints; with ``resume=True`` the
replay skips the journaled segments, each job restarts from its newest checkpoint (work
after it is counted as lost on resume), and the clock restarts so that the first unfinished
segment starts now.  A journal that is not UTF-8, whose first line is not a header of
:data:`JOURNAL_SCHEMA` or whose records lack their fields is an
:class:`~schedlab.errors.InputError` naming the file (one line, exit 2); a torn last line is
dropped and cut off before appending.  On resume each unfinished job's step count comes from
its newest checkpoint *as verified* (checksum, restricted unpickler, the state's own
``steps_done``, at most the job's work), never from a file name; a finished job's from the
journal.  Files that fail are renamed ``<name>.corrupt`` (so no worker reads them again) and
reported as a ``corrupt_checkpoint`` fault on the job's first segment after the resume.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schedlab.defaults import REPLAY_CHECKPOINT_EVERY_S
from schedlab.documents import parse_json, read_text
from schedlab.errors import InputError
from schedlab.executor.backends import Backend, Event, WorkerFailed
from schedlab.executor.plan import Plan, Segment, Slot, slot_name
from schedlab.executor.predict import Prediction
from schedlab.executor.worker import make_order
from schedlab.profiler.checkpoint import load_latest, state_steps

log = logging.getLogger(__name__)

JOURNAL = "journal.jsonl"
JOURNAL_SCHEMA = "schedlab/replay-journal@1"
#: Default seconds between periodic checkpoints inside a segment (wall clock).
DEFAULT_CHECKPOINT_EVERY_S = REPLAY_CHECKPOINT_EVERY_S
#: Least grace (wall seconds) after a segment's end before the watchdog calls it hung.
MIN_HANG_GRACE_S = 2.0
#: Steps-budget mode: least wall seconds without a sign of life before a segment is hung.
STEPS_STALL_S = 10.0
#: Faults a gang segment may have before an error raised by one of its workers stops the
#: replay (below it, the error is taken for a collective failing because a peer is gone).
MAX_GANG_FAULTS = 3


def hang_grace_s(checkpoint_every_s: float) -> float:
    """Wall seconds past a segment's end before the watchdog calls it hung:
    ``max(2, 2 x checkpoint interval)`` (a worker may be writing its last checkpoint)."""
    return max(MIN_HANG_GRACE_S, 2.0 * checkpoint_every_s)


@dataclass
class ReplaySettings:
    """How to run: time scale, steps-budget mode, checkpoint interval, where to write."""

    time_scale: float = 1.0
    segment_steps: bool = False
    checkpoint_every_s: float = DEFAULT_CHECKPOINT_EVERY_S
    workdir: Path = Path("replay")
    devices: dict[Slot, str] = field(default_factory=dict)
    resume: bool = False
    #: watchdog grace in wall seconds; None = :func:`hang_grace_s` of the interval
    hang_grace_s: float | None = None

    @property
    def grace_s(self) -> float:
        """The watchdog's grace after a segment's end (wall seconds)."""
        if self.hang_grace_s is not None:
            return self.hang_grace_s
        return hang_grace_s(self.checkpoint_every_s)

    def journal_header(self, plan: Plan, backend: str) -> dict[str, Any]:
        """What must match for ``resume`` to continue a journal."""
        return {"schema": JOURNAL_SCHEMA, "kind": plan.kind, "segments": len(plan.segments),
                "jobs": sorted(plan.jobs), "time_scale": self.time_scale,
                "work_steps": {j: plan.jobs[j].work_steps for j in sorted(plan.jobs)},
                "segment_steps": self.segment_steps, "backend": backend}


@dataclass
class Hooks:
    """Callbacks for tests and progress bars: a segment is about to be handed to its
    workers, it was handed to them (with their pids), it finished (with its record)."""

    segment_starting: Callable[[Segment], None] | None = None
    segment_started: Callable[[Segment, list[int]], None] | None = None
    segment_finished: Callable[[dict[str, Any]], None] | None = None


@dataclass
class _Running:
    segment: Segment
    orders: dict[Slot, dict[str, Any]]
    results: dict[Slot, dict[str, Any]] = field(default_factory=dict)
    progress: tuple[int, float, int | None, float | None] | None = None
    faults: list[dict[str, Any]] = field(default_factory=list)
    switch_s: float = 0.0
    first_step_wall: float | None = None
    steps_before: int | None = None
    store: Any = None
    deadline: float = math.inf
    start_wall: float = 0.0
    end_wall: float | None = None


def _append_line(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line and make it durable (flush + fsync)."""
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def read_journal(path: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Header and segment records of a journal (None and [] when there is none).  A torn
    last line (a crash while appending) is dropped; a torn line elsewhere is logged and
    skipped.  InputError (naming the file, and the line) when the file is not UTF-8 text,
    its first line is not a header of :data:`JOURNAL_SCHEMA`, or a record lacks a field."""
    if not path.exists():
        return None, []
    file = str(path)
    lines = read_text(path).split("\n")  # bounded; not UTF-8 -> one InputError line
    if lines and lines[-1] == "":
        lines.pop()
    header: dict[str, Any] | None = None
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        try:
            record = parse_json(line, file)
        except InputError:
            if number > 1 or len(lines) == 1:  # a torn header alone: the run never started
                log.warning("%s line %d is torn; ignored", path, number)
                continue
            raise InputError("line 1 is not a replay journal header (not JSON)", file=file,
                             field="line 1") from None
        if number == 1:
            header = _check_header(record, file)
        else:
            records.append(_check_record(record, file, number))
    return header, records


def _check_header(header: Any, file: str) -> dict[str, Any]:
    """``header`` if it is a journal header of :data:`JOURNAL_SCHEMA`, else InputError."""
    schema = header.get("schema") if isinstance(header, dict) else None
    if not isinstance(schema, str):
        raise InputError("line 1 is not a replay journal header (no schema)", file=file,
                         field="line 1")
    if schema != JOURNAL_SCHEMA:
        known = JOURNAL_SCHEMA.partition("@")[0]
        what = "an unknown journal schema version" if schema.startswith(known + "@") \
            else "not a replay journal"
        raise InputError(f"{what}: schema {schema!r}; this schedlab reads {JOURNAL_SCHEMA!r}",
                         file=file, field="schema")
    assert isinstance(header, dict)
    return header


def _check_record(record: Any, file: str, number: int) -> dict[str, Any]:
    """``record`` if it is a segment record with the fields a resume reads, else
    InputError naming the line."""
    def fail(reason: str) -> InputError:
        return InputError(reason, file=file, field=f"line {number}")

    if not isinstance(record, dict):
        raise fail("not a segment record (not a JSON object)")
    for key in ("segment", "steps_after"):
        value = record.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise fail(f"{key} must be a whole number >= 0, got {value!r}")
    if not isinstance(record.get("job"), str):
        raise fail(f"job must be a string, got {record.get('job')!r}")
    finish = record.get("finish_s")
    if finish is not None and (isinstance(finish, bool) or not isinstance(finish, int | float)
                               or not math.isfinite(finish)):
        raise fail(f"finish_s must be a number or null, got {finish!r}")
    return record


def _cut_torn_tail(path: Path) -> None:
    """Cut a torn last line (no newline: a crash while appending) off the journal, so the
    next record starts on a line of its own."""
    if not path.exists():
        return
    with path.open("rb+") as handle:
        data = handle.read()
        if not data or data.endswith(b"\n"):
            return
        keep = data.rfind(b"\n") + 1
        log.warning("%s: cutting off a torn last line of %d bytes", path, len(data) - keep)
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())


class Replay:
    """One replay of ``plan`` on ``backend`` (see the module docstring)."""

    def __init__(self, plan: Plan, prediction: Prediction, backend: Backend,
                 settings: ReplaySettings, hooks: Hooks | None = None) -> None:
        self.plan = plan
        self.prediction = prediction
        self.backend = backend
        self.settings = settings
        self.hooks = hooks or Hooks()
        self.whole = prediction.whole_steps(plan)
        self.targets = self._targets()
        self.next_of = self._next_segments()
        self.steps = {job_id: 0 for job_id in plan.jobs}
        self.finish_wall: dict[str, float] = {}
        self.records: list[dict[str, Any]] = []
        self.journal = settings.workdir / JOURNAL
        self.t0 = 0.0
        #: corrupt checkpoints found on resume, reported on the job's first segment after it
        self.resume_faults: dict[str, list[dict[str, Any]]] = {}

    # -------------------------------------------------------------- plan helpers

    def _targets(self) -> dict[int, int]:
        """Steps-budget mode: the job's step count after each segment."""
        done: dict[str, int] = {}
        out: dict[int, int] = {}
        for segment in self.plan.segments:
            done[segment.job] = min(done.get(segment.job, 0) + self.whole[segment.index],
                                    self.plan.jobs[segment.job].work_steps)
            out[segment.index] = done[segment.job]
        return out

    def _next_segments(self) -> dict[int, Segment | None]:
        last: dict[str, Segment] = {}
        out: dict[int, Segment | None] = {}
        for segment in sorted(self.plan.segments, key=lambda s: (s.start_s, s.index)):
            before = last.get(segment.job)
            if before is not None:
                out[before.index] = segment
            out[segment.index] = None
            last[segment.job] = segment
        return out

    def checkpoint_dir(self, job_id: str) -> Path:
        """Folder of the job's checkpoints."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in job_id)
        return self.settings.workdir / "checkpoints" / safe

    def _stays(self, segment: Segment) -> bool:
        """The job's next segment follows at once on the same slots (it stays resident)."""
        following = self.next_of.get(segment.index)
        return (following is not None and following.slots == segment.slots
                and math.isclose(following.start_s, segment.end_s, abs_tol=1e-9))

    # -------------------------------------------------------------- journal

    def _open_journal(self) -> set[int]:
        """Start or continue the journal; the segments already done."""
        self.settings.workdir.mkdir(parents=True, exist_ok=True)
        header = self.settings.journal_header(self.plan, self.backend.name)
        old_header, records = read_journal(self.journal)
        if not self.settings.resume:
            if old_header is not None:
                raise InputError("holds a replay journal; pass --resume to continue it or "
                                 "choose another --workdir", file=str(self.journal))
            self.journal.unlink(missing_ok=True)  # at most a torn header: nothing ran
            _append_line(self.journal, header)
            return set()
        if old_header is None:
            raise InputError("no journal to resume", file=str(self.journal))
        for key in ("kind", "segments", "jobs", "time_scale", "segment_steps"):
            if old_header.get(key) != header[key]:
                raise InputError(f"the journal was written for another run ({key} = "
                                 f"{old_header.get(key)!r}, now {header[key]!r})",
                                 file=str(self.journal), field=key)
        _cut_torn_tail(self.journal)
        self._clean_partial_files()
        self.records = records
        journaled: dict[str, int] = {}
        for record in records:
            journaled[record["job"]] = record["steps_after"]
            if record.get("finish_s") is not None:
                self.finish_wall[record["job"]] = record["finish_s"]
        for job_id in self.plan.jobs:
            if job_id in self.finish_wall:
                self.steps[job_id] = journaled[job_id]
            else:
                self.steps[job_id] = self._verified_steps(job_id, on_resume=True)
                log.info("resuming %s from step %d (journal: %s)", job_id,
                         self.steps[job_id], journaled.get(job_id, "no segment yet"))
        return {int(r["segment"]) for r in records}

    def _verified_steps(self, job_id: str, *, on_resume: bool = False) -> int:
        """Steps of the job's newest checkpoint that verifies (checksum, restricted
        unpickler, its state's ``steps_done`` equal to its name's and at most the job's
        work); 0 when none does.  ``on_resume``: the files that fail are renamed
        ``<name>.corrupt`` (no worker reads them again) and noted for the job's next
        segment record."""
        folder = self.checkpoint_dir(job_id)
        restored = load_latest(folder, max_steps=self.plan.jobs[job_id].work_steps)
        steps = state_steps(restored.state) if restored.state is not None else None
        steps = steps or 0
        if on_resume and restored.corrupt:
            for path in restored.corrupt:
                try:
                    path.replace(path.with_name(path.name + ".corrupt"))
                except OSError as exc:
                    log.warning("cannot set %s aside: %s", path, exc)
            self.resume_faults.setdefault(job_id, []).append(
                {"kind": "corrupt_checkpoint", "files": [str(p) for p in restored.corrupt],
                 "resumed_from_steps": steps, "on_resume": True})
        return steps

    def _clean_partial_files(self) -> None:
        """Remove temporary checkpoint files a killed write left (never whole files)."""
        root = self.settings.workdir / "checkpoints"
        if root.is_dir():
            for partial in root.glob("*/.step-*"):
                partial.unlink(missing_ok=True)

    # -------------------------------------------------------------- the loop

    def run(self) -> list[dict[str, Any]]:
        """Replay every segment not yet journaled; returns all segment records."""
        done = self._open_journal()
        pending = [s for s in sorted(self.plan.segments, key=lambda s: (s.start_s, s.index))
                   if s.index not in done]
        scale = self.settings.time_scale
        owned = not self.backend.started
        if owned:
            self.backend.start(self.plan.slots,
                               sorted({job.spec.name for job in self.plan.jobs.values()}))
        try:
            first = pending[0].start_s if pending else 0.0
            self.t0 = time.time() - first / scale
            for record in self.records:  # finish times journaled before a resume
                if record.get("finish_s") is not None:
                    self.finish_wall[record["job"]] = self.t0 + record["finish_s"] / scale
            self._loop(pending)
        finally:
            if owned:
                self.backend.close()
        return self.records

    def _launch_ready(self, pending: list[Segment], running: dict[int, _Running],
                      busy: dict[Slot, int]) -> float:
        """Start every pending segment whose time has come, whose slots are free and whose
        job is not running, keeping each slot's and each job's order; drop segments of
        finished jobs.  Returns the wall time of the next start that waits only for time."""
        pending[:] = [s for s in pending if s.job not in self.finish_wall]
        scale = self.settings.time_scale
        now = time.time()
        blocked_slots: set[Slot] = set(busy)
        blocked_jobs: set[str] = {r.segment.job for r in running.values()}
        next_start = math.inf
        for segment in list(pending):
            start_wall = self.t0 + segment.start_s / scale
            free = not (set(segment.slots) & blocked_slots) and segment.job not in blocked_jobs
            timely = self.settings.segment_steps or start_wall <= now
            if free and timely:
                pending.remove(segment)
                launched = self._launch(segment, start_wall)
                if launched is not None:
                    running[segment.index] = launched
                    for slot in segment.slots:
                        busy[slot] = segment.index
            elif free:
                next_start = min(next_start, start_wall)
            blocked_slots |= set(segment.slots)
            blocked_jobs.add(segment.job)
        return next_start

    def _loop(self, pending: list[Segment]) -> None:
        running: dict[int, _Running] = {}
        busy: dict[Slot, int] = {}
        finished: list[dict[str, Any]] = []
        while pending or running:
            next_start = self._launch_ready(pending, running, busy)
            if not (pending or running):
                break
            if not running:
                if pending and next_start < math.inf:
                    time.sleep(max(0.0, min(next_start - time.time(), 0.5)))
                continue
            timeout = min(max(next_start - time.time(), 0.0), 0.5)
            self._handle(self.backend.poll(timeout), running, busy, finished)
            if any(time.time() > r.deadline for r in running.values()):
                # reports that are already waiting count before a verdict (a result read
                # now is not a hang)
                self._handle(self.backend.poll(0.0), running, busy, finished)
            now = time.time()
            for state in [r for r in running.values() if now > r.deadline]:
                self._fault(state, state.segment.slots[0],
                            f"no end report {self.settings.grace_s:g} s past the segment's "
                            "deadline", kind="hang")
                self._collect(state, running, busy, finished)
            if finished:
                self._launch_ready(pending, running, busy)  # before the journal's fsync
                for record in finished:
                    self._record(record)
                finished.clear()

    def _handle(self, events: list[Event], running: dict[int, _Running],
                busy: dict[Slot, int], finished: list[dict[str, Any]]) -> None:
        """Apply one poll's events.  A slot restarted while they are applied has its later
        events in the batch dropped: they came from the worker just replaced."""
        replaced: set[Slot] = set()
        # errors last (stable): a gang member's error after its peer's death in the same
        # poll is then dropped as the replaced worker's
        for kind, slot, payload in sorted(events, key=lambda event: event[0] == "error"):
            if slot in replaced:
                log.debug("dropping %s of the replaced worker of %s", kind, slot_name(slot))
                continue
            index = busy.get(slot)
            if kind == "error" and (index is None or len(running[index].segment.slots) == 1
                                    or len(running[index].faults) >= MAX_GANG_FAULTS):
                raise WorkerFailed(f"worker {slot_name(slot)}: {payload}")
            if index is None:
                if kind == "died":  # an idle worker died: replace it
                    self.backend.restart(slot)
                    replaced.add(slot)
                continue
            state = running[index]
            if kind == "ready":  # a replacement started: the segment's clock starts now
                self._arm(state)
                continue
            if kind == "progress":
                state.progress = payload
                self._alive(state)
            elif kind == "result":
                state.results[slot] = payload
                self._alive(state)
            elif kind in ("died", "error"):
                self._fault(state, slot, str(payload),
                            kind="worker_died" if kind == "died" else "gang_error")
                replaced.update(state.segment.slots)
            self._collect(state, running, busy, finished)

    def _collect(self, state: _Running, running: dict[int, _Running], busy: dict[Slot, int],
                 finished: list[dict[str, Any]]) -> None:
        """When every rank of ``state`` has reported, free its slots and record it."""
        if len(state.results) == len(state.segment.slots):
            state.store = None  # the gang's store closes with it
            del running[state.segment.index]
            for s in state.segment.slots:
                busy.pop(s, None)
            finished.append(self._finish(state))

    def _alive(self, state: _Running) -> None:
        """Steps-budget mode: a sign of life moves the watchdog's deadline."""
        if self.settings.segment_steps:
            self._arm(state)

    def _arm(self, state: _Running) -> None:
        """Set the watchdog's deadline of ``state`` from now: none while one of its workers
        is still starting (the backend bounds that); then, in wall-time mode,
        ``max(wall end, start, now) + grace`` (its clock starts when the order can actually
        start: a late launch or a replacement's start-up is not its running time), in
        steps-budget mode ``now + max(grace, STEPS_STALL_S)``."""
        if not all(self.backend.ready(slot) for slot in state.segment.slots):
            state.deadline = math.inf
            return
        now = time.time()
        if state.end_wall is None:
            state.deadline = now + max(self.settings.grace_s, STEPS_STALL_S)
        else:
            state.deadline = max(state.end_wall, state.start_wall, now) + self.settings.grace_s

    def _launch(self, segment: Segment, start_wall: float) -> _Running | None:
        job = self.plan.jobs[segment.job]
        target = self.targets[segment.index] if self.settings.segment_steps else job.work_steps
        if self.steps[segment.job] >= job.work_steps or \
                (self.settings.segment_steps and self.steps[segment.job] >= target):
            return None  # nothing left for this segment: the slots stay idle
        end_wall = None if self.settings.segment_steps else \
            self.t0 + segment.end_s / self.settings.time_scale
        if self.hooks.segment_starting is not None:
            self.hooks.segment_starting(segment)
        state = _Running(segment, {})
        self._submit(state, start_wall, end_wall, target)
        if self.hooks.segment_started is not None:
            self.hooks.segment_started(segment, [self.backend.pid(s) for s in segment.slots])
        return state

    def _submit(self, state: _Running, start_wall: float, end_wall: float | None,
                target: int) -> None:
        segment = state.segment
        job = self.plan.jobs[segment.job]
        world = len(segment.slots)
        master, port = "127.0.0.1", 0
        if world > 1:
            state.store, master, port = self.backend.gang_store(world)
        state.results.clear()
        state.start_wall, state.end_wall = start_wall, end_wall
        self._arm(state)
        for rank, slot in enumerate(segment.slots):
            order = make_order(
                segment=segment.index, job=job.id, spec=job.spec.name, seed=job.seed * 1000,
                expected_steps=self.steps[job.id], until_steps=target,
                work_steps=job.work_steps, checkpoint_dir=str(self.checkpoint_dir(job.id)),
                start_wall=start_wall, end_wall=end_wall,
                checkpoint_every_s=self.settings.checkpoint_every_s,
                checkpoint_at_end=not self._stays(segment),
                device=self.settings.devices.get(slot, "cpu"), rank=rank, world=world,
                master=master, port=port)
            state.orders[slot] = order
            self.backend.submit(slot, order)

    def _fault(self, state: _Running, slot: Slot, reason: str, kind: str = "worker_died"
               ) -> None:
        """A worker of ``state`` died (``kind="hang"``: the segment is past its deadline;
        ``"gang_error"``: a gang member's collective failed): replace the gang's workers
        (without waiting for them: the order waits for the new worker, whose start does not
        count against the segment's deadline), fall back to the newest verified checkpoint,
        run the rest of the segment."""
        segment = state.segment
        job_id = segment.job
        for member in segment.slots:  # first, so no member writes a checkpoint after this
            self.backend.restart(member)
        durable = self._verified_steps(job_id)
        reached = state.progress[0] if state.progress is not None else None
        if reached is not None:  # a checkpoint written just before the end, unreported
            reached = max(reached, durable)
        lost_s = None
        if state.progress is not None:
            _, wall, _, ckpt_wall = state.progress
            base_wall = ckpt_wall if ckpt_wall is not None else state.orders[slot]["start_wall"]
            lost_s = max(wall - base_wall, 0.0) * self.settings.time_scale
        fault = {"kind": kind, "slot": slot_name(slot), "reason": reason,
                 "at_s": (time.time() - self.t0) * self.settings.time_scale,
                 "steps_reached": reached, "resumed_from_steps": durable,
                 "lost_steps": (reached - durable) if reached is not None else None,
                 "lost_s": lost_s}
        log.warning("segment %d (%s): %s on %s (%s); resuming from step %d",
                    segment.index, job_id, kind, slot_name(slot), reason, durable)
        state.faults.append(fault)
        if state.steps_before is None:
            state.steps_before = self.steps[job_id]
        self.steps[job_id] = durable
        state.progress = None
        order = state.orders[slot]
        end_wall = order["end_wall"]
        target = order["until_steps"]
        now = time.time()
        if end_wall is not None and end_wall <= now:
            state.results = {s: self._empty_result(state, s, durable) for s in segment.slots}
            state.store = None
            return
        self._submit(state, now, end_wall, target)

    def _empty_result(self, state: _Running, slot: Slot, steps: int) -> dict[str, Any]:
        return {"segment": state.segment.index, "job": state.segment.job, "rank": 0,
                "steps_before": steps, "steps_after": steps, "resident": False,
                "restored_steps": None, "corrupt": [], "first_step_wall": None,
                "last_step_wall": None, "end_wall": time.time(), "switch_s": None,
                "checkpoints": []}

    def _finish(self, state: _Running) -> dict[str, Any]:
        segment = state.segment
        job = self.plan.jobs[segment.job]
        lead = state.results[segment.slots[0]]
        steps_before = state.steps_before if state.steps_before is not None \
            else lead["steps_before"]
        faults = self.resume_faults.pop(segment.job, []) + list(state.faults)
        if lead["corrupt"]:
            faults.append({"kind": "corrupt_checkpoint", "files": lead["corrupt"],
                           "resumed_from_steps": lead["steps_before"]})
        expected = self.steps[segment.job]
        if lead["steps_before"] != expected and not state.faults:
            faults.append({"kind": "restored_older_state", "expected_steps": expected,
                           "resumed_from_steps": lead["steps_before"]})
        self.steps[segment.job] = lead["steps_after"]
        scale = self.settings.time_scale
        finish_s = None
        if lead["steps_after"] >= job.work_steps and lead["last_step_wall"] is not None:
            self.finish_wall[segment.job] = lead["last_step_wall"]
            finish_s = (lead["last_step_wall"] - self.t0) * scale
        switch = lead["switch_s"]
        restored = not lead["resident"] or bool(state.faults)
        record = {"segment": segment.index, "round": segment.round, "job": segment.job,
                  "slots": [slot_name(s) for s in segment.slots],
                  "start_s": segment.start_s, "end_s": segment.end_s,
                  "steps_before": steps_before, "steps_after": lead["steps_after"],
                  "predicted_steps": self.prediction.segment_steps.get(segment.index, 0.0),
                  "restored": restored, "restored_steps": lead["restored_steps"],
                  "switch_s": switch * scale if switch is not None else None,
                  "ran_s": ((lead["last_step_wall"] - lead["first_step_wall"]) * scale
                            if lead["first_step_wall"] is not None
                            and lead["last_step_wall"] is not None else 0.0),
                  "checkpoints": [c[0] for c in lead["checkpoints"]],
                  "finish_s": finish_s, "faults": faults}
        return record

    def _record(self, record: dict[str, Any]) -> None:
        """Journal a finished segment (durably) and tell the hook."""
        _append_line(self.journal, record)
        self.records.append(record)
        if self.hooks.segment_finished is not None:
            self.hooks.segment_finished(record)
