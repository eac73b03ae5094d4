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
  (``kv_cache_dtype``: auto -> model dtype, fp8/int8 -> 1, nvfp4 / SGLang fp4_e2m1 -> 0.5625 = a
  4-bit value plus one 1-byte scale per 16 elements). ``fp8_ds_mla`` is a packed MLA cell of a fixed
  656 bytes per token per layer (512 fp8 latent + 4 fp32 scales + 64 bf16 RoPE values; vLLM
  ``MLAAttention`` ``state_content_bytes``, facts §1.5), ``nvfp4_ds_mla`` 352.
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

from kg.core.errors import OptkgError
from kg.core.intmath import divisors as _divisors
from kg.inputs.modelcfg import ModelFacts

GIB = 1024**3

KV_DTYPE_BYTES: dict[str, float] = {
    "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2, "float32": 4,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "int8": 1, "fp8_ds_mla": 1, "nvfp4_ds_mla": 0.5,
    # 4-bit value + one 1-byte (fp8 / ue8m0) scale per 16 elements: vLLM NVFP4 KV packed last dim
    # (kv_cache_interface.py); SGLang MHATokenToKVPoolFP4 (k // 2 bytes + n*k // 16 scale bytes)
    "nvfp4": 0.5625, "nvfp4_4over6": 0.5625, "fp4_e2m1": 0.5625,
}
FP8_KV_DTYPES = {"fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"}
# packed MLA cells of a fixed size, bytes per token per layer (vLLM MLAAttention state_content_bytes)
MLA_PACKED_BYTES: dict[str, int] = {"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}
SPARSE_MLA_AS_DS_MLA = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "int8")


class UnmodelledKVDtype(OptkgError):
    """A kv_cache_dtype the engine accepts but whose cache size optkg does not model."""


class UnmodelledKVShape(OptkgError):
    """A model whose layers cache different KV shapes that optkg does not size per layer (Gemma 4's global layers)."""


def per_layer_kv_shape_reason(model: ModelFacts) -> str | None:
    """Why the KV bytes of ``model`` are not evaluable, or None. Gemma 4's full-attention layers cache
    ``num_global_key_value_heads x global_head_dim`` (31B: 4 x 512) while its sliding layers cache
    ``num_key_value_heads x head_dim`` (16 x 256): vLLM 0.34.0 ``models/gemma4.py:598-608`` builds each layer from
    ``config.per_layer_config[layer_idx]`` and ``:407-412`` replicates KV heads when tp_size exceeds them."""
    if model.global_head_dim is None and model.num_global_key_value_heads is None:
        return None
    return (f"not evaluable: per-layer head sizes of Gemma 4's global layers ({model.num_full_layers} full-attention "
            f"layers cache {model.num_global_key_value_heads} KV heads x {model.global_head_dim}, the sliding ones "
            f"{model.num_key_value_heads} x {model.head_dim}; optkg sizes one shape for every layer)")


def kv_element_bytes(kv_cache_dtype: str, model: ModelFacts) -> float:
    """Bytes per cached K/V element for ``kv_cache_dtype`` ('auto' = model dtype). Raises OptkgError on unknown dtypes."""
    d = (kv_cache_dtype or "auto").lower()
    if d == "auto":
        return float(model.dtype_bytes)
    if d not in KV_DTYPE_BYTES:
        raise UnmodelledKVDtype(f"--kv-cache-dtype: '{kv_cache_dtype}' is not a KV-cache dtype optkg can size "
                                f"(known: auto, {', '.join(sorted(KV_DTYPE_BYTES))})")
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
    """DCP sizes vLLM accepts for this model at ``tp_size`` (D1, D5-D7, D13). ``[1]`` means DCP is impossible.

    Walks only the divisors of ``tp_size`` (O(sqrt(tp_size))), so a huge tp_size cannot stall.
    """
    return dcp_group_sizes(model, tp_size, query_groups_divide=True)


def dcp_group_sizes(model: ModelFacts, tp_size: int, query_groups_divide: bool) -> list[int]:
    """The divisors ``d`` of ``tp_size`` a DCP group may take: every one for MLA; for GQA only when TP replicates
    KV heads (tp_size > H_kv) and ``d <= tp_size / H_kv``, and (vLLM) ``d`` divides the query heads per KV head."""
    if model.num_sliding_layers or tp_size < 2:
        return [1]
    if model.is_mla:
        return divisors(tp_size)
    h = model.num_key_value_heads
    if not tp_size > h:
        return [1]
    group = model.num_attention_heads // h
    return [d for d in divisors(tp_size) if d <= tp_size // h and (not query_groups_divide or group % d == 0)]


def dcp_impossible_reason(model: ModelFacts, tp_size: int) -> str | None:
    """Why ``dcp_group_sizes`` leaves only DCP size 1 for ``model`` at ``tp_size`` (None when a larger size exists):
    the sliding-window layers (vLLM refuses DCP with them), TP 1, or a GQA/MHA model whose TP does not replicate
    its KV heads (tp_size <= num_key_value_heads)."""
    if len(dcp_group_sizes(model, tp_size, query_groups_divide=True)) > 1:
        return None
    if model.num_sliding_layers:
        return (f"{model.num_sliding_layers} of {model.num_hidden_layers} layers use a sliding window "
                f"({model.sliding_window:,} tokens), and vLLM refuses DCP with sliding-window layers")
    if tp_size < 2:
        return "tp_size 1: DCP splits a TP group"
    if not model.is_mla and not tp_size > model.num_key_value_heads:
        return (f"needs tp_size > num_key_value_heads for GQA/MHA: tp {tp_size}, "
                f"{model.num_key_value_heads} KV heads")
    return "no divisor of tp_size divides the query heads per KV head"


def divisors(n: int) -> list[int]:
    """All positive divisors of n, ascending (O(sqrt(n)), n at most ``kg.core.intmath.MAX_DIVISOR_INPUT``).

    Raises OptkgError past that ceiling (a config value no real model has)."""
    try:
        return _divisors(n)
    except ValueError as e:
        raise OptkgError(str(e)) from None


def valid_tp_sizes(model: ModelFacts) -> list[int]:
    """The tp_size values every split the engines assert on allows, ascending.

    The intersection of: divisors of num_attention_heads (vLLM ``ModelConfig.verify_with_parallel_config``);
    for GQA/MHA, sizes that divide or are a multiple of num_key_value_heads (``QKVParallelLinear``, the
    kv-heads-not-divisible-by-tp rule); for a dense model, divisors of intermediate_size (the MLP's
    ``MergedColumnParallelLinear`` / ``RowParallelLinear`` call ``divide(intermediate_size, tp_size)``, which
    asserts: vllm 0.34.0 model_executor/layers/linear.py:505, :1741, distributed/utils.py:143-147). MoE expert
    splits have their own rules (quantization.yaml).
    Qwen2-7B: heads 28 -> {1, 2, 4, 7, 14, 28}; 4 KV heads drop 7 and 14; 18944 = 2^9 x 37 drops 28 -> [1, 2, 4].
    """
    valid = divisors(model.num_attention_heads)
    if not model.is_mla:
        kv = model.num_key_value_heads
        valid = [d for d in valid if (d % kv == 0 if d > kv else kv % d == 0)]
    inter = model.intermediate_size
    if not model.is_moe and isinstance(inter, int) and inter > 0:
        valid = [d for d in valid if inter % d == 0]
    return valid


def check_parallel_sizes(model: ModelFacts, tp_size: int, pp_size: int = 1) -> None:
    """Refuse a tp_size / pp_size no engine could start with (OptkgError naming the valid values).

    tp_size must divide num_attention_heads (vLLM ``ModelConfig.verify_with_parallel_config``) and,
    for GQA/MHA, divide or be a multiple of num_key_value_heads (``QKVParallelLinear``; facts §1.3);
    pp_size must not exceed num_hidden_layers (each stage needs a layer).
    """
    h = model.num_attention_heads
    if tp_size > h or h % tp_size:
        valid = valid_tp_sizes(model)
        raise OptkgError(f"--tp: {tp_size} does not divide num_attention_heads {h} of {model.name}; "
                         f"valid tp sizes: {', '.join(map(str, valid))}")
    if not model.is_mla:
        kv = model.num_key_value_heads
        if (tp_size > kv and tp_size % kv) or (tp_size < kv and kv % tp_size):
            raise OptkgError(f"--tp: {tp_size} and num_key_value_heads {kv} of {model.name} do not divide each other "
                             f"(QKVParallelLinear needs one to divide the other)")
    if pp_size > model.num_hidden_layers:
        raise OptkgError(f"--pp: {pp_size} pipeline stages for {model.num_hidden_layers} layers of {model.name}; "
                         f"pp_size must be at most {model.num_hidden_layers}")


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
    dcp_impossible_reason: str | None = None  # why only DCP size 1 (dcp_impossible_reason), None when larger ones exist

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
    if reason := per_layer_kv_shape_reason(model):
        raise UnmodelledKVShape(reason)
    b = kv_element_bytes(kv_cache_dtype, model)
    heads = kv_heads_per_rank(model, tp_size)
    packed = MLA_PACKED_BYTES.get((kv_cache_dtype or "").lower())
    if packed is not None and not model.is_mla:
        raise OptkgError(f"--kv-cache-dtype: '{kv_cache_dtype}' is a packed MLA cache layout; "
                         f"{model.name} uses {model.attention.upper()} attention")
    if model.is_mla:
        per_layer_rank = (model.kv_lora_rank or 0) + (model.qk_rope_head_dim or 0)
        if model.index_head_dim and packed is None and (kv_cache_dtype or "").lower() in SPARSE_MLA_AS_DS_MLA:
            packed = MLA_PACKED_BYTES["fp8_ds_mla"]  # sparse MLA stores quantised KV as fp8_ds_mla (mla_attention.py:358-375)
        per_layer_rank_b = float(packed) if packed is not None else per_layer_rank * b
        if model.index_head_dim:  # DeepSeek-V3.2 indexer cache: uint8 keys + an fp32 scale per 128 (deepseek_v2.py:729-735)
            per_layer_rank_b += model.index_head_dim + model.index_head_dim // 128 * 4
        per_layer_model_b = per_layer_rank_b
        unrep_layer_b = per_layer_rank_b / tp_size
    else:
        per_layer_rank_b = heads * (model.head_dim + model.v_head_dim) * b
        per_layer_model_b = model.num_key_value_heads * (model.head_dim + model.v_head_dim) * b
        unrep_layer_b = per_layer_model_b / tp_size
    # layers that hold no KV (Gated DeltaNet / Mamba state, MLP-only) do not count (kg.engines.vllm.kv_plan sizes their state)
    no_kv = sum(1 for k in model.layer_kinds if k not in ("full", "sliding", "chunked"))
    layers_rank = math.ceil((model.num_hidden_layers - no_kv) / pp_size)
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
        bytes_per_token_model=per_layer_model_b * (model.num_hidden_layers - no_kv),
        bytes_per_token_per_gpu=per_gpu,
        bytes_per_token_per_gpu_unreplicated=unrep_layer_b * layers_rank,
        bytes_per_token_per_gpu_effective=per_gpu / dcp_size,
        valid_dcp_sizes=dcps, dcp_possible=len(dcps) > 1,
        dcp_impossible_reason=None if len(dcps) > 1 else dcp_impossible_reason(model, tp_size),
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
    max_model_len_that_fits: int    # longest single request the cache can hold (whole blocks, DCP-sharded)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def kv_capacity(layout: KVLayout, kv_budget_bytes_per_gpu: float, max_model_len: int | None = None,
                block_size: int = 16, null_block_bytes: float = 0.0) -> KVCapacity:
    """Tokens that fit in ``kv_budget_bytes_per_gpu`` and max concurrency at ``max_model_len`` (see module doc).

    ``null_block_bytes``: memory the engine holds back from the one-request check and its length estimate
    (vLLM >= 0.29.0 keeps one pool block as the null block, kg.engines.vllm.kv_plan.null_block_bytes); the longest
    request that fits is searched in the budget less that block."""
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
    fits = longest_sequence_that_fits(layout, max(0.0, kv_budget_bytes_per_gpu - null_block_bytes), block_size)
    return KVCapacity(kv_budget_bytes_per_gpu, block_size, tokens, total, max_model_len, conc, fits)


def cacheable_tokens(layout: KVLayout, kv_budget_bytes_per_gpu: float, block_size: int = 16) -> int:
    """Tokens vLLM V1's block pool can keep for the prefix cache, scheduler-wide: the budget's whole
    ``block_size``-token blocks less the null block ``BlockPool`` never hands out (vLLM 0.33.0
    ``v1/core/block_pool.py:191``, ``self.null_block = self.free_block_queue.popleft()``), times ``dcp_size``."""
    if kv_budget_bytes_per_gpu < 0:
        raise OptkgError(f"KV budget must be >= 0 bytes, found {kv_budget_bytes_per_gpu}")
    _check_positive("block_size", block_size)
    per_block = layout.bytes_per_token_per_gpu * block_size
    blocks = int(kv_budget_bytes_per_gpu // per_block) if per_block else 0
    return max(0, blocks - 1) * block_size * layout.dcp_size


def request_kv_bytes_per_gpu(layout: KVLayout, seq_len: int, block_size: int = 16) -> float:
    """KV bytes vLLM reserves on one GPU for one request of ``seq_len`` tokens (whole blocks).

    vLLM ``FullAttentionSpec.max_memory_usage_bytes``: ``cdiv(ceil(seq_len / dcp), block_size)``
    pages per full-attention layer; sliding-window layers hold ``min(window, seq_len)`` tokens
    (``SlidingWindowSpec``), also in whole blocks. ``check_enough_kv_cache_memory``
    (vllm/v1/core/kv_cache_utils.py) refuses to start when this exceeds the KV memory.
    """
    if seq_len < 0:
        raise OptkgError(f"sequence length must be >= 0, found {seq_len}")
    per_layer = layout.bytes_per_token_layer_per_rank
    full_tokens = math.ceil(math.ceil(seq_len / layout.dcp_size) / block_size) * block_size
    full = layout.full_layers_per_rank * per_layer * full_tokens
    sw = 0.0
    if layout.sliding_layers_per_rank and layout.sliding_window:
        sw_tokens = math.ceil(min(layout.sliding_window, seq_len) / block_size) * block_size
        sw = layout.sliding_layers_per_rank * per_layer * sw_tokens
    return full + sw


LONGEST_LIMIT = 1 << 40  # tokens: the search's upper end (a window-bounded layout fits any length)


def longest_sequence_that_fits(layout: KVLayout, kv_budget_bytes_per_gpu: float, block_size: int = 16,
                               limit: int = LONGEST_LIMIT) -> int:
    """Longest single request (tokens) whose KV fits in the per-GPU budget (vLLM ``estimate_max_model_len``:
    a binary search over ``request_kv_bytes_per_gpu``); 0 when not even one token fits."""
    if request_kv_bytes_per_gpu(layout, 1, block_size) > kv_budget_bytes_per_gpu:
        return 0
    lo, hi = 1, limit
    if request_kv_bytes_per_gpu(layout, hi, block_size) <= kv_budget_bytes_per_gpu:
        return hi
    while lo < hi:  # invariant: lo fits, hi does not
        mid = (lo + hi + 1) // 2
        if mid == hi:
            break
        if request_kv_bytes_per_gpu(layout, mid, block_size) <= kv_budget_bytes_per_gpu:
            lo = mid
        else:
            hi = mid
    return lo


# weight sizes moved to kg.derive.weights; re-exported here for callers of the old names
from kg.derive.weights import (estimate_weight_bytes, weight_bytes_per_gpu,  # noqa: E402,F401
                               weight_params, weight_scheme)
from kg.derive.weights import legacy_bytes_per_param as weight_bytes_per_param  # noqa: E402,F401


def compute_capability(hw: dict[str, Any] | None) -> float | None:
    """The hardware entry's ``compute_capability`` as a float (e.g. 9.0), None when absent or unreadable."""
    cc = (hw or {}).get("compute_capability")
    try:
        return float(cc) if cc is not None else None
    except (TypeError, ValueError):
        return None


def gpu_memory_bytes(hw: dict[str, Any]) -> float | None:
    """Memory of one GPU the engine can see, in bytes: ``memory_visible_mib`` (what nvidia-smi /
    torch report on a real card, e.g. H100 SXM 81,559 MiB) when the hardware file has it, else the
    vendor figure ``memory_gib`` read as GiB. None when neither is known."""
    if hw.get("memory_visible_mib"):
        return float(hw["memory_visible_mib"]) * 1024**2
    if hw.get("memory_gib"):
        return float(hw["memory_gib"]) * GIB
    return None


def checked_kv_budget_gib(value: Any, where: str, hardware: dict[str, Any] | None = None) -> float:
    """A KV budget per GPU in GiB checked as every command checks it (check, kv, fit, sweep): a finite number
    in [0, ``MAX_KV_BUDGET_GIB``] (kg.inputs.settingcheck), and, with a GPU known, at most the memory the
    engine sees on it (``gpu_memory_bytes``: H100 SXM 81,559 MiB = 79.65 GiB): the KV cache lives in that
    memory, so more is a unit slip or a total over GPUs, and the token count it gives would be invented.
    Raises OptkgError '<where>: ...' naming the GPU and its memory."""
    from kg.inputs.settingcheck import MAX_KV_BUDGET_GIB, coerce_value
    gib = float(coerce_value(value, "number", where, 0))  # finite, >= 0 (nan, inf, strings: OptkgError)
    if gib > MAX_KV_BUDGET_GIB:
        raise OptkgError(f"{where}: {gib:g} GiB of KV cache per GPU is more than any GPU holds (optkg takes "
                         f"at most {MAX_KV_BUDGET_GIB:,} GiB); give the KV budget of one GPU in GiB")
    mem = gpu_memory_bytes(hardware) if hardware else None
    if mem is not None and gib * GIB > mem:
        raise OptkgError(f"{where}: {gib:g} GiB of KV cache per GPU is more than the {hardware.get('id')}'s "
                         f"{mem / GIB:.2f} GiB of memory; give the KV budget of one GPU in GiB")
    return gib


def kv_budget_bytes(gpu_memory_bytes: float, gpu_memory_utilization: float, weight_bytes_per_gpu: float,
                    activation_reserve_bytes: float = 0.0) -> float:
    """vLLM-style KV budget per GPU: ``memory * utilization - weights - reserve`` (never negative).

    Source: vLLM ``gpu_memory_utilization`` semantics (vllm/config/cache.py) and the worker's
    ``determine_available_memory`` (requested memory minus weights and peak activations).
    """
    if not 0 < gpu_memory_utilization <= 1:
        raise OptkgError(f"gpu_memory_utilization must be in (0, 1], found {gpu_memory_utilization}")
    return max(0.0, gpu_memory_bytes * gpu_memory_utilization - weight_bytes_per_gpu - activation_reserve_bytes)
