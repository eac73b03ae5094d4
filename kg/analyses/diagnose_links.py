"""``optkg diagnose``: catalog techniques for each wall (``wall_techniques``) and, with a stack, which of
them collide with the user's techniques (``stack_links``, via ``kg.analyses.check.check_stack``).
"""
from __future__ import annotations

import copy
from typing import Any, Iterable

from kg.core.errors import OptkgError
from kg.engine.rules import RuleSet


# ---------------------------------------------------------------------------------------------
# catalog links and the user's stack

def _stage(workload: str, stack) -> str | None:
    if workload in ("serving", "generate"):
        return "inference"
    if workload == "training":
        return "training"
    if stack is not None and stack.engine:
        return "inference"
    return None


def wall_techniques(catalog, dimension: str, stage: str | None, keywords: Iterable[str],
                    named: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Catalog techniques with a benefit in ``dimension`` (and ``stage`` if given), with their costs.

    ``named``: the ids the wall rule names as its direction (its ``fixes``); they are listed even
    when their benefit lies in another dimension, and ranked first in the rule's order. The rest
    are ranked by how many of the wall's keywords (the rule's ``benefit:`` tags) their benefit
    text mentions, then by id.
    """
    kws = [k.lower() for k in keywords]
    order = {catalog.resolve(n) or n: i for i, n in enumerate(named)}
    out = []
    for tid, t in sorted(catalog.techniques.items()):
        if t.get("status") == "deprecated":
            continue
        coords = t.get("coordinates") or {}
        if stage and stage not in (coords.get("stages") or []):
            continue
        bens = [b for b in t.get("benefits") or [] if b.get("dimension") == dimension]
        if not bens and tid in order:
            bens = list(t.get("benefits") or [])[:1]
        if not bens:
            continue
        text = " ".join(f"{b.get('what', '')} {b.get('who', '')}" for b in bens).lower()
        out.append({
            "technique": tid, "name": t.get("name", tid),
            "benefits": [b.get("what", "") for b in bens],
            "costs": [{"dimension": c.get("dimension"), "what": c.get("what", "")} for c in t.get("costs") or []],
            "coordinates": {"stages": coords.get("stages", []), "layers": coords.get("layers", []),
                            "dimension": coords.get("dimension")},
            "keyword_hits": sorted({k for k in kws if k in text}),
            "named_by_rule": tid in order,
        })
    out.sort(key=lambda x: (order.get(x["technique"], len(order)), -len(x["keyword_hits"]), x["technique"]))
    return out


def _clone_stack(stack):
    return copy.deepcopy(stack)


def _declared_conflicts(catalog, tid: str, st2) -> list[dict[str, Any]]:
    from kg.analyses.check import stack_facts
    from kg.engine.expr import ExprError, ExprTypeError, MissingFact, evaluate
    _, ns = stack_facts(st2)
    fns = {"has": lambda t: t in st2.techniques}
    pairs = [(tid, cp) for cp in catalog.techniques[tid].get("couplings") or []]
    pairs += [(o, cp) for o in sorted(st2.techniques) if o != tid and o in catalog.techniques
              for cp in catalog.techniques[o].get("couplings") or []]
    out = []
    for owner, cp in pairs:
        if cp.get("kind") != "conflicts_with" or not cp.get("target"):
            continue
        target = catalog.resolve(cp["target"]) or cp["target"]
        if owner == tid:
            if target not in st2.techniques or target == tid:
                continue
            partner = target
        elif target == tid:
            partner = owner
        else:
            continue
        engines = cp.get("engines")
        if engines and st2.engine and st2.engine not in engines:
            continue
        holds: bool | None = True
        if cp.get("condition"):
            try:
                holds = bool(evaluate(cp["condition"], ns, fns))
            except (MissingFact, ExprTypeError, ExprError, ZeroDivisionError, TypeError, ValueError):
                holds = None
        out.append({"with": partner, "condition": cp.get("condition"), "holds_now": holds,
                    "severity": cp.get("severity"), "mechanism": cp.get("mechanism", ""), "engines": engines})
    return out


def stack_links(stack, catalog, check_rules: RuleSet, candidates: list[dict[str, Any]]) -> dict[str, Any]:
    """With the user's stack: check findings to fix first, and per candidate whether it is in the stack,
    what adding it (default parameters) newly triggers in ``optkg check``, and declared conflicts."""
    from kg.analyses.check import check_stack
    from kg.inputs.stack import add_technique
    base = check_stack(stack, catalog, check_rules)
    base_fp = {f.fingerprint for f in base.findings}
    ids = {c["technique"] for c in candidates}
    first = []
    for f in base.findings:
        fx = [x["technique"] for x in f.fixes if x["technique"] in ids]
        if fx:
            first.append({"rule_id": f.rule_id, "severity": f.severity, "message": f.message, "fix": f.fix, "fixes": fx,
                          "cost_dimension": f.cost_dimension})
    for c in candidates:
        tid = c["technique"]
        c["in_stack"] = tid in stack.techniques
        c["do_first_because"] = [x["rule_id"] for x in first if tid in x["fixes"]]
        c["collides"], c["declared_conflicts"] = [], []
        if c["in_stack"]:
            continue
        st2 = _clone_stack(stack)
        defaults = {p["name"]: p["default"] for p in catalog.techniques[tid].get("parameters") or []
                    if p.get("default") is not None}
        try:
            add_technique(st2, catalog, tid, defaults, "diagnose")
            rep = check_stack(st2, catalog, check_rules)
        except OptkgError as e:
            c["collides"].append({"rule_id": None, "severity": "error", "message": str(e)})
            continue
        c["collides"] = [{"rule_id": f.rule_id, "severity": f.severity, "message": f.message, "fingerprint": f.fingerprint}
                         for f in rep.findings if f.fingerprint not in base_fp]
        c["declared_conflicts"] = _declared_conflicts(catalog, tid, st2)
    rank = {c["technique"]: i for i, c in enumerate(candidates)}
    candidates.sort(key=lambda x: (not x["do_first_because"], x["in_stack"], rank[x["technique"]]))
    return {"first": first, "checked_with": "each candidate added to your stack with its catalog default parameters"}
