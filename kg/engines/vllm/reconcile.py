"""vLLM's startup logs beside optkg's estimate (``optkg reconcile``; kg.analyses.reconcile runs it).

- V0 (0.6.x): KV memory = ``total x gpu_memory_utilization - peak_torch - non_torch``
  (``worker/worker.py determine_num_available_blocks``); blocks = ``floor(KV memory / (block x
  bytes per token))``; the token limit in "max seq len ... larger than the maximum number of tokens
  that can be stored in KV cache (N)" is ``# GPU blocks x block_size``; max concurrency
  ``blocks x block_size / max_model_len``.
- V1: "GPU KV cache size" from the logged "Available KV cache memory" through kg.engines.vllm.kv_plan
  (``int(max_concurrency x max_model_len)``, vLLM 0.33.0 ``v1/core/kv_cache_utils.py:1120-1128``).
"""
from __future__ import annotations

import math
from typing import Any

from kg.engines.rows import Reconciliation, Row
from kg.inputs.logs import GIB, StartupLog


def reconcile_v0(log: StartupLog, parts: dict[str, Any] | None, rec: Reconciliation) -> None:
    """vLLM V0 (0.6.x): KV memory = total x gpu_memory_utilization - peak_torch - non_torch (module doc)."""
    from kg.engines.vllm.budget import activation_peak_bytes
    g = log.get
    block = int(parts["ns"].get("block_size") or 16) if parts else 16
    total, util = g("total_memory"), g("gpu_memory_utilization")
    rec.total_memory, rec.utilization = total, util
    weights_l = g("weights")
    act_l = g("peak_torch") - weights_l if g("peak_torch") is not None and weights_l is not None else None
    mml = int(g("max_model_len") or (parts["ns"].get("max_model_len") if parts else 0) or 0)
    est: dict[str, float] = {}
    if parts:
        est["weights"] = parts["weights"]
        # V0 profiles max_num_batched_tokens = max(max_model_len, 2048) tokens without chunked prefill
        # (max_model_len <= 32K) and 256 sequences (V0 SchedulerConfig defaults)
        profiled = int(parts["ns"].get("max_num_batched_tokens") or max(mml, 2048))
        est["activation"] = activation_peak_bytes(parts["model"], parts["tp"], profiled, 256)
        from kg.derive.budget import non_torch_bytes
        est["non_torch"] = non_torch_bytes(total or 0.0, parts["tp"])[0]
    rec.weights_estimated = est.get("weights")
    rec.rows.append(Row("weights", "bytes", weights_l, None, est.get("weights"),
                        "optkg counts the linear, embedding and lm_head matrices; the engine's figure adds norms and "
                        "rotary caches (kg.derive.weights)"))
    if total is not None:
        rec.rows.append(Row("total GPU memory", "bytes", total, None, None, "as torch reports it (cudaMemGetInfo total)"))
    if total is not None and util is not None:
        rec.rows.append(Row("requested (total x gpu_memory_utilization)", "bytes", None, total * util, None,
                            f"{total / GIB:.2f} GiB x {util:g}"))
    rec.rows.append(Row("activation peak (peak_torch - weights)", "bytes", act_l, None, est.get("activation"),
                        "optkg's profile-run estimate (kg.derive.budget.activation_peak_bytes) for the tokens V0 "
                        "profiles: max(max_model_len, 2048) without chunked prefill"))
    rec.rows.append(Row("non-torch memory", "bytes", g("non_torch"), None, est.get("non_torch"),
                        "CUDA context and cuBLAS workspace outside the torch allocator"))
    kv_l = g("kv_cache_memory")
    kv_rep = None
    if total is not None and util is not None and g("peak_torch") is not None and g("non_torch") is not None:
        kv_rep = total * util - g("peak_torch") - g("non_torch")
    kv_est = None
    if parts and total is not None and util is not None:
        kv_est = max(0.0, total * util - est["weights"] - est["activation"] - est["non_torch"])
    rec.kv_bytes_logged = kv_l
    rep_text = (f" = {total / GIB:.2f} x {util:g} - {g('peak_torch') / GIB:.2f} - {g('non_torch') / GIB:.2f} GiB = "
                f"{kv_rep / GIB:.3f} GiB" if kv_rep is not None else "")
    rec.rows.append(Row("KV cache memory", "bytes", kv_l, kv_rep, kv_est,
                        f"reproduced: total x utilization - peak_torch - non_torch{rep_text} (the logged parts, each "
                        "rounded to 0.01 GiB); estimated: the same with optkg's weights, activation and non-torch estimates"))
    if parts:
        per_block = parts["layout"].bytes_per_token_per_gpu * block
        blocks_l = g("num_gpu_blocks")
        blocks_rep = math.floor(kv_l / per_block) if kv_l is not None else None
        rec.rows.append(Row("GPU blocks", "blocks", blocks_l, blocks_rep,
                            math.floor(kv_est / per_block) if kv_est is not None else None,
                            "floor(KV memory / {:,.0f} B per {}-token block){}; the logged GiB is rounded to 0.01 GiB "
                            "(+-{:.1f} blocks)".format(per_block, block, "" if blocks_rep is None else
                                                       f": reproduced from the logged {kv_l / GIB:.2f} GiB = {blocks_rep:,}",
                                                       0.005 * GIB / per_block)))
        tok_rep = int(blocks_l) * block if blocks_l is not None else None
        tok_est = math.floor(kv_est / per_block) * block if kv_est is not None else None
        rec.rows.append(Row("KV token limit (# GPU blocks x block_size)", "tokens", g("kv_token_limit"), tok_rep, tok_est,
                            "V0 stores at most # GPU blocks x block_size tokens; a max_model_len above it is a startup "
                            "ValueError"))
        if mml:
            conc_rep = round(blocks_l * block / mml, 2) if blocks_l is not None else None
            conc_est = round(tok_est / mml, 2) if tok_est is not None else None
            rec.rows.append(Row(f"max concurrency at {mml:,} tokens", "x", g("max_concurrency"), conc_rep, conc_est,
                                "V0: GPU blocks x block_size / max_model_len" + (
                                    f" = {int(blocks_l):,} x {block} / {mml:,} = {blocks_l * block / mml:.4f}"
                                    if blocks_l is not None else "")))
            if tok_rep is not None and tok_rep < mml:
                rec.notes.append(f"max_model_len {mml:,} does not fit: the cache holds {tok_rep:,} tokens "
                                 f"({int(blocks_l):,} blocks x {block}); vLLM V0 refuses to start")


def reconcile_v1(log: StartupLog, parts: dict[str, Any] | None, stack, rec: Reconciliation) -> None:
    """vLLM V1: "GPU KV cache size" from the logged "Available KV cache memory" through the KV plan (module doc)."""
    g = log.get
    kv_l = g("kv_cache_memory")
    rec.kv_bytes_logged = kv_l
    plan = None
    sb = None
    if parts:
        mml = int(g("max_model_len") or parts["ns"].get("max_model_len") or parts["model"].vllm_default_max_model_len or
                  parts["model"].derived_max_model_len or 0)
        plan = parts["plan"](mml) if mml else None
        rec.weights_estimated = parts["weights"]
        if parts["budget"] is not None:
            rec.total_memory, rec.utilization = parts["total_memory"], parts["util"]
            sb = parts["budget"]()
        else:
            rec.notes.append("no --gpu: optkg's own budget estimate needs the GPU's memory")
    rec.rows.append(Row("weights", "bytes", g("weights"), None, parts["weights"] if parts else None,
                        "kg.derive.weights per GPU"))
    if sb is not None:
        for name, key in (("activation peak", "activation_peak"), ("CUDA graphs", "cuda_graphs")):
            line = sb.line(name)
            rec.rows.append(Row(name, "bytes", g(key), None, line.bytes if line else None, line.basis if line else ""))
    rec.rows.append(Row("KV cache memory", "bytes", kv_l, None, sb.kv_bytes if sb else None,
                        (f"optkg: {' - '.join(x.name for x in sb.lines)} at gpu_memory_utilization {sb.gpu_memory_utilization:g}"
                         f" ({sb.utilization_source}); {sb.error_text}") if sb else ""))
    if plan is not None:
        rep = plan.capacity(kv_l) if kv_l is not None else None
        est = plan.capacity(sb.kv_bytes) if sb is not None else None
        worked = (f" = int({rep['num_blocks']:,} / {plan.blocks_per_request:,} x {plan.max_model_len:,}) = "
                  f"{rep['kv_cache_size_tokens']:,} from the logged memory" if rep else "")
        rec.rows.append(Row("GPU KV cache size", "tokens", g("kv_cache_tokens"), rep["kv_cache_size_tokens"] if rep else None,
                            est["kv_cache_size_tokens"] if est else None,
                            f"int(num_blocks / blocks per request x max_model_len){worked} (the unrounded concurrency, "
                            f"vllm 0.33.0 v1/core/kv_cache_utils.py:1120-1128); num_blocks = floor(KV memory / "
                            f"{plan.bytes_per_block:,} B per {plan.block_size}-token block); the log's memory line is one "
                            "rank's, rounded to 0.01 GiB, while every rank gets the smallest rank's block count "
                            "(vllm 0.33.0 v1/core/kv_cache_planning.py:1580)"))
        rec.rows.append(Row(f"max concurrency at {plan.max_model_len:,} tokens", "x", g("max_concurrency"),
                            rep["max_concurrency"] if rep else None, est["max_concurrency"] if est else None,
                            f"num_blocks / {plan.blocks_per_request:,} blocks per request, rounded to 2 decimals as logged"
                            + (f" ({rep['num_blocks']:,} / {plan.blocks_per_request:,} = {rep['max_concurrency_exact']:.4f})"
                               if rep else "")))
