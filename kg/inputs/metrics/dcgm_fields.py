"""dcgm-exporter collector field lists: which fields the exporter collects (no readings).
"""
from __future__ import annotations

from kg.inputs.metrics.detect import _DCGM_FIELD_LINE
from kg.inputs.metrics.snapshot import Source, _Part, _err


# ---------------------------------------------------------------------------------------------
# dcgm-exporter field lists

def _parse_dcgm_fields(text: str, path: str) -> _Part:
    part = _Part(Source(path, "dcgm-fields", ["dcgm"]))
    for i, raw in enumerate(text.splitlines()):
        s = raw.strip()
        if not s:
            continue
        m = _DCGM_FIELD_LINE.match(s)
        if m:
            part.collector_fields[m.group(1)] = not s.startswith("#")
        elif not s.startswith("#"):
            raise _err(path, i + 1, "expected 'DCGM_FI_<FIELD>, <gauge|counter|label>, <help>'")
    part.source.samples = 0
    return part
