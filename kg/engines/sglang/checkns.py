"""SGLang's own inputs for a stack: the namespace its generated check rows read (tools/sglang_generated_checks.py).

The rows of ``catalog/engines/checks/sites/sglang-RELEASE.yaml`` are SGLang's startup checks over SGLang's inputs,
as its resolution pipeline reads them. This module gives those names their values for one stack:

- every ServerArgs field (``tp_size``, ``attention_backend`` ...): the value the stack gives, else the release
  default (``catalog/engines/checks/inputs/sglang-RELEASE.yaml``, generated from the wheel). A pasted command gives
  its options as the parser reads them (``Stack.native``: name or alias, a unique prefix, ``--no-X`` of a
  BooleanOptionalAction, the field's type and parser); a stack file gives optkg's settings, mapped back through the
  flag table (``catalog/engines/sglang.yaml``: a fact only one option sets; ``dp_size`` with the ``dp-attention``
  technique is ``attn_dp_size``, as SGLang's handle_deprecated_dp_attention rewrites it). A field whose default is
  not a literal, or whose given value optkg cannot read, has no value: rows reading it are not evaluated;
- every environment variable of ``sglang/srt/environ.py`` (``SGLANG_RUST_SERVER`` ...): the command's assignment,
  else its default; ``NAME__set``: whether the command sets it;
- the GPU (``platform__is_cuda``, ``platform__is_sm100`` ...), as runtime_context's platform probes answer on it:
  the vendor, and the compute capability major against ``_check_cuda_device_version`` (utils/common.py: CUDA
  >= 12.8 holds for every torch build the release's requirements admit: flashinfer_python[cu13], cuda-python>=13);
- the model: ``hf__architectures`` / ``hf__architecture`` as SGLang's config loading leaves them, the config.json
  keys of ``HF_KEYS``, ``model_path`` as the command gives it (else the model's id).

A name without a value is left out (never guessed). None is the sentinel ``'__none__'``.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from kg.frameworks.checkrows import FUNCTIONS as ROW_FUNCTIONS, NONE


def url_scheme(v: Any) -> str:
    """The text before ``://`` of a path (sglang utils/common.py parse_connector_type), else ''."""
    m = re.match(r"(.+)://(.*)", "None" if v == NONE else str(v))
    return m.group(1) if m else ""


def _string_method(name: str) -> Any:
    """``v.<name>(...)`` of a str as Python answers it; on None (the sentinel) or a non-string Python raises, so the
    row is not evaluated (kg.frameworks.checkrows' versions answer False there: a negated call would then fire)."""
    def call(v: Any, *a: Any) -> Any:
        if not isinstance(v, str) or v == NONE:
            raise TypeError(f"{name} needs a string")
        if name in ("startswith", "endswith"):
            return getattr(v, name)(tuple(a[0]) if isinstance(a[0], list) else a[0])
        return getattr(v, name)()
    return call


def item(v: Any, i: int) -> Any:
    """``v[i]`` of a list option or a tuple fact; on None or a short list Python raises, and so does this (the row is not evaluated)."""
    if not isinstance(v, (list, tuple)) or not 0 <= i < len(v):
        raise TypeError("no such item")
    return v[i]


def _members(v: Any) -> list[Any]:
    if not isinstance(v, (list, tuple)):
        raise TypeError("not a list")  # Python's any / all over None or a scalar raises: the row is not evaluated
    return list(v)


def any_in(v: Any, c: Any) -> bool:
    """``any(x in c for x in v)`` of a list fact (``hf__architectures``) and a constant tuple."""
    return any(x in c for x in _members(v))


def all_in(v: Any, c: Any) -> bool:
    """``all(x in c for x in v)``."""
    return all(x in c for x in _members(v))


def _set(v: Any) -> set:
    if not isinstance(v, (list, tuple)):
        raise TypeError("not a set")  # set(None) raises in Python too: the row is not evaluated
    return set(v)


def subset(a: Any, b: Any) -> bool:
    """Python's ``set(a) <= set(b)`` (the walk's sets are lists in a row's namespace)."""
    return _set(a) <= _set(b)


def set_eq(a: Any, b: Any) -> bool:
    return _set(a) == _set(b)


def set_minus(a: Any, b: Any) -> list:
    return sorted(_set(a) - _set(b), key=repr)


def set_union(a: Any, b: Any) -> list:
    return sorted(_set(a) | _set(b), key=repr)


def set_and(a: Any, b: Any) -> list:
    return sorted(_set(a) & _set(b), key=repr)


# the rows' functions (kg.engine.expr extra functions): truthy / is_a / str of kg.frameworks.checkrows, the
# connector scheme, and str methods that raise as Python's do on None
FUNCTIONS: dict[str, Any] = {**ROW_FUNCTIONS, "url_scheme": url_scheme,
                             "str": lambda v: "None" if v == NONE else str(v),
                             "upper": _string_method("upper"), "lower": _string_method("lower"),
                             "startswith": _string_method("startswith"),
                             "endswith": _string_method("endswith"), "item": item, "any_in": any_in,
                             "all_in": all_in, "subset": subset, "set_eq": set_eq, "set_minus": set_minus,
                             "set_union": set_union, "set_and": set_and}


def inputs_path(release: str) -> Path:
    from kg.core import paths
    return paths.catalog_dir() / "engines" / "checks" / "inputs" / f"sglang-{release}.yaml"


@lru_cache(maxsize=8)
def inputs_table(release: str) -> dict[str, Any] | None:
    from kg.core.yamlio import load_yaml
    p = inputs_path(release)
    return load_yaml(p).data if p.exists() else None


@lru_cache(maxsize=8)
def _option_index(release: str) -> dict[str, tuple[str, str]]:
    """option spelling -> (field, how: 'set' | 'no' | 'const')."""
    t = inputs_table(release) or {}
    out: dict[str, tuple[str, str]] = {}
    for f, spec in (t.get("fields") or {}).items():
        for n in spec.get("names") or []:
            out[str(n)] = (f, "set")
            if spec.get("kind") == "bool_optional" and str(n).startswith("--"):
                out["--no-" + str(n)[2:]] = (f, "no")
    for opt, spec in (t.get("extra_options") or {}).items():
        if spec.get("field"):
            out.setdefault(str(opt), (str(spec["dest"]), "const" if spec.get("kind") in ("bool", "const") else "set"))
    return out


def _option(name: str, release: str) -> tuple[str, str] | None:
    idx = _option_index(release)
    if name in idx:
        return idx[name]
    cands = [k for k in idx if k.startswith(name)] if name.startswith("--") and len(name) > 3 else []
    return idx[cands[0]] if len(cands) == 1 else None  # argparse allow_abbrev: a unique prefix


_MISSING = object()


def _human_int(raw: str) -> Any:
    """sglang utils/common.py human_readable_int."""
    from decimal import Decimal
    v = raw.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", v)
    if m:
        number, suffix = m.groups()
        iec = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40}
        if suffix in iec:
            return _MISSING if "." in number else int(number) * iec[suffix]
        return int(Decimal(number) * {"k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12}[suffix])
    try:
        return int(v)
    except ValueError:
        return _MISSING


def convert(spec: dict[str, Any], raw: Any, how: str) -> Any:
    """A command-line value as SGLang's parser stores it for the field ``spec``; _MISSING when optkg cannot tell."""
    kind = spec.get("kind")
    if how == "no":
        return False
    if how == "const":
        return True if raw is True else _MISSING
    if kind in ("bool", "bool_optional"):
        return True if raw is True else _MISSING  # store_true takes no value: `--x=false` is refused by argparse
    if raw is True or isinstance(raw, list) and kind != "list":
        return _MISSING
    parser = spec.get("parser")
    try:
        if parser == "human_readable_int":
            return _human_int(str(raw))
        if parser == "nullable_str":
            return NONE if not raw or raw == "None" else str(raw)
        if kind == "json":
            return json.loads(str(raw))
        if kind == "int":
            return int(str(raw))
        if kind == "float":
            return float(str(raw))
        if kind == "str":
            return str(raw)
        if kind == "list" and isinstance(raw, list):
            item = {"int": int, "float": float}.get(str(spec.get("item")), str)
            return [item(x) for x in raw]
    except (ValueError, TypeError):
        return _MISSING
    return _MISSING


def _default(spec: dict[str, Any]) -> Any:
    if "default" not in spec:
        return _MISSING
    d = spec["default"]
    return NONE if d is None else d


def fields_ns(stack: Any, release: str) -> dict[str, Any]:
    """Every ServerArgs field: given, else the release default (see the module doc)."""
    t = inputs_table(release) or {}
    fields: dict[str, dict[str, Any]] = t.get("fields") or {}
    ns: dict[str, Any] = {}
    for f, spec in fields.items():
        d = _default(spec)
        if d is not _MISSING:
            ns[f] = d
    native = getattr(stack, "native", None) or {}
    if native:
        for opt, raw in native.items():
            hit = _option(str(opt), release)
            if hit is None:
                continue
            f, how = hit
            v = convert(fields.get(f, {}), raw, how)
            if v is _MISSING:
                ns.pop(f, None)
            else:
                ns[f] = v
        if any(str(o) == "--radix-eviction-policy" for o in native):
            ns["_radix_eviction_policy_explicitly_set"] = True  # server_args.py prepare_server_args
    else:
        ns.update(_from_settings(stack, fields, release))
    model = getattr(stack, "model", None)
    if "model_path" not in ns or native.get("--model-path") is None and native.get("--model") is None:
        if model is not None and getattr(model, "name", None):
            ns["model_path"] = str(model.name)
    for f, spec in fields.items():  # a choice matches case-insensitively where optkg folds case (eagle / EAGLE)
        ch = spec.get("choices")
        if isinstance(ch, list) and isinstance(ns.get(f), str) and ns[f] not in ch:
            hit = [c for c in ch if isinstance(c, str) and c.lower() == ns[f].lower()]
            if len(hit) == 1 and not native:
                ns[f] = hit[0]
    return ns


@lru_cache(maxsize=4)
def _fact_fields(release: str) -> dict[str, list[str]]:
    """optkg fact -> the SGLang fields whose options set it (catalog/engines/sglang.yaml flags)."""
    from kg.inputs.launch.argv import table_for
    idx = _option_index(release)
    out: dict[str, list[str]] = {}
    for spec in table_for("sglang", "sglang").get("flags") or []:
        fact = spec.get("set")
        if not fact or spec.get("type") == "json" or spec.get("value_map"):
            continue
        for n in spec.get("names") or []:
            hit = idx.get(str(n))
            if hit and hit[1] == "set" and hit[0] not in out.setdefault(str(fact), []):
                out[str(fact)].append(hit[0])
    return out


def _from_settings(stack: Any, fields: dict[str, dict[str, Any]], release: str) -> dict[str, Any]:
    """A stack file's settings and technique parameters as SGLang fields (only where one field carries the fact)."""
    values = dict(stack.values()) if hasattr(stack, "values") else {}
    defaulted = set(((getattr(stack, "defaulted", None) or {}).get("settings") or {}))
    techniques = set(getattr(stack, "techniques", {}) or {})
    out: dict[str, Any] = {}
    for fact, fs in _fact_fields(release).items():
        if fact not in values or fact in defaulted or values[fact] is None:
            continue
        v = values[fact]
        if fact == "dp_size" and set(fs) == {"dp_size", "attn_dp_size"}:
            # --dp-size N --enable-dp-attention resolves to --attn-dp-size N (parallel_hook.handle_deprecated_dp_attention)
            f = "attn_dp_size" if "dp-attention" in techniques else "dp_size"
            out[f] = v
            continue
        if len(fs) != 1:
            continue
        spec = fields.get(fs[0], {})
        kind = spec.get("kind")
        if kind in ("bool", "bool_optional") and not isinstance(v, bool):
            continue
        if kind == "int" and (isinstance(v, bool) or not isinstance(v, int)):
            continue
        if kind == "float" and (isinstance(v, bool) or not isinstance(v, (int, float))):
            continue
        if kind == "str" and not isinstance(v, str):
            continue
        if kind not in ("bool", "bool_optional", "int", "float", "str"):
            continue
        out[fs[0]] = v
    return out


def env_ns(stack: Any, release: str) -> dict[str, Any]:
    t = inputs_table(release) or {}
    given = dict(getattr(stack, "native_env", None) or {})
    ns: dict[str, Any] = {}
    for name, spec in (t.get("env") or {}).items():
        if name in given:
            v = _env_value(spec, given[name])
            if v is not _MISSING:
                ns[name] = v
        elif "default" in spec:
            ns[name] = NONE if spec["default"] is None else spec["default"]
        ns[f"{name}__set"] = name in given
    return ns


def _env_value(spec: dict[str, Any], raw: str) -> Any:
    """sglang environ.py EnvBool / EnvInt / EnvFloat / EnvStr .parse (an unparsable value falls back to the default)."""
    kind = spec.get("kind")
    dflt = spec.get("default", _MISSING)
    dflt = NONE if dflt is None else dflt
    if kind == "bool":
        v = raw.lower()
        if v in ("true", "1", "yes", "y"):
            return True
        if v in ("false", "0", "no", "n"):
            return False
        return dflt
    if kind in ("int", "float"):
        try:
            return int(raw) if kind == "int" else float(raw)
        except ValueError:
            return dflt
    if kind == "str":
        return raw
    return _MISSING


def platform_ns(stack: Any, env: dict[str, Any]) -> dict[str, Any]:
    """runtime_context platform facts on the stack's GPU (see the module doc); {} without a known GPU."""
    hw = getattr(stack, "hardware", None)
    if not hw:
        return {}
    get = hw.get if isinstance(hw, dict) else lambda k, d=None: getattr(hw, k, d)
    vendor = str(get("vendor") or "").lower()
    cuda, hip = vendor == "nvidia", vendor == "amd"
    if not (cuda or hip):
        return {}
    out: dict[str, Any] = {"platform__is_cuda": cuda, "platform__is_hip": hip}
    for f in ("is_npu", "is_xpu", "is_musa", "is_mps", "is_hpu", "is_sail"):
        out[f"platform__{f}"] = False
    out["platform__use_mlx"] = False
    out["platform__is_cpu"] = False if env.get("SGLANG_USE_CPU_ENGINE__set") is False else None
    if hip:
        arch = str(get("architecture") or "")
        out["platform__is_gfx95"] = arch.startswith("gfx95")
        for f in ("is_sm90", "is_sm100", "is_sm100_or_sm110", "is_sm110", "is_sm120", "is_blackwell",
                  "is_hopper_with_cuda_12_3", "has_flashinfer", "is_sm120_exact", "is_sm121"):
            out[f"platform__{f}"] = False
        return {k: v for k, v in out.items() if v is not None}
    cc = get("compute_capability")
    try:
        major, minor = (int(x) for x in str(cc).split(".")[:2])
    except (TypeError, ValueError):
        return {k: v for k, v in out.items() if v is not None}
    out.update({"platform__device_sm": major * 10 + minor, "platform__device_capability": [major, minor],
                "platform__is_sm90": major == 9, "platform__is_hopper_with_cuda_12_3": major == 9,
                "platform__is_sm100": major == 10, "platform__is_sm110": major == 11, "platform__is_sm120": major == 12,
                "platform__is_sm100_or_sm110": major in (10, 11), "platform__is_blackwell": major in (10, 11, 12),
                "platform__is_sm120_exact": (major, minor) == (12, 0), "platform__is_sm121": (major, minor) == (12, 1),
                "platform__is_gfx95": False})
    fi = env.get("SGLANG_IS_FLASHINFER_AVAILABLE", "true")
    out["platform__has_flashinfer"] = str(fi).lower() in ("true", "1", "yes", "y", "on")  # get_bool_env_var
    return {k: v for k, v in out.items() if v is not None}


# config.json keys a row may read as ``hf__KEY``: ones SGLang's config loading (sglang/srt/utils/hf_transformers/
# config.py get_config, then ModelConfig.__init__) keeps as written for a checkpoint with a config.json. Others
# (``sliding_window``: Qwen2Config drops it when use_sliding_window is false; keys copied up from text_config ...)
# are left out rather than read from the file.
HF_KEYS = ("model_type",)  # and index_topk (model_ns: absent from config.json only where no default applies)
# model types SGLang loads with transformers' DeepseekV3Config (deepseek_v32 through its alias, sglang
# utils/hf_transformers/common.py:198-223; SGLang 0.5.23 pins transformers==5.19.0), which declares no index_topk:
# getattr(config, "index_topk", None) is None when config.json has no such key (configuration_deepseek_v3.py)
V3_CONFIG_TYPES = ("deepseek_v3", "deepseek_v32")
LONGCAT = (["LongcatCausalLM"], ["LongcatFlashForCausalLM"], ["LongcatFlashNgramForCausalLM"])


def mistral_parser(name: str) -> bool:
    """sglang utils/hf_transformers/mistral_utils.py is_mistral_model: the params.json parser, not config.json."""
    low = str(name).lower()
    return any(k in low for k in ("mistral-large-3", "mistral-small-4", "leanstral")) or \
        ("eagle" in low and "mistral" in low)


def sglang_architectures(raw: dict[str, Any], model_path: str, fields: dict[str, Any]) -> list[str] | None:
    """``hf_config.architectures`` as SGLang 0.5.23 loads it for a checkpoint whose config.json is ``raw``; None where
    it depends on more than the file (sglang utils/hf_transformers/config.py get_config, model_config.py:638-656)."""
    archs = raw.get("architectures")
    if not isinstance(archs, list) or not archs or not all(isinstance(a, str) for a in archs):
        return None
    if fields.get("json_model_override_args", "{}") not in ("{}", "", NONE) or \
            fields.get("decrypted_config_file", NONE) != NONE or fields.get("model_config_parser", "auto") != "auto":
        return None
    if mistral_parser(model_path) or str(model_path).endswith(".gguf"):
        return None
    mt = raw.get("model_type")
    if archs in LONGCAT or mt == "longcat_flash":
        return ["LongcatFlashForCausalLM"]
    if mt == "multi_modality":
        return ["MultiModalityCausalLM"]
    if mt in ("deepseek_vl_v2", "deepseek-ocr", "deepseek_ocr") or archs in (["Qwen3_5Model"], ["Qwen3_5TextModel"]):
        return None  # OCR rewrites, a decision / pointer head read from files beside the weights
    return list(archs)


def attention_arch(archs: list[str], model: dict[str, Any]) -> str | None:
    """ModelConfig.attention_arch ('MLA' / 'MHA' / 'SSM') for ``hf_config.architectures`` by the release's if / elif
    chain (``model.attention_arch`` of the inputs table, read from configs/model_config.py): the first branch naming
    one of the architectures; None where a branch reached first names it under a further condition (a config value
    optkg does not read) or the table is missing."""
    table = model.get("attention_arch")
    if not table:
        return None
    for b in table["branches"]:
        if any(a in archs for a in b.get("conditional") or []):
            return None
        if any(a in archs for a in b["archs"]):
            return str(b["value"])
    tail = table["else"]
    return "SSM" if any(a in archs for a in tail["ssm_if_any"]) else str(tail["otherwise"])


# ModelConfig attributes SGLang reads as getattr(hf_text_config, KEY, None) (configs/model_config.py:797
# attention_chunk_size, :1602 num_nextn_predict_layers): given only where config.json writes the key in the section
# SGLang takes as the text config (a config class may default an absent key: Llama4TextConfig attention_chunk_size
# 8192, transformers 5.19.0 configuration_llama4.py:169), so an absent key is not given
TEXT_KEYS = ("attention_chunk_size", "num_nextn_predict_layers")
TEXT_SECTIONS = ("thinker_config", "llm_config", "language_config", "text_config")  # common.py:582-606, in priority


def text_config_json(raw: dict[str, Any], archs: list[str]) -> dict[str, Any] | None:
    """The part of config.json SGLang reads as ``hf_text_config`` (utils/hf_transformers/common.py:547
    get_hf_text_config): the first of ``TEXT_SECTIONS`` present (a thinker's own text_config: not read here), else
    the file itself; None where the file alone does not say (a vision or audio config without a text section: the
    config class may build a default text_config)."""
    if archs[0].startswith("Llava") and archs[0].endswith("ForCausalLM"):
        return raw  # common.py:551-559
    for k in TEXT_SECTIONS:
        if k in raw:
            return raw[k] if k != "thinker_config" and isinstance(raw[k], dict) else None
    if any(k in raw for k in ("vision_config", "audio_config")):
        return None
    return raw


def nvfp4_moe_meta(raw: dict[str, Any]) -> Any:
    """ModelConfig.nvfp4_moe_meta (configs/model_config.py:775-787): set for a hybrid FP8 + NVFP4-MoE checkpoint
    (config.json quantization_config: quant_algo MIXED_PRECISION, moe_quant_algo NVFP4, a group_size), else None.
    Rows only compare it with None: given as the group size, or the None sentinel."""
    q = raw.get("quantization_config")
    if q is None:
        return NONE
    if not isinstance(q, dict):
        return None  # not a dict in the file: not read
    if str(q.get("quant_algo", "")).upper() == "MIXED_PRECISION" and \
            str(q.get("moe_quant_algo", "")).upper() == "NVFP4" and q.get("group_size") is not None:
        return int(q["group_size"])
    return NONE


def model_ns(stack: Any, fields: dict[str, Any], release: str) -> dict[str, Any]:
    """``hf__architectures`` / ``hf__architecture`` and the keys of ``HF_KEYS`` from the model's config.json (see
    ``sglang_architectures``); ``hf_text__`` keys are not given yet."""
    model = getattr(stack, "model", None)
    raw = getattr(model, "raw_config", None)
    if not isinstance(raw, dict) or not raw:
        return {}
    archs = sglang_architectures(raw, str(fields.get("model_path", "")), fields)
    if archs is None:
        return {}
    out: dict[str, Any] = {"hf__architectures": archs, "hf__architecture": archs[0]}
    for k in HF_KEYS:
        if k in raw:
            out[f"hf__{k}"] = NONE if raw[k] is None else raw[k]
    if archs == ["LongcatFlashForCausalLM"]:
        out["hf__model_type"] = "longcat_flash"
    arch = attention_arch(archs, (inputs_table(release) or {}).get("model") or {})
    if arch is not None:
        out["mc__attention_arch"] = arch
    text = text_config_json(raw, archs)
    for k in TEXT_KEYS if text is not None else ():
        if k in text:
            out[f"mc__{k}"] = NONE if text[k] is None else text[k]
    meta = nvfp4_moe_meta(raw)
    if meta is not None:
        out["mc__nvfp4_moe_meta"] = meta
    if "index_topk" in raw:
        out["hf__index_topk"] = NONE if raw["index_topk"] is None else raw["index_topk"]
    elif raw.get("model_type") in V3_CONFIG_TYPES:
        out["hf__index_topk"] = NONE
    return out


def namespace(stack: Any, release: str) -> dict[str, Any] | None:
    """SGLang's inputs for ``stack`` at ``release`` (see the module doc); None when the release has no inputs table."""
    if inputs_table(release) is None:
        return None
    ns = fields_ns(stack, release)
    env = env_ns(stack, release)
    ns.update(env)
    ns.update(platform_ns(stack, env))
    ns.update(model_ns(stack, ns, release))
    ns["model_path__scheme"] = url_scheme(ns.get("model_path", ""))
    ns.update(checkpoint_ns(stack, ns))
    return ns


MISTRAL_NATIVE_NAMES = ("mistral-large-3", "mistral-small-4", "leanstral")  # model_path_hook.py:325-329


def checkpoint_ns(stack: Any, ns: dict[str, Any]) -> dict[str, Any]:
    """What SGLang's load-format probes answer on the checkpoint optkg read (model_path_hook.py handle_load_format):
    ``model_path__is_gguf`` (utils/hf_transformers/common.py:396 check_gguf_file: a file with suffix .gguf or a GGUF
    header) is False where optkg read a config.json for ``model_path`` (a folder or hub repository, not a file) and it
    does not end in .gguf; ``model_path__mistral_native`` (model_path_hook.py:310 is_mistral_native_format: params.json
    with a Mistral-native name, or consolidated*.safetensors without model*.safetensors) is False for a checkpoint
    whose name and config.json name no Mistral model (Mistral's own release format; other vendors publish HF-named
    weights). Otherwise neither is given (rows reading them are not evaluated)."""
    model = getattr(stack, "model", None)
    raw = getattr(model, "raw_config", None)
    path = str(ns.get("model_path", ""))
    if not isinstance(raw, dict) or not raw or path in ("", NONE) or ns.get("model_path__scheme"):
        return {}
    out: dict[str, Any] = {}
    if not path.endswith(".gguf"):
        out["model_path__is_gguf"] = False
    archs = raw.get("architectures") if isinstance(raw.get("architectures"), list) else []
    words = " ".join([path, str(raw.get("model_type", "")), *map(str, archs)]).lower()
    if not any(k in words for k in ("mistral", "pixtral", "stral", *MISTRAL_NATIVE_NAMES)):
        out["model_path__mistral_native"] = False
    return out
