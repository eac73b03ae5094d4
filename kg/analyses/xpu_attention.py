"""vLLM's Intel XPU platform refusals optkg reads from the stack: its batch-invariance checks
(``xpu_batch_invariance_facts``) and its attention-backend selector for a forced backend (``--attention-backend``), as
``XPUPlatform.get_attn_backend_cls`` decides it (vllm/platforms/xpu.py:144-271, the same code at 0.33.0 and 0.34.0).

Read in its order, for the stack's attention layers (the model runner calls it when it builds them,
v1/attention/selector.py:218):

1. a ``turboquant_*`` KV cache goes to the TurboQuant backend, and a sparse-attention layer to XPU_MLA_SPARSE: no
   refusal;
2. MLA: TRITON_MLA is taken; any other forced backend but FLASH_ATTN_MLA is refused (:163-168); FLASH_ATTN_MLA is
   validated by XPUFlashAttnMLABackend, whose declared support optkg's backend table does not hold: not evaluable;
3. otherwise TRITON_ATTN is taken; with ``VLLM_BATCH_INVARIANT`` no backend is refused; a multimodal prefix-LM
   (``is_mm_prefix_lm``: per-model, not modelled) is not evaluable for a multimodal model; a float32 model falls back
   to TRITON_ATTN; FLASH_ATTN is taken; any other forced backend is refused (:263-268).

``xpu_attention_backend_refusal``: '' (taken, or nothing forced) or the refused backend and the line; absent where
the stack's GPU is not an Intel one, the forced name is not a backend of the release's table, a per-kind backend map
(``--attention-config backend_per_kind``) may replace it, or the outcome depends on what optkg does not know.
"""
from __future__ import annotations

from typing import Any


def xpu_attention_facts(ns: dict[str, Any]) -> dict[str, Any]:
    """{"xpu_attention_backend_refusal": text} (see the module doc), or {} where it is not known."""
    table = ns.get("attention_backends")
    forced = str(ns.get("attention_backend") or "").upper()
    taken = {"xpu_attention_backend_refusal": ""}
    if ns.get("gpu_is_xpu") is not True or ns.get("num_attention_heads") is None:
        return {}
    if not forced and not ns.get("attention_config__backend_per_kind"):
        return taken  # nothing forced: the selector picks one of its own
    if not isinstance(table, dict) or forced not in table or ns.get("attention_config__backend_per_kind"):
        return {}
    if str(ns.get("kv_cache_dtype") or "auto").startswith("turboquant_") or ns.get("index_head_dim") is not None:
        return taken
    if ns.get("is_mla"):
        if forced == "TRITON_MLA":
            return taken
        if forced == "FLASH_ATTN_MLA":
            return {}  # XPUFlashAttnMLABackend.validate_configuration (xpu.py:172-183): not in the table
        return {"xpu_attention_backend_refusal": f"{forced} with an MLA model (vllm/platforms/xpu.py:165)"}
    if forced == "TRITON_ATTN" or str(ns.get("VLLM_BATCH_INVARIANT")).lower() in ("true", "1"):
        return taken
    if ns.get("vision_model_type") is not None and forced != "FLASH_ATTN":
        return {}  # a multimodal prefix-LM takes another branch (xpu.py:205-257): is_mm_prefix_lm is not modelled
    dtype = ns.get("dtype_loaded")
    if dtype is None:
        return {}
    if dtype == "float32" or forced == "FLASH_ATTN":
        return taken
    return {"xpu_attention_backend_refusal": f"{forced} (vllm/platforms/xpu.py:265)"}


def xpu_batch_invariance_facts(ns: dict[str, Any]) -> dict[str, Any]:
    """{"xpu_batch_invariance_refusal": text}: with ``VLLM_BATCH_INVARIANT`` on an Intel GPU, XPUPlatform
    .check_and_update_config (called by VllmConfig.__post_init__, config/vllm.py:1979 at 0.34.0) refuses a quantized
    model (``model_config.quantization``: --quantization or the checkpoint's quant_method, optkg's ``weight_quant``;
    xpu.py:357-367) and then a KV-cache dtype other than auto / float16 / bfloat16 (:369-377; a model hook only ever
    replaces 'auto' or 'bfloat16', model_executor/models/config.py); '' when neither; {} off an Intel GPU or without
    the weight facts."""
    if ns.get("gpu_is_xpu") is not True:
        return {}
    if str(ns.get("VLLM_BATCH_INVARIANT")).lower() not in ("true", "1"):
        return {"xpu_batch_invariance_refusal": ""}
    quant, kv = ns.get("weight_quant"), str(ns.get("kv_cache_dtype") or "auto")
    if quant is None:
        return {}
    if quant != "none":
        return {"xpu_batch_invariance_refusal": f"quantization={quant} (vllm/platforms/xpu.py:363)"}
    if kv not in ("auto", "float16", "bfloat16"):
        return {"xpu_batch_invariance_refusal": f"kv_cache_dtype={kv} (vllm/platforms/xpu.py:371)"}
    return {"xpu_batch_invariance_refusal": ""}
