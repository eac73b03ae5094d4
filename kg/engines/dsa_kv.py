"""What ``--kv-cache-dtype auto`` stores for a DeepSeek-sparse-attention (DSA) model on a Blackwell SM10x GPU
(newuser5 #12): both engines turn it into FP8 there, the model's dtype elsewhere.

vLLM: ``model_executor/models/config.py`` VerifyAndUpdateConfig hooks, on CUDA with
``is_device_capability_family(100)`` (compute capability 10.x: B200, GB200, B300):
``GlmMoeDsaForCausalLM`` auto -> ``fp8_e4m3`` from 0.32.0 (0.32.0 :43-55, 0.34.0 :163-175; absent in
0.29.0-0.31.0), ``Glm5NextForCausalLM`` / ``Glm5NextForConditionalGeneration`` with ``index_topk`` auto -> ``fp8``
from 0.33.0 (0.33.0 :119-134, 0.34.0 :184-198; absent in 0.32.0). ``DeepseekV32ForCausalLM`` keeps auto (:81-92
maps only bfloat16 -> auto). A checkpoint KV format (kg.engines.vllm.kv_dtype) is resolved before these hooks run.

SGLang: DeepSeek NSA/DSA with ``index_topk`` on CUDA major >= 10 -> ``fp8_e4m3``, else bfloat16.
0.5.5 server_args.py:1061-1083 (``is_deepseek_nsa``: DeepseekV3ForCausalLM, DeepseekV32ForCausalLM,
DeepseekV3ForCausalLMNextN, configs/model_config.py:52-62); 0.5.23 arg_groups/overrides.py:490-548
``_dsa_kv_cache_dtype_default`` (architectures[0] in ``_DEEPSEEK_FAMILY_ARCHS`` :745-760 and ``is_deepseek_dsa``,
configs/model_config.py:191-212, which add GLM-5 / GLM-5-Next / LongCat / Dots3 / HYV4), not when the config has
``learnable_sink``. The wider list is applied from 0.5.23 only (releases in between were not read)."""
from __future__ import annotations

from typing import Any

from kg.core.relcmp import Release

VLLM_DSA = (  # (first release, architectures, needs index_topk, cache dtype, source)
    ("0.32.0", ("GlmMoeDsaForCausalLM",), False, "fp8_e4m3",
     "vllm >=0.32.0 model_executor/models/config.py GlmMoeDsaForCausalLM (0.34.0: :163-175)"),
    ("0.33.0", ("Glm5NextForCausalLM", "Glm5NextForConditionalGeneration"), True, "fp8",
     "vllm >=0.33.0 model_executor/models/config.py Glm5NextModelConfig (0.34.0: :184-198)"),
)
SGLANG_NSA_0_5_5 = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN")
SGLANG_DSA_0_5_23 = (  # _DEEPSEEK_FAMILY_ARCHS (overrides.py:745-760) that is_deepseek_dsa also lists
    "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration",
    "GlmMoeDsaForCausalLM", "Glm5NextForConditionalGeneration", "HYV4ForCausalLM", "HYV4ForCausalLMNextN",
    "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM")


def _release(version: str | None) -> Release | None:
    try:
        return Release(str(version)) if version else None
    except ValueError:  # not a release (packaging's InvalidVersion)
        return None


def vllm_dsa_kv(model: Any, version: str | None, cc: float | None) -> dict[str, str] | None:
    """``{"dtype", "checkpoint", "source"}`` when vLLM ``version`` (None: the latest) turns auto into FP8 for
    ``model`` on a CUDA GPU of compute capability ``cc``; None otherwise (also when ``cc`` is unknown)."""
    if cc is None or int(cc) != 10 or model is None:
        return None
    v, arch = _release(version), getattr(model, "architecture", None)
    for first, archs, topk, dtype, source in VLLM_DSA:
        if arch in archs and (not topk or getattr(model, "index_topk", None) is not None) and \
                (v is None or v >= Release(first)):
            return {"dtype": dtype, "checkpoint": f"{arch} on SM{round(cc * 10)}", "source": source, "reason": "dsa"}
    return None


def sglang_dsa_kv(model: Any, version: str | None, cc: float | None) -> dict[str, str] | None:
    """The same for SGLang: fp8_e4m3 for a DSA model on compute capability >= 10 (see the module doc)."""
    if cc is None or cc < 10 or model is None or getattr(model, "index_topk", None) is None:
        return None
    v, arch = _release(version), getattr(model, "architecture", None)
    if v is not None and v < Release("0.5.5"):
        return None
    archs = SGLANG_DSA_0_5_23 if v is None or v >= Release("0.5.23") else SGLANG_NSA_0_5_5
    if arch not in archs or getattr(model, "learnable_sink", False):
        return None
    src = ("sglang >=0.5.23 srt/arg_groups/overrides.py:490-548 _dsa_kv_cache_dtype_default"
           if v is None or v >= Release("0.5.23") else "sglang 0.5.5 srt/server_args.py:1061-1083 (DeepSeek NSA)")
    return {"dtype": "fp8_e4m3", "checkpoint": f"{arch} on SM{round(cc * 10)}", "source": src, "reason": "dsa"}
