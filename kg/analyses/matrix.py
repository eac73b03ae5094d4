"""Technique x technique compatibility, derived from the coupling graph and the check rules.

The machine-made counterpart of the hand-kept feature matrices in the serving engines' docs. Each
unordered pair of techniques gets a mark:

- ``conflict`` (shown as ❌): the two cannot be combined - in the variant the condition names, on the
  engines listed (all engines when the list is empty).
- ``conditional`` (⚠️): whether they combine depends on the model, the hardware, the release, sizes
  relative to each other, or it only degrades something (a warning).
- ``ok`` (✅): no coupling or rule relates them; such cells are not listed.

Evidence comes from two places:

1. Couplings between two techniques in the graph (kg.knowledge.graph): ``conflicts_with`` and ``requires``.
   A ``requires`` coupling with a condition is ``conditional`` ("requires: <condition>"); one
   without a condition is compatible and adds nothing.
2. Check rules naming at least two techniques (``match`` technique patterns, then ``involves``). The
   first is the technique the rule constrains; it pairs with each of the others. Rules of severity
   info are notes, not compatibility, and are skipped.

A piece of evidence is a ``conflict`` when its severity is error, it has no upper version bound (an
``applies_to`` range such as ``<0.11.0`` means later releases fixed it), and its condition only picks a
variant of the techniques' own settings: every comparison in it sets a setting or parameter against
constants (``kv_cache_dtype == 'int8'``, ``pp_size > 1``). A condition that reads the model, the
hardware, the release or derived sizes (names in ``context_names``), or compares two settings with
each other (``dcp_size <= tp_size // ...``), makes it ``conditional``. So does a condition that
names kernel implementations (``attention_backend == 'CUTLASS_MLA'``, any ``*_backend`` setting,
``flash_attn_version``, ``selector_restricted``): the two techniques then clash on those backends
only and combine on the others, which is a condition, not an incompatibility of the techniques.

Engines: ``engine`` must be one the catalog or the rules know (``known_engines``: the
``catalog/engines/*.yaml`` tables, rules' ``applies_to.engines``, couplings' ``engines``), else
OptkgError. With an engine, only evidence that applies to it is used: rules and couplings whose
``engines`` list names it, and those without a list (engine-independent).

Per pair the worst mark wins. When a rule supports that mark, the rule's condition, engines and id
are shown (rules are the versioned, engine-specific knowledge); otherwise the coupling's. Sources of
every piece of evidence for the pair are listed. Output shape (``compatibility_matrix``)::

    {"schema_version": "1.0", "kind": "matrix", "techniques": [ids sorted],
     "cells": [{"a": id, "b": id, "mark": "conflict" | "conditional", "condition": str | None,
                "engines": [...], "rule": id | None, "sources": [{title, url, ...}]}]}

with ``a < b`` and each pair at most once, cells sorted by (a, b).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field, fields
from typing import Any, Iterable

from packaging.specifiers import SpecifierSet

from kg.knowledge.catalog import Catalog
from kg.engine.expr import compile_expr
from kg.inputs.modelcfg import ModelFacts
from kg.core.textsafe import WIDTH, fit_width, join_lines

SCHEMA_VERSION = "1.0"
MARK_ORDER = {"ok": 0, "conditional": 1, "conflict": 2}
MARK_SYMBOL = {"ok": "✅", "conditional": "⚠️", "conflict": "❌"}

# Names in the check namespace that describe the situation rather than a choice of the two techniques:
# derivations from the model and its KV layout (kg.analyses.check.stack_facts / engine_facts), hardware, release.
MODEL_DERIVED = {
    "attention", "is_moe", "has_sliding_window", "has_dense_mlp", "model_name", "dtype_effective", "dtype_explicit", "model_dtype", "dtype_loaded", "has_shared_experts", "weight_is_fp8_block",
    "intermediate_size_per_rank", "moe_intermediate_size_per_rank", "shared_expert_intermediate_size_per_rank",
    "weight_block_n", "weight_block_k", "checkpoint_quant_family", "weight_bytes_per_param",
    "kv_heads_per_rank", "kv_replication_tp", "kv_replication", "kv_bytes_per_token_model",
    "kv_bytes_per_token_per_gpu", "kv_bytes_per_token_per_gpu_unreplicated", "kv_bytes_per_token_per_gpu_effective",
    "valid_dcp_sizes", "dcp_possible", "max_useful_dcp_size", "valid_tp_sizes", "kv_element_bytes",
    "kv_budget_bytes_per_gpu", "kv_tokens_per_gpu", "kv_tokens_total", "max_concurrency",
    "kv_tokens_per_gpu_if_unreplicated", "weight_bytes_per_gpu_estimate",
}
RELEASE = {"engine", "engine_version", "engine_uses_v0", "vllm_use_v1"}


def context_names(catalog: Catalog) -> set[str]:
    """Names whose value comes from the model, hardware, workload or release (not from the techniques' settings)."""
    names = {f.name for f in fields(ModelFacts)} | MODEL_DERIVED | RELEASE | set(catalog.properties)
    return names | {"gpu", "gpu_vendor", "gpu_memory_gib", "gpu_compute_capability", "gpu_fp8_supported", "gpu_count"}


def _is_const(n: ast.AST) -> bool:
    if isinstance(n, ast.Constant):
        return True
    if isinstance(n, (ast.Tuple, ast.List, ast.Set)):
        return all(_is_const(x) for x in n.elts)
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
        return _is_const(n.operand)
    return False


def variant_only(condition: str | None, context: set[str]) -> bool:
    """True when ``condition`` only compares the techniques' own settings with constants (see module doc)."""
    if not condition:
        return True
    tree = compile_expr(condition, ("has",)).body

    def ok(n: ast.AST) -> bool:
        if isinstance(n, ast.BoolOp):
            return all(ok(v) for v in n.values)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            return ok(n.operand)
        if isinstance(n, ast.Name):
            return n.id not in context
        if isinstance(n, ast.Call):  # has('technique-id')
            return isinstance(n.func, ast.Name) and n.func.id == "has" and all(_is_const(a) for a in n.args)
        if isinstance(n, ast.Compare):
            parts = [n.left, *n.comparators]
            names = [p for p in parts if isinstance(p, ast.Name)]
            consts = [p for p in parts if _is_const(p)]
            return len(names) == 1 and len(consts) == len(parts) - 1 and names[0].id not in context
        return False

    return ok(tree)


SELECTOR_SUFFIXES = ("_backend",)
SELECTOR_PREFIXES = ("flash_attn_version",)


def _is_selector(name: str) -> bool:
    return name.endswith(SELECTOR_SUFFIXES) or name.startswith(SELECTOR_PREFIXES)


def selector_restricted(condition: str | None) -> bool:
    """True when ``condition`` compares a kernel-implementation selector (``attention_backend``, any
    ``*_backend``, ``flash_attn_version``): the evidence holds on some backends only (see module doc)."""
    if not condition:
        return False
    tree = compile_expr(condition, ("has",)).body
    for n in ast.walk(tree):
        if isinstance(n, ast.Compare):
            if any(isinstance(x, ast.Name) and _is_selector(x.id) for x in [n.left, *n.comparators]):
                return True
    return False


def known_engines(catalog: Catalog, rules: Iterable[Any]) -> list[str]:
    """Engines the catalog or the rules name: catalog/engines/*.yaml, rules' applies_to, couplings' engines."""
    names: set[str] = set()
    folder = catalog.root / "engines"
    if folder.is_dir():
        for f in sorted(folder.glob("*.yaml")):
            e = _table_engine(f)
            if isinstance(e, str):
                names.add(e)
    for r in rules:
        names.update((getattr(r, "applies_to", None) or {}).get("engines") or [])
    for t in catalog.techniques.values():
        for cp in t.get("couplings") or []:
            if isinstance(cp, dict):
                names.update(cp.get("engines") or [])
    return sorted(names)


_ENGINE_OF: dict[tuple[str, int, int], Any] = {}


def _table_engine(f) -> Any:
    """The ``engine:`` of one flag table, read once per file version (path, size, mtime): the site export
    builds a matrix per engine release, and re-parsing the tables was 80 % of each call."""
    try:
        st = f.stat()
    except OSError:
        return None
    key = (str(f), st.st_size, st.st_mtime_ns)
    if key not in _ENGINE_OF:
        from kg.core.yamlio import load_yaml
        try:
            e = (load_yaml(f).data or {}).get("engine")
        except Exception:  # noqa: BLE001 -- a broken table is `optkg validate`'s finding, not ours
            e = None
        _ENGINE_OF[key] = e
    return _ENGINE_OF[key]


def _has_upper_bound(spec: str | None) -> bool:
    if not spec:
        return False
    return any(s.operator in ("<", "<=", "==", "~=", "===") for s in SpecifierSet(spec))


@dataclass
class _Evidence:
    """Why a matrix cell has its mark: the rule or coupling, its condition, engines and sources."""

    a: str
    b: str
    mark: str
    condition: str | None
    engines: list[str]
    rule: str | None
    sources: list[dict[str, Any]] = field(default_factory=list)
    from_coupling: bool = False  # the coupling itself (its rule is generated or a refining hand rule)


def _pair(x: str, y: str) -> tuple[str, str]:
    return (x, y) if x < y else (y, x)


def _coupling_evidence(catalog: Catalog, context: set[str], rules: Iterable[Any] = ()) -> list[_Evidence]:
    """Evidence from technique-technique couplings. Each names the check rule that evaluates it: the hand
    rule that ``refines`` it, else the rule generated from it (kg.knowledge.couplings), so every cell of
    the matrix is a rule ``optkg check`` runs."""
    from kg.knowledge.couplings import iter_couplings
    from kg.knowledge.graph import build_graph
    g = build_graph(catalog)
    from kg.knowledge.couplings import refined_refs
    from kg.knowledge.couplings import normalise_ref
    rules = list(rules)
    refiners = refined_refs(catalog, rules)
    rule_of = {f"{cp.technique}#{cp.index}": refiners.get(cp.ref, cp.rule_id) for cp in iter_couplings(catalog)}
    # a coupling a hand rule refines is that rule's evidence (_rule_evidence), with its engines and releases:
    # the coupling itself names no release, so shown on its own it would call a conflict that a release fixed
    # (speculative decoding x PP: vLLM < 0.10.0 only) or never had a conflict at all
    spoken = {normalise_ref(catalog, ref) for r in rules for ref in (getattr(r, "refines", None) or [])
              if len({catalog.resolve(t) or t for t in r.techniques}) >= 2}
    ref_of = {f"{cp.technique}#{cp.index}": cp.ref for cp in iter_couplings(catalog)}
    out = []
    for u, v, key, d in sorted(g.edges(keys=True, data=True), key=lambda e: (e[0], e[1], e[2])):
        if g.nodes[u]["type"] != "technique" or g.nodes[v]["type"] != "technique" or u == v:
            continue
        if ref_of.get(key) in spoken:
            continue
        kind, cond = d.get("kind"), d.get("condition")
        if kind == "conflicts_with":
            hard = d.get("severity") == "error" and variant_only(cond, context) and not selector_restricted(cond)
            mark, text = ("conflict" if hard else "conditional"), cond
        elif kind == "requires" and cond:
            mark, text = "conditional", f"requires: {cond}"
        else:
            continue
        a, b = _pair(g.nodes[u]["id"], g.nodes[v]["id"])
        out.append(_Evidence(a, b, mark, text, sorted(d.get("engines") or []), rule_of.get(key),
                             list(d.get("sources") or []), from_coupling=True))
    return out


def _worst_severity(rule) -> str | None:
    sevs = [rule.severity] if rule.severity else []
    sevs += [b["severity"] for b in rule.severity_bands]
    order = {"info": 1, "none": 0, "low": 2, "warning": 3, "moderate": 3, "error": 4, "severe": 4, "critical": 5}
    return max(sevs, key=lambda s: order.get(s, 0)) if sevs else None


def _rule_evidence(rules: Iterable[Any], catalog: Catalog, context: set[str],
                   version: str | None = None, engine: str | None = None) -> list[_Evidence]:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version
    out = []
    for r in rules:
        if getattr(r, "coupling", None):
            continue  # generated from a coupling: _coupling_evidence carries it
        techs = []
        for t in r.techniques:
            tid = catalog.resolve(t) or t
            if tid not in techs:
                techs.append(tid)
        sev = _worst_severity(r)
        if len(techs) < 2 or sev in (None, "none", "info"):
            continue
        raw = (r.applies_to or {}).get("versions")
        if isinstance(raw, dict):  # one range per engine (kg.engine.scope): the asked engine's, else all of them
            spec = raw.get(engine) if engine else None
            if not engine and any(_has_upper_bound(v) for v in raw.values()):
                spec = ",".join(v for v in raw.values() if _has_upper_bound(v))
        else:
            spec = raw
        if version and spec and Version(version) not in SpecifierSet(spec):
            continue  # the rule does not hold on the release asked about
        # an upper bound means "old releases only": a conflict for everyone only when the release is known
        bounded = _has_upper_bound(spec) and not version
        hard = sev in ("error", "severe", "critical") and not bounded and \
            variant_only(r.condition, context) and not selector_restricted(r.condition)
        text = r.condition
        if spec:
            text = f"{text} [{', '.join(r.applies_to.get('engines') or ['engine'])} {spec}]" if text else \
                f"[{', '.join(r.applies_to.get('engines') or ['engine'])} {spec}]"
        anchor = techs[0]
        for other in techs[1:]:
            a, b = _pair(anchor, other)
            out.append(_Evidence(a, b, "conflict" if hard else "conditional", text,
                                 sorted((r.applies_to or {}).get("engines") or []), r.id, list(r.sources)))
    return out


def compatibility_matrix(catalog: Catalog, rules: Any, engine: str | None = None,
                         version: str | None = None) -> dict[str, Any]:
    """The technique x technique matrix (shape in the module doc), for one ``engine`` or all.

    ``version`` (with ``engine``): the engine release, e.g. '0.10.2'; rules whose version range
    excludes it are left out, and version-bounded rules that include it count as hard evidence.

    ``rules`` is the check RuleSet (or any iterable of kg.engine.rules.Rule). With ``engine``, evidence that
    names other engines only is left out. Raises OptkgError for an engine nobody names
    (``known_engines``). Deterministic for equal inputs.
    """
    from kg.core.errors import OptkgError
    context = context_names(catalog)
    rule_list = list(getattr(rules, "rules", rules) or [])
    if engine:
        known = known_engines(catalog, rule_list)
        if engine not in known:
            from difflib import get_close_matches
            near = get_close_matches(engine, known, n=1)
            raise OptkgError(f"--engine: unknown engine '{engine}'" + (f"; did you mean '{near[0]}'?" if near else "")
                             + f" (known: {', '.join(known)})")
    if version:
        from packaging.version import InvalidVersion, Version
        if not engine:
            raise OptkgError("--engine-version needs --engine")
        try:
            Version(version)
        except InvalidVersion:
            raise OptkgError(f"--engine-version: '{version}' is not a version number (e.g. 0.10.2)") from None
    evidence = _coupling_evidence(catalog, context, rule_list) + _rule_evidence(rule_list, catalog, context, version, engine)
    if engine:
        evidence = [e for e in evidence if not e.engines or engine in e.engines]
    by_pair: dict[tuple[str, str], list[_Evidence]] = {}
    for e in evidence:
        if e.a in catalog.techniques and e.b in catalog.techniques:
            by_pair.setdefault((e.a, e.b), []).append(e)
    cells = []
    for (a, b) in sorted(by_pair):
        evs = by_pair[(a, b)]
        top = max(MARK_ORDER[e.mark] for e in evs)
        best = [e for e in evs if MARK_ORDER[e.mark] == top]
        # hand rules (versioned, engine-specific) speak for the cell before the couplings' generated rules
        ruled = sorted((e for e in best if e.rule), key=lambda e: (e.from_coupling, e.rule or ""))
        shown = [e for e in ruled if not e.from_coupling] or best
        conds: list[str] = []
        for e in shown:
            if e.condition and e.condition not in conds:
                conds.append(e.condition)
        engines: list[str] = []
        if not any(not e.engines for e in shown):
            engines = sorted({x for e in shown for x in e.engines})
        sources: list[dict[str, Any]] = []
        seen = set()
        for e in sorted(evs, key=lambda e: (e.from_coupling, e.rule or "")):
            for s in e.sources:
                if s.get("url") not in seen:
                    seen.add(s.get("url"))
                    sources.append(dict(s))
        cells.append({"a": a, "b": b, "mark": shown[0].mark,
                      "condition": " | ".join(conds) if conds else None,
                      "engines": engines, "rule": ruled[0].rule if ruled else None, "sources": sources})
    return {"schema_version": SCHEMA_VERSION, "kind": "matrix", "techniques": sorted(catalog.techniques), "cells": cells}


def render_matrix_text(m: dict[str, Any], names: dict[str, str] | None = None, grid: bool = True) -> str:
    """A readable matrix: a grid over the techniques that appear in a non-ok cell, then every cell with its condition."""
    names = names or {}
    cells = m["cells"]
    involved = sorted({c["a"] for c in cells} | {c["b"] for c in cells})
    lines = [f"optkg matrix: {len(cells)} non-ok pair(s) among {len(m['techniques'])} techniques "
             f"({sum(c['mark'] == 'conflict' for c in cells)} {MARK_SYMBOL['conflict']} conflict, "
             f"{sum(c['mark'] == 'conditional' for c in cells)} {MARK_SYMBOL['conditional']} conditional; "
             f"every other pair {MARK_SYMBOL['ok']})"]
    if grid and involved:
        lines += _grid_panels(involved, cells)
    lines.append("")
    for c in cells:
        eng = f" ({', '.join(c['engines'])})" if c["engines"] else ""
        label = lambda t: names.get(t, t)  # noqa: E731
        lines.append(f"{MARK_SYMBOL[c['mark']]} {label(c['a'])} x {label(c['b'])}{eng}"
                     + (f"  [rule {c['rule']}]" if c["rule"] else ""))
        if c["condition"]:
            lines.append(f"      when: {' '.join(c['condition'].split())}")
        for s in c["sources"][:2]:
            lines.append(f"      source: {s.get('title', '')} <{s.get('url', '')}>")
    return fit_width(join_lines(lines)) + "\n"


def _grid_panels(involved: list[str], cells: list[dict[str, Any]]) -> list[str]:
    """The grid over ``involved``, cut into panels of columns so that no line passes WIDTH (100) columns; rows and
    columns are numbered, and the numbers are named once below the panels."""
    idx = {t: i + 1 for i, t in enumerate(involved)}
    mark = {}
    for c in cells:
        ch = "X" if c["mark"] == "conflict" else "~"
        mark[(c["a"], c["b"])] = mark[(c["b"], c["a"])] = ch
    w = len(str(len(involved)))
    per_panel = max(1, (WIDTH - (w + 2)) // (w + 1))
    out = ["", "grid (X conflict, ~ conditional, . ok):"]
    for start in range(0, len(involved), per_panel):
        cols = involved[start:start + per_panel]
        if start:
            out.append("")
        out.append(" " * (w + 2) + " ".join(str(idx[u]).rjust(w) for u in cols))
        for t in involved:
            row = " ".join((mark.get((t, u), "." if t != u else " ")).rjust(w) for u in cols)
            out.append(f"{str(idx[t]).rjust(w)}  {row}".rstrip())
    out.append("")
    names = [f"{str(idx[t]).rjust(w)} {t}" for t in involved]
    colw = max(len(n) for n in names) + 2
    per_line = max(1, WIDTH // colw)
    rows = -(-len(names) // per_line)
    for r in range(rows):
        out.append("".join(names[r + k * rows].ljust(colw) for k in range(per_line) if r + k * rows < len(names)).rstrip())
    return out
