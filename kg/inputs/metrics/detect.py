"""Which metrics format a text is, from its content (never the file name): ``detect_format``.
"""
from __future__ import annotations

import re
from typing import Callable

from kg.inputs.metrics.smi_csv import SMI_FIELDS, _smi_name
from kg.inputs.metrics.snapshot import _err


FORMATS = ("prometheus", "nvidia-smi-csv", "nvidia-smi-dmon", "nvidia-smi-capture", "dcgm-fields")


# ---------------------------------------------------------------------------------------------
# format detection

_PROM_LINE = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*(\{|\s)")
_DCGM_FIELD_LINE = re.compile(r"^#?\s*(DCGM_[A-Z0-9_]+)\s*,\s*([a-z]+)\s*,(.*)$")


def _first_lines(text: str, n: int = 5) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()][:n]


def _is_capture(text: str) -> bool:
    return "# nvidia_gpu_exporter GPU capture" in text[:2000] or bool(
        re.search(r"^# (idle|load) :: (query-gpu|dmon)", text, re.M))


def _is_dmon(text: str) -> bool:
    lines = _first_lines(text, 1)
    return bool(lines) and bool(re.match(r"^#\s*gpu\s", lines[0])) and any(
        c in lines[0].split() for c in ("pwr", "sm", "mem"))


def _is_dcgm_fields(text: str) -> bool:
    real = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return bool(real) and bool(_DCGM_FIELD_LINE.match(real[0].strip()))


def _is_smi_csv(text: str) -> bool:
    lines = _first_lines(text, 1)
    if not lines or "," not in lines[0] or lines[0].startswith("#"):
        return False
    head = {_smi_name(h) for h in lines[0].split(",")}
    return bool(head & (set(SMI_FIELDS) | {"index", "uuid", "name", "pci.bus_id"}))


def _is_prometheus(text: str) -> bool:
    lines = _first_lines(text, 20)
    return any(ln.startswith(("# HELP", "# TYPE")) or _PROM_LINE.match(ln) for ln in lines)


DETECTORS: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("nvidia-smi-capture", _is_capture),
    ("nvidia-smi-dmon", _is_dmon),
    ("dcgm-fields", _is_dcgm_fields),
    ("nvidia-smi-csv", _is_smi_csv),
    ("prometheus", _is_prometheus),
)


def detect_format(text: str, path: str = "<input>") -> str:
    """Name of the format of ``text`` (one of FORMATS). Raises OptkgError when none fits."""
    if not text.strip():
        raise _err(path, None, "empty file (expected metrics)")
    for name, test in DETECTORS:
        if test(text):
            return name
    raise _err(path, 1, "unrecognised metrics format (expected Prometheus text from /metrics, "
                        "`nvidia-smi --query-gpu=... --format=csv`, `nvidia-smi dmon`, an nvidia_gpu_exporter "
                        "capture, or a dcgm-exporter field list)")
