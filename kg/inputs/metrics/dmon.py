"""``nvidia-smi dmon`` output (one row per sample and GPU; samples averaged), mapped through ``DMON_COLUMNS``.
"""
from __future__ import annotations

from kg.inputs.metrics.snapshot import (DEVICE_SOURCE_RANK, Device, InvalidReading, Source, _Part, _err,
                                        invalid_reason)


# nvidia-smi dmon column -> (reading, scale)
DMON_COLUMNS: dict[str, tuple[str, float]] = {
    "pwr": ("power_w", 1.0), "sm": ("gpu_util", 0.01), "mem": ("mem_copy_util", 0.01),
    "enc": ("encoder_util", 0.01), "dec": ("decoder_util", 0.01), "fb": ("fb_used_mib", 1.0),
    "pclk": ("sm_clock_mhz", 1.0),
}
DMON_KNOWN_OTHER = {"gpu", "gtemp", "mtemp", "jpg", "ofa", "mclk", "bar1", "ccpm", "rxpci", "txpci", "date",
                    "time", "pviol", "tviol", "sbecc", "dbecc", "pci", "fb", "id"}


# ---------------------------------------------------------------------------------------------
# nvidia-smi dmon

def _parse_dmon(text: str, path: str, line_offset: int = 0) -> _Part:
    part = _Part(Source(path, "nvidia-smi-dmon", ["nvidia-smi"]))
    cols: list[str] | None = None
    acc: dict[str, dict[str, list[float]]] = {}
    nrows = 0
    for i, raw in enumerate(text.splitlines()):
        line = i + 1 + line_offset
        s = raw.strip()
        if not s:
            continue
        if s.startswith("#"):
            toks = s.lstrip("#").split()
            if toks and toks[0].lower() == "gpu":
                cols = [t.lower() for t in toks]
            continue
        if cols is None:
            raise _err(path, line, "dmon row before the '# gpu pwr ...' header")
        toks = s.split()
        if len(toks) != len(cols):
            raise _err(path, line, f"expected {len(cols)} columns ({' '.join(cols)}), found {len(toks)}")
        gpu = toks[0]
        if not (gpu.isascii() and gpu.isdigit()):
            raise _err(path, line, f"column 'gpu': expected a GPU index, found {gpu!r}")
        nrows += 1
        part.devices.setdefault(gpu, Device(gpu))
        for c, tok in zip(cols[1:], toks[1:]):
            spec = DMON_COLUMNS.get(c)
            if spec is None:
                continue
            if tok == "-":
                continue
            try:
                v = float(tok)
            except ValueError:
                raise _err(path, line, f"column '{c}': expected a number or '-', found {tok!r}") from None
            why = invalid_reason(spec[0], v * spec[1])
            if why:
                part.invalid.append(InvalidReading(f"{path}:{line}", f"dmon {c}", f"GPU {gpu}", spec[0], v * spec[1], why))
                part.notes.append(f"{path}:{line}: dmon {c} for GPU {gpu} reads {tok} ({why}); the sample is ignored")
                continue
            acc.setdefault(gpu, {}).setdefault(spec[0], []).append(v * spec[1])
    if cols is None:
        raise _err(path, line_offset + 1, "no '# gpu pwr ...' header (expected `nvidia-smi dmon` output)")
    for c in cols:
        if c not in DMON_COLUMNS and c not in DMON_KNOWN_OTHER:
            part.unknown.add(c)
    col_of = {r: c for c, (r, _) in DMON_COLUMNS.items()}
    for gpu, readings in acc.items():
        dev = part.devices[gpu]
        for r, vals in readings.items():
            dev.readings[r] = sum(vals) / len(vals)
            dev.where[r] = f"dmon {col_of[r]}, mean of {len(vals)} samples ({path})"
            dev.rank[r] = DEVICE_SOURCE_RANK["nvidia-smi-dmon"]
    part.source.samples = nrows
    return part
