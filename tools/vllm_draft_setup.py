"""The draft-model speculators' setup in vLLM 0.34.0's generated rows: the draft DCP and max_model_len checks.

``SpeculativeConfig.__post_init__`` (vllm/config/speculative.py:1348-1416 at 0.34.0) calls
``config_cls.configure(self)`` (:1391) on the class ``get_method_config_class`` gives for the method
(v1/worker/gpu/spec_decode/speculator_config.py:357-371: ``None`` is ``draft_model``). The walk does not follow the
speculator classes (tools/vllm_speculators.py); this walks the two checks of ``DraftModelSpeculatorConfig.configure``
(speculator_config.py:177-252) that read only the speculative config's own options and the target's configs:

- ``SpeculativeConfig._verify_and_get_draft_dcp(target_parallel_config, draft_dcp)`` (:236-240; speculative.py
  :1554-1565), with the given ``draft_decode_context_parallel_size``: a default (None) is the target's DCP or 1
  (speculator_config.py:267-272, dflash/config.py:32-46) and passes, so only a given value is checked;
- ``SpeculativeConfig._maybe_override_draft_max_model_len(spec.max_model_len, draft.max_model_len,
  target.max_model_len)`` (:241-247; speculative.py:1442-1480). Its first test (draft) never holds: the draft's
  ModelConfig is built with ``max_model_len=spec.max_model_len`` (:203; catalog classify/vllm.yaml), so the draft's
  value is passed as the speculative one and only the target test is read.

Where the checks run: the configure of ``DraftModelSpeculatorConfig`` is the one of every built-in class whose
method is ``draft_model`` (or None), ``eagle``, ``eagle3``, ``mtp``, ``dflash`` or ``dspark``
(standalone_ar/eagle/mtp/dflash/dspark config.py subclass it without overriding configure); ``ngram``,
``ngram_gpu``, ``suffix`` and ``extract_hidden_states`` have their own; a custom method (a plugin) is left out. It
returns before the checks when ``spec.model`` is None (:183-184); ``__post_init__`` fills a missing model with
``default_model`` (:1386-1390) only when ``num_speculative_tokens`` is given or the method is ``dspark``: for
``mtp`` and ``dspark`` it is the target's own model (mtp/config.py:42-55, dspark/config.py:36-51; MiniMax-M3's
DSpark subfolder or a refusal), for the others a refusal (speculator_config.py:171-175). So the rows hold where a
model is given, or the method is ``mtp`` with ``num_speculative_tokens``, or ``dspark``. Earlier refusals of the
setup (the draft's config, ``num_speculative_tokens`` against ``n_predict``, the draft TP) stop the start too.
"""
from __future__ import annotations

import ast
from typing import Any

import checkgen as cg

SPEC_PATH = "vllm/config/speculative.py"
CONFIGURE_CALL = "config_cls.configure"
DRAFT_MODEL_METHODS = ("draft_model", "eagle", "eagle3", "mtp", "dflash", "dspark")
NONE = cg.NONE


def _text(w: Any, obj: Any, attr: str, pc: list[str]) -> str | None:
    try:
        return w.as_text(w.get_attr(obj, attr, pc))
    except cg.Untranslatable:
        return None


def configure_hook(w: Any, node: ast.Call, fr: cg.Frame, pc: list[str]) -> None:
    """At ``config_cls.configure(self)`` in SpeculativeConfig.__post_init__: walk the draft setup's DCP and
    max_model_len checks (module doc) under the conditions that reach them."""
    if ast.unparse(node.func) != CONFIGURE_CALL or len(node.args) != 1 or fr.path != SPEC_PATH:
        return
    try:
        spec = w.value(node.args[0], fr, pc)
    except cg.Untranslatable:
        return
    if not isinstance(spec, cg.Obj) or spec.cls != "SpeculativeConfig":
        return
    method, custom = _text(w, spec, "method", pc), _text(w, spec, "custom_method", pc)
    model = _text(w, spec, "model", pc)
    tokens = _text(w, spec, "num_speculative_tokens", pc)
    if None in (method, custom, model, tokens):
        return
    reach = [f"({custom} == {NONE!r})", f"({method} == {NONE!r} or {method} in {DRAFT_MODEL_METHODS!r})",
             f"({model} != {NONE!r} or ({method} == 'mtp' and {tokens} != {NONE!r}) or {method} == 'dspark')"]
    base = w.eff(fr, pc) + reach
    try:
        target_pc = w.get_attr(spec, "target_parallel_config", pc)
        target_mc = w.get_attr(spec, "target_model_config", pc)
    except cg.Untranslatable:
        return
    dcp = w.find_method("SpeculativeConfig", "_verify_and_get_draft_dcp", SPEC_PATH)
    if dcp is not None:
        try:
            w.invoke(dcp[0], dcp[1], None, [target_pc, w.get_attr(spec, "draft_decode_context_parallel_size", pc)],
                     {}, base, dcp[2])
        except cg.Untranslatable:  # the walk cannot follow this release's draft DCP check: it makes no row
            pass
    mml = w.find_method("SpeculativeConfig", "_maybe_override_draft_max_model_len", SPEC_PATH)
    if mml is not None and isinstance(target_mc, cg.Obj):
        try:
            given = w.get_attr(spec, "max_model_len", pc)
            w.invoke(mml[0], mml[1], None, [given, given, w.get_attr(target_mc, "max_model_len", pc)], {}, base,
                     mml[2])
        except cg.Untranslatable:  # nor the draft max_model_len check: no row rather than a guessed one
            pass
