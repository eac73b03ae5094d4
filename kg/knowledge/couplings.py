"""Catalog couplings compiled into check rules: the coupling graph is what ``optkg check`` evaluates.

One source of truth (issue 12): every coupling that can be checked on a stack becomes a rule of the
``check`` ruleset carrying the coupling's mechanism, dimensions, severity, engines and sources. What
"fires" means follows the coupling kind (``KINDS``, one row per kind; a condition C is the
coupling's ``condition``, see catalog/schema/technique.schema.json):

========================  ===========================  ==============================================
kind (target)             facts matched                fires when
========================  ===========================  ==============================================
conflicts_with (tech B)   A and B in the stack         C holds (always, without C)
requires (tech B)         A in the stack               B is absent and C does not hold ("or C")
requires (property)       A in the stack               C, the constraint, does not hold
causes / amplifies /      A and B in the stack         C holds (no condition: a standing effect the
mitigates / replaces (B)                               graph shows, nothing to check: skipped)
any of those, C reads     A in the stack               C holds (C names the variant of B in play,
a parameter of B                                       e.g. max_num_seqs of larger-batch-size)
causes / amplifies /      A in the stack               C holds (no condition: nothing to check, skipped)
mitigates / replaces (p)
========================  ===========================  ==============================================

A coupling is named by its *ref* ``<technique>/<kind>/<target or property>`` (``#2``, ``#3`` for a
second and third coupling with the same three parts), stable under reordering of the file; its
generated rule id is ``coupling-<technique>-<kind>-<target>`` (``-2`` ... likewise). A hand-written
rule that refines a coupling says so with ``refines: <ref>``: it replaces the generated rule (it
carries the numbers, fixes and engine-specific messages) and ``refine_problems`` reports a hand rule
whose refined coupling does not exist or disagrees with it (other techniques, or error vs not error).

``check_ruleset(catalog, rules)`` returns the check ruleset with the generated rules appended
(hand rules first, so their order and ids are unchanged). Deterministic for equal inputs.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from kg.core.errors import Problem
from kg.engine.expr import names_in
from kg.engine.rules import Rule, RuleSet
from kg.knowledge.catalog import Catalog

EFFECT_KINDS = ("causes", "amplifies", "mitigates", "replaces")
TECH_TARGET_KINDS = ("conflicts_with", "requires", "causes", "amplifies", "mitigates", "replaces")
VERB = {"conflicts_with": "conflicts with", "requires": "requires", "causes": "causes", "amplifies": "amplifies",
        "mitigates": "mitigates", "replaces": "replaces"}
SEVERITY_WORST = {"info": 1, "warning": 3, "error": 4}


@dataclass(frozen=True)
class CouplingRef:
    """One catalog coupling: ``ref`` (stable name), the technique it is declared on, its index there, the
    resolved target technique id (or None) or property id, and the coupling entry itself."""

    ref: str
    rule_id: str
    technique: str
    index: int
    target: str | None
    prop: str | None
    data: dict[str, Any]

    @property
    def kind(self) -> str:
        return self.data["kind"]

    @property
    def condition(self) -> str | None:
        return self.data.get("condition") or None


def iter_couplings(catalog: Catalog, only: set[str] | None = None) -> Iterator[CouplingRef]:
    """Every coupling of every technique (sorted by technique id, then file order) with its ref and rule id;
    ``only``: just the couplings declared on these techniques."""
    for tid in sorted(catalog.techniques if only is None else set(only) & set(catalog.techniques)):
        seen: dict[str, int] = {}
        for i, c in enumerate(catalog.techniques[tid].get("couplings") or []):
            if not isinstance(c, dict) or "kind" not in c:
                continue
            target = catalog.resolve(c["target"]) if c.get("target") else None
            prop = c.get("property") if not c.get("target") else None
            end = target or c.get("target") or prop or "?"
            base = f"{tid}/{c['kind']}/{end}"
            seen[base] = seen.get(base, 0) + 1
            n = seen[base]
            ref = base if n == 1 else f"{base}#{n}"
            rid = f"coupling-{tid}-{c['kind'].replace('_', '-')}-{end.replace('_', '-')}" + ("" if n == 1 else f"-{n}")
            yield CouplingRef(ref, rid, tid, i, target, prop, c)


def normalise_ref(catalog: Catalog, ref: str) -> str:
    """``ref`` with its technique ids resolved (ids never die: an old id or alias names the same coupling)."""
    head, sep, n = ref.partition("#")
    parts = head.split("/")
    if len(parts) == 3:
        parts[0] = catalog.resolve(parts[0]) or parts[0]
        parts[2] = catalog.resolve(parts[2]) or parts[2] if "-" in parts[2] or parts[2] in catalog.techniques else parts[2]
    return "/".join(parts) + (sep + n if sep else "")


def refined_refs(catalog: Catalog, rules: Any) -> dict[str, str]:
    """Coupling ref (normalised) -> the first hand rule (by id) that refines it."""
    out: dict[str, str] = {}
    for r in sorted(getattr(rules, "rules", rules), key=lambda r: r.id):
        for ref in getattr(r, "refines", None) or []:
            out.setdefault(normalise_ref(catalog, ref), r.id)
    return out


def _parameter_names(catalog: Catalog, tid: str) -> set[str]:
    return {p["name"] for p in catalog.techniques[tid].get("parameters") or [] if isinstance(p, dict) and "name" in p}


def _plain(text: str) -> str:
    """Catalog prose as a message template: braces would be read as placeholders."""
    return " ".join(str(text).replace("{", "(").replace("}", ")").split())


def compile_coupling(cp: CouplingRef, catalog: Catalog) -> Rule | None:
    """The rule a coupling compiles to (table in the module doc), or None when there is nothing to check."""
    kind, cond = cp.kind, cp.condition
    a = cp.technique
    if cond:
        from kg.engine.expr import ExprError, compile_expr
        try:
            compile_expr(cond, ("has",))
        except ExprError:
            return None  # a condition outside the language: `optkg validate` reports it (coupling-condition)
    match: list[dict[str, Any]] = [{"kind": "technique", "technique": a}]
    involves: list[str] = []
    if cp.target is not None:
        if cp.target == a:
            return None
        if kind == "requires":
            condition = f"not has('{cp.target}')" + (f" and not ({cond})" if cond else "")
            involves = [cp.target]
        elif cond and names_in(cond) & _parameter_names(catalog, cp.target):
            # the condition reads the target's own setting (speculative decoding x larger batches when
            # max_num_seqs > 64): it says which variant of the target is in play, so it is checked on
            # that setting whether or not the stack lists the target technique
            condition = cond
            involves = [cp.target]
        elif not cond and kind in EFFECT_KINDS:
            return None  # a standing effect between two techniques (the graph shows it): nothing to check
        else:
            match.append({"kind": "technique", "technique": cp.target})
            condition = cond
    elif cp.prop is not None:
        if not cond:
            return None
        condition = f"not ({cond})" if kind == "requires" else cond
    else:
        return None  # a target the catalog does not know: validate reports it
    name = lambda t: catalog.techniques[t].get("short_name") or catalog.techniques[t]["name"]  # noqa: E731
    other = name(cp.target) if cp.target else cp.prop
    c = cp.data
    if kind == "requires" and cp.target:
        head = f"{name(a)} requires {other}, which the stack does not use" + (f" (unless {cond})" if cond else "")
    elif kind == "requires":
        head = f"{name(a)} requires {cond}, which does not hold here"
    else:
        head = f"{name(a)} {VERB[kind]} {other}" + (f" when {cond}" if cond else "")
    sev = c.get("severity") or "info"
    return Rule(
        id=cp.rule_id, ruleset="check", title=f"{name(a)} {VERB[kind]} {other} (catalog coupling)",
        match=match, message=_plain(head) + ".", sources=list(c.get("sources") or []),
        severity=sev, tags=["coupling", kind], condition=condition,
        applies_to={"engines": list(c["engines"])} if c.get("engines") else {},
        mechanism=_plain(c.get("mechanism", "")), cost_dimension=c.get("to_dimension"),
        from_dimension=c.get("from_dimension"), involves=involves, coupling=cp.ref,
        file=catalog.files.get(a, ""), line=0,
    )


def coupling_rules(catalog: Catalog, refined: set[str] | None = None, only: set[str] | None = None) -> list[Rule]:
    """Generated rules for every checkable coupling (``only``: declared on these techniques), except those a
    hand rule refines (``refined`` refs)."""
    out = []
    for cp in iter_couplings(catalog, only):
        if refined and cp.ref in refined:
            continue
        r = compile_coupling(cp, catalog)
        if r is not None:
            out.append(r)
    return out


_COMBINED: dict[tuple, tuple[RuleSet, RuleSet]] = {}


def _cache_key(catalog: Catalog, rules: RuleSet) -> str | None:
    """Content key of the combined ruleset: this module's and kg.engine.rules' source, every technique
    file (path, size, mtime) and the hand rules' files."""
    import hashlib
    import os
    from kg.engine import rules as _rules_mod
    h = hashlib.sha256(b"optkg-coupling-rules-1")
    try:
        h.update(Path(__file__).read_bytes() + Path(_rules_mod.__file__).read_bytes())
        for f in sorted(set(catalog.files.values()) | {r.file for r in rules.rules}):
            st = os.stat(f)
            h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    except OSError:
        return None
    h.update(",".join(r.id for r in rules.rules).encode())
    return h.hexdigest()[:32]


def check_ruleset(catalog: Catalog, rules: RuleSet) -> RuleSet:
    """``rules`` (the hand-written check rules) plus the generated coupling rules, one RuleSet.

    Kept per process (keyed on ``_cache_key``); ``optkg check`` itself goes through ``ruleset_for``, which
    generates and compiles only the rules a stack's techniques can match.
    """
    key = _cache_key(catalog, rules)
    mem_key = (key, id(rules)) if key else (id(rules), tuple(r.id for r in rules.rules))
    got = _COMBINED.get(mem_key)
    if got is not None and got[0] is rules:
        return got[1]
    refined = set(refined_refs(catalog, rules))
    hand_ids = {r.id for r in rules.rules}
    gen = [r for r in coupling_rules(catalog, refined) if r.id not in hand_ids]
    combined = RuleSet(rules.kind, list(rules.rules) + gen, dict(rules.thresholds))
    if len(_COMBINED) > 8:
        _COMBINED.clear()
    _COMBINED[mem_key] = (rules, combined)
    return combined


_ACTIVE: dict[tuple, tuple[Any, RuleSet, list[Rule]]] = {}
# the (rules, catalog) pair _ACTIVE's entries were made for: each kg.cli.main() call loads a fresh catalog and
# ruleset, and entries kept for earlier pairs held every one of them alive (issue 26 #30: ~80 KB per call)
_ACTIVE_OWNER: list[Any] = [None]


def _can_match(r: Rule, techniques: set[str]) -> bool:
    return all(p.get("technique") in techniques for p in r.match if p.get("kind") == "technique")


def in_stage(catalog: Catalog, rule: Rule, stage: str) -> bool:
    """True when the coupling rule ``rule`` can concern a job of ``stage`` (``training``, ``inference`` ...):
    every technique it names lists ``stage`` in its coordinates' stages, and its property, if any, has no
    ``stages`` (catalog/properties.yaml) or lists ``stage``. ZeRO-2 x pipeline is a training coupling;
    pipeline parallelism x KV bytes per token is not."""
    for t in rule.techniques:
        stages = ((catalog.techniques.get(t) or {}).get("coordinates") or {}).get("stages")
        if stages and stage not in stages:
            return False
    end = (rule.coupling or "").partition("#")[0].split("/")[-1]
    prop = catalog.properties.get(end) if end not in catalog.techniques else None
    return not (prop and prop.get("stages") and stage not in prop["stages"])


def ruleset_for(catalog: Catalog, rules: RuleSet, techniques: set[str],
                stage: str | None = None) -> tuple[RuleSet, list[Rule]]:
    """(the check rules to run on a stack holding ``techniques``, the generated rules left out).

    ``rules`` is the hand-written check ruleset (the coupling rules are added here: the stack's techniques
    -> the part of the graph that touches them -> rules) or a combined one from ``check_ruleset``. A
    generated rule whose technique patterns name a technique the stack lacks can never match: it is
    neither generated nor compiled for this stack (from a combined ruleset it is returned as left out, to
    be reported not applicable). Hand rules always run. ``stage``: generate only the coupling rules
    ``in_stage`` (the training report passes ``training``). Kept per (ruleset, catalog, technique set,
    stage) in the process for the latest (ruleset, catalog) pair only, so a sweep compiles once and a process
    that loads a new catalog per call (``kg.cli.main``) keeps no old one."""
    owner = _ACTIVE_OWNER[0]
    if owner is None or owner[0] is not rules or owner[1] is not catalog:
        _ACTIVE.clear()  # another catalog or ruleset: what was kept for the last one is not asked for again
        _ACTIVE_OWNER[0] = (rules, catalog)
    key = (id(rules), id(catalog), frozenset(techniques), stage)
    got = _ACTIVE.get(key)
    if got is not None and got[0][0] is rules and got[0][1] is catalog:
        return got[1], got[2]
    if any(r.coupling for r in rules.rules):
        skipped = [r for r in rules.rules if r.coupling and not _can_match(r, techniques)]
        skip = {r.id for r in skipped}
        active = RuleSet(rules.kind, [r for r in rules.rules if r.id not in skip], rules.thresholds) if skip else rules
    else:
        refined = set(refined_refs(catalog, rules))
        hand_ids = {r.id for r in rules.rules}
        gen = [r for r in coupling_rules(catalog, refined, set(techniques))
               if r.id not in hand_ids and _can_match(r, techniques) and (stage is None or in_stage(catalog, r, stage))]
        active, skipped = RuleSet(rules.kind, list(rules.rules) + gen, rules.thresholds), []
    if len(_ACTIVE) > 64:
        _ACTIVE.clear()
    _ACTIVE[key] = ((rules, catalog), active, skipped)
    return active, skipped


def refine_problems(catalog: Catalog, rules: RuleSet) -> list[Problem]:
    """A hand rule's ``refines:`` names no coupling, or disagrees with it: its techniques do not include the
    coupling's technique, or one of them is an error and the other is not (code
    ``rule-refines``; severity error). ``refines`` may list several couplings (one rule checking them all)."""
    refs = {cp.ref: cp for cp in iter_couplings(catalog)}
    out = []
    for r, ref in [(r, ref) for r in rules.rules for ref in r.refines]:
        cp = refs.get(normalise_ref(catalog, ref))
        if cp is None:
            near = sorted(x for x in refs if x.startswith(ref.split("/")[0] + "/"))
            out.append(Problem(r.file, r.line, 1, "refines", f"rule '{r.id}': refines '{ref}', which is no "
                               f"catalog coupling" + (f" (that technique has: {', '.join(near[:6])})" if near else ""),
                               "rule-refines"))
            continue
        techs = {catalog.resolve(t) or t for t in r.techniques}
        if cp.technique not in techs:
            out.append(Problem(r.file, r.line, 1, "refines", f"rule '{r.id}' refines '{ref}' but does not name "
                               f"{cp.technique} (in match or involves)", "rule-refines"))
        sevs = [r.severity] if r.severity else []
        sevs += [b["severity"] for b in r.severity_bands]
        rule_error = any(s in ("error", "severe", "critical") for s in sevs)
        cp_error = (cp.data.get("severity") or "info") == "error"
        if rule_error != cp_error:
            out.append(Problem(r.file, r.line, 1, "refines",
                               f"rule '{r.id}' is {'an error' if rule_error else 'not an error'} but the coupling "
                               f"'{ref}' it refines is {'an error' if cp_error else cp.data.get('severity', 'info')}: "
                               "make them agree (one of the two is wrong)", "rule-refines"))
    return out


@dataclass
class GeneratedCase:
    """A fixture generated from a coupling rule's condition: the techniques in the stack, the engine, and
    the facts (a witness of the condition, kg.engine.witness) under which the rule must (not) fire."""

    rule_id: str
    expect_fire: bool
    techniques: list[str]
    engine: str | None
    facts: dict[str, Any]
    name: str


def generated_fixtures(rule: Rule) -> list[GeneratedCase]:
    """A must-fire and a must-not-fire case for a generated coupling rule, from its patterns and condition.

    Fire: the techniques its patterns name, on its first engine, with a witness that makes the condition
    true. Pass: the same techniques with a witness that makes it false; when none exists (an unconditional
    coupling, or ``requires`` whose condition is only ``not has(B)``), the stack that satisfies the
    coupling instead: without B for conflicts and effects, with B for ``requires``. Empty when no witness
    of the condition exists (a test then reports the rule)."""
    from kg.engine.witness import witness
    techs = [p["technique"] for p in rule.match if p.get("kind") == "technique"]
    engine = (rule.applies_to.get("engines") or [None])[0]
    out: list[GeneratedCase] = []

    def fns(present: list[str]) -> dict[str, Any]:
        s = set(present)
        return {"has": s.__contains__}

    fire = witness(rule.condition, True, functions=fns(techs)) if rule.condition else {}
    if fire is None:
        return []
    out.append(GeneratedCase(rule.id, True, techs, engine, fire, "generated: condition holds"))
    held = witness(rule.condition, False, functions=fns(techs)) if rule.condition else None
    if held is not None:
        out.append(GeneratedCase(rule.id, False, techs, engine, held, "generated: condition does not hold"))
    elif "requires" in rule.tags and rule.involves:
        with_b = techs + [t for t in rule.involves if t not in techs]
        out.append(GeneratedCase(rule.id, False, with_b, engine, fire, f"generated: with {rule.involves[0]}"))
    else:
        out.append(GeneratedCase(rule.id, False, techs[:1], engine, fire, "generated: without the target technique"))
    return out
