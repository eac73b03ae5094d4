"""Empty stage x layer x dimension cells, ranked as candidate new directions (``optkg gaps``).

Input: a Catalog (its axes and techniques) and the ``gaps`` ruleset (rules/gaps.yaml). Output: a
dict (``kind: gaps``) listing

- ``directions``: every empty cell not annotated away, ranked most promising first. Each cell is
  one fact ``{kind: cell, stage, layer, dimension}`` run through the rule engine together with
  its neighbourhood features (``cell_features``); every rule that fires adds a reason (its
  message) and its severity band to the cell's score (``SEVERITY_ORDER`` points: low 2,
  moderate 3, severe 4, critical 5). A new rule in rules/gaps.yaml is a new reason to look at a
  cell; no code changes.
- ``annotated``: empty cells that ``cell_annotations`` in ``axes.yaml`` mark ``impossible`` or
  ``out-of-scope``, with the reason; they are not directions.
- ``conflicts``: annotated cells that some technique occupies after all (the annotation or the
  placement is wrong).

Features of a cell (s, l, d), all counts of distinct techniques (source: the technique files):

- ``row_count``: techniques in stage s at layer l on other dimensions (neighbours along the
  dimension axis); ``row_dimensions``: how many other dimensions they cover.
- ``adjacent_count``: techniques in stage s on dimension d at the layers just above and below l
  (neighbours along the layer axis).
- ``other_stage_count``: techniques at layer l on dimension d in other stages (neighbours along
  the stage axis: an idea that may transfer).
- ``column_count``: techniques in stage s on dimension d at any layer.
- ``cost_landings``: techniques used in stage s that declare a cost in dimension d;
  ``relief``: techniques used in stage s whose primary dimension is d or that declare a benefit
  in d; ``cost_relief_ratio`` = cost_landings / max(relief, 1).
- ``crossings_in``: couplings declared by techniques in (s, l, any dimension) whose cost lands in
  d coming from another dimension (``to_dimension == d != from_dimension``).
Each count has a ``*_examples`` string (up to three names) for messages.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from kg.core.errors import OptkgError
from kg.core.textsafe import fit_width, one_line

SCHEMA_VERSION = "1.0"
ANNOTATION_STATUSES = {
    "impossible": "No technique can sit here: the axes' own definitions exclude the combination.",
    "out-of-scope": "Possible in principle, but outside what optkg tracks; not a direction.",
}
_EXAMPLES = 3


# ---------------------------------------------------------------------------------------------
# annotations

@dataclass(frozen=True)
class Annotation:
    """One ``cell_annotations`` entry: the cells it covers, its status and reason, and where it is."""

    stages: tuple[str, ...]
    layers: tuple[str, ...]
    dimensions: tuple[str, ...]
    status: str
    reason: str
    source: str

    def covers(self, cell: tuple[str, str, str]) -> bool:
        s, l, d = cell
        return s in self.stages and l in self.layers and d in self.dimensions


def _axis_values(value: Any, valid: list[str], where: str, key: str) -> tuple[str, ...]:
    if value == "*":
        return tuple(valid)
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(x, str) for x in items):
        raise OptkgError(f"{where}: cell_annotations {key}: expected an id, a list of ids or '*', found {value!r}")
    bad = [x for x in items if x not in valid]
    if bad:
        raise OptkgError(f"{where}: cell_annotations {key}: unknown {key} '{bad[0]}' (valid: {', '.join(valid)}, or '*')")
    return tuple(x for x in valid if x in items)


def load_annotations(catalog) -> list[Annotation]:
    """Parse ``cell_annotations`` of ``catalog.axes`` (entries ``{stage, layer, dimension, status, reason}``;
    each axis value is an id, a list of ids or ``'*'``). Raises OptkgError naming axes.yaml:line."""
    axes = catalog.axes
    raw = axes.cell_annotations or []
    path = Path(catalog.root) / "axes.yaml"
    doc = None
    try:
        from kg.core.yamlio import load_yaml
        doc = load_yaml(path) if path.is_file() else None
    except OptkgError:
        doc = None
    if not isinstance(raw, list):
        raise OptkgError(f"{path}: cell_annotations must be a list")
    out = []
    for i, a in enumerate(raw):
        line = doc.where(("cell_annotations", i))[0] if doc else 0
        where = f"{path}:{line}"
        if not isinstance(a, dict):
            raise OptkgError(f"{where}: cell_annotations[{i}] must be a mapping with stage, layer, dimension, status, reason")
        missing = [k for k in ("stage", "layer", "dimension", "status", "reason") if k not in a]
        if missing:
            raise OptkgError(f"{where}: cell_annotations[{i}] is missing {', '.join(missing)}")
        extra = sorted(set(a) - {"stage", "layer", "dimension", "status", "reason"})
        if extra:
            raise OptkgError(f"{where}: cell_annotations[{i}]: unknown field '{extra[0]}'"
                             " (allowed: stage, layer, dimension, status, reason)")
        if a["status"] not in ANNOTATION_STATUSES:
            raise OptkgError(f"{where}: cell_annotations[{i}].status: '{a['status']}' is not one of "
                             f"{', '.join(ANNOTATION_STATUSES)}")
        if not isinstance(a["reason"], str) or len(a["reason"].strip()) < 10:
            raise OptkgError(f"{where}: cell_annotations[{i}].reason: say why in a sentence (10+ characters)")
        out.append(Annotation(
            _axis_values(a["stage"], axes.stage_ids, where, "stage"),
            _axis_values(a["layer"], axes.layer_ids, where, "layer"),
            _axis_values(a["dimension"], axes.dimension_ids, where, "dimension"),
            a["status"], " ".join(a["reason"].split()), f"{path.name}:{line}" if line else path.name))
    return out


# ---------------------------------------------------------------------------------------------
# the cell index and features

@dataclass
class CellIndex:
    """Which techniques occupy which (stage, layer, dimension) cell."""

    axes: Any
    techniques: dict[str, dict[str, Any]]
    occupants: dict[tuple[str, str, str], list[str]] = field(default_factory=dict)

    @classmethod
    def build(cls, axes, techniques: dict[str, dict[str, Any]]) -> "CellIndex":
        idx = cls(axes, techniques)
        for tid in sorted(techniques):
            c = techniques[tid]["coordinates"]
            for s in c["stages"]:
                for layer in axes.layer_span(c["layers"]):
                    idx.occupants.setdefault((s, layer, c["dimension"]), []).append(tid)
        return idx

    def all_cells(self) -> list[tuple[str, str, str]]:
        a = self.axes
        return [(s, l, d) for s in a.stage_ids for l in a.layer_ids for d in a.dimension_ids]

    def at(self, cell: tuple[str, str, str]) -> list[str]:
        return self.occupants.get(cell, [])

    def name(self, tid: str) -> str:
        t = self.techniques[tid]
        return one_line(t.get("short_name") or t.get("name") or tid)  # a name stays on its line in every output


def _uniq(ids: Iterable[str]) -> list[str]:
    return sorted(set(ids))


def _examples(idx: CellIndex, ids: list[str]) -> str:
    names = [idx.name(t) for t in ids[:_EXAMPLES]]
    more = len(ids) - len(names)
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


def cell_features(idx: CellIndex, cell: tuple[str, str, str]) -> dict[str, Any]:
    """The flat namespace the gaps rules read for ``cell`` (see the module doc for each name)."""
    s, l, d = cell
    a = idx.axes
    layers, dims = a.layer_ids, a.dimension_ids
    li = layers.index(l)
    row = _uniq(t for dd in dims if dd != d for t in idx.at((s, l, dd)))
    row_dims = sorted({dd for dd in dims if dd != d and idx.at((s, l, dd))}, key=dims.index)
    adj_layers = [layers[j] for j in (li - 1, li + 1) if 0 <= j < len(layers)]
    adj = _uniq(t for al in adj_layers for t in idx.at((s, al, d)))
    adj_used = [al for al in adj_layers if idx.at((s, al, d))]
    others = [ss for ss in a.stage_ids if ss != s and idx.at((ss, l, d))]
    other = _uniq(t for ss in others for t in idx.at((ss, l, d)))
    column = _uniq(t for ll in layers for t in idx.at((s, ll, d)))
    in_stage = [tid for tid, t in sorted(idx.techniques.items()) if s in t["coordinates"]["stages"]]
    costs = [tid for tid in in_stage if any(c.get("dimension") == d for c in idx.techniques[tid].get("costs") or [])]
    relief = [tid for tid in in_stage if idx.techniques[tid]["coordinates"]["dimension"] == d
              or any(b.get("dimension") == d for b in idx.techniques[tid].get("benefits") or [])]
    crossing: list[str] = []
    for tid in _uniq(row):
        for c in idx.techniques[tid].get("couplings") or []:
            if c.get("to_dimension") == d and c.get("from_dimension") not in (None, d):
                what = c.get("target") or c.get("property") or "?"
                crossing.append(f"{idx.name(tid)} → {what} ({c['from_dimension']} → {d})")
    return {
        "stage": s, "layer": l, "dimension": d,
        "stage_name": a.label("stages", s), "layer_name": a.label("layers", l),
        "dimension_name": a.label("dimensions", d),
        "row_count": len(row), "row_dimensions": len(row_dims),
        "row_dimension_names": ", ".join(row_dims), "row_examples": _examples(idx, row),
        "adjacent_count": len(adj), "adjacent_layers": ", ".join(adj_used) or "-",
        "adjacent_examples": _examples(idx, adj),
        "other_stage_count": len(other), "other_stages": ", ".join(others) or "-",
        "other_examples": _examples(idx, other),
        "column_count": len(column),
        "cost_landings": len(costs), "cost_examples": _examples(idx, costs),
        "relief": len(relief), "relief_examples": _examples(idx, relief),
        "cost_relief_ratio": round(len(costs) / max(len(relief), 1), 2),
        "crossings_in": len(crossing), "crossing_examples": "; ".join(crossing[:_EXAMPLES]),
    }


# ---------------------------------------------------------------------------------------------
# ranking through the rule engine

def _cell_fact(cell: tuple[str, str, str]) -> dict[str, Any]:
    return {"kind": "cell", "stage": cell[0], "layer": cell[1], "dimension": cell[2]}


def evaluate_cell(idx: CellIndex, cell: tuple[str, str, str], ruleset, thresholds: dict[str, float] | None = None):
    """Run the gaps rules over one cell. Returns (features, list of Firing)."""
    from kg.engine.rules import evaluate_rules
    ns = cell_features(idx, cell)
    return ns, evaluate_rules(ruleset, [_cell_fact(cell)], ns, thresholds=thresholds)


def _score(firings) -> int:
    from kg.engine.rules import SEVERITY_ORDER
    return sum(SEVERITY_ORDER.get(f.severity or "none", 0) for f in firings if f.fired)


def find_gaps(catalog, ruleset, *, stages: list[str] | None = None, layers: list[str] | None = None,
              dimensions: list[str] | None = None, thresholds: dict[str, float] | None = None,
              top: int | None = None) -> dict[str, Any]:
    """The gaps report (shape in the module doc). Filters restrict which cells are listed; the
    features are always computed over the whole catalog. Deterministic: ties are broken by total
    neighbours, then by axis order (stage, layer, dimension)."""
    axes = catalog.axes
    for name, vals, valid in (("--stage", stages, axes.stage_ids), ("--layer", layers, axes.layer_ids),
                              ("--dimension", dimensions, axes.dimension_ids)):
        for v in vals or []:
            if v not in valid:
                raise OptkgError(f"{name}: unknown value '{v}' (valid: {', '.join(valid)})")
    if thresholds:
        for k in thresholds:
            if k not in ruleset.thresholds:
                known = ", ".join(sorted(ruleset.thresholds)) or "none"
                raise OptkgError(f"--threshold: unknown threshold '{k}' (known: {known})")
    annotations = load_annotations(catalog)
    idx = CellIndex.build(axes, catalog.techniques)
    order = {c: i for i, c in enumerate(idx.all_cells())}

    def wanted(c: tuple[str, str, str]) -> bool:
        return (not stages or c[0] in stages) and (not layers or c[1] in layers) and (not dimensions or c[2] in dimensions)

    directions, annotated, conflicts = [], [], []
    empty = 0
    for cell in idx.all_cells():
        occ = idx.at(cell)
        ann = next((a for a in annotations if a.covers(cell)), None)
        if not wanted(cell):
            continue
        base = {"stage": cell[0], "layer": cell[1], "dimension": cell[2]}
        if occ:
            if ann:
                conflicts.append({**base, "status": ann.status, "reason": ann.reason, "source": ann.source,
                                  "occupied_by": list(occ)})
            continue
        empty += 1
        if ann:
            annotated.append({**base, "status": ann.status, "reason": ann.reason, "source": ann.source})
            continue
        ns, firings = evaluate_cell(idx, cell, ruleset, thresholds)
        reasons = [{"rule": f.rule.id, "title": f.rule.title, "severity": f.severity, "message": f.message,
                    "numbers": f.numbers} for f in firings if f.fired]
        feats = {k: v for k, v in ns.items() if k not in ("stage", "layer", "dimension")}
        neighbours = ns["row_count"] + ns["adjacent_count"] + ns["other_stage_count"]
        directions.append({**base, "score": _score(firings), "neighbours": neighbours, "reasons": reasons,
                           "features": feats, "_order": order[cell]})
    directions.sort(key=lambda x: (-x["score"], -x["neighbours"], x["_order"]))
    for i, dct in enumerate(directions, 1):
        dct["rank"] = i
        del dct["_order"]
    total = len([c for c in idx.all_cells() if wanted(c)])
    listed = directions[:top] if top else directions
    return {
        "schema_version": SCHEMA_VERSION, "kind": "gaps",
        "summary": {"techniques": len(catalog.techniques), "cells": total, "occupied": total - empty,
                    "empty": empty, "directions": len(directions), "annotated": len(annotated),
                    "conflicts": len(conflicts), "listed": len(listed)},
        "filters": {"stages": list(stages or []), "layers": list(layers or []), "dimensions": list(dimensions or [])},
        "rules": [r.id for r in ruleset.rules],
        "thresholds": {k: (thresholds or {}).get(k, v["value"]) for k, v in sorted(ruleset.thresholds.items())},
        "directions": listed, "annotated": annotated, "conflicts": conflicts,
    }


# ---------------------------------------------------------------------------------------------
# rendering

def axes_label(axes, axis: str, item: str) -> str:
    try:
        return axes.label(axis, item)
    except KeyError:
        return item


def render_text(report: dict[str, Any], axes=None) -> str:
    """People's view: summary, ranked directions with reasons, annotated cells, conflicts."""
    s = report["summary"]
    out = [f"optkg gaps: {s['empty']} empty cell(s) of {s['cells']} ({s['occupied']} occupied; "
           f"{s['annotated']} annotated as not a direction)", ""]
    out.append("Directions, most promising first" if report["directions"] else "No empty cells to rank.")
    for d in report["directions"]:
        lab = f"{d['stage']} × {d['layer']} × {d['dimension']}"
        if axes is not None:
            lab += f"  ({axes_label(axes, 'layers', d['layer'])})"
        out.append(f"  #{d['rank']:<3} {lab}   score {d['score']}")
        if not d["reasons"]:
            out.append("        no rule gives a reason to look here (no crowded neighbours, no costs landing)")
        for r in d["reasons"]:
            out.append(f"        - [{r['severity']}] {r['message']} ({r['rule']})")
    if report["directions"] and s["listed"] < s["directions"]:
        out.append(f"  ... {s['directions'] - s['listed']} more (drop --top to list all)")
    if report["annotated"]:
        out.append("")
        out.append("Not directions (annotated in axes.yaml)")
        for (status, reason, source), cells in _group_annotated(report["annotated"]):
            out.append(f"  {status} ({source}): {'; '.join(cells)}")
            out.append(textwrap.fill(one_line(reason), width=100, initial_indent="      ", subsequent_indent="      "))
    if report["conflicts"]:
        out.append("")
        out.append("Annotations contradicted by the catalog (a technique occupies the cell)")
        for a in report["conflicts"]:
            out.append(f"  {a['stage']} × {a['layer']} × {a['dimension']}: annotated {a['status']} but occupied by "
                       f"{', '.join(a['occupied_by'])} ({a['source']})")
    return fit_width("\n".join(out).rstrip()) + "\n"


def _group_annotated(annotated: list[dict[str, Any]]) -> list[tuple[tuple[str, str, str], list[str]]]:
    """Annotated cells grouped by the annotation that covers them (in report order)."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for a in annotated:
        groups.setdefault((a["status"], a["reason"], a["source"]), []).append(
            f"{a['stage']} × {a['layer']} × {a['dimension']}")
    return list(groups.items())


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(report: dict[str, Any]) -> str:
    """A markdown table of directions, then annotated cells and conflicts (for PR comments and docs)."""
    s = report["summary"]
    out = [f"### Gaps: {s['empty']} empty cells of {s['cells']}", "",
           f"{s['occupied']} cells occupied, {s['directions']} ranked as directions, "
           f"{s['annotated']} annotated as not a direction.", ""]
    if report["directions"]:
        out += ["| # | stage | layer | dimension | score | reasons |", "|---|---|---|---|---|---|"]
        for d in report["directions"]:
            reasons = "<br>".join(f"**{r['severity']}** {_md(r['message'])} (`{r['rule']}`)" for r in d["reasons"]) or "-"
            out.append(f"| {d['rank']} | {d['stage']} | {d['layer']} | {d['dimension']} | {d['score']} | {reasons} |")
        out.append("")
    if report["annotated"]:
        out += ["#### Not directions", "", "| cells | status | reason |", "|---|---|---|"]
        for (status, reason, source), cells in _group_annotated(report["annotated"]):
            out.append(f"| {'<br>'.join(cells)} | {status} | {_md(reason)} ({source}) |")
        out.append("")
    if report["conflicts"]:
        out += ["#### Annotations contradicted by the catalog", ""]
        for a in report["conflicts"]:
            out.append(f"- {a['stage']} × {a['layer']} × {a['dimension']} is annotated {a['status']} but holds "
                       f"{', '.join(a['occupied_by'])}")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# ---------------------------------------------------------------------------------------------
# rule fixtures

def _expand_compact(tid: str, t: dict[str, Any]) -> dict[str, Any]:
    """A fixture's compact technique ({stages, layers, dimension, costs: [dims], benefits: [dims],
    couplings: [{from_dimension, to_dimension}]}) as a catalog-shaped entry."""
    if not isinstance(t, dict) or not all(k in t for k in ("stages", "layers", "dimension")):
        raise OptkgError(f"gaps fixture technique '{tid}' needs stages, layers and dimension")
    return {
        "id": tid, "name": t.get("name", tid),
        "coordinates": {"stages": list(t["stages"]), "layers": list(t["layers"]), "dimension": t["dimension"]},
        "costs": [{"dimension": x, "what": "fixture cost"} for x in t.get("costs") or []],
        "benefits": [{"dimension": x, "what": "fixture benefit"} for x in t.get("benefits") or []],
        "couplings": [{"kind": c.get("kind", "causes"), "property": c.get("property", "fixture"),
                       "from_dimension": c["from_dimension"], "to_dimension": c["to_dimension"]}
                      for c in t.get("couplings") or []],
    }


def run_fixture(data: dict[str, Any], catalog, ruleset, base_dir) -> list:
    """Fixture runner for the ``gaps`` ruleset.

    ``data``: ``{cell: {stage, layer, dimension}, techniques: {id: compact entry}}`` (see
    ``_expand_compact``; the axes are the catalog's), or ``{cell: ..., catalog: <folder relative to
    the fixture file>}`` to use a whole fixture catalog. Returns the Firings for that cell.
    """
    if not isinstance(data, dict) or not isinstance(data.get("cell"), dict):
        raise OptkgError("gaps fixture input needs cell: {stage, layer, dimension}")
    c = data["cell"]
    cell = (c["stage"], c["layer"], c["dimension"])
    if data.get("catalog"):
        from kg.knowledge.catalog import load_catalog
        cat, problems = load_catalog(Path(base_dir) / data["catalog"], use_cache=False)
        if problems:
            raise OptkgError(f"fixture catalog {data['catalog']}: {problems[0].one_line()}")
        idx = CellIndex.build(cat.axes, cat.techniques)
    else:
        techs = {tid: _expand_compact(tid, t) for tid, t in (data.get("techniques") or {}).items()}
        idx = CellIndex.build(catalog.axes, techs)
    for axis, val in zip(("stage", "layer", "dimension"), cell):
        valid = getattr(idx.axes, f"{axis}_ids")
        if val not in valid:
            raise OptkgError(f"gaps fixture cell {axis} '{val}' is not one of {', '.join(valid)}")
    if idx.at(cell):
        raise OptkgError(f"gaps fixture cell {cell} is occupied by {', '.join(idx.at(cell))}; gaps rules see empty cells")
    _, firings = evaluate_cell(idx, cell, ruleset, data.get("thresholds"))
    return firings
