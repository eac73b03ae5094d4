"""KV-cache derivations: bytes per token, KV-head replication under TP, valid DCP sizes, capacity.

All sizes are in bytes, all lengths in tokens. Formulas follow vLLM and are collected with their
sources in shared/reference/serving_engine_facts.md:

- KV heads per rank (GQA/MHA/MQA): ``max(1, H_kv // tp_size)``; MLA: 1 whatever the TP
  (vLLM ``ModelConfig.get_num_kv_heads``, vllm/config/model.py; facts §1.2).
- Replication of each KV head across the TP group: ``tp_size / H_kv`` when ``tp_size >= H_kv``
  else 1 (``QKVParallelLinear`` ``num_kv_head_replicas``, vllm/model_executor/layers/linear.py;
  facts §1.3); MLA: ``tp_size`` (the latent is not sharded, deepseek_v2.py; facts §1.5).
  DCP divides it: GQA ``max(1, tp/H_kv) / dcp``, MLA ``tp / dcp`` (facts §2.3, derived).
- Bytes per token per layer per rank: GQA ``kv_heads_per_rank * (head_dim + v_head_dim) * B``
  (``FullAttentionSpec.real_page_size_bytes`` / block_size, vllm/v1/kv_cache_interface.py);
  MLA ``(kv_lora_rank + qk_rope_head_dim) * B`` (``MLAAttentionSpec``). B = bytes per KV element
  (``kv_cache_dtype``: auto -> model dtype, fp8/int8 -> 1).
- Layers per rank: ``ceil(num_hidden_layers / pp_size)`` (the largest pipeline stage).
- Valid DCP sizes: ``tp % dcp == 0`` (D1); non-MLA also ``tp > H_kv`` (D5), ``dcp <= tp // H_kv`` (D6),
  ``(H_q // H_kv) % dcp == 0`` (D7); sliding-window layers need ``dcp == 1`` (D13)
  (vllm/config/parallel.py, vllm/config/model.py; facts §2.2).
- Capacity: tokens per GPU = ``floor(budget / bytes_per_token)`` rounded down to whole blocks; the
  scheduler-wide capacity is multiplied by ``dcp`` (kv_cache_utils log "Multiplying the GPU KV cache
  size by the dcp_world_size"); max concurrency = capacity / max_model_len, where each DCP rank
  budgets ``ceil(max_model_len / dcp)`` tokens (``FullAttentionSpec.max_memory_usage_bytes``).
- Sliding-window layers hold at most ``sliding_window`` tokens per request
  (``SlidingWindowSpec``); their per-sequence bytes use ``min(window, seq_len)``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import OptkgError
from .modelcfg import ModelFacts

GIB = 1024**3

KV_DTYPE_BYTES: dict[str, float] = {
    "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2, "float32": 4,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "int8": 1, "fp8_ds_mla": 1,
}
FP8_KV_DTYPES = {"fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"}


def kv_element_bytes(kv_cache_dtype: str, model: ModelFacts) -> float:
    """Bytes per cached K/V element for ``kv_cache_dtype`` ('auto' = model dtype). Raises OptkgError on unknown dtypes."""
    d = (kv_cache_dtype or "auto").lower()
    if d == "auto":
        return float(model.dtype_bytes)
    if d not in KV_DTYPE_BYTES:
        raise OptkgError(f"--kv-cache-dtype: unknown value '{kv_cache_dtype}' (expected auto, {', '.join(sorted(KV_DTYPE_BYTES))})")
    return float(KV_DTYPE_BYTES[d])


def kv_heads_per_rank(model: ModelFacts, tp_size: int) -> int:
    """KV heads each TP rank caches: MLA 1; else max(1, H_kv // tp_size) (vLLM get_num_kv_heads)."""
    if model.is_mla:
        return 1
    return max(1, model.num_key_value_heads // tp_size)


def replication_factor(model: ModelFacts, tp_size: int, dcp_size: int = 1) -> float:
    """How many ranks hold an identical copy of each cached KV element.

    GQA/MHA/MQA: ``max(1, tp_size / H_kv) / dcp_size``; MLA: ``tp_size / dcp_size``; never below 1.
    """
    base = tp_size if model.is_mla else max(1.0, tp_size / model.num_key_value_heads)
    return max(1.0, base / max(1, dcp_size))


def valid_dcp_sizes(model: ModelFacts, tp_size: int) -> list[int]:
    """DCP sizes vLLM accepts for this model at ``tp_size`` (D1, D5-D7, D13). ``[1]`` means DCP is impossible."""
    out = []
    for d in range(1, tp_size + 1):
        if tp_size % d:
            continue
        if d > 1:
            if model.num_sliding_layers:
                continue
            if not model.is_mla:
                h = model.num_key_value_heads
                if not tp_size > h or d > tp_size // h or (model.num_attention_heads // h) % d:
                    continue
        out.append(d)
    return out


def divisors(n: int) -> list[int]:
    """All positive divisors of n, ascending."""
    return [d for d in range(1, n + 1) if n % d == 0] if n > 0 else []


@dataclass
class KVLayout:
    """Per-token and per-sequence KV sizes of one model under one parallel configuration (bytes, tokens)."""

    model: str
    attention: str
    tp_size: int
    pp_size: int
    dcp_size: int
    kv_cache_dtype: str
    kv_element_bytes: float
    kv_heads_per_rank: int
    replication_factor: float
    layers_per_rank: int
    full_layers_per_rank: int
    sliding_layers_per_rank: int
    sliding_window: int | None
    bytes_per_token_layer_per_rank: float
    bytes_per_token_model: float          # whole model, no parallelism (every layer, every KV head)
    bytes_per_token_per_gpu: float        # one TP/PP rank, every cached layer, before DCP sharding
    bytes_per_token_per_gpu_unreplicated: float  # what it would be if KV were split exactly tp ways
    bytes_per_token_per_gpu_effective: float     # per context token after DCP sharding (per_gpu / dcp)
    valid_dcp_sizes: list[int] = field(default_factory=list)
    dcp_possible: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _check_positive(name: str, v: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise OptkgError(f"{name} must be a positive integer, found {v!r}")


def kv_layout(model: ModelFacts, tp_size: int = 1, pp_size: int = 1, dcp_size: int = 1,
              kv_cache_dtype: str = "auto") -> KVLayout:
    """Derive the KV layout (see module doc for formulas and sources). Raises OptkgError on non-positive sizes."""
    for n, v in (("tp_size", tp_size), ("pp_size", pp_size), ("dcp_size", dcp_size)):
        _check_positive(n, v)
    b = kv_element_bytes(kv_cache_dtype, model)
    heads = kv_heads_per_rank(model, tp_size)
    if model.is_mla:
        per_layer_rank = (model.kv_lora_rank or 0) + (model.qk_rope_head_dim or 0)
        per_layer_rank_b = per_layer_rank * b
        per_layer_model_b = per_layer_rank_b
        unrep_layer_b = per_layer_rank_b / tp_size
    else:
        per_layer_rank_b = heads * (model.head_dim + model.v_head_dim) * b
        per_layer_model_b = model.num_key_value_heads * (model.head_dim + model.v_head_dim) * b
        unrep_layer_b = per_layer_model_b / tp_size
    layers_rank = math.ceil(model.num_hidden_layers / pp_size)
    sliding_rank = math.ceil(model.num_sliding_layers / pp_size) if model.num_sliding_layers else 0
    full_rank = layers_rank - sliding_rank
    per_gpu = per_layer_rank_b * layers_rank
    dcps = valid_dcp_sizes(model, tp_size)
    return KVLayout(
        model=model.name, attention=model.attention, tp_size=tp_size, pp_size=pp_size, dcp_size=dcp_size,
        kv_cache_dtype=kv_cache_dtype, kv_element_bytes=b, kv_heads_per_rank=heads,
        replication_factor=replication_factor(model, tp_size, dcp_size), layers_per_rank=layers_rank,
        full_layers_per_rank=full_rank, sliding_layers_per_rank=sliding_rank, sliding_window=model.sliding_window,
        bytes_per_token_layer_per_rank=per_layer_rank_b,
        bytes_per_token_model=per_layer_model_b * model.num_hidden_layers,
        bytes_per_token_per_gpu=per_gpu,
        bytes_per_token_per_gpu_unreplicated=unrep_layer_b * layers_rank,
        bytes_per_token_per_gpu_effective=per_gpu / dcp_size,
        valid_dcp_sizes=dcps, dcp_possible=len(dcps) > 1,
    )


def sequence_bytes_per_gpu(layout: KVLayout, seq_len: int) -> float:
    """KV bytes one sequence of ``seq_len`` tokens occupies on one GPU (sliding layers capped at the window; DCP-sharded)."""
    if seq_len < 0:
        raise OptkgError(f"sequence length must be >= 0, found {seq_len}")
    tokens_rank = math.ceil(seq_len / layout.dcp_size)
    full = layout.full_layers_per_rank * layout.bytes_per_token_layer_per_rank * tokens_rank
    sw = 0.0
    if layout.sliding_layers_per_rank and layout.sliding_window:
        sw = layout.sliding_layers_per_rank * layout.bytes_per_token_layer_per_rank * min(layout.sliding_window, seq_len)
    return full + sw


@dataclass
class KVCapacity:
    """KV capacity for a per-GPU budget (bytes) and a max_model_len (tokens)."""

    kv_budget_bytes_per_gpu: float
    block_size: int
    kv_tokens_per_gpu: int          # tokens of KV one GPU's budget holds (whole blocks)
    kv_tokens_total: int            # scheduler-wide: per GPU x dcp_size (distinct tokens across the DCP group)
    max_model_len: int | None
    max_concurrency: float | None   # requests at max_model_len that fit at once
    max_model_len_that_fits: int    # longest single request the cache can hold

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def kv_capacity(layout: KVLayout, kv_budget_bytes_per_gpu: float, max_model_len: int | None = None,
                block_size: int = 16) -> KVCapacity:
    """Tokens that fit in ``kv_budget_bytes_per_gpu`` and max concurrency at ``max_model_len`` (see module doc)."""
    if kv_budget_bytes_per_gpu < 0:
        raise OptkgError(f"KV budget must be >= 0 bytes, found {kv_budget_bytes_per_gpu}")
    _check_positive("block_size", block_size)
    per_token = layout.bytes_per_token_per_gpu
    blocks = int(kv_budget_bytes_per_gpu // (per_token * block_size)) if per_token else 0
    tokens = blocks * block_size
    total = tokens * layout.dcp_size
    conc = None
    if max_model_len:
        _check_positive("max_model_len", max_model_len)
        per_req = sequence_bytes_per_gpu(layout, max_model_len)
        conc = round(kv_budget_bytes_per_gpu / per_req, 2) if per_req else None
    return KVCapacity(kv_budget_bytes_per_gpu, block_size, tokens, total, max_model_len, conc, total)


def estimate_weight_bytes(model: ModelFacts, weight_bytes_per_param: float | None = None) -> float:
    """Rough weight size in bytes (+-10 %): embeddings + attention + MLP/experts per layer.

    Used only when the user gives no KV budget. Attention: q/o ``H_q*d*h`` each, k/v ``H_kv*d*h``
    each (MLA approximated by the same with H_kv = H_q/4); MLP ``3*h*inter``; MoE ``3*h*moe_inter``
    per expert. ``weight_bytes_per_param`` defaults to the model dtype (1 for fp8 checkpoints).
    """
    h = model.hidden_size
    d = model.head_dim
    b = weight_bytes_per_param or (1 if (model.quant_method or "").startswith("fp8") else model.dtype_bytes)
    kvh = model.num_key_value_heads if not model.is_mla else max(1, model.num_attention_heads // 4)
    attn = 2 * model.num_attention_heads * d * h + 2 * kvh * d * h
    if model.is_moe and model.moe_intermediate_size:
        mlp = 3 * h * model.moe_intermediate_size * (model.num_experts or 1)
        if model.shared_expert_intermediate_size:
            mlp += 3 * h * model.shared_expert_intermediate_size
    else:
        mlp = 3 * h * (model.intermediate_size or 4 * h)
    emb = 2 * h * (model.vocab_size or 0)
    return float((attn + mlp) * model.num_hidden_layers + emb) * b


def kv_budget_bytes(gpu_memory_bytes: float, gpu_memory_utilization: float, weight_bytes_per_gpu: float,
                    activation_reserve_bytes: float = 0.0) -> float:
    """vLLM-style KV budget per GPU: ``memory * utilization - weights - reserve`` (never negative).

    Source: vLLM ``gpu_memory_utilization`` semantics (vllm/config/cache.py) and the worker's
    ``determine_available_memory`` (requested memory minus weights and peak activations).
    """
    if not 0 < gpu_memory_utilization <= 1:
        raise OptkgError(f"gpu_memory_utilization must be in (0, 1], found {gpu_memory_utilization}")
    return max(0.0, gpu_memory_bytes * gpu_memory_utilization - weight_bytes_per_gpu - activation_reserve_bytes)
