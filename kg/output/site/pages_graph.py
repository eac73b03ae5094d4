"""The coupling graph view (``graph.html``): one focus (a technique or a property), a depth and the
coupling kinds to follow; ``graph.js`` draws that neighbourhood with the vendored cytoscape.js and lists every
drawn coupling beside it, with its condition (also shown on hover). Layout (deterministic, no physics): the focus on
the left, each depth a column to its right, a column's nodes grouped by the kind of coupling that reached them
(a title per group) and labels beside the nodes, so labels never overlap. Kinds differ by line style *and* colour
(``KIND_STYLE``; a legend draws each), so they read apart in grey scale too. It never draws the whole catalog: at most ``MAX_NODES`` nodes, the
rest counted. The state lives in the address (``graph.html#focus=t:<id>&depth=2&kinds=causes,requires``),
so technique pages link straight to their neighbourhood. Without JavaScript the page lists the
technique pages, which carry the same couplings as tables.
"""
from __future__ import annotations

from typing import Any

from kg.output.site.html import data_island, esc, page, technique_href
from kg.output.site.model import KINDS

MAX_NODES = 60
# edge colours by coupling kind (each >= 4.5:1 against white)
KIND_COLOUR = {"causes": "#a4000f", "amplifies": "#8a3b00", "mitigates": "#11603a", "conflicts_with": "#6a1b9a",
               "requires": "#0b4f9c", "replaces": "#4a4a4a"}
# line and arrow per kind, told apart without colour too: (name, cytoscape line-style, dash pattern, width, arrow)
KIND_STYLE = {"causes": ("solid", "solid", None, 1.8, "triangle"),
              "amplifies": ("dotted", "dotted", None, 2.4, "triangle"),
              "mitigates": ("solid", "solid", None, 1.8, "tee"),
              "conflicts_with": ("dashed", "dashed", [8, 4], 2.0, "diamond"),
              "requires": ("thick", "solid", None, 4.0, "chevron"),
              "replaces": ("dash-dot", "dashed", [10, 3, 2, 3], 2.0, "vee")}
_DASH = {"solid": "", "dotted": ' stroke-dasharray="2 3"', "dashed": ' stroke-dasharray="8 4"',
         "thick": "", "dash-dot": ' stroke-dasharray="10 3 2 3"'}


def _legend_swatch(kind: str) -> str:
    """A small inline SVG of the kind's line and arrow (the legend; hidden from screen readers, the text says it)."""
    colour, (style, _, _, width, arrow) = KIND_COLOUR[kind], KIND_STYLE[kind]
    line = f'<line x1="2" y1="7" x2="34" y2="7" stroke="{colour}" stroke-width="{width}"{_DASH[style]}/>'
    head = {"triangle": f'<polygon points="34,2 44,7 34,12" fill="{colour}"/>',
            "chevron": f'<polygon points="34,2 44,7 34,12 38,7" fill="{colour}"/>',
            "vee": f'<polyline points="35,2 44,7 35,12" fill="none" stroke="{colour}" stroke-width="2"/>',
            "tee": f'<line x1="40" y1="1" x2="40" y2="13" stroke="{colour}" stroke-width="3"/>',
            "diamond": f'<polygon points="34,7 39,2 44,7 39,12" fill="{colour}"/>'}[arrow]
    return f'<svg class="kindline" width="46" height="14" viewBox="0 0 46 14" aria-hidden="true">{line}{head}</svg>'


def legend() -> str:
    items = "".join(f"<li>{_legend_swatch(k)} {esc(k.replace('_', ' '))} "
                    f"<span class=\"muted\">({KIND_STYLE[k][0]} line, {KIND_STYLE[k][4]} end)</span></li>"
                    for k in KINDS)
    return (f'<section aria-labelledby="h-legend" class="legend-box"><h2 id="h-legend">Legend</h2><ul class="kinds">'
            f'{items}<li><span class="nodekey tech" aria-hidden="true"></span> technique '
            '<span class="nodekey prop" aria-hidden="true"></span> property '
            '<span class="nodekey focus" aria-hidden="true"></span> focus</li></ul></section>')
DEFAULT_FOCUS = "tensor-parallelism"


def graph_page(m: dict[str, Any]) -> str:
    nodes = m["graph"]["nodes"]
    opts = "".join(f'<option value="{esc(n["id"])}">{esc(n["name"])} ({esc(n["type"])})</option>' for n in nodes)
    kinds = "".join(f'<label><input type="checkbox" name="kind" value="{k}" checked> '
                    f'{_legend_swatch(k)}{esc(k.replace("_", " "))}</label>' for k in KINDS)
    focus = f"t:{DEFAULT_FOCUS}" if DEFAULT_FOCUS in m["techniques"] else (nodes[0]["id"] if nodes else "")
    links = "".join(f'<li><a href="{technique_href(tid)}#couplings-out">{esc(t["name"])}</a></li>'
                    for tid, t in m["techniques"].items())
    data = {"nodes": nodes, "edges": [{k: e[k] for k in ("key", "source", "target", "kind", "condition", "mechanism",
                                                          "severity")} for e in m["graph"]["edges"]],
            "default": focus, "max_nodes": MAX_NODES, "colours": KIND_COLOUR,
            "styles": {k: {"line": v[1], "dash": v[2], "width": v[3], "arrow": v[4]} for k, v in KIND_STYLE.items()}}
    body = ("<h1>Coupling graph</h1>"
            f"<p>{len(m['techniques'])} techniques and {len(m['properties'])} properties joined by "
            f"{len(m['graph']['edges'])} couplings. Pick a focus, a depth and the coupling kinds; at most {MAX_NODES} "
            "nodes are drawn. Hover or focus a coupling in the list (or hover an edge) for its condition.</p>"
            '<form id="graph-form" class="filters" hidden aria-label="Graph focus">'
            f'<label>Focus <select id="g-focus">{opts}</select></label>'
            '<label>Depth <select id="g-depth"><option>1</option><option>2</option><option>3</option></select></label>'
            f'<fieldset><legend>Coupling kinds</legend>{kinds}</fieldset></form>'
            '<p id="g-status" class="count" aria-live="polite"></p>'
            '<div class="graphwrap"><div id="cy" role="img" aria-label="Coupling graph around the focus"></div>'
            f'<div class="side">{legend()}'
            '<section aria-labelledby="h-drawn" class="drawn"><h2 id="h-drawn">Drawn couplings</h2>'
            '<ol id="g-edges"></ol></section></div></div>'
            '<div id="tip" role="tooltip" hidden></div>'
            '<noscript><p>The drawing needs JavaScript. Every technique page lists its couplings in and out, with '
            f'conditions and sources:</p><ul class="cols">{links}</ul></noscript>'
            + data_island("graph-data", data))
    return page("Coupling graph", body, current="graph.html", scripts=["cytoscape.min.js", "graph.js"])
