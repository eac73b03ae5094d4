"""``optkg check``: a stack -> facts -> rule engine -> findings.

``stack_facts`` turns a Stack into (engine facts, flat namespace). The namespace holds every
model field, hardware fact, setting and technique parameter, plus the KV derivations of kg.kv
(``kv_replication``, ``kv_bytes_per_token_per_gpu``, ``valid_dcp_sizes``, capacity and
concurrency when the hardware or a KV budget is known). ``check_stack`` runs the ``check``
ruleset and returns a Report of Findings, each tracing back to its rule, the catalog entries
involved, their coordinates, the dimension the cost lands in, its numbers, fixes and sources.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .catalog import Catalog
from .expr import names_in
from .kv import GIB, estimate_weight_bytes, kv_budget_bytes, kv_capacity, kv_layout
from .rules import SEVERITY_ORDER, Firing, RuleSet, evaluate_rules
from .stack import Stack

SCHEMA_VERSION = "1.0"


@dataclass
class Finding:
    """One fired rule on one stack (see module doc). ``numbers`` values are ints/floats/lists."""

    rule_id: str
    title: str
    severity: str
    message: str
    techniques: list[str]
    facts: dict[str, Any]
    numbers: dict[str, Any]
    cost_dimension: str | None
    from_dimension: str | None
    coordinates: list[dict[str, Any]]
    mechanism: str
    fixes: list[dict[str, str]]
    fix: str
    sources: list[dict[str, Any]]
    tags: list[str]
    rule_file: str = ""
    rule_line: int = 0
    fingerprint: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class Report:
    """The outcome of checking one stack."""

    stack: dict[str, Any]
    findings: list[Finding]
    derived: dict[str, Any]
    not_fired: list[dict[str, str]] = field(default_factory=list)
    ignored_flags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def max_severity(self) -> int:
        return max((SEVERITY_ORDER.get(f.severity, 0) for f in self.findings), default=0)

    def to_dict(self, explain: bool = False) -> dict[str, Any]:
        d = {"schema_version": SCHEMA_VERSION, "kind": "check", "stack": self.stack, "derived": self.derived,
             "findings": [f.to_dict() for f in self.findings], "ignored_flags": self.ignored_flags,
             "notes": self.notes}
        if explain:
            d["not_fired"] = self.not_fired
        return d


def _compute_capability(hw: dict[str, Any] | None) -> float | None:
    cc = (hw or {}).get("compute_capability")
    try:
        return float(cc) if cc is not None else None
    except (TypeError, ValueError):
        return None


def stack_facts(stack: Stack) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Engine facts (structural) and the flat namespace (numeric) for ``stack``."""
    ns: dict[str, Any] = stack.values()
    facts: list[dict[str, Any]] = [{"kind": "stack", "engine": stack.engine or "unknown"}]
    for tid in sorted(stack.techniques):
        facts.append({"kind": "technique", "technique": tid})
    ns["techniques"] = sorted(stack.techniques)
    ns["engine"] = stack.engine or "unknown"
    ns["engine_version"] = stack.engine_version
    m = stack.model
    derived: dict[str, Any] = {}
    if m is not None:
        md = m.to_dict()
        for k, v in md.items():
            if k in ("warnings", "source", "name"):
                continue
            if k == "weight_block_size":
                if isinstance(v, list) and len(v) == 2:
                    ns["weight_block_n"], ns["weight_block_k"] = v
                continue
            ns.setdefault(k, v)
        ns["model_name"] = m.name
        ns["has_sliding_window"] = bool(m.sliding_window)
        facts.append({"kind": "model", "attention": m.attention, "is_moe": m.is_moe,
                      "has_sliding_window": bool(m.sliding_window), "quant_method": m.quant_method or "none"})
        tp, pp, dcp = ns["tp_size"], ns["pp_size"], ns["dcp_size"]
        kvdt = str(ns.get("kv_cache_dtype") or "auto")
        try:
            lay = kv_layout(m, tp, pp, 1, kvdt)
            lay_dcp = kv_layout(m, tp, pp, dcp, kvdt) if dcp > 1 else lay
        except Exception:  # an invalid dtype is reported by its own rule; keep the rest going
            lay = kv_layout(m, tp, pp, 1, "auto")
            lay_dcp = kv_layout(m, tp, pp, dcp, "auto") if dcp > 1 else lay
        derived.update({
            "kv_heads_per_rank": lay.kv_heads_per_rank,
            "kv_replication_tp": lay.replication_factor,
            "kv_replication": lay_dcp.replication_factor,
            "kv_bytes_per_token_model": lay.bytes_per_token_model,
            "kv_bytes_per_token_per_gpu": lay.bytes_per_token_per_gpu,
            "kv_bytes_per_token_per_gpu_unreplicated": lay.bytes_per_token_per_gpu_unreplicated,
            "kv_bytes_per_token_per_gpu_effective": lay_dcp.bytes_per_token_per_gpu_effective,
            "valid_dcp_sizes": lay.valid_dcp_sizes,
            "dcp_possible": lay.dcp_possible,
            "max_useful_dcp_size": max(lay.valid_dcp_sizes),
            "valid_tp_sizes": [d for d in range(1, m.num_attention_heads + 1) if m.num_attention_heads % d == 0],
            "kv_element_bytes": lay.kv_element_bytes,
        })
        hw = stack.hardware
        budget = None
        if ns.get("kv_budget_gib") is not None:
            budget = float(ns["kv_budget_gib"]) * GIB
            derived["kv_budget_source"] = "given (kv_budget_gib)"
        elif hw and hw.get("memory_gib"):
            weights = estimate_weight_bytes(m) / (tp * pp)
            budget = kv_budget_bytes(hw["memory_gib"] * GIB, float(ns.get("gpu_memory_utilization") or 0.9), weights)
            derived["kv_budget_source"] = "estimated: GPU memory x gpu_memory_utilization - estimated weights per GPU"
            derived["weight_bytes_per_gpu_estimate"] = round(weights)
        if budget is not None:
            cap = kv_capacity(lay_dcp, budget, ns.get("max_model_len"), int(ns.get("block_size") or 16))
            derived["kv_budget_bytes_per_gpu"] = round(budget)
            derived["kv_tokens_per_gpu"] = cap.kv_tokens_per_gpu
            derived["kv_tokens_total"] = cap.kv_tokens_total
            if cap.max_concurrency is not None:
                derived["max_concurrency"] = cap.max_concurrency
            if lay_dcp.replication_factor > 1 and lay.bytes_per_token_per_gpu_unreplicated:
                derived["kv_tokens_per_gpu_if_unreplicated"] = int(budget // lay.bytes_per_token_per_gpu_unreplicated)
    if stack.hardware:
        hw = stack.hardware
        facts.append({"kind": "hardware", "gpu": hw["id"], "vendor": str(hw.get("vendor", "unknown"))})
        ns["gpu"] = hw["id"]
        ns["gpu_vendor"] = hw.get("vendor")
        ns["gpu_memory_gib"] = hw.get("memory_gib")
        ns["gpu_compute_capability"] = _compute_capability(hw)
        ns["gpu_fp8_supported"] = hw.get("fp8_dense_tflops") is not None
        ns["gpu_count"] = stack.gpu_count
    ns.update(derived)
    return facts, ns


def _functions(stack: Stack):
    present = set(stack.techniques)
    return {"has": lambda tid: tid in present}


def _coords(catalog: Catalog, tid: str) -> dict[str, Any]:
    t = catalog.techniques.get(tid)
    if not t:
        return {"technique": tid}
    c = t["coordinates"]
    return {"technique": tid, "stages": c["stages"], "layers": c["layers"], "dimension": c["dimension"]}


def _fingerprint(rule_id: str, techniques: list[str], numbers: dict[str, Any]) -> str:
    import hashlib
    import json
    key = json.dumps([rule_id, sorted(techniques), numbers], sort_keys=True, default=str)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def firing_to_finding(f: Firing, ns: dict[str, Any], catalog: Catalog) -> Finding:
    r = f.rule
    read = set()
    for text in [r.condition or ""] + list(r.numbers.values()):
        if text:
            read |= names_in(text)
    facts = {k: ns[k] for k in sorted(read) if k in ns and k not in f.numbers}
    techs = [t for t in r.techniques]
    fixes = [{"technique": x, "name": catalog.techniques[x]["name"] if x in catalog.techniques else x} for x in r.fixes]
    return Finding(
        rule_id=r.id, title=r.title, severity=f.severity or "info", message=f.message, techniques=techs,
        facts=facts, numbers=f.numbers, cost_dimension=r.cost_dimension, from_dimension=r.from_dimension,
        coordinates=[_coords(catalog, t) for t in techs], mechanism=r.mechanism, fixes=fixes,
        fix=r.fix.format_map({**ns, **f.numbers}) if r.fix and "{" in r.fix else r.fix,
        sources=r.sources, tags=r.tags, rule_file=r.file, rule_line=r.line,
        fingerprint=_fingerprint(r.id, techs, f.numbers),
    )


def describe_stack(stack: Stack) -> dict[str, Any]:
    return {
        "name": stack.name, "source": stack.source,
        "model": stack.model.name if stack.model else None,
        "attention": stack.model.attention if stack.model else None,
        "engine": stack.engine, "engine_version": stack.engine_version,
        "hardware": stack.hardware["id"] if stack.hardware else None, "gpu_count": stack.gpu_count,
        "techniques": {k: dict(sorted(v.items())) for k, v in sorted(stack.techniques.items())},
        "settings": {k: v for k, v in sorted(stack.settings.items()) if not isinstance(v, dict)},
    }


def check_stack(stack: Stack, catalog: Catalog, rules: RuleSet) -> Report:
    """Run the check rules over ``stack``. Findings are sorted by severity (worst first), then rule id."""
    facts, ns = stack_facts(stack)
    firings = evaluate_rules(rules, facts, ns, _functions(stack), stack.engine, stack.engine_version)
    findings = [firing_to_finding(f, ns, catalog) for f in firings if f.fired]
    findings.sort(key=lambda x: (-SEVERITY_ORDER.get(x.severity, 0), x.rule_id))
    derived = {k: ns[k] for k in sorted(ns) if k.startswith(("kv_", "valid_", "dcp_", "max_", "weight_"))
               and not isinstance(ns[k], dict)}
    notes = list(stack.notes) + (stack.model.warnings if stack.model else [])
    return Report(describe_stack(stack), findings, derived,
                  [{"rule": f.rule.id, "reason": f.reason} for f in firings if not f.fired],
                  list(stack.ignored), notes)


def run_fixture(data: dict[str, Any], catalog: Catalog, rules: RuleSet, base_dir) -> list[Firing]:
    """Fixture runner for the ``check`` ruleset: ``data`` is a stack mapping (stack-file shape)."""
    from .stack import stack_from_doc
    from .yamlio import YamlDoc
    stack = stack_from_doc(YamlDoc(str(base_dir), data, {}), catalog, base_dir)
    facts, ns = stack_facts(stack)
    return evaluate_rules(rules, facts, ns, _functions(stack), stack.engine, stack.engine_version)
