"""Speculative-decoding drafts: the draft's own weights, KV cache and context limit on each GPU.

Sources of the draft (vLLM ``--speculative-config``, SGLang ``--speculative-draft-model-path``):
- EAGLE3 heads (``architectures`` ``*Eagle3*``): one or more decoder layers whose attention reads the
  concatenation of the token embedding and the fused hidden state (q/k/v take ``2 x hidden`` inputs),
  an ``fc`` that fuses three target layers (``3 x hidden -> hidden``) and an lm_head over
  ``draft_vocab_size``; the embedding is the target's (vLLM ``model_executor/models/llama_eagle3.py``
  shares ``embed_tokens`` when the checkpoint has none). Llama-3.1-8B's head: 424,673,280 params.
- EAGLE (v1/v2) heads: decoder layers plus ``fc`` ``2 x hidden -> hidden``; draft models: the whole
  model (kg.derive.weights).
- MTP (``method: mtp`` / ``deepseek_mtp``): the target's own ``num_nextn_predict_layers`` extra layers
  (DeepSeek-V3: one MoE decoder layer) - their weights come with the checkpoint, their KV adds one
  layer per MTP layer.
The draft runs at the target's TP unless ``draft_tensor_parallel_size`` says otherwise (vLLM
``SpeculativeConfig._verify_and_get_draft_tp``); its KV layers join the target's KV-cache groups
(one more full-attention layer per draft layer), and its context limit is its own
``max_position_embeddings``: a longer ``max_model_len`` runs the draft past the positions it was
trained on (public reports: device-side asserts and acceptance collapse past 2k tokens).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from kg.core.errors import OptkgError
from kg.inputs.modelcfg import ModelFacts


@dataclass
class DraftFacts:
    """A draft on one GPU: ``weight_bytes_per_gpu``, ``kv_bytes_per_token_per_gpu`` (bytes), ``layers``."""

    method: str
    source: str
    kind: str                    # eagle3 | eagle | draft_model | mtp
    layers: int
    params: int
    weight_bytes_per_gpu: float
    kv_bytes_per_token_per_gpu: float
    max_position_embeddings: int | None
    tp_size: int
    notes: list[str] = field(default_factory=list)
    vocab_size: int | None = None      # the draft's own config.json vocab_size (engines compare it with the target's)
    architecture: str | None = None    # the draft's first ``architectures`` entry (e.g. LlamaForCausalLMEagle3)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def eagle3_params(d: ModelFacts, draft_vocab: int | None) -> int:
    """EAGLE3 head parameters: fc 3h x h; per layer q/k/v over 2h inputs, o, gate/up/down; lm_head draft_vocab x h."""
    h = d.hidden_size
    H, kv, hd = d.num_attention_heads, d.num_key_value_heads, d.head_dim
    attn = 2 * h * (H * hd + 2 * kv * hd) + H * hd * h
    mlp = 3 * h * (d.intermediate_size or 4 * h)
    return 3 * h * h + d.num_hidden_layers * (attn + mlp) + (draft_vocab or d.vocab_size or 0) * h


def mtp_weights(target: ModelFacts, n: int, tp: int) -> tuple[int, float]:
    """(parameters, bytes per GPU) of ``n`` MTP layers: the drafter builds layers num_hidden_layers ..
    + num_nextn_predict_layers (vLLM 0.34.0 model_executor/models/deepseek_mtp.py:148-159; the target skips them,
    deepseek_v2.py:1650-1651), each a decoder layer like the target's last one (MoE when the target has experts)
    plus ``eh_proj`` (2h x h, deepseek_mtp.py:84, kept 16-bit). Bytes per group from the target's weight scheme,
    split over ``tp`` GPUs (experts too, as ``weight_bytes_per_gpu`` does without expert parallelism)."""
    from kg.derive.weights import group_params, weight_scheme
    g, L, h = group_params(target), max(1, target.num_hidden_layers), target.hidden_size
    bpp = weight_scheme(target).bytes_per_param
    n_moe = target.num_moe_layers if target.is_moe else 0
    layer = {"attention": g["attention"] / L}
    if n_moe:
        layer.update(experts=g["experts"] / n_moe, shared_experts=g["shared_experts"] / n_moe,
                     router=g["router"] / n_moe)
    else:
        layer["dense_mlp"] = g["dense_mlp"] / max(1, L)
    eh = 2 * h * h
    params = int(n * (sum(layer.values()) + eh))
    total = n * (sum(v * bpp.get(k, target.dtype_bytes) for k, v in layer.items()) + eh * target.dtype_bytes)
    return params, total / max(1, tp)


def draft_facts(method: str | None, draft: str | None, target: ModelFacts, tp_size: int, draft_tp: int | None,
                resolver: Callable[[str], ModelFacts], kv_cache_dtype: str = "auto",
                raw_config: Callable[[str], dict[str, Any]] | None = None) -> DraftFacts | None:
    """The draft's facts, or None when the method has no draft model (ngram, suffix) or nothing names one.

    Raises OptkgError when a named draft cannot be resolved (not a folder with config.json, not a
    bundled or cached hub id).
    """
    from kg.derive.kv import kv_element_bytes, kv_heads_per_rank
    from kg.derive.weights import estimate_weight_bytes
    m = (method or "").lower()
    tp = int(draft_tp or tp_size)
    if m in ("ngram", "suffix", "ngram_gpu", "") and not draft:
        return None
    if m in ("mtp", "deepseek_mtp", "nextn", "qwen3_next_mtp") or (not draft and m.endswith("mtp")):
        n = int(getattr(target, "num_nextn_predict_layers", 0) or 0)
        if n <= 0:
            return DraftFacts(m, "target config", "mtp", 0, 0, 0.0, 0.0, target.max_position_embeddings, tp_size,
                              ["the target config names no num_nextn_predict_layers: MTP layers not counted"])
        per_layer_kv = _kv_per_layer(target, tp_size, kv_cache_dtype)
        params, wbytes = mtp_weights(target, n, tp_size)
        return DraftFacts(m, "target config (num_nextn_predict_layers)", "mtp", n, params, wbytes, n * per_layer_kv,
                          target.max_position_embeddings, tp_size,
                          [f"MTP: {n} extra decoder layer(s) + eh_proj ({params:,} parameters, {wbytes / 2**30:.2f} GiB "
                           "per GPU) load for the drafter on top of the target's layers; embedding and lm_head are "
                           "the target's"])
    if not draft:
        return None
    try:
        d = resolver(draft)
    except OptkgError as e:
        if m in ("eagle", "eagle3") or "eagle" in draft.lower():
            return eagle_from_target(m, draft, target, tp, kv_cache_dtype, str(e))
        raise
    raw = raw_config(draft) if raw_config else {}
    archs = [str(a) for a in (raw.get("architectures") or [])]
    kind = "eagle3" if any("eagle3" in a.lower() for a in archs) or m == "eagle3" else (
        "eagle" if any("eagle" in a.lower() for a in archs) or m == "eagle" else "draft_model")
    if kind == "eagle3":
        params = eagle3_params(d, raw.get("draft_vocab_size") if isinstance(raw.get("draft_vocab_size"), int) else None)
        total = params * d.dtype_bytes
    elif kind == "eagle":
        h = d.hidden_size
        params = int(estimate_weight_bytes(d, 1.0)) - h * (d.vocab_size or 0) * (1 if d.tie_word_embeddings else 2) + 2 * h * h
        total = params * d.dtype_bytes
    else:
        total = float(estimate_weight_bytes(d))
        params = int(estimate_weight_bytes(d, 1.0))
    b = kv_element_bytes(kv_cache_dtype, d)
    per_layer = kv_heads_per_rank(d, tp) * (d.head_dim + d.v_head_dim) * b if not d.is_mla else \
        ((d.kv_lora_rank or 0) + (d.qk_rope_head_dim or 0)) * b
    if tp > d.num_attention_heads or d.num_attention_heads % tp:
        raise OptkgError(f"draft {draft}: tp {tp} does not divide its {d.num_attention_heads} attention heads")
    return DraftFacts(m or kind, draft, kind, d.num_hidden_layers, params, total / tp,
                      d.num_hidden_layers * per_layer, d.max_position_embeddings, tp,
                      vocab_size=d.vocab_size, architecture=archs[0] if archs else d.architecture)


def eagle_from_target(method: str, draft: str, target: ModelFacts, tp: int, kv_cache_dtype: str,
                      why: str) -> DraftFacts:
    """An EAGLE / EAGLE3 head known only by its id, sized from the target's shape: one decoder layer with the
    target's hidden size, heads, head_dim and intermediate size (the released heads are built that way: vLLM
    ``llama_eagle3.py`` / ``llama_eagle.py`` read them from the head's config, which copies the target's) and an lm_head
    over the target's vocabulary (an upper bound: EAGLE3 heads often keep a smaller draft vocabulary). Its
    context limit stays unknown: the head's own config.json says it."""
    kind = "eagle3" if method == "eagle3" or "eagle3" in draft.lower() else "eagle"
    head = ModelFacts(**{**target.to_dict_fields(), "num_hidden_layers": 1, "name": draft})
    if kind == "eagle3":
        params = eagle3_params(head, None)
    else:
        h = target.hidden_size
        attn = h * (target.num_attention_heads * target.head_dim + 2 * target.num_key_value_heads * target.head_dim) \
            + target.num_attention_heads * target.head_dim * h
        params = 2 * h * h + attn + 3 * h * (target.intermediate_size or 4 * h)
    per_layer = _kv_per_layer(target, tp, kv_cache_dtype)
    note = (f"draft {draft}: its config.json is not here ({why.split(':')[0]}); sized from the target's shape "
            f"(1 {kind.upper()} layer, hidden {target.hidden_size:,}, lm_head over the target's vocabulary, an upper "
            "bound); its context limit is unknown until the head's config.json is given (a local folder, or the "
            "Hugging Face cache)")
    return DraftFacts(method or kind, f"{draft} (sized from the target's shape)", kind, 1, params,
                      params * target.dtype_bytes / tp, per_layer, None, tp, [note])


def _kv_per_layer(model: ModelFacts, tp: int, kv_cache_dtype: str) -> float:
    from kg.derive.kv import kv_layout
    return kv_layout(model, tp, 1, 1, kv_cache_dtype).bytes_per_token_layer_per_rank
