"""The speculative draft's config.json as the generated rows read it (``draft_hf__<key>``,
``draft_hf__<section>__<key>``: tools/vllm_draft_walk.py), read the way optkg reads the served model's: a folder (or
a .json file) the user names, relative to the stack file too, the Hugging Face cache (``OPTKG_HF_DOWNLOAD=1`` fetches
config.json into it), or a bundled config.

A key config.json lacks stays missing (the transformers config class may give it a default), except the keys the
draft's config class does not define (``ABSENT_IS_NONE``), given as ``'__absent__'`` (the rows read getattr's
default there), and a key of a JSON-object section (``dflash_config``, ``eagle_config``: a dict on the
config, read with ``.get``) or of such a section that is absent. Strings are lower-cased, in lists too, as the
rows' literals are (tools/vllm_generated_checks.py lower_literals).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

PREFIX = "draft_hf__"
ABSENT = "__absent__"  # tools/vllm_draft_walk.py: getattr's default where config.json lacks the key
THINKER_TEXT = "hf__thinker_config__text_config__"  # the served (Qwen3-Omni) model's thinker text config
# model_type -> keys its transformers config class (and PretrainedConfig) does not define: absent, vLLM's getattr
# reads its default.
# qwen3 (the Qwen3-Omni DSpark drafts' model_type: vLLM tests/v1/spec_decode and the converter in
# tools/convert_qwen3_dspark_to_qwen3_omni.py write it): transformers 5.24.0 models/qwen3/configuration_qwen3.py and
# configuration_utils.py name none of these; vLLM 0.33.0 / 0.34.0 register no config class of their own for qwen3
# (transformers_utils/configs/)
ABSENT_IS_NONE = {
    "qwen3": ("block_size", "dspark_block_size", "dflash_config", "eagle_config", "target_hidden_size",
              "target_layer_ids", "dspark_target_layer_ids", "use_aux_hidden_state", "markov_rank",
              "markov_head_type", "sample_from_anchor", "dspark_bonus_anchor", "draft_vocab_size", "mask_token_id",
              "dspark_noise_token_id", "pard_token", "ptd_token_id", "mrope_section", "dspark_draft_topk"),
}
# the speculative methods whose rows read the draft's config.json (tools/vllm_draft_walk.py: method 'dspark')
DRAFT_METHODS = ("dspark",)
# sections vLLM reads with _get_nested_config_value (config/speculative.py, 0.34.0 :191-196): dicts on the config
DICT_SECTIONS = ("dflash_config", "eagle_config")


def _low(v: Any) -> Any:
    if isinstance(v, str):
        return v.lower()
    if isinstance(v, list):
        return [_low(x) for x in v]
    return v


def draft_config(stack: Any, name: str) -> dict[str, Any] | None:
    """The draft's config.json as a dict, or None when optkg cannot read it."""
    from kg.inputs.hfcache import hf_cache_config
    from kg.inputs.modelcfg import config_dict
    base = None
    if getattr(stack, "source", None):
        src = Path(stack.source)
        base = src if src.is_dir() else src.parent
    local = Path(name).expanduser().exists() or (base is not None and (base / name).exists())
    cached = None if local else hf_cache_config(name)
    raw = config_dict(str(cached)) if cached is not None else config_dict(name, base)
    return raw if isinstance(raw, dict) and raw else None


def draft_config_keys(stack: Any, given: Any, ns: dict[str, Any], reads: Any) -> dict[str, Any] | None:
    """``draft_hf__`` facts for the names in ``reads`` (module doc); {} without a draft model or when vLLM would not
    read its config.json as it is (``--hf-overrides`` compose into the draft's, ``--hf-config-path``, a
    ``--config-format`` other than auto / hf); None when a draft is named but its config.json cannot be read."""
    name = ns.get("speculative_model")
    if not name:  # no draft (most stacks): the names read need not be looked through
        return {}
    from kg.frameworks.checkrows import NONE  # here: a function-level import costs ~2.5 us, most stacks return above
    wanted = [n for n in reads if str(n).startswith(PREFIX)]
    if not wanted or given("hf_overrides") or given("hf_config_path"):
        return {}
    if given("config_format") and str(ns.get("config_format", "auto")).lower() not in ("auto", "hf"):
        return {}
    raw = draft_config(stack, str(name))
    if raw is None:
        return None
    out: dict[str, Any] = {}
    served = getattr(getattr(stack, "model", None), "raw_config", None)
    text = (served.get("thinker_config") or {}).get("text_config") if isinstance(served, dict) else None
    if isinstance(text, dict):  # the target's thinker text config (tools/vllm_draft_walk.py THINKER_TEXT)
        out.update({f"{THINKER_TEXT}{k}": NONE if v is None else _low(v) for k, v in text.items()
                    if isinstance(k, str) and k.isidentifier()})
    for k, v in raw.items():
        if isinstance(k, str) and k.isidentifier():
            out[PREFIX + k] = NONE if v is None else _low(v)
            if isinstance(v, dict):
                out.update({f"{PREFIX}{k}__{k2}": NONE if v2 is None else _low(v2) for k2, v2 in v.items()
                            if isinstance(k2, str) and k2.isidentifier()})
    none_keys = ABSENT_IS_NONE.get(str(raw.get("model_type") or ""), ())
    for k in none_keys:
        out.setdefault(PREFIX + k, ABSENT)
    for n in wanted:
        for sec in DICT_SECTIONS:
            head = f"{PREFIX}{sec}__"
            if n.startswith(head) and n not in out and (isinstance(raw.get(sec), dict)
                                                        or (sec not in raw and sec in none_keys)):
                out[n] = NONE
    return out
