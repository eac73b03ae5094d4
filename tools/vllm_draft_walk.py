"""The speculative draft's own config.json in vLLM's generated rows: the Qwen3-Omni DSpark checks.

``_validate_qwen3_omni_dspark(target_model_config, draft_model_config, num_speculative_tokens)``
(vllm/config/speculative.py, 0.34.0 :209-431, 0.33.0 :167-389) reads the draft checkpoint's config.json
(architectures, block_size, target_layer_ids, markov_rank, mask token ...) against the target's thinker text
config. It runs where the draft exists: 0.34.0 DSparkSpeculatorConfig.apply_options
(v1/worker/gpu/spec_decode/dspark/config.py:124-127, the class ``get_speculator_config_class`` gives for
method 'dspark': speculator_config.py:362-388, :404-426), 0.33.0 SpeculativeConfig.__post_init__ :1644-1678 under
``self.method == "dspark"`` once the draft ModelConfig is built (:1406). Neither walk builds that draft (0.34.0
builds it in the speculator classes, 0.33.0's ModelConfig(...) of the draft is not the served model's), so this
walks the function once more, entered as vLLM enters it for a stack that gives ``method: dspark``, a draft
``model`` and ``num_speculative_tokens`` (and whose config.json is not a speculators checkpoint, which would
replace them: transformers_utils/config.py maybe_override_with_speculators):

- the target: config.json's keys as for every row (``hf__<key>``); ``_is_qwen3_omni_target`` as its first test
  alone (``model_type == 'qwen3_omni_moe'``; the architecture test beside it is left out: a row then holds only
  where vLLM's test holds); the thinker's text config ``_get_qwen3_omni_text_config`` is
  ``thinker_config.text_config`` (``hf__thinker_config__text_config__<key>``);
- the draft: its config.json's keys ``draft_hf__<key>`` (a section's key ``draft_hf__<section>__<key>``), given by
  kg.analyses.enginechecks.draft_config_keys when optkg can read that file; ``architectures`` is its list
  (the ModelConfig's list and hf_config's, which ``set(..) | ..`` joins, are the same list for a checkpoint whose
  architecture vLLM registers as a DSpark draft; any other is rewritten to DSparkDraftModel, which fails the
  same first test);
- ``_get_nested_config_value(config, section, name)``: the section's key (a JSON object in config.json stays a
  dict on the transformers config: ``.get`` gives None when the key is absent);
- a key config.json lacks that the config class does not define either reads as ``'__absent__'``
  (kg.analyses.draftkeys ABSENT_IS_NONE): ``getattr(config, key, default)`` is then its default (a literal;
  anything else is not modelled), an attribute read is not modelled (it raises AttributeError).
"""
from __future__ import annotations

import ast
from typing import Any

import checkgen as cg

SPEC_PATH = "vllm/config/speculative.py"
ENTRY = "_validate_qwen3_omni_dspark"
TARGET = "hf__"
DRAFT = "draft_hf__"
THINKER_TEXT = "hf__thinker_config__text_config__"


ABSENT = "__absent__"  # kg.analyses.draftkeys: a key config.json lacks that no config class defines


def _key(prefix: str, a: str, default: str | None = None) -> cg.Expr:
    """Key ``a`` of a config.json: where it is absent (ABSENT) ``default`` (getattr's), else not modelled (an
    attribute read raises AttributeError)."""
    x = f"{prefix}{a}"
    return cg.Expr(f"({default if default is not None else cg.UNK} if {x} == {ABSENT!r} else {x})")


def _model(prefix: str) -> cg.Obj:
    def free(a: str) -> Any:
        return _key(prefix, a) if a.isidentifier() and not a.startswith("_") else cg.TAINT
    return cg.Obj(prefix, free, None)


def _config(hf: str, archs: str | None) -> cg.Obj:
    """A ModelConfig whose hf_config is config.json's keys under ``hf``."""
    def free(a: str) -> Any:
        if a == "hf_config":
            return _model(hf)
        if a == "architectures" and archs:
            return cg.Expr(archs)
        return cg.TAINT
    return cg.Obj(f"model_config[{hf}]", free, None)


def is_config_obj(v: Any) -> str | None:
    """The key prefix of a config.json object of this walk, or None."""
    return v.label if isinstance(v, cg.Obj) and v.label in (TARGET, DRAFT, THINKER_TEXT) or (
        isinstance(v, cg.Obj) and v.label.startswith(DRAFT)) else None


def call_hook(w: Any, name: str, node: ast.Call, fr: cg.Frame, pc: list[str]) -> Any:
    """The calls of _validate_qwen3_omni_dspark's helpers this walk reads (module doc); None for any other."""
    if not getattr(w, "in_draft_walk", False):
        return None
    if name == "_is_qwen3_omni_target":
        return cg.Expr(f"({TARGET}model_type == 'qwen3_omni_moe')")
    if name == "_get_qwen3_omni_text_config":
        return _model(THINKER_TEXT)
    if name == "set" and isinstance(node.func, ast.Name) and len(node.args) == 1:
        return w.value_or_taint(node.args[0], fr, pc)
    if name == "_get_nested_config_value" and len(node.args) == 3:
        base = w.value_or_taint(node.args[0], fr, pc)
        section, key = w.const_str(node.args[1], fr, pc), w.const_str(node.args[2], fr, pc)
        prefix = is_config_obj(base)
        if prefix and section and key:
            return cg.Expr(f"{prefix}{section}__{key}")
        raise cg.Untranslatable("nested config value")
    if name in ("getattr", "hasattr") and isinstance(node.func, ast.Name) and len(node.args) >= 2:
        base = w.value_or_taint(node.args[0], fr, pc)
        key = w.const_str(node.args[1], fr, pc)
        prefix = is_config_obj(base)
        if prefix and key:
            if name == "hasattr":
                return cg.Expr(f"({prefix}{key} != {ABSENT!r})")
            d = node.args[2] if len(node.args) > 2 else None
            lit = repr(cg.NONE) if d is None or (isinstance(d, ast.Constant) and d.value is None) else \
                repr(d.value) if isinstance(d, ast.Constant) and isinstance(d.value, (bool, int, str)) else cg.UNK
            return _key(prefix, key, lit if len(node.args) > 2 else None)
        if isinstance(base, cg.Obj) and base.label.startswith("model_config[") and key:
            return base.free(key)
    return None


def expr_hook(w: Any, node: ast.Call, fr: cg.Frame, pc: list[str]) -> bool:
    """``draft_architectures.update(...)`` of the same list: nothing changes (module doc); True when handled."""
    if not getattr(w, "in_draft_walk", False):
        return False
    if isinstance(node.func, ast.Attribute) and node.func.attr == "update" and len(node.args) == 1:
        try:
            base = w.value(node.func.value, fr, pc)
            add = w.value(node.args[0], fr, pc)
        except cg.Untranslatable:
            return False
        if (isinstance(base, cg.Expr) and isinstance(add, cg.Expr)
                and cg.free_names(base.text) - {cg.UNK} == cg.free_names(add.text) - {cg.UNK}
                == {f"{DRAFT}architectures"}):
            return True  # the draft's architectures joined with themselves (module doc)
    return False


def draft_walk(w: Any, args: cg.Obj) -> None:
    """Walk _validate_qwen3_omni_dspark as vLLM enters it (module doc), its rows under the stack's own method,
    draft model and num_speculative_tokens."""
    hit = w.find_function(ENTRY, SPEC_PATH)
    raw = args.free("speculative_config") if args.free else None
    if hit is None or not isinstance(raw, cg.Obj) or not raw.free:
        return
    given: dict[str, str] = {}
    for key, short in (("method", "spec_method"), ("model", "spec_model"), ("num_speculative_tokens", "spec_tokens")):
        j, s = raw.free(key), args.free(short)
        if not isinstance(j, cg.Expr) or not isinstance(s, cg.Expr):
            return
        given[key] = f"({s.text} if {s.text} != {cg.NONE!r} else {j.text})"
    pc = [f"({given['method']} == 'dspark')", f"({given['model']} != {cg.NONE!r})",
          f"({given['num_speculative_tokens']} != {cg.NONE!r})",
          "(not truthy(vllm_model_cloud_storage))", "(not truthy(vllm_model__speculators_checkpoint))"]
    func, path = hit
    w.in_draft_walk = True
    try:
        w.invoke(func, path, None, [_config(TARGET, f"{TARGET}architectures"),
                                    _config(DRAFT, f"{DRAFT}architectures"),
                                    cg.Expr(given["num_speculative_tokens"])], {}, pc)
    except cg.Untranslatable:
        pass
    finally:
        w.in_draft_walk = False
