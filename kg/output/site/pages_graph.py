"""The coupling graph view (``graph.html``): one focus (a technique or a property), a depth and the
coupling kinds to follow; ``graph.js`` draws that neighbourhood with the vendored cytoscape.js
(deterministic ``breadthfirst`` layout around the focus) and lists every drawn coupling beside it, with
its condition (also shown on hover). It never draws the whole catalog: at most ``MAX_NODES`` nodes, the
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
DEFAULT_FOCUS = "tensor-parallelism"


def graph_page(m: dict[str, Any]) -> str:
    nodes = m["graph"]["nodes"]
    opts = "".join(f'<option value="{esc(n["id"])}">{esc(n["name"])} ({esc(n["type"])})</option>' for n in nodes)
    kinds = "".join(f'<label><input type="checkbox" name="kind" value="{k}" checked> '
                    f'<span class="swatch" style="background:{KIND_COLOUR[k]}"></span>{esc(k.replace("_", " "))}</label>'
                    for k in KINDS)
    focus = f"t:{DEFAULT_FOCUS}" if DEFAULT_FOCUS in m["techniques"] else (nodes[0]["id"] if nodes else "")
    links = "".join(f'<li><a href="{technique_href(tid)}#couplings-out">{esc(t["name"])}</a></li>'
                    for tid, t in m["techniques"].items())
    data = {"nodes": nodes, "edges": [{k: e[k] for k in ("key", "source", "target", "kind", "condition", "mechanism",
                                                          "severity")} for e in m["graph"]["edges"]],
            "default": focus, "max_nodes": MAX_NODES, "colours": KIND_COLOUR}
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
            '<section aria-labelledby="h-drawn" class="drawn"><h2 id="h-drawn">Drawn couplings</h2>'
            '<ol id="g-edges"></ol></section></div>'
            '<div id="tip" role="tooltip" hidden></div>'
            '<noscript><p>The drawing needs JavaScript. Every technique page lists its couplings in and out, with '
            f'conditions and sources:</p><ul class="cols">{links}</ul></noscript>'
            + data_island("graph-data", data))
    return page("Coupling graph", body, current="graph.html", scripts=["cytoscape.min.js", "graph.js"])
