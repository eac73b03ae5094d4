"""GPU memory vLLM sets aside for LoRA adapter slots at start-up (newuser5 #14).

vLLM 0.34.0 ``lora/layers/base_linear.py:104-155`` ``create_lora_weights``, per wrapped linear layer and slice:
``lora_a`` (max_loras, 1, a_out, input_size) and ``lora_b`` (max_loras, 1, b_out, max_lora_rank) in ``lora_dtype``
(auto: the model's dtype). Column-parallel layers (q/k/v, gate/up) keep A's input unsharded and B's output per TP rank
(A's rank sharded over TP only with ``fully_sharded_loras``); row-parallel layers (o, down) take A's input per TP rank
and keep B's output full (sharded only with ``fully_sharded_loras``). Defaults ``config/lora.py:33,35``: max_lora_rank
16, max_loras 1. Sized for dense GQA/MHA decoder layers; MoE experts (``lora/layers/fused_moe.py``) and MLA projections
are not (None)."""
from __future__ import annotations

from typing import Any

SOURCE = "vllm 0.34.0 lora/layers/base_linear.py:104-155 (create_lora_weights); config/lora.py:33,35"


def vllm_lora_slot_bytes(model: Any, tp: int, max_loras: int = 1, rank: int = 16, fully_sharded: bool = False,
                         lora_dtype_bytes: float | None = None) -> float | None:
    """Bytes per GPU of vLLM's LoRA slots for ``model`` at TP ``tp``, or None for a model this does not size."""
    if model is None or model.is_mla or model.is_moe or model.is_encoder_decoder:
        return None
    h, d, vd = model.hidden_size, model.head_dim, model.v_head_dim
    q_out = model.num_attention_heads * d // tp
    kv_out = max(1, model.num_key_value_heads // tp) * d
    inter = model.dense_intermediate_size or model.intermediate_size or 4 * h
    a_rank = rank // tp if fully_sharded else rank

    def col(in_size: int, outs: list[int]) -> int:  # one A and one B per slice
        return sum(a_rank * in_size + o * rank for o in outs)

    def row(in_size: int, out_size: int) -> int:
        return rank * in_size + (out_size // tp if fully_sharded else out_size) * rank

    per_layer = (col(h, [q_out, kv_out, max(1, model.num_key_value_heads // tp) * vd])   # qkv_proj
                 + row(model.num_attention_heads * vd // tp, h)                            # o_proj
                 + col(h, [inter // tp, inter // tp])                                      # gate_up_proj
                 + row(inter // tp, h))                                                    # down_proj
    b = lora_dtype_bytes if lora_dtype_bytes is not None else model.dtype_bytes
    return float(per_layer * model.num_hidden_layers * max_loras * b)
