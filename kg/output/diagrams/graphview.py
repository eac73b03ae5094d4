"""The coupling graph (``coupling_graph``): the networkx view of the catalog (``graph_view``), its DOT
with grid positions (``graph_dot``, Graphviz ``nop2``) or a ``dot``/``fdp`` layout, and node-link JSON.
"""
from __future__ import annotations

import textwrap
from typing import Any

import networkx as nx

from kg.core.errors import OptkgError
from kg.output.diagrams.dot import DotWriter, HtmlLabel
from kg.output.diagrams.escape import _clean, html_text
from kg.output.diagrams.filters import Filters
from kg.output.diagrams.render import Diagram, SCHEMA_VERSION
from kg.output.diagrams.style import (CONDITIONAL_ALPHA, CONDITIONAL_PENWIDTH, EDGE_STYLES, FIRED_STYLE, HELD_STYLE,
                                      FIX_STYLE, FONT, SEED, _legend_html, _span_text, dimension_colours)


# ---------------------------------------------------------------------------------------------
# the coupling graph

def _crossing(a: str | None, b: str | None) -> str:
    return f"{a} → {b}" if a and b and a != b else ""


def graph_view(catalog, filters: Filters | None = None, *, focus: str | None = None, depth: int = 1,
               properties: bool = True) -> nx.MultiDiGraph:
    """The view graph of the coupling graph: kept techniques, the properties they couple through
    (when ``properties``), and every declared coupling between kept nodes.

    Node keys as in kg.knowledge.graph (``t:<id>``, ``p:<id>``); node attributes: type, id, label, cluster
    (a layer id or 'properties'), dimension, stages, layers, status, tags, focus; edge attributes:
    kind, from_dimension, to_dimension, label (the crossing, '' within one dimension), condition,
    severity, mechanism, role='coupling'. ``focus``: keep only nodes within ``depth`` hops (either
    direction) of that technique or property. Raises OptkgError for an unknown focus or depth < 0.
    """
    from kg.knowledge.graph import build_graph, neighbourhood, node_for, tnode
    f = (filters or Filters()).validate(catalog)
    g = build_graph(catalog)
    kept = {tnode(t) for t in catalog.techniques if f.keep(catalog, t)}
    nodes = set(kept)
    if properties:
        for u, v in g.edges():
            if u in kept and v.startswith("p:"):
                nodes.add(v)
            if v in kept and u.startswith("p:"):
                nodes.add(u)
        # follow property -> property effects so a derived property reached only through another
        # property is drawn too (every declared edge between drawn nodes is drawn)
        grew = True
        while grew:
            grew = False
            for u, v in g.edges():
                if u.startswith("p:") and v.startswith("p:") and (u in nodes) != (v in nodes):
                    nodes.update((u, v))
                    grew = True
    sub = g.subgraph(nodes)
    focus_node = None
    if focus:
        if depth < 0:
            raise OptkgError(f"--depth: expected 0 or more hops, found {depth}")
        focus_node = node_for(g, catalog, focus)
        if focus_node.startswith("p:") and not properties:
            raise OptkgError(f"--focus: '{focus}' is a property; drop --no-properties to focus on it")
        if focus_node not in sub:
            sub = g.subgraph(nodes | {focus_node})
            if focus_node.startswith("t:"):
                raise OptkgError(f"--focus: technique '{focus}' is excluded by the filters")
        sub = neighbourhood(sub, focus_node, depth)
    axes = catalog.axes
    vg = nx.MultiDiGraph()
    clusters = [(l, f"{l} {axes.label('layers', l)}") for l in reversed(axes.layer_ids)]
    if properties:
        clusters.append(("properties", "Model, hardware, workload and derived properties"))
    vg.graph.update({"title": "optkg coupling graph" + (f" around {focus} (depth {depth})" if focus else ""),
                     "clusters": [list(c) for c in clusters], "focus": focus_node or ""})
    for n in sorted(sub.nodes):
        d = sub.nodes[n]
        if d["type"] == "technique":
            span = axes.layer_span(d["layers"])
            vg.add_node(n, type="technique", id=d["id"], label=d["name"], short_name=d["short_name"],
                        cluster=span[0], dimension=d["dimension"], stages=list(d["stages"]), layers=span,
                        status=d["status"], tags=list(d["tags"]), focus=(n == focus_node), role="technique")
        else:
            vg.add_node(n, type="property", id=d["id"], label=d["name"], cluster="properties",
                        dimension=d.get("dimension") or "", property_kind=d.get("kind", ""),
                        focus=(n == focus_node), role="property")
    for u, v, k, d in sorted(sub.edges(keys=True, data=True), key=lambda e: (e[0], e[1], e[2])):
        if d["kind"] not in EDGE_STYLES:
            raise OptkgError(f"coupling {k}: kind '{d['kind']}' has no diagram style (kg.output.diagrams.style.EDGE_STYLES)")
        vg.add_edge(u, v, key=k, kind=d["kind"], from_dimension=d.get("from_dimension") or "",
                    to_dimension=d.get("to_dimension") or "",
                    label=_crossing(d.get("from_dimension"), d.get("to_dimension")),
                    condition=d.get("condition") or "", severity=d.get("severity") or "",
                    mechanism=d.get("mechanism") or "", role="coupling")
    return vg


def _node_attrs(vg: nx.MultiDiGraph, n: str, cols: dict[str, tuple[str, str]], axes,
                compact: bool = False) -> dict[str, Any]:
    d = vg.nodes[n]
    fill, stroke = cols.get(d.get("dimension") or "", ("#ffffff", "#777777"))
    role = d.get("role")
    if role in ("technique", "fix"):
        span = _span_text(d.get("layers") or [])
        sub = f"{span} · {d.get('dimension', '')}"
        if compact:  # position already says layer and dimension; say the span only when it is one
            text = "<BR/>".join(f"<B>{html_text(x)}</B>" for x in _wrap(d["label"]))
            label = HtmlLabel(text + (f'<BR/><FONT POINT-SIZE="8">{html_text(span)}</FONT>' if "–" in span else ""))
        else:
            label = HtmlLabel(f"<B>{html_text(d['label'])}</B><BR/><FONT POINT-SIZE=\"8\">{html_text(sub)}</FONT>")
        style = "rounded,filled"
        if d.get("status") == "experimental":
            style += ",dashed"
        if d.get("status") == "deprecated":
            fill = "#eeeeee"
        tip = f"{d['id']}: {d['label']} [{'/'.join(d.get('stages') or [])} × {span} × {d.get('dimension', '')}]"
        a = {"label": label, "shape": "box", "style": style, "fillcolor": fill, "color": stroke,
             "tooltip": tip}
        if role == "fix":
            a.update({"style": "rounded,dashed", "fillcolor": "#ffffff", "color": FIX_STYLE["color"],
                      "tooltip": tip + " (suggested fix)"})
    elif role == "property":
        text = "<BR/>".join(html_text(x) for x in (_wrap(d["label"]) if compact else [d["label"]]))
        a = {"label": HtmlLabel(f"<I>{text}</I>"), "shape": "ellipse", "style": "filled",
             "fillcolor": "#ffffff", "color": stroke, "fontsize": 9,
             "tooltip": f"property {d['id']} ({d.get('property_kind', '')}, {d.get('dimension', '')})"}
    else:  # a cost or finding pseudo node of the stack diagram
        a = {"label": HtmlLabel(html_text(d["label"])), "shape": "note", "style": "filled",
             "fillcolor": "#fde0dd", "color": FIRED_STYLE["color"], "fontsize": 9, "tooltip": d["label"]}
    if d.get("focus"):
        a["penwidth"] = 3
    if d.get("in_stack"):
        a["penwidth"] = 2
    return a


def _edge_attrs(d: dict[str, Any]) -> dict[str, Any]:
    role = d.get("role", "coupling")
    if role == "fired":
        st = FIRED_STYLE
    elif role == "fix":
        st = FIX_STYLE
    elif role == "held":  # keeps its kind's arrowhead, loses its colour
        st = {**EDGE_STYLES[d["kind"]], **HELD_STYLE}
    else:
        st = EDGE_STYLES[d["kind"]]
    tip = f"{d.get('kind', role)}: {d.get('mechanism', '')}"
    if d.get("condition"):
        tip += f" when {d['condition']}"
    a: dict[str, Any] = {"color": st["color"], "style": st["style"], "arrowhead": st["arrowhead"],
                         "tooltip": tip.strip()}
    if "penwidth" in st:
        a["penwidth"] = st["penwidth"]
    if role == "coupling" and d.get("condition"):
        # a coupling that holds only under its condition: dashed and in a lighter tint of its colour
        a["style"] = "dashed"
        a["color"] = st["color"] + CONDITIONAL_ALPHA
        a["penwidth"] = CONDITIONAL_PENWIDTH
    if d.get("label"):
        a["label"] = HtmlLabel("<BR/>".join(html_text(x) for x in str(d["label"]).split("\n")))
        a["fontcolor"] = st["color"]
    return a


# grid layout: the coordinate map's geometry for the coupling graph (rows = layers, columns =
# dimensions, properties in a band of their own). Sizes in points (1/72 in).
GRID_SLOT_W = 178.0      # horizontal slot per node; two slots per cell
GRID_PER_ROW = 2
GRID_ROW_H = 50.0
GRID_PAD = 16.0
GRID_HEADER_H = 26.0
GRID_WRAP = 22           # characters per label line
CHAR_W = 6.4             # average glyph width at 10 pt (DejaVu Sans, bold), for sizing only


def _wrap(text: str, width: int = GRID_WRAP) -> list[str]:
    return textwrap.wrap(_clean(text), width=width, break_long_words=True, break_on_hyphens=False) or [""]


def _grid_positions(vg: nx.MultiDiGraph, axes) -> tuple[dict[str, tuple[float, float]], list[tuple[str, str, tuple]],
                                                         list[tuple[str, float, float]], float, float]:
    """Positions for the grid layout: (pos, bands [(cluster id, label, bb)], column headers
    [(text, x, y)], width, height). Nodes go to the band of their cluster and the column of their
    dimension, in id order, GRID_PER_ROW to a row."""
    dims = list(axes.dimension_ids)
    extra = sorted({d.get("dimension") or "" for _, d in vg.nodes(data=True)} - set(dims))
    dims += extra
    col_w = GRID_SLOT_W * GRID_PER_ROW + GRID_PAD
    width = GRID_PAD + col_w * len(dims)
    order = [c[0] for c in vg.graph.get("clusters", [])]
    labels = {c[0]: c[1] for c in vg.graph.get("clusters", [])}
    cells: dict[tuple[str, str], list[str]] = {}
    for n in sorted(vg.nodes):
        d = vg.nodes[n]
        cells.setdefault((d.get("cluster") or "", d.get("dimension") or ""), []).append(n)
    bands_order = [c for c in order if any(k[0] == c for k in cells)] + \
        sorted({k[0] for k in cells} - set(order))
    y = 0.0  # from the top, growing downwards; flipped at the end (Graphviz y grows upwards)
    placed: dict[str, tuple[float, float]] = {}
    bands = []
    for b in bands_order:
        rows = max((-(-len(cells.get((b, d), [])) // GRID_PER_ROW) for d in dims), default=0)
        h = GRID_HEADER_H + max(rows, 1) * GRID_ROW_H + GRID_PAD
        for ci, d in enumerate(dims):
            for i, n in enumerate(cells.get((b, d), [])):
                x = GRID_PAD + ci * col_w + GRID_PAD / 2 + (i % GRID_PER_ROW + 0.5) * GRID_SLOT_W
                placed[n] = (x, y + GRID_HEADER_H + (i // GRID_PER_ROW + 0.5) * GRID_ROW_H)
        bands.append((b, labels.get(b, b), (0.0, y, width, y + h)))
        y += h + GRID_PAD
    height = y
    pos = {n: (round(x, 1), round(height - yy, 1)) for n, (x, yy) in placed.items()}
    bbs = [(b, lab, (0.0, round(height - y1, 1), round(x1, 1), round(height - y0, 1)))
           for b, lab, (_, y0, x1, y1) in bands]
    headers = [(axes.label("dimensions", d) if d in axes.dimension_ids else (d or "no dimension"),
                round(GRID_PAD + ci * col_w + col_w / 2, 1), round(height + 14, 1)) for ci, d in enumerate(dims)]
    return pos, bbs, headers, width, height


def graph_dot(vg: nx.MultiDiGraph, axes, engine: str, graph_attrs: dict[str, Any] | None = None,
              clusters: bool = True, legend: bool = True) -> str:
    """DOT for a view graph: clusters in the view's order, nodes sorted within them, edges sorted.

    ``engine``: ``grid`` (positions from the coordinates, drawn with Graphviz ``nop2``: rows are
    layers, columns are dimensions, so a dimension crossing is a sideways edge), ``dot`` (layered;
    for focus and stack views), or a force-directed engine (``fdp``, ``sfdp``, ``neato``; seeded)."""
    cols = dimension_colours(axes)
    title = vg.graph.get("title", "")
    n_t = sum(1 for _, d in vg.nodes(data=True) if d.get("type") == "technique")
    n_p = sum(1 for _, d in vg.nodes(data=True) if d.get("type") == "property")
    ne = vg.number_of_edges()
    sub = (f"{n_t} technique{'s' if n_t != 1 else ''}, {n_p} propert{'ies' if n_p != 1 else 'y'}, "
           f"{ne} coupling{'s' if ne != 1 else ''}")
    if engine == "grid":
        sub += "; rows are layers, columns are primary dimensions: a sideways edge crosses dimensions"
    lab = f'<FONT POINT-SIZE="20"><B>{html_text(title)}</B></FONT><BR/><FONT POINT-SIZE="11">{html_text(sub)}</FONT>'
    if legend:
        lab = f'<TABLE BORDER="0" CELLSPACING="0"><TR><TD>{lab}</TD></TR><TR><TD>{_legend_html(axes).html}</TD></TR></TABLE>'
    grid = engine == "grid"
    ga: dict[str, Any] = {"layout": "nop2" if grid else engine, "fontname": FONT, "bgcolor": "white", "pad": 0.3,
                          "labelloc": "t", "label": HtmlLabel(lab)}
    if grid:
        ga.update({"splines": "curved", "outputorder": "edgesfirst"})
    elif engine in ("fdp", "neato", "sfdp"):
        ga.update({"start": SEED, "overlap": "false", "splines": "curved", "K": 0.35, "sep": "+6",
                   "outputorder": "edgesfirst"})
    elif engine == "dot":
        ga.update({"rankdir": "LR", "newrank": True, "nodesep": 0.25, "ranksep": 0.6, "splines": "true"})
    else:
        raise OptkgError(f"--engine: unknown layout engine '{engine}' (grid, dot, fdp, sfdp, neato)")
    ga.update(graph_attrs or {})
    w = DotWriter(vg.graph.get("name", "coupling_graph"), ga,
                  node={"fontname": FONT, "fontsize": 10, "margin": "0.08,0.04"},
                  edge={"fontname": FONT, "fontsize": 7 if grid else 8, "arrowsize": 0.7})
    pos, bbs, headers, width, height = _grid_positions(vg, axes) if grid else ({}, [], [], 0.0, 0.0)
    bb_of = {b: bb for b, _, bb in bbs}
    order = [c[0] for c in vg.graph.get("clusters", [])]
    names = {x[0]: x[1] for x in vg.graph.get("clusters", [])}
    by_cluster: dict[str, list[str]] = {}
    for n in sorted(vg.nodes):
        by_cluster.setdefault(vg.nodes[n].get("cluster") or "", []).append(n)
    for c in order + sorted(set(by_cluster) - set(order)):
        members = by_cluster.get(c)
        if not members:
            continue
        if clusters and c:
            ca: dict[str, Any] = {"label": HtmlLabel(f"<B>{html_text(names.get(c, c))}</B>"), "style": "rounded,filled",
                                  "fillcolor": "#f7f7f7", "color": "#cccccc", "fontname": FONT, "fontsize": 12}
            if grid:
                ca.update({"bb": ",".join(f"{v:g}" for v in bb_of[c]), "labeljust": "l", "labelloc": "t",
                           "lp": f"{round(12 + len(names.get(c, c)) * CHAR_W * 0.62, 1):g},{bb_of[c][3] - 11:g}"})
            w.open_subgraph(f"cluster_{c}", ca)
        for n in members:
            a = _node_attrs(vg, n, cols, axes, compact=grid)
            if grid:
                a["pos"] = f"{pos[n][0]:g},{pos[n][1]:g}!"
            w.node(n, a)
        if clusters and c:
            w.close()
    for u, v, k, d in sorted(vg.edges(keys=True, data=True), key=lambda e: (e[0], e[1], e[2])):
        w.edge(u, v, _edge_attrs(d))
    for i, (text, x, y) in enumerate(headers):
        w.node(f"column:{i}", {"shape": "plaintext", "label": HtmlLabel(f'<FONT POINT-SIZE="14"><B>{html_text(text)}</B></FONT>'),
                               "pos": f"{x:g},{y:g}!"})
    return w.text()


def node_link(vg: nx.MultiDiGraph, kind: str) -> dict[str, Any]:
    """Node-link JSON of a view graph, with schema_version and kind."""
    d = nx.node_link_data(vg, edges="links")
    d["graph"] = {k: v for k, v in d["graph"].items() if k != "palette"}
    return {"schema_version": SCHEMA_VERSION, "kind": kind, **d}


def coupling_graph(catalog, filters: Filters | None = None, *, focus: str | None = None, depth: int = 1,
                   properties: bool = True, engine: str | None = None) -> Diagram:
    """The coupling graph diagram (see module doc). Engine: fdp for the whole graph, dot for a focus."""
    vg = graph_view(catalog, filters, focus=focus, depth=depth, properties=properties)
    vg.graph["palette"] = {k: list(v) for k, v in dimension_colours(catalog.axes).items()}
    vg.graph["name"] = "coupling_graph"
    eng = engine or ("dot" if focus else "grid")
    dot = graph_dot(vg, catalog.axes, eng)
    return Diagram("graph", dot, node_link(vg, "graph"), vg, vg.graph["title"],
                   ("svg", "png", "pdf", "dot", "mermaid", "graphml", "json"))
