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
- ``has_softcapping``: the model sets ``attn_logit_softcapping`` (a positive number).
"""
from __future__ import annotations

from typing import Any

from kg.knowledge.support import support_facts
from kg.inputs.stack import Stack


def support_namespace(stack: Stack, ns: dict[str, Any]) -> dict[str, Any]:
    """Facts to add to the check namespace of ``stack`` (``ns`` is read, not changed)."""
    m = stack.model
    out = support_facts(stack.engine, stack.engine_version, {"architecture": m.architecture if m else None})
    if m is not None:
        out["has_softcapping"] = m.attn_logit_softcapping is not None
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
