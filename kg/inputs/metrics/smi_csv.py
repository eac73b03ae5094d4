"""``nvidia-smi --query-gpu=... --format=csv`` output, mapped through ``SMI_FIELDS``.
"""
from __future__ import annotations

import csv
import io
import re

from kg.inputs.metrics.snapshot import (DEVICE_SOURCE_RANK, Device, InvalidReading, Source, _Part, _err,
                                        invalid_reason)


# nvidia-smi --query-gpu field -> (reading, unit the value carries, scale to the reading's unit, priority)
SMI_FIELDS: dict[str, tuple[str, str, float, int]] = {
    "utilization.gpu": ("gpu_util", "%", 0.01, 0),
    "utilization.memory": ("mem_copy_util", "%", 0.01, 0),
    "utilization.encoder": ("encoder_util", "%", 0.01, 0),
    "utilization.decoder": ("decoder_util", "%", 0.01, 0),
    "memory.used": ("fb_used_mib", "MiB", 1.0, 0),
    "memory.free": ("fb_free_mib", "MiB", 1.0, 0),
    "memory.total": ("fb_total_mib", "MiB", 1.0, 0),
    "memory.reserved": ("fb_reserved_mib", "MiB", 1.0, 0),
    "power.draw": ("power_w", "W", 1.0, 0),
    "power.draw.average": ("power_w", "W", 1.0, 1),
    "power.draw.instant": ("power_w", "W", 1.0, 2),
    "enforced.power.limit": ("power_limit_w", "W", 1.0, 0),
    "power.limit": ("power_limit_w", "W", 1.0, 1),
    "clocks.sm": ("sm_clock_mhz", "MHz", 1.0, 0),
    "clocks.current.sm": ("sm_clock_mhz", "MHz", 1.0, 0),
}
SMI_IDENTITY = ("index", "name", "uuid", "timestamp")
SMI_UNITS = {"%": 1.0, "MiB": 1.0, "GiB": 1024.0, "KiB": 1 / 1024, "W": 1.0, "MHz": 1.0, "GHz": 1000.0}


# ---------------------------------------------------------------------------------------------
# nvidia-smi --query-gpu CSV

def _smi_name(header: str) -> str:
    """``utilization.gpu [%]`` -> ``utilization.gpu``. Linear time (the regex ``\\s*\\[.*\\]\\s*$`` it
    replaces was quadratic on a 200 KB header cell of spaces)."""
    h = header.strip()
    i = h.find("[")
    return h[:i].rstrip() if i >= 0 and h.endswith("]") else h


def _smi_unit(header: str) -> str | None:
    """``utilization.gpu [%]`` -> ``%`` (None without a bracketed unit). Linear time."""
    h = header.strip()
    i = h.find("[")
    return h[i + 1:-1] if i >= 0 and h.endswith("]") else None


_NA = re.compile(r"^\[?(N/A|Not Supported|Unknown Error|Insufficient Permissions|Requested functionality has been deprecated)\]?$", re.I)


def _smi_number(raw: str, unit: str, path: str, line: int, column: str) -> float | None:
    v = raw.strip()
    if not v or _NA.match(v):
        return None
    m = re.fullmatch(r"([-+]?(?:\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|nan|inf|infinity))\s*([A-Za-z%]*)", v, re.I)
    if not m:
        raise _err(path, line, f"column '{column}': expected a number in {unit}, found {v!r}")
    num, u = float(m.group(1)), m.group(2)
    if u and u != unit:
        if u not in SMI_UNITS or unit not in SMI_UNITS:
            raise _err(path, line, f"column '{column}': expected {unit}, found {v!r}")
        num = num * SMI_UNITS[u] / SMI_UNITS[unit]
    return num


def _parse_smi_csv(text: str, path: str, line_offset: int = 0, source_format: str = "nvidia-smi-csv") -> _Part:
    part = _Part(Source(path, source_format, ["nvidia-smi"]))
    reader = csv.reader(io.StringIO(text), skipinitialspace=True)
    try:
        rows = list(reader)
    except csv.Error as e:  # e.g. a bare carriage return inside a field
        raise _err(path, line_offset + reader.line_num, f"not valid CSV ({e})") from None
    rows_with_line = [(i + 1 + line_offset, r) for i, r in enumerate(rows) if r and any(c.strip() for c in r)]
    if not rows_with_line:
        raise _err(path, line_offset + 1, "empty nvidia-smi CSV")
    hline, header = rows_with_line[0]
    names = [_smi_name(h) for h in header]
    units = [_smi_unit(h) for h in header]
    if "index" not in names and len(rows_with_line) > 2:
        part.notes.append(f"{path}: no 'index' column; rows are read as GPUs 0, 1, ... in order")
    samples: dict[str, dict[str, list[float]]] = {}
    for n, (line, row) in enumerate(rows_with_line[1:]):
        if len(row) != len(header):
            raise _err(path, line, f"expected {len(header)} columns as in the header (line {hline}), found {len(row)}")
        cells = dict(zip(names, (c.strip() for c in row)))
        key = cells.get("index") or str(n)
        dev = part.devices.setdefault(key, Device(key))
        if cells.get("name") and not _NA.match(cells["name"]):
            dev.name = cells["name"]
        acc = samples.setdefault(key, {})
        for col, unit_h, raw in zip(names, units, row):
            spec = SMI_FIELDS.get(col)
            if spec is None:
                continue
            reading, unit, scale, pr = spec
            v = _smi_number(raw, unit_h or unit, path, line, col)
            if v is None:
                continue
            if unit_h and unit_h != unit:
                v = v * SMI_UNITS.get(unit_h, 1.0) / SMI_UNITS.get(unit, 1.0)
            why = invalid_reason(reading, v * scale)
            if why:
                part.invalid.append(InvalidReading(f"{path}:{line}", col, f"GPU {key}", reading, v * scale, why))
                part.notes.append(f"{path}:{line}: {col} for GPU {key} reads {raw.strip()} ({why}); the sample is ignored")
                continue
            acc.setdefault(f"{pr}:{reading}:{col}", []).append(v * scale)
    for col in names:
        if col not in SMI_FIELDS and col not in SMI_IDENTITY:
            part.unknown.add(col)
    for key, acc in samples.items():
        dev = part.devices[key]
        best: dict[str, tuple[int, str, list[float]]] = {}
        for k, vals in acc.items():
            pr, reading, col = k.split(":", 2)
            if reading not in best or int(pr) < best[reading][0]:
                best[reading] = (int(pr), col, vals)
        for reading, (_, col, vals) in best.items():
            dev.readings[reading] = sum(vals) / len(vals)
            dev.where[reading] = f"{col} ({path})"
            dev.rank[reading] = DEVICE_SOURCE_RANK["nvidia-smi"]
    part.source.samples = len(rows_with_line) - 1
    return part
