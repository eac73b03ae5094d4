"""SGLang's KV token pools as SGLang 0.5.23 sizes them (``sglang/srt/model_executor/pool_configurator.py``).

Default pool (``DefaultPoolConfigurator.calculate_pool_sizes``, ``:637-647``): ``max_total_num_tokens =
available // cell_size`` floored to ``page_size``; ``cell_size`` = bytes one token takes over every layer.

Hybrid sliding-window pool (``HybridSWAPoolConfigurator``, ``:656-921``), chosen when the architecture is in
``is_hybrid_swa_model``'s list (``configs/model_config.py:2651-2690``: gpt-oss, Llama-4, Gemma-4, MiMo-V2,
Step-3.5 …; not Gemma-2/3 or Mistral, which use the default pool) and ``--disable-hybrid-swa-memory`` is not
given: one token of the full pool costs ``full_per_token x full_layers + swa_full_tokens_ratio x
swa_per_token x swa_layers`` (``_recompute_cell_size``, ``:786-805``); ``full_tokens`` =
``available // cell`` (``calculate_pool_sizes``, ``:907-916``) floored to the page, ``swa_tokens =
int(full_tokens x ratio)`` floored to the page (``_solve_pool_sizes``, ``:859-893``). ``--swa-full-tokens-ratio`` defaults to 0.8
(``arg_groups/fields/schedule.py:150-160``). All-sliding models have no ratio: ``swa_tokens = available //
(swa_per_token x layers)``. ``max_total_num_tokens`` (the ``#tokens`` SGLang logs) is ``full_tokens``.

Per-token bytes per layer: ``num_kv_heads(attn_tp) x (head_dim + v_head_dim) x kv_size`` (``:700-712``),
heads split over the attention TP group and replicated below one per rank.
Mamba / Gated-DeltaNet hybrids (Qwen3-Next, Qwen3.5, NemotronH, Falcon-H1, granite-4 hybrids, Jamba ...; any
model whose layers hold a linear-attention or Mamba state): SGLang 0.5.23 takes a separate state pool out of the
KV memory before it sizes the token pool (``KVCacheConfigurator._handle_max_mamba_cache``,
``mem_cache/kv_cache_configurator.py:3229-3409``), with ``rest`` the memory left for both:

- one request's state, bytes: per linear layer the conv state ``(conv_dim / tp, conv_kernel - 1)`` in the conv
  dtype (bfloat16, ``SGLANG_MAMBA_CONV_DTYPE``, ``environ.py:1628``) and the SSM state ``(heads / tp, head_dim,
  state_size)`` in the SSM dtype (``--mamba-ssm-dtype``, else the config's ``mamba_ssm_dtype``, else float32:
  ``configs/mamba_utils.py:47-106``), ``conv_dim = heads x head_dim + 2 x groups x state_size`` with the groups
  padded up to ``tp`` when they do not divide it (``Mamba2StateShape.create``, ``:195-244``; ``mamba_cache_per_req``
  ``:116-125``). GDN maps ``linear_num_value_heads`` / ``linear_value_head_dim`` / ``linear_num_key_heads`` /
  ``linear_key_head_dim`` onto heads / head_dim / groups / state_size (``configs/qwen3_next.py:288-313``).
- slots: ``--max-mamba-cache-size K`` (per attention-DP rank ``K // dp``, ``:3303-3308``); without the radix cache
  and with ``--max-running-requests N``, ``K = N // dp`` (``:3310-3317``); else
  ``K = int((rest x r / (1 + r) - per_req) // per_req)`` with ``r = --mamba-full-memory-ratio`` (default 0.9,
  ``arg_groups/fields/schedule.py:220-226``; ``kv_cache_configurator.py:3349-3387``); the pool holds ``K + 1``
  slots (one padding slot, ``:3404-3409``), so the KV pool gets ``rest - (K + 1) x per_req``.
- the token pool counts the full-attention layers only (``DefaultPoolConfigurator``,
  ``model_executor/pool_configurator.py:228-236``): ``tokens = (rest - state) // cell`` floored to the page.
- running requests: ``min(clamp(int(tokens / context_len x 512), 2048, 4096), tokens // 2)`` or the given
  ``--max-running-requests // dp`` (``resolve_max_num_reqs``, ``:3119-3170``), capped at ``K // slots_per_request``:
  1 without the radix cache, else 3 (``MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO``, ``:227``) plus the tracking
  slots of the ``extra_buffer`` strategy, 2 with the overlap scheduler, 1 without or lazy (``:3062-3086``;
  ``mem_cache/allocation_sizing.py:11-19``). ``--mamba-radix-cache-strategy auto`` picks ``extra_buffer`` for the
  architectures that support it (``arg_groups/overrides.py:402-432, 476-486``), else ``no_buffer``.
Not modelled: speculative decoding's intermediate SSM states, ReplaySSM rings, the pre-capture activation reserve
(``:3021-3032``), PD disaggregation, pipeline stages' per-stage share; releases before 0.5.23.

Not modelled here: the request-cap configurator (an explicit ``--max-running-requests`` with SWA,
``SWARequestCapPoolConfigurator``), unified memory, DeepSeek-V4 pools, drafts' KV.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kg.core.errors import OptkgError
from kg.derive.kv import kv_element_bytes, kv_heads_per_rank
from kg.inputs.modelcfg import ModelFacts

# configs/model_config.py:88-96 (SWA_SINK_ARCHS) and :2655-2679, SGLang 0.5.23
SGLANG_HYBRID_SWA_ARCHS = frozenset({
    "GptOssForCausalLM", "GraniteSWAForCausalLM", "GraniteMoeSWAForCausalLM", "IQuestQ1ForCausalLM",
    "BeamForCausalLM", "Llama4ForConditionalGeneration", "Step3p5ForCausalLM", "Step3p7ForConditionalGeneration",
    "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration", "LagunaForCausalLM", "MellumForCausalLM",
    "MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM",
})
SWA_FULL_TOKENS_RATIO = 0.8
MAMBA_FULL_MEMORY_RATIO = 0.9          # arg_groups/fields/schedule.py:220-226 (fallback=0.9)
MAMBA_SLOTS_PER_REQUEST_BASE = 3       # mem_cache/kv_cache_configurator.py:227
MAMBA_CONV_DTYPE_BYTES = 2             # SGLANG_MAMBA_CONV_DTYPE = bfloat16 (environ.py:1628)
# arg_groups/overrides.py:402-432 (_MAMBA_EXTRA_BUFFER_ARCHS), SGLang 0.5.23
SGLANG_MAMBA_EXTRA_BUFFER_ARCHS = frozenset({
    "KimiLinearForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM", "Qwen3NextForCausalLM", "Qwen4ExpForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "MiniCPMV4_6ForConditionalGeneration",
    "MiniCPMV4_7ForConditionalGeneration", "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM",
    "BailingMoeV3VLForConditionalGeneration", "FalconH1ForCausalLM", "GraniteMoeHybridForCausalLM",
    "Glm5NextForConditionalGeneration", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM",
    "NemotronH_Omni_Reasoning_V3", "KimiK3ForConditionalGeneration", "InklingForConditionalGeneration",
    "InklingForConditionalGenerationMTP",
})
SSM_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass
class SGLangPools:
    """SGLang's token pools on one rank: ``max_total_num_tokens`` (the logged ``#tokens``), and for a
    hybrid sliding-window model the full and SWA pools (tokens) with the bytes one full-pool token costs."""

    kind: str                     # default | hybrid-swa | all-swa | hybrid-mamba | encoder-decoder
    max_total_num_tokens: int
    full_tokens: int
    swa_tokens: int
    cell_bytes: float
    swa_full_tokens_ratio: float | None
    source: str
    mamba: "SGLangMambaPool | None" = None
    layers: str = ""              # the layers each pool serves, e.g. "full x12 + swa x36 (...)"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SGLangMambaPool:
    """SGLang's Mamba / GDN state pool on one rank (module doc): bytes, slots and the request cap it sets."""

    state_bytes_per_request: int
    max_mamba_cache_size: int          # K, state slots of one attention-DP rank (the pool holds K + 1)
    memory_bytes: int                  # (K + 1) x state_bytes_per_request
    mamba_full_memory_ratio: float | None  # None when --max-mamba-cache-size fixed K
    ssm_dtype: str
    strategy: str                      # radix-off | no_buffer | extra_buffer | extra_buffer_lazy
    slots_per_request: int
    max_running_requests: int          # after the Mamba cap
    requests_before_mamba_cap: int
    capped_by_mamba: bool
    source: str = "sglang 0.5.23 mem_cache/kv_cache_configurator.py:3062-3170, 3229-3409"


def linear_state_layers(model: ModelFacts) -> int:
    """Decoder layers that hold a Mamba / linear-attention state instead of KV."""
    return sum(1 for k in (model.layer_kinds or []) if k in ("linear", "mamba"))


def sglang_mamba_state_bytes(model: ModelFacts, attn_tp_size: int, mamba_ssm_dtype: str | None = None) -> tuple[int, str]:
    """(bytes of one request's state over every linear layer on one rank, the SSM dtype used) as SGLang 0.5.23
    sizes it (module doc). Raises OptkgError when the model names no state sizes or tp does not divide them."""
    la = model.linear_attention or {}
    tp = int(attn_tp_size)
    if la.get("kind") == "gdn":
        heads, head_dim = la["linear_num_value_heads"], la["linear_value_head_dim"]
        groups, state = la["linear_num_key_heads"], la["linear_key_head_dim"]
    elif la.get("kind") == "mamba2":
        heads, head_dim, groups, state = la["mamba_num_heads"], la["mamba_head_dim"], la["n_groups"], la["ssm_state_size"]
    else:
        raise OptkgError(f"{model.name}: its linear-attention layers name no state sizes optkg reads")
    if groups % tp:
        groups += tp - groups  # extra_groups_for_head_shards (configs/mamba_utils.py:29-39)
    conv_dim = heads * head_dim + 2 * groups * state
    if conv_dim % tp or heads % tp:
        raise OptkgError(f"--tp: attention TP {tp} does not divide the {model.name} state (conv_dim {conv_dim}, "
                         f"{heads} heads)")
    name = (mamba_ssm_dtype or la.get("config_mamba_ssm_dtype") or "float32").lower()
    if name in ("auto",):
        name = str(la.get("config_mamba_ssm_dtype") or "float32").lower()
    if name not in SSM_DTYPE_BYTES:
        raise OptkgError(f"--mamba-ssm-dtype: '{mamba_ssm_dtype}' (expected float32, bfloat16 or float16)")
    conv = conv_dim // tp * (int(la["conv_kernel"]) - 1) * MAMBA_CONV_DTYPE_BYTES
    temporal = heads // tp * head_dim * state * SSM_DTYPE_BYTES[name]
    return (conv + temporal) * linear_state_layers(model), name


def _slots_per_request(model: ModelFacts, radix_cache: bool, overlap: bool, strategy: str | None, page: int) -> tuple[int, str]:
    """(state slots one running request needs, the strategy) (kv_cache_configurator.py:3062-3086)."""
    if not radix_cache:
        return 1, "radix-off"
    st = (strategy or "auto").lower()
    if st == "auto":
        st = "extra_buffer" if ((overlap or page > 1) and (model.architecture or "") in SGLANG_MAMBA_EXTRA_BUFFER_ARCHS) \
            else "no_buffer"
        if st == "no_buffer":
            overlap = False  # auto without extra_buffer disables the overlap scheduler (overrides.py:484-486)
    if st == "extra_buffer":
        return MAMBA_SLOTS_PER_REQUEST_BASE + (2 if overlap else 1), st
    if st == "extra_buffer_lazy":
        return MAMBA_SLOTS_PER_REQUEST_BASE + 1, st
    return MAMBA_SLOTS_PER_REQUEST_BASE, st


def is_sglang_hybrid_swa(model: ModelFacts) -> bool:
    """Whether SGLang 0.5.23 gives ``model`` the hybrid sliding-window pool (module doc)."""
    kinds = set(model.layer_kinds or [])
    return (model.architecture or "") in SGLANG_HYBRID_SWA_ARCHS and bool(kinds & {"sliding", "chunked"})


def sglang_pools(model: ModelFacts, attn_tp_size: int, available_bytes: float, page_size: int = 1,
                 kv_cache_dtype: str = "auto", swa_full_tokens_ratio: float | None = None,
                 disable_hybrid_swa_memory: bool = False, *, max_mamba_cache_size: int | None = None,
                 mamba_full_memory_ratio: float | None = None, mamba_ssm_dtype: str | None = None,
                 mamba_radix_cache_strategy: str | None = None, radix_cache: bool = True,
                 overlap_schedule: bool = True, max_running_requests: int | None = None,
                 context_len: int | None = None, attn_dp_size: int = 1) -> SGLangPools:
    """The pools SGLang builds from ``available_bytes`` of KV memory per rank (module doc).

    ``attn_tp_size``: ranks one attention group splits the KV heads over (tp / dp under DP attention);
    ``page_size`` tokens per page (SGLang's ``--page-size``, default 1). The keyword arguments are the Mamba
    pool's (``--max-mamba-cache-size``, ``--mamba-full-memory-ratio``, ``--mamba-ssm-dtype``,
    ``--mamba-radix-cache-strategy``, radix cache and overlap scheduler on unless disabled,
    ``--max-running-requests``, ``--context-length`` (tokens), attention-DP ranks); they matter only for a model
    with Mamba / linear-attention layers. Raises OptkgError (from kv_element_bytes) for a KV dtype optkg cannot
    size, and for a Mamba pool SGLang would refuse (no slot, or no request).
    """
    page = max(1, int(page_size))
    b = kv_element_bytes(kv_cache_dtype, model)
    per_tok = kv_heads_per_rank(model, attn_tp_size) * (model.head_dim + model.v_head_dim) * b
    if model.is_mla:
        per_tok = ((model.kv_lora_rank or 0) + (model.qk_rope_head_dim or 0)) * b
    kinds = list(model.layer_kinds or ["full"] * model.num_hidden_layers)
    avail = max(0.0, float(available_bytes))
    if linear_state_layers(model) and (model.linear_attention or {}).get("kind") in ("gdn", "mamba2"):
        return _mamba_hybrid_pools(model, attn_tp_size, avail, page, per_tok, kinds, max_mamba_cache_size,
                                   mamba_full_memory_ratio, mamba_ssm_dtype, mamba_radix_cache_strategy, radix_cache,
                                   overlap_schedule, max_running_requests, context_len, attn_dp_size)
    if model.is_encoder_decoder:  # Whisper: one cell per token for every layer id (kg.derive.encoder_cache)
        from kg.derive.encoder_cache import SGLANG_WHISPER_SOURCE, sglang_pool_layer_count
        cell = per_tok * sglang_pool_layer_count(model)
        tokens = int(avail // cell) // page * page if cell else 0
        return SGLangPools("encoder-decoder", tokens, tokens, 0, cell, None, SGLANG_WHISPER_SOURCE)
    if disable_hybrid_swa_memory or not is_sglang_hybrid_swa(model):
        cell = per_tok * model.num_hidden_layers
        tokens = int(avail // cell) // page * page if cell else 0
        return SGLangPools("default", tokens, tokens, 0, cell, None, "sglang 0.5.23 pool_configurator.py:637-647")
    ratio = SWA_FULL_TOKENS_RATIO if swa_full_tokens_ratio is None else float(swa_full_tokens_ratio)
    full_layers = sum(1 for k in kinds if k not in ("sliding", "chunked"))
    swa_layers = len(kinds) - full_layers
    if full_layers == 0:
        cell = per_tok * swa_layers
        swa = int(avail // cell) // page * page if cell else 0
        return SGLangPools("all-swa", swa, 0, swa, cell, None, "sglang 0.5.23 pool_configurator.py:786-796, 865-878")
    cell = per_tok * full_layers + ratio * per_tok * swa_layers
    full = int(avail // cell) // page * page
    swa = int(full * ratio) // page * page
    return SGLangPools("hybrid-swa", full, full, swa, cell, ratio, "sglang 0.5.23 pool_configurator.py:797-805, 881-893, 907-916",
                       layers=pool_layers(model, full_layers, swa_layers))


def pool_layers(model: ModelFacts, full_layers: int, swa_layers: int) -> str:
    """Which layers SGLang's full and SWA pools serve. Llama-4's chunked local attention goes to the SWA pool as a
    sliding window of ``attention_chunk_size`` tokens (sglang 0.5.23
    ``model_executor/model_runner_components/load_model_utils.py:152-156``; its layers ``(i + 1) % 4 != 0``,
    ``configs/model_config.py:2705-2711``), not as vLLM's chunk-aligned ChunkedLocalAttentionSpec."""
    out = f"full x{full_layers} + swa x{swa_layers}"
    if "chunked" in (model.layer_kinds or []):
        out += (f" (chunked local attention held as a {model.attention_chunk_size:,}-token sliding window: "
                "sglang 0.5.23 load_model_utils.py:152-156, model_config.py:2705-2711)")
    return out


def _mamba_hybrid_pools(model: ModelFacts, attn_tp: int, rest: float, page: int, per_tok: float, kinds: list[str],
                        fixed_slots: int | None, ratio: float | None, ssm_dtype: str | None, strategy: str | None,
                        radix_cache: bool, overlap: bool, max_running: int | None, context_len: int | None,
                        attn_dp: int) -> SGLangPools:
    """The Mamba state pool, then the full-attention token pool from what is left (module doc)."""
    per_req, dtype = sglang_mamba_state_bytes(model, attn_tp, ssm_dtype)
    dp = max(1, int(attn_dp))
    if fixed_slots is not None:
        k, r = int(fixed_slots) // dp, None
    elif not radix_cache and max_running is not None:  # one slot per running request (:3310-3317)
        k, r = max(1, int(max_running) // dp), None
    else:
        r = MAMBA_FULL_MEMORY_RATIO if ratio is None else float(ratio)
        k = int((rest * r / (1 + r) - per_req) // per_req)
    if k <= 0:
        raise OptkgError(f"{model.name}: SGLang refuses to start: max_mamba_cache_size {k} leaves no Mamba state slot "
                         f"({per_req:,} B per request; kv_cache_configurator.py:3392-3402)")
    state_mem = (k + 1) * per_req
    full_layers = sum(1 for x in kinds if x in ("full", "sliding", "chunked"))
    cell = per_tok * full_layers
    tokens = int(max(0.0, rest - state_mem) // cell) // page * page if cell else 0
    slots, st = _slots_per_request(model, radix_cache, overlap, strategy, page)
    if max_running is not None:
        before = min(max(1, int(max_running) // dp), tokens // 2)
    else:
        est = int(tokens / context_len * 512) if context_len else 4096
        before = min(max(min(est, 4096), 2048), tokens // 2)
    cap = k // slots
    if min(before, cap) <= 0:
        raise OptkgError(f"{model.name}: SGLang refuses to start: the Mamba state pool ({k:,} slots, {slots} per "
                         f"request) serves no request (kv_cache_configurator.py:3152-3160)")
    mamba = SGLangMambaPool(per_req, k, state_mem, r, dtype, st, slots, min(before, cap), before, cap < before)
    return SGLangPools("hybrid-mamba", tokens, tokens, 0, cell, None,
                       "sglang 0.5.23 kv_cache_configurator.py:3229-3409; pool_configurator.py:228-236, 638-646", mamba)
