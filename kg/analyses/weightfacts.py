"""What the weights are loaded as: the dtype and the weight quantisation facts rules read.

``dtype_facts``: ``dtype_effective`` (the ``dtype`` setting unless 'auto', else the model's torch_dtype),
``dtype_explicit`` (a ``dtype`` other than auto was given), ``model_dtype`` (the checkpoint's) and
``dtype_loaded`` (the engine's ``loaded_dtype``: vLLM >= 0.9.0 with auto loads a bfloat16 checkpoint as float16 below
compute capability 8.0; otherwise ``dtype_effective``).

``weight_quant_facts``: ``weight_quant`` = ``--quantization`` if given, else the checkpoint's ``quant_method``,
else 'none'; ``weight_quant_kernel`` = what vLLM runs (a GPTQ/AWQ checkpoint without ``--quantization`` is
upgraded to its Marlin kernel on NVIDIA GPUs of compute capability >= the release's Marlin minimum, or when no GPU
is named: vLLM ``GPTQMarlinConfig.override_quantization_method``); ``weight_is_fp8``; ``quant_family`` /
``checkpoint_quant_family`` (method without ``_marlin``); ``weight_block_n`` / ``weight_block_k`` from the
``weight_block_size`` setting or the ``fp8_per_block`` shorthand (the checkpoint's come with the model facts);
``weight_is_fp8_block`` (FP8 with a known block shape; False when the FP8 is known to be per-tensor; absent when
that cannot be told); the engine's ``quantization_facts`` (vLLM: ``quantization_known_to_release``, the name is one the
release accepts, kg.inputs.quantmethods, ``quantization_methods_of_release`` and ``quantization_methods_release``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kg.derive.kv import compute_capability
from kg.engines import of

if TYPE_CHECKING:  # annotations only: ``optkg kv`` (runtime_model) does not load the stack reader and the catalog
    from kg.inputs.stack import Stack

# vLLM >= 0.20.0 also takes the online shorthands fp8_per_tensor / fp8_per_block (fp8_per_channel from 0.24.0):
# model_executor/layers/quantization/__init__.py:42-43 at 0.20.0
FP8_WEIGHT_METHODS = ("fp8", "fbgemm_fp8", "ptpc_fp8", "modelopt", "modelopt_fp8", "w8a8_fp8",
                      "fp8_per_tensor", "fp8_per_block", "fp8_per_channel")
MARLIN_UPGRADES = {"gptq": "gptq_marlin", "awq": "awq_marlin"}


def _parse_block(value: Any) -> list[int] | None:
    """'[128, 128]', '128x128', [128, 128] or 128 -> [block_n, block_k]; None when unreadable."""
    import re
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(x, int) for x in value):
        return [int(value[0]), int(value[1])]
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return [value, value]
    if isinstance(value, str):
        nums = [int(x) for x in re.findall(r"\d+", value)]
        if len(nums) == 2:
            return nums
        if len(nums) == 1:
            return [nums[0], nums[0]]
    return None


# a --dtype the engine runs the model in: its name and bytes per element (the weights take it from DTYPE_BYTES)
GIVEN_DTYPES = {"float32": ("float32", 4), "float": ("float32", 4), "float16": ("float16", 2), "half": ("float16", 2),
                "fp16": ("float16", 2), "bfloat16": ("bfloat16", 2), "bf16": ("bfloat16", 2)}


def _as_dtype(model: Any, name: str, size: int) -> Any:
    """A copy of ``model`` in dtype ``name`` of ``size`` bytes, with the attributes set after it was read
    (``raw_config``, the config.json, which dataclasses.replace does not copy: without it the engines' architecture
    checks are not evaluable)."""
    from dataclasses import fields, replace
    new = replace(model, dtype=name, dtype_bytes=size)
    known = {f.name for f in fields(model)}
    for k, v in vars(model).items():
        if k not in known:
            setattr(new, k, v)
    return new


def runtime_model(engine: Any, model: Any, dtype: str | None, cc: float | None, version: str | None
                  ) -> tuple[Any, str | None]:
    """``model`` as ``engine`` runs it under ``--dtype`` (None / auto: the engine's choice) and its note: a float32
    checkpoint under auto runs in the 16-bit dtype the engine's ``loaded_dtype`` picks (vLLM, SGLang), so its weights
    and an 'auto' KV cache are 2 bytes an element; a given 16- or 32-bit ``--dtype`` is the model's dtype, so an 'auto'
    KV cache has its element size (vllm 0.34.0 utils/torch_utils.py:542-544: 'auto' is model_config.dtype; sglang
    0.5.23 the same): ``--dtype float32`` on a bfloat16 checkpoint caches 4 bytes an element; any other model is
    returned as it is, with no note."""
    if model is None:
        return model, None
    given = str(dtype or "auto").lower()
    if given != "auto":
        name, size = GIVEN_DTYPES.get(given, (None, None))
        if name is None or size == model.dtype_bytes:
            return model, None
        return _as_dtype(model, name, size), None
    if model.dtype.lower() in ("bfloat16", "float16", "bf16", "half") and (model.quant_method or "") == "":
        # a model that refuses float16 on a GPU without bfloat16 runs in float32 (vLLM: gemma2/3, glm4 on T4/V100)
        if engine.loaded_dtype(model.dtype.lower(), False, cc, version, model_type=model.model_type) == "float32":
            return _as_dtype(model, "float32", 4), (
                f"{model.model_type} refuses float16 in {engine.name} and the GPU has no bfloat16: with --dtype auto "
                "it runs in float32, so weights and an 'auto' KV cache are sized at 4 bytes")
        return model, None
    if model.dtype.lower() not in ("float32", "float"):
        return model, None
    to = engine.loaded_dtype("float32", False, cc, version, model_type=model.model_type)
    if to in ("float32", "float"):
        return model, None
    return _as_dtype(model, to, 2), (
        f"the checkpoint is float32 ({model.name}); with --dtype auto {engine.name} runs it in {to}: weights and an "
        "'auto' KV cache are sized at 2 bytes (give --dtype float32 to keep 4)")


def dtype_facts(stack: Stack, ns: dict[str, Any]) -> dict[str, Any]:
    """The dtype facts of ``stack`` (see the module doc); ``ns`` is the check namespace built so far."""
    out: dict[str, Any] = {}
    m = stack.model
    dt = str(ns.get("dtype") or "auto").lower()
    if dt == "auto" and m is not None:
        dt = m.dtype.lower()
    out["dtype_effective"] = {"half": "float16", "fp16": "float16", "bf16": "bfloat16", "float": "float32"}.get(dt, dt)
    # stack.settings, not ns: ns["dtype"] falls back to the model's own dtype (ModelFacts.dtype)
    given_dt = str(stack.settings.get("dtype") or "auto").lower()
    out["dtype_explicit"] = given_dt != "auto"
    if m is not None:
        out["model_dtype"] = {"half": "float16", "bf16": "bfloat16"}.get(m.dtype.lower(), m.dtype.lower())
    # the dtype the weights are loaded in: the engine may fall back from the checkpoint's (vLLM 0.9.0+ loads a
    # bfloat16 checkpoint as float16 below compute capability 8.0 with --dtype auto)
    mt = m.model_type if m is not None else ""
    loaded = of(stack).loaded_dtype(out["dtype_effective"], out["dtype_explicit"], compute_capability(stack.hardware),
                                    stack.engine_version, model_type=mt)
    out["dtype_loaded"] = loaded
    refused = of(stack).float16_refused(mt, stack.engine_version) if m is not None else None
    if refused is not None:  # the release refuses --dtype float16 for this model type (vLLM _check_valid_dtype)
        out["model_refuses_float16"] = refused
    return out


def weight_quant_facts(stack: Stack, ns: dict[str, Any]) -> dict[str, Any]:
    """The weight quantisation facts of ``stack`` (see the module doc)."""
    out: dict[str, Any] = {}
    m = stack.model
    # weight quantisation
    explicit = str(ns.get("quantization") or "").lower() or None
    ckpt = (m.quant_method or "").lower() if m is not None and m.quant_method else None
    weight_quant = explicit or ckpt or "none"
    kernel = weight_quant
    cc = compute_capability(stack.hardware)
    vendor = str((stack.hardware or {}).get("vendor") or "nvidia").lower()
    # the Marlin kernel's lowest compute capability per release (vLLM 7.5 from 0.14.0: catalog/engines/vllm.yaml
    # ranged_facts); SGLang's marlin_utils.py keeps 80 (0.5.23 layers/quantization/marlin_utils.py:78)
    from kg.inputs.optiondefaults import ranged_fact
    marlin_cc = ranged_fact(stack.engine, stack.engine_version, "marlin_min_compute_capability") or 8.0
    if not explicit and ckpt in MARLIN_UPGRADES and vendor == "nvidia" and (cc is None or cc >= marlin_cc):
        kernel = MARLIN_UPGRADES[ckpt]
    # a --quantization name the release does not have: the engine refuses it (vLLM's list per release)
    out.update(of(stack).quantization_facts(explicit, stack.engine_version))
    out["weight_quant"] = weight_quant
    out["weight_quant_kernel"] = kernel
    # a ModelOpt checkpoint is FP8 or NVFP4 by its quant_algo (hf_quant_config.json quantization.quant_algo or
    # quantization_config.quant_algo; vLLM resolves 'modelopt' to modelopt_fp4 for NVFP4)
    qc = (m.quantization_config or {}) if m is not None else {}
    algo = str((qc.get("quantization") if isinstance(qc.get("quantization"), dict) else qc).get("quant_algo") or "")
    nvfp4 = weight_quant in ("modelopt_fp4", "nvfp4") or (weight_quant == "modelopt" and "FP4" in algo.upper())
    out["weight_is_nvfp4"] = nvfp4
    out["weight_is_fp8"] = weight_quant in FP8_WEIGHT_METHODS and not nvfp4
    out["quant_family"] = weight_quant.replace("_marlin", "")
    if ckpt:
        out["checkpoint_quant_family"] = ckpt.replace("_marlin", "")
    elif m is not None:
        out["checkpoint_quant_family"] = "none"  # the config names no quantisation method (an unquantised checkpoint)
    block = _parse_block(ns.get("weight_block_size")) if ns.get("weight_block_size") is not None else None
    if not block and weight_quant == "fp8_per_block":
        block = [128, 128]  # vLLM >= 0.20.0 online shorthand: kFp8Static128BlockSym (config/quantization.py:199-202 at 0.33.0)
    if block:
        out["weight_block_n"], out["weight_block_k"] = block
    # block-wise FP8: a block shape is known (setting, checkpoint or shorthand); per-tensor FP8 is known when the
    # weights are FP8 without one: online `--quantization fp8` on an unquantised checkpoint is per-tensor (vLLM 0.33.0
    # model_loader/weight_utils.py:355-362 -> fp8_per_tensor; Fp8Config() before 0.31.0 has weight_block_size None),
    # as is an FP8 checkpoint config without weight_block_size (quantization/fp8.py:163)
    has_block = bool(block) or ns.get("weight_block_n") is not None
    if has_block or not out["weight_is_fp8"] or weight_quant in ("fp8_per_tensor", "fp8_per_channel") or \
            (m is not None and (ckpt is None or ckpt in FP8_WEIGHT_METHODS)):
        out["weight_is_fp8_block"] = out["weight_is_fp8"] and has_block
    return out
