"""Model facts from a Hugging Face ``config.json``.

Reads the fields the couplings need (attention heads, KV heads, head size, layers, MLA ranks,
sliding window and per-layer types, dtype, MoE sizes, checkpoint quantisation), resolving
nested ``text_config`` (multimodal wrappers) and the engines' fallbacks:

- KV heads: first of ``n_head_kv``, ``num_kv_heads``, ``num_key_value_heads``,
  ``multi_query_group_num``; ``multi_query: true`` -> 1; else ``num_attention_heads`` (MHA).
  Source: vLLM ``ModelConfig.get_total_num_kv_heads`` (vllm/config/model.py), summarised in
  shared/reference/serving_engine_facts.md §1.1.
- head_dim: ``head_dim`` if set, else ``hidden_size // num_attention_heads``.
- MLA: ``kv_lora_rank`` not null and model_type in vLLM's ``is_deepseek_mla`` list (deepseek_v2/v3,
  kimi_k2, ...); cached elements per token per layer = ``kv_lora_rank + qk_rope_head_dim``
  (``ModelConfig.get_head_size``; facts §1.5).
- Sliding window is *effective* only when ``use_sliding_window`` is not false; per-layer kinds come
  from ``layer_types`` when present, else from the model family's convention (gemma2: even layers
  slide, per transformers ``modeling_gemma2.py``), else every layer slides.
- MoE sizes: ``expert_intermediate_size`` is ``moe_intermediate_size`` when the config has it
  (DeepSeek, Qwen-MoE), else ``intermediate_size`` (Mixtral, PhiMoE, gpt-oss and Llama-4 size each
  expert with ``intermediate_size``: transformers ``MixtralBlockSparseTop2MLP``, ``GptOssExperts``,
  ``Llama4TextExperts``). Llama-4 MoE layers also hold one shared expert of ``intermediate_size``
  (``Llama4TextMoe.shared_expert = Llama4TextMLP(config)``) and its dense layers use
  ``intermediate_size_mlp`` (``dense_intermediate_size``); MoE layers follow
  ``interleave_moe_layer_step`` / ``moe_layers`` (transformers ``Llama4TextConfig``).
- Context limits: ``derived_max_model_len`` follows vLLM ``_get_and_verify_max_len`` (smallest of the
  length keys; RoPE scaling other than su/longrope/llama3 multiplies it by ``factor``, YaRN from
  ``original_max_position_embeddings``); ``sglang_context_length`` follows SGLang
  ``get_context_length`` (first length key, times ``factor`` only when the RoPE scaling has no
  ``original_max_position_embeddings`` and is not llama3).
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kg.core import paths
from kg.core.errors import OptkgError
from kg.core.numparse import loads_json, show
from kg.core.yamlio import read_text
from kg.inputs.bundledcache import folder_index, parsed_once

# vLLM ModelConfig.is_deepseek_mla (vllm/config/model.py @0052a5b8)
MLA_MODEL_TYPES = {"deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_mtp", "kimi_k2", "kimi_linear",
                   "longcat_flash", "pangu_ultra_moe", "pangu_ultra_moe_mtp"}
DTYPE_BYTES = {"float32": 4, "float": 4, "fp32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
               "float8_e4m3fn": 1, "fp8": 1, "int8": 1}
# vLLM _get_and_verify_max_len possible_keys (vllm/config/model.py); SGLang CONTEXT_LENGTH_KEYS (in order)
# (vLLM 0.33.0 transformers_utils/model_arch_config_convertor.py:374-392 adds Whisper's max_target_positions)
VLLM_LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                    "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")
# With none of VLLM_LENGTH_KEYS in config.json vLLM logs "Assuming the model's maximum length is 2048" and runs
# with 2,048 tokens unless --max-model-len is given, which it then accepts as is (_get_and_verify_max_len:
# vllm 0.33.0 config/model.py:2589, 0.34.0 :2633; e.g. tiiuae/falcon-40b).
VLLM_NO_LENGTH_KEY_DEFAULT = 2048
SGLANG_LENGTH_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "max_position_embeddings")


@dataclass
class ModelFacts:
    """Facts of one model. Sizes are element counts; ``dtype_bytes`` is bytes per weight/KV element."""

    name: str
    model_type: str
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    v_head_dim: int
    hidden_size: int
    num_hidden_layers: int
    dtype: str
    dtype_bytes: int
    is_mla: bool = False
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    sliding_window: int | None = None
    num_sliding_layers: int = 0
    num_full_layers: int = 0
    intermediate_size: int | None = None
    moe_intermediate_size: int | None = None
    shared_expert_intermediate_size: int | None = None
    num_experts: int | None = None
    num_experts_per_tok: int | None = None
    quant_method: str | None = None
    expert_dtype: str | None = None  # config.json expert_dtype (DeepSeek-V4: fp4 routed experts)
    weight_block_size: list[int] | None = None
    quant_group_size: int | None = None
    quant_bits: int | None = None          # weight bits of the checkpoint (quantization_config.bits / load_in_8bit)
    checkpoint_kv_scales: bool = False     # the checkpoint ships KV-cache scales (kv_cache_scheme / kv_cache_quant_algo)
    num_moe_layers: int = 0                # decoder layers whose MLP is a mixture of experts
    layer_blocks: str = ""                 # NemotronH: one block per layer, M/*/-/E (modelaliases.nemotron_h_blocks)
    mlp_gated: bool = True                 # gate/up/down MLPs; NemotronH, Falcon, GPT-2, OPT ... up/down only
    moe_latent_size: int | None = None     # latent MoE: experts run in this width (NemotronH, Kimi-K3 routed_expert_hidden_size)
    layer_ffn_sizes: list[int] = field(default_factory=list)  # Nemotron-NAS: MLP width per layer, 0 none; [] uniform
    max_position_embeddings: int | None = None
    vocab_size: int | None = None
    expert_intermediate_size: int | None = None   # FFN size of one routed expert (see module doc)
    dense_intermediate_size: int | None = None    # FFN size of the dense (non-MoE) layers
    tie_word_embeddings: bool = False             # lm_head shares the embedding matrix (config key, else transformers' default)
    tie_word_embeddings_source: str = ""          # where the tie came from: "config.json", a transformers default, vLLM
    q_lora_rank: int | None = None                # MLA query low-rank size (None: full q projection)
    qk_nope_head_dim: int | None = None           # MLA per-head non-RoPE query/key size
    quant_modules_not_converted: list[str] = field(default_factory=list)  # quantization_config.modules_to_not_convert
    layer_kinds: list[str] = field(default_factory=list)  # per decoder layer: full, sliding, chunked, linear, mamba, none
    attention_chunk_size: int | None = None       # chunked local attention (Llama-4), tokens
    index_head_dim: int | None = None             # DeepSeek-V3.2 sparse-attention indexer key size
    global_head_dim: int | None = None  # Gemma 4 full-attention layers' own shape, when it differs (kg.derive.kv)
    num_global_key_value_heads: int | None = None
    index_topk: int | None = None  # DeepSeek sparse attention (DSA): tokens the indexer keeps; vLLM's use_sparse
    learnable_sink: bool = False   # DSA attention sinks (SGLang 0.5.23 then keeps a bfloat16 KV cache)
    num_nextn_predict_layers: int = 0             # MTP layers shipped with the checkpoint (DeepSeek-V3: 1)
    linear_attention: dict[str, Any] = field(default_factory=dict)  # GDN / Mamba2 state sizes (see _linear_attention)
    quantization_config: dict[str, Any] = field(default_factory=dict)  # the checkpoint's quantization_config, as read
    quantization_config_source: str = ""          # where it came from (config.json or hf_quant_config.json)
    derived_max_model_len: int | None = None      # longest max_model_len vLLM accepts (tokens)
    vllm_default_max_model_len: int | None = None  # max_model_len vLLM runs with when none is given (tokens)
    sglang_context_length: int | None = None      # longest --context-length SGLang accepts (tokens)
    # vision encoder of a multimodal config (kg.inputs.vision); None / False for text-only models
    vision_model_type: str | None = None
    vision_num_attention_heads: int | None = None
    vision_hidden_size: int | None = None
    vision_num_hidden_layers: int | None = None
    vision_tp_split: bool = False
    vision_params: int | None = None              # the tower's weight parameters, when optkg can size it (kg.inputs.vision)
    # encoder-decoder models (Whisper; kg.derive.encoder_cache): the KV fields above describe the decoder
    is_encoder_decoder: bool = False
    num_cross_attention_layers: int = 0           # decoder layers with a cross-attention (encoder K/V) cache
    num_encoder_layers: int = 0                   # encoder layers: no KV cache in vLLM
    encoder_ffn_dim: int | None = None
    max_source_positions: int | None = None       # encoder positions (Whisper: 1,500 audio frames per 30 s)
    mm_tokens_per_image: int | None = None        # encoder output tokens per image (Gemma-3: 256), when config.json fixes it
    architecture: str | None = None               # first of config.json ``architectures`` (the class engines load)
    attn_logit_softcapping: float | None = None   # attention-logit soft-cap (Gemma-2), applied inside attention
    source: str = ""
    warnings: list[str] = field(default_factory=list)

    @property
    def attention(self) -> str:
        """'mla', 'mqa' (1 KV head), 'mha' (KV heads = query heads) or 'gqa'."""
        if self.is_mla:
            return "mla"
        if self.num_key_value_heads == 1:
            return "mqa"
        if self.num_key_value_heads == self.num_attention_heads:
            return "mha"
        return "gqa"

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts and self.num_experts > 1)

    def to_dict_fields(self) -> dict[str, Any]:
        """The dataclass fields only (``ModelFacts(**m.to_dict_fields())`` copies ``m``)."""
        from dataclasses import fields
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["attention"] = self.attention
        d["is_moe"] = self.is_moe
        return d


def _architecture(top: dict[str, Any]) -> str | None:
    """First entry of the top-level ``architectures`` list (vLLM and SGLang pick the model class by it)."""
    arch = top.get("architectures")
    if isinstance(arch, list) and arch and isinstance(arch[0], str) and arch[0]:
        return arch[0]
    return None


def _softcap(c: dict[str, Any]) -> float | None:
    """``attn_logit_softcapping`` when it is a positive number (null or 0 mean no soft-capping)."""
    v = c.get("attn_logit_softcapping")
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
        return float(v)
    return None


MAX_COUNT = 1_000_000  # heads, layers, experts: loops walk these (bounded-work rule); real models have < 1,000
MAX_SIZE = 2**40  # dimensions and vocabulary: far past any real model
COUNT_KEYS = {"num_attention_heads", "n_head", "num_hidden_layers", "n_head_kv", "num_kv_heads", "num_key_value_heads",
              "multi_query_group_num", "num_attention_groups", "num_experts", "n_routed_experts", "num_local_experts", "num_experts_per_tok",
              "first_k_dense_replace", "decoder_sparse_step", "max_window_layers", "interleave_moe_layer_step",
              "n_shared_experts"}


def _int(cfg: dict[str, Any], key: str, where: str, required: bool = False) -> int | None:
    v = cfg.get(key)
    if v is None:
        if required:
            raise OptkgError(f"{where}: config has no '{key}' (needed for KV-cache derivations)")
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise OptkgError(f"{where}: '{key}' must be a non-negative integer, found {show(v)}")
    limit = MAX_COUNT if key in COUNT_KEYS else MAX_SIZE
    if v > limit:
        raise OptkgError(f"{where}: '{key}' is {show(v)}; optkg reads at most {limit:,} (no real model has more)")
    return v


def _opt_int(cfg: dict[str, Any], key: str, where: str) -> int | None:
    """Like ``_int`` for optional fields that other tools write loosely: a value of another type is ignored."""
    v = cfg.get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        return None
    return _int(cfg, key, where)


def parse_config(cfg: dict[str, Any], name: str = "<config>") -> ModelFacts:
    """Turn a parsed ``config.json`` dict into ``ModelFacts``. Raises OptkgError naming missing/invalid fields."""
    if not isinstance(cfg, dict):
        raise OptkgError(f"{name}: config.json must be a JSON object")
    top = cfg
    from kg.inputs.vision import language_config, vision_facts
    text = language_config(cfg)  # text_config / llm_config of a multimodal wrapper (kg.inputs.vision)
    c = dict(text) if isinstance(text, dict) else dict(cfg)
    if isinstance(text, dict):
        for k in ("torch_dtype", "quantization_config", "model_type"):
            if k not in c and k in top:
                c[k] = top[k]
    from kg.inputs.modelaliases import (apply_aliases, falcon_multi_query, kv_head_keys, nemotron_h_blocks,
                                        nemotron_nas_blocks, ungated_mlp_width, kimi_kda_layers)
    c, alias_notes = apply_aliases(c, str(c.get("model_type") or top.get("model_type") or ""))
    for k in sorted(set(VLLM_LENGTH_KEYS) | set(SGLANG_LENGTH_KEYS)):  # config.json may hold Infinity / NaN
        v = c.get(k)
        if isinstance(v, float) and not math.isfinite(v):
            raise OptkgError(f"{name}: '{k}' must be a finite number of tokens, found "
                             f"{'NaN' if math.isnan(v) else 'Infinity'}")
        # the engines take min() over these keys: 0, a list or true is no length (vLLM's min() fails or reads 1)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0):
            raise OptkgError(f"{name}: '{k}' must be a positive number of tokens, found {show(v)}")
    encdec = _encoder_decoder_view(c, name)
    if encdec:
        c = {**c, **encdec["text"]}
    heads = _int(c, "num_attention_heads", name, required=True)
    if not heads:
        raise OptkgError(f"{name}: 'num_attention_heads' must be at least 1")
    layers = _int(c, "num_hidden_layers", name, required=True)
    if not layers:
        raise OptkgError(f"{name}: 'num_hidden_layers' must be at least 1, found 0")
    hidden = _int(c, "hidden_size", name) or 0
    kv = None
    for key in kv_head_keys():  # vLLM's CONFIG_FIELD_ALIASES['total_num_kv_heads'], in order
        if c.get(key) is not None:
            kv = _int(c, key, name)
            break
    mq = falcon_multi_query(c, str(c.get("model_type") or ""))
    if mq if mq is not None else c.get("multi_query") is True:
        kv = 1
    if kv is None:
        kv = heads
    if kv == 0:
        raise OptkgError(f"{name}: num_key_value_heads is 0")
    head_dim = _int(c, "head_dim", name)
    if head_dim == 0:  # vLLM takes a head_dim it is given (get_head_size): 0 is no head, not "derive it"
        raise OptkgError(f"{name}: 'head_dim' is 0; a model needs at least one element per head (drop the key to "
                         "derive it from hidden_size / num_attention_heads)")
    if not head_dim:
        if not hidden:
            raise OptkgError(f"{name}: config has neither 'head_dim' nor 'hidden_size'")
        head_dim = hidden // heads
        if head_dim == 0:
            raise OptkgError(f"{name}: head_dim is 0 (hidden_size {hidden} // num_attention_heads {heads}); "
                             "a model needs at least one element per head")
    v_head_dim = _int(c, "v_head_dim", name) or head_dim
    model_type = str(c.get("model_type") or top.get("model_type") or "unknown")
    nas = nemotron_nas_blocks(c, heads, hidden, layers, name) if model_type == "nemotron-nas" else None
    kv = nas["kv_heads"] if nas else kv
    kv_lora = _int(c, "kv_lora_rank", name)
    rope = _int(c, "qk_rope_head_dim", name)
    is_mla = kv_lora is not None and (model_type in MLA_MODEL_TYPES or rope is not None)
    if not is_mla and heads % kv:  # vLLM's Attention asserts it (vllm 0.34.0 layers/attention/attention.py:350-352)
        raise OptkgError(f"{name}: num_attention_heads {heads} is not a multiple of the {kv} KV heads; the engines' "
                         "attention groups query heads per KV head and refuse the model")
    dtype = str(c.get("torch_dtype") or c.get("dtype") or top.get("torch_dtype") or "bfloat16")
    warnings = list(alias_notes)
    if dtype.lower() not in DTYPE_BYTES:
        raise OptkgError(f"{name}: torch_dtype {dtype!r} is not a dtype optkg knows "
                         f"(expected one of {', '.join(sorted(DTYPE_BYTES))})")
    dtype = dtype.lower()
    dtype_bytes = DTYPE_BYTES[dtype]
    if not c.get("torch_dtype") and not c.get("dtype"):
        warnings.append("config has no torch_dtype; assuming bfloat16 (2 bytes)")

    # sliding window: effective value only
    sw = _int(c, "sliding_window", name) if not isinstance(c.get("sliding_window"), list) else None
    sw = None if c.get("use_sliding_window") is False else sw
    for key in ("max_window_layers", "attn_layer_offset", "full_attention_interval", "attn_layer_period"):
        if c.get(key) is not None and not isinstance(c.get(key), bool):
            _int(c, key, name)  # a string or 1e400 here is a one-line error, not a crash in layer_kinds
    kinds = layer_kinds(c, model_type, layers, bool(sw))
    kinds = [k if a else "none" for k, a in zip(kinds, nas["attention"])] if nas else kinds
    kda = kimi_kda_layers(c, layers)
    kinds = kda[0] if kda else kinds
    n_sliding = kinds.count("sliding")
    if n_sliding == 0:
        sw = None
    n_experts = _opt_int(c, "num_experts", name) or _opt_int(c, "n_routed_experts", name) \
        or _opt_int(c, "num_local_experts", name)
    qc = c.get("quantization_config") if isinstance(c.get("quantization_config"), dict) else {}
    bits = qc.get("bits") if isinstance(qc.get("bits"), int) else None
    if bits is None and qc.get("load_in_8bit") is True:
        bits = 8
    if bits is None and qc.get("load_in_4bit") is True:
        bits = 4
    kv_scales = bool(qc.get("kv_cache_scheme") or qc.get("kv_cache_quant_algo")
                     or (isinstance(qc.get("quantization"), dict) and qc["quantization"].get("kv_cache_quant_algo")))
    # MoE layers: DeepSeek-style first_k_dense_replace, Qwen-style mlp_only_layers/decoder_sparse_step
    n_moe = 0
    if isinstance(n_experts, int) and n_experts > 1:
        first_dense = c.get("first_k_dense_replace")
        step = c.get("decoder_sparse_step")
        dense_only = c.get("mlp_only_layers")
        if isinstance(first_dense, int):
            n_moe = max(0, layers - first_dense)
        elif isinstance(step, int) and step > 0 or isinstance(dense_only, list):
            step = step if isinstance(step, int) and step > 0 else 1
            skip = {i for i in dense_only if isinstance(i, int)} if isinstance(dense_only, list) else set()
            n_moe = sum(1 for i in range(layers) if i not in skip and (i + 1) % step == 0)
        elif isinstance(c.get("moe_layers"), list):
            n_moe = sum(1 for i in c["moe_layers"] if isinstance(i, int) and 0 <= i < layers)
        elif isinstance(c.get("interleave_moe_layer_step"), int) and c["interleave_moe_layer_step"] > 0:
            step = c["interleave_moe_layer_step"]  # Llama-4: layers step-1, 2*step-1, ... are MoE
            n_moe = len(range(step - 1, layers, step))
        else:
            n_moe = layers
    blocks = nemotron_h_blocks(c, layers) if model_type == "nemotron_h" else ""
    n_moe = blocks.count("E") if blocks and n_moe else n_moe
    shared_inter = c.get("shared_expert_intermediate_size")
    if shared_inter is None and blocks and isinstance(c.get("moe_shared_expert_intermediate_size"), int):
        # vllm 0.34.0 models/nemotron_h.py:178-183: moe_shared_expert_intermediate_size x n_shared_experts (0: none)
        shared_inter = c["moe_shared_expert_intermediate_size"] * int(c.get("n_shared_experts") or 0) or None
    if shared_inter is None and c.get("n_shared_experts") and c.get("moe_intermediate_size"):
        shared_inter = c["n_shared_experts"] * c["moe_intermediate_size"]
    inter = _int(c, "intermediate_size", name)
    moe_inter = _int(c, "moe_intermediate_size", name)
    is_llama4 = model_type.startswith("llama4")
    if shared_inter is None and is_llama4 and isinstance(n_experts, int) and n_experts > 1 and inter:
        shared_inter = inter  # Llama4TextMoe.shared_expert = Llama4TextMLP(config): intermediate_size
    expert_inter = None
    if isinstance(n_experts, int) and n_experts > 1:
        expert_inter = moe_inter or inter
    dense_inter = _int(c, "intermediate_size_mlp", name) if is_llama4 else None
    ungated = ungated_mlp_width(c, model_type, hidden)
    dense_inter = ungated or dense_inter or inter
    g_hd, g_kv = _int(c, "global_head_dim", name) or head_dim, _int(c, "num_global_key_value_heads", name) or kv
    hetero = "full" in kinds and (g_hd, g_kv) != (head_dim, kv)
    return ModelFacts(
        **vision_facts(top),
        name=name, model_type=model_type, num_attention_heads=heads, num_key_value_heads=kv,
        head_dim=head_dim, v_head_dim=v_head_dim, hidden_size=hidden, num_hidden_layers=layers,
        dtype=dtype, dtype_bytes=dtype_bytes, is_mla=is_mla, kv_lora_rank=kv_lora if is_mla else None,
        qk_rope_head_dim=rope if is_mla else None, sliding_window=sw, num_sliding_layers=n_sliding,
        num_full_layers=layers - n_sliding, intermediate_size=inter, layer_kinds=kinds,
        attention_chunk_size=_int(c, "attention_chunk_size", name),
        index_head_dim=_int(c, "index_head_dim", name) if is_mla else None,
        global_head_dim=g_hd if hetero else None, num_global_key_value_heads=g_kv if hetero else None,
        index_topk=_int(c, "index_topk", name) if is_mla else None,
        learnable_sink=bool(c.get("learnable_sink")) if is_mla else False,
        num_nextn_predict_layers=_int(c, "num_nextn_predict_layers", name) or _int(c, "mtp_num_hidden_layers", name) or 0,
        linear_attention=kda[1] if kda else _linear_attention(c, model_type),
        moe_intermediate_size=moe_inter,
        shared_expert_intermediate_size=shared_inter if isinstance(shared_inter, int) else None,
        num_experts=n_experts if isinstance(n_experts, int) else None,
        num_experts_per_tok=c.get("num_experts_per_tok") if isinstance(c.get("num_experts_per_tok"), int) else None,
        quant_method=qc.get("quant_method") or ("modelopt" if isinstance(qc.get("quantization"), dict) else None),
        # DeepSeek-V4 config.json "expert_dtype": "fp4": routed experts stored in FP4 beside the FP8 rest (the
        # checkpoint is "FP4 + FP8 Mixed"); kg.derive.weights sizes the experts with it
        expert_dtype=str(c["expert_dtype"]).lower() if isinstance(c.get("expert_dtype"), str) else None,
        quantization_config=dict(qc),
        quantization_config_source="config.json quantization_config" if qc else "",
        weight_block_size=_block_size(qc, name),
        quant_group_size=qc.get("group_size") if isinstance(qc.get("group_size"), int) else None,
        quant_bits=bits, checkpoint_kv_scales=kv_scales, num_moe_layers=n_moe, layer_blocks=blocks,
        # NemotronHMLP is up_proj/down_proj (nemotron_h.py:109-124); its experts load up/down only (:237, :244)
        mlp_gated=not (blocks or ungated), layer_ffn_sizes=nas["ffn"] if nas else [], moe_latent_size=_int(c, "moe_latent_size" if blocks else "routed_expert_hidden_size", name),
        max_position_embeddings=c.get("max_position_embeddings") if isinstance(c.get("max_position_embeddings"), int) else None,
        vocab_size=c.get("vocab_size") if isinstance(c.get("vocab_size"), int) else None,
        expert_intermediate_size=expert_inter, dense_intermediate_size=dense_inter,
        **_tie_word_embeddings(c, top, model_type),
        q_lora_rank=_int(c, "q_lora_rank", name) if is_mla else None,
        qk_nope_head_dim=_int(c, "qk_nope_head_dim", name) if is_mla else None,
        quant_modules_not_converted=[str(x) for x in qc.get("modules_to_not_convert") or []
                                     if isinstance(x, str)] if isinstance(qc.get("modules_to_not_convert"), list) else [],
        derived_max_model_len=vllm_max_model_len(c, name), vllm_default_max_model_len=vllm_default_max_model_len(c),
        sglang_context_length=sglang_context_length(c, name),
        architecture=_architecture(top), attn_logit_softcapping=_softcap(c),
        mm_tokens_per_image=_opt_int(top, "mm_tokens_per_image", name) if isinstance(top.get("vision_config"), dict) else None,
        source=name, warnings=warnings, **(encdec["facts"] if encdec else {}),
    )


# vLLM model classes that compute the logits from embed_tokens whatever the config says (vLLM 0.33.0).
VLLM_ALWAYS_TIED = {"gemma2": "vllm 0.33.0 model_executor/models/gemma2.py:368 (logits from embed_tokens)"}


def tie_word_embeddings_defaults() -> dict[str, tuple[bool, str]]:
    """transformers' class default of ``tie_word_embeddings`` per config ``model_type``:
    ``{model_type: (tied, "transformers 5.24.0 path:line")}`` (catalog/models/defaults/tie_word_embeddings.yaml)."""
    global _TIE_DEFAULTS
    if _TIE_DEFAULTS is None:
        from kg.core.yamlio import load_yaml
        data = load_yaml(bundled_models_dir() / "defaults" / "tie_word_embeddings.yaml").data
        rel = str(data.get("release") or "transformers")
        _TIE_DEFAULTS = {str(k): (tied, f"{rel} {v}") for tied, key in ((True, "tied"), (False, "untied"))
                         for k, v in (data.get(key) or {}).items()}
    return _TIE_DEFAULTS


_TIE_DEFAULTS: dict[str, tuple[bool, str]] | None = None


def _tie_word_embeddings(c: dict[str, Any], top: dict[str, Any], model_type: str) -> dict[str, Any]:
    """``tie_word_embeddings`` and its source. The config's key when present (text config, then top level); else the
    default of the transformers config class for that ``model_type`` (vLLM reads the attribute of the transformers
    config object, so a missing key takes the class default: True for gemma2, configuration_gemma2.py:82, and
    gemma3_text, configuration_gemma3.py:88, in transformers 5.24.0); an unknown model type stays untied.
    vLLM's Gemma-2 ties whatever the config says (VLLM_ALWAYS_TIED)."""
    if model_type in VLLM_ALWAYS_TIED:
        return {"tie_word_embeddings": True, "tie_word_embeddings_source": VLLM_ALWAYS_TIED[model_type]}
    value = c.get("tie_word_embeddings", top.get("tie_word_embeddings"))
    if isinstance(value, bool):
        return {"tie_word_embeddings": value, "tie_word_embeddings_source": "config.json"}
    tied, src = tie_word_embeddings_defaults().get(model_type, (False, ""))
    return {"tie_word_embeddings": tied, "tie_word_embeddings_source": f"{src} (default; not in config.json)" if src else ""}


def _encoder_decoder_view(c: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The decoder seen as a text model, for a Whisper-style encoder-decoder config (``is_encoder_decoder``
    with ``d_model``, ``decoder_layers``, ``decoder_attention_heads``), else None.

    vLLM 0.33.0 caches K/V of the decoder only: each decoder layer has a self-attention layer (full attention,
    ``num_kv_heads = max(1, heads / tp)``, ``head_dim = d_model / heads``) and a cross-attention layer
    (``CrossAttention``, ``CrossAttentionSpec``) over the encoder output; the encoder's attention is
    ``MMEncoderAttention`` and holds no cache (``model_executor/models/whisper.py:157-240, 284-301, 448-454``).
    transformers maps ``num_attention_heads`` / ``num_hidden_layers`` to the *encoder* (WhisperConfig
    ``attribute_map``), so the decoder keys are read here. Returns ``{"text": keys for parse_config, "facts":
    ModelFacts fields}``."""
    if c.get("is_encoder_decoder") is not True:
        return None
    keys = ("d_model", "decoder_layers", "decoder_attention_heads")
    if not all(isinstance(c.get(k), int) and not isinstance(c.get(k), bool) for k in keys):
        return None
    heads = _int(c, "decoder_attention_heads", name)
    layers = _int(c, "decoder_layers", name)
    d_model = _int(c, "d_model", name)
    if not heads or not layers:
        raise OptkgError(f"{name}: 'decoder_attention_heads' and 'decoder_layers' must be at least 1")
    text = {"num_attention_heads": heads, "num_key_value_heads": heads, "num_hidden_layers": layers,
            "hidden_size": d_model, "head_dim": None, "layer_types": None}
    if str(c.get("model_type") or "") == "whisper":
        text["tie_word_embeddings"] = True  # vLLM ties proj_out to the decoder embeddings (models/whisper.py:977-983)
    if isinstance(c.get("decoder_ffn_dim"), int):
        text["intermediate_size"] = c["decoder_ffn_dim"]
    facts = {"is_encoder_decoder": True, "num_cross_attention_layers": layers,
             "num_encoder_layers": _opt_int(c, "encoder_layers", name) or 0,
             "encoder_ffn_dim": _opt_int(c, "encoder_ffn_dim", name),
             "max_source_positions": _opt_int(c, "max_source_positions", name)}
    return {"text": text, "facts": facts}


LAYER_TYPE_KINDS = {"full_attention": "full", "attention": "full", "global": "full", "sliding_attention": "sliding",
                    "sliding_window": "sliding", "local": "sliding", "chunked_attention": "chunked",
                    "linear_attention": "linear", "mamba": "mamba", "mamba2": "mamba",
                    "moe": "none", "mlp": "none"}  # NemotronH layers_block_type: MoE / MLP blocks hold no cache


def layer_kinds(c: dict[str, Any], model_type: str, layers: int, has_window: bool) -> list[str]:
    """The cache kind of each decoder layer: ``full``, ``sliding``, ``chunked`` (local chunks),
    ``linear`` (Gated DeltaNet / KDA state), ``mamba`` (Mamba2 state) or ``none`` (no cache).

    Order: ``layer_types`` (transformers >= 4.53 writes it; vLLM reads it per layer, vllm 0.33.0
    ``engine/arg_utils.py:2288-2294``); Qwen3-Next ``full_attention_interval`` (layer i is full when
    ``(i+1) % interval == 0``, transformers ``Qwen3NextConfig``); NemotronH ``hybrid_override_pattern``
    (``M`` Mamba, ``*`` attention, ``-``/``E`` no cache); Jamba ``attn_layer_period``/``offset``; the
    architecture defaults transformers fills in when ``layer_types`` is absent: Gemma-3 slides unless
    ``(i+1) % sliding_window_pattern == 0`` (default 6, ``Gemma3TextConfig``), Gemma-2 slides on even
    layers (``Gemma2Config``); Llama-4 ``attention_chunk_size`` on RoPE layers, ``no_rope_layers[i] != 0``
    (default every 4th layer is NoPE, ``Llama4TextConfig``; vLLM ``models/llama4.py:251-264``); Qwen2
    ``max_window_layers``; else every layer slides when a window is set, else every layer is full.
    """
    lt = c.get("layer_types")
    if isinstance(lt, list) and len(lt) == layers and all(isinstance(t, str) for t in lt):
        out = [LAYER_TYPE_KINDS.get(t.lower(), "full") for t in lt]
        if not has_window:
            out = ["full" if k == "sliding" else k for k in out]
        return out
    if model_type == "qwen3_next" and isinstance(c.get("full_attention_interval"), int) and c["full_attention_interval"] > 0:
        k = c["full_attention_interval"]
        return ["full" if (i + 1) % k == 0 else "linear" for i in range(layers)]
    pat = c.get("hybrid_override_pattern")
    if isinstance(pat, str) and len(pat) == layers:
        return [{"M": "mamba", "*": "full"}.get(ch, "none") for ch in pat]
    if isinstance(c.get("attn_layer_period"), int) and c["attn_layer_period"] > 0 and "mamba_d_state" in c:
        per, off = c["attn_layer_period"], int(c.get("attn_layer_offset") or 0)
        return ["full" if i % per == off else "mamba1" for i in range(layers)]
    if model_type.startswith("gemma3") and has_window:
        pattern = c.get("sliding_window_pattern") if isinstance(c.get("sliding_window_pattern"), int) else 6
        return ["sliding" if (i + 1) % pattern else "full" for i in range(layers)]
    if model_type == "gemma2" and has_window:
        return ["sliding" if (i + 1) % 2 else "full" for i in range(layers)]
    if isinstance(c.get("attention_chunk_size"), int) and c["attention_chunk_size"] > 0:
        nrl = c.get("no_rope_layers")
        if not (isinstance(nrl, list) and len(nrl) == layers):
            interval = c.get("no_rope_layer_interval") if isinstance(c.get("no_rope_layer_interval"), int) else 4
            nrl = [int((i + 1) % interval != 0) for i in range(layers)]
        return ["chunked" if x else "full" for x in nrl]
    if has_window:
        if c.get("max_window_layers") is not None and c.get("use_sliding_window"):
            mwl = int(c["max_window_layers"])
            return ["full" if i < mwl else "sliding" for i in range(layers)]
        return ["sliding"] * layers
    return ["full"] * layers


def _linear_attention(c: dict[str, Any], model_type: str) -> dict[str, Any]:
    """State sizes of the linear-attention / SSM layers (element counts), or {} for none.

    GDN (Qwen3-Next, Qwen3.5): ``linear_num_key_heads``, ``linear_num_value_heads``,
    ``linear_key_head_dim``, ``linear_value_head_dim``, ``linear_conv_kernel_dim`` (vLLM
    ``models/qwen3_next.py:892-912``). Mamba2 (NemotronH): ``mamba_num_heads``, ``mamba_head_dim``,
    ``ssm_state_size``, ``n_groups``, ``conv_kernel``, ``mamba_ssm_cache_dtype``.
    """
    keys = ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim")
    if all(isinstance(c.get(k), int) for k in keys):
        out = {"kind": "gdn", **{k: c[k] for k in keys}, "conv_kernel": int(c.get("linear_conv_kernel_dim") or 4)}
        if isinstance(c.get("mamba_ssm_dtype"), str):  # SGLang reads it for every model (configs/mamba_utils.py:71-90)
            out["config_mamba_ssm_dtype"] = c["mamba_ssm_dtype"]
        if isinstance(c.get("mamba_ssm_dtype"), str) and model_type.startswith("qwen3_5"):
            # Qwen3.5: vLLM takes the SSM-state dtype from the config's mamba_ssm_dtype when
            # --mamba-ssm-cache-dtype is auto (vllm 0.33.0 model_executor/models/config.py:953-976)
            out["ssm_cache_dtype"] = c["mamba_ssm_dtype"]
        return out
    m2 = ("mamba_num_heads", "mamba_head_dim", "ssm_state_size")
    if all(isinstance(c.get(k), int) for k in m2):
        out = {"kind": "mamba2", **{k: c[k] for k in m2}, "n_groups": int(c.get("n_groups") or 1),
               "conv_kernel": int(c.get("conv_kernel") or 4),
               "ssm_cache_dtype": str(c.get("mamba_ssm_cache_dtype") or "float32")}
        if isinstance(c.get("mamba_ssm_dtype"), str):
            out["config_mamba_ssm_dtype"] = c["mamba_ssm_dtype"]
        return out
    return {}


def _block_size(qc: dict[str, Any], name: str) -> list[int] | None:
    """``quantization_config.weight_block_size`` ([rows, cols] of non-negative integers), or None when absent."""
    v = qc.get("weight_block_size")
    if v is None:
        return None
    if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= MAX_SIZE
                                                         for x in v)):
        raise OptkgError(f"{name}: quantization_config.weight_block_size must be two non-negative integers, found {show(v)}")
    return v


def _length(v: float, name: str) -> int:
    """A context length in tokens; OptkgError when RoPE scaling made it infinite or past any real model."""
    if not math.isfinite(v) or v > MAX_SIZE:
        raise OptkgError(f"{name}: the context length the config implies ({show(v)} tokens, after RoPE scaling) is past "
                         f"any real model ({MAX_SIZE:,}); check rope_scaling.factor and max_position_embeddings")
    return int(v)


def _rope_scaling(c: dict[str, Any]) -> dict[str, Any] | None:
    rs = c.get("rope_scaling")
    if not isinstance(rs, dict):
        rs = c.get("rope_parameters") if isinstance(c.get("rope_parameters"), dict) else None
    return rs


def vllm_max_model_len(c: dict[str, Any], name: str = "config.json", release: str | None = None) -> int | None:
    """The longest ``max_model_len`` vLLM accepts for config ``c`` (tokens), or None without a length key.

    vLLM 0.33.0 ``_get_and_verify_max_len`` (``config/model.py:2545-2684``): the smallest of
    ``VLLM_LENGTH_KEYS``; a RoPE scaling whose type is not su / longrope / llama3 / yarn /
    deepseek_yarn / deepseek_llama_scaling multiplies it by ``factor`` ("YaRN variants leave
    max_position_embeddings already scaled", ``:2610-2621``); gemma3 configs are already scaled.
    A longer ``--max-model-len`` is a startup ValueError unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``.
    E.g. DeepSeek-V3 (YaRN, max_position_embeddings 163,840) -> 163,840; Qwen3-235B (no scaling) -> 40,960.
    Up to vLLM 0.29.0 (``release`` below 0.30.0) only su / longrope / llama3 kept the length, and YaRN started from
    ``original_max_position_embeddings`` (0.29.0 ``config/model.py:2452-2458``; 0.24.0 ``:2160-2166``): Qwen3 with
    YaRN factor 4 from 32,768 -> 131,072 there, 40,960 from 0.30.0 (vLLM PR #56446).
    """
    lens = [c[k] for k in VLLM_LENGTH_KEYS if isinstance(c.get(k), (int, float)) and not isinstance(c.get(k), bool)]
    if not lens:
        return None
    derived = float(min(lens))
    rs = _rope_scaling(c)
    if rs and "gemma3" not in str(c.get("model_type") or ""):
        rtype = str(rs.get("rope_type") or rs.get("type") or "default")
        from kg.core.relcmp import Release
        before_030 = release is not None and Release(str(release)) < Release("0.30.0")
        keep = ("su", "longrope", "llama3") if before_030 else \
            ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
        if rtype not in keep:
            factor = rs.get("factor", 1.0)
            factor = float(factor) if isinstance(factor, (int, float)) and not isinstance(factor, bool) else 1.0
            orig = rs.get("original_max_position_embeddings")
            if before_030 and rtype == "yarn" and isinstance(orig, int) and not isinstance(orig, bool):
                derived = float(orig)
            derived *= factor
    return _length(derived, name)


def vllm_default_max_model_len(c: dict[str, Any]) -> int | None:
    """The ``max_model_len`` vLLM runs with when none is given: the derived limit, except LongRoPE
    models, which default to ``original_max_position_embeddings`` (vLLM 0.33.0 ``config/model.py:2641-2652``),
    and configs with no length key, which run at 2,048 (``VLLM_NO_LENGTH_KEY_DEFAULT``)."""
    limit = vllm_max_model_len(c)
    if limit is None:  # no length key: vLLM assumes 2,048 with a warning and accepts any --max-model-len
        return VLLM_NO_LENGTH_KEY_DEFAULT
    rs = _rope_scaling(c)
    if rs and str(rs.get("rope_type") or rs.get("type") or "") == "longrope":
        orig = c.get("original_max_position_embeddings")
        if isinstance(orig, int) and not isinstance(orig, bool):
            return orig
    return limit


def sglang_context_length(c: dict[str, Any], name: str = "config.json") -> int | None:
    """The longest ``--context-length`` SGLang accepts for config ``c`` (tokens), or None without a length key.

    SGLang ``get_context_length`` (python/sglang/srt/utils/hf_transformers_utils.py): the first of
    ``SGLANG_LENGTH_KEYS`` times the RoPE ``factor``, where the factor is 1 when the scaling names
    ``original_max_position_embeddings`` or is llama3. A longer value is refused at startup
    (``ModelConfig._derive_context_length``) unless ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1``.
    """
    rs = _rope_scaling(c)
    factor = 1.0
    if rs:
        f = rs.get("factor", 1)
        factor = float(f) if isinstance(f, (int, float)) and not isinstance(f, bool) else 1.0
        if "original_max_position_embeddings" in rs or rs.get("rope_type") == "llama3":
            factor = 1.0
    for k in SGLANG_LENGTH_KEYS:
        v = c.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return _length(factor * v, name)
    return None


def load_config_file(path: Path | str, hf_quant: Path | None = None) -> ModelFacts:
    """Read a ``config.json`` (or a folder holding one). Raises OptkgError on missing file / bad JSON / missing fields.
    ``hf_quant``: where the ModelOpt ``hf_quant_config.json`` is (default: beside config.json)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    text = read_text(p, max_bytes=8 * 1024 * 1024)
    cfg = loads_json(text, str(p), nonfinite=True)  # no 5,000-digit integers, no 100,000-deep arrays
    raw = cfg
    hq = hf_quant or p.parent / "hf_quant_config.json"
    hq_cfg = None
    if isinstance(cfg, dict) and not isinstance(cfg.get("quantization_config"), dict) and hq.is_file():
        # ModelOpt <= 0.29 writes its quantisation beside config.json; vLLM reads it when config.json
        # has no quantization_config (vllm 0.33.0 transformers_utils/config.py:951-962)
        hq_cfg = loads_json(read_text(hq, max_bytes=1024 * 1024), str(hq))
        if not isinstance(hq_cfg, dict):
            raise OptkgError(f"{hq}: expected a JSON object")
        cfg = dict(cfg, quantization_config=hq_cfg)
    try:
        facts = parse_config(cfg, str(p))
    except OptkgError as e:
        raise e.at_json_key_line(str(p), text) from None
    facts.name = model_id_for(p, cfg)
    # the config.json as read (an attribute, not a field: to_dict and copies leave it out); the engines' generated
    # check rows read its keys the way the engine's own config object does (kg.engines.sglang.checkns)
    facts.raw_config = raw if isinstance(raw, dict) else {}
    if hq_cfg is not None:
        facts.quantization_config_source = "hf_quant_config.json (ModelOpt)"
    return facts


def model_id_for(p: Path, cfg: Any) -> str:
    """The model id a config.json file stands for, for report headers: a bundled file's hub id, a Hugging Face
    cache snapshot's ``org/name`` (``models--org--name/snapshots/<rev>/config.json``), the ``_name_or_path`` a
    transformers serialisation keeps (when it is a hub id), else the path as given."""
    try:
        if p.resolve().parent == bundled_models_dir().resolve():
            return p.stem.replace("__", "/", 1)
    except OSError:
        pass
    parts = p.parts
    for i, part in enumerate(parts[:-2]):
        if part.startswith("models--") and parts[i + 1] == "snapshots" and part.count("--") >= 2:
            return part[len("models--"):].replace("--", "/", 1)
    nop = cfg.get("_name_or_path") if isinstance(cfg, dict) else None
    if isinstance(nop, str) and HUB_ID.match(nop):
        return nop
    return str(p)


def bundled_models_dir() -> Path:
    return paths.catalog_dir() / "models"


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def _hub_norm(f: Path) -> str:
    return _norm(f.stem.replace("__", "/", 1))


def bundled_model_ids() -> list[str]:
    """Hub ids of the bundled configs (file ``org__name.json`` -> ``org/name``)."""
    return sorted(f.stem.replace("__", "/", 1) for f in bundled_models_dir().glob("*.json"))


def load_bundled(f: Path) -> ModelFacts:
    """A bundled config by file, with its ModelOpt ``hf_quant/<same name>`` beside it when there is one; the
    facts are named by the hub id, not the path."""
    facts = load_config_file(f, bundled_models_dir() / "hf_quant" / f.name)
    facts.name = f.stem.replace("__", "/", 1)
    return facts


def closest_model_ids(name: str, n: int = 3) -> list[str]:
    """The bundled hub ids nearest to ``name`` (difflib on the normalised names, the org ignored as a fallback)."""
    import difflib
    ids = bundled_model_ids()
    by_norm = {_norm(i): i for i in ids}
    # a fine-tuned release of a bundled base (``-Instruct``, ``-Chat``, ``-it``) first: its layer shapes are
    # usually the base's, though not always its context length (Qwen2.5-7B 131,072 vs -Instruct 32,768), so it is
    # a suggestion, never a silent substitute
    base = re.sub(r"-(instruct|chat|it)(?=$|-)", "", name, flags=re.I)
    first = [i for k in (_norm(base), _norm(base.replace("/Llama-", "/Meta-Llama-"))) if base != name
             for i in [by_norm.get(k)] if i]
    got = difflib.get_close_matches(_norm(name), list(by_norm), n=n, cutoff=0.6)
    if not got:
        tail = {_norm(i.split("/", 1)[1]): i for i in ids}
        got = [tail[k] for k in difflib.get_close_matches(_norm(name.split("/")[-1]), list(tail), n=n, cutoff=0.6)]
    else:
        got = [by_norm[k] for k in got]
    return list(dict.fromkeys(first + got))[:n]


from kg.inputs.hfcache import HUB_ID, hf_cache_config, hf_cache_dir  # noqa: E402,F401  (re-exported: callers import them here)


def resolve_model(name: str, revision: str | None = None) -> ModelFacts:
    """Resolve a model argument as ``vllm serve`` would: a local folder/file with config.json, a hub id in
    the Hugging Face cache (``hf_cache_config``: HF_HOME / HF_HUB_CACHE, ``revision``), or a bundled hub id.

    Hub ids match case-insensitively and ignore the ``Meta-`` prefix rename of Llama 3.1
    (``meta-llama/Llama-3.1-70B`` finds ``meta-llama__Meta-Llama-3.1-70B.json``).
    Raises OptkgError listing the bundled ids and how to pass a local config.json.
    """
    if str(name) == "":  # Path("") is the working directory: its config.json would be read as the model
        raise OptkgError("model: empty name (give a Hugging Face id such as Qwen/Qwen3-32B, or a folder with "
                         "config.json)")
    p = Path(name).expanduser()
    if p.is_dir() or (p.is_file() and p.suffix == ".json"):
        facts = load_config_file(p)
        if not HUB_ID.match(facts.name):
            facts.name = name  # no model id known: the path as the user gave it
        return facts
    cached = hf_cache_config(name, revision)
    if cached is None and revision and HUB_ID.match(name) and (hf_cache_dir() / f"models--{name.replace('/', '--')}").is_dir():
        raise OptkgError(f"--revision {revision}: model '{name}' has no snapshot at that revision in the Hugging Face "
                         f"cache ({hf_cache_dir()}); download it or give the revision the cache holds")
    if cached is not None:
        facts = load_config_file(cached)
        facts.name = name
        facts.source = f"{name} (Hugging Face cache: {cached})"
        return facts
    want = _norm(name)
    want_alt = _norm(name.replace("/Llama-", "/Meta-Llama-"))
    index = folder_index(bundled_models_dir(), _hub_norm)
    f = index.get(want) or index.get(want_alt)
    if f is not None:
        return parsed_once(f, (bundled_models_dir() / "hf_quant" / f.name,), load_bundled)
    near = closest_model_ids(name)
    raise OptkgError(
        f"unknown model '{name}': not a folder with config.json, not in the Hugging Face cache ({hf_cache_dir()}) "
        f"and not one of the {len(bundled_model_ids())} bundled configs"
        + (f" (closest: {', '.join(near)})" if near else "")
        + "; `optkg models` lists them; pass --config path/to/config.json, or set OPTKG_HF_DOWNLOAD=1 to fetch "
        "the hub's config.json into that cache"
    )


def config_dict(name: str, base_dir: Path | str | None = None) -> dict[str, Any]:
    """The raw ``config.json`` dict behind ``resolve_model(name)`` (a folder, a .json file or a bundled
    id; a relative path is tried against ``base_dir`` too). {} when it cannot be read."""
    for cand in ([Path(name).expanduser()] + ([Path(base_dir) / name] if base_dir else [])):
        p = cand / "config.json" if cand.is_dir() else cand
        if p.is_file() and p.suffix == ".json":
            try:
                d = loads_json(read_text(p, max_bytes=8 * 1024 * 1024), str(p), nonfinite=True)
            except OptkgError:
                return {}
            return d if isinstance(d, dict) else {}
    want = _norm(name)
    for f in sorted(bundled_models_dir().glob("*.json")):
        if _norm(f.stem.replace("__", "/", 1)) == want:
            return loads_json(read_text(f, max_bytes=8 * 1024 * 1024), str(f), nonfinite=True)
    return {}
