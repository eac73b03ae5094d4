"""Placement verdict for a technique file: where it sits, what it competes with, what it changes.

``place_technique(path, ...)`` validates the entry against the whole catalog, then reports:

- its **cells**: every (stage, layer, dimension) it occupies (all its stages x its layer span x its
  primary dimension), each with the techniques already there;
- **replacement candidates**: techniques that share at least one cell with it (the same stage, layer
  and primary dimension: a cell is always in the technique's primary dimension) and are the same
  kind of technique: they share a tag beyond the stage-like ones (``GENERIC_TAGS`` and the stage
  ids; e.g. ``parallelism``, ``quantization``), or either entry lacks such tags, or one declares
  that it ``replaces`` the other. Techniques coupled by ``requires`` (either way) are complements,
  not alternatives. Candidates are ranked by
  ``score = 0.5 * coordinate overlap + 0.25 * benefit overlap + 0.25 * cost overlap`` where each
  overlap is a Jaccard index |A ∩ B| / |A ∪ B| (cells; benefit dimensions; cost dimensions). Two
  entries in the same cells that improve and pay in the same dimensions are most likely
  alternatives; the weights favour where a technique acts over what it touches. Techniques that
  share a cell but not a kind are listed as **neighbours** (same cell, different kind: TP and MoE
  both sit in inference x L4 x compute, one splits layers, the other changes the model), and
  entries that declare ``replaces`` without sharing a cell as **declared elsewhere**;
- **already in the catalog**: an entry whose file is the catalog's own is compared with the rest of
  the catalog without itself (``technique.in_catalog``), and the report says so;
- **empty cells**: cells no other technique occupies. All cells empty means a possible *new
  direction*; cells marked empty on purpose in ``axes.yaml`` (``cell_annotations``) are noted;
- **couplings it adds** to the graph: its own (out) and other entries' couplings that name it or
  one of its aliases (in; these were dangling before), and parts of the graph it joins;
- **which existing findings change**: rules that name it, and for each example stack, the
  ``check`` findings with and without the entry in the catalog, and with the entry adopted into
  the stack (plus the couplings between the entry and the stack's techniques).

The verdict dict is versioned (``schema_version``) with ``kind: place``; ``items`` flattens it into
results with a rule id, severity, message and location for the CI formats of kg.output.formats; text and
markdown are rendered by kg.output.place_report.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from kg.core import paths
from kg.core.errors import OptkgError


SCHEMA_VERSION = "1.0"
WEIGHTS = {"coordinates": 0.5, "benefits": 0.25, "costs": 0.25}
# tags that name where a technique is used rather than what kind it is (the stage ids count too)
GENERIC_TAGS = {"serving", "training", "inference"}

# rule ids of the placement results (SARIF rule metadata, --select/--ignore)
PLACE_RULES: dict[str, dict[str, str]] = {
    "place-new-direction": {"severity": "info", "title": "Lands in an empty cell",
                            "description": "No other technique occupies this stage x layer x dimension cell: a possible new direction."},
    "place-replacement-candidate": {"severity": "info", "title": "Shares cells with an existing technique",
                                    "description": "An existing technique occupies some of the same cells; the two may be alternatives "
                                                   "(ranked by overlap of coordinates, benefits and costs)."},
    "place-coupling-added": {"severity": "info", "title": "Adds a coupling to the graph",
                             "description": "A coupling from or to the new entry becomes an edge of the coupling graph."},
    "place-finding-changed": {"severity": "info", "title": "Changes a finding on an example stack",
                              "description": "Checking an example stack gives a different finding with the entry in the catalog or adopted into the stack."},
    "place-stack-interaction": {"severity": "info", "title": "Couples with a technique of an example stack",
                                "description": "Adopting the entry into the stack brings one of its couplings into play."},
}


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def _safe_cells(cat, tid: str) -> set[tuple[str, str, str]]:
    try:
        return set(cat.cells(tid))
    except (KeyError, TypeError, ValueError, AttributeError):
        return set()


def _dims(t: dict[str, Any], key: str) -> set[str]:
    return {e["dimension"] for e in (t.get(key) or []) if isinstance(e, dict) and isinstance(e.get("dimension"), str)}


def _annotation(axes, cell: tuple[str, str, str]) -> str | None:
    for a in axes.cell_annotations or []:
        if all(a.get(k, "*") in ("*", v) for k, v in zip(("stage", "layer", "dimension"), cell)):
            reason = " ".join(str(a.get("reason") or a.get("note") or "marked empty on purpose").split())
            return f"{a['status']}: {reason}" if a.get("status") else reason
    return None


def _fp(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _kind_tags(cat, t: dict[str, Any]) -> set[str]:
    generic = GENERIC_TAGS | set(cat.axes.stage_ids)
    return {x for x in (t.get("tags") or []) if isinstance(x, str) and x not in generic}


def _linked(cat, a: str, b: str, kind: str) -> bool:
    """Whether ``a`` declares a coupling of ``kind`` to ``b`` (by id or alias)."""
    return any(isinstance(c, dict) and c.get("kind") == kind and isinstance(c.get("target"), str)
               and cat.resolve(c["target"]) == b for c in cat.techniques[a].get("couplings") or [])


def classify_neighbours(cat, tid: str) -> dict[str, list[dict[str, Any]]]:
    """Every other technique that shares a cell with ``tid`` or declares ``replaces`` with it, sorted into
    ``candidates`` (ranked, see module doc), ``neighbours`` (a shared cell, another kind, or a complement)
    and ``declared_elsewhere`` (``replaces`` without a shared cell)."""
    t = cat.techniques[tid]
    cells = _safe_cells(cat, tid)
    ben, cost, tags = _dims(t, "benefits"), _dims(t, "costs"), _kind_tags(cat, t)
    out: dict[str, list[dict[str, Any]]] = {"candidates": [], "neighbours": [], "declared_elsewhere": []}
    for oid in sorted(cat.techniques):
        if oid == tid:
            continue
        o = cat.techniques[oid]
        oc = _safe_cells(cat, oid)
        shared = cells & oc
        declared = _linked(cat, tid, oid, "replaces") or _linked(cat, oid, tid, "replaces")
        if not shared:
            if declared:
                out["declared_elsewhere"].append({"id": oid, "name": o.get("name", oid), "file": cat.files.get(oid),
                                                  "dimension": (o.get("coordinates") or {}).get("dimension")})
            continue
        co, bo, so = _jaccard(cells, oc), _jaccard(ben, _dims(o, "benefits")), _jaccard(cost, _dims(o, "costs"))
        score = WEIGHTS["coordinates"] * co + WEIGHTS["benefits"] * bo + WEIGHTS["costs"] * so
        otags = _kind_tags(cat, o)
        row = {"id": oid, "name": o.get("name", oid), "status": o.get("status"), "file": cat.files.get(oid),
               "score": round(score, 4), "coordinate_overlap": round(co, 4), "benefit_overlap": round(bo, 4),
               "cost_overlap": round(so, 4), "shared_cells": [list(c) for c in sorted(shared)],
               "declared_replaces": declared, "shared_tags": sorted(tags & otags)}
        if _linked(cat, tid, oid, "requires") or _linked(cat, oid, tid, "requires"):
            row["why_not"] = "complement: one requires the other"
        elif not declared and tags and otags and not tags & otags:
            row["why_not"] = (f"another kind of technique (tags {', '.join(sorted(otags))} vs "
                              f"{', '.join(sorted(tags))})")
        out["neighbours" if "why_not" in row else "candidates"].append(row)
    for k in ("candidates", "neighbours"):
        out[k].sort(key=lambda c: (not c["declared_replaces"], -c["score"], -len(c["shared_cells"]), c["id"]))
    return out


def rank_candidates(cat, tid: str) -> list[dict[str, Any]]:
    """Replacement candidates for ``tid``, declared ``replaces`` first, then best score (see module doc)."""
    return classify_neighbours(cat, tid)["candidates"]


def _coupling_row(direction: str, src: str, dst: str, c: dict[str, Any], written: str | None, index: int) -> dict[str, Any]:
    return {"direction": direction, "from": src, "to": dst, "kind": c.get("kind"), "from_dimension": c.get("from_dimension"),
            "to_dimension": c.get("to_dimension"), "condition": c.get("condition"), "severity": c.get("severity"),
            "mechanism": c.get("mechanism", ""), "written": written, "index": index}


def couplings_added(cat_with, tid: str) -> list[dict[str, Any]]:
    """Edges the entry adds: its own couplings (out) and couplings of other entries that name it (in)."""
    out = []
    for i, c in enumerate(cat_with.techniques[tid].get("couplings") or []):
        if not isinstance(c, dict):
            continue
        if isinstance(c.get("target"), str):
            dst = cat_with.resolve(c["target"]) or c["target"]
            out.append(_coupling_row("out", tid, dst, c, c["target"], i))
        elif isinstance(c.get("property"), str):
            out.append(_coupling_row("out", tid, f"property:{c['property']}", c, c["property"], i))
    for oid in sorted(cat_with.techniques):
        if oid == tid:
            continue
        for i, c in enumerate(cat_with.techniques[oid].get("couplings") or []):
            if isinstance(c, dict) and isinstance(c.get("target"), str) and cat_with.resolve(c["target"]) == tid:
                out.append(_coupling_row("in", oid, tid, c, c["target"], i))
    return out


def graph_bridges(cat_with, cat_without, tid: str) -> list[list[str]]:
    """Groups of the entry's neighbours that were in different connected parts of the graph without it."""
    import networkx as nx
    from kg.knowledge.graph import build_graph, tnode
    g0 = build_graph(cat_without).to_undirected(as_view=True)
    g1 = build_graph(cat_with).to_undirected(as_view=True)
    node = tnode(tid)
    if node not in g1:
        return []
    comp = {}
    for i, cc in enumerate(nx.connected_components(g0)):
        for n in cc:
            comp[n] = i
    groups: dict[int, list[str]] = {}
    for n in sorted(set(g1.neighbors(node)) - {node}):
        if n in comp:
            groups.setdefault(comp[n], []).append(n)
    return sorted(groups.values()) if len(groups) > 1 else []


def rules_naming(tid: str, cat_with, cat_without, rules_dir: Path | None) -> list[dict[str, Any]]:
    """Rules (any ruleset) whose match, involves or fixes name the entry (by id or alias)."""
    from kg.engine.rules import RULESET_KINDS, load_rules
    out = []
    for kind in RULESET_KINDS:
        rs, _ = load_rules(kind, rules_dir)
        for r in rs.rules:
            named = [("match", p["technique"]) for p in r.match if p.get("kind") == "technique" and "technique" in p]
            named += [("involves", x) for x in r.involves] + [("fixes", x) for x in r.fixes]
            for fld, name in named:
                if cat_with.resolve(str(name)) == tid:
                    out.append({"rule_id": r.id, "ruleset": kind, "field": fld, "file": r.file, "line": r.line,
                                "resolved_before": cat_without.resolve(str(name)) is not None})
    return out


def default_stacks() -> list[Path]:
    """The example stacks shipped with optkg (``examples/*.yaml`` next to the catalog)."""
    d = paths.data_root() / "examples"
    return sorted(d.glob("*.yaml")) if d.is_dir() else []


def _finding_key(f: dict[str, Any]) -> tuple:
    return (f["rule_id"], tuple(sorted(f.get("techniques") or [])))


def _diff_findings(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    b = {_finding_key(f): f for f in before}
    a = {_finding_key(f): f for f in after}
    out = []
    for k in sorted(set(a) | set(b)):
        fb, fa = b.get(k), a.get(k)
        if fb is None:
            out.append({"change": "added", "rule_id": fa["rule_id"], "severity": fa["severity"], "message": fa["message"],
                        "tags": fa.get("tags", []), "fingerprint": fa.get("fingerprint")})
        elif fa is None:
            out.append({"change": "removed", "rule_id": fb["rule_id"], "severity": fb["severity"], "message": fb["message"],
                        "tags": fb.get("tags", []), "fingerprint": fb.get("fingerprint")})
        elif (fa["severity"], fa.get("numbers")) != (fb["severity"], fb.get("numbers")):
            out.append({"change": "changed", "rule_id": fa["rule_id"], "severity": fa["severity"], "message": fa["message"],
                        "before": {"severity": fb["severity"], "numbers": fb.get("numbers")},
                        "tags": fa.get("tags", []), "fingerprint": fa.get("fingerprint")})
    return out


def _stacks_in(p: Path, cat) -> list[Any]:
    """Every stack ``optkg check FILE`` reads from ``p``: a training job (DeepSpeed JSON, accelerate YAML,
    torchtitan TOML, a stack YAML with ``framework:``), or each serving container of a stack YAML, Kubernetes
    manifest, compose file or LLM-API YAML."""
    from kg.inputs.modelcfg import resolve_model
    from kg.inputs.training import is_training_file, load_training_file
    if is_training_file(p):
        return [load_training_file(p, cat, resolve_model)]
    from kg.engines.launch import stacks_from_file
    return stacks_from_file(p, cat, resolver=resolve_model)[0]


def _findings(st, cat, rules: dict[str, Any], rules_dir: Path | None) -> tuple[list[dict[str, Any]], set[str]]:
    """(the findings ``optkg check`` gives ``st``, a serving Stack or a TrainingJob, against ``cat``; the catalog
    techniques the stack holds)."""
    from kg.inputs.training.job import TrainingJob
    if isinstance(st, TrainingJob):
        from kg.analyses.training import training_report
        from kg.engine.rules import load_ruleset
        if "training" not in rules:
            rules["training"] = load_ruleset("training", rules_dir)
        rep = training_report(st, rules["training"], cat)
        return [f.to_dict() for f in rep.findings], set(rep.to_dict()["stack"].get("techniques") or [])
    from kg.analyses.check import check_stack
    return [f.to_dict() for f in check_stack(st, cat, rules["check"]).findings], set(st.techniques)


def stack_effects(stack_files: list[Path], tid: str, cat_with, cat_without, rules_dir: Path | None) -> list[dict[str, Any]]:
    """For each stack file (every form ``optkg check`` reads): findings before/after the entry joins the catalog,
    and, for a serving stack, after adopting it into the stack (a training job's techniques follow from its
    settings, so adopting one is a change of settings the report cannot guess)."""
    import copy
    from kg.engine.rules import load_ruleset
    from kg.inputs.stack import add_technique
    from kg.inputs.training.job import TrainingJob

    try:
        rules: dict[str, Any] = {"check": load_ruleset("check", rules_dir)}
    except OptkgError as e:
        return [{"stack": str(p), "status": "skipped", "reason": str(e).splitlines()[0]} for p in stack_files]
    out = []
    for p in stack_files:
        try:
            with_entry = _stacks_in(p, cat_with)
        except OptkgError as e:
            out.append({"stack": str(p), "status": "skipped", "reason": str(e).splitlines()[0]})
            continue
        try:
            without = _stacks_in(p, cat_without)
        except OptkgError as e:
            without = [None] * len(with_entry)
            reason_without = str(e).splitlines()[0]
        for i, st1 in enumerate(with_entry):
            entry: dict[str, Any] = {"stack": str(p) if len(with_entry) == 1 else f"{p} [{st1.name}]"}
            st0 = without[i] if i < len(without) else None
            if st0 is not None:
                before = _findings(st0, cat_without, rules, rules_dir)[0]
                entry["loads_without_entry"] = True
            else:
                before = []
                entry["loads_without_entry"] = False
                entry["reason_without_entry"] = reason_without
            after, held = _findings(st1, cat_with, rules, rules_dir)
            entry["status"] = "checked"
            entry["name"] = st1.name
            entry["kind"] = "training" if isinstance(st1, TrainingJob) else "serving"
            entry["uses_entry"] = tid in held
            entry["changes"] = _diff_findings(before, after)
            inter = []
            if isinstance(st1, TrainingJob):
                entry["if_adopted"] = []
                present = set()
            else:
                adopted = copy.deepcopy(st1)
                if tid not in adopted.techniques:
                    add_technique(adopted, cat_with, tid, None, f"{p}")
                entry["if_adopted"] = _diff_findings(after, _findings(adopted, cat_with, rules, rules_dir)[0])
                present = set(st1.techniques)
            for c in couplings_added(cat_with, tid) if not isinstance(st1, TrainingJob) else []:
                other = c["to"] if c["direction"] == "out" else c["from"]
                if other not in cat_with.techniques or other == tid:
                    continue
                # what adopting the entry brings into play: a requirement the stack lacks, or an
                # interaction with a technique the stack already runs
                if (c["kind"] == "requires" and other not in present) or \
                        (c["kind"] in ("conflicts_with", "replaces", "mitigates", "amplifies", "causes")
                         and other in present):
                    inter.append({**c, "other": other, "other_present": other in present})
            entry["interactions"] = inter
            out.append(entry)
    return out


def _technique_file_info(path: Path) -> tuple[str, Any, dict[str, Any]]:
    """(id, name as written or None, {field: (line, column)}) of a technique file."""
    from kg.core.yamlio import load_yaml
    doc = load_yaml(path)
    if not isinstance(doc.data, dict) or not isinstance(doc.data.get("id"), str):
        raise OptkgError(f"{path}:1: a technique file is a mapping with an id (start from `optkg new <id>`)")
    lines = {}
    for key in ("id", "coordinates", "couplings", "benefits", "costs"):
        lines[key] = doc.where((key,))
    for i, _ in enumerate(doc.data.get("couplings") or []):
        lines[f"couplings[{i}]"] = doc.where(("couplings", i))
    name = doc.data.get("name")
    return doc.data["id"], name.strip() if isinstance(name, str) and name.strip() else None, lines


def place_technique(path: Path, catalog_root: Path | None = None, rules_dir: Path | None = None,
                    stacks: list[Path] | None = None) -> dict[str, Any]:
    """The placement verdict (versioned dict, ``kind: place``) for the technique file at ``path``.

    The catalog is ``catalog_root``, else the one the file sits in (``<catalog>/techniques/<id>.yaml``),
    else the shipped one; a file outside the catalog is loaded as if it were in it. When the entry
    has problems, the dict holds ``problems`` (as ``optkg validate`` reports them) and no verdict.
    ``stacks``: stack files to re-check (default: the shipped examples). Raises OptkgError for a
    missing or unreadable file.
    """
    from kg.knowledge.catalog import load_catalog
    path = Path(path)
    if path.is_dir():
        raise OptkgError(f"{path}: is a folder; place takes one technique file (e.g. catalog/techniques/<id>.yaml)")
    if not path.is_file():
        raise OptkgError(f"{path}: file not found" if not path.exists() else
                         f"{path}: is not a regular file; place takes one technique YAML file")
    if catalog_root is None:
        parent = path.resolve().parent
        if parent.name == "techniques" and (parent.parent / "axes.yaml").is_file():
            catalog_root = parent.parent
    if catalog_root is None:
        from kg.core.paths import default_catalog_root
        catalog_root = default_catalog_root()
    root = Path(catalog_root)
    if rules_dir is None:
        from kg.core.paths import rules_dir_for
        rules_dir = rules_dir_for(root)
    inside = path.resolve().parent == (root / "techniques").resolve()
    cat_with, errors = load_catalog(root, only=[path], use_cache=False, extra=None if inside else [path])
    tid, name, lines = _technique_file_info(path)
    base: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "kind": "place", "catalog": str(root),
                            "technique": {"id": tid, "name": name, "file": str(path)}}
    if errors:
        from kg.core.paths import display_path
        from kg.knowledge.checks import problem_dict
        import dataclasses
        base["problems"] = [problem_dict(dataclasses.replace(p, file=display_path(p.file))) for p in errors]
        base["verdict"] = None
        base["items"] = []
        return base
    if tid not in cat_with.techniques or cat_with.files.get(tid) and Path(cat_with.files[tid]).resolve() != path.resolve():
        raise OptkgError(f"{path}: id '{tid}' is already used by {cat_with.files.get(tid)}; ids are unique")
    t = cat_with.techniques[tid]
    cat_without = cat_with.without(tid)
    cells = sorted(_safe_cells(cat_with, tid))
    occupants = {c: [] for c in cells}
    for oid in sorted(cat_without.techniques):
        for c in _safe_cells(cat_without, oid) & set(cells):
            occupants[c].append(oid)
    cell_rows = [{"stage": s, "layer": l, "dimension": d, "occupants": occupants[(s, l, d)],
                  "annotation": _annotation(cat_with.axes, (s, l, d))} for s, l, d in cells]
    empty = [r for r in cell_rows if not r["occupants"]]
    if not cells:
        verdict = "no-cells"
    elif len(empty) == len(cells):
        verdict = "new-direction"
    elif not empty:
        verdict = "replacement-candidates"
    else:
        verdict = "partly-new-direction"
    near = classify_neighbours(cat_with, tid)
    candidates = near["candidates"]
    added = couplings_added(cat_with, tid)
    stack_files = default_stacks() if stacks is None else _expand_stacks(stacks)
    d = {
        **base,
        "technique": {"id": tid, "name": t.get("name"), "file": str(path), "status": t.get("status"),
                      "coordinates": t.get("coordinates"), "in_catalog": inside},
        "verdict": verdict,
        "verdict_text": _verdict_text(verdict, len(cells), len(empty), candidates),
        "existing": inside,
        "existing_text": (f"{cat_with.files.get(tid)} is this catalog's own entry, so it is compared with the other "
                          f"{len(cat_without.techniques)} entries (not with itself); 'couplings' and 'rules' below are "
                          "what it contributes, and stack changes are what removing it would change"
                          if inside else None),
        "weights": WEIGHTS,
        "scoring": SCORING_TEXT,
        "cells": cell_rows,
        "empty_cells": [[r["stage"], r["layer"], r["dimension"]] for r in empty],
        "candidates": candidates,
        "neighbours": near["neighbours"],
        "declared_elsewhere": near["declared_elsewhere"],
        "couplings_added": added,
        "bridges": graph_bridges(cat_with, cat_without, tid),
        "rules": rules_naming(tid, cat_with, cat_without, rules_dir),
        "stacks": stack_effects(stack_files, tid, cat_with, cat_without, rules_dir),
        "warnings": [w.to_dict() for w in cat_with.warnings],
    }
    d["items"] = _items(d, lines)
    return d


SCORING_TEXT = ("a replacement candidate shares a cell (same stage, layer and primary dimension) and a kind tag "
                "(stage-like tags such as serving/training do not count), or declares 'replaces'; techniques that "
                "require each other are complements, not candidates. score = 0.5 x cell overlap + 0.25 x "
                "benefit-dimension overlap + 0.25 x cost-dimension overlap, each a Jaccard index |A and B| / |A or B|; "
                "declared 'replaces' are listed first")


def _expand_stacks(stacks: list[Path]) -> list[Path]:
    out = []
    for s in stacks:
        s = Path(s)
        if s.is_dir():
            out += sorted(s.glob("*.yaml"))
        elif s.is_file():
            out.append(s)
        else:
            raise OptkgError(f"--stack {s}: not a file or folder")
    return out


def _verdict_text(verdict: str, n_cells: int, n_empty: int, cands: list[dict[str, Any]]) -> str:
    if verdict == "new-direction":
        return f"new direction: all {n_cells} of its cells are empty"
    if verdict == "no-cells":
        return "no cells (coordinates are incomplete)"
    top = ", ".join(f"{c['id']} ({c['score']:.2f})" for c in cands[:3]) or "no technique of the same kind"
    if verdict == "replacement-candidates":
        return f"all {n_cells} cells are occupied; closest: {top}"
    return f"{n_empty} of {n_cells} cells are empty (a partly new direction); closest: {top}"


def _items(d: dict[str, Any], lines: dict[str, tuple[int, int]]) -> list[dict[str, Any]]:
    """Flatten the verdict into results (rule id, severity, message, location) for CI formats and filters."""
    tid, f = d["technique"]["id"], d["technique"]["file"]
    from kg.core.paths import display_path
    f = display_path(f)
    cl, cc = lines.get("coordinates", (1, 1))
    items = []

    def add(rule: str, sev: str, msg: str, where: tuple[int, int], details: list[str], title: str, key: Any,
            tags: list[str] | None = None) -> None:
        items.append({"rule_id": rule, "severity": sev, "message": msg, "file": f, "line": where[0], "column": where[1],
                      "details": details, "title": title, "tags": ["placement", *(tags or [])],
                      "fingerprint": _fp(rule, tid, key)})

    if d["empty_cells"]:
        cells = ", ".join("/".join(c) for c in d["empty_cells"])
        ann = [f"{r['stage']}/{r['layer']}/{r['dimension']}: {r['annotation']}" for r in d["cells"] if r.get("annotation")]
        add("place-new-direction", "info",
            f"{tid} lands in {len(d['empty_cells'])} empty cell(s): {cells}" +
            (" - a possible new direction" if d["verdict"] == "new-direction" else ""),
            (cl, cc), [f"marked empty on purpose: {a}" for a in ann], "empty cell", d["empty_cells"])
    for c in d["candidates"][:5]:
        add("place-replacement-candidate", "info",
            f"shares {len(c['shared_cells'])} cell(s) with {c['id']} ({c['name']}): score {c['score']:.2f} "
            f"(coordinates {c['coordinate_overlap']:.2f}, benefits {c['benefit_overlap']:.2f}, costs {c['cost_overlap']:.2f})"
            + (" - declared: replaces" if c["declared_replaces"] else ""),
            (cl, cc), ["shared cells: " + ", ".join("/".join(x) for x in c["shared_cells"])], f"neighbour {c['id']}", c["id"])
    for c in d["couplings_added"]:
        where = lines.get(f"couplings[{c['index']}]", (cl, cc)) if c["direction"] == "out" else lines.get("id", (1, 1))
        arrow = f"{c['from']} --{c['kind']}--> {c['to']}"
        cond = f" when {c['condition']}" if c.get("condition") else ""
        add("place-coupling-added", "info", f"adds {arrow} ({c['from_dimension']} -> {c['to_dimension']}){cond}", where,
            [f"why: {c['mechanism']}"] if c.get("mechanism") else [], "coupling added",
            [c["direction"], c["from"], c["to"], c["kind"], c["index"]])
    for s in d["stacks"]:
        if s.get("status") != "checked":
            continue
        name = Path(s["stack"]).name
        for label, changes in (("with the entry in the catalog", s["changes"]), (f"with {tid} adopted", s["if_adopted"])):
            for ch in changes:
                add("place-finding-changed", ch["severity"] if ch["change"] != "removed" else "info",
                    f"{name}: {ch['rule_id']} {ch['change']} {label}: {ch['message']}", (cl, cc), [], f"finding {ch['change']}",
                    [name, label, ch["rule_id"], ch["change"]], list(ch.get("tags") or []))
        for it in s.get("interactions", []):
            state = "present" if it["other_present"] else "absent"
            sev = it.get("severity") or "info"
            if it["kind"] == "conflicts_with" and it["other_present"] and not it.get("condition"):
                sev = "warning" if sev == "info" else sev
            where = lines.get(f"couplings[{it['index']}]", (cl, cc)) if it["direction"] == "out" else (cl, cc)
            add("place-stack-interaction", sev if sev in ("info", "warning", "error") else "info",
                f"{name}: adopting {tid}: {it['from']} {it['kind']} {it['to']} ({it['other']} is {state} in the stack)"
                + (f" when {it['condition']}" if it.get("condition") else ""), where, [], "stack interaction",
                [name, it["from"], it["to"], it["kind"]])
    return items
