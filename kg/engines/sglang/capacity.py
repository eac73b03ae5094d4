"""SGLang's KV capacity for check: its pools (kg.engines.sglang.pools) in place of vLLM's per-token layout."""
from __future__ import annotations

from typing import Any

from kg.core.errors import OptkgError


def sglang_capacity(cap, derived: dict[str, Any], m, attn_tp: int, budget: float, ns: dict[str, Any], kvdt: str):
    """SGLang's pools (kg.engines.sglang.pools): a hybrid sliding-window model gets a full pool of
    ``budget // (full layers' bytes + ratio x sliding layers' bytes)`` tokens and an SWA pool of ratio x that;
    the capacity then counts full-pool tokens. Other models keep ``cap`` (SGLang's default pool). Then
    ``--max-total-tokens`` caps the pool (``max_total_tokens_cap``)."""
    return max_total_tokens_cap(_pools(cap, derived, m, attn_tp, budget, ns, kvdt), derived, ns)


def max_total_tokens_cap(cap, derived: dict[str, Any], ns: dict[str, Any]):
    """``--max-total-tokens N``: the pool holds ``min(profiled, N)`` tokens, floored to whole pages; a larger N is
    ignored with a warning ("max_total_tokens=N is larger than the profiled value ... Use the profiled value
    instead"). sglang 0.5.23 mem_cache/kv_cache_configurator.py:3090-3106 (``_apply_token_constraints``) and
    :3212-3227 (the pools re-derived from the capped count); the same in 0.5.5 model_executor/model_runner.py:
    1598-1611. A hybrid model's SWA / Mamba pools are re-derived from the capped count: optkg keeps their sizes
    from the budget and says so."""
    from dataclasses import replace
    n = ns.get("max_total_tokens")
    if n is None or cap.kv_tokens_per_gpu is None:
        return cap
    n = int(n)
    page = int(ns.get("block_size") or 1)
    if n >= cap.kv_tokens_per_gpu:
        derived["kv_max_total_tokens"] = (f"{n:,}, above the profiled {cap.kv_tokens_per_gpu:,} tokens: SGLang warns "
                                          "and keeps the profiled pool (_apply_token_constraints)")
        return cap
    tokens = n // page * page
    scale = cap.kv_tokens_total // cap.kv_tokens_per_gpu if cap.kv_tokens_per_gpu else 1  # the DCP group
    derived["kv_max_total_tokens"] = (f"{n:,}: caps the pool at {tokens:,} of the profiled {cap.kv_tokens_per_gpu:,} "
                                      "tokens (_apply_token_constraints)")
    conc = round(tokens * scale / cap.max_model_len, 2) if cap.max_model_len else None
    if derived.get("kv_sglang_pool") not in (None, "default"):
        # SGLang sizes its other pools again from the capped count (calculate_pool_sizes_from_max_tokens): optkg
        # does not, so it shows no stale SWA / Mamba pool, and no Mamba request cap
        derived["kv_max_total_tokens"] += "; the SWA / Mamba pools follow from it: not modelled"
        for k in ("kv_sglang_swa_pool_tokens", "kv_sglang_mamba_pool_bytes", "kv_sglang_max_mamba_cache_size"):
            derived.pop(k, None)
        if derived.pop("max_running_requests_capped_by_mamba", None) is not None:
            derived.pop("max_running_requests", None)
            conc = None
    return replace(cap, kv_tokens_per_gpu=tokens, kv_tokens_total=tokens * scale, max_concurrency=conc,
                   max_model_len_that_fits=min(cap.max_model_len_that_fits, tokens * scale))


def _pools(cap, derived: dict[str, Any], m, attn_tp: int, budget: float, ns: dict[str, Any], kvdt: str):
    from dataclasses import replace

    from kg.engines.sglang.pools import sglang_pools
    try:
        pools = sglang_pools(m, attn_tp, budget, int(ns.get("block_size") or 1), kvdt, ns.get("swa_full_tokens_ratio"),
                             bool(ns.get("disable_hybrid_swa_memory")), **sglang_mamba_args(m, attn_tp, ns))
    except OptkgError as e:  # a Mamba pool SGLang refuses at startup: no KV tokens, say why
        derived["kv_sglang_pool"] = f"hybrid-mamba, refused: {e}"
        return replace(cap, kv_tokens_per_gpu=0, kv_tokens_total=0, max_concurrency=None)
    derived["kv_sglang_pool"] = pools.kind
    if pools.kind == "default":
        return cap
    if pools.mamba is not None:  # the Mamba / GDN state pool: its slots bound the running requests
        mp = pools.mamba
        derived.update({"kv_sglang_mamba_state_bytes_per_request": mp.state_bytes_per_request,
                        "kv_sglang_max_mamba_cache_size": mp.max_mamba_cache_size,
                        "kv_sglang_mamba_pool_bytes": mp.memory_bytes, "kv_sglang_mamba_slots_per_request": mp.slots_per_request,
                        "max_running_requests": mp.max_running_requests,
                        "max_running_requests_capped_by_mamba": mp.capped_by_mamba})
        t = pools.max_total_num_tokens
        conc = round(min(t / cap.max_model_len, mp.max_running_requests), 2) if cap.max_model_len else None
        return replace(cap, kv_tokens_per_gpu=t, kv_tokens_total=t, max_concurrency=conc)
    if pools.layers:
        derived["kv_sglang_pool_layers"] = pools.layers
    derived["kv_sglang_full_pool_tokens"] = pools.full_tokens
    derived["kv_sglang_swa_pool_tokens"] = pools.swa_tokens
    tokens = pools.max_total_num_tokens
    per_req = (cap.max_model_len or 0) + (m.max_source_positions or 0 if pools.kind == "encoder-decoder" else 0)
    conc = round(tokens / per_req, 2) if cap.max_model_len else None  # Whisper: encoder placeholders + decoder tokens
    return replace(cap, kv_tokens_per_gpu=tokens, kv_tokens_total=tokens, max_concurrency=conc)


def sglang_mamba_args(m, attn_tp: int, ns: dict[str, Any]) -> dict[str, Any]:
    """The Mamba-pool settings of an SGLang stack for kg.engines.sglang.pools (defaults where not given)."""
    return {"max_mamba_cache_size": ns.get("max_mamba_cache_size"), "mamba_full_memory_ratio": ns.get("mamba_full_memory_ratio"),
            "mamba_ssm_dtype": ns.get("mamba_ssm_cache_dtype"), "mamba_radix_cache_strategy": ns.get("mamba_radix_cache_strategy"),
            "radix_cache": "prefix-caching" in (ns.get("techniques") or []),
            "overlap_schedule": not ns.get("disable_overlap_schedule"), "max_running_requests": ns.get("max_num_seqs"),
            "context_len": ns.get("max_model_len") or m.sglang_context_length,
            "attn_dp_size": max(1, int(ns.get("tp_size") or 1) // max(1, attn_tp))}


def sglang_pool_report(model, tp: int, kv_budget_gib: float, kv_cache_dtype: str = "auto",
                       mamba_ssm_dtype: str | None = None, context_len: int | None = None) -> dict[str, Any]:
    """SGLang 0.5.23's pools on one rank from ``kv_budget_gib`` of KV memory (kg.engines.sglang.pools): the token
    pool and, for hybrid models, the SWA pool or the Mamba / GDN state pool with its running-request cap.
    ``context_len``: ``--context-length`` (default: the model's). Raises OptkgError for a pool SGLang refuses."""
    from dataclasses import asdict

    from kg.engines.sglang.pools import sglang_pools
    p = sglang_pools(model, tp, kv_budget_gib * 2**30, 1, kv_cache_dtype, mamba_ssm_dtype=mamba_ssm_dtype,
                     context_len=context_len or model.sglang_context_length)
    return asdict(p)
