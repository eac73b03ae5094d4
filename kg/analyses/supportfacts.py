"""Support facts of a stack: the per-release data of ``catalog/support/`` looked up for its engine
release and model architecture, plus the effective values the runtime-failure rules compare.

Facts added (each only when its inputs are known):

- everything ``kg.knowledge.support.support_facts`` returns for the stack's engine and release
  (e.g. ``supports_pp``, ``allowed_max_lora_ranks``, ``default_max_lora_rank``), and
  ``support_releases`` (file -> the listed release whose entry was used);
- ``max_lora_rank_effective``: the ``max_lora_rank`` setting, else the release's default;
- ``lora_rank_allowed``: ``max_lora_rank_effective`` is one of the release's allowed ranks;
- ``max_lora_rank_needed``: the smallest allowed rank >= ``lora_adapter_rank`` (None when no allowed
  rank is that large);
- ``has_softcapping``: the model sets ``attn_logit_softcapping`` (a positive number);
- ``model_uses_sparse_attention``: config.json has ``index_topk`` (DeepSeek sparse attention; vLLM's ``use_sparse``);
- ``attention_backend_set``: the stack names an attention backend; ``block_size_set``: it names a KV block size
  (without them vLLM picks a backend, and a block size, its validation accepts: the facts the refusal rules need);
- ``attention_backend_effective``: the ``attention_backend`` setting upper-cased, else the engine's
  ``default_attention_backend`` when it knows one (vLLM V0 with an NVIDIA GPU of compute capability < 8.0:
  ``XFORMERS``), else absent (the default is not modelled);
- ``cascade_attention_enabled``: not ``disable_cascade_attn`` (the setting, else the release's default);
- the engine's ``support_facts`` (SGLang ``sglang_enable_spec_v2``: the setting, else the release's default,
  catalog/support/sglang-spec-v2.yaml);
- ``vllm_ct_scheme`` / ``vllm_ct_scheme_min_capability``: the compressed-tensors scheme class vLLM builds for the
  checkpoint (kg.analyses.ctscheme) and its minimum compute capability at the release (``ct_scheme_min_capability``,
  catalog/support/vllm-compressed-tensors-schemes.yaml), when the checkpoint is compressed-tensors and no other
  ``--quantization`` is given ('none' and 0.0 for a checkpoint of another or no quantisation method; absent when the
  scheme is one kg.analyses.ctscheme does not name);
- ``vllm_quant_method`` / ``vllm_quant_min_capability`` / ``vllm_quant_act_dtypes`` / ``vllm_quant_capability_checked``:
  the quantisation method vLLM settles on for the checkpoint and ``--quantization`` (kg.analyses.quantclass) and what
  its class declares at the release (catalog/support/vllm-quantization-capability.yaml);
- ``softcap_handling``: for a soft-capping model on a known backend, ``applied``, ``refused`` or
  ``ignored`` per the release's entry in catalog/support/vllm-softcap-backends.yaml.
"""
from __future__ import annotations

from typing import Any

from kg.analyses.ctscheme import vllm_ct_scheme
from kg.derive.kv import compute_capability
from kg.engine.incremental import current
from kg.engines import of
from kg.inputs.stack import Stack
from kg.knowledge.support import support_facts


def support_namespace(stack: Stack, ns: dict[str, Any]) -> dict[str, Any]:
    """Facts to add to the check namespace of ``stack`` (``ns`` is read, not changed)."""
    m = stack.model
    keys = {"architecture": m.architecture if m else None}
    session = current()  # a sweep: the same release and keys give the same facts (the files are read once)
    engine, version = stack.engine, stack.engine_version
    out = support_facts(engine, version, keys) if session is None else \
        session.call(lambda k: support_facts(engine, version, k), keys, key=(support_facts, engine, version),
                     fresh=("support_releases",))  # the rest are the support files' own values
    if m is not None:
        out["has_softcapping"] = m.attn_logit_softcapping is not None
        # vLLM's use_sparse: hasattr(hf_config, "index_topk") (0.12.0 platforms/cuda.py:173): DeepSeek sparse attention
        out["model_uses_sparse_attention"] = getattr(m, "index_topk", None) is not None
    backend = ns.get("attention_backend")
    out["attention_backend_set"] = bool(backend)
    out["block_size_set"] = "block_size" in stack.settings
    if backend:
        out["attention_backend_effective"] = str(backend).upper()
    elif (default := of(stack).default_attention_backend(ns)) is not None:
        out["attention_backend_effective"] = default
    be = out.get("attention_backend_effective")
    if be and out.get("has_softcapping"):
        for key, verdict in (("softcap_backends", "applied"), ("softcap_refusing_backends", "refused"),
                             ("softcap_ignoring_backends", "ignored")):
            if be in (out.get(key) or []):
                out["softcap_handling"] = verdict
    if "default_disable_cascade_attn" in out:
        off = ns.get("disable_cascade_attn")
        out["cascade_attention_enabled"] = not (off if off is not None else out["default_disable_cascade_attn"])
    mins = out.get("ct_scheme_min_capability")
    if m is not None and mins:
        qm = str(ns.get("quantization") or (m.quantization_config or {}).get("quant_method") or "").lower()
        scheme = vllm_ct_scheme(m.quantization_config, mins, compute_capability(stack.hardware)) \
            if qm == "compressed-tensors" else "none"  # another method, or none: no scheme to refuse
        if scheme is not None:
            out["vllm_ct_scheme"] = scheme
            if scheme == "none" or scheme in mins:
                out["vllm_ct_scheme_min_capability"] = 0.0 if scheme == "none" else mins[scheme]
    out.update(_quant_method_facts(stack, ns, out))
    of(stack).support_facts(out, ns)  # the engine's effective values of its support data (SGLang spec v2)
    allowed = out.get("allowed_max_lora_ranks")
    rank = ns.get("max_lora_rank")
    if rank is None:
        rank = out.get("default_max_lora_rank")
    if rank is not None:
        out["max_lora_rank_effective"] = int(rank)
        if allowed:
            out["lora_rank_allowed"] = int(rank) in allowed
    adapter = ns.get("lora_adapter_rank")
    if allowed and adapter is not None:
        bigger = sorted(r for r in allowed if r >= int(adapter))
        out["max_lora_rank_needed"] = bigger[0] if bigger else None
    return {k: v for k, v in out.items() if k not in ns}


def _quant_method_facts(stack: Stack, ns: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """``vllm_quant_method`` (the method vLLM's ModelConfig settles on, kg.analyses.quantclass; 'none' for an
    unquantised stack), its ``vllm_quant_min_capability`` and ``vllm_quant_act_dtypes`` at the release, and
    ``vllm_quant_capability_checked`` (all three are known: False when not)."""
    mins, m = out.get("quant_method_min_capability"), stack.model
    if not mins or m is None:  # the table is a vLLM support file: other engines have none
        return {"vllm_quant_capability_checked": False}
    explicit = str(ns.get("quantization") or "").lower() or None
    if explicit is None and not m.quantization_config:
        return {"vllm_quant_capability_checked": False, "vllm_quant_method": "none"}
    from kg.analyses.quantclass import resolved_method
    method = resolved_method(explicit, m.quantization_config, m.model_type, out.get("quant_online_methods") or [])
    dtypes = (out.get("quant_method_act_dtypes") or {}).get(method or "")
    if method not in mins or dtypes is None:
        return {"vllm_quant_capability_checked": False}
    return {"vllm_quant_capability_checked": True, "vllm_quant_method": method,
            "vllm_quant_min_capability": mins[method], "vllm_quant_act_dtypes": list(dtypes)}

