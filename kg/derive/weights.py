"""Weight memory of a checkpoint as the serving engine loads it: bytes per parameter per tensor group.

Tensor groups (parameter counts from ``weight_params``): ``attention`` (q/k/v/o or the MLA
projections), ``dense_mlp`` (gate/up/down of the non-MoE layers), ``experts`` (routed experts),
``shared_experts``, ``router`` (the MoE gate), ``embedding`` (embed_tokens), ``lm_head`` and ``vision`` (a
multimodal model's vision tower, ``ModelFacts.vision_params``: counted at the model dtype like the embeddings (a
quantised tower is not modelled); 0 where optkg cannot size the tower).

Where the bytes per parameter come from (first that applies; ``WeightScheme.source`` names it):

1. the checkpoint's ``quantization_config`` in config.json, else ModelOpt's separate
   ``hf_quant_config.json`` beside it (vLLM 0.33.0 ``transformers_utils/config.py:951-962``);
   ``--quantization`` must agree with it (vLLM ``ModelConfig._verify_quantization``);
2. ``--quantization fp8`` (= ``fp8_per_tensor``), ``fp8_per_tensor`` / ``fp8_per_block`` / ``fp8_per_channel``
   (vLLM >= 0.20.0 / 0.24.0 online shorthands) or ``bitsandbytes`` on an unquantised checkpoint: quantised while loading;
3. the model dtype (``--dtype`` unless ``auto``, else ``torch_dtype``).
An ``expert_dtype`` setting (e.g. ``fp4``) overrides the experts' bytes only.

Per method (b = weight bits, g = group size; scales are counted):

- FP8 per-tensor (``--quantization fp8`` online, ``activation_scheme`` configs without blocks,
  ModelOpt FP8): 1 byte plus one fp32 scale per weight matrix (``Fp8LinearMethod.create_weights``
  registers ``weight_scale`` as a ``PerTensorScaleParameter``, ``quantization/fp8.py:319-326``).
- FP8 block ``[n, k]``: 1 + 4 / (n*k) (``weight_scale_inv`` ``BlockQuantScaleParameter``,
  ``fp8.py:330-339``); 128x128 -> 1.000244140625.
- GPTQ / AWQ (and Marlin forms): ``b/8 + (2 + b/8) / g`` (an fp16 scale and a packed b-bit zero per
  group of g input rows per output column); 4-bit g128 -> 0.51953125.
- compressed-tensors ``config_groups``: each group's ``weights`` ``num_bits`` / ``strategy``
  (tensor, channel -> one scale per output row of ``hidden_size`` inputs, group -> one per
  ``group_size``, block -> one per ``block_structure``) with a zero point when not symmetric; the
  scale is fp32 for float weights and fp16/bf16 (2 B) for int weights; NVFP4 (4-bit float, group
  16) stores fp8 scales: 0.5 + 1/16 = 0.5625. ``targets`` choose the groups (``Linear``: all;
  a regex naming ``experts``/``self_attn``/``mlp``: that group); ``ignore`` keeps groups at the
  model dtype (vLLM ``compressed_tensors/compressed_tensors.py`` ``get_quant_method``).
- ModelOpt (``hf_quant_config.json`` ``quantization.quant_algo``): FP8 -> 1, NVFP4 ->
  0.5625 (fp8 scale per 16); ``exclude_modules`` keep their groups at the model dtype
  (``quantization/modelopt.py:139-153, 186-222``).
- bitsandbytes: 4-bit ``0.5 + 4/64`` (an fp32 absmax per 64 values), with double quantisation
  ``0.5 + 1/64 + 4/(64*256)``; 8-bit ``1 + 4/hidden_size`` (one fp32 scale per row).
- MXFP4 (gpt-oss): experts only, ``0.5 + 1/32`` (an e8m0 scale byte per 32 values); the rest stays
  in the model dtype (``quantization/mxfp4.py`` quantises ``FusedMoE`` layers only).
Embeddings and ``lm_head`` are ``VocabParallelEmbedding``s, not ``LinearBase``, so FP8, GPTQ, AWQ
and compressed-tensors leave them at the model dtype (``fp8.py:177-208``); the router stays at the
model dtype too (the MoE gate is built with ``quant_config=None`` in the Mixtral/Qwen-MoE/DeepSeek
model files).
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from kg.core.errors import OptkgError
from kg.inputs.modelcfg import DTYPE_BYTES, ModelFacts

GROUPS = ("attention", "dense_mlp", "experts", "shared_experts", "router", "embedding", "lm_head", "vision")
LINEAR_GROUPS = ("attention", "dense_mlp", "experts", "shared_experts")

GPTQ_LIKE = ("gptq", "awq", "gptq_marlin", "awq_marlin", "marlin", "moe_wna16", "auto-round", "auto_round",
             "awq_triton")
FP8_LIKE = ("fp8", "fbgemm_fp8", "ptpc_fp8", "modelopt", "modelopt_fp8", "w8a8_fp8")
NVFP4_BPP = 0.5 + 1 / 16          # 4-bit value + one fp8 (e4m3) scale per 16 values
MXFP4_BPP = 0.5 + 1 / 32          # 4-bit value + one e8m0 scale per 32 values
# expert_dtype setting -> bytes per expert parameter
EXPERT_DTYPES: dict[str, float] = {"fp4": NVFP4_BPP, "nvfp4": NVFP4_BPP, "mxfp4": MXFP4_BPP, "fp8": 1.0,
                                   "int8": 1.0, "int4": 0.5 + 2.5 / 128, "bf16": 2.0, "bfloat16": 2.0,
                                   "fp16": 2.0, "float16": 2.0}


@dataclass
class WeightScheme:
    """Stored bytes per parameter for each tensor group (``GROUPS``) and where they come from.

    ``method`` is the quantisation method ('none' for an unquantised load); ``source`` one
    sentence naming the flag or file the fact came from; ``per_tensor_scale_bytes`` fp32 scales
    counted once per weight matrix (FP8 per-tensor); ``ignored`` the patterns kept unquantised.
    """

    method: str
    source: str
    bytes_per_param: dict[str, float]
    per_tensor_scale_bytes: float = 0.0
    ignored: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def dominant(self) -> float:
        """Bytes per parameter of the quantised linear layers (experts when only they are quantised)."""
        b = self.bytes_per_param
        return b["experts"] if b["experts"] != b["attention"] else b["attention"]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _dtype_bytes(dtype: str | None, model: ModelFacts) -> float:
    d = (dtype or "auto").lower()
    if d == "auto":
        return float(model.dtype_bytes)
    if d not in DTYPE_BYTES:
        raise OptkgError(f"--dtype: '{dtype}' is not a dtype optkg knows (auto, {', '.join(sorted(DTYPE_BYTES))})")
    return float(DTYPE_BYTES[d])


def _groups_named(pattern: str) -> set[str]:
    """Tensor groups an ignore/exclude/target pattern names (module names as in HF checkpoints:
    ``lm_head``, ``re:.*self_attn.*``, ``*.mlp.gate``, ``re:.*mlp.experts.*``)."""
    p = pattern.lower()
    p = p[3:] if p.startswith("re:") else p
    p = p.rstrip("$").rstrip("*").rstrip(".")
    out: set[str] = set()
    if "lm_head" in p:
        out.add("lm_head")
    if "embed" in p:
        out.add("embedding")
    if "shared_expert" in p:
        out.add("shared_experts")
    elif "expert" in p:
        out.add("experts")
    if re.search(r"(self_attn|attn|q_proj|k_proj|v_proj|o_proj|qkv|kv_a|kv_b|q_a_|q_b_)", p):
        out.add("attention")
    if re.search(r"(mlp\.gate|router|block_sparse_moe\.gate)$", p):
        out.add("router")
    elif re.search(r"(gate_proj|up_proj|down_proj|mlp)", p) and "expert" not in p:
        out.add("dense_mlp")
    return out


def _layer_specific(pattern: str) -> bool:
    return bool(re.search(r"layers\.\d+", pattern))


def _apply_ignored(bpp: dict[str, float], patterns: list[str], dt: float, notes: list[str]) -> list[str]:
    kept, single = [], []
    for pat in patterns:
        if not isinstance(pat, str):
            continue
        if _layer_specific(pat):
            single.append(pat)
            continue
        for g in _groups_named(pat):
            bpp[g] = dt
        kept.append(pat)
    if len(single) == 1:
        notes.append(f"ignored module '{single[0]}' names single layers; its size is not counted at the model dtype")
    elif single:
        # one line for the lot: a checkpoint's ignore list often names every layer's router (94 for
        # Qwen3-235B-A22B-NVFP4), and a note per module buried the report
        notes.append(f"{len(single)} ignored modules name single layers (e.g. '{single[0]}', '{single[-1]}'); "
                     "their sizes are not counted at the model dtype")
    return kept


def _ct_group_bytes(w: dict[str, Any], hidden: int) -> float:
    """Bytes per parameter of one compressed-tensors ``weights`` scheme (see module doc)."""
    bits = w.get("num_bits") if isinstance(w.get("num_bits"), int) else 8
    kind = str(w.get("type") or "int").lower()
    strategy = str(w.get("strategy") or "tensor").lower()
    sym = w.get("symmetric", True) is not False
    scale_b = 4.0 if kind == "float" else 2.0
    if kind == "float" and bits == 4:
        scale_b = 1.0  # NVFP4: fp8 group scales (plus one fp32 global scale per tensor)
    per = bits / 8
    elems = None
    if strategy == "channel":
        elems = hidden or None
    elif strategy in ("group", "tensor_group"):
        elems = w.get("group_size") if isinstance(w.get("group_size"), int) and w["group_size"] > 0 else None
    elif strategy == "block":
        bs = w.get("block_structure")
        if isinstance(bs, list) and len(bs) == 2 and all(isinstance(x, int) and x > 0 for x in bs):
            elems = bs[0] * bs[1]
    if elems:
        per += scale_b / elems + (0.0 if sym else (bits / 8) / elems)
    return per


def _scheme_from_qc(qc: dict[str, Any], model: ModelFacts, dt: float, where: str) -> WeightScheme:
    """A scheme from a checkpoint ``quantization_config`` (config.json) or ``hf_quant_config.json``."""
    notes: list[str] = []
    # ModelOpt <= 0.29 hf_quant_config.json: {"producer": ..., "quantization": {"quant_algo": ...}}
    if isinstance(qc.get("quantization"), dict) and "quant_method" not in qc:
        q = qc["quantization"]
        qc = {"quant_method": "modelopt", "quant_algo": q.get("quant_algo"),
              "exclude_modules": q.get("exclude_modules") or [], "group_size": q.get("group_size")}
    qm = str(qc.get("quant_method") or "").lower()
    bpp = {g: dt for g in GROUPS}
    per_tensor = 0.0
    ignored: list[str] = []
    if qm in ("modelopt", "modelopt_fp4", "modelopt_fp8"):
        algo = str(qc.get("quant_algo") or "").upper()
        if "NVFP4" in algo or "FP4" in algo:
            q, per_tensor = NVFP4_BPP, 4.0  # plus one fp32 global scale (weight_scale_2) per matrix
            qm = "modelopt_fp4"
        elif "FP8" in algo:
            q, per_tensor = 1.0, 4.0
            qm = "modelopt_fp8"
        else:
            raise OptkgError(f"{where}: quant_algo {qc.get('quant_algo')!r} is not one optkg sizes (FP8, NVFP4)")
        for g in LINEAR_GROUPS:
            bpp[g] = q
        ignored = _apply_ignored(bpp, list(qc.get("exclude_modules") or []), dt, notes)
    elif qm == "compressed-tensors":
        groups = qc.get("config_groups") if isinstance(qc.get("config_groups"), dict) else {}
        assigned: set[str] = set()
        for _, grp in sorted(groups.items()):
            if not isinstance(grp, dict) or not isinstance(grp.get("weights"), dict):
                continue
            b = _ct_group_bytes(grp["weights"], model.hidden_size)
            targets = [t for t in grp.get("targets") or [] if isinstance(t, str)]
            names: set[str] = set()
            for t in targets:
                if t in ("Linear", "nn.Linear") or t.lower().endswith("linear"):
                    names |= set(LINEAR_GROUPS)
                else:
                    names |= _groups_named(t) & set(LINEAR_GROUPS)
            for g in names - assigned:
                bpp[g] = b
            assigned |= names
            if grp["weights"].get("strategy") == "tensor":
                per_tensor = 4.0
        ignored = _apply_ignored(bpp, list(qc.get("ignore") or []), dt, notes)
    elif qm in GPTQ_LIKE:
        bits = qc.get("bits") if isinstance(qc.get("bits"), int) else (qc.get("w_bit") if isinstance(qc.get("w_bit"), int) else 4)
        g = qc.get("group_size") if isinstance(qc.get("group_size"), int) else qc.get("q_group_size")
        q = bits / 8 + ((2 + bits / 8) / g if isinstance(g, int) and g > 0 else 0.0)
        for grp in LINEAR_GROUPS:
            bpp[grp] = q
        ignored = _apply_ignored(bpp, list(qc.get("modules_to_not_convert") or []), dt, notes)
    elif qm in FP8_LIKE or qm.startswith("fp8"):
        blk = qc.get("weight_block_size")
        if isinstance(blk, list) and len(blk) == 2 and all(isinstance(x, int) and x > 0 for x in blk):
            q = 1.0 + 4.0 / (blk[0] * blk[1])
        else:
            q, per_tensor = 1.0, 4.0
        for grp in LINEAR_GROUPS:
            bpp[grp] = q
        ignored = _apply_ignored(bpp, list(qc.get("ignored_layers") or qc.get("modules_to_not_convert") or []), dt, notes)
    elif qm == "mxfp4":
        bpp["experts"] = MXFP4_BPP
        ignored = [x for x in qc.get("modules_to_not_convert") or [] if isinstance(x, str)]
    elif qm == "bitsandbytes":
        if qc.get("load_in_8bit") is True:
            q = 1.0 + 4.0 / max(1, model.hidden_size)
        else:
            q = 0.5 + (1 / 64 + 4 / (64 * 256) if qc.get("bnb_4bit_use_double_quant") else 4 / 64)
        for grp in LINEAR_GROUPS:
            bpp[grp] = q
        ignored = _apply_ignored(bpp, list(qc.get("llm_int8_skip_modules") or []), dt, notes)
    elif isinstance(qc.get("bits"), int):
        q = qc["bits"] / 8
        for grp in LINEAR_GROUPS:
            bpp[grp] = q
        notes.append(f"quant_method {qm or '?'}: sized as {qc['bits']} bits per weight, scales not counted")
    else:
        notes.append(f"quant_method {qm or '?'}: not a method optkg sizes; weights counted at the model dtype")
    return WeightScheme(qm or "unknown", where, bpp, per_tensor, ignored, notes)


def weight_scheme(model: ModelFacts, quantization: str | None = None, dtype: str | None = None,
                  expert_dtype: str | None = None) -> WeightScheme:
    """Bytes per parameter per tensor group for ``model`` loaded with ``--quantization`` / ``--dtype``.

    See the module doc for the order of sources and each method's bytes. Raises OptkgError for a
    ``--dtype`` or ``expert_dtype`` optkg does not know.
    """
    dt = _dtype_bytes(dtype, model)
    q = (quantization or "").lower() or None
    qc = model.quantization_config or {}
    if qc:
        origin = model.quantization_config_source or "config.json quantization_config"
        s = _scheme_from_qc(qc, model, dt, origin)
        if q and q.replace("_marlin", "") != s.method.replace("_marlin", "") and not (
                q.startswith("modelopt") and s.method.startswith("modelopt")):
            s.notes.append(f"--quantization {q} differs from the checkpoint's {s.method}: vLLM refuses to start "
                           "(ModelConfig._verify_quantization); sized as the checkpoint")
        elif q:
            s.source += f" (--quantization {q} agrees)"
    elif q in ("fp8", "ptpc_fp8", "fbgemm_fp8", "fp8_per_tensor", "fp8_per_block", "fp8_per_channel"):
        # online FP8 (vLLM 0.33.0 config/quantization.py:195-209: fp8_per_tensor / fp8_per_block (128 x 128) /
        # fp8_per_channel quantise linear and MoE weights; `fp8` on an unquantised checkpoint is fp8_per_tensor,
        # model_loader/weight_utils.py:355-362)
        bpp = {g: dt for g in GROUPS}
        per_matrix = 4.0
        q_b = 1.0
        if q == "fp8_per_block":
            q_b, per_matrix = 1.0 + 4.0 / (128 * 128), 0.0
        elif q == "fp8_per_channel":
            q_b, per_matrix = 1.0 + 4.0 / max(1, model.hidden_size), 0.0
        for g in LINEAR_GROUPS:
            bpp[g] = q_b
        s = WeightScheme(q, f"--quantization {q} on an unquantised checkpoint: linear and expert weights cast to "
                            "FP8 while loading, embeddings and lm_head kept", bpp, per_matrix)
    elif q == "bitsandbytes":
        bpp = {g: dt for g in GROUPS}
        for g in LINEAR_GROUPS:
            bpp[g] = 0.5 + 4 / 64
        s = WeightScheme(q, "--quantization bitsandbytes: 4-bit in-flight quantisation of the linear layers", bpp)
    else:
        s = WeightScheme("none", "model dtype" + (f" (--dtype {dtype})" if dtype and dtype != "auto" else
                                                  f" ({model.dtype})"), {g: dt for g in GROUPS})
        if q:
            s.notes.append(f"--quantization {q} needs a checkpoint quantised with it (the config has no "
                           "quantization_config); weights counted at the model dtype")
    if expert_dtype:
        e = str(expert_dtype).lower()
        if e not in EXPERT_DTYPES:
            raise OptkgError(f"expert_dtype: '{expert_dtype}' is not one optkg sizes ({', '.join(sorted(EXPERT_DTYPES))})")
        s.bytes_per_param["experts"] = EXPERT_DTYPES[e]
        s.source += f"; experts {e} (expert_dtype)"
    return s


def weight_params(model: ModelFacts) -> dict[str, int]:
    """Parameter counts by part: ``group_params`` with ``embedding`` = embeddings + lm_head."""
    g = group_params(model)
    g["embedding"] += g.pop("lm_head")
    return g


def group_params(model: ModelFacts) -> dict[str, int]:
    """Parameter counts per tensor group (``GROUPS``); formulas in ``estimate_weight_bytes``."""
    h = model.hidden_size
    d, vd = model.head_dim, model.v_head_dim
    H, L = model.num_attention_heads, model.num_hidden_layers
    if model.is_mla and model.kv_lora_rank and model.qk_rope_head_dim and model.qk_nope_head_dim:
        rope, nope = model.qk_rope_head_dim, model.qk_nope_head_dim
        qk = nope + rope
        q = (h * model.q_lora_rank + model.q_lora_rank * H * qk) if model.q_lora_rank else h * H * qk
        kv = h * (model.kv_lora_rank + rope) + model.kv_lora_rank * H * (nope + vd)
        attn = q + kv + H * vd * h
    else:
        kvh = model.num_key_value_heads if not model.is_mla else max(1, H // 4)
        attn = H * d * h + kvh * d * h + kvh * vd * h + H * vd * h
    if model.is_encoder_decoder:
        return _encoder_decoder_params(model, attn)
    if model.layer_blocks:
        return _one_block_layer_params(model, attn)
    n_moe = model.num_moe_layers if model.is_moe else 0
    dense_inter = model.dense_intermediate_size or model.intermediate_size or 4 * h
    experts = shared = router = 0
    if n_moe:
        e_inter = model.expert_intermediate_size or model.intermediate_size or 4 * h
        # a latent MoE (Kimi-K3 routed_expert_hidden_size, vllm 0.34.0 models/kimi_k3/nvidia/model.py:386-392, :480-503, :555)
        # runs its experts in the latent width between a down and an up projection, counted with the router
        latent = model.moe_latent_size
        experts = n_moe * 3 * (latent or h) * e_inter * (model.num_experts or 1)
        if model.shared_expert_intermediate_size:
            shared = n_moe * 3 * h * model.shared_expert_intermediate_size
        router = n_moe * (h * (model.num_experts or 1) + (2 * h * latent if latent else 0))
    emb = h * (model.vocab_size or 0)
    # layers without attention (Nemotron-NAS no_op blocks) hold none of its weights; per-layer MLP widths where set
    n_attn = L - model.layer_kinds.count("none")
    mlp = (3 if model.mlp_gated else 2) * h * (sum(model.layer_ffn_sizes) if model.layer_ffn_sizes else dense_inter * (L - n_moe))
    return {
        "attention": attn * n_attn,
        "dense_mlp": mlp,
        "experts": experts,
        "shared_experts": shared,
        "router": router,
        "embedding": emb,
        "lm_head": 0 if model.tie_word_embeddings else emb,
        "vision": model.vision_params or 0,
    }


def mamba2_mixer_params(model: ModelFacts) -> int:
    """One Mamba2 mixer's weights: ``in_proj`` ``h x (I + conv_dim + heads)``, the depthwise ``conv1d``
    ``conv_kernel x conv_dim`` and ``out_proj`` ``I x h``, with ``I = mamba_num_heads x mamba_head_dim`` and
    ``conv_dim = I + 2 x n_groups x ssm_state_size`` (vllm 0.34.0 model_executor/layers/mamba/mamba_mixer2.py:345,
    :377-390, :499-505; the per-head A, D, dt_bias and the gated norm are left out like other norms). 0 without
    Mamba2 sizes."""
    la = model.linear_attention
    if la.get("kind") != "mamba2":
        return 0
    inner = la["mamba_num_heads"] * la["mamba_head_dim"]
    conv = inner + 2 * la["n_groups"] * la["ssm_state_size"]
    return model.hidden_size * (inner + conv + la["mamba_num_heads"]) + la["conv_kernel"] * conv + inner * model.hidden_size


def _one_block_layer_params(model: ModelFacts, attn: int) -> dict[str, int]:
    """NemotronH: every decoder layer is one block (``layer_blocks``): ``M`` a Mamba2 mixer (counted with the
    attention group: the sequence mixer, ``mamba2_mixer_params``), ``*`` attention, ``-`` an MLP of
    ``intermediate_size``, ``E`` a MoE layer; the MLPs and experts are up/down only (``mlp_gated`` false:
    ``2 x width x inter``). A MoE layer holds ``n_routed_experts`` experts in ``moe_latent_size`` width (else
    ``hidden_size``), the shared expert ``2 x h x shared_inter``, the router ``h x experts`` and, with a latent
    width, the two latent projections ``2 x h x latent`` (vllm 0.34.0 models/nemotron_h.py:135-256; ModelOpt
    leaves them unquantised, :214-224, so they count with the router at the model dtype). Nemotron-3-Nano-30B-A3B:
    31,577,554,944 parameters (published 31.6 B); Nemotron-3-Super-120B-A12B: 120,667,570,176 (120 B)."""
    h, b = model.hidden_size, model.layer_blocks
    mats = 3 if model.mlp_gated else 2
    n_e, experts = b.count("E"), model.num_experts or 1
    width = model.moe_latent_size or h
    latent = 2 * h * model.moe_latent_size if model.moe_latent_size else 0
    emb = h * (model.vocab_size or 0)
    return {
        "attention": attn * b.count("*") + mamba2_mixer_params(model) * b.count("M"),
        "dense_mlp": mats * h * (model.dense_intermediate_size or 4 * h) * b.count("-"),
        "experts": n_e * mats * width * (model.expert_intermediate_size or 4 * h) * experts,
        "shared_experts": n_e * mats * h * (model.shared_expert_intermediate_size or 0),
        "router": n_e * (h * experts + latent),
        "embedding": emb,
        "lm_head": 0 if model.tie_word_embeddings else emb,
        "vision": 0,
    }


def _encoder_decoder_params(model: ModelFacts, attn: int) -> dict[str, int]:
    """Whisper-style encoder-decoder: decoder layers hold self- and cross-attention (``attn`` each) and a
    two-matrix MLP (fc1, fc2: ``2*h*ffn``); encoder layers one attention and the same MLP with
    ``encoder_ffn_dim``; embeddings ``vocab*h`` plus the decoder's ``max_target_positions`` and the
    encoder's ``max_source_positions`` position tables (transformers ``WhisperDecoderLayer`` /
    ``WhisperEncoderLayer``; vLLM 0.33.0 ``models/whisper.py:440-470, 556-563, 603-611``); the
    two encoder convolutions (``num_mel_bins*h*3 + h*h*3``) are not counted. Whisper-large-v3:
    1,536,888,320 parameters, 3,073,776,640 B at FP16 (published: 1.55 B parameters; the convolutions,
    biases and norms are the rest)."""
    h = model.hidden_size
    dec, enc = model.num_hidden_layers, model.num_encoder_layers
    ffn = model.intermediate_size or 4 * h
    enc_ffn = model.encoder_ffn_dim or ffn
    emb = h * (model.vocab_size or 0) + h * ((model.derived_max_model_len or 0) + (model.max_source_positions or 0))
    return {"attention": attn * (2 * dec + enc), "dense_mlp": 2 * h * (ffn * dec + enc_ffn * enc), "experts": 0,
            "shared_experts": 0, "router": 0, "embedding": emb,
            "lm_head": 0 if model.tie_word_embeddings else h * (model.vocab_size or 0), "vision": 0}


def weight_matrices(model: ModelFacts) -> int:
    """Weight matrices that carry one per-tensor scale: per layer q, k, v, o (MLA: its 5-6 projections),
    gate/up/down of the dense MLP or of every expert and the shared expert."""
    n_moe = model.num_moe_layers if model.is_moe else 0
    attn = (6 if model.q_lora_rank else 5) if model.is_mla else 4
    if model.layer_blocks:  # NemotronH: q/k/v/o, in/out_proj, up/down, experts' up/down + shared up/down
        b = model.layer_blocks
        return (4 * b.count("*") + 2 * b.count("M") + 2 * b.count("-")
                + b.count("E") * (2 * (model.num_experts or 1) + (2 if model.shared_expert_intermediate_size else 0)))
    per_moe = 3 * (model.num_experts or 1) + (3 if model.shared_expert_intermediate_size else 0)
    dense = 3 if model.mlp_gated else 2
    return model.num_hidden_layers * attn + dense * (model.num_hidden_layers - n_moe) + per_moe * n_moe


def estimate_weight_bytes(model: ModelFacts, weight_bytes_per_param: float | None = None, parts: bool = False,
                          scheme: WeightScheme | None = None) -> float | dict[str, float]:
    """Weight bytes of the checkpoint as loaded (within ~5 % of the published sizes).

    Parameters per group (``weight_params``): attention per layer GQA/MHA
    ``H_q*d*h + H_kv*d*h + H_kv*d_v*h + H_q*d_v*h``; MLA (DeepSeek ``DeepseekV2MLAAttention``)
    ``h*q_lora + q_lora*H*(nope+rope)`` (``h*H*(nope+rope)`` without q_lora) ``+ h*(kv_lora+rope) +
    kv_lora*H*(nope+d_v) + H*d_v*h``; dense MLP ``3*h*dense_inter`` on each non-MoE layer; MoE layers
    ``num_experts*3*h*expert_inter`` routed experts, a shared expert ``3*h*shared_inter`` where the
    model has one, the router ``h*num_experts``; ``h*vocab`` embeddings and as much again for an
    untied lm_head. Bytes per group from ``scheme`` (default ``weight_scheme(model)``: the
    checkpoint's own quantisation), or ``weight_bytes_per_param`` for every group; per-tensor
    scales add 4 B per weight matrix. Example: Llama-3.1-70B with ``--quantization fp8``:
    68,451,041,280 linear params x 1 B + 2,101,346,304 embedding/lm_head params x 2 B + 560
    scales x 4 B = 72,653,736,128 B (72.65 GB). With ``parts=True`` returns bytes by part
    (``attention``, ``dense_mlp``, ``experts`` = routed + shared, ``router``, ``embedding`` =
    embeddings + lm_head, ``scales``) and ``total``.
    """
    n = group_params(model)
    if weight_bytes_per_param:
        bpp = {g: float(weight_bytes_per_param) for g in GROUPS}
        per_tensor = 0.0
    else:
        s = scheme or weight_scheme(model)
        bpp, per_tensor = s.bytes_per_param, s.per_tensor_scale_bytes
    out = {
        "attention": n["attention"] * bpp["attention"],
        "dense_mlp": n["dense_mlp"] * bpp["dense_mlp"],
        "experts": n["experts"] * bpp["experts"] + n["shared_experts"] * bpp["shared_experts"],
        "router": n["router"] * bpp["router"],
        "embedding": n["embedding"] * bpp["embedding"] + n["lm_head"] * bpp["lm_head"],
        "scales": per_tensor * weight_matrices(model) if per_tensor else 0.0,
        "vision": n["vision"] * bpp["vision"],
    }
    out["total"] = sum(out.values())
    return out if parts else out["total"]


def weight_bytes_per_gpu(model: ModelFacts, tp_size: int = 1, pp_size: int = 1, expert_shards: int | None = None,
                         scheme: WeightScheme | None = None, vision_shards: int | None = None) -> float:
    """Estimated weight bytes on one GPU: everything but the experts and the vision tower split ``tp_size x
    pp_size`` ways, the experts ``expert_shards x pp_size`` ways (default tp_size; with expert parallelism the EP
    size, tp_size x dp_size in vLLM). The vision tower sits whole on the first pipeline stage (the GPU the KV
    budget is tightest on), split ``vision_shards`` ways: default tp_size (vLLM's ``--mm-encoder-tp-mode weights``),
    1 when it runs data-parallel, 0 when it is not loaded (vLLM 0.34.0 model_executor/models/interfaces.py:382-394:
    skipped with every modality's limit 0 and on later pipeline stages; qwen3_vl.py:599-603 for the TP split).
    Replicated pieces (norms, MLA latent projections) are ignored."""
    p = estimate_weight_bytes(model, parts=True, scheme=scheme)
    shards = max(1, expert_shards or tp_size)
    vis = p["vision"]
    vision = 0.0 if vision_shards == 0 or not vis else vis / max(1, vision_shards or tp_size)
    return (p["total"] - p["experts"] - vis) / (tp_size * pp_size) + p["experts"] / (shards * pp_size) + vision


def legacy_bytes_per_param(model: ModelFacts) -> dict[str, float]:
    """``{'linear', 'experts', 'embedding'}`` bytes per parameter of the checkpoint's own scheme."""
    b = weight_scheme(model).bytes_per_param
    return {"linear": b["attention"], "experts": b["experts"], "embedding": b["embedding"]}
