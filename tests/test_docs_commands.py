"""Every command in README.md and docs/**/*.md runs as printed, and prints what the docs show.

Collected: every fenced block tagged ``sh``, ``bash``, ``shell`` or ``console`` in README.md and
docs/**/*.md, one test per block (its id is ``FILE:LINE`` of the opening fence).

* ``sh`` / ``bash`` / ``shell``: every line is a command; ``# ...`` lines and blank lines are
  ignored, a trailing ``\\`` joins the next line, a leading ``$ `` is stripped. A ``text``
  block that follows right after (only blank lines between) is the sample output of the
  block's commands, concatenated.
* ``console``: ``$ ...`` lines are commands (``\\`` continues them), ``# ...`` lines are
  comments, any other line is sample output of the command above it.

Each command runs with ``bash -c`` in a fresh temporary folder holding a copy of the
repository's shipped files (:data:`SHIPPED`; the package is the one installed in this
environment), the commands of one block one after another in the same folder, each with a
timeout; every one must exit 0. Sample output is compared with what the command printed on
stdout (for a command documented to fail, ``exit N``: stderr, then stdout), after
:func:`normalize`: durations, timestamps and timing columns are masked, box-drawing widths and
runs of blanks collapsed; then text must be equal and numbers equal within a relative
tolerance (1e-6 unless the block says otherwise). A sample line ``...`` stands for any number
of printed lines. A command that is documented twice and finds the same files runs once.

HTML comments right before a block's opening fence (one per line, nothing between them and
the fence) change how the block runs:

* ``<!-- docs-test: skip (reason) -->``: the block is not run; the reason is required.
* ``<!-- docs-test: skip-command "TEXT" (reason) -->``: the one command of the block that
  contains TEXT is not run; the reason is required.
* ``<!-- docs-test: exit N -->``: the block's commands are expected to exit with status N.
* ``<!-- docs-test: rtol X (reason) -->``: relative tolerance of the sample's numbers, with the
  reason (e.g. the numbers are measured and vary).
* ``<!-- docs-test: timeout S -->``: per-command timeout in seconds (default 120).
* ``<!-- docs-test: needs torch, ray -->``: skipped where one of these Python modules is not
  installed (optional extras).

A marker that is malformed, lacks its reason, or is not right before a command block fails
:func:`test_docs_markers_are_well_formed`, and so does an untagged block that starts like a
command (tag it ``sh``, or ``text`` for output).
"""

from __future__ import annotations

import difflib
import importlib.util
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: what a clone ships that documented commands read, copied into each block's folder
SHIPPED = ("instances", "examples", "docs", "scripts", "benchmarks", "tests/data")

COMMAND_LANGS = frozenset({"sh", "bash", "shell", "console"})
OUTPUT_LANGS = frozenset({"text"})
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_RTOL = 1e-6

#: Blocks in files that other work edits right now (keyed by file and the block's first
#: command): skipped here, with the reason, until those files settle.
CONCURRENT_SKIPS: dict[tuple[str, str], str] = {
    (
        "docs/executor.md",
        "schedlab solve instance.json -f gavel.max_min_fairness --out solution.json",
    ): "edited concurrently; checked by the lead (instance.json is not shipped)",
    (
        "docs/executor.md",
        "schedlab profile --models lstm,recommender --batch-sizes 16,64 --scale-factors 1,2 "
        "--warmup-steps 50 --min-steps 100 --max-steps 100000 --max-seconds 1 "
        "--out throughputs.json",
    ): "edited concurrently; checked by the lead (a profile campaign and a replay: "
    "tests/test_executor_fidelity.py runs it)",
    (
        "docs/profiler.md",
        "schedlab profile --models resnet18,lstm --batch-sizes 16,32 --scale-factors 1,2 "
        "--out throughputs.json",
    ): "edited concurrently; checked by the lead (a profile campaign, minutes on 2 cores)",
    (
        "docs/profiler.md",
        "schedlab profile --models resnet18,resnet50,transformer,lstm,recommender "
        "--sizes base --batch-sizes 16,32,64,128 --devices cuda=a100 "
        "--scale-factors 1,2,4,8 --out a100.json",
    ): "edited concurrently; checked by the lead (needs a CUDA GPU and hours)",
}


# --------------------------------------------------------------------------- parsing


@dataclass
class Command:
    line: int  # 1-based line of the command in its file
    text: str  # as bash runs it (continuations joined)
    expected: list[str] | None = None  # console: the sample output below it
    expected_line: int | None = None
    skip: str | None = None


@dataclass
class Block:
    path: str  # relative to the repository root
    line: int  # 1-based line of the opening fence
    lang: str
    commands: list[Command] = field(default_factory=list)
    skip: str | None = None
    exit_status: int = 0
    rtol: float = DEFAULT_RTOL
    timeout_s: float = DEFAULT_TIMEOUT_S
    needs: list[str] = field(default_factory=list)  # Python modules the commands need
    expected: list[str] | None = None  # a text block right after: all commands' output
    expected_line: int | None = None
    closing_line: int = 0  # 0-based index of the closing fence

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


_MARKER = re.compile(r"^\s*<!--\s*docs-test:(?P<body>.*?)-->\s*$")
_MARKER_START = re.compile(r"<!--\s*docs-test")
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[^\s`{]*)[^`]*$")
_REASON = r"\(\s*(?P<{}>[^()]*?(?:\([^()]*\)[^()]*?)*)\s*\)"
_DIRECTIVES = {
    "skip": re.compile(r"^skip(?:\s*" + _REASON.format("reason") + r")?$"),
    "skip-command": re.compile(
        r'^skip-command\s+"(?P<text>[^"]+)"(?:\s*' + _REASON.format("reason") + r")?$"
    ),
    "exit": re.compile(r"^exit\s+(?P<status>\d+)$"),
    "rtol": re.compile(
        r"^rtol\s+(?P<value>[0-9.]+(?:[eE][-+]?\d+)?)(?:\s*" + _REASON.format("reason") + r")?$"
    ),
    "timeout": re.compile(r"^timeout\s+(?P<value>\d+(?:\.\d+)?)$"),
    "needs": re.compile(r"^needs\s+(?P<modules>[\w.]+(?:\s*,\s*[\w.]+)*)$"),
}
#: an untagged block starting like this holds commands and must be tagged
_LOOKS_LIKE_COMMAND = re.compile(
    r"^\s*(?:\$ )?(?:[A-Z_]+=\S*\s+)*(?:schedlab|python3?|pip|apt-get|pytest)\s"
)


def _apply_directive(block: Block, lineno: int, body: str, errors: list[str]) -> None:
    where = f"{block.path}:{lineno}"
    body = body.strip()
    for name, pattern in _DIRECTIVES.items():
        if body == name or body.startswith(name + " ") or body.startswith(name + "("):
            if name == "skip" and body.startswith("skip-command"):
                continue
            m = pattern.match(body)
            if m is None:
                errors.append(f"{where}: malformed docs-test marker: {body!r}")
                return
            reason = (m.groupdict().get("reason") or "").strip()
            if name in ("skip", "skip-command", "rtol") and not reason:
                errors.append(
                    f"{where}: docs-test marker {body!r} needs a reason in parentheses, "
                    f'e.g. "{name} ... (needs a GPU)"'
                )
                return
            if name == "skip":
                block.skip = reason
            elif name == "skip-command":
                hits = [c for c in block.commands if m["text"] in c.text]
                if len(hits) != 1:
                    errors.append(
                        f"{where}: skip-command {m['text']!r} matches {len(hits)} commands of "
                        f"the block at line {block.line} (must match exactly one)"
                    )
                    return
                hits[0].skip = reason
            elif name == "exit":
                block.exit_status = int(m["status"])
            elif name == "rtol":
                block.rtol = float(m["value"])
            elif name == "timeout":
                block.timeout_s = float(m["value"])
            elif name == "needs":
                block.needs += [n.strip() for n in m["modules"].split(",")]
            return
    errors.append(f"{where}: unknown docs-test marker {body!r}")


def strip_comment(line: str) -> str:
    """``line`` without a trailing shell comment (a ``#`` after a blank, outside quotes)."""
    quote = ""
    k = 0
    while k < len(line):
        ch = line[k]
        if ch == "\\" and quote != "'":
            k += 2  # an escaped character
            continue
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (k == 0 or line[k - 1] in " \t"):
            return line[:k].rstrip()
        k += 1
    return line


def _parse_sh(block: Block, body: list[tuple[int, str]], errors: list[str]) -> None:
    text: list[str] = []
    start = 0
    for lineno, raw in body:
        s = strip_comment(raw.strip())
        if not text:
            if not s:
                continue
            if s.startswith("$ "):
                s = s[2:].lstrip()
            start = lineno
        if s.endswith("\\"):
            text.append(s[:-1].rstrip())
            continue
        text.append(s)
        block.commands.append(Command(start, " ".join(t for t in text if t)))
        text = []
    if text:
        errors.append(f"{block.path}:{start}: the command ends in a line continuation")


def _parse_console(block: Block, body: list[tuple[int, str]], errors: list[str]) -> None:
    current: Command | None = None
    continued = False
    output: list[tuple[int, str]] = []

    def close() -> None:
        while output and not output[-1][1].strip():
            output.pop()
        if current is not None and output:
            current.expected = [line for _, line in output]
            current.expected_line = output[0][0]
        output.clear()

    for lineno, raw in body:
        s = raw.rstrip()
        if continued and current is not None:
            part = strip_comment(s.strip())
            continued = part.endswith("\\")
            current.text += " " + (part[:-1].rstrip() if continued else part)
            continue
        if s.startswith("$ "):
            close()
            part = strip_comment(s[2:].strip())
            continued = part.endswith("\\")
            current = Command(lineno, part[:-1].rstrip() if continued else part)
            block.commands.append(current)
        elif s.lstrip().startswith("#"):
            continue
        elif current is None:
            if s.strip():
                errors.append(f"{block.path}:{lineno}: console output before any '$ ' command")
        else:
            output.append((lineno, s))
    if continued:
        errors.append(f"{block.path}:{block.line}: the last command ends in a continuation")
    close()


def parse_markdown(text: str, path: str) -> tuple[list[Block], list[str]]:
    """The command blocks of one markdown file, and what is wrong with its markers."""
    lines = text.split("\n")
    blocks: list[Block] = []
    errors: list[str] = []
    markers: list[tuple[int, str]] = []
    previous: Block | None = None  # the last command block, for a text block right after
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _MARKER.match(line)
        if m is not None:
            markers.append((i + 1, m["body"]))
            i += 1
            continue
        if _MARKER_START.search(line):
            errors.append(f"{path}:{i + 1}: malformed docs-test marker: {line.strip()!r}")
        fence = _FENCE.match(line)
        if fence is None:
            if markers:
                errors.append(
                    f"{path}:{markers[0][0]}: docs-test marker not right before a fenced block"
                )
                markers = []
            i += 1
            continue
        indent, ticks, lang = fence["indent"], fence["fence"], fence["lang"].lower()
        j = i + 1
        close = re.compile(r"^[ \t]*" + re.escape(ticks[0]) + "{" + str(len(ticks)) + r",}\s*$")
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        body = [
            (k + 1, lines[k][len(indent) :] if lines[k].startswith(indent) else lines[k].lstrip())
            for k in range(i + 1, min(j, len(lines)))
        ]
        if lang in COMMAND_LANGS:
            block = Block(path, i + 1, lang, closing_line=j)
            (_parse_console if lang == "console" else _parse_sh)(block, body, errors)
            for lineno, marker in markers:
                _apply_directive(block, lineno, marker, errors)
            blocks.append(block)
            previous = block
        else:
            if markers:
                errors.append(
                    f"{path}:{markers[0][0]}: docs-test marker before a ```{lang} block "
                    "(markers go before command blocks)"
                )
            if lang in OUTPUT_LANGS and previous is not None and previous.lang != "console":
                between = lines[previous.closing_line + 1 : i]
                if all(not b.strip() for b in between):
                    previous.expected = [b for _, b in body]
                    previous.expected_line = i + 2
            if lang == "" and body and _LOOKS_LIKE_COMMAND.match(body[0][1]):
                errors.append(
                    f"{path}:{i + 1}: untagged fenced block starts with a command: tag it "
                    "```sh (commands, run by tests/test_docs_commands.py) or ```text (output)"
                )
        markers = []
        i = j + 1
    if markers:
        errors.append(f"{path}:{markers[0][0]}: docs-test marker not right before a fenced block")
    return blocks, errors


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def collect() -> tuple[list[Block], list[str]]:
    blocks: list[Block] = []
    errors: list[str] = []
    for path in doc_files():
        b, e = parse_markdown(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
        blocks += b
        errors += e
    return blocks, errors


# --------------------------------------------------------------------------- comparing

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
)
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
#: key=value where the key is a duration: time=0.027s, solver_time_per_decision_s=0.0010
_TIMED_KEY = re.compile(r"\b(\w*(?:time|wall|elapsed|seconds)\w*)=" + _NUMBER + r"\s?(?:ms|s)?\b")
#: a duration on a line that says it is one: "time solve │ 0.014 s", "took 8.1 s"
_TIMING_WORDS = re.compile(r"\b(?:time|wall|elapsed|took)\b", re.IGNORECASE)
_DURATION = re.compile(r"(?<![\w.])" + _NUMBER + r"\s?(?:ms|s|sec)\b")
#: table columns that hold durations
_TIMED_HEADER = re.compile(
    r"(?:s/decision|\bseconds\b|\bwall\b|\btime\b|\(s\)|\bs/\w+)", re.IGNORECASE
)
_HEADER_SEP = "┃"
_BODY_SEP = "│"
_NUM_TOKEN = re.compile(_NUMBER)


def _mask_timed_columns(lines: list[str]) -> list[str]:
    """In rich tables, mask the cells of columns whose header names a duration."""
    out: list[str] = []
    header: list[list[str]] = []
    timed: set[int] = set()
    for line in lines:
        stripped = line.strip()
        if stripped.startswith(_HEADER_SEP):
            header.append(stripped.strip(_HEADER_SEP).split(_HEADER_SEP))
            names = [
                " ".join(row[c].strip() for row in header if c < len(row))
                for c in range(max(len(r) for r in header))
            ]
            timed = {c for c, name in enumerate(names) if _TIMED_HEADER.search(name)}
            out.append(line)
            continue
        if stripped.startswith(_BODY_SEP) and timed:
            cells = stripped.strip(_BODY_SEP).split(_BODY_SEP)
            if len(cells) == len(header[0]):
                cells = [" <t> " if c in timed else cell for c, cell in enumerate(cells)]
                line = _BODY_SEP + _BODY_SEP.join(cells) + _BODY_SEP
        elif stripped.startswith(("└", "┗")) or not stripped:
            header, timed = [], set()
        out.append(line)
    return out


def normalize(text: str, workdir: Path | None = None) -> list[str]:
    """Lines as compared: timings, timestamps and temporary paths masked, blanks collapsed."""
    text = _ANSI.sub("", text.replace("\r\n", "\n"))
    if workdir is not None:
        for form in {str(workdir), str(workdir.resolve())}:
            text = text.replace(form + os.sep, "").replace(form, ".")
    lines = _mask_timed_columns(text.split("\n"))
    result = []
    for line in lines:
        line = _TIMESTAMP.sub("<timestamp>", line)
        line = _TIMED_KEY.sub(r"\1=<t>", line)
        if _TIMING_WORDS.search(line):
            line = _DURATION.sub("<t>", line)
        line = re.sub(r"[─━═]+", "─", line)
        line = re.sub(r"\s+", " ", line).strip()
        result.append(line)
    while result and not result[-1]:
        result.pop()
    while result and not result[0]:
        result.pop(0)
    return result


def line_mismatch(expected: str, actual: str, rtol: float) -> str | None:
    """None when the lines agree: equal text, numbers within rtol; else what differs."""
    if expected == actual:
        return None
    e_text, a_text = _NUM_TOKEN.split(expected), _NUM_TOKEN.split(actual)
    e_nums, a_nums = _NUM_TOKEN.findall(expected), _NUM_TOKEN.findall(actual)
    if e_text != a_text or len(e_nums) != len(a_nums):
        return "text differs"
    for e, a in zip(e_nums, a_nums, strict=True):
        x, y = float(e), float(a)
        if not math.isclose(x, y, rel_tol=rtol, abs_tol=0.0):
            return f"number {e} in the docs, {a} printed (relative tolerance {rtol:g})"
    return None


def match_output(expected: list[str], actual: list[str], rtol: float) -> bool:
    """Does every sample line match, in order, with ``...`` lines matching any lines?"""
    n, m = len(expected), len(actual)
    # ok[i][j]: expected[i:] matches actual[j:]
    ok = [[False] * (m + 1) for _ in range(n + 1)]
    ok[n][m] = True
    for i in range(n - 1, -1, -1):
        if expected[i] == "...":
            for j in range(m, -1, -1):
                ok[i][j] = ok[i + 1][j] or (j < m and ok[i][j + 1])
        else:
            for j in range(m - 1, -1, -1):
                ok[i][j] = ok[i + 1][j + 1] and line_mismatch(expected[i], actual[j], rtol) is None
    return ok[0][0]


def compare_output(
    printed: str, sample: list[str], rtol: float, where: str, workdir: Path | None = None
) -> str | None:
    """None when the printed output matches the docs' sample; else a readable report."""
    expected = normalize("\n".join(sample))
    actual = normalize(printed, workdir)
    if match_output(expected, actual, rtol):
        return None
    details = []
    matcher = difflib.SequenceMatcher(a=expected, b=actual, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "replace":
            for e, a in zip(expected[i1:i2], actual[j1:j2], strict=False):
                if e != "...":
                    why = line_mismatch(e, a, rtol)
                    if why:
                        details.append(f"  docs:    {e}\n  printed: {a}\n  ({why})")
                        break
        if details:
            break
    diff = "\n".join(
        list(difflib.unified_diff(expected, actual, "docs sample", "printed", lineterm="", n=1))[
            :80
        ]
    )
    head = f"the output differs from the sample at {where}"
    return "\n".join([head, *details[:1], "normalized diff:", diff])


# --------------------------------------------------------------------------- running


@dataclass
class Run:
    status: int | None  # None: timed out
    stdout: str
    stderr: str
    seconds: float

    def printed(self, expect_failure: bool) -> str:
        """What a sample shows: stdout; for a command documented to fail, stderr first."""
        return self.stderr + self.stdout if expect_failure else self.stdout

    def tail(self, lines: int = 30) -> str:
        parts = [("stdout", self.stdout), ("stderr", self.stderr)]
        return "\n".join(
            f"--- {name} (last {lines} lines):\n" + "\n".join(text.rstrip().split("\n")[-lines:])
            for name, text in parts
            if text.strip()
        )


_RUN_CACHE: dict[tuple[object, ...], Run] = {}


def _tree_state(folder: Path) -> frozenset[tuple[str, int, int]]:
    return frozenset(
        (p.relative_to(folder).as_posix(), p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    )


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env.pop("COLUMNS", None)
    env.pop("FORCE_COLOR", None)
    env["NO_COLOR"] = "1"
    return env


def run_command(command: str, cwd: Path, timeout_s: float) -> Run:
    """One documented command with bash in ``cwd``; a run that times out is killed whole.

    The same command run on the same folder content (the shipped files, untouched) gives the
    same result, so a command documented twice runs once per session.
    """
    key = (command, timeout_s, _tree_state(cwd))
    cached = _RUN_CACHE.get(key)
    if cached is not None:
        return cached
    start = time.perf_counter()
    proc = subprocess.Popen(
        ["bash", "-c", command],
        cwd=cwd,
        env=_environment(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
        status: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        status = None
    run = Run(
        status,
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
        time.perf_counter() - start,
    )
    if status is not None:
        _RUN_CACHE[key] = run
    return run


def copy_shipped(dest: Path) -> None:
    """The shipped files the commands read (not the markdown: no command reads it)."""
    for name in SHIPPED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(
                src,
                dest / name,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.md", "sweep-results"),
            )


def check_block(block: Block, workdir: Path) -> list[str]:
    """Run the block's commands in ``workdir``; the failures, each naming file and line."""
    failures: list[str] = []
    outputs: list[str] = []
    expect_failure = block.exit_status != 0
    for cmd in block.commands:
        if cmd.skip is not None:
            continue
        run = run_command(cmd.text, workdir, block.timeout_s)
        where = f"{block.path}:{cmd.line}: `{cmd.text}`"
        if run.status is None:
            failures.append(f"{where}: no exit after {block.timeout_s:g} s\n{run.tail()}")
            break
        if run.status != block.exit_status:
            failures.append(
                f"{where}: exit status {run.status}, the docs expect {block.exit_status}\n"
                f"{run.tail()}"
            )
            break
        outputs.append(run.printed(expect_failure))
        if cmd.expected is not None:
            report = compare_output(
                run.printed(expect_failure),
                cmd.expected,
                block.rtol,
                f"{block.path}:{cmd.expected_line}",
                workdir,
            )
            if report:
                failures.append(f"{where}: {report}")
    if not failures and block.expected is not None:
        report = compare_output(
            "".join(outputs),
            block.expected,
            block.rtol,
            f"{block.path}:{block.expected_line}",
            workdir,
        )
        if report:
            failures.append(f"{block.path}:{block.line}: {report}")
    return failures


# --------------------------------------------------------------------------- tests

BLOCKS, MARKER_ERRORS = collect()


def _skip_reason(block: Block) -> str | None:
    if block.skip is not None:
        return block.skip
    if block.commands:
        concurrent = CONCURRENT_SKIPS.get((block.path, block.commands[0].text))
        if concurrent is not None:
            return concurrent
    if all(c.skip is not None for c in block.commands):
        return "; ".join(sorted({c.skip for c in block.commands if c.skip}))
    missing = [m for m in block.needs if importlib.util.find_spec(m) is None]
    if missing:
        return f"needs {', '.join(missing)}, not installed here"
    return None


def test_docs_markers_are_well_formed() -> None:
    assert not MARKER_ERRORS, "\n".join(MARKER_ERRORS)


def test_docs_have_command_blocks() -> None:
    assert len(BLOCKS) > 20
    keys = {(b.path, b.commands[0].text) for b in BLOCKS if b.commands}
    stale = [k for k in CONCURRENT_SKIPS if k not in keys]
    assert not stale, f"CONCURRENT_SKIPS names blocks that are gone: {stale}"


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_documented_commands_run(block: Block, tmp_path: Path) -> None:
    reason = _skip_reason(block)
    if reason is not None:
        pytest.skip(f"{block.id}: {reason}")
    copy_shipped(tmp_path)
    failures = check_block(block, tmp_path)
    assert not failures, "\n\n".join(failures)


# --------------------------------------------------------------------------- the checker itself

_SAMPLE = """\
# Title

```sh
schedlab solve x.json --quiet
```

```text
optimal objective=0.769231 bound=0.769231 gap=0 time=0.027s
```

<!-- docs-test: skip (needs a GPU) -->
```console
$ schedlab profile --devices cuda \\
      --out t.json
# a comment
$ schedlab titan explain a.json A B
tasks A + B: may not merge
...
rejected: benefit 0.9524 < 1.1
```
"""


def _iter_errors(text: str) -> Iterator[str]:
    yield from parse_markdown(text, "x.md")[1]


def test_parser_reads_blocks_outputs_and_markers() -> None:
    blocks, errors = parse_markdown(_SAMPLE, "x.md")
    assert errors == []
    sh, console = blocks
    assert [c.text for c in sh.commands] == ["schedlab solve x.json --quiet"]
    assert sh.expected == ["optimal objective=0.769231 bound=0.769231 gap=0 time=0.027s"]
    assert sh.expected_line == 8 and sh.line == 3 and sh.id == "x.md:3"
    assert console.skip == "needs a GPU"
    assert [c.text for c in console.commands] == [
        "schedlab profile --devices cuda --out t.json",
        "schedlab titan explain a.json A B",
    ]
    assert console.commands[0].expected is None
    assert console.commands[1].expected == [
        "tasks A + B: may not merge",
        "...",
        "rejected: benefit 0.9524 < 1.1",
    ]


def test_a_timing_difference_passes_and_a_wrong_number_fails() -> None:
    sample = ["optimal objective=0.769231 bound=0.769231 gap=0 time=0.027s"]
    assert (
        compare_output(
            "optimal objective=0.769231 bound=0.769231 gap=0 time=1.5s\n", sample, 1e-6, "x.md:8"
        )
        is None
    )
    report = compare_output(
        "optimal objective=0.769232 bound=0.769231 gap=0 time=0.027s\n", sample, 1e-6, "x.md:8"
    )
    assert report is not None
    assert "x.md:8" in report and "number 0.769231 in the docs, 0.769232 printed" in report
    # a looser tolerance accepts it; other text never passes
    assert (
        compare_output(
            "optimal objective=0.7693 bound=0.769231 gap=0 time=9s", sample, 0.02, "x.md:8"
        )
        is None
    )
    assert (
        compare_output(
            "feasible objective=0.769231 bound=0.769231 gap=0 time=9s", sample, 0.02, "x.md:8"
        )
        is not None
    )


def test_normalizer_masks_timings_tables_and_paths(tmp_path: Path) -> None:
    table_docs = [
        "┏━━━━━━━━┳━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━┓",
        "┃ policy ┃ avg JCT (h) ┃ solver s/decision ┃",
        "┡━━━━━━━━╇━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━┩",
        "│ fifo   │       31.97 │            0.0006 │",
        "└────────┴─────────────┴───────────────────┘",
        "│ time solve   │ 0.014 s  │",
        f"wrote {tmp_path}/out.json at 2026-12-06 04:59:24",
    ]
    printed = [
        "┏━━━━━━━━┳━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━┓",
        "┃ policy ┃ avg JCT (h) ┃     solver s/decision ┃",
        "┡━━━━━━━━╇━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━┩",
        "│ fifo   │       31.97 │                0.0310 │",
        "└────────┴─────────────┴───────────────────────┘",
        "│ time solve   │ 12.5 s    │",
        f"wrote {tmp_path}/out.json at 2027-01-01 00:00:00",
    ]
    docs = [line.replace(f"{tmp_path}/", "") for line in table_docs]
    assert compare_output("\n".join(printed), docs, 1e-6, "x.md:1", tmp_path) is None
    wrong = [line.replace("31.97", "31.98") for line in printed]
    assert compare_output("\n".join(wrong), docs, 1e-6, "x.md:1", tmp_path) is not None
    # durations are masked only where the line says they are times
    assert normalize("shortest first 20 s, merged 21 s") == ["shortest first 20 s, merged 21 s"]


def test_trailing_comments_are_not_part_of_the_command() -> None:
    assert strip_comment("schedlab tables x --quick   # 1 seed") == "schedlab tables x --quick"
    assert strip_comment("echo 'a # b' \"c # d\" e#f") == "echo 'a # b' \"c # d\" e#f"
    assert strip_comment("# only a comment") == ""


def test_ellipsis_lines_match_any_lines() -> None:
    assert match_output(["a", "...", "d"], ["a", "b", "c", "d"], 1e-6)
    assert match_output(["a", "...", "d"], ["a", "d"], 1e-6)
    assert not match_output(["a", "...", "d"], ["a", "b"], 1e-6)
    assert not match_output(["a", "b"], ["a", "b", "c"], 1e-6)


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("<!-- docs-test: skip -->", "needs a reason"),
        ("<!-- docs-test: skip () -->", "needs a reason"),
        ('<!-- docs-test: skip-command "solve" -->', "needs a reason"),
        ('<!-- docs-test: skip-command "nothing" (why) -->', "matches 0 commands"),
        ("<!-- docs-test: rtol 0.02 -->", "needs a reason"),
        ("<!-- docs-test: sikp (typo) -->", "unknown docs-test marker"),
        ("<!-- docs-test: exit two -->", "malformed"),
    ],
)
def test_bad_markers_fail(marker: str, message: str) -> None:
    text = f"{marker}\n```sh\nschedlab solve x.json\n```\n"
    errors = list(_iter_errors(text))
    assert len(errors) == 1 and message in errors[0] and errors[0].startswith("x.md:1:")


def test_markers_must_sit_on_a_command_block() -> None:
    assert "not right before" in next(
        _iter_errors("<!-- docs-test: skip (x) -->\n\n```sh\nschedlab x\n```\n")
    )
    assert "before a ```text block" in next(
        _iter_errors("<!-- docs-test: skip (x) -->\n```text\nout\n```\n")
    )
    assert "untagged fenced block" in next(_iter_errors("```\nschedlab solve x.json\n```\n"))
    blocks, errors = parse_markdown(
        '<!-- docs-test: skip-command "tables" (slow) -->\n<!-- docs-test: exit 2 -->\n'
        "```sh\nschedlab tables x\nschedlab validate bad.json\n```\n",
        "x.md",
    )
    assert errors == [] and blocks[0].exit_status == 2
    assert [c.skip for c in blocks[0].commands] == ["slow", None]
    (block,), errors = parse_markdown(
        "<!-- docs-test: needs torch, no_such_module_here -->\n```sh\nschedlab profile\n```\n",
        "x.md",
    )
    assert errors == [] and block.needs == ["torch", "no_such_module_here"]
    assert _skip_reason(block) == "needs no_such_module_here, not installed here"


def test_check_block_reports_status_and_output(tmp_path: Path) -> None:
    text = (
        "```console\n$ echo 'objective 1.5' && echo 'time 0.01 s'\nobjective 1.5\ntime 9 s\n```\n"
        "```sh\nexit 3\n```\n"
    )
    (ok, failing), errors = parse_markdown(text, "x.md")
    assert errors == []
    assert check_block(ok, tmp_path) == []
    ok.commands[0].expected = ["objective 2.5", "time 9 s"]
    (failure,) = check_block(ok, tmp_path)
    assert failure.startswith("x.md:2: `echo") and "number 2.5 in the docs, 1.5 printed" in failure
    (failure,) = check_block(failing, tmp_path)
    assert "x.md:7: `exit 3`: exit status 3, the docs expect 0" in failure
