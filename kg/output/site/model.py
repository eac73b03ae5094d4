"""The explorer's data model: everything the site's pages show, gathered from the analyses' Python API.

Nothing here computes knowledge of its own. Sources:

- techniques, axes, properties: the loaded ``Catalog`` (kg.knowledge.catalog);
- couplings in and out: the coupling graph (kg.knowledge.graph.build_graph);
- rules that involve a technique: the check ruleset with the rules generated from couplings
  (kg.knowledge.couplings.check_ruleset) plus the diagnose and fit rulesets, matched on
  ``Rule.techniques`` and ``Rule.involves``;
- the coordinate map cells: kg.output.diagrams.map.map_cells; empty cells' ranks: kg.analyses.gaps.find_gaps;
- the compatibility matrix: kg.analyses.matrix.compatibility_matrix for all engines, per engine and per
  engine release (``release_groups``);
- which techniques an engine's launch flags turn on, per release: the flag tables
  ``catalog/engines/<engine>.yaml`` (``technique`` / ``technique_by_value`` with ``since`` / ``until``,
  and ``default_techniques``) and the release lists ``catalog/engines/releases/<engine>.yaml``.

``site_model(catalog, rules_dir)`` returns a plain dict (JSON-ready, sorted, deterministic).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

KINDS = ("causes", "amplifies", "mitigates", "conflicts_with", "requires", "replaces")


def _v(text: Any) -> Version | None:
    try:
        return Version(str(text))
    except InvalidVersion:
        return None


def engine_availability(catalog) -> dict[str, dict[str, Any]]:
    """Per engine: its known releases and, per technique its flags (or defaults) turn on, the releases
    (indices into ``releases``) at which that holds. Engines without a release list get ``releases: []``
    and ``techniques: {id: []}`` meaning "some flag of the table turns it on" (no release data)."""
    from kg.inputs.effective import known_releases
    from kg.inputs.stack import _engine_tables
    out: dict[str, dict[str, Any]] = {}
    for engine, table in sorted(_engine_tables().items()):
        releases = [str(r) for r in known_releases(engine) or []]
        vers = [_v(r) for r in releases]
        spans: dict[str, list[tuple[Version | None, Version | None]]] = {}
        for tid in table.get("default_techniques") or []:
            spans.setdefault(tid, []).append((None, None))
        for f in table.get("flags") or []:
            techs = [f["technique"]] if f.get("technique") else []
            techs += list((f.get("technique_by_value") or {}).values())
            for tid in techs:
                spans.setdefault(tid, []).append((_v(f["since"]) if f.get("since") else None,
                                                  _v(f["until"]) if f.get("until") else None))
        techs: dict[str, list[int]] = {}
        for tid in sorted(spans):
            rid = catalog.resolve(tid)
            if rid is None:
                continue
            idx = sorted({i for i, v in enumerate(vers) if v is not None and any(
                (lo is None or v >= lo) and (hi is None or v < hi) for lo, hi in spans[tid])})
            if releases and not idx:
                continue  # the flag exists in no release optkg knows
            techs[rid] = sorted(set(techs.get(rid) or []) | set(idx))
        out[engine] = {"releases": releases, "techniques": techs}
    return out


def _rule_spec(rule, engine: str) -> str | None:
    raw = (rule.applies_to or {}).get("versions")
    if isinstance(raw, dict):
        return raw.get(engine)
    return raw


def release_groups(rules, engine: str, releases: list[str]) -> list[list[str]]:
    """Consecutive releases of ``engine`` that every version range of the check rules treats alike, so
    that ``compatibility_matrix(..., engine, release)`` is the same for all of a group (the matrix reads
    the release only through those ranges: kg.analyses.matrix._rule_evidence). One matrix per group."""
    specs = []
    for r in rules:
        if getattr(r, "coupling", None) or len(set(r.techniques)) < 2:
            continue  # the matrix reads only hand rules naming two or more techniques (more here only splits groups)
        s = _rule_spec(r, engine)
        if s:
            try:
                specs.append(SpecifierSet(s))
            except Exception:  # noqa: BLE001 -- an invalid range is the rule validator's finding
                continue
    groups: list[list[str]] = []
    last = None
    for rel in releases:
        v = _v(rel)
        sig = tuple(v in s for s in specs) if v is not None else ("?", rel)
        if groups and sig == last:
            groups[-1].append(rel)
        else:
            groups.append([rel])
        last = sig
    return groups


def _edge(g, u: str, v: str, key: str, d: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "source": u, "target": v, "kind": d.get("kind"), "condition": d.get("condition"),
            "mechanism": d.get("mechanism") or "", "severity": d.get("severity") or "info",
            "from_dimension": d.get("from_dimension"), "to_dimension": d.get("to_dimension"),
            "engines": list(d.get("engines") or []),
            "sources": [{"title": s.get("title") or s.get("url") or "", "url": s.get("url") or ""}
                        for s in d.get("sources") or []]}


def _rules_by_technique(catalog, rules_dir: Path | None) -> dict[str, list[dict[str, Any]]]:
    from kg.engine.rules import load_ruleset
    from kg.knowledge.couplings import check_ruleset
    sets = [check_ruleset(catalog, load_ruleset("check", rules_dir))]
    for kind in ("diagnose", "fit"):
        try:
            sets.append(load_ruleset(kind, rules_dir))
        except Exception:  # noqa: BLE001 -- a rules folder without that kind: no such rules to show
            continue
    root = Path(rules_dir) if rules_dir else None
    out: dict[str, list[dict[str, Any]]] = {}
    for rs in sets:
        for r in rs.rules:
            ids = []
            for t in list(r.techniques) + list(r.involves or []):
                tid = catalog.resolve(t)
                if tid and tid not in ids:
                    ids.append(tid)
            if not ids:
                continue
            where = ""
            if r.coupling:
                where = f"catalog/techniques/{Path(r.file).name}" if r.file else "catalog coupling"
            elif r.file:
                p = Path(r.file)
                try:
                    where = f"rules/{p.resolve().relative_to(root.resolve() if root else _rules_root()).as_posix()}:{r.line}"
                except ValueError:
                    where = f"{p.name}:{r.line}"
            entry = {"id": r.id, "ruleset": r.ruleset, "title": r.title, "severity": r.severity or
                     (r.severity_bands[0]["severity"] if r.severity_bands else ""),
                     "condition": r.condition, "where": where, "coupling": r.coupling,
                     "techniques": ids, "applies_to": _applies(r)}
            for tid in ids:
                out.setdefault(tid, []).append(entry)
    return {k: sorted(v, key=lambda e: (e["ruleset"], e["id"])) for k, v in sorted(out.items())}


def _rules_root() -> Path:
    from kg.core import paths
    return paths.rules_dir().resolve()


def _applies(r) -> str:
    a = r.applies_to or {}
    parts = []
    if a.get("engines"):
        parts.append(", ".join(a["engines"]))
    v = a.get("versions")
    if isinstance(v, dict):
        parts.append("; ".join(f"{k} {s}" for k, s in sorted(v.items())))
    elif v:
        parts.append(str(v))
    return " ".join(parts)


def _matrix_view(m: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"a": c["a"], "b": c["b"], "mark": c["mark"], "condition": c["condition"], "engines": c["engines"],
             "rule": c["rule"], "sources": [{"title": s.get("title") or s.get("url") or "", "url": s.get("url") or ""}
                                            for s in c["sources"]]} for c in m["cells"]]


def matrices(catalog, rules_dir: Path | None, availability: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The matrix pages: all engines, then per engine (no release), then per engine release group."""
    from kg.analyses.matrix import compatibility_matrix, known_engines
    from kg.engine.rules import load_ruleset
    rules = load_ruleset("check", rules_dir)
    out = [{"slug": "matrix", "engine": None, "releases": [], "cells": _matrix_view(compatibility_matrix(catalog, rules))}]
    for engine in known_engines(catalog, rules.rules):
        out.append({"slug": f"matrix-{engine}", "engine": engine, "releases": [],
                    "cells": _matrix_view(compatibility_matrix(catalog, rules, engine))})
        rels = (availability.get(engine) or {}).get("releases") or []
        pages: list[dict[str, Any]] = []
        for group in release_groups(rules.rules, engine, rels):
            cells = _matrix_view(compatibility_matrix(catalog, rules, engine, group[0]))
            if pages and pages[-1]["cells"] == cells:
                pages[-1]["releases"] += group  # the same matrix: one page for both ranges
            else:
                pages.append({"slug": f"matrix-{engine}-{group[0]}", "engine": engine, "releases": list(group),
                              "cells": cells})
        out += pages
    return out


def site_model(catalog, rules_dir: Path | None = None) -> dict[str, Any]:
    """Everything the pages need (see module doc)."""
    from kg.analyses.gaps import find_gaps
    from kg.engine.rules import load_ruleset
    from kg.knowledge.graph import build_graph
    from kg.output.diagrams.map import map_cells

    ax = catalog.axes
    g = build_graph(catalog)
    nodes = []
    for n, d in sorted(g.nodes(data=True)):
        if d["type"] == "technique":
            nodes.append({"id": n, "type": "technique", "tid": d["id"], "name": d["name"],
                          "short": d["short_name"], "dimension": d["dimension"]})
        else:
            nodes.append({"id": n, "type": "property", "tid": d["id"], "name": d["name"], "short": d["id"],
                          "dimension": d.get("dimension"), "kind": d.get("kind")})
    edges = [_edge(g, u, v, k, d) for u, v, k, d in sorted(g.edges(keys=True, data=True), key=lambda e: e[2])]
    gaps = find_gaps(catalog, load_ruleset("gaps", rules_dir))
    gap_cells = {f'{x["stage"]}|{x["layer"]}|{x["dimension"]}': {"rank": x["rank"], "score": x["score"],
                                                            "reasons": [r["message"] for r in x["reasons"]]}
                 for x in gaps["directions"]}
    annotated = {f'{x["stage"]}|{x["layer"]}|{x["dimension"]}': {"status": x["status"], "reason": x["reason"]}
                 for x in gaps["annotated"]}
    availability = engine_availability(catalog)
    techniques = {}
    for tid in sorted(catalog.techniques):
        t = catalog.techniques[tid]
        c = t["coordinates"]
        techniques[tid] = {
            "id": tid, "name": t["name"], "short": t.get("short_name") or t["name"],
            "summary": t.get("summary") or "", "status": t.get("status") or "", "tags": list(t.get("tags") or []),
            "aliases": list(t.get("aliases") or []), "stages": list(c["stages"]), "layers": list(c["layers"]),
            "span": ax.layer_span(c["layers"]), "dimension": c["dimension"],
            "secondary": list(c.get("secondary_dimensions") or []),
            "benefits": list(t.get("benefits") or []), "costs": list(t.get("costs") or []),
            "parameters": list(t.get("parameters") or []), "references": list(t.get("references") or []),
            "replaced_by": t.get("replaced_by"),
            "engines": {e: a["techniques"][tid] for e, a in availability.items() if tid in a["techniques"]},
        }
    return {
        "axes": {"stages": [{"id": s["id"], "name": s["name"], "description": s.get("description", "")} for s in ax.stages],
                 "layers": [{"id": s["id"], "name": s["name"], "description": s.get("description", "")} for s in ax.layers],
                 "dimensions": [{"id": s["id"], "name": s["name"], "description": s.get("description", "")}
                                for s in ax.dimensions]},
        "techniques": techniques,
        "properties": {pid: {"id": pid, "name": p.get("name", pid), "kind": p.get("kind", "derived"),
                             "description": p.get("description", "")} for pid, p in sorted(catalog.properties.items())},
        "map": map_cells(catalog),
        "gaps": gap_cells, "annotated": annotated, "gap_summary": gaps["summary"],
        "graph": {"nodes": nodes, "edges": edges},
        "rules": _rules_by_technique(catalog, rules_dir),
        "engines": {e: {"releases": a["releases"]} for e, a in availability.items()},
        "matrices": matrices(catalog, rules_dir, availability),
        "statuses": sorted({t["status"] for t in techniques.values()}),
        "tags": sorted({x for t in techniques.values() for x in t["tags"]}),
    }
