"""``optkg check``: a stack -> facts -> rule engine -> findings.

``stack_facts`` (kg.analyses.stackfacts) turns a Stack into (engine facts, flat namespace): every model field,
hardware fact, setting and technique parameter, the KV derivations (``kv_replication``,
``kv_bytes_per_token_per_gpu``, ``valid_dcp_sizes``, capacity and concurrency when the hardware or a KV budget is
known), the capacity facts the startup rules of rules/capacity.yaml read, and ``engine_facts``. ``check_stack``
applies the engine release's effective configuration (kg.inputs.effective), runs the ``check`` ruleset and returns
a Report of Findings, each tracing back to its rule, the catalog entries involved, their coordinates, the dimension
the cost lands in, its numbers, fixes and sources.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kg.analyses.kv_actual import STORED_KV_DTYPE, stored_kv_capacity
from kg.analyses.stackfacts import FP8_KV_DTYPES, HARDWARE_FACTS, engine_facts, stack_facts
from kg.engine.expr import names_in
from kg.engine.rules import SEVERITY_ORDER, Firing, RuleSet, _fmt, evaluate_rules
from kg.engines import of
from kg.inputs.effective import effective_configuration  # here, not per call: a function-level import is ~2.5 us
from kg.inputs.stack import Stack
from kg.knowledge.catalog import Catalog
from kg.knowledge.couplings import ruleset_for

__all__ = ["FP8_KV_DTYPES", "HARDWARE_FACTS", "Finding", "Report", "check_stack", "engine_facts", "stack_facts"]

SCHEMA_VERSION = "1.1"  # 1.1: outcomes (fired / held / not evaluable) and not_evaluable[] added


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
    kind: str = "startup"  # or "runtime-failure": the engine starts, then crashes, hangs or degrades
    failure: dict[str, Any] = field(default_factory=dict)  # runtime-failure: outcome, affected, fixed_in, issue
    coupling: str | None = None  # the catalog coupling the rule was generated from or refines (kg.knowledge.couplings)

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
    not_evaluable: list[dict[str, Any]] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)
    effective_config: list[dict[str, Any]] = field(default_factory=list)
    in_effect: list[dict[str, Any]] = field(default_factory=list)

    def max_severity(self) -> int:
        return max((SEVERITY_ORDER.get(f.severity, 0) for f in self.findings), default=0)

    def to_dict(self, explain: bool = False) -> dict[str, Any]:
        d = {"schema_version": SCHEMA_VERSION, "kind": "check", "stack": self.stack, "derived": self.derived,
             "findings": [f.to_dict() for f in self.findings], "ignored_flags": self.ignored_flags,
             "notes": self.notes, "not_evaluable": self.not_evaluable, "outcomes": self.outcomes,
             "effective_config": self.effective_config, "in_effect": self.in_effect}
        if explain:
            d["not_fired"] = self.not_fired
        return d


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


_READS: dict[tuple[str, ...], frozenset[str]] = {}


def _rule_reads(r) -> frozenset[str]:
    """Fact names a rule's condition and numbers read (parsed once per distinct expression set)."""
    key = (r.condition or "",) + tuple(r.numbers.values())
    got = _READS.get(key)
    if got is None:
        read: set[str] = set()
        for text in key:
            if text:
                read |= names_in(text)
        got = _READS[key] = frozenset(read)
    return got


def firing_to_finding(f: Firing, ns: dict[str, Any], catalog: Catalog) -> Finding:
    r = f.rule
    read = _rule_reads(r)
    facts = {k: ns[k] for k in sorted(read) if k in ns and k not in f.numbers}
    techs = [t for t in r.techniques]
    fixes = [{"technique": x, "name": catalog.techniques[x]["name"] if x in catalog.techniques else x} for x in r.fixes]
    fix = r.fix_by_engine.get(str(ns.get("engine") or ""), r.fix) if getattr(r, "fix_by_engine", None) else r.fix
    return Finding(
        rule_id=r.id, title=r.title, severity=f.severity or "info", message=f.message, techniques=techs,
        facts=facts, numbers=f.numbers, cost_dimension=r.cost_dimension, from_dimension=r.from_dimension,
        coordinates=[_coords(catalog, t) for t in techs], mechanism=r.mechanism, fixes=fixes,
        fix=_fmt(fix, {**ns, **f.numbers}) if fix and "{" in fix else fix,
        sources=r.sources, tags=r.tags, rule_file=r.file, rule_line=r.line,
        fingerprint=_fingerprint(r.id, techs, f.numbers), coupling=r.coupling or (r.refines[0] if r.refines else None),
        kind=getattr(r, "kind", "startup"), failure=dict(getattr(r, "failure", {}) or {}),
    )


def describe_stack(stack: Stack) -> dict[str, Any]:
    return {
        "name": stack.name, "source": stack.source,
        "model": stack.model.name if stack.model else None,
        "attention": stack.model.attention if stack.model else None,
        "engine": stack.engine, "engine_version": stack.engine_version,
        "engine_version_assumed": stack.engine_version_assumed,
        "framework": stack.framework, "framework_version": stack.framework_version,
        "hardware": stack.hardware["id"] if stack.hardware else None, "gpu_count": stack.gpu_count,
        "techniques": {k: dict(sorted(v.items())) for k, v in sorted(stack.techniques.items())},
        "settings": {k: v for k, v in sorted(stack.settings.items()) if not isinstance(v, dict)},
    }


def check_stack(stack: Stack, catalog: Catalog, rules: RuleSet) -> Report:
    """Run the check rules over ``stack``. Findings are sorted by severity (worst first), then rule id.

    First the engine's effective configuration is applied to a copy of the stack (kg.inputs.effective:
    the release assumed when none is given, release defaults for settings the stack does not give)."""
    return report_of(check_parts(stack, catalog, rules), catalog)


@dataclass
class Checked:
    """What ``check_stack`` computes before it writes the report: the stack with its effective configuration applied
    (a copy), the configuration's entries, the engine facts, the namespace and one Firing per rule."""

    stack: Stack
    effective: list[dict[str, Any]]
    facts: list[dict[str, Any]]
    ns: dict[str, Any]
    firings: list[Firing]
    fired: list[Firing] | None = None  # the firings that fired, in order (None: not picked yet)

    def findings_brief(self) -> list[tuple[str, str]]:
        """(rule id, severity) of the report's findings, in its order (``report_of``), without writing them: what a
        sweep keeps of each combination."""
        fired = self.fired if self.fired is not None else _fired(self.firings)
        notes_only = {f.rule.id for f in fired if _is_effect_note(f.rule)}
        out = [(f.rule.id, f.severity or "info") for f in fired if f.rule.id not in notes_only]
        out.sort(key=lambda x: (-SEVERITY_ORDER.get(x[1], 0), x[0]))
        return out

    def derived_subset(self, names: tuple[str, ...]) -> dict[str, Any]:
        """``report_of(...).derived`` restricted to ``names``, each starting ``kv_`` or ``max_`` (no DCP fact), without
        writing the report."""
        out = {}
        for k in names:
            if not k.startswith(("kv_", "max_")):
                raise ValueError(f"{k}: only kv_ and max_ names are read without the report")
            if k in self.ns and not isinstance(self.ns[k], dict):
                out[k] = self.ns[k]
        return out


def check_parts(stack: Stack, catalog: Catalog, rules: RuleSet) -> Checked:
    """``check_stack`` up to its report (module doc)."""
    import copy
    stack = copy.copy(stack)
    stack.settings, stack.notes = dict(stack.settings), list(stack.notes)
    stack.techniques = {k: dict(v) for k, v in stack.techniques.items()}
    effective = effective_configuration(stack, of(stack).release_facts)
    facts, ns = stack_facts(stack)
    if ns.get("max_model_len_auto"):  # --max-model-len auto: the length vLLM fits, not the release default
        for e in effective:
            if e["setting"] == "max_model_len" and ns.get("max_model_len_effective"):
                e.update(value=ns["max_model_len_effective"], source="given: auto", releases=None, evidence=[],
                         why=str(ns.get("max_model_len_source") or "").removeprefix("--max-model-len auto: "))
    firings = _evaluate(rules, facts, ns, stack, catalog)
    fired = _fired(firings)
    stored = stored_kv_capacity(stack, {f.rule.id for f in fired}, stack_facts)
    if stored is not None:  # capacity (table and rules) at the KV dtype the engine stores; the rule saying so stays
        keep = {f.rule.id: f for f in firings if f.rule.id in STORED_KV_DTYPE}
        ns = {**ns, **stored[0], "kv_bytes_per_token_per_gpu_requested": ns.get("kv_bytes_per_token_per_gpu")}
        stack.notes.append(stored[1])
        firings = [keep.get(f.rule.id, f) for f in _evaluate(rules, facts, ns, stack, catalog)]
        fired = None
    return Checked(stack, effective, facts, ns, firings, fired)


def _fired(firings: list[Firing]) -> list[Firing]:
    """The Firings that fired, in order (a sweep asks twice per combination of ~290)."""
    return [f for f in firings if f.fired]


def report_of(c: Checked, catalog: Catalog) -> Report:
    """The Report of a ``check_parts`` result (``check_stack``)."""
    stack, effective, ns, firings = c.stack, c.effective, c.ns, c.firings
    # an informational effect coupling that applies (DCP causes communication volume when dcp_size > 1) is
    # "in effect", listed apart from findings: nothing to fix
    notes_only = {f.rule.id for f in firings if f.fired and _is_effect_note(f.rule)}
    findings = [firing_to_finding(f, ns, catalog) for f in firings if f.fired and f.rule.id not in notes_only]
    in_effect = [{"rule_id": f.rule.id, "coupling": f.rule.coupling, "message": f.message,
                  "techniques": f.rule.techniques, "sources": f.rule.sources} for f in firings if f.rule.id in notes_only]
    outcomes = {k: sum(f.outcome == k for f in firings) for k in ("fired", "held", "not_evaluable", "not_applicable")}
    unknown = {e["setting"]: e["why"] for e in effective if e["source"] == "unknown"}
    not_evaluable = [not_evaluable_entry(f, stack, unknown) for f in firings if f.outcome == "not_evaluable"]
    findings.sort(key=lambda x: (-SEVERITY_ORDER.get(x.severity, 0), x.rule_id))
    derived = {k: ns[k] for k in sorted(ns) if k.startswith(("kv_", "valid_", "dcp_", "max_", "weight_", "draft_", "nodes_"))
               and not isinstance(ns[k], dict)}
    if not of(stack).has_dcp(stack.engine_version):
        for k in ("valid_dcp_sizes", "dcp_possible", "max_useful_dcp_size", "dcp_impossible_reason"):  # no DCP there
            derived.pop(k, None)
    notes = list(stack.notes) + (stack.model.warnings if stack.model else [])
    shown = describe_stack(stack)
    if str(ns.get("kv_budget_utilization_source") or "").startswith("SGLang default"):
        # the fraction SGLang computes replaces the table's placeholder wherever the report shows it
        for params in shown["techniques"].values():
            if "gpu_memory_utilization" in params:
                params["gpu_memory_utilization"] = ns["kv_budget_gpu_memory_utilization"]
        for e in effective:
            if e.get("setting") == "gpu_memory_utilization":
                e["value"] = ns["kv_budget_gpu_memory_utilization"]
                e["why"] = ns["kv_budget_utilization_source"]
    return Report(shown, findings, derived,
                  [{"rule": f.rule.id, "reason": f.reason, "outcome": f.outcome} for f in firings if not f.fired],
                  list(stack.ignored), notes, not_evaluable, outcomes, effective, in_effect)


def _is_effect_note(rule) -> bool:
    """Kept on the rule object (its fields do not change once loaded): a sweep asks for every fired rule of
    every combination."""
    hit = rule.__dict__.get("_effect_note")
    if hit is None:
        from kg.knowledge.couplings import EFFECT_KINDS
        hit = rule.__dict__["_effect_note"] = bool(rule.coupling) and (rule.severity or "info") == "info" \
            and len(rule.tags) > 1 and rule.tags[1] in EFFECT_KINDS
    return hit


def not_evaluable_entry(f: Firing, stack: Stack, unknown: dict[str, str] | None = None) -> dict[str, Any]:
    """``{rule_id, missing, needs, reason}`` for a rule that could not be evaluated. ``missing``: the fact
    names (or fact kinds, e.g. ``hardware``) it lacks; ``needs``: the input that would provide them -
    ``hardware`` for GPU-derived facts, and for engine defaults that depend on the GPU class
    (``unknown``: setting -> why, from the effective configuration), when the stack names no known GPU;
    else the fact name itself (a setting the stack could give)."""
    needs: list[str] = []
    for name in f.missing:
        if stack.hardware is None and (name in HARDWARE_FACTS or "depends on hardware" in (unknown or {}).get(name, "")):
            n = "hardware"  # a GPU-derived fact, or an engine default that depends on the GPU class
        else:
            n = name
        if n not in needs:
            needs.append(n)
    return {"rule_id": f.rule.id, "missing": list(f.missing), "needs": needs, "reason": f.reason}


def _evaluate(rules: RuleSet, facts: list[dict[str, Any]], ns: dict[str, Any], stack: Stack,
              catalog: Catalog) -> list[Firing]:
    """evaluate_rules over the rules the stack's techniques can match (kg.knowledge.couplings.ruleset_for);
    generated coupling rules about techniques the stack lacks are not applicable without an engine run."""
    active, skipped = ruleset_for(catalog, rules, set(stack.techniques))
    firings = evaluate_rules(active, facts, ns, _functions(stack), stack.engine, stack.engine_version)
    if skipped:
        firings += [Firing(r, False, "a technique it is about is not in the stack", outcome="not_applicable")
                    for r in skipped]
    return firings


def run_fixture(data: dict[str, Any], catalog: Catalog, rules: RuleSet, base_dir) -> list[Firing]:
    """Fixture runner for the ``check`` ruleset: ``data`` is a stack mapping (stack-file shape)."""
    stack = fixture_stack(data, catalog, base_dir)
    facts, ns = stack_facts(stack)
    return _evaluate(rules, facts, ns, stack, catalog)


def fixture_stack(data: dict[str, Any], catalog: Catalog, base_dir) -> Stack:
    """The stack of a check fixture's ``input``: a stack mapping, or ``{command, engine}`` (a launch command, e.g.
    one with an option the release refuses, or a value only the engine's flag accepts) with an optional
    ``hardware: {gpu, count}``."""
    if isinstance(data, dict) and {"command", "engine"} <= set(data) <= {"command", "engine", "hardware"}:
        from kg.engines.launch import parse_command
        st = parse_command(str(data["command"]), catalog, str(data["engine"]))
        hw = data.get("hardware")
        if hw:
            st.hardware = catalog.resolve_hardware(str(hw["gpu"]))
            st.gpu_count = int(hw.get("count") or 1)
        return st
    from kg.inputs.stack import stack_from_doc
    from kg.core.yamlio import YamlDoc
    return stack_from_doc(YamlDoc(str(base_dir), data, {}), catalog, base_dir)
