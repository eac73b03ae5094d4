"""The quantisation method vLLM's ModelConfig settles on (``model_config.quantization``), read at 0.33.0 / 0.34.0.

``VllmConfig._get_quantization_config`` (0.34.0 config/vllm.py:880-903; 0.33.0 :916-941) compares the method's
config class with the GPU (``get_min_capability()``) and the model dtype (``get_supported_act_dtypes()``); the
per-method values are generated per release (catalog/support/vllm-quantization-capability.yaml, facts
``quant_method_min_capability`` / ``quant_method_act_dtypes`` / ``quant_online_methods``). The method is what
``ModelConfig._verify_quantization`` leaves (0.34.0 config/model.py:1404-1485; 0.33.0 :1384-1465): with a checkpoint
``quantization_config``, the first override that claims it (non-override methods first, then the ``overrides`` list
in order, :1416-1437 [:1396-1417]), else its ``quant_method``; a ``--quantization`` that differs from that is
refused there ("does not match"), so no method is named here; an override's name replaces it. Without a checkpoint config, ``get_quant_config``
reads a method's own config files (weight_utils.py:377-412 at 0.34.0), except the online methods and ``fp8``, which
build an ``OnlineQuantizationConfig`` (:380-393): only those are named here.

``resolved_method(explicit, qcfg, model_type, online)`` -> the method name, or None when it cannot be told (a
``--quantization moe_wna16`` override depends on the GPU and the checkpoint's bits; DeepSeek-V4's FP8 class lives
outside the quantisation folder; a method read from a file beside the weights).
"""
from __future__ import annotations

from typing import Any

# the overrides that claim a checkpoint whatever --quantization says (or with the names they accept), in the
# order of the overrides list; each: checkpoint quant_method test -> the name it returns
GPTQ_USER = (None, "gptq", "gptq_marlin", "auto_gptq", "marlin")  # auto_gptq.py:229-234 (0.34.0)
AWQ_USER = (None, "awq", "awq_marlin", "auto_awq", "marlin")  # auto_awq.py:277-282 (0.34.0)


def _modelopt_algo(qcfg: dict[str, Any]) -> str | None:
    """ModelOptQuantConfigBase._extract_modelopt_quant_algo (0.34.0 modelopt.py:292-308)."""
    if not str(qcfg.get("quant_method") or "").lower().startswith("modelopt"):
        return None
    if "quantization" in qcfg:
        q = qcfg["quantization"]
        return str(q.get("quant_algo", "")).upper() if isinstance(q, dict) else None
    return str(qcfg.get("quant_algo", "")).upper()


def normalized(qcfg: dict[str, Any]) -> dict[str, Any] | None:
    """The quant_method vLLM sets for a ModelOpt config (producer 'modelopt' or a legacy modelopt_quant_config):
    _normalize_quantization_config (0.34.0 transformers_utils/model_arch_config_convertor.py:241-283), every
    quant_method lower-cased; None when vLLM refuses its quant_algo there ("Unknown ModelOpt quant algo")."""
    producer = qcfg.get("producer") if isinstance(qcfg.get("producer"), dict) else {}
    mq = qcfg.get("quantization", {})
    legacy = isinstance(mq, dict) and "modelopt_quant_config" in mq
    if producer.get("name") == "modelopt" or legacy:
        algo = mq.get("quant_algo") if isinstance(mq, dict) else None
        if algo is not None:
            a = str(algo).upper()
            qm = "modelopt" if a in ("FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO") else \
                "modelopt_fp4" if a == "NVFP4" else "modelopt_mixed" if a == "MIXED_PRECISION" else None
            if qm is None:
                return None
            qcfg = dict(qcfg, quant_method=qm)
    # lower-cased, the library's name normalised (:272-281)
    qm = str(qcfg.get("quant_method") or "").lower().replace("compressed_tensors", "compressed-tensors")
    return dict(qcfg, quant_method=qm)


def _override(qcfg: dict[str, Any], user: str | None, model_type: str) -> str | None:
    """The first override_quantization_method that claims the checkpoint; '?' when one may or may not."""
    qm = str(qcfg.get("quant_method") or "")
    if user == "humming":  # humming first when asked for (model.py:1438-1439); its override always claims
        return "humming"
    if qm.lower() == "gptq" and user in GPTQ_USER:
        return "auto_gptq"
    if qm.lower() == "awq" and user in AWQ_USER:  # not on CPU (auto_awq.py:270-271): optkg models GPUs
        return "auto_awq"
    if qm == "auto-round":  # inc.py:361-367
        return "inc"
    if user == "moe_wna16":  # claims when the checkpoint's bits / act order / GPU allow (moe_wna16.py:145-151)
        return "?"
    algo = _modelopt_algo(qcfg)
    if algo is not None:  # modelopt.py:457-463, 799-805, 1285-1291 (twice: modelopt_mxfp8, mxfp8), 1775-1781
        if algo == "FP8":
            return "modelopt"
        if "NVFP4" in algo or "FP4" in algo:
            return "modelopt_fp4"
        if "MXFP8" in algo:
            return "modelopt_mxfp8"
        if algo == "MIXED_PRECISION":
            return "modelopt_mixed"
    if qm in ("mxfp4", "gpt_oss_mxfp4") and model_type == "gpt_oss":  # mxfp4.py:130-147
        return "gpt_oss_mxfp4"
    if qm in ("fp8", "deepseek_v4_fp8") and (model_type.startswith("deepseek_v4") or user == "deepseek_v4_fp8"):
        return "?"  # DeepseekV4FP8Config (models/deepseek_v4*/quant_config.py): not in the generated table
    return None


def resolved_method(explicit: str | None, qcfg: dict[str, Any] | None, model_type: str,
                    online: list[str] | set[str]) -> str | None:
    """See the module doc."""
    user = (explicit or "").lower() or None
    if qcfg:
        qcfg = normalized(qcfg)
        if qcfg is None:
            return None
        over = _override(qcfg, user, model_type or "")
        if over == "?":
            return None
        if over is not None:
            return over  # the override's name replaces --quantization (model.py:1468-1469)
        method = str(qcfg.get("quant_method") or "") or None
        if user is not None and method != user:
            return None  # "Quantization method specified in the model config ... does not match" (model.py:1476)
        return method
    if user is not None and (user in online or user == "fp8"):
        return user
    return None
