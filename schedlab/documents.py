"""Bounded readers for user files: bytes (``.gz`` accepted), UTF-8 text, JSON and YAML.

Every reader of an instance, solution, throughput, trace or sweep file goes through here, so
that a bad file is one :class:`~schedlab.errors.InputError` naming the file (the CLI prints
``error: <file>: <reason>`` and exits 2), never a traceback.  The bounds:

* a file (and a ``.gz`` file once decompressed) holds at most :data:`MAX_FILE_BYTES` bytes;
  a truncated or corrupt ``.gz`` is an error, not an ``EOFError`` or ``zlib.error``;
* the text is UTF-8 (a leading byte-order mark is dropped);
* arrays and objects nest at most :data:`MAX_NESTING` deep (a schedlab file needs about 6);
* one number literal has at most :data:`MAX_NUMBER_CHARS` characters (a 5 000-digit integer
  would otherwise cost a quadratic conversion, or raise ``ValueError`` past Python's limit).
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from pathlib import Path
from typing import Any

import yaml

from schedlab.errors import InputError

#: Largest file read, in bytes (after decompression for ``.gz``).
MAX_FILE_BYTES = 512 * 1024 * 1024
#: Deepest nesting of arrays and objects accepted in a JSON or YAML document.
MAX_NESTING = 64
#: Longest number literal accepted, in characters (digits, sign, point and exponent).
MAX_NUMBER_CHARS = 100

#: A run of digits longer than any accepted literal; only then are literals checked one by one.
_LONG_DIGITS = re.compile(rf"[0-9]{{{MAX_NUMBER_CHARS + 1},}}")


def read_bytes(path: str | Path) -> bytes:
    """The bytes of ``path`` (decompressed when it ends in ``.gz``), within the bounds."""
    p = Path(path)
    try:
        if not p.exists():
            raise InputError("no such file", file=str(p))
        if p.is_dir():
            raise InputError("is a directory, not a file", file=str(p))
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InputError(f"file of {size} bytes exceeds the limit {MAX_FILE_BYTES}",
                             file=str(p))
        if p.suffix.lower() != ".gz":
            return p.read_bytes()
        with gzip.open(p, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)  # bounded: a small .gz may inflate enormously
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        reason = "truncated" if isinstance(exc, EOFError) else "corrupt"
        raise InputError(f"not a valid gzip file ({reason}: {exc})", file=str(p)) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(p)) from None
    if len(raw) > MAX_FILE_BYTES:
        raise InputError(f"decompressed size exceeds the limit {MAX_FILE_BYTES} bytes",
                         file=str(p))
    return raw


def decode_text(raw: bytes, file: str) -> str:
    """``raw`` as UTF-8 text (a byte-order mark dropped); an error names the first bad byte."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at line {line})",
                         file=file) from None


def read_text(path: str | Path) -> str:
    """:func:`read_bytes` decoded by :func:`decode_text`."""
    return decode_text(read_bytes(path), str(path))


def _number_hook(convert: type[int] | type[float], file: str) -> Any:
    def parse(literal: str) -> int | float:
        if len(literal) > MAX_NUMBER_CHARS:
            raise InputError(f"a number literal of {len(literal)} characters exceeds the "
                             f"limit {MAX_NUMBER_CHARS} ({literal[:20]}...)", file=file)
        return convert(literal)

    return parse


def parse_json(text: str, file: str) -> Any:
    """The JSON document ``text`` of ``file``, within the nesting and literal bounds."""
    hooks: dict[str, Any] = {}
    if _LONG_DIGITS.search(text):
        # slow path only for a suspect file: the C scanner calls the hooks per literal
        hooks = {"parse_int": _number_hook(int, file), "parse_float": _number_hook(float, file)}
    try:
        data = json.loads(text, **hooks)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", file=file,
                         field=f"line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise _too_deep(file) from None
    except ValueError as exc:  # e.g. Python's int-conversion digit limit
        raise InputError(f"invalid JSON: {exc}", file=file) from None
    check_nesting(data, file)
    return data


def parse_yaml(text: str, file: str) -> Any:
    """The YAML document ``text`` of ``file`` (safe loader), within the nesting bound."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else None
        problem = getattr(exc, "problem", None) or exc
        raise InputError(f"invalid YAML: {problem}", file=file, field=where) from None
    except RecursionError:
        raise _too_deep(file) from None
    except (ValueError, OverflowError) as exc:  # e.g. a 5 000-digit integer or a bad date
        raise InputError(f"invalid YAML value: {exc}", file=file) from None
    check_nesting(data, file)
    return data


def check_nesting(data: Any, file: str) -> None:
    """Raise unless arrays and objects in ``data`` nest at most :data:`MAX_NESTING` deep.

    Level by level, no recursion of its own; visits every container once (a parsed document
    holds plain dicts and lists only).
    """
    level = [data] if isinstance(data, dict | list) else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_NESTING:
            raise _too_deep(file)
        below: list[Any] = []
        for node in level:
            values = node.values() if type(node) is dict else node
            below.extend([v for v in values if type(v) is dict or type(v) is list])
        level = below


def _too_deep(file: str) -> InputError:
    return InputError(f"arrays and objects nest deeper than the limit {MAX_NESTING}", file=file)


def read_document(path: str | Path) -> Any:
    """Read a JSON or YAML file (format by suffix; ``.gz`` accepted) with safe, bounded
    loaders; every error names the file."""
    p = Path(path)
    raw = read_bytes(p)
    if not raw.strip():
        raise InputError("file is empty", file=str(p))
    text = decode_text(raw, str(p))
    inner = p.with_suffix("") if p.suffix.lower() == ".gz" else p
    if inner.suffix.lower() in {".yaml", ".yml"}:
        return parse_yaml(text, str(p))
    return parse_json(text, str(p))
