"""A minimal deterministic Graphviz DOT writer (``DotWriter``) and HTML-like labels (``HtmlLabel``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kg.output.diagrams.escape import dot_string


# ---------------------------------------------------------------------------------------------
# DOT writing

def _attrs(d: dict[str, Any]) -> str:
    """DOT attribute list. Values that start with '<' and end with '>' are HTML labels (already
    escaped by their builder); everything else is a quoted string."""
    parts = []
    for k, v in d.items():
        if v is None:
            continue
        if isinstance(v, HtmlLabel):
            parts.append(f"{k}=<{v.html}>")
        elif isinstance(v, bool):
            parts.append(f"{k}={'true' if v else 'false'}")
        elif isinstance(v, (int, float)):
            parts.append(f"{k}={v}")
        else:
            parts.append(f"{k}={dot_string(v)}")
    return "[" + ", ".join(parts) + "]" if parts else ""


@dataclass(frozen=True)
class HtmlLabel:
    """An HTML-like label body (without the outer ``< >``), built from escaped text only."""

    html: str


class DotWriter:
    """A minimal DOT writer: statements in the order given (callers give sorted ids)."""

    def __init__(self, name: str, graph: dict[str, Any], node: dict[str, Any] | None = None,
                 edge: dict[str, Any] | None = None):
        self.lines = [f"digraph {dot_string(name)} {{", f"  graph {_attrs(graph)};"]
        if node:
            self.lines.append(f"  node {_attrs(node)};")
        if edge:
            self.lines.append(f"  edge {_attrs(edge)};")
        self.depth = 1

    def _put(self, s: str) -> None:
        self.lines.append("  " * self.depth + s)

    def node(self, nid: str, attrs: dict[str, Any]) -> None:
        self._put(f"{dot_string(nid)} {_attrs(attrs)};")

    def edge(self, a: str, b: str, attrs: dict[str, Any]) -> None:
        self._put(f"{dot_string(a)} -> {dot_string(b)} {_attrs(attrs)};")

    def open_subgraph(self, name: str, attrs: dict[str, Any]) -> None:
        self._put(f"subgraph {dot_string(name)} {{")
        self.depth += 1
        if attrs:
            self._put(f"graph {_attrs(attrs)};")

    def close(self) -> None:
        self.depth -= 1
        self._put("}")

    def raw(self, s: str) -> None:
        self._put(s)

    def text(self) -> str:
        return "\n".join(self.lines + ["}"]) + "\n"
