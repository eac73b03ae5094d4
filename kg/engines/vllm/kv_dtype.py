"""What vLLM's ``--kv-cache-dtype auto`` stores for a checkpoint that names its own KV-cache format (tester-4 #1).

vLLM resolves ``auto`` from the checkpoint's quantization config before it builds the cache
(``engine/arg_utils.py:2297`` at 0.33.0 calls ``utils/torch_utils.py`` ``resolve_kv_cache_dtype_string``,
``:498-516``): for a ``quant_method`` starting with ``modelopt`` (``hf_quant_config.json`` is loaded as
``quantization_config``, ``transformers_utils/config.py:956-965``, and its method set to ``modelopt`` /
``modelopt_fp4``, ``model_arch_config_convertor.py:248-266``) it reads ``kv_cache_scheme`` or
``kv_cache_quant_algo`` (``get_kv_cache_quant_algo_string``, ``:443-495``) and maps ``fp8`` -> ``fp8_e4m3``,
``nvfp4`` -> ``nvfp4`` (``MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP``, ``:78-81``). A compressed-tensors checkpoint
(llm-compressor) with a ``kv_cache_scheme`` is turned to ``fp8`` later, when the attention layers are built
(``model_executor/layers/attention/attention.py:287-291`` at 0.33.0: ``kv_cache_scheme is not None and kv_cache_dtype
== "auto"`` sets ``cache_config.cache_dtype = "fp8"``). Other methods keep ``auto`` = the model dtype.

Per release (bisected over the released wheels under /work/dl): ``resolve_kv_cache_dtype_string`` first appears in
0.14.0 (absent in 0.13.0), mapping only ``fp8``; ``nvfp4`` joins the map in 0.20.0 (absent in 0.19.0); the
compressed-tensors override first appears in 0.22.0 (absent in 0.21.0)."""
from __future__ import annotations

from typing import Any

from kg.core.relcmp import Release

# (first release, checkpoint value lower-cased, vLLM cache dtype)
MODELOPT_AUTO_KV = [("0.14.0", "fp8", "fp8_e4m3"), ("0.20.0", "nvfp4", "nvfp4")]
CT_FIRST = "0.22.0"
CT_SOURCE = ("vllm >=0.22.0 model_executor/layers/attention/attention.py (0.33.0: :287-291, kv_cache_scheme with"
             " kv_cache_dtype auto -> fp8)")
SOURCE = "vllm {v} engine/arg_utils.py resolve_kv_cache_dtype_string (0.33.0: arg_utils.py:2297, utils/torch_utils.py:443-516, :78-81)"


def _checkpoint_kv_algo(qc: dict[str, Any]) -> tuple[str | None, str]:
    """The KV-cache format a ModelOpt quantization config names, lower-cased, and the key it came from, as
    ``get_kv_cache_quant_algo_string`` reads it (kv_cache_scheme dicts: fp8 when static 8-bit float, nvfp4 when 4-bit
    float)."""
    inner = qc.get("quantization") if isinstance(qc.get("quantization"), dict) else qc
    for d, key in ((inner, "kv_cache_scheme"), (qc, "kv_cache_scheme"), (inner, "kv_cache_quant_algo"),
                   (qc, "kv_cache_quant_algo")):
        v = d.get(key)
        if not v:
            continue
        if isinstance(v, dict):
            if v.get("dynamic") is False and v.get("num_bits") == 8 and v.get("type") == "float":
                return "fp8", key
            if v.get("num_bits") == 4 and v.get("type") == "float":
                return "nvfp4", key
            return None, key
        return (str(v).lower() if isinstance(v, str) else None), key
    return None, ""


def vllm_auto_kv_cache_dtype(model: Any, version: str | None, kv_cache_dtype: str | None,
                             cc: float | None = None) -> dict[str, str] | None:
    """``{"dtype", "checkpoint", "source"}`` when vLLM ``version`` turns ``kv_cache_dtype`` 'auto' (or unset) into the
    checkpoint's KV format for ``model`` (a ModelFacts), or into FP8 for a DSA model on an SM10x CUDA GPU of compute
    capability ``cc`` (kg.engines.dsa_kv; the checkpoint's format is resolved first), else None (a dtype given, a
    release before the resolution, a method other than ModelOpt, or a value vLLM does not map)."""
    if str(kv_cache_dtype or "auto").lower() != "auto" or model is None:
        return None
    from kg.engines.dsa_kv import vllm_dsa_kv
    return _checkpoint_auto(model, version) or vllm_dsa_kv(model, version, cc)


def _checkpoint_auto(model: Any, version: str | None) -> dict[str, str] | None:
    qc = getattr(model, "quantization_config", None) or {}
    method = str(qc.get("quant_method") or getattr(model, "quant_method", None) or "")
    try:
        v = Release(str(version)) if version else None
    except ValueError:  # not a release (packaging's InvalidVersion)
        v = None
    if method == "compressed-tensors":
        if qc.get("kv_cache_scheme") is not None and (v is None or v >= Release(CT_FIRST)):
            return {"dtype": "fp8", "checkpoint": "compressed-tensors kv_cache_scheme", "source": CT_SOURCE}
        return None
    if not method.startswith("modelopt") and not isinstance(qc.get("quantization"), dict):
        return None
    algo, key = _checkpoint_kv_algo(qc)
    for first, value, dtype in MODELOPT_AUTO_KV:
        if algo == value and (v is None or v >= Release(first)):
            return {"dtype": dtype, "checkpoint": f"{key} {algo.upper()}",
                    "source": SOURCE.format(v=f">={first}")}
    return None


def apply_vllm_auto_kv_cache_dtype(model: Any, version: str | None, ns: dict[str, Any], derived: dict[str, Any],
                                   cc: float | None = None) -> None:
    """Set ``ns["kv_cache_dtype"]`` to what vLLM stores for 'auto' (``vllm_auto_kv_cache_dtype``) and record
    ``kv_cache_dtype_checkpoint`` / ``kv_cache_dtype_source`` in ``derived``; nothing when it does not apply."""
    apply_auto(vllm_auto_kv_cache_dtype(model, version, ns.get("kv_cache_dtype"), cc), ns, derived)


def apply_auto(got: dict[str, str] | None, ns: dict[str, Any], derived: dict[str, Any]) -> None:
    """Put an engine's resolution of 'auto' (``{"dtype", "checkpoint", "source"[, "reason"]}``) into ``ns`` and
    ``derived`` (``kv_cache_dtype_auto_reason`` 'dsa': a DSA model on SM10x, not a checkpoint KV format)."""
    if got:
        ns["kv_cache_dtype"] = got["dtype"]
        derived.update(kv_cache_dtype_checkpoint=got["checkpoint"], kv_cache_dtype_source=got["source"])
        if got.get("reason"):
            derived["kv_cache_dtype_auto_reason"] = got["reason"]
