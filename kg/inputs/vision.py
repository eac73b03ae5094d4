"""The vision encoder of a multimodal model config (``vision_config``), as the engines read it.

Multimodal wrappers keep the language model under ``text_config`` (LLaVA, Llama-4, Gemma-3,
Qwen2.5-VL in newer transformers) or ``llm_config`` (InternVL), and the vision tower under
``vision_config``. Field names differ per tower: CLIP / SigLIP / InternViT / Llama-4 use
``num_attention_heads``, ``hidden_size``, ``num_hidden_layers``; Qwen2-VL / Qwen2.5-VL use
``num_heads``, ``embed_dim`` or ``hidden_size``, ``depth``. The tower type is
``vision_config.model_type`` (falling back to the wrapper's ``model_type`` for Qwen-VL, whose
vision_config may omit it).

``VLLM_SPLITS_HEADS``: tower types whose attention vLLM shards over the tensor-parallel group with
``divide(num_heads, tp_size)`` — an assertion, so heads % tp_size != 0 fails at startup unless
``--mm-encoder-tp-mode data`` runs the tower data-parallel (vllm 0.33.0
``model_executor/models/siglip.py:377``, ``clip.py:402``, ``qwen2_vl.py:299``, ``qwen2_5_vl.py:374``;
the mode: ``model_executor/models/vision.py:141-156``). InternViT is not listed: it falls back to
data parallel itself when heads (+ dummy heads) % tp_size != 0 (``intern_vit.py:146``).
"""
from __future__ import annotations

from typing import Any

VLLM_SPLITS_HEADS = {
    "siglip_vision_model": "vllm 0.33.0 vllm/model_executor/models/siglip.py:377",
    "clip_vision_model": "vllm 0.33.0 vllm/model_executor/models/clip.py:402",
    "qwen2_vl": "vllm 0.33.0 vllm/model_executor/models/qwen2_vl.py:299",
    "qwen2_5_vl": "vllm 0.33.0 vllm/model_executor/models/qwen2_5_vl.py:374",
}


# towers whose parameters optkg counts: vLLM 0.34.0 Qwen3_VisionTransformer (model_executor/models/qwen3_vl.py:564-660),
# which Qwen3-VL-MoE (qwen3_vl_moe.py:256) and Qwen3.5 / Qwen3.5-MoE (qwen3_5.py:512, :735) build too
QWEN3_VISION_TYPES = ("qwen3_vl", "qwen3_5")


def vision_params(cfg: dict[str, Any]) -> int | None:
    """Weight parameters of the vision tower (linear, embedding and convolution weights; biases and norms left out),
    or None when the config has no tower optkg can size. Qwen3-VL / Qwen3.5 towers as vLLM 0.34.0 builds them
    (``qwen3_vl.py``): ``depth`` blocks of attention ``qkv`` 3h x h + ``proj`` h x h
    (Qwen2_5_VisionAttention, qwen2_5_vl.py:378-394) and
    an MLP ``linear_fc1`` h x I + ``linear_fc2`` I x h (:410-440); ``1 + len(deepstack_visual_indexes)`` patch
    mergers of ``linear_fc1`` (h m^2)^2 + ``linear_fc2`` h m^2 x out_hidden_size, m the spatial merge size
    (:512-551, :637-658); ``pos_embed`` num_position_embeddings x h (:620) and the Conv3d patch embedding
    in_channels x temporal_patch_size x patch_size^2 x h (:394-400). Qwen3-VL-32B: 594,800,640."""
    vc = cfg.get("vision_config")
    if not isinstance(vc, dict):
        return None
    mtype = str(vc.get("model_type") or cfg.get("model_type") or "")
    if not mtype.startswith(QWEN3_VISION_TYPES):
        return None
    h, depth, inter = _pos_int(vc.get("hidden_size")), _pos_int(vc.get("depth")), _pos_int(vc.get("intermediate_size"))
    out, patch = _pos_int(vc.get("out_hidden_size")), _pos_int(vc.get("patch_size"))
    if not (h and depth and inter and out and patch):
        return None
    merge = _pos_int(vc.get("spatial_merge_size")) or 2
    deepstack = vc.get("deepstack_visual_indexes")
    mergers = 1 + (len(deepstack) if isinstance(deepstack, list) else 0)
    wide = h * merge * merge
    blocks = depth * (4 * h * h + 2 * h * inter)
    embeds = (_pos_int(vc.get("num_position_embeddings")) or 0) * h + \
        (_pos_int(vc.get("in_channels")) or 3) * (_pos_int(vc.get("temporal_patch_size")) or 2) * patch * patch * h
    return blocks + mergers * (wide * wide + wide * out) + embeds


def language_config(cfg: dict[str, Any]) -> dict[str, Any] | None:
    """The language model's section of a multimodal config (``text_config`` or ``llm_config``; an Omni model's
    ``thinker_config.text_config``, which vLLM reads as its text config: vLLM 0.34.0 transformers_utils/config.py:1303
    get_hf_text_config calls transformers' get_text_config, which Qwen3-Omni overrides to the thinker's text config:
    transformers 5.24.0 models/qwen3_omni_moe/configuration_qwen3_omni_moe.py:610-622), or None."""
    for key in ("text_config", "llm_config"):
        sec = cfg.get(key)
        if isinstance(sec, dict):
            return sec
    thinker = cfg.get("thinker_config")
    if isinstance(thinker, dict) and isinstance(thinker.get("text_config"), dict):
        return thinker["text_config"]
    return None


def _pos_int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def vision_facts(cfg: dict[str, Any]) -> dict[str, Any]:
    """``vision_model_type``, ``vision_num_attention_heads``, ``vision_hidden_size``, ``vision_num_hidden_layers``
    and ``vision_tp_split`` (True when vLLM shards the tower's heads over TP; see the module doc) of a
    config; an empty dict when it has no ``vision_config``."""
    vc = cfg.get("vision_config")
    if not isinstance(vc, dict):
        return {}
    mtype = vc.get("model_type") or cfg.get("model_type")
    heads = _pos_int(vc.get("num_attention_heads")) or _pos_int(vc.get("num_heads"))
    return {
        "vision_model_type": str(mtype) if mtype else None,
        "vision_num_attention_heads": heads,
        "vision_hidden_size": _pos_int(vc.get("hidden_size")) or _pos_int(vc.get("embed_dim")),
        "vision_num_hidden_layers": _pos_int(vc.get("num_hidden_layers")) or _pos_int(vc.get("depth")),
        "vision_tp_split": str(mtype) in VLLM_SPLITS_HEADS if mtype else False,
        "vision_params": vision_params(cfg),
    }
