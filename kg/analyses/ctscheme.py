"""Which compressed-tensors scheme class vLLM builds for a checkpoint: fact ``vllm_ct_scheme``.

vLLM's ``CompressedTensorsConfig._get_scheme_from_parts`` turns each config group's ``weights`` /
``input_activations`` / ``output_activations`` and the checkpoint's ``format`` into a scheme class, then
``_check_scheme_supported`` refuses a GPU below that class's ``get_min_capability()`` ("Quantization scheme is not
supported for the current GPU. Min capability: 80. Current capability: 75."; the generated table
catalog/support/vllm-compressed-tensors-schemes.yaml holds the minimum per class and release).

Only the shapes whose class is the same in every release read (0.7.1-0.34.0, compressed_tensors.py
``_get_scheme_from_parts``: 0.10.1 lines 399-487, 0.34.0 lines 783-930) are named here:

- weight-only integer, strategy ``channel`` / ``group``, static, no input or output activations, format
  ``pack-quantized`` -> ``CompressedTensorsWNA16`` (``_is_wNa16_group_channel``; 0.34.0 tries the NVFP4 / MXFP4 /
  MXFP8 / W4A8 / wNa8o8 / wNaM checks first, and none of them takes integer weights without activations);
- FP8 weights (symmetric, static, tensor / channel / block) with FP8 input activations (dynamic, or static
  symmetric per-tensor) under an activation format -> ``CompressedTensorsW8A8Fp8`` on a GPU at or above its
  minimum, else ``CompressedTensorsW8A16Fp8`` (``_is_fp8_w8a8`` and the ``is_fp8_w8a8_supported`` fallback);
- 8-bit integer weights and activations (static per-tensor, or dynamic per-token input) under an activation
  format -> ``CompressedTensorsW8A8Int8``.

Anything else (mixed groups, NVFP4 / MXFP4, 2:4 sparsity, W4A8, output activations) gets no fact: the rule that
reads it stays quiet rather than guess.
"""
from __future__ import annotations

from typing import Any

# compressed_tensors/utils.py is_activation_quantization_format: CompressionFormat naive / int / float quantized
ACTIVATION_FORMATS = ("naive-quantized", "int-quantized", "float-quantized")


def _scheme(group: dict[str, Any], fmt: str | None, fp8_w8a8_min: float | None, cc: float | None) -> str | None:
    w, i, o = group.get("weights"), group.get("input_activations"), group.get("output_activations")
    if not isinstance(w, dict) or o is not None or (i is not None and not isinstance(i, dict)):
        return None
    fmt = group.get("format") or fmt
    wtype, bits, strategy = w.get("type", "int"), w.get("num_bits"), w.get("strategy")
    static = not w.get("dynamic", False)
    if i is None:
        if wtype == "int" and bits in (4, 8) and strategy in ("channel", "group") and static \
                and fmt == "pack-quantized":
            return "CompressedTensorsWNA16"
        return None
    if fmt not in ACTIVATION_FORMATS:
        return None
    itype, ibits = i.get("type", "int"), i.get("num_bits")
    if wtype == itype == "float" and bits == ibits == 8 and w.get("symmetric", True) and static \
            and strategy in ("tensor", "channel", "block") \
            and (i.get("dynamic") or (i.get("symmetric", True) and i.get("strategy") == "tensor")):
        if fp8_w8a8_min is None or cc is None:
            return None  # which of the two classes runs depends on the GPU
        return "CompressedTensorsW8A8Fp8" if cc >= fp8_w8a8_min else "CompressedTensorsW8A16Fp8"
    if wtype == itype == "int" and bits == ibits == 8 and strategy in ("tensor", "channel") \
            and ((not i.get("dynamic") and i.get("strategy") == "tensor")
                 or (i.get("dynamic") and i.get("strategy") == "token")):
        return "CompressedTensorsW8A8Int8"
    return None


def vllm_ct_scheme(quantization_config: dict[str, Any] | None, minimums: dict[str, float] | None,
                   cc: float | None) -> str | None:
    """The scheme class every config group of a compressed-tensors ``quantization_config`` maps to, or None."""
    qc = quantization_config or {}
    if str(qc.get("quant_method") or "").lower() != "compressed-tensors":
        return None
    groups = qc.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        return None
    fp8_min = (minimums or {}).get("CompressedTensorsW8A8Fp8")
    found = {_scheme(g, qc.get("format"), fp8_min, cc) if isinstance(g, dict) else None for g in groups.values()}
    if len(found) != 1:
        return None
    return found.pop()
