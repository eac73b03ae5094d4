"""Checks across catalog files: coupling targets and properties exist, no self-coupling, deprecated
entries name an existing ``replaced_by``, a coupling and its reverse do not contradict each other,
names and aliases unique, coupling conditions name known facts.
"""
from __future__ import annotations

import contextlib
from typing import Any

from kg.core import paths
from kg.core.errors import OptkgError, Problem
from kg.core.yamlio import YamlDoc, load_yaml
from kg.knowledge.checks import problem
from kg.knowledge.filechecks import _near


def _list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


_CONTRADICTS = {("requires", "conflicts_with"), ("conflicts_with", "requires"),
                ("mitigates", "amplifies"), ("amplifies", "mitigates"), ("replaces", "replaces")}


def _cross_checks(techniques: dict[str, dict[str, Any]], docs: dict[str, YamlDoc],
                  properties: dict[str, Any], hardware: dict[str, Any]) -> list[Problem]:
    out: list[Problem] = []
    alias_owner: dict[str, str] = {}
    ids_lower = {t.lower(): t for t in techniques}
    # names and aliases shared by several entries are reported on every one of them, so that
    # validating only the changed file still shows the clash
    name_users: dict[str, list[str]] = {}
    alias_users: dict[str, list[str]] = {}
    for tid, t in sorted(techniques.items()):
        if isinstance(t.get("name"), str) and t["name"].strip():
            name_users.setdefault(t["name"].strip().lower(), []).append(tid)
        for a in dict.fromkeys(x.lower() for x in _list(t.get("aliases")) if isinstance(x, str)):
            alias_users.setdefault(a, []).append(tid)
    for tid, t in sorted(techniques.items()):
        doc = docs[tid]
        if isinstance(t.get("name"), str) and t["name"].strip():
            others = [o for o in name_users[t["name"].strip().lower()] if o != tid]
            if others:
                line, col = doc.where(("name",))
                where = ", ".join(f"'{o}' ({docs[o].path})" for o in others)
                out.append(problem(doc.path, line, col, "name", f"name '{t['name']}' is also used by {where}",
                                   "duplicate-name", found=t["name"],
                                   hint=f"two entries with one name are one technique: merge them, or rename this one"))
        for i, a in enumerate(_list(t.get("aliases"))):
            if not isinstance(a, str):
                continue
            key = a.lower()
            line, col = doc.where(("aliases", i))
            others = [o for o in alias_users.get(key, []) if o != tid]
            if key in ids_lower and ids_lower[key] != tid:
                out.append(problem(doc.path, line, col, f"aliases[{i}]", f"alias '{a}' is the id of another technique",
                                   "alias-clash", found=a, hint=f"an alias must not shadow an id; remove it (or merge with '{ids_lower[key]}')"))
            elif others:
                where = ", ".join(f"'{o}' ({docs[o].path})" for o in others)
                out.append(problem(doc.path, line, col, f"aliases[{i}]", f"alias '{a}' is also an alias of {where}",
                                   "duplicate-alias", found=a,
                                   hint="aliases are unique across the catalog: one name resolves to one technique"))
            if key not in ids_lower:
                alias_owner.setdefault(key, tid)

    def resolve(name: str) -> str | None:
        if name in techniques:
            return name
        return alias_owner.get(name.lower()) or ids_lower.get(name.lower())

    for tid, t in sorted(techniques.items()):
        doc = docs[tid]
        rb = t.get("replaced_by")
        if isinstance(rb, str):
            line, col = doc.where(("replaced_by",))
            if t.get("status") != "deprecated":
                out.append(problem(doc.path, line, col, "replaced_by", "replaced_by is set but status is not deprecated",
                                   "replaced-by-not-deprecated", found=rb,
                                   hint="set status: deprecated (the entry stays so its id resolves), or remove replaced_by"))
            target = resolve(rb)
            if target is None:
                near = _near(rb, techniques)
                out.append(problem(doc.path, line, col, "replaced_by", f"replaced_by '{rb}' is not a technique id",
                                   "dangling-replaced-by", found=rb, expected="the id of the technique that supersedes this one",
                                   hint=("did you mean " + " or ".join(repr(n) for n in near) + "?") if near else
                                   "add the successor first, or fix the id"))
            elif target == tid:
                out.append(problem(doc.path, line, col, "replaced_by", "an entry cannot be replaced by itself",
                                   "dangling-replaced-by", found=rb))
            elif techniques[target].get("status") == "deprecated":
                out.append(problem(doc.path, line, col, "replaced_by", f"replaced_by '{rb}' is itself deprecated",
                                   "replaced-by-deprecated", found=rb,
                                   hint=f"point at '{techniques[target].get('replaced_by') or '?'}' instead"))
        for i, c in enumerate(_list(t.get("couplings"))):
            if not isinstance(c, dict):
                continue
            tgt = c.get("target")
            if isinstance(tgt, str):
                rid = resolve(tgt)
                at = ("couplings", i, "target")  # doc.where(at) only for a problem: a deep field's line costs a parse
                if rid == tid:
                    out.append(problem(doc.path, *doc.where(at), f"couplings[{i}].target", "a technique cannot couple with itself",
                                       "self-coupling", found=tgt,
                                       hint="couple with the other technique, or with a property (property: <id>) the effect goes through"))
                elif rid is None:
                    near = _near(tgt, list(techniques) + sorted(alias_owner))
                    out.append(problem(doc.path, *doc.where(at), f"couplings[{i}].target", f"coupling target '{tgt}' does not exist",
                                       "dangling-target", found=tgt, expected="an existing technique id or alias",
                                       hint=("did you mean " + " or ".join(repr(n) for n in near) + "?") if near else
                                       "add the technique first (optkg new <id>), or fix the id"))
                else:
                    if rid != tgt:
                        out.append(problem(doc.path, *doc.where(at), f"couplings[{i}].target",
                                           f"'{tgt}' is an old id or alias of '{rid}'; it still resolves", "alias-reference",
                                           found=tgt, expected=rid, hint=f"write target: {rid}"))
                    if techniques[rid].get("status") == "deprecated" and rid != tid:
                        succ = techniques[rid].get("replaced_by")
                        out.append(problem(doc.path, *doc.where(at), f"couplings[{i}].target", f"'{rid}' is deprecated",
                                           "deprecated-target", found=tgt, expected=succ or "",
                                           hint=f"couple with its replacement '{succ}'" if succ else "couple with its replacement"))
            prop = c.get("property")
            if isinstance(prop, str) and prop not in properties:
                line, col = doc.where(("couplings", i, "property"))
                near = _near(prop, properties)
                out.append(problem(doc.path, line, col, f"couplings[{i}].property", f"property '{prop}' is not in properties.yaml",
                                   "dangling-property", found=prop,
                                   hint=("did you mean " + " or ".join(repr(n) for n in near) + "?") if near else
                                   "add it to catalog/properties.yaml with a description",
                                   valid_values=tuple((p, str(properties[p].get("description", ""))) for p in near)))
    # a coupling and its reverse (or two couplings on one pair) must not contradict each other
    kinds: dict[tuple[str, str], list[tuple[Any, int, bool]]] = {}
    for tid, t in techniques.items():
        for i, c in enumerate(_list(t.get("couplings"))):
            if isinstance(c, dict) and isinstance(c.get("target"), str):
                tgt = resolve(c["target"])
                if tgt is None or tgt == tid:
                    continue
                kinds.setdefault((tid, tgt), []).append((c.get("kind"), i, bool(c.get("condition"))))
    for (a, b), ks in sorted(kinds.items()):
        doc = docs[a]
        for k1, i, cond1 in ks:
            if cond1:
                continue
            for k2, j, cond2 in kinds.get((b, a), []):
                if (k1, k2) in _CONTRADICTS and not cond2:
                    line, col = doc.where(("couplings", i, "kind"))
                    ol, _ = docs[b].where(("couplings", j, "kind"))
                    out.append(problem(doc.path, line, col, f"couplings[{i}].kind",
                                       f"'{a}' {k1} '{b}' but '{b}' {k2} '{a}' ({docs[b].path}:{ol})", "contradicting-couplings",
                                       found=k1, hint="add a condition that separates the two cases, or fix one side"))
            for k2, j, cond2 in ks:
                if j > i and not cond2 and {k1, k2} == {"requires", "conflicts_with"}:
                    line, col = doc.where(("couplings", j, "kind"))
                    out.append(problem(doc.path, line, col, f"couplings[{j}].kind",
                                       f"'{a}' both requires and conflicts with '{b}' (couplings[{i}] and couplings[{j}])",
                                       "contradicting-couplings", found=k2,
                                       hint="add a condition that separates the two cases, or remove one"))
    return out


def _known_fact_names(techniques: dict[str, dict[str, Any]], properties: dict[str, Any]) -> set[str]:
    """Names a coupling condition may read: technique parameter names, property ids, stack settings
    (kg.knowledge.vocabulary: BASE_SETTINGS, PARALLEL_DEFAULTS), model facts (MODEL_FACT_NAMES: the
    fields and properties of kg.inputs.modelcfg.ModelFacts) and every name the rules read."""
    from kg.engine.expr import ExprError, names_in
    from kg.knowledge.vocabulary import BASE_SETTINGS, MODEL_FACT_NAMES, PARALLEL_DEFAULTS

    known: set[str] = set(properties) | set(BASE_SETTINGS) | set(PARALLEL_DEFAULTS)
    known |= set(MODEL_FACT_NAMES)
    for t in techniques.values():
        for prm in _list(t.get("parameters")):
            if isinstance(prm, dict) and isinstance(prm.get("name"), str):
                known.add(prm["name"])
    for f in sorted(paths.rules_dir().glob("*.yaml")):
        try:
            data = load_yaml(f).data
        except OptkgError:
            continue
        for r in _list(data.get("rules") if isinstance(data, dict) else None):
            if not isinstance(r, dict):
                continue
            texts = [r.get("condition")] + list((r.get("numbers") or {}).values() if isinstance(r.get("numbers"), dict) else [])
            texts += [b.get("when") for b in _list(r.get("severity_bands")) if isinstance(b, dict)]
            if isinstance(r.get("numbers"), dict):
                known |= {k for k in r["numbers"] if isinstance(k, str)}
            for text in texts:
                if isinstance(text, str) and text.strip():
                    with contextlib.suppress(ExprError):  # a broken rule expression is reported by its own check
                        known |= names_in(text)
    return known


def _typo_distance(a: str, b: str) -> int:
    """Characters inserted, deleted or replaced to turn ``a`` into ``b`` (difflib opcodes).

    A typo is 1-2 characters ('tp_sizee' -> 'tp_size' is 1); a different fact usually differs
    by a whole word ('max_power_limit_watts' vs 'power_limit_watts' is 4), so it is not flagged."""
    from difflib import SequenceMatcher
    return sum(max(i2 - i1, j2 - j1) for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b).get_opcodes() if op != "equal")


def _near_facts(name: str, known_sorted: list[str]) -> list[str]:
    """``[k for k in difflib.get_close_matches(name, known_sorted, n=5, cutoff=0.6) if _typo_distance(name, k) <= 2]``
    as far as its first element goes (the one reported), without rating every known name against
    ``name`` (~45 ms per name over ~2,000 names: 2 s of every uncached catalog load).

    A name within typo distance 2 is within 2 characters of ``name``'s length, so the best such
    name B (highest (ratio, name), as get_close_matches ranks) is found among those alone. The
    answer above starts with B when B is among the top 5 of all names rated >= 0.6, else it is
    empty; every name that outranks B rates at least B's ratio, so get_close_matches with B's
    ratio as the cutoff returns the same top 5 down to B and rates only names that can."""
    from difflib import SequenceMatcher, get_close_matches

    s = SequenceMatcher()
    s.set_seq2(name)
    best: tuple[float, str] | None = None
    for k in known_sorted:
        if abs(len(k) - len(name)) > 2:
            continue
        s.set_seq1(k)
        q = s.quick_ratio()  # 2 x (characters in common, an upper bound of the matches) / total length
        # within distance 2 at least max(len) - 2 characters match (every edit is one of them)
        if q >= 0.6 and q * (len(k) + len(name)) / 2 >= max(len(k), len(name)) - 2 - 1e-9:
            r = s.ratio()
            if r >= 0.6 and (best is None or (r, k) > best) and _typo_distance(name, k) <= 2:
                best = (r, k)
    if best is None:
        return []
    return [k for k in get_close_matches(name, known_sorted, n=5, cutoff=best[0]) if _typo_distance(name, k) <= 2]


def _condition_problems(techniques: dict[str, dict[str, Any]], docs: dict[str, YamlDoc],
                        properties: dict[str, Any]) -> list[Problem]:
    """Every coupling ``condition`` parses (error ``coupling-condition``); a name it reads that is
    unknown but close to a known fact name is reported (warning ``coupling-unknown-fact``)."""
    from kg.engine.expr import ExprError, compile_expr, names_in

    out: list[Problem] = []
    known: set[str] | None = None
    for tid, t in sorted(techniques.items()):
        doc = docs[tid]
        for i, c in enumerate(_list(t.get("couplings"))):
            if not isinstance(c, dict) or c.get("condition") is None:
                continue
            text = c["condition"]
            where = f"couplings[{i}].condition"
            if not isinstance(text, str):
                continue  # the schema reports the type
            try:
                compile_expr(text, ("has",))
            except ExprError as e:
                line, col = doc.where(("couplings", i, "condition"))
                out.append(problem(doc.path, line, col, where, f"condition {text!r} does not parse: {e}",
                                   "coupling-condition", found=text,
                                   expected="an expression such as: tp_size > 1 and kv_cache_dtype == 'fp8'",
                                   hint="conditions use the rule expression language (kg/engine/expr.py): names, numbers, "
                                        "and/or/not, comparisons, arithmetic"))
                continue
            if known is None:
                known = _known_fact_names(techniques, properties)
                known_sorted = sorted(known)
                typo_of: dict[str, list[str]] = {}  # unknown name -> close known names (difflib is slow: once per name)
            for name in sorted(names_in(text) - known):
                if name not in typo_of:
                    typo_of[name] = _near_facts(name, known_sorted)
                near = typo_of[name]
                if near:
                    line, col = doc.where(("couplings", i, "condition"))
                    out.append(problem(doc.path, line, col, where, f"unknown fact '{name}' (did you mean '{near[0]}'?)",
                                       "coupling-unknown-fact", found=name, expected=near[0],
                                       hint=f"write {near[0]}"))
    return out
