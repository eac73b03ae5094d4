"""fit's KV cost curve: KV bytes per GPU vs sequence length and batch size, the knees, and the vLLM plan that
bounds a request when chunked-local or sliding-window groups hold a window (split from kg.analyses.fit)."""
from __future__ import annotations

from typing import Any, Mapping

from kg.core.errors import OptkgError


def window_plan(model, tp: int, pp: int, dcp: int, kv_cache_dtype: str, hardware: Mapping[str, Any] | None,
                block_size: int = 16):
    """vLLM's plan (``block_size``-token blocks) when its chunked / sliding groups bound a request
    (KVPlan.window_bounded), else None: check's longest request then comes from the groups, and so do fit's knee
    and curve."""
    from kg.engines.vllm.kv_plan import default_max_num_batched_tokens, plan_kv_cache
    if not (model.sliding_window or model.attention_chunk_size):
        return None
    mem = (hardware or {}).get("memory_gib")
    mnbt = default_max_num_batched_tokens(float(mem) if mem else None, str((hardware or {}).get("id") or ""),
                                          (hardware or {}).get("compute_capability"))
    try:
        plan = plan_kv_cache(model, tp, pp, dcp, kv_cache_dtype, 1 << 40, block_size, max_num_batched_tokens=mnbt)
    except OptkgError:
        return None
    return plan if plan.window_bounded() else None


def _max_len_within(layout, budget: float, block_size: int = 16) -> tuple[int | None, int]:
    """(longest single request whose KV fits ``budget`` bytes per GPU, the GPU KV cache size in tokens).

    The derivation ``check`` and ``sweep`` use (kg.derive.kv.kv_capacity): whole ``block_size``-token blocks (the
    release's default block: 16, 64 from vLLM 0.34.0, kg.inputs.effective.default_block_size), and vLLM's null
    block held back from the one-request estimate (vLLM >= 0.29.0, kg.engines.vllm.kv_plan.null_block_bytes; fit
    sizes for the latest vLLM). The first is None when even 2**40 tokens fit (window-bounded layers)."""
    from kg.derive.kv import LONGEST_LIMIT, kv_capacity
    from kg.engines.vllm.kv_plan import null_block_bytes
    cap = kv_capacity(layout, budget, None, block_size,
                      null_block_bytes(None, layout.bytes_per_token_per_gpu * block_size))
    return (None if cap.max_model_len_that_fits >= LONGEST_LIMIT else cap.max_model_len_that_fits), cap.kv_tokens_per_gpu


def cost_curve(layout, budget: float | None, features: Mapping[str, Any], context_limit: int | None = None,
               context_limit_by: str | None = None, plan=None, block_size: int = 16) -> dict[str, Any]:
    """KV bytes per GPU vs sequence length (batch 1) and vs batch size (at the p50 request length), and the knees.

    ``seq_len_limit``: the longest single sequence, min(memory knee, ``context_limit``), and
    ``seq_len_limit_by``: 'KV memory' or ``context_limit_by`` (None without either limit).

    Sequence lengths: powers of two from 1,024 up to at least 131,072, the longest request and
    the first power of two past the knee (at most 2**24);
    batch sizes: powers of two from 1 up to at least 1,024 and twice the knee. knee_seq_len: the
    longest single sequence whose KV fits the budget (``_max_len_within``: check's max_model_len_that_fits);
    kv_tokens_per_gpu: the GPU KV cache size; knee_batch_pNN: floor(budget / KV bytes of one pNN request). Bytes follow kg.derive.kv.sequence_bytes_per_gpu (sliding
    layers capped at the window, DCP-sharded), or with ``plan`` (``window_plan``) vLLM's blocks per request x bytes per block.
    """
    from kg.derive.kv import sequence_bytes_per_gpu as _seq_bytes
    longest = int(features.get("request_len_max") or 0)
    knee, cache_tokens = _max_len_within(layout, budget, block_size) if budget is not None else (None, None)
    if plan is not None and budget is not None:  # the groups' reservation, less the null block (as check)
        knee = plan.longest_request(budget - plan.bytes_per_block)
        if context_limit:  # "GPU KV cache size" as vLLM logs it at max_model_len = the context limit (kg.engines.vllm.kv_plan)
            cache_tokens = int(int(budget // plan.bytes_per_block) / plan.request_blocks(int(context_limit))
                               * int(context_limit))

    def sequence_bytes_per_gpu(lay, n: int) -> float:
        return plan.request_blocks(n) * plan.bytes_per_block if plan is not None else _seq_bytes(lay, n)
    top = max(1 << 17, 1 << max(10, (max(longest, 1) - 1).bit_length()))
    if knee:
        top = max(top, min(1 << 24, 1 << (knee.bit_length())))
    seq = []
    L = 1024
    while L <= top:
        seq.append({"seq_len": L, "kv_bytes_per_gpu": sequence_bytes_per_gpu(layout, L)})
        L *= 2
    out: dict[str, Any] = {"kv_bytes_per_token_per_gpu": layout.bytes_per_token_per_gpu_effective,
                           "by_seq_len": seq, "budget_bytes_per_gpu": budget}
    ref = features.get("request_len_p50")
    knee_b: dict[str, int] = {}
    limits = [(x, by) for x, by in ((knee if budget is not None else None, "KV memory"),
                                    (context_limit, context_limit_by or "context limit")) if x is not None]
    lim = min(limits, key=lambda t: t[0]) if limits else (None, None)
    out["seq_len_limit"], out["seq_len_limit_by"] = lim
    out["context_limit"], out["context_limit_by"] = context_limit, context_limit_by if context_limit else None
    if budget is not None:
        out["knee_seq_len"] = knee
        out["kv_tokens_per_gpu"] = cache_tokens  # vLLM's "GPU KV cache size" (whole blocks), as check prints it
        for q in ("p50", "p99"):
            v = features.get(f"request_len_{q}")
            if v:
                knee_b[q] = int(budget // sequence_bytes_per_gpu(layout, int(v)))
        out["knee_batch"] = knee_b
    if ref:
        per = sequence_bytes_per_gpu(layout, int(ref))
        top_b = max(1024, 2 * knee_b.get("p50", 0))
        bs = []
        b = 1
        while b <= top_b:
            bs.append({"batch": b, "kv_bytes_per_gpu": per * b})
            b *= 2
        out["by_batch"] = {"seq_len": int(ref), "points": bs}
    return out
