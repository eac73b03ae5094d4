"""KV capacity at the dtype the engine stores, when a rule of the stack establishes that it ignores the
requested one (one source of truth for the report's capacity table and the capacity rules).

vLLM 0.4.3-0.8.1 with ``--kv-cache-dtype fp8`` on the FLASH_ATTN backend (rule fp8-kv-ignored-by-flash-attn):
V0 switches backend, V1 before 0.8.0 keeps a 16-bit cache (vllm 0.7.3 ``v1/attention/backends/flash_attn.py:118``
stores the dtype and has no FP8 path). The capacity then follows the model dtype (``auto``), not FP8.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

# rule id -> the kv_cache_dtype the engine stores when that rule fires
STORED_KV_DTYPE = {"fp8-kv-ignored-by-flash-attn": "auto"}
# derived facts that follow the stored KV dtype
CAPACITY_KEYS = ("kv_bytes_per_token_model", "kv_bytes_per_token_per_gpu", "kv_bytes_per_token_per_gpu_unreplicated",
                 "kv_bytes_per_token_per_gpu_effective", "kv_element_bytes", "kv_num_blocks", "kv_tokens_per_gpu",
                 "kv_tokens_total", "kv_bytes_per_block", "kv_blocks_per_request", "kv_request_bytes_at_max_model_len",
                 "kv_null_block_bytes", "kv_groups", "kv_v0_token_limit", "kv_tokens_per_gpu_if_unreplicated",
                 "max_concurrency", "max_concurrency_at_max_model_len_effective", "max_concurrency_per_attention_group",
                 "max_model_len_that_fits")


def stored_kv_capacity(stack, fired: set[str], stack_facts: Callable) -> tuple[dict[str, Any], str] | None:
    """(capacity facts of ``CAPACITY_KEYS`` re-derived at the stored dtype, the note saying so) when a rule in
    ``fired`` establishes that the engine ignores the requested KV dtype; None otherwise.
    ``stack_facts`` is kg.analyses.check.stack_facts (passed in: this module sits below check)."""
    hit = sorted(r for r in fired if r in STORED_KV_DTYPE)
    if not hit:
        return None
    stored = STORED_KV_DTYPE[hit[0]]
    alt = copy.copy(stack)
    alt.settings, alt.notes = dict(stack.settings), []
    alt.techniques = {k: dict(v) for k, v in stack.techniques.items()}
    requested = alt.settings.get("kv_cache_dtype")
    alt.settings["kv_cache_dtype"] = stored
    for params in alt.techniques.values():
        if "kv_cache_dtype" in params:
            params["kv_cache_dtype"] = stored
    _, ns = stack_facts(alt)
    out = {k: ns[k] for k in CAPACITY_KEYS if k in ns}
    dtype = stack.model.dtype if stack.model is not None else stored
    note = (f"KV capacity at the dtype the engine stores ({stored}: {dtype}), not the requested kv_cache_dtype "
            f"'{requested}': rule {hit[0]}")
    return out, note
