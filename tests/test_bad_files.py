"""Bad input files: exactly one ``error: <file>: ...`` line and exit 2, never a traceback.

The fuzz test mutates the shipped instances (seeded) and runs ``schedlab validate`` on each
mutant in-process; the other tests cover each reader and the CLI's other printing paths.
"""

from __future__ import annotations

import gzip
import json
import logging
import math
import random
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from schedlab.cli import main
from schedlab.documents import MAX_NESTING, MAX_NUMBER_CHARS

INSTANCES = sorted(p for p in (Path(__file__).parent.parent / "instances").rglob("*")
                   if p.is_file() and p.stat().st_size < 100_000)
log = logging.getLogger(__name__)

MUTANTS = 200
SEED = 20240611


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    code = main(list(argv))
    err = capsys.readouterr().err
    return code, [line for line in err.splitlines() if line.strip()]


def _assert_one_error_line(code: int, lines: list[str], file: Path | str) -> None:
    assert code == 2, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: {file}"), lines
    assert "internal error" not in lines[0] and "Traceback" not in lines[0]


# ------------------------------------------------------------------------------- mutants


def _text(path: Path) -> bytes:
    raw = path.read_bytes()
    return gzip.decompress(raw) if path.suffix == ".gz" else raw


def _truncate(raw: bytes, rng: random.Random) -> bytes:
    return raw[: rng.randrange(len(raw))]


def _deep_nesting(raw: bytes, rng: random.Random) -> bytes:
    depth = rng.choice([MAX_NESTING + 1, 5_000, 200_000])
    at = raw.find(b":", rng.randrange(len(raw))) + 1 or 1
    return raw[:at] + b"[" * depth + b"1" + b"]" * depth + _skip_value(raw, at)


def _skip_value(raw: bytes, at: int) -> bytes:
    """The rest of ``raw`` after the scalar (or not) that starts at ``at``, roughly."""
    end = at
    while end < len(raw) and raw[end:end + 1] not in b",}]\n":
        end += 1
    return raw[end:]


def _huge_literal(raw: bytes, rng: random.Random) -> bytes:
    digits = "".join(rng.choice("0123456789") for _ in range(rng.choice([5_000, 200])))
    literal = rng.choice(["1" + digits, "-1" + digits, "1." + digits, "1e" + digits, "1" + digits
                          + ".5e-3"]).encode()
    at = raw.find(b":", rng.randrange(len(raw))) + 1 or 1
    return raw[:at] + b" " + literal + _skip_value(raw, at)


def _bad_bytes(raw: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(raw))
    junk = rng.choice([b"\xff\xfe", b"\xc3\x28", b"\x00", b"\xed\xa0\x80", b"\x80" * 3])
    return raw[:at] + junk + raw[at:]


def _flip_bytes(raw: bytes, rng: random.Random) -> bytes:
    data = bytearray(raw)
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data)


WRONG_VALUES: list[Any] = [None, True, "x", -1, 0, 1e308, -1e308, 10**30, [], {}, [1, "a"],
                           {"a": None}, "NaN", 2**63, 0.5]


def _wrong_type(raw: bytes, rng: random.Random) -> bytes:
    try:
        doc = json.loads(raw)
    except ValueError:
        return _truncate(raw, rng)
    nodes: list[tuple[Any, Any]] = []
    stack: list[Any] = [doc]
    while stack:
        node = stack.pop()
        keys = list(node) if isinstance(node, dict) else range(len(node))
        for key in keys:
            nodes.append((node, key))
            if isinstance(node[key], dict | list):
                stack.append(node[key])
    for _ in range(rng.randint(1, 3)):
        parent, key = rng.choice(nodes)
        parent[key] = rng.choice(WRONG_VALUES)
    return json.dumps(doc).encode()


def _non_finite(raw: bytes, rng: random.Random) -> bytes:
    at = raw.find(b":", rng.randrange(len(raw))) + 1 or 1
    literal = rng.choice([b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1e999"])
    return raw[:at] + b" " + literal + _skip_value(raw, at)


TEXT_MUTATIONS: list[Callable[[bytes, random.Random], bytes]] = [
    _truncate, _deep_nesting, _huge_literal, _bad_bytes, _flip_bytes, _wrong_type, _non_finite,
]


def _mutants(tmp: Path) -> list[Path]:
    rng = random.Random(SEED)
    out = []
    for i in range(MUTANTS):
        source = rng.choice(INSTANCES)
        raw = _text(source)
        mutate = rng.choice(TEXT_MUTATIONS)
        data = mutate(raw, rng)
        suffix = ".yaml" if source.suffix in (".yaml", ".yml") else ".json"
        if source.suffix == ".gz" or rng.random() < 0.15:
            packed = gzip.compress(data, mtime=0)
            if rng.random() < 0.5:  # a truncated or corrupted archive
                cut = rng.randrange(1, len(packed))
                packed = packed[:cut] if rng.random() < 0.5 else (
                    packed[:cut] + bytes([packed[cut] ^ 0x5A]) + packed[cut + 1:])
            data, suffix = packed, suffix + ".gz"
        path = tmp / f"m{i:03d}-{mutate.__name__.strip('_')}-{source.stem}{suffix}"
        path.write_bytes(data)
        out.append(path)
    return out


def test_fuzzed_instances_give_one_line_or_pass(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    start = time.perf_counter()
    outcomes = {"ok": 0, "error": 0}
    failures = []
    for path in _mutants(tmp_path):
        code, lines = _run(capsys, "validate", "-q", str(path))
        if code == 0 and not lines:
            outcomes["ok"] += 1
            # a mutant that still validates must also solve or be refused in one line
            code, lines = _run(capsys, "solve", "-q", "--time-limit", "5", str(path))
            if code == 0 or (code == 2 and len(lines) == 1
                             and lines[0].startswith(f"error: {path}")):
                continue
            failures.append(f"solve {path.name}: exit {code}: {lines[:3]}")
        elif (code == 2 and len(lines) == 1 and lines[0].startswith(f"error: {path}")
              and "internal error" not in lines[0]):
            outcomes["error"] += 1
        else:
            failures.append(f"{path.name}: exit {code}: {lines[:3]}")
    assert not failures, "\n".join(failures)
    assert outcomes["error"] > MUTANTS // 2  # the mutations do break most files
    log.info("%d mutants: %d valid, %d one-line errors, 0 internal errors, %.1f s", MUTANTS,
             outcomes["ok"], outcomes["error"], time.perf_counter() - start)


# ------------------------------------------------------------------------------- readers

SMALL = Path(__file__).parent.parent / "instances" / "gavel" / "small-6jobs.json"


@pytest.mark.parametrize(("name", "data", "fragment"), [
    ("deep.json", b'{"jobs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nest deeper"),
    ("deep-but-parsable.json", b'{"jobs": ' + b"[" * 200 + b"]" * 200 + b"}", "nest deeper"),
    ("deep.yaml", b"jobs: " + b"[" * 5_000 + b"]" * 5_000 + b"\n", "nest deeper"),
    ("huge.json", b'{"jobs": [], "cluster": ' + b"7" * 5_000 + b"}", "number literal"),
    ("huge.yaml", b"cluster: " + b"7" * 5_000 + b"\n", "invalid YAML value"),
    ("latin1.json", b'{"name": "caf\xe9"}', "not UTF-8 text (byte 0xe9 at line 1)"),
    ("blank.json", b"  \n", "file is empty"),
    ("broken.json", b'{"jobs": [1,\n 2', "line 2 column 3: invalid JSON"),
])
def test_a_bad_instance_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         name: str, data: bytes, fragment: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    code, lines = _run(capsys, "validate", str(path))
    _assert_one_error_line(code, lines, path)
    assert fragment in lines[0]


def test_a_long_digit_run_inside_a_string_is_fine(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(SMALL.read_text(encoding="utf-8"))
    doc["description"] = "7" * (MAX_NUMBER_CHARS * 3)
    path = tmp_path / "digits.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert _run(capsys, "validate", "-q", str(path)) == (0, [])


@pytest.mark.parametrize("damage", ["truncated", "corrupt", "not gzip"])
@pytest.mark.parametrize("command", [["solve"], ["validate"], ["check"],
                                     ["simulate", "--policy", "fifo", "--workload"]])
def test_a_bad_gzip_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     damage: str, command: list[str]) -> None:
    packed = gzip.compress(SMALL.read_bytes(), mtime=0)
    if damage == "truncated":
        packed = packed[: len(packed) // 2]
    elif damage == "corrupt":
        packed = packed[:-8] + bytes(8)  # CRC and length of the original zeroed
    else:
        packed = SMALL.read_bytes()
    path = tmp_path / "bad.json.gz"
    path.write_bytes(packed)
    argv = [*command, str(path)] + ([str(path)] if command == ["check"] else [])
    code, lines = _run(capsys, *argv)
    _assert_one_error_line(code, lines, path)
    assert "not a valid gzip file" in lines[0]


def test_a_sweep_file_with_bad_bytes_is_one_line(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_bytes(b"policies: [fifo]\nworkloads: [\xff\xfe]\n")
    code, lines = _run(capsys, "sweep", str(path))
    _assert_one_error_line(code, lines, path)
    assert "not UTF-8 text (byte 0xff at line 2)" in lines[0]


# ---------------------------------------------------------------- solve: writing, defaults


def test_an_infinite_objective_is_written_as_null_with_the_reason(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import schedlab.api
    from schedlab.solution import InstanceRef, Solution, Status, load_solution

    def stopped(instance: Any, formulation: str, **_: Any) -> Solution:
        # gavel.min_makespan stopped at a tiny time limit before any finite allocation
        return Solution(instance=InstanceRef(name=instance.name, hash=instance.content_hash()),
                        formulation=formulation, status=Status.TIME_LIMIT,
                        objective=math.inf, metrics={"makespan_s": math.inf, "jobs": 6})

    monkeypatch.setattr(schedlab.api, "solve", stopped)
    out = tmp_path / "solution.json"
    code = main(["solve", str(SMALL), "-f", "gavel.min_makespan", "-q", "--out", str(out)])
    assert "error" not in capsys.readouterr().err
    assert code == 0
    written = load_solution(out)
    assert written.objective is None and written.metrics["makespan_s"] is None
    assert written.metrics["jobs"] == 6
    assert any("objective inf" in d and "time_limit" in d for d in written.diagnostics)


def test_solve_without_formulation_names_the_formulations_that_accept_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    file = "instances/saturn/three-jobs.json"
    code, lines = _run(capsys, "solve", file)
    _assert_one_error_line(code, lines, file)
    assert "needs 'throughput'" in lines[0]
    assert "saturn.disjunctive" in lines[0] and "gavel." not in lines[0].split("accepts it")[1]


def test_solve_without_formulation_still_defaults_to_gavel(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", "-q", str(SMALL)]) == 0
    assert capsys.readouterr().out.startswith("optimal")


# ------------------------------------------------------------------- text is never markup


def test_profiler_report_prints_brackets_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    from schedlab.cli.profile import _report

    reason = "gloo: connect [/tmp/rendezvous] failed [bold]"
    cell = SimpleNamespace(key="resnet50@64 solo v100", status="error", reason=reason,
                           kind="solo")
    _report(SimpleNamespace(measured=[cell], skipped=0), Path("[/out].json"))
    out = capsys.readouterr().out
    assert reason in out and "[/out].json" in out


def test_solve_tables_print_brackets_as_text(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(SMALL.read_text(encoding="utf-8"))
    doc["name"] = "tricky [/name] [red]"
    doc["jobs"][0]["id"] = "job [/x]"
    path = tmp_path / "tricky.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert main(["solve", "-f", "gavel.max_min_fairness", str(path)]) == 0
    out = capsys.readouterr().out
    assert "tricky [/name] [red]" in out and "job [/x]" in out


# ----------------------------------------------------------------------- titan's WordNet


def test_a_wordnet_folder_without_index_sense_is_one_input_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    from schedlab.errors import InputError
    from schedlab.world.concept_hierarchy import nltk_synset_source

    class IncompleteWordNet:  # NLTK's reader opening a file the folder lacks
        def get_version(self) -> str:
            raise FileNotFoundError(2, "No such file or directory",
                                    "/data/corpora/wordnet/index.sense")

    corpus = types.ModuleType("nltk.corpus")
    corpus.wordnet = IncompleteWordNet()  # type: ignore[attr-defined]
    reader = types.ModuleType("nltk.corpus.reader.wordnet")
    reader.WordNetError = type("WordNetError", (Exception,), {})  # type: ignore[attr-defined]
    for name, module in [("nltk", types.ModuleType("nltk")), ("nltk.corpus", corpus),
                         ("nltk.corpus.reader", types.ModuleType("nltk.corpus.reader")),
                         ("nltk.corpus.reader.wordnet", reader)]:
        monkeypatch.setitem(sys.modules, name, module)
    with pytest.raises(InputError) as info:
        nltk_synset_source("zebra.n.01")
    message = str(info.value)
    assert "index.sense" in message and "schedlab[wordnet]" in message and "\n" not in message
