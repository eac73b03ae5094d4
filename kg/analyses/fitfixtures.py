"""fit's rule fixtures: a fixture's input (a workload or a trace, a model, a GPU or a KV budget, a release) run
through fit's facts and rules (split from kg.analyses.fit)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from kg.core.errors import OptkgError
from kg.analyses.fit import evaluate_fit, model_context, workload_features
from kg.analyses.fitmeasure import measure_trace
from kg.engine.rules import Firing, RuleSet

FIXTURE_KEYS = {"workload", "trace", "trace_format", "block_size", "model", "config", "tp", "pp", "dcp",
                "kv_cache_dtype", "gpu", "kv_budget_gib", "gpu_memory_utilization", "causal", "session_length",
                "attention_locality", "thresholds", "max_model_len", "max_num_seqs", "engine_version"}


def run_fixture(data: Mapping[str, Any], catalog, rules: RuleSet, base_dir) -> list[Firing]:
    """Fixture runner for the ``fit`` ruleset.

    ``data``: ``workload`` (flat features as ``workload_features`` returns them, given by hand)
    or ``trace`` (a trace file relative to the fixture folder, measured); optional ``model`` (hub
    id) or ``config`` (config.json relative to the fixture folder), ``tp``/``pp``/``dcp``,
    ``kv_cache_dtype``, ``gpu`` (catalog hardware) or ``kv_budget_gib``, ``causal``,
    ``session_length``, ``attention_locality``, ``thresholds``, ``max_model_len``, ``max_num_seqs``,
    ``engine_version`` (the vLLM release sized for; the latest when absent: its default KV block decides the knee).
    """
    from kg.inputs.modelcfg import load_config_file, resolve_model
    if not isinstance(data, Mapping):
        raise OptkgError("fit fixture input must be a mapping")
    unknown = sorted(set(data) - FIXTURE_KEYS)
    if unknown:
        raise OptkgError(f"fit fixture: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(FIXTURE_KEYS))})")
    base = Path(base_dir)
    m = None
    if "trace" in data:
        m = measure_trace(base / data["trace"], data.get("trace_format", "auto"), int(data.get("block_size", 512)))
        features = workload_features(m)
    elif "workload" in data:
        features = dict(data["workload"])
    else:
        raise OptkgError("fit fixture: give `workload` (features) or `trace` (a trace file)")
    model = None
    if data.get("config"):
        model = load_config_file(base / data["config"])
    elif data.get("model"):
        model = resolve_model(str(data["model"]))
    hw = catalog.resolve_hardware(data["gpu"]) if data.get("gpu") else None
    ctx = model_context(model, int(data.get("tp", 1)), int(data.get("pp", 1)), int(data.get("dcp", 1)),
                        str(data.get("kv_cache_dtype", "auto")), hw, data.get("kv_budget_gib"),
                        data.get("gpu_memory_utilization"), data.get("max_model_len"),
                        {"engine_version": str(data["engine_version"])} if data.get("engine_version") else None) \
        if model is not None else None
    _, firings = evaluate_fit(features, ctx, m, catalog=catalog, ruleset=rules, causal=data.get("causal"),
                              session_length=data.get("session_length"),
                              attention_locality=data.get("attention_locality"), thresholds=data.get("thresholds"),
                              max_num_seqs=data.get("max_num_seqs"))
    return firings
