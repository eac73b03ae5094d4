"""Which catalog GPU a name means: ids and aliases, nvidia-smi's own names, and a GPU the catalog lacks.

``find_gpu(hardware, name)`` tries, in order:

1. the id or an alias, ignoring case (``H100-SXM``, ``h200``, ``A100-80G``);
2. the same after dropping the vendor words nvidia-smi and rocm-smi print and joining the rest with ``-``
   (``NVIDIA H200`` -> ``h200``; ``Tesla V100-SXM2-32GB`` -> ``v100-sxm2-32gb``; ``AMD Instinct MI300X``);
3. the words of the name: the one entry whose id, aliases and name hold every word of it, including the
   first word of its id (the family: ``h100``, ``rtx``, ``mi300x``) and one word with a digit
   (``NVIDIA H100 80GB HBM3`` -> H100-SXM; ``NVIDIA H100 PCIe`` -> H100-PCIe). Two or more such entries
   are ambiguous (``NVIDIA H100 80GB``: SXM or PCIe), and a word no entry has (``H200 NVL``, ``H200x``) is
   no match: never the nearest GPU, because its memory and kernels would be another GPU's.

Steps 2 and 3 read printable ASCII names only (what nvidia-smi prints): a zero-width space or an escape
sequence in ``H100\u200b`` is not dropped to make it a known GPU. Anything else is an error naming the closest ids (``difflib``, as for models) and how to describe a GPU
the catalog lacks: ``custom_gpu(name, memory_gib, compute_capability)`` makes an entry from its memory (and
optionally its CUDA compute capability); rules needing other facts of it are then "not evaluable". An
unknown GPU is never a note with the hardware checks skipped (issue 26 #18: in CI a typo turned the memory
checks green).
"""
from __future__ import annotations

import math
import re
from typing import Any

from kg.core.errors import OptkgError, get_close_matches

# the vendor and trademark words smi tools and torch print around a GPU's model (Intel's xpu-smi / torch.xpu:
# "Intel(R) Arc(TM) A770 Graphics", "Intel(R) Data Center GPU Max 1550")
VENDOR_WORDS = {"nvidia", "amd", "tesla", "geforce", "instinct", "radeon", "gpu", "graphics", "intel", "r", "tm"}
MAX_NAME = 64


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", str(text).lower()) if w not in VENDOR_WORDS]


def _norm(text: str) -> str:
    return "-".join(_words(text))


def _names(hw: dict[str, Any]) -> list[str]:
    return [str(hw.get("id") or "")] + [str(a) for a in hw.get("aliases") or []]


def find_gpu(hardware: dict[str, dict[str, Any]], name: str) -> tuple[dict[str, Any] | None, list[str]]:
    """(the entry ``name`` means, []) or (None, the ids it could mean when ambiguous) -- see module doc."""
    key = str(name).strip().lower()
    for hw in hardware.values():
        if key in (n.lower() for n in _names(hw)):
            return hw, []
    if not re.fullmatch(r"[\x20-\x7e]+", str(name)):  # smi tools print ASCII; 'H100\u200b' is no H100
        return None, []
    norm = _norm(name)
    if norm:
        hits = [hw for hw in hardware.values() if norm in (_norm(n) for n in _names(hw))]
        if len(hits) == 1:
            return hits[0], []
    words = set(_words(name))
    if not words or not any(re.search(r"[0-9]", w) for w in words):
        return None, []
    hits = []
    for hw in hardware.values():
        have = {w for n in _names(hw) + [str(hw.get("name") or "")] for w in _words(n)}
        family = (_words(str(hw.get("id") or "")) or [""])[0]
        if words <= have and family in words:
            hits.append(hw)
    if len(hits) == 1:
        return hits[0], []
    return None, sorted(str(h["id"]) for h in hits)


def variant_note(hardware: dict[str, dict[str, Any]], name: str, hw: dict[str, Any] | None) -> str | None:
    """A note when ``name`` is a bare alias of one of several catalog variants of a GPU (``A100`` is A100-80GB; the
    A100-40GB has half the memory): which one was read and the ids of the others. None for an id, a name that says
    the variant, or a GPU whose variants all have its memory (H100 SXM / PCIe: only the speed differs)."""
    if hw is None or str(name).strip().lower() == str(hw.get("id") or "").lower():
        return None
    family = (_words(str(hw.get("id") or "")) or [""])[0]
    if _norm(name) != family:
        return None
    others = sorted(str(h["id"]) for h in hardware.values() if h is not hw  # same memory (H100 PCIe): no note
                    and (_words(str(h.get("id") or "")) or [""])[0] == family and h.get("memory_gib") != hw.get("memory_gib"))
    if not others:
        return None
    mem = hw.get("memory_gib")
    return (f"GPU '{name}' read as {hw['id']}" + (f" ({mem:g} GiB)" if isinstance(mem, (int, float)) else "")
            + f"; other variants: {', '.join(others)} (pass the id)")


def closest_gpus(hardware: dict[str, dict[str, Any]], name: str, n: int = 3) -> list[str]:
    """The catalog ids closest to ``name`` (compared on ids and aliases, vendor words dropped)."""
    by_name: dict[str, str] = {}
    for hw in hardware.values():
        for alias in _names(hw):
            by_name.setdefault(_norm(alias) or alias.lower(), str(hw["id"]))
    out: list[str] = []
    for m in get_close_matches(_norm(name) or str(name).lower(), list(by_name), n=n * 3, cutoff=0.5):
        if by_name[m] not in out:
            out.append(by_name[m])
    return out[:n]


def unknown_gpu_error(hardware: dict[str, dict[str, Any]], name: str, ambiguous: list[str], memory_hint: str) -> OptkgError:
    """The one-line error for a GPU name the catalog does not resolve (closest ids; how to describe it)."""
    from kg.core.textsafe import one_line
    shown = one_line(name)[:80]
    if ambiguous:
        return OptkgError(f"GPU '{shown}' is ambiguous: {', '.join(ambiguous)} (give one of these ids)")
    near = closest_gpus(hardware, name)
    hint = f"; did you mean {', '.join(near)}?" if near else f"; known: {', '.join(sorted(hardware))}"
    return OptkgError(f"unknown GPU '{shown}'{hint} (a GPU not in catalog/hardware/: give {memory_hint})")


def custom_gpu(name: str, memory_gib: Any, compute_capability: Any = None, where: str = "--gpu-memory-gib") -> dict[str, Any]:
    """A hardware entry for a GPU the catalog lacks, from its memory (GiB) and optional compute capability
    (``9.0``): only those facts; the rules that need others are not evaluable. Raises OptkgError."""
    from kg.core.textsafe import one_line
    label = str(name).strip()
    if not label or one_line(label) != label or len(label) > MAX_NAME:
        raise OptkgError(f"GPU name {one_line(label)[:80]!r}: expected one line of at most {MAX_NAME} printable "
                         "characters")
    if isinstance(memory_gib, bool) or not isinstance(memory_gib, (int, float)) or not math.isfinite(memory_gib) \
            or not 0 < memory_gib <= 65_536:
        raise OptkgError(f"{where}: expected the GPU's memory in GiB, in (0, 65536], found {memory_gib!r}")
    hw: dict[str, Any] = {"id": label, "name": f"{label} (not in the catalog: {memory_gib:g} GiB given)",
                          "memory_gib": float(memory_gib), "custom": True}
    if compute_capability is not None:
        cc = str(compute_capability).strip()
        if not re.fullmatch(r"[0-9]{1,2}\.[0-9]{1,2}", cc):
            raise OptkgError(f"{where.replace('memory-gib', 'compute-capability').replace('memory_gib', 'compute_capability')}: "
                             f"expected a CUDA compute capability such as 8.0 or 9.0, found {compute_capability!r}")
        hw["compute_capability"] = cc
        hw["vendor"] = "nvidia"  # a CUDA compute capability is NVIDIA's
    return hw


__all__ = ["closest_gpus", "custom_gpu", "find_gpu", "unknown_gpu_error"]
