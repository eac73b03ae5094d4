"""Encoder-side caches as vLLM V1 builds them: the cross-attention KV of encoder-decoder models (Whisper)
and the multimodal encoder-cache budget.

Read from the released vLLM 0.33.0 wheel (``pip download vllm==0.33.0 --no-deps``); every ``path:line``
below is inside its ``vllm/`` package.

Cross-attention (encoder-decoder models: ``WhisperForConditionalGeneration``,
``CohereAsrForConditionalGeneration``, ``NemotronParseForConditionalGeneration``,
``model_executor/models/registry.py:640-652``):
- every decoder layer holds a self-attention cache (``FullAttentionSpec``, ``max_model_len`` tokens) and a
  cross-attention cache (``CrossAttentionSpec``) of the encoder's K/V; the encoder's attention is
  ``MMEncoderAttention`` and holds none (``models/whisper.py:111, 204-240, 448-454``);
  ``EncoderOnlyAttentionSpec`` layers reserve 0 bytes (``v1/kv_cache_interface.py:1213-1218``);
- a cross-attention layer reserves ``cdiv(max_num_encoder_input_tokens, block)`` pages per request
  (``v1/kv_cache_interface.py:1221-1229``), and ``max_num_encoder_input_tokens`` is set to
  ``max_num_batched_tokens`` (``config/scheduler.py:306``), not to the encoder's positions: the
  "e.g., 1500 for Whisper" comment at ``kv_cache_interface.py:1226`` is not what the value is. With
  ``vllm serve``'s 8,192 batched tokens a Whisper request reserves 512 cross-attention blocks of 16 tokens
  against 28 self-attention blocks for its 448 decoder tokens. The comment was true for vLLM 0.10.2-0.12.0,
  which set ``max_num_encoder_input_tokens`` to the encoder length (1,500: 94 blocks; 0.12.0
  ``config/vllm.py:736-741``); 0.13.0 dropped that override (``cross_attention_encoder_tokens``);
- encoder-decoder models run without chunked prefill and prefix caching (``config/scheduler.py:295-304``,
  ``config/model.py:2229-2233``), so a defaulted ``max_num_batched_tokens`` is
  ``min(max_num_seqs x max_model_len, max(max_model_len, default))`` (``engine/arg_utils.py:3190-3225``);
- cross and self layers have different spec types but one page size, so the hybrid allocator groups them
  as two groups of the same layer count (``v1/core/kv_cache_planning.py:416-556``): bytes per block
  ``layers x page``, blocks per request the sum of both groups (``v1/core/kv_cache_utils.py:1061-1093``).

Multimodal encoder cache (``v1/core/encoder_cache_manager.py:333-380``, ``compute_mm_encoder_budget``):
compute budget ``max(max_num_encoder_input_tokens, max tokens per item)`` and cache size
``max(encoder_cache_size, max tokens per item)``, both from ``max_num_batched_tokens``
(``config/scheduler.py:306-307``); a modality limited to 0 by ``--limit-mm-per-prompt`` drops out, and
with none left "Encoder cache will not be initialized" (``:354-360``). With chunked multimodal input
disabled (every encoder-decoder model) an item larger than ``max_num_batched_tokens`` is a startup
ValueError (``:362-371``). The cache is not a pool allocated beside the KV cache: it holds encoder
outputs in a dict of tensors at run time (``v1/worker/gpu_model_runner.py:587, 2750``), and
``profile_run`` encodes ``max_items_per_batch`` dummy items of the largest modality and keeps their
outputs alive through the profiled forward pass (``gpu_model_runner.py:6072-6145``), so its bytes are
inside the profiled activation peak that is subtracted from the KV budget. Items profiled:
``max(1, min(budget // tokens_per_item, max_num_seqs' x items_per_prompt))`` with ``max_num_seqs'``
capped at ``max_num_batched_tokens // tokens_per_item`` without chunked prefill and ``items_per_prompt =
max(1, min(limit, max_model_len // tokens_per_item))`` (``multimodal/encoder_budget.py:144-186``); bytes
= items x tokens per item x the language model's hidden size x dtype bytes (the embeddings the encoder
hands to the decoder).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kg.core.errors import OptkgError

# vLLM 0.33.0 model_executor/models/registry.py:640-652: the encoder-decoder architectures it serves
VLLM_ENCODER_DECODER_ARCHITECTURES = ("WhisperForConditionalGeneration", "CohereAsrForConditionalGeneration",
                                      "NemotronParseForConditionalGeneration")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def max_num_encoder_input_tokens(max_num_batched_tokens: int) -> int:
    """``SchedulerConfig.max_num_encoder_input_tokens`` (tokens): ``max_num_batched_tokens``
    (vLLM 0.33.0 ``config/scheduler.py:306``)."""
    if isinstance(max_num_batched_tokens, bool) or not isinstance(max_num_batched_tokens, int) or max_num_batched_tokens < 1:
        raise OptkgError(f"max_num_batched_tokens must be a positive integer, found {max_num_batched_tokens!r}")
    return max_num_batched_tokens


def cross_attention_encoder_tokens(model: Any, max_num_batched_tokens: int, engine_version: str | None = None) -> int:
    """Encoder tokens a request's cross-attention cache reserves, by vLLM release: from 0.13.0
    ``max_num_batched_tokens`` (``max_num_encoder_input_tokens``, 0.13.0 ``config/scheduler.py:226``, 0.33.0
    ``:306``, no encoder-decoder override left); 0.10.2-0.12.0 the encoder length (``max_source_positions``,
    1,500 for Whisper: 0.12.0 ``config/vllm.py:736-741`` sets ``max_num_encoder_input_tokens`` from
    ``get_encdec_max_encoder_len``; 0.10.2 ``v1/kv_cache_interface.py:233-235`` reads it directly).
    ``engine_version`` None: the latest release optkg knows."""
    if engine_version and getattr(model, "max_source_positions", None):
        from kg.core.relcmp import Release
        try:
            if Release(engine_version) < Release("0.13.0"):
                return int(model.max_source_positions)
        except ValueError:  # packaging's InvalidVersion
            pass  # unreadable: treated as the latest, as elsewhere
    return max_num_encoder_input_tokens(max_num_batched_tokens)


def cross_attention_blocks_per_request(max_num_batched_tokens: int, block_size: int) -> int:
    """Blocks one request reserves on every cross-attention layer: ``cdiv(max_num_encoder_input_tokens,
    block_size)`` (vLLM 0.33.0 ``v1/kv_cache_interface.py:1221-1229``). 8,192 tokens, block 16 -> 512."""
    if block_size < 1:
        raise OptkgError(f"block_size must be a positive integer, found {block_size!r}")
    return cdiv(max_num_encoder_input_tokens(max_num_batched_tokens), block_size)


def encoder_decoder_batched_tokens(default_tokens: int, max_model_len: int, max_num_seqs: int) -> int:
    """``max_num_batched_tokens`` vLLM 0.33.0 runs an encoder-decoder model with when none is given: chunked
    prefill is off, so ``max(max_model_len, default)``, then at most ``max_num_seqs x max_model_len``
    (``engine/arg_utils.py:3190-3225``). Whisper (448) on an H100 (8,192): 8,192; ``--max-num-seqs 1``: 448."""
    return min(max_num_seqs * max_model_len, max(max_model_len, default_tokens))


@dataclass
class EncoderBudget:
    """vLLM's multimodal encoder budget for one engine (tokens, items, bytes); see the module doc."""

    modality: str | None               # the modality with the most tokens per item (profiled); None: none left
    tokens_per_item: int                # largest item of that modality (encoder output tokens)
    compute_budget: int                 # encoder tokens per scheduler step
    cache_size: int                     # encoder-cache capacity (tokens)
    items_per_prompt: int
    items_profiled: int                 # dummy items profile_run encodes at startup
    profiled_bytes: int                 # their outputs, held during the profiled pass (inside the activation peak)
    basis: str
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def encoder_budget(tokens_per_item: dict[str, int], max_num_batched_tokens: int, max_model_len: int,
                   max_num_seqs: int, hidden_size: int, dtype_bytes: float,
                   limits: dict[str, int] | None = None, chunked_prefill: bool = True,
                   chunked_mm_input: bool = True) -> EncoderBudget:
    """The encoder budget vLLM 0.33.0 computes (``compute_mm_encoder_budget``, ``MultiModalBudget._get_max_items``).

    ``tokens_per_item``: largest encoder output per item by modality (tokens); ``limits``: the per-prompt
    limits (``--limit-mm-per-prompt``; a modality at 0 is dropped; default 1 per modality when the model
    supports one, else 999 as vLLM's unlimited); ``hidden_size`` / ``dtype_bytes`` size the profiled
    outputs. Raises OptkgError where vLLM refuses to start (an item over ``max_num_batched_tokens`` with
    chunked multimodal input off, ``encoder_cache_manager.py:362-371``)."""
    limits = dict(limits or {})
    active = {m: t for m, t in tokens_per_item.items() if limits.get(m, 1) != 0}
    basis = "vLLM 0.33.0 v1/core/encoder_cache_manager.py:333-380, multimodal/encoder_budget.py:144-186"
    if not active:
        return EncoderBudget(None, 0, 0, 0, 0, 0, 0, basis, [
            "every modality is limited to 0 (--limit-mm-per-prompt, or --language-model-only): vLLM does not initialise the encoder cache "
            "and profiles no encoder (encoder_cache_manager.py:354-360)"])
    modality = max(active.items(), key=lambda x: (x[1], x[0]))[0]  # encoder_budget.py:188-192
    tok = int(active[modality])
    if not chunked_mm_input and tok > max_num_batched_tokens:
        raise OptkgError(f"one {modality} item is {tok:,} encoder tokens, more than max_num_batched_tokens "
                         f"{max_num_batched_tokens:,}, and chunked multimodal input is off: vLLM refuses to start "
                         "(vllm 0.33.0 v1/core/encoder_cache_manager.py:362-371); raise --max-num-batched-tokens")
    compute = max(max_num_encoder_input_tokens(max_num_batched_tokens), tok)
    cache = max(max_num_batched_tokens, tok)
    budget = min(compute, cache)
    limit = limits.get(modality, 1)
    per_prompt = max(1, min(limit, max_model_len // tok)) if tok else 0
    reqs = max_num_seqs if chunked_prefill else min(max_num_seqs, max_num_batched_tokens // tok)
    items = max(1, min(budget // tok, reqs * per_prompt)) if tok else 0
    profiled = int(items * tok * hidden_size * dtype_bytes)
    return EncoderBudget(modality, tok, compute, cache, per_prompt, items, profiled, basis, [
        f"encoder cache budget {budget:,} tokens: max(max_num_batched_tokens {max_num_batched_tokens:,}, "
        f"{tok:,} tokens per {modality} item); startup profiles {items} {modality} item(s) and holds their "
        f"outputs ({items} x {tok:,} x hidden {hidden_size:,} x {dtype_bytes:g} B = {profiled:,} B) inside the "
        "profiled activation peak, which comes off the KV budget (v1/worker/gpu_model_runner.py:6072-6145)"])


def model_mm_tokens_per_item(model: Any) -> tuple[dict[str, int], str]:
    """(largest encoder output per item by modality, source) for the models whose count config.json fixes:
    Whisper audio = ``max_source_positions`` (``models/whisper.py:700-715``, one audio per prompt); Gemma-3
    image = ``mm_tokens_per_image`` without pan-and-scan (``models/gemma3_mm.py:197-213``). ({}, reason)
    for other models (the count depends on the processor's image sizes, not in config.json)."""
    if getattr(model, "is_encoder_decoder", False) and getattr(model, "model_type", "") == "whisper":
        if model.max_source_positions:
            return {"audio": int(model.max_source_positions)}, "max_source_positions (models/whisper.py:714-715)"
    tpi = getattr(model, "mm_tokens_per_image", None)
    if tpi:
        return {"image": int(tpi)}, "mm_tokens_per_image, no pan-and-scan (models/gemma3_mm.py:197-213)"
    return {}, "tokens per item depend on the processor config (image sizes), which config.json does not carry"


def cross_attention_summary(model: Any, tp_size: int, kv_element_bytes: float, max_num_batched_tokens: int,
                            block_size: int = 16, engine_version: str | None = None) -> dict[str, Any] | None:
    """The cross-attention cache of an encoder-decoder model on one TP rank, or None for other models:
    layers, bytes per encoder token, encoder tokens and blocks reserved per request, bytes per request."""
    n = int(getattr(model, "num_cross_attention_layers", 0) or 0)
    if not n:
        return None
    heads = max(1, model.num_key_value_heads // tp_size)  # models/whisper.py:181: max(1, heads // tp)
    per_tok_layer = heads * (model.head_dim + model.v_head_dim) * kv_element_bytes
    enc = cross_attention_encoder_tokens(model, max_num_batched_tokens, engine_version)
    blocks = cross_attention_blocks_per_request(enc, block_size)
    return {"layers": n, "bytes_per_encoder_token_per_gpu": int(per_tok_layer * n),
            "encoder_tokens_reserved_per_request": enc, "encoder_positions": model.max_source_positions,
            "blocks_per_request": blocks, "bytes_per_request": int(blocks * block_size * per_tok_layer * n),
            "basis": "cdiv(max_num_encoder_input_tokens, block) pages per layer: max_num_batched_tokens from vLLM 0.13.0, "
                     "the encoder length before (vllm 0.33.0 v1/kv_cache_interface.py:1221-1229, config/scheduler.py:306)"}


def cross_attention_note(model: Any, encoder_tokens: int, block_size: int, max_num_batched_tokens: int) -> str:
    """The line the KV plan carries for an encoder-decoder model (what each request reserves, and why)."""
    blocks = cross_attention_blocks_per_request(encoder_tokens, block_size)
    enc = f"; the {model.num_encoder_layers} encoder layers hold no KV" if model.num_encoder_layers else ""
    if encoder_tokens == max_num_batched_tokens:
        pos = f", not the encoder's {model.max_source_positions:,} positions" if model.max_source_positions else ""
        why = ("max_num_encoder_input_tokens = max_num_batched_tokens, vllm 0.33.0 config/scheduler.py:306, "
               "v1/kv_cache_interface.py:1221-1229; from 0.13.0")
    else:
        pos = ""
        why = "the encoder length: vLLM 0.10.2-0.12.0 set max_num_encoder_input_tokens from it (0.12.0 config/vllm.py:736-741)"
    return (f"cross-attention x{model.num_cross_attention_layers}: each request reserves cdiv(max_num_encoder_input_tokens "
            f"{encoder_tokens:,}, {block_size}) = {blocks:,} blocks per layer ({why}){pos}{enc}")


ENCODER_DECODER_SCHEDULING_NOTE = (
    "encoder-decoder model: vLLM 0.33.0 runs it without chunked prefill and prefix caching "
    "(config/scheduler.py:295-304, config/model.py:2229-2233) and caps CUDA graphs at FULL_DECODE_ONLY "
    "(config/vllm.py:1962-1975), whatever the release defaults listed say")


def longest_decoder_request(bytes_per_block: int, blocks_per_request: int, cross_blocks: int, block_size: int,
                            available_bytes: float, null_bytes: float = 0.0) -> int:
    """Longest decoder request (tokens) the pool holds beside one request's cross-attention blocks:
    ``((available - null) // bytes_per_block - cross_blocks) x block_size`` (0 when they do not fit)."""
    blocks = int((available_bytes - null_bytes) // bytes_per_block) if bytes_per_block else 0
    return max(0, blocks - cross_blocks) * block_size


def mm_limits(limit_mm_per_prompt: Any, language_model_only: bool = False) -> dict[str, int]:
    """Per-prompt item limits by modality from ``--limit-mm-per-prompt`` (``{"image": 2}`` or
    ``{"image": {"count": 2, ...}}``, vLLM 0.33.0 ``config/multimodal.py:471-495``); every modality 0 with
    ``--language-model-only`` (``:700-701``). A modality not named keeps vLLM's default (999, ``:703-707``)."""
    if language_model_only:
        return {"image": 0, "video": 0, "audio": 0}
    out: dict[str, int] = {}
    if isinstance(limit_mm_per_prompt, dict):
        for k, v in limit_mm_per_prompt.items():
            if isinstance(v, dict):
                v = v.get("count")
            if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                out[str(k)] = v
    return out


def stack_encoder_budget(model: Any, max_num_batched_tokens: int, max_model_len: int, max_num_seqs: int,
                         limit_mm_per_prompt: Any = None, language_model_only: bool = False
                         ) -> tuple[EncoderBudget | None, list[str]]:
    """The encoder budget of a multimodal or encoder-decoder model under a vLLM stack, and the notes the
    report carries: (None, []) for a text-only model; (None, [why]) when the tokens per item are not in
    config.json (the budget in tokens is then ``max(max_num_batched_tokens, tokens per item)`` and its bytes
    stay inside vLLM's measured activation peak). Raises OptkgError where vLLM refuses to start."""
    multimodal = bool(getattr(model, "vision_model_type", None)) or bool(getattr(model, "is_encoder_decoder", False))
    if not multimodal:
        return None, []
    encdec = bool(getattr(model, "is_encoder_decoder", False))
    limits = mm_limits(limit_mm_per_prompt, language_model_only)
    if encdec and "audio" not in limits:
        limits["audio"] = 1  # Whisper supports one audio per prompt (models/whisper.py:700-701)
    tokens, src = model_mm_tokens_per_item(model)
    if not tokens:
        if limits and all(v == 0 for v in limits.values()):
            return encoder_budget({}, max_num_batched_tokens, max_model_len, max_num_seqs, 0, 0), []
        return None, [f"multimodal encoder cache: budget max(max_num_batched_tokens {max_num_batched_tokens:,}, the "
                      f"largest item's tokens) tokens (vllm 0.33.0 v1/core/encoder_cache_manager.py:333-380); {src}, so "
                      "the bytes of the profiled encoder outputs are not estimated here: vLLM measures them inside "
                      "its activation peak (v1/worker/gpu_model_runner.py:6072-6145)"]
    b = encoder_budget(tokens, max_num_batched_tokens, max_model_len, max_num_seqs, model.hidden_size,
                       float(model.dtype_bytes), limits, chunked_prefill=not encdec, chunked_mm_input=not encdec)
    return b, list(b.notes)


def encoder_item_facts(model: Any, max_num_batched_tokens: int) -> dict[str, Any]:
    """Facts for the startup refusal of an encoder item larger than ``max_num_batched_tokens`` when chunked
    multimodal input is off (every encoder-decoder model from vLLM 0.10.2: 0.33.0 ``config/scheduler.py:295-298``,
    ``v1/core/encoder_cache_manager.py:362-371``): ``encoder_tokens_per_item`` (0 when not known from config.json),
    ``encoder_chunked_mm_input_disabled``, ``encoder_max_num_batched_tokens``. Present for every model."""
    tokens, _ = model_mm_tokens_per_item(model)
    return {"encoder_tokens_per_item": max(tokens.values()) if tokens else 0,
            "encoder_chunked_mm_input_disabled": bool(getattr(model, "is_encoder_decoder", False)),
            "encoder_max_num_batched_tokens": int(max_num_batched_tokens)}


SGLANG_WHISPER_SOURCE = ("sglang 0.5.23 configs/model_config.py:1591-1601 (num_attention_layers = encoder_layers + "
                         "2 x decoder_layers), model_runner_components/layer_setup.py:213-220, models/whisper.py:204-208, "
                         "421-429")


def sglang_pool_layer_count(model: Any) -> int:
    """Layers SGLang 0.5.23 sizes every token cell of its KV pool for: Whisper's layer ids run over the encoder
    (no cache, but "attention backend needs buffer to exist"), the decoder's self-attention and its
    cross-attention, so ``encoder_layers + 2 x decoder_layers`` (32 + 64 = 96 for large-v3), against vLLM's
    2 x 32 (``configs/model_config.py:1591-1601``; ``layer_setup.py:213-220`` takes the larger of that and
    ``num_hidden_layers``). Each request also holds ``max_source_positions`` placeholder tokens for the
    encoder K/V before its decoder tokens (``models/whisper.py:421-429``)."""
    if not getattr(model, "is_encoder_decoder", False):
        return int(model.num_hidden_layers)
    return max(int(model.num_encoder_layers), int(model.num_encoder_layers) + 2 * int(model.num_hidden_layers))
