"""Helpers for the export tests: read diagrams back (Mermaid, DOT, SVG) without trusting the writer."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CATALOGS = REPO / "tests" / "fixtures" / "catalogs"
TINY = CATALOGS / "tiny"
HOSTILE = CATALOGS / "hostile"
GOLDEN = REPO / "tests" / "golden"

# A Mermaid node statement as kg.output.diagrams writes it: id, then ["label"], (["label"]) or >"label"]
MERMAID_NODE = re.compile(r'^\s+([A-Za-z0-9_]+)(\["([^"]*)"\]|\(\["([^"]*)"\]\)|>"([^"]*)"\])$')
# An edge statement: id, arrow, optional |"label"|, id
MERMAID_EDGE = re.compile(r'^\s+([A-Za-z0-9_]+) (-->|==>|-\.->|--x|--o)(\|"([^"]*)"\|)? ([A-Za-z0-9_]+)$')
ENTITY = re.compile(r"#(\d+);")


def mermaid_decode(text: str) -> str:
    """Undo kg.output.diagrams.escape.mermaid_text: ``#<code>;`` entities back to characters."""
    return ENTITY.sub(lambda m: chr(int(m.group(1))), text)


def parse_mermaid(text: str) -> tuple[dict[str, str], list[tuple[str, str, str, str]], list[str]]:
    """(nodes id -> decoded label, edges [(from, arrow, decoded label, to)], unparsed lines).

    Structure lines (header, subgraph/end, classDef, class, linkStyle, comments) are recognised
    and skipped; anything else that is neither a node nor an edge is returned as unparsed."""
    nodes: dict[str, str] = {}
    edges: list[tuple[str, str, str, str]] = []
    other: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("%%") or s == "flowchart LR" or s == "end" \
                or re.match(r'^subgraph [A-Za-z0-9_]+\["[^"]*"\]$', s) \
                or re.match(r"^(classDef|class|linkStyle) ", s):
            continue
        m = MERMAID_NODE.match(line)
        if m:
            label = next(g for g in m.groups()[2:] if g is not None)
            nodes[m.group(1)] = mermaid_decode(label)
            continue
        m = MERMAID_EDGE.match(line)
        if m:
            edges.append((m.group(1), m.group(2), mermaid_decode(m.group(4) or ""), m.group(5)))
            continue
        other.append(line)
    return nodes, edges, other


DOT_NODE = re.compile(r'^\s+"([tp]:[^"]+)" \[', re.M)
DOT_EDGE = re.compile(r'^\s+"([^"]+)" -> "([^"]+)" \[', re.M)


def dot_nodes(dot: str) -> list[str]:
    """Technique and property node ids declared in a DOT file written by kg.output.diagrams."""
    return DOT_NODE.findall(dot)


def dot_edges(dot: str) -> list[tuple[str, str]]:
    return [(a, b) for a, b in DOT_EDGE.findall(dot)]


SVG = "{http://www.w3.org/2000/svg}"


def svg_node_texts(svg: bytes) -> dict[str, str]:
    """Parse an SVG from Graphviz (must be well-formed XML) and return node title -> the node's text
    elements joined by single spaces."""
    root = ET.fromstring(svg)
    out = {}
    for g in root.iter(f"{SVG}g"):
        if g.get("class") != "node":
            continue
        title = g.find(f"{SVG}title")
        texts = [t.text or "" for t in g.iter(f"{SVG}text")]
        out[title.text if title is not None else ""] = " ".join(" ".join(texts).split())
    return out


def svg_all_text(svg: bytes) -> str:
    """Every text element and every tooltip of the SVG, joined (tooltips are xlink:title attributes)."""
    root = ET.fromstring(svg)
    parts = [t.text or "" for t in root.iter(f"{SVG}text")]
    parts += [a.get("{http://www.w3.org/1999/xlink}title") or "" for a in root.iter(f"{SVG}a")]
    return "\n".join(parts)
