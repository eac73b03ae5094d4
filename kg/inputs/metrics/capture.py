"""nvidia_gpu_exporter captures: ``# <phase> :: <what>`` sections of nvidia-smi output.
"""
from __future__ import annotations

import re

from kg.inputs.metrics.dmon import _parse_dmon
from kg.inputs.metrics.smi_csv import _parse_smi_csv
from kg.inputs.metrics.snapshot import Device, PHASES, Source, _Part, _err


# ---------------------------------------------------------------------------------------------
# nvidia_gpu_exporter capture (several nvidia-smi outputs in '# <phase> :: <what>' sections)

_PHASE = re.compile(r"[a-z-]+")


def _section(line: str) -> tuple[str, str] | None:
    """``# <phase> :: <what>`` -> (phase, what), else None. Linear time: the regex it replaces,
    ``^# ([a-z-]+) :: (.+?)\\s*$``, was quadratic on a header line of 200,000 spaces."""
    if not line.startswith("# "):
        return None
    phase, sep, what = line[2:].partition(" :: ")
    what = what.rstrip()
    if not sep or not what or not _PHASE.fullmatch(phase):
        return None
    return phase, what


def _capture_sections(text: str) -> dict[tuple[str, str], tuple[int, str]]:
    """(phase, kind) -> (line offset of the body, body) for query-gpu and dmon sections."""
    lines = text.splitlines()
    heads = []
    for i, ln in enumerate(lines):
        m = _section(ln)
        if m and i > 0 and lines[i - 1].startswith("#####"):
            heads.append((i, m[0], m[1]))
    out: dict[tuple[str, str], tuple[int, str]] = {}
    for n, (i, phase, what) in enumerate(heads):
        kind = "query-gpu" if what.startswith("query-gpu") else "dmon" if what.startswith("dmon") else None
        if kind is None:
            continue
        j = i + 1
        while j < len(lines) and (lines[j].startswith("# $") or lines[j].startswith("#####")):
            j += 1
        end = heads[n + 1][0] - 1 if n + 1 < len(heads) else len(lines)
        out[(phase, kind)] = (j, "\n".join(lines[j:end]))
    return out


def _parse_capture(text: str, path: str, phase: str) -> _Part:
    secs = _capture_sections(text)
    phases = sorted({p for p, _ in secs if p in PHASES})
    if phase not in phases:
        raise _err(path, None, f"no '{phase} :: query-gpu' or '{phase} :: dmon' section "
                               f"(phases in this capture: {', '.join(phases) or 'none'})")
    part = _Part(Source(path, "nvidia-smi-capture", ["nvidia-smi"], phase=phase))
    n = 0
    if (phase, "query-gpu") in secs:
        off, body = secs[(phase, "query-gpu")]
        p = _parse_smi_csv(body, path, off)
        part.devices, n = p.devices, p.source.samples
        part.unknown |= p.unknown
        part.notes += p.notes
        part.invalid += p.invalid
    if (phase, "dmon") in secs:
        off, body = secs[(phase, "dmon")]
        p = _parse_dmon(body, path, off)
        n += p.source.samples
        part.notes += p.notes
        part.invalid += p.invalid
        for k, d in p.devices.items():
            mine = part.devices.setdefault(k, Device(k))
            for r, v in d.readings.items():
                if r not in mine.readings:
                    mine.readings[r], mine.where[r], mine.rank[r] = v, d.where[r], d.rank[r]
    part.source.samples = n
    part.notes.append(f"{path}: capture phase '{phase}' read (phases: {', '.join(phases)})")
    return part
