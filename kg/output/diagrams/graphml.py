"""GraphML of a view graph (``to_graphml``) for Gephi and yEd.
"""
from __future__ import annotations

from typing import Any

import networkx as nx


def _graphml_value(v: Any) -> Any:
    """A value GraphML can hold; text on one line (kg.core.textsafe.one_line: a line break in a name cannot start
    a line of the file, or of stdout with ``-o -``)."""
    from kg.core.textsafe import one_line
    if isinstance(v, (list, tuple)):
        return one_line(", ".join(str(x) for x in v))
    if isinstance(v, str):
        return one_line(v)
    if isinstance(v, (int, float, bool)):
        return v
    return None


def to_graphml(vg: nx.MultiDiGraph) -> str:
    """GraphML (Gephi, yEd) with an XML declaration: list attributes joined with ', ', empty values dropped."""
    g = nx.MultiDiGraph()
    for n in sorted(vg.nodes):
        g.add_node(n, **{k: _graphml_value(v) for k, v in sorted(vg.nodes[n].items())
                         if _graphml_value(v) not in (None, "")})
    for u, v, k, d in sorted(vg.edges(keys=True, data=True), key=lambda e: (e[0], e[1], e[2])):
        g.add_edge(u, v, key=k, **{a: _graphml_value(b) for a, b in sorted(d.items()) if _graphml_value(b) not in (None, "")})
    return '<?xml version="1.0" encoding="utf-8"?>\n' + "\n".join(nx.generate_graphml(g, named_key_ids=True)) + "\n"
