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
Not modelled here: the request-cap configurator (an explicit ``--max-running-requests`` with SWA,
``SWARequestCapPoolConfigurator``), unified memory, DeepSeek-V4 pools, drafts' KV, Mamba pools.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

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


@dataclass
class SGLangPools:
    """SGLang's token pools on one rank: ``max_total_num_tokens`` (the logged ``#tokens``), and for a
    hybrid sliding-window model the full and SWA pools (tokens) with the bytes one full-pool token costs."""

    kind: str                     # default | hybrid-swa | all-swa
    max_total_num_tokens: int
    full_tokens: int
    swa_tokens: int
    cell_bytes: float
    swa_full_tokens_ratio: float | None
    source: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def is_sglang_hybrid_swa(model: ModelFacts) -> bool:
    """Whether SGLang 0.5.23 gives ``model`` the hybrid sliding-window pool (module doc)."""
    kinds = set(model.layer_kinds or [])
    return (model.architecture or "") in SGLANG_HYBRID_SWA_ARCHS and bool(kinds & {"sliding", "chunked"})


def sglang_pools(model: ModelFacts, attn_tp_size: int, available_bytes: float, page_size: int = 1,
                 kv_cache_dtype: str = "auto", swa_full_tokens_ratio: float | None = None,
                 disable_hybrid_swa_memory: bool = False) -> SGLangPools:
    """The pools SGLang builds from ``available_bytes`` of KV memory per rank (module doc).

    ``attn_tp_size``: ranks one attention group splits the KV heads over (tp / dp under DP attention);
    ``page_size`` tokens per page (SGLang's ``--page-size``, default 1). Raises OptkgError (from
    kv_element_bytes) for a KV dtype optkg cannot size.
    """
    page = max(1, int(page_size))
    b = kv_element_bytes(kv_cache_dtype, model)
    per_tok = kv_heads_per_rank(model, attn_tp_size) * (model.head_dim + model.v_head_dim) * b
    if model.is_mla:
        per_tok = ((model.kv_lora_rank or 0) + (model.qk_rope_head_dim or 0)) * b
    kinds = list(model.layer_kinds or ["full"] * model.num_hidden_layers)
    avail = max(0.0, float(available_bytes))
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
    return SGLangPools("hybrid-swa", full, full, swa, cell, ratio, "sglang 0.5.23 pool_configurator.py:797-805, 881-893, 907-916")
