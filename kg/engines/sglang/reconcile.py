"""SGLang's startup logs beside optkg's estimate (``optkg reconcile``; kg.analyses.reconcile runs it).

Tokens come from the logged K size: each layer's K buffer holds ``#tokens + page_size`` rows of
``kv_heads_per_rank x head_dim`` elements (sglang 0.5.23 ``srt/mem_cache/memory_pool.py:2567-2578``),
so ``#tokens = K / (layers x heads x head_dim x bytes) - page_size``. With a vLLM log of the same model,
``compare_with_vllm`` says why their KV pools differ.
"""
from __future__ import annotations

import math
from typing import Any

from kg.engines.rows import Reconciliation, Row
from kg.inputs.logs import GIB, StartupLog


def reconcile_log(log: StartupLog, parts: dict[str, Any] | None, stack, rec: Reconciliation) -> None:
    """SGLang's pool: ``#tokens`` reproduced from the logged K size (module doc)."""
    g = log.get
    k, v, kvs = g("k_size"), g("v_size"), g("kv_size")
    rec.kv_bytes_logged = (k + v) if k is not None and v is not None else kvs
    page = int(parts["ns"].get("block_size") or 1) if parts else 1
    rep = None
    worked = ""
    if parts and (k is not None or kvs is not None):
        lay = parts["layout"]
        per_tok_layer = lay.bytes_per_token_layer_per_rank
        cell_k = lay.layers_per_rank * per_tok_layer / (1 if kvs is not None else 2)
        rep = math.floor((k if k is not None else kvs) / cell_k) - page
        m = parts["model"]
        cell = (f"{lay.kv_heads_per_rank} x {m.head_dim} x {lay.kv_element_bytes:g}" if not m.is_mla and kvs is None
                else f"{cell_k / lay.layers_per_rank:,.0f}")
        worked = f": floor({(k if k is not None else kvs) / GIB:.2f} GiB / ({lay.layers_per_rank} x {cell} B)) - {page} = {rep:,}"
    sb = None
    if parts and parts["budget"] is not None:
        rec.total_memory, rec.utilization = parts["total_memory"], parts["util"]
        sb = parts["budget"]()
    rec.weights_estimated = parts["weights"] if parts else None
    est = None
    if sb is not None:
        est = math.floor(sb.kv_bytes / parts["layout"].bytes_per_token_per_gpu) // page * page
    rec.rows.append(Row("KV cache memory (K + V)", "bytes", rec.kv_bytes_logged, None, sb.kv_bytes if sb else None,
                        (f"optkg: {' - '.join(x.name for x in sb.lines)} at mem_fraction_static {sb.gpu_memory_utilization:g}"
                         f"; {sb.error_text}") if sb else ""))
    rec.rows.append(Row("#tokens", "tokens", g("kv_cache_tokens"), rep, est,
                        f"reproduced from the logged K size: floor(K / (layers x KV heads x head_dim x bytes)) - page_size"
                        f"{worked} (each layer's buffer has #tokens + page_size rows, memory_pool.py:2574); the logged GB "
                        "(SGLang's GB is 2^30 bytes, memory_pool.py:116) has two decimals (+-0.005 GiB)"))


def compare_with_vllm(s: Reconciliation, v: Reconciliation) -> list[str]:
    """Why this SGLang log and a vLLM log of the same model and GPUs hold different KV pools (sentences)."""
    if v.engine != "vllm" or s.engine != "sglang" or not v.kv_bytes_logged or not s.kv_bytes_logged:
        return []
    out = [f"KV pool per GPU: SGLang {s.kv_bytes_logged / GIB:.2f} GiB (K + V) vs vLLM {v.kv_bytes_logged / GIB:.2f} GiB: "
           f"{s.kv_bytes_logged / v.kv_bytes_logged:.2f}x"]
    if v.total_memory and v.utilization and s.utilization and v.weights_estimated is not None:
        total = v.total_memory
        frac = (s.utilization - v.utilization) * total
        v_other = total * v.utilization - v.weights_estimated - v.kv_bytes_logged
        s_other = total * s.utilization - s.weights_estimated - s.kv_bytes_logged
        out.append(f"1. share of memory: SGLang mem_fraction_static {s.utilization:g} vs vLLM gpu_memory_utilization "
                   f"{v.utilization:g}: {frac / GIB:+.2f} GiB for SGLang")
        out.append(f"2. what else comes out of that share: vLLM subtracts its profiled activation peak, CUDA graphs and "
                   f"non-torch memory inside gpu_memory_utilization ({v_other / GIB:.2f} GiB beside optkg's "
                   f"{v.weights_estimated / GIB:.2f} GiB of weights); SGLang keeps activations and graphs in the "
                   f"remaining {1 - s.utilization:.0%} and takes only {s_other / GIB:.2f} GiB from its share")
        out.append(f"3. bytes per token are the same in both engines for this model, so the token counts differ by the "
                   f"same factor")
    return out
