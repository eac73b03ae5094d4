"""The CUDA-graph mode vLLM resolves when the command gives none (``-cc.cudagraph_mode``), per release.

vllm 0.34.0 (0.33.0 the same code at other lines):
- the optimization level's default: ``-O0`` NONE, ``-O1`` PIECEWISE, ``-O2`` (the default level) and ``-O3``
  FULL_AND_PIECEWISE (config/vllm.py:283-373 OPTIMIZATION_LEVEL_00..03, :465 ``optimization_level = O2``,
  applied at :1785-1786; 0.33.0 :255-345, :435);
- ``--enforce-eager``: NONE (config/vllm.py:1697-1699, again :1916-1918; 0.33.0 :1766-1768, :2004-2006);
- a compilation mode other than VLLM_COMPILE (``-cc.mode``, or ``-O0``) drops the piecewise part:
  PIECEWISE -> NONE, FULL_AND_PIECEWISE -> FULL_DECODE_ONLY (config/vllm.py:1050-1067, called at :1842;
  compilation.py:156-161 ``without_piecewise``; the mode defaults to VLLM_COMPILE above -O0, vllm.py:1758-1762);
- an encoder-decoder model: FULL_DECODE_ONLY unless NONE (config/vllm.py:1874-1886; 0.33.0 :1962-1974).
What the attention backend supports is applied when the engine starts (compilation.py:1537-1660
``resolve_cudagraph_mode_and_sizes`` downgrades FULL_AND_PIECEWISE itself); this is the configured mode.
Releases before 0.33.0 are not read: no mode is resolved for them.
"""
from __future__ import annotations

from typing import Any

FIRST_READ = "0.33.0"
LEVEL_MODE = {0: "NONE", 1: "PIECEWISE", 2: "FULL_AND_PIECEWISE", 3: "FULL_AND_PIECEWISE"}
WITHOUT_PIECEWISE = {"PIECEWISE": "NONE", "FULL_AND_PIECEWISE": "FULL_DECODE_ONLY"}
COMPILE_MODES = ("", "3", "VLLM_COMPILE")


def optimization_level(stack: Any) -> int | None:
    """The ``--optimization-level`` / ``-O`` the command gives (2 when none); None when it cannot be read."""
    if any(str(w).startswith("-O") for w in stack.ignored):
        return None
    raw = (stack.native or {}).get("--optimization-level")
    if raw is None:
        return 2
    text = str(raw).upper().removeprefix("O")
    return int(text) if text in ("0", "1", "2", "3") else None


def resolved_cudagraph_mode(stack: Any, ns: dict[str, Any]) -> str | None:
    """vLLM's cudagraph_mode for a stack that gives none (module doc); None where optkg cannot tell."""
    from kg.core.relcmp import older_than
    if ns.get("cudagraph_mode") not in (None, "") or older_than(stack.engine_version, FIRST_READ):
        return None
    level = optimization_level(stack)
    if level is None:
        return None
    if ns.get("enforce_eager") is True:
        return "NONE"
    mode = LEVEL_MODE[level]
    given = str(ns.get("compilation_mode") or "")
    if not (given.upper() in COMPILE_MODES if given else level > 0):
        mode = WITHOUT_PIECEWISE.get(mode, mode)
    if stack.model is not None and stack.model.is_encoder_decoder and mode != "NONE":
        mode = "FULL_DECODE_ONLY"
    return mode
