"""vLLM V0's KV-cache capacity: whole blocks, tokens = blocks x block_size.

V0 (vLLM < 0.8.0 by default, or ``VLLM_USE_V1=0`` up to 0.10.x; ``worker/worker.py`` is gone in 0.11.0) counts
its cache in blocks and nothing else (vllm 0.6.4):

- ``num_gpu_blocks = int(available_kv_cache_memory // cache_block_size)`` (``worker/worker.py:226``);
- ``Maximum concurrency for N tokens per request: num_gpu_blocks * block_size / max_model_len``
  (``executor/gpu_executor.py:115-117``);
- at startup ``raise_if_cache_size_invalid`` refuses a ``max_model_len`` above ``block_size * num_gpu_blocks``
  (``worker/worker.py:486-504``; ``executor/utils.py:1-13`` ``check_block_size_valid`` in 0.4.0.post1).

A V0 startup log prints ``# GPU blocks: N``; ``check --kv-budget-from`` passes that count as the
``kv_num_blocks`` setting, which then replaces optkg's own (the logged ``kv_cache_size`` is rounded to 0.01 GiB).
"""
from __future__ import annotations

import contextlib
from typing import Any

from kg.core.relcmp import Release


def uses_v0(version: str | None, vllm_use_v1: Any) -> bool:
    """True with ``VLLM_USE_V1=0``, or a release below 0.8.0 (V1 became the default there)."""
    if vllm_use_v1 is not None:
        return int(vllm_use_v1) == 0
    if version:
        with contextlib.suppress(ValueError):  # an unparsable version was refused when the stack was read
            return Release(version) < Release("0.8.0")
    return False


def apply_v0_blocks(derived: dict[str, Any], ns: dict[str, Any], block_size: int, version: str | None) -> None:
    """Rewrite ``derived``'s capacity the way V0 counts it (module docstring): ``kv_num_blocks`` (the logged
    ``kv_num_blocks`` setting when given), ``kv_tokens_per_gpu`` = ``kv_tokens_total`` = blocks x block_size
    (tokens), ``max_concurrency`` = that / max_model_len (2 decimals, as logged), and ``kv_v0_token_limit``, the
    longest max_model_len V0 starts with: block_size x num_gpu_blocks, from 0.8.0 block_size x (num_gpu_blocks //
    pp_size) (worker/worker.py:496 at 0.6.4 and 0.7.3, :543 at 0.8.0, :663 at 0.10.2)."""
    if ns.get("kv_num_blocks") is not None:
        derived["kv_num_blocks"] = int(ns["kv_num_blocks"])
    blocks = derived.get("kv_num_blocks")
    if blocks is None:
        return
    tokens = int(blocks) * int(block_size)
    pp = int(ns.get("pp_size") or 1)
    per_stage = not version or Release(version) >= Release("0.8.0")  # None: the latest release (V1, no V0 path)
    derived["kv_v0_token_limit"] = int(block_size) * (int(blocks) // pp if per_stage else int(blocks))
    derived["kv_tokens_per_gpu"] = derived["kv_tokens_total"] = tokens
    mml = derived.get("max_model_len_effective")
    if mml:
        conc = round(tokens / int(mml), 2)
        derived["max_concurrency_at_max_model_len_effective"] = conc
        if "max_concurrency" in derived:
            derived["max_concurrency"] = conc
