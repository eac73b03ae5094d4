"""The coordinate map (``coordinate_map``): layers x dimensions per stage panel, each cell listing its
techniques, shaded by count; ranked gaps and annotated cells highlighted. Engine ``dot``.
"""
from __future__ import annotations

from typing import Any

from kg.core.errors import OptkgError
from kg.output.diagrams.dot import DotWriter, HtmlLabel
from kg.output.diagrams.escape import dot_string, html_text
from kg.output.diagrams.filters import Filters
from kg.output.diagrams.render import Diagram, SCHEMA_VERSION
from kg.output.diagrams.style import FONT, _wrap_names, short_name


# coordinate-map shading: (minimum count, background, text colour)
SHADES = [(12, "#08519c", "#ffffff"), (8, "#3182bd", "#ffffff"), (5, "#6baed6", "#000000"),
          (3, "#9ecae1", "#000000"), (2, "#c6dbef", "#000000"), (1, "#eff3ff", "#000000")]
EMPTY_BG = "#fafafa"
MAP_CELL_W = 175  # points; fits MAP_WRAP characters at 11 pt
MAP_WRAP = 26
GAP_TOP_BG, GAP_BG, GAP_BORDER = "#fdae6b", "#fee6ce", "#e6550d"
ANNOTATED_BG = "#e0e0e0"


# ---------------------------------------------------------------------------------------------
# coordinate map

def _shade(n: int) -> tuple[str, str]:
    for minimum, bg, fg in SHADES:
        if n >= minimum:
            return bg, fg
    return EMPTY_BG, "#999999"


def map_cells(catalog, filters: Filters | None = None) -> dict[str, Any]:
    """The coordinate map as data: panels (one per selected stage, then 'combined'), each with a
    cell per selected layer x dimension listing the ids of the kept techniques that occupy it."""
    f = (filters or Filters()).validate(catalog)
    ax = catalog.axes
    stages = [s for s in ax.stage_ids if not f.stages or s in f.stages]
    layers = [l for l in reversed(ax.layer_ids) if not f.layers or l in f.layers]  # L7 first
    dims = [d for d in ax.dimension_ids if not f.dimensions or d in f.dimensions]
    keep = [tid for tid in sorted(catalog.techniques) if f.keep(catalog, tid)]
    occ: dict[tuple[str, str, str], list[str]] = {}
    for tid in keep:
        for cell in catalog.cells(tid):
            occ.setdefault(cell, []).append(tid)
    panels = []
    for s in stages + ["combined"]:
        cells = []
        for l in layers:
            for d in dims:
                if s == "combined":
                    ids = sorted({t for ss in stages for t in occ.get((ss, l, d), [])})
                else:
                    ids = list(occ.get((s, l, d), []))
                cells.append({"layer": l, "dimension": d, "techniques": ids, "count": len(ids)})
        techs = sorted({t for c in cells for t in c["techniques"]})
        panels.append({"stage": s, "techniques": len(techs),
                       "empty": sum(1 for c in cells if not c["count"]), "cells": cells})
    return {"schema_version": SCHEMA_VERSION, "kind": "map", "filters": f.to_dict(),
            "stages": stages, "layers": layers, "dimensions": dims, "panels": panels,
            "techniques": {tid: {"name": catalog.techniques[tid]["name"],
                                 "short_name": short_name(catalog.techniques[tid])} for tid in keep}}


def _panel_html(catalog, data: dict[str, Any], panel: dict[str, Any], gap_cells: dict, width: int) -> str:
    ax = catalog.axes
    dims, layers = data["dimensions"], data["layers"]
    s = panel["stage"]
    if s == "combined":
        title = "All stages combined" if len(data["stages"]) == len(ax.stage_ids) else \
            "Combined: " + ", ".join(ax.label("stages", x) for x in data["stages"])
        zh = ""
    else:
        title, zh = ax.label("stages", s), next(x["name_zh"] for x in ax.stages if x["id"] == s)
    ncells = len(panel["cells"])
    sub = f"{panel['techniques']} technique(s); {panel['empty']} of {ncells} cells empty"
    rows = [f'<TR><TD COLSPAN="{len(dims) + 1}" BORDER="0" ALIGN="LEFT"><FONT POINT-SIZE="18"><B>{html_text(title)}</B>'
            f'{(" " + html_text(zh)) if zh else ""}</FONT>  <FONT POINT-SIZE="11" COLOR="#555555">{html_text(sub)}</FONT></TD></TR>']
    head = '<TD BGCOLOR="#eeeeee" WIDTH="200"><FONT POINT-SIZE="10">layer \\ dimension</FONT></TD>'
    for d in dims:
        dz = next(x["name_zh"] for x in ax.dimensions if x["id"] == d)
        head += f'<TD BGCOLOR="#eeeeee" WIDTH="{MAP_CELL_W}"><B>{html_text(ax.label("dimensions", d))}</B><BR/>' \
                f'<FONT POINT-SIZE="10">{html_text(dz)}</FONT></TD>'
    rows.append(f"<TR>{head}</TR>")
    by = {(c["layer"], c["dimension"]): c for c in panel["cells"]}
    names = data["techniques"]
    for l in layers:
        lz = next(x["name_zh"] for x in ax.layers if x["id"] == l)
        row = f'<TD BGCOLOR="#eeeeee" ALIGN="LEFT"><B>{html_text(l)}</B> {html_text(ax.label("layers", l))}' \
              f'<BR/><FONT POINT-SIZE="10">{html_text(lz)}</FONT></TD>'
        for d in dims:
            c = by[(l, d)]
            tip = f"{title} × {l} × {d}: " + (", ".join(c["techniques"]) if c["techniques"] else "empty")
            gap = gap_cells.get((s, l, d)) if s != "combined" else None
            if c["count"]:
                bg, fg = _shade(c["count"])
                lines = _wrap_names([names[t]["short_name"] for t in c["techniques"]], width)
                body = "<BR/>".join(f'<FONT COLOR="{fg}">{html_text(x)}</FONT>' for x in lines)
                body += f'<BR/><FONT POINT-SIZE="9" COLOR="{fg}">({c["count"]})</FONT>'
                attrs = f'BGCOLOR="{bg}"'
            elif gap and gap["type"] == "direction" and gap["rank"] <= gap["top"] * 3 and gap["score"] > 0:
                top = gap["rank"] <= gap["top"]
                body = f'<B>gap #{gap["rank"]}</B><BR/><FONT POINT-SIZE="9">score {gap["score"]}</FONT>'
                attrs = f'BGCOLOR="{GAP_TOP_BG if top else GAP_BG}" COLOR="{GAP_BORDER}" BORDER="{3 if top else 1}"'
                tip += f" — gap #{gap['rank']}: " + "; ".join(gap["reasons"])
            elif gap and gap["type"] == "annotated":
                body = f'<FONT COLOR="#555555"><I>{html_text(gap["status"])}</I></FONT>'
                attrs = f'BGCOLOR="{ANNOTATED_BG}"'
                tip += f" — {gap['status']}: {gap['reason']}"
            else:
                body = '<FONT COLOR="#aaaaaa">—</FONT>'
                attrs = f'BGCOLOR="{EMPTY_BG}"'
                if gap:
                    tip += f" — gap #{gap['rank']} (score {gap['score']})"
            row += f'<TD {attrs} VALIGN="MIDDLE" TOOLTIP="{html_text(tip)}">{body}</TD>'
        rows.append(f"<TR>{row}</TR>")
    return ('<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="5" COLOR="#bbbbbb">'
            + "".join(rows) + "</TABLE>")


def _gap_cells(gaps: dict[str, Any] | None, top: int) -> dict[tuple[str, str, str], dict[str, Any]]:
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    if not gaps:
        return out
    for d in gaps.get("directions", []):
        out[(d["stage"], d["layer"], d["dimension"])] = {
            "type": "direction", "rank": d["rank"], "score": d["score"], "top": top,
            "reasons": [r["message"] for r in d.get("reasons", [])]}
    for a in gaps.get("annotated", []):
        out[(a["stage"], a["layer"], a["dimension"])] = {"type": "annotated", "status": a["status"], "reason": a["reason"]}
    return out


def coordinate_map(catalog, filters: Filters | None = None, *, combined: bool = True, stage_panels: bool = True,
                   gaps: dict[str, Any] | None = None, gaps_top: int = 10, wrap: int = MAP_WRAP) -> Diagram:
    """The coordinate map (see module doc). ``gaps``: a ``kg.analyses.gaps.find_gaps`` report to highlight
    (top ``gaps_top`` ranked cells bold, other directions light, annotated cells grey)."""
    data = map_cells(catalog, filters)
    gap_cells = _gap_cells(gaps, gaps_top)
    panels = [p for p in data["panels"] if (p["stage"] == "combined" and combined)
              or (p["stage"] != "combined" and stage_panels)]
    if not panels:
        raise OptkgError("nothing to draw: choose at least the combined panel or the stage panels")
    title = "optkg coordinate map" + (" — gaps view" if gaps else "")
    caption = ("cell shade = number of techniques; — empty cell" +
               (f"; orange = gap ranked 1-{gaps_top * 3} by optkg gaps (bold: top {gaps_top}); "
                "grey = annotated impossible / out of scope"
                if gaps else ""))
    w = DotWriter("coordinate_map", {
        "layout": "dot", "rankdir": "TB", "nodesep": 0.5, "ranksep": 0.4, "fontname": FONT, "bgcolor": "white",
        "labelloc": "t", "labeljust": "l", "pad": 0.3,
        "label": HtmlLabel(f'<FONT POINT-SIZE="22"><B>{html_text(title)}</B></FONT><BR/>'
                           f'<FONT POINT-SIZE="11" COLOR="#555555">{html_text(caption)}</FONT>'),
    }, node={"shape": "plaintext", "fontname": FONT, "fontsize": 11, "margin": 0})
    ids = []
    for p in panels:
        nid = f"panel:{p['stage']}"
        ids.append(nid)
        w.node(nid, {"label": HtmlLabel(_panel_html(catalog, data, p, gap_cells, wrap))})
    # two panels per row, in axis order, the combined panel last
    for i in range(0, len(ids), 2):
        row = ids[i:i + 2]
        if len(row) == 2:
            w.raw("{rank=same; " + " ".join(dot_string(x) for x in row) + ";}")
            w.edge(row[0], row[1], {"style": "invis"})
        if i + 2 < len(ids):
            w.edge(row[0], ids[i + 2], {"style": "invis"})
    if gaps:
        data = dict(data)
        data["gaps"] = [{"stage": k[0], "layer": k[1], "dimension": k[2], **{x: y for x, y in v.items() if x != "top"}}
                        for k, v in sorted(gap_cells.items())]
    return Diagram("map", w.text(), data, None, title)
