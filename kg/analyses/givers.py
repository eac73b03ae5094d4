"""How a user gives each fact a rule could not be evaluated without: a flag of the stack's engine, an optkg option,
a stack-file field or a measurement.

The engine flags come from the flag tables (``catalog/engines/<engine>.yaml``: the entry that ``set``s the fact, its
first ``--`` name; an ``env:`` entry gives ``NAME=...``); the rest from ``OPTKG_OPTIONS`` below. A fact no entry
names gets no hint: the report then lists it bare.
"""
from __future__ import annotations

from typing import Any

# facts a user gives to optkg itself rather than to the engine
OPTKG_OPTIONS = {
    "hardware": "--gpu NAME",
    "gpu_count": "--count N (or hardware: count: in a stack file)",
    "engine_version": "--engine-version X.Y.Z",
    "prefix_reuse_ratio": "measured from a request trace by `optkg fit TRACE`",
    "kv_budget_gib": "--kv-budget-gib, or --kv-budget-from LOG",
    "nnodes": "--nnodes N",
    "gpus_per_node": "gpus_per_node: in a stack file",
    "draft_max_position_embeddings": "the draft head's config.json: name a local folder (or a cached hub id) as the "
                                     "speculative model",
    "tp_spans_nodes": "--nnodes N (or gpus_per_node: in a stack file)",
    "ep_spans_nodes": "--nnodes N (or gpus_per_node: in a stack file)",
    "vllm_architecture_refused": "a model whose config.json names its architectures, and --engine-version of a "
                                 "release optkg read (catalog/engines/models/vllm.yaml)",
    "sglang_architecture_refused": "--engine-version of a release whose SGLang model registry optkg read "
                                   "(catalog/engines/models/sglang.yaml: 0.4.0, 0.4.5, 0.5.1, 0.5.5, 0.5.23; "
                                   "tools/sglang_model_registry.py reads another wheel)",
}
HARDWARE_HINT = "--gpu NAME (a GPU optkg knows; `optkg check --help` lists the catalog)"


def _flag_for(fact: str, engine: str | None) -> str | None:
    from kg.inputs.launch.argv import table_for
    from kg.core.errors import OptkgError
    if not engine:
        return None
    try:
        table = table_for(engine, engine)
    except OptkgError:
        return None
    for spec in table.get("flags") or []:
        if not isinstance(spec, dict):
            continue
        names = [n for n in spec.get("names") or [] if str(n).startswith("--")]
        if spec.get("set") == fact and names:
            return f"{engine} {max(names, key=len)}"
        for key, setting in (spec.get("fields") or {}).items():  # a field of a JSON flag (-cc.cudagraph_mode)
            if setting == fact and names:
                return f"{engine} {max(names, key=len)}.{key}"
    for name, spec in (table.get("env") or {}).items():
        if isinstance(spec, dict) and spec.get("set") == fact:
            return f"{name}=... in the engine's environment"
    return None


def how_to_give(facts: list[str], engine: str | None, hardware_fields: set[str]) -> dict[str, str]:
    """fact -> how to give it, for the facts that have a way."""
    out: dict[str, str] = {}
    for f in facts:
        hint = OPTKG_OPTIONS.get(f) or _flag_for(f, engine)
        if hint is None and (f in hardware_fields or f.startswith("gpu_")):
            hint = HARDWARE_HINT
        if hint:
            out[f] = hint
    return out


def annotate(d: dict[str, Any], catalog: Any) -> dict[str, Any]:
    """The report dict with ``how_to_give`` for every fact its not-evaluable rules name."""
    facts = sorted({n for u in d.get("not_evaluable") or [] for n in (u.get("needs") or u.get("missing") or [])})
    if facts:
        hw_fields = {k for h in getattr(catalog, "hardware", {}).values() for k in (getattr(h, "__dict__", {}) or {})}
        d["how_to_give"] = how_to_give(facts, (d.get("stack") or {}).get("engine"), hw_fields)
    return d
