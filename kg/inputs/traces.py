"""Streaming readers for LLM serving request traces.

Two public formats are read, one line at a time (memory does not grow with the number of lines):

- **Mooncake JSONL** (kvcache-ai/Mooncake, ``FAST25-release/traces/*.jsonl``): one JSON object
  per line with ``timestamp`` (ms since the trace start), ``input_length`` and ``output_length``
  (tokens) and ``hash_ids``: one id per ``block_size``-token block of the prompt (512 in the
  published traces), remapped from a chained hash, so an id stands for the block *and its whole
  prefix*; the last id may cover a partial block. ``len(hash_ids)`` must equal
  ``ceil(input_length / block_size)``. Extra fields are ignored.
- **Azure LLM inference CSV** (Azure/AzurePublicDataset ``AzureLLMInferenceTrace_{code,conv}.csv``):
  header ``TIMESTAMP,ContextTokens,GeneratedTokens``; the timestamp is a date-time such as
  ``2023-11-16 18:17:03.9799600`` (up to 7 fractional digits, optional UTC offset). Token
  counts only: no prefix information.

Every bad line raises ``OptkgError`` naming ``file:line`` and what was expected (a line that is
not JSON, a missing field, a negative length, a hash list that does not match the length, an
empty file). Blank lines are skipped.
"""
from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Callable, Iterator

from kg.core.errors import OptkgError

MOONCAKE_BLOCK_SIZE = 512          # tokens per hash id in the published Mooncake traces (FAST25-release/README.md)
MAX_LINE_BYTES = 64 * 1024 * 1024  # one line longer than this is refused (keeps memory bounded)
TRACE_FORMATS = ("mooncake", "azure")
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
MOONCAKE_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


@dataclass(frozen=True, slots=True)
class Request:
    """One request of a trace.

    line: 1-based line number in the file; timestamp_ms: arrival time in milliseconds (Mooncake:
    as written; Azure: milliseconds since 1970-01-01 UTC; only differences are used);
    input_length / output_length: prompt and generated tokens; hash_ids: prefix-block ids
    (Mooncake) or None when the format carries no prefix information (Azure).
    """

    line: int
    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...] | None = None


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, decoded text without the newline) for each line; UTF-8 errors name their line."""
    import stat
    try:
        if stat.S_ISFIFO(path.stat().st_mode) or stat.S_ISSOCK(path.stat().st_mode):
            raise OptkgError(f"{path}: is a named pipe (FIFO) or socket, not a trace file; optkg reads only files "
                             "(it would wait forever)")
    except OSError:
        pass  # reported by open() below
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        raise OptkgError(f"{path}: no such trace file") from None
    except IsADirectoryError:
        raise OptkgError(f"{path}: is a folder, expected a trace file (.jsonl or .csv)") from None
    except OSError as e:
        raise OptkgError(f"{path}: cannot read ({e.strerror})") from None
    with fh:
        n = 0
        while True:
            raw = fh.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            n += 1
            if len(raw) > MAX_LINE_BYTES:
                raise OptkgError(f"{path}:{n}: line is longer than {MAX_LINE_BYTES} bytes")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise OptkgError(f"{path}:{n}: not UTF-8 text (byte {e.start + 1} of the line)") from None
            if n == 1 and text.startswith("\ufeff"):
                text = text[1:]
            yield n, text.rstrip("\r\n")


def detect_format(path: Path | str) -> str:
    """'mooncake' when the first non-blank line starts with ``{``, 'azure' when it is the CSV header.

    Raises OptkgError for an empty file or an unrecognised first line.
    """
    p = Path(path)
    for n, text in _lines(p):
        s = text.strip()
        if not s:
            continue
        if s.startswith("{"):
            return "mooncake"
        head = [c.strip().lower() for c in s.split(",")]
        if all(c.lower() in head for c in AZURE_COLUMNS):
            return "azure"
        raise OptkgError(f"{p}:{n}: cannot tell the trace format: expected a Mooncake JSON object line "
                         f"({{\"timestamp\": ..., \"input_length\": ..., \"output_length\": ..., \"hash_ids\": [...]}}) "
                         f"or the Azure CSV header {','.join(AZURE_COLUMNS)}; pass --trace-format")
    raise OptkgError(f"{p}:1: empty trace file (no requests)")


MAX_TOKENS = 2**40  # per request: far past any context window; larger is a broken trace, refused (bounded work)


def _nonneg_int(v: object, name: str, where: str) -> int:
    from kg.core.numparse import show
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer() and abs(v) <= MAX_TOKENS:
            v = int(v)
        elif isinstance(v, float) and v.is_integer():
            raise OptkgError(f"{where}: '{name}' is {v!r}; optkg reads at most {MAX_TOKENS:,} tokens per request")
        else:
            raise OptkgError(f"{where}: '{name}' must be a non-negative integer, found {show(v)}")
    if v < 0:
        raise OptkgError(f"{where}: '{name}' must be a non-negative integer, found {show(v)}")
    if v > MAX_TOKENS:
        raise OptkgError(f"{where}: '{name}' is {show(v)}; optkg reads at most {MAX_TOKENS:,} tokens per request")
    return v


def _json_line(text: str, where: str) -> object:
    from kg.core.numparse import MAX_JSON_DEPTH, depth_ok
    if not depth_ok(text, MAX_JSON_DEPTH):
        raise OptkgError(f"{where}: JSON nested deeper than {MAX_JSON_DEPTH} levels; each line must be one request object")
    try:  # no parse_int hook (a Python call per integer is 30 % slower); an over-4,300-digit int raises ValueError
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise OptkgError(f"{where}: not a JSON object ({e.msg} at column {e.colno}); "
                         f"each line must be one request object") from None
    except (ValueError, RecursionError) as e:
        raise OptkgError(f"{where}: invalid JSON value ({e})") from None


def read_mooncake(path: Path | str, block_size: int = MOONCAKE_BLOCK_SIZE) -> Iterator[Request]:
    """Yield the requests of a Mooncake JSONL trace (see module doc). Raises OptkgError at the first bad line."""
    p = Path(path)
    seen = False
    for n, text in _lines(p):
        if not text.strip():
            continue
        where = f"{p}:{n}"
        d = _json_line(text, where)
        if not isinstance(d, dict):
            raise OptkgError(f"{where}: expected a JSON object per line, found {type(d).__name__}")
        missing = [f for f in MOONCAKE_FIELDS if f not in d]
        if missing:
            raise OptkgError(f"{where}: missing field(s) {', '.join(repr(m) for m in missing)} "
                             f"(a Mooncake request needs {', '.join(MOONCAKE_FIELDS)})")
        ts = d["timestamp"]
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts) or ts < 0:
            raise OptkgError(f"{where}: 'timestamp' must be a non-negative number of milliseconds, found {ts!r}")
        inp = _nonneg_int(d["input_length"], "input_length", where)
        out = _nonneg_int(d["output_length"], "output_length", where)
        ids = d["hash_ids"]
        if not isinstance(ids, list):
            raise OptkgError(f"{where}: 'hash_ids' must be a list of block ids, found {type(ids).__name__}")
        for i, h in enumerate(ids):
            if isinstance(h, bool) or not isinstance(h, int) or h < 0:
                raise OptkgError(f"{where}: hash_ids[{i}] must be a non-negative integer block id, found {h!r}")
        need = -(-inp // block_size)
        if len(ids) != need:
            raise OptkgError(f"{where}: hash_ids has {len(ids)} block id(s) but input_length {inp} needs "
                             f"ceil({inp}/{block_size}) = {need} blocks of {block_size} tokens "
                             f"(pass --block-size if the trace uses another block size)")
        seen = True
        yield Request(n, float(ts), inp, out, tuple(ids))
    if not seen:
        raise OptkgError(f"{p}:1: empty trace file (no requests)")


_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_TS = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?\s*(Z|[+-]\d{2}:?\d{2})?$")


def parse_timestamp_ms(text: str) -> float:
    """``YYYY-MM-DD HH:MM:SS[.fffffff][Z|+HH:MM]`` -> milliseconds since 1970-01-01 UTC (no offset = UTC).

    A float: about 0.0002 ms resolution for present-day dates. Raises ValueError."""
    m = _TS.match(text.strip())
    if not m:
        raise ValueError(text)
    y, mo, d, hh, mm, ss, frac, tz = m.groups()
    days = date(int(y), int(mo), int(d)).toordinal() - _EPOCH_ORDINAL
    if not (int(hh) < 24 and int(mm) < 60 and int(ss) < 61):
        raise ValueError(text)
    secs = days * 86400 + int(hh) * 3600 + int(mm) * 60 + int(ss)
    if tz and tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        tzd = tz[1:].replace(":", "")
        if int(tzd[:2]) > 14 or int(tzd[2:]) > 59:  # real UTC offsets run from -12:00 to +14:00
            raise ValueError(text)
        secs -= sign * (int(tzd[:2]) * 3600 + int(tzd[2:]) * 60)
    ms = secs * 1000.0
    if frac:
        ms += int(frac) / 10 ** (len(frac) - 3)
    return ms


def read_azure(path: Path | str, block_size: int | None = None) -> Iterator[Request]:
    """Yield the requests of an Azure LLM inference CSV (see module doc). Raises OptkgError at the first bad line.

    ``block_size`` is accepted for a uniform reader signature and ignored (no prefix blocks).
    """
    p = Path(path)
    cols: dict[str, int] | None = None
    seen = False
    for n, text in _lines(p):
        if not text.strip():
            continue
        try:
            row = next(csv.reader([text]))
        except csv.Error as e:
            raise OptkgError(f"{p}:{n}: not a CSV row ({e})") from None
        if cols is None:
            header = [c.strip() for c in row]
            lower = [c.lower() for c in header]
            missing = [c for c in AZURE_COLUMNS if c.lower() not in lower]
            if missing:
                raise OptkgError(f"{p}:{n}: the CSV header lacks column(s) {', '.join(missing)} "
                                 f"(expected {','.join(AZURE_COLUMNS)}; found {','.join(header)})")
            cols = {c: lower.index(c.lower()) for c in AZURE_COLUMNS}
            width = len(header)
            continue
        if len(row) != width:
            raise OptkgError(f"{p}:{n}: expected {width} comma-separated fields ({','.join(AZURE_COLUMNS)}), found {len(row)}")
        ts_text = row[cols["TIMESTAMP"]]
        try:
            ts = parse_timestamp_ms(ts_text)
        except ValueError:
            raise OptkgError(f"{p}:{n}: TIMESTAMP {ts_text!r} is not a date-time like 2023-11-16 18:17:03.9799600") from None
        vals = []
        for c in ("ContextTokens", "GeneratedTokens"):
            s = row[cols[c]].strip()
            try:
                v = int(s)
            except ValueError:
                raise OptkgError(f"{p}:{n}: {c} must be a non-negative integer, found {s!r}") from None
            if v < 0:
                raise OptkgError(f"{p}:{n}: {c} must be a non-negative integer, found {v}")
            vals.append(_nonneg_int(v, c, f"{p}:{n}"))
        seen = True
        yield Request(n, ts, vals[0], vals[1], None)
    if cols is None:
        raise OptkgError(f"{p}:1: empty trace file (no requests)")
    if not seen:
        raise OptkgError(f"{p}:2: no requests after the CSV header")


READERS: dict[str, Callable[..., Iterator[Request]]] = {"mooncake": read_mooncake, "azure": read_azure}


def iter_trace(path: Path | str, fmt: str = "auto", block_size: int = MOONCAKE_BLOCK_SIZE) -> Iterator[Request]:
    """Stream the requests of ``path`` in file order. ``fmt``: 'auto' (detect), 'mooncake' or 'azure'."""
    p = Path(path)
    if fmt == "auto":
        fmt = detect_format(p)
    if fmt not in READERS:
        raise OptkgError(f"--trace-format: unknown format '{fmt}' (expected auto, {', '.join(TRACE_FORMATS)})")
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise OptkgError(f"--block-size: expected a positive integer, found {block_size!r}")
    return READERS[fmt](p, block_size)


def truncation_note(path: Path | str, fmt: str) -> str | None:
    """A warning note when an Azure CSV looks cut: its last row has no line ending while earlier rows have one.

    A row cut inside its last field (GeneratedTokens) still parses, so the missing line ending is the
    only sign left. The published AzureLLMInferenceTrace_code.csv also ends without one, so the note
    says "may". None for Mooncake JSONL (a cut JSON line does not parse), a single-line file, or a
    file that ends with a newline.
    """
    if fmt != "azure":
        return None
    p = Path(path)
    newlines = 0
    last = b""
    with p.open("rb") as fh:
        while True:
            chunk = fh.read(1 << 20)
            if not chunk:
                break
            newlines += chunk.count(b"\n")
            last = chunk
    if not last or last.endswith(b"\n") or newlines == 0:
        return None
    return (f"warning: {p}:{newlines + 1}: the last row has no line ending while the earlier rows have one: "
            "the file may be truncated (a row cut inside GeneratedTokens still parses); compare the row count "
            "with the source (the published Azure code trace also ends without a line ending)")
