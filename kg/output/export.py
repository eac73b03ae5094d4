"""Diagrams of the catalog: coordinate maps, the coupling graph, the compatibility matrix, stack diagrams.

Every builder returns a ``Diagram``: the Graphviz DOT source (written here, deterministically:
sorted ids, no timestamps, the layout engine and its seed fixed inside the DOT as ``layout=`` and
``start=``), a JSON-ready dict, and for graph diagrams a networkx ``MultiDiGraph`` view from which
Mermaid, GraphML and node-link JSON are written. ``Diagram.render(fmt)`` returns bytes for
``svg``, ``png``, ``pdf`` (Graphviz ``dot`` binary), ``dot``, ``mermaid``, ``graphml`` and
``json``; ``write_diagram`` writes them atomically (kg.core.yamlio.atomic_write) to the path asked for.

Diagrams and the engines chosen for them (Graphviz 2.43; each full-catalog export, process start
to file written, measured in tests/test_export_shipped.py against a 5 s CPU budget):

- coordinate map (``coordinate_map``): one HTML-table node per stage panel plus a combined
  panel; layers L7..L1 as rows, dimensions as columns, each cell listing its techniques' short
  names, shaded by count, empty cells marked; ``gaps=`` highlights ranked gaps and annotated
  cells. Engine ``dot`` (a handful of nodes; ~0.1 s SVG, ~0.4-0.9 s PNG).
- coupling graph (``coupling_graph``): techniques coloured by primary dimension, clustered by
  layer (one band per layer), properties in a band of their own; edges styled by coupling kind
  (``EDGE_STYLES``) and labelled with the dimension crossing (``compute → storage``). The whole
  graph uses the ``grid`` layout: positions from the coordinates (rows = layers, columns =
  dimensions, so a crossing is a sideways edge), drawn by Graphviz ``nop2`` with
  ``splines=curved`` (~0.2 s SVG for 128 techniques / 400 edges). Measured alternatives:
  ``dot`` with default settings took minutes on a graph this size (issue 5), and failed on
  clusters with edge labels without ``newrank``; ``fdp`` with strict ``splines=true`` 3-4 s,
  relaxed ~0.2 s but with overlapping clusters. ``engine='fdp'`` (seeded with ``start=``) stays
  available. ``focus=<id>`` with ``depth`` draws a neighbourhood with ``dot`` (``newrank``,
  left to right): under 0.4 s for depth 2 around any technique.
- compatibility matrix (``matrix_diagram``): the non-ok cells of ``kg.analyses.matrix`` as a technique x
  technique HTML table (✗ conflict / ⚠ conditional / blank ok). Engine ``dot``.
- stack diagram (``stack_diagram``): a ``check`` report's techniques and the couplings between
  them; couplings behind fired findings red with their numbers, suggested fixes dashed. ``dot``.

PNGs are capped at PNG_MAX_IN inches: raster cost grows with the pixel count.

Labels are escaped for each target (``html_text`` for DOT HTML labels, ``dot_string`` for quoted
DOT strings, ``mermaid_text`` for Mermaid), so names with quotes, ``<``, ``&``, braces or
Chinese render as text and cannot change the diagram's structure.
"""
from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import networkx as nx

from kg.core.errors import OptkgError

SCHEMA_VERSION = "1.0"
FONT = "DejaVu Sans"
SEED = 7  # fixed start= for force-directed layouts

FORMATS: dict[str, str] = {
    "svg": "Scalable vector graphics (Graphviz); tooltips carry mechanisms and conditions.",
    "png": "Raster image (Graphviz, cairo).",
    "pdf": "PDF (Graphviz, cairo).",
    "dot": "Graphviz source; re-render with `dot -Tsvg file.dot` (the engine is set inside).",
    "mermaid": "Mermaid flowchart (renders in markdown on code-hosting pages).",
    "graphml": "GraphML for Gephi and yEd.",
    "json": "JSON: node-link graph (graphs) or cells (maps, matrix), with schema_version and kind.",
}
SUFFIXES: dict[str, str] = {
    ".svg": "svg", ".png": "png", ".pdf": "pdf", ".dot": "dot", ".gv": "dot", ".mmd": "mermaid",
    ".mermaid": "mermaid", ".graphml": "graphml", ".json": "json",
}
RENDERED = ("svg", "png", "pdf")
BINARY = ("png", "pdf")
RENDER_TIMEOUT_S = 120
PNG_MAX_IN = 30  # PNGs are scaled down to at most 30 x 30 inches (2880 px at 96 dpi); SVG/PDF keep full size

# coupling kind -> DOT edge attributes and Mermaid arrow. Every kind in kg.knowledge.schema.COUPLING_KINDS
# must be here (a test checks); an unknown kind is an error, not a silent default.
EDGE_STYLES: dict[str, dict[str, str]] = {
    "causes": {"color": "#555555", "style": "solid", "arrowhead": "normal", "mermaid": "-->", "stroke": "#555555"},
    "amplifies": {"color": "#d95f02", "style": "bold", "arrowhead": "normal", "mermaid": "==>", "stroke": "#d95f02"},
    "mitigates": {"color": "#1b9e77", "style": "dashed", "arrowhead": "normal", "mermaid": "-.->", "stroke": "#1b9e77"},
    "conflicts_with": {"color": "#d62728", "style": "bold", "arrowhead": "tee", "mermaid": "--x", "stroke": "#d62728"},
    "requires": {"color": "#1f77b4", "style": "solid", "arrowhead": "dot", "mermaid": "--o", "stroke": "#1f77b4"},
    "replaces": {"color": "#7f7f7f", "style": "dotted", "arrowhead": "empty", "mermaid": "-.->", "stroke": "#7f7f7f"},
}
# a coupling with a `condition` holds only when it is true: drawn dashed, thin and half transparent
# (#RRGGBBAA) in its kind's colour, so it does not read like an unconditional coupling
CONDITIONAL_ALPHA = "80"
CONDITIONAL_PENWIDTH = "0.8"
# stack-diagram edge roles (not coupling kinds)
FIRED_STYLE = {"color": "#d62728", "style": "bold", "arrowhead": "normal", "penwidth": "2.2"}
FIX_STYLE = {"color": "#1b9e77", "style": "dashed", "arrowhead": "normal", "penwidth": "1.4"}

# (fill, stroke) per dimension, assigned in axes order and cycled when the axes grow.
DIMENSION_PALETTE = [
    ("#c6dbef", "#3182bd"), ("#fdd0a2", "#e6550d"), ("#c7e9c0", "#31a354"), ("#dadaeb", "#756bb1"),
    ("#fcc5e0", "#c51b8a"), ("#fff7a8", "#b8860b"), ("#d9d9d9", "#525252"), ("#ccebc5", "#1b7837"),
]
# coordinate-map shading: (minimum count, background, text colour)
SHADES = [(12, "#08519c", "#ffffff"), (8, "#3182bd", "#ffffff"), (5, "#6baed6", "#000000"),
          (3, "#9ecae1", "#000000"), (2, "#c6dbef", "#000000"), (1, "#eff3ff", "#000000")]
EMPTY_BG = "#fafafa"
MAP_CELL_W = 175  # points; fits MAP_WRAP characters at 11 pt
MAP_WRAP = 26
GAP_TOP_BG, GAP_BG, GAP_BORDER = "#fdae6b", "#fee6ce", "#e6550d"
ANNOTATED_BG = "#e0e0e0"
MATRIX_MARKS = {"conflict": ("✗", "#f4a3a3"), "conditional": ("⚠", "#fde3a1"), "ok": ("", "#ffffff")}

_CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


# ---------------------------------------------------------------------------------------------
# escaping

def _clean(s: Any) -> str:
    """Text with control characters (which XML and DOT cannot carry) replaced by spaces."""
    return _CTRL.sub(" ", str(s)).replace("\n", " ").replace("\t", " ")


def html_text(s: Any) -> str:
    """Text for inside a Graphviz HTML-like label: ``& < > " '`` become entities and a backslash is
    doubled (Graphviz expands ``\\N``, ``\\G``, ``\\n`` even inside HTML labels; ``\\\\`` shows one)."""
    return html.escape(_clean(s), quote=True).replace("\\", "\\\\")


def dot_string(s: Any) -> str:
    """A double-quoted DOT string for ids and escString attributes (tooltip): a backslash becomes
    four (the DOT parser and the escString expansion each halve them, so ``\\N`` stays text) and
    quotes are escaped."""
    return '"' + _clean(s).replace("\\", "\\\\\\\\").replace('"', '\\"') + '"'


_MERMAID_SAFE = set(" -_.,:/+=→×·")


def mermaid_text(s: Any) -> str:
    """Text for inside a quoted Mermaid label: everything but letters, digits and ``-_.,:/+=→×·``
    and space becomes a ``#<code>;`` entity, so quotes, brackets, pipes and ``#`` cannot end the label."""
    out = []
    for ch in _clean(s):
        out.append(ch if (ch.isalnum() or ch in _MERMAID_SAFE) else f"#{ord(ch)};")
    return "".join(out)


def mermaid_id(node: str) -> str:
    """A Mermaid node id for ``t:<id>`` / ``p:<id>`` / ``x:<id>`` (injective: technique ids have no ``_``)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", node.replace(":", "_", 1))


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


# ---------------------------------------------------------------------------------------------
# rendering

def graphviz_version() -> str:
    """The installed Graphviz version string (e.g. '2.43.0'), or 'missing'."""
    exe = shutil.which("dot")
    if not exe:
        return "missing"
    r = subprocess.run([exe, "-V"], capture_output=True, text=True, timeout=30)
    m = re.search(r"version\s+(\S+)", r.stderr + r.stdout)
    return m.group(1) if m else "unknown"


def render_dot(source: str, fmt: str) -> bytes:
    """Run Graphviz on ``source`` (the engine is the DOT's ``layout=``) and return the ``fmt`` bytes.

    ``SOURCE_DATE_EPOCH=0`` asks cairo for a fixed PDF creation date; cairo builds that ignore it
    get their ``/CreationDate`` and ``/ModDate`` rewritten to the epoch (same byte length, so the
    PDF's cross-reference offsets stay valid); a PNG larger than PNG_MAX_IN
    inches is scaled down (raster cost grows with the pixel count: a 6000 x 4500 px PNG took 5 s). Raises OptkgError when the
    ``dot`` binary is missing, times out, or rejects the source.
    """
    if fmt not in RENDERED:
        raise OptkgError(f"internal: {fmt} is not a Graphviz output format")
    exe = shutil.which("dot")
    if not exe:
        raise OptkgError("Graphviz is not installed (no `dot` on PATH): install it (apt install graphviz, "
                         "brew install graphviz) or choose --format dot, mermaid, graphml or json")
    env = {**os.environ, "SOURCE_DATE_EPOCH": "0"}
    try:
        extra = [f"-Gsize={PNG_MAX_IN},{PNG_MAX_IN}"] if fmt == "png" else []
        r = subprocess.run([exe, f"-T{fmt}", *extra], input=source.encode("utf-8"), capture_output=True,
                           timeout=RENDER_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        raise OptkgError(f"Graphviz did not finish in {RENDER_TIMEOUT_S} s; narrow the diagram "
                         "(--stage, --layer, --tag, --focus) or export --format dot") from None
    if r.returncode != 0 or not r.stdout:
        msg = r.stderr.decode("utf-8", "replace").strip().splitlines()
        raise OptkgError(f"Graphviz failed to draw the diagram: {msg[0] if msg else 'no output'}")
    if fmt == "pdf":
        return _PDF_DATE.sub(lambda m: m.group(1) + b"19700101000000" + m.group(3), r.stdout)
    return r.stdout


_PDF_DATE = re.compile(rb"(/(?:CreationDate|ModDate) \(D:)(\d{14})([^)]*\))")


@dataclass
class Diagram:
    """A built diagram. ``kind``: map, graph, matrix or stack; ``dot``: DOT source; ``data``: the
    JSON dict (``schema_version``, ``kind`` and the content); ``graph``: the view graph for
    Mermaid/GraphML (None for table diagrams); ``formats``: the formats it supports."""

    kind: str
    dot: str
    data: dict[str, Any]
    graph: nx.MultiDiGraph | None = None
    title: str = ""
    formats: tuple[str, ...] = ("svg", "png", "pdf", "dot", "json")

    def render(self, fmt: str) -> bytes:
        """Bytes of the diagram in ``fmt`` (see FORMATS). Raises OptkgError for an unsupported one."""
        if fmt not in self.formats:
            raise OptkgError(f"--format: a {self.kind} diagram can be written as {', '.join(self.formats)}, not {fmt}")
        if fmt in RENDERED:
            return render_dot(self.dot, fmt)
        return self.text(fmt).encode("utf-8")

    def text(self, fmt: str) -> str:
        """Text formats: dot, mermaid, graphml, json."""
        from kg.output.report import to_json
        if fmt == "dot":
            return self.dot
        if fmt == "json":
            return to_json(self.data)
        if fmt == "mermaid" and self.graph is not None:
            return to_mermaid(self.graph, self.title)
        if fmt == "graphml" and self.graph is not None:
            return to_graphml(self.graph)
        raise OptkgError(f"--format: a {self.kind} diagram can be written as {', '.join(self.formats)}, not {fmt}")


def format_for(path: Path | None, fmt: str | None) -> str:
    """The output format: ``fmt`` if given, else from the file suffix, else svg.
    Raises OptkgError for an unknown format or suffix, and when ``fmt`` disagrees with a known
    suffix of ``path`` (``--format png -o x.svg`` would put PNG bytes in an .svg file)."""
    if fmt:
        if fmt not in FORMATS:
            raise OptkgError(f"--format: unknown format '{fmt}' (choose from {', '.join(FORMATS)})")
        if path is not None and str(path) != "-":
            suf = Path(path).suffix.lower()
            if suf in SUFFIXES and SUFFIXES[suf] != fmt:
                raise OptkgError(f"--format {fmt} disagrees with the suffix of -o {path} ({SUFFIXES[suf]}); "
                                 f"drop --format or name the file *{_suffix_of(fmt)}")
        return fmt
    if path is None or str(path) == "-":
        return "svg"
    suf = Path(path).suffix.lower()
    if suf not in SUFFIXES:
        raise OptkgError(f"{path}: cannot tell the format from '{suf or 'no suffix'}' "
                         f"(use {', '.join(sorted(SUFFIXES))} or --format)")
    return SUFFIXES[suf]


def _suffix_of(fmt: str) -> str:
    """The first file suffix that means ``fmt`` ('.svg' for svg), or '' when none does."""
    return next((suf for suf, f in sorted(SUFFIXES.items()) if f == fmt), "")


def write_diagram(diagram: Diagram, path: Path, fmt: str | None = None, force: bool = False) -> Path:
    """Render ``diagram`` and write it atomically to ``path`` (never elsewhere; no overwrite unless
    ``force``). Returns the path."""
    from kg.core.yamlio import atomic_write
    f = format_for(path, fmt)
    p = Path(path)
    if p.exists() and not force:  # fail before spending time on the layout
        raise OptkgError(f"{p}: exists; refusing to overwrite (pass --force to replace it)")
    return atomic_write(p, diagram.render(f), force=force)


# ---------------------------------------------------------------------------------------------
# filters

def _split(values: Iterable[str] | None) -> tuple[str, ...]:
    out: list[str] = []
    for v in values or []:
        for t in str(v).split(","):
            t = t.strip()
            if t and t not in out:
                out.append(t)
    return tuple(out)


@dataclass(frozen=True)
class Filters:
    """Which techniques (and map rows/columns/panels) a diagram shows. Empty = all.

    A technique is kept when it is used in one of ``stages``, spans one of ``layers``, has its
    primary dimension in ``dimensions``, carries one of ``tags`` and has one of ``statuses``."""

    stages: tuple[str, ...] = ()
    layers: tuple[str, ...] = ()
    dimensions: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()

    @classmethod
    def from_lists(cls, stages=None, layers=None, dimensions=None, tags=None, statuses=None) -> "Filters":
        return cls(_split(stages), _split(layers), _split(dimensions), _split(tags), _split(statuses))

    def validate(self, catalog) -> "Filters":
        """Raise OptkgError naming the flag and the valid values for an unknown stage/layer/dimension/status/tag."""
        from difflib import get_close_matches

        from kg.knowledge.schema import STATUSES
        ax = catalog.axes
        for flag, vals, valid in (("--stage", self.stages, ax.stage_ids), ("--layer", self.layers, ax.layer_ids),
                                  ("--dimension", self.dimensions, ax.dimension_ids),
                                  ("--status", self.statuses, list(STATUSES))):
            for v in vals:
                if v not in valid:
                    raise OptkgError(f"{flag}: unknown value '{v}' (valid: {', '.join(valid)})")
        known = sorted({t for x in catalog.techniques.values() for t in x.get("tags") or []})
        for v in self.tags:
            if v not in known:
                near = get_close_matches(v, known, n=5)
                raise OptkgError(f"--tag: no technique has tag '{v}'"
                                 + (f" (did you mean {', '.join(near)}?)" if near else ""))
        return self

    def keep(self, catalog, tid: str) -> bool:
        t = catalog.techniques[tid]
        c = t["coordinates"]
        if self.stages and not set(c["stages"]) & set(self.stages):
            return False
        if self.layers and not set(catalog.axes.layer_span(c["layers"])) & set(self.layers):
            return False
        if self.dimensions and c["dimension"] not in self.dimensions:
            return False
        if self.tags and not set(t.get("tags") or []) & set(self.tags):
            return False
        if self.statuses and t.get("status") not in self.statuses:
            return False
        return True

    def to_dict(self) -> dict[str, list[str]]:
        return {"stages": list(self.stages), "layers": list(self.layers), "dimensions": list(self.dimensions),
                "tags": list(self.tags), "statuses": list(self.statuses)}

    def is_empty(self) -> bool:
        return not any((self.stages, self.layers, self.dimensions, self.tags, self.statuses))


# ---------------------------------------------------------------------------------------------
# shared helpers

def dimension_colours(axes) -> dict[str, tuple[str, str]]:
    """dimension id -> (fill, stroke), in axes order."""
    return {d: DIMENSION_PALETTE[i % len(DIMENSION_PALETTE)] for i, d in enumerate(axes.dimension_ids)}


def short_name(t: dict[str, Any]) -> str:
    return str(t.get("short_name") or t.get("name") or t.get("id"))


def _wrap_names(names: list[str], width: int) -> list[str]:
    """Pack names into lines of at most ``width`` characters without splitting a name
    (a longer name gets a line of its own)."""
    lines: list[str] = []
    cur = ""
    for n in names:
        piece = n if not cur else f"{cur} · {n}"
        if cur and len(piece) > width:
            lines.append(cur)
            cur = n
        else:
            cur = piece
    if cur:
        lines.append(cur)
    return lines


def _span_text(layers: list[str]) -> str:
    return layers[0] if len(layers) == 1 else f"{layers[0]}–{layers[-1]}"


def _legend_html(axes, extra: str = "") -> HtmlLabel:
    cols = dimension_colours(axes)
    dims = "".join(f'<TD BGCOLOR="{cols[d][0]}" COLOR="{cols[d][1]}" BORDER="1">{html_text(axes.label("dimensions", d))}</TD>'
                   for d in axes.dimension_ids)
    kinds = "".join(f'<TD BORDER="0"><FONT COLOR="{s["color"]}"><B>{html_text(k)}</B> ({html_text(s["style"])}, {html_text(s["arrowhead"])} head)</FONT></TD>'
                    for k, s in EDGE_STYLES.items())
    return HtmlLabel(
        '<TABLE BORDER="0" CELLSPACING="4" CELLPADDING="3">'
        f'<TR><TD BORDER="0" ALIGN="RIGHT"><B>primary dimension</B></TD>{dims}</TR>'
        f'<TR><TD BORDER="0" ALIGN="RIGHT"><B>coupling kind</B></TD>{kinds}</TR>'
        '<TR><TD BORDER="0" ALIGN="RIGHT"><B>conditional</B></TD>'
        f'<TD BORDER="0" COLSPAN="{len(EDGE_STYLES)}" ALIGN="LEFT">thin, dashed, lighter: the coupling holds only '
        'under its condition (tooltip); solid/bold: always</TD></TR>'
        + extra + "</TABLE>")


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
            raise OptkgError(f"coupling {k}: kind '{d['kind']}' has no diagram style (kg.output.export.EDGE_STYLES)")
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


def to_mermaid(vg: nx.MultiDiGraph, title: str = "") -> str:
    """A Mermaid flowchart of a view graph: one subgraph per cluster, one node line per node, one
    edge line per edge (arrow by coupling kind, label = crossing), classes per dimension, and
    linkStyle colours per kind. Deterministic (sorted)."""
    out = [f"%% {mermaid_text(title or vg.graph.get('title', 'optkg'))} (generated by optkg export; do not edit)",
           "flowchart LR"]
    order = [c[0] for c in vg.graph.get("clusters", [])]
    labels = dict((x[0], x[1]) for x in vg.graph.get("clusters", []))
    by_cluster: dict[str, list[str]] = {}
    for n in sorted(vg.nodes):
        by_cluster.setdefault(vg.nodes[n].get("cluster") or "", []).append(n)

    def node_line(n: str) -> str:
        d = vg.nodes[n]
        text = mermaid_text(d["label"])
        if d.get("role") == "property":
            return f'{mermaid_id(n)}(["{text}"])'
        if d.get("role") in ("cost", "finding"):
            return f'{mermaid_id(n)}>"{text}"]'
        return f'{mermaid_id(n)}["{text}"]'

    for c in order + sorted(set(by_cluster) - set(order)):
        members = by_cluster.get(c)
        if not members:
            continue
        if c:
            out.append(f'  subgraph cluster_{mermaid_id(c)}["{mermaid_text(labels.get(c, c))}"]')
        for n in members:
            out.append(("    " if c else "  ") + node_line(n))
        if c:
            out.append("  end")
    styles: dict[str, list[int]] = {}
    for i, (u, v, k, d) in enumerate(sorted(vg.edges(keys=True, data=True), key=lambda e: (e[0], e[1], e[2]))):
        role = d.get("role", "coupling")
        if role == "coupling":
            arrow, stroke = EDGE_STYLES[d["kind"]]["mermaid"], EDGE_STYLES[d["kind"]]["stroke"]
            if d.get("condition"):  # holds only under its condition: dashed, lighter (see CONDITIONAL_ALPHA)
                stroke += ",stroke-dasharray:4 3,stroke-opacity:0.5"
        elif role == "fired":
            arrow, stroke = "==>", FIRED_STYLE["color"]
        else:
            arrow, stroke = "-.->", FIX_STYLE["color"]
        lab = d.get("label") or ""
        mid = f'|"{mermaid_text(lab)}"|' if lab else ""
        out.append(f"  {mermaid_id(u)} {arrow}{mid} {mermaid_id(v)}")
        styles.setdefault(stroke, []).append(i)
    dims: dict[str, list[str]] = {}
    for n in sorted(vg.nodes):
        d = vg.nodes[n]
        if d.get("dimension") and d.get("role") in ("technique", "fix"):
            dims.setdefault(d["dimension"], []).append(mermaid_id(n))
    for dim in sorted(dims):
        fill, stroke = vg.graph.get("palette", {}).get(dim, ("#ffffff", "#777777"))
        out.append(f"  classDef dim_{mermaid_id(dim)} fill:{fill},stroke:{stroke}")
        out.append(f"  class {','.join(dims[dim])} dim_{mermaid_id(dim)}")
    for stroke in sorted(styles):
        out.append(f"  linkStyle {','.join(str(i) for i in styles[stroke])} stroke:{stroke}")
    return "\n".join(out) + "\n"


def _graphml_value(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v)
    if isinstance(v, (str, int, float, bool)):
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


# ---------------------------------------------------------------------------------------------
# compatibility matrix

def _check_matrix(matrix: Any) -> None:
    if not isinstance(matrix, dict) or matrix.get("kind") != "matrix" or not isinstance(matrix.get("cells"), list) \
            or not isinstance(matrix.get("techniques"), list):
        raise OptkgError("matrix: expected the dict of kg.analyses.matrix.compatibility_matrix "
                         "({kind: matrix, techniques: [...], cells: [...]})")
    for i, c in enumerate(matrix["cells"]):
        if not isinstance(c, dict) or not all(k in c for k in ("a", "b", "mark")):
            raise OptkgError(f"matrix: cells[{i}] needs a, b and mark")
        if c["mark"] not in MATRIX_MARKS:
            raise OptkgError(f"matrix: cells[{i}].mark '{c['mark']}' is not one of {', '.join(MATRIX_MARKS)}")


def _matrix_pairs(matrix: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    pairs: dict[tuple[str, str], dict[str, Any]] = {}
    rank = {"conflict": 2, "conditional": 1, "ok": 0}
    for c in matrix["cells"]:
        if c["mark"] == "ok":
            continue
        for key in ((c["a"], c["b"]), (c["b"], c["a"])):
            old = pairs.get(key)
            if old is None or rank[c["mark"]] > rank[old["mark"]]:
                pairs[key] = c
    return pairs


def _cell_tip(c: dict[str, Any], row: str, col: str) -> str:
    tip = f"{row} × {col}: {c['mark']}"
    if c.get("condition"):
        tip += f" when {c['condition']}"
    if c.get("engines"):
        tip += f" ({', '.join(map(str, c['engines']))})"
    if c.get("rule"):
        tip += f" [{c['rule']}]"
    return tip


def matrix_diagram(matrix: dict[str, Any], catalog, filters: Filters | None = None) -> Diagram:
    """The compatibility matrix image: rows and columns are the kept techniques that have at least
    one conflict or conditional cell (numbered; columns carry the numbers), cells ✗ conflict,
    ⚠ conditional, blank ok; tooltips give condition, engines and rule."""
    _check_matrix(matrix)
    f = (filters or Filters()).validate(catalog)
    pairs = _matrix_pairs(matrix)
    keep = [t for t in matrix["techniques"] if (t not in catalog.techniques or f.keep(catalog, t))]
    involved = [t for t in keep if any((t, o) in pairs for o in keep if o != t)]
    total = len(matrix["techniques"])
    title = "optkg compatibility matrix"
    sub = (f"{len(involved)} of {total} techniques have a conflict (✗) or a condition (⚠) with another; "
           "blank = no known interaction")
    names = {t: (catalog.techniques[t]["name"] if t in catalog.techniques else t) for t in involved}
    rows = []
    if not involved:
        rows.append('<TR><TD BORDER="0">no conflicts or conditions among the selected techniques</TD></TR>')
    else:
        head = '<TD BGCOLOR="#eeeeee"><B>#</B></TD><TD BGCOLOR="#eeeeee" ALIGN="LEFT"><B>technique</B></TD>'
        head += "".join(f'<TD BGCOLOR="#eeeeee" TOOLTIP="{html_text(t)}"><FONT POINT-SIZE="9">{i}</FONT></TD>'
                        for i, t in enumerate(involved, 1))
        rows.append(f"<TR>{head}</TR>")
        for i, a in enumerate(involved, 1):
            r = f'<TD BGCOLOR="#eeeeee"><FONT POINT-SIZE="9">{i}</FONT></TD>' \
                f'<TD ALIGN="LEFT" BGCOLOR="#eeeeee" TOOLTIP="{html_text(a)}">{html_text(names[a])}</TD>'
            for b in involved:
                if a == b:
                    r += '<TD BGCOLOR="#cccccc"> </TD>'
                    continue
                c = pairs.get((a, b))
                if c is None:  # ok: blank and without a tooltip (90 x 90 = 8,100 cells)
                    r += '<TD> </TD>'
                    continue
                sym, bg = MATRIX_MARKS[c["mark"]]
                r += f'<TD BGCOLOR="{bg}" TOOLTIP="{html_text(_cell_tip(c, a, b))}">{html_text(sym)}</TD>'
            rows.append(f"<TR>{r}</TR>")
    table = ('<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3" COLOR="#cccccc">'
             + "".join(rows) + "</TABLE>")
    w = DotWriter("compatibility_matrix", {
        "layout": "dot", "fontname": FONT, "bgcolor": "white", "pad": 0.3, "labelloc": "t", "labeljust": "l",
        "label": HtmlLabel(f'<FONT POINT-SIZE="20"><B>{html_text(title)}</B></FONT><BR/>'
                           f'<FONT POINT-SIZE="11" COLOR="#555555">{html_text(sub)}</FONT>')},
        node={"shape": "plaintext", "fontname": FONT, "fontsize": 10, "margin": 0})
    w.node("matrix", {"label": HtmlLabel(table)})
    data = dict(matrix)
    data["cells"] = [c for c in matrix["cells"] if c["a"] in involved and c["b"] in involved]
    data["techniques"] = involved
    data["filters"] = f.to_dict()
    return Diagram("matrix", w.text(), data, None, title)


_MARK_EMOJI = {"conflict": "❌", "conditional": "⚠️", "ok": "✅"}


def matrix_markdown(matrix: dict[str, Any], catalog) -> str:
    """The text form beside the matrix image: one markdown row per non-ok pair."""
    _check_matrix(matrix)
    cells = sorted((c for c in matrix["cells"] if c["mark"] != "ok"),
                   key=lambda c: (0 if c["mark"] == "conflict" else 1, c["a"], c["b"]))

    def md(s: Any) -> str:
        return _clean(s).replace("|", "\\|")

    def name(t: str) -> str:
        return catalog.techniques[t]["name"] if t in catalog.techniques else t

    out = ["# Compatibility matrix (text form)", "",
           "Generated by `optkg export --all` from the catalog and rules; do not edit. "
           "❌ conflict, ⚠️ conditional (holds only under the condition), ✅ everything else. "
           f"{len(matrix['techniques'])} techniques, {len(cells)} pairs that are not ✅.", "",
           "| | technique | technique | condition | engines | rule |", "|---|---|---|---|---|---|"]
    for c in cells:
        out.append(f"| {_MARK_EMOJI[c['mark']]} | {md(name(c['a']))} (`{c['a']}`) | {md(name(c['b']))} (`{c['b']}`) | "
                   f"{md(c.get('condition') or '')} | {md(', '.join(map(str, c.get('engines') or [])))} | "
                   f"{md(c.get('rule') or '')} |")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# stack diagram (optkg check --diagram)

def _fmt_num(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{int(v):,}" if v.is_integer() else f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return "{" + ", ".join(_fmt_num(x) for x in v) + "}"
    return str(v)


def numbers_text(numbers: dict[str, Any], limit: int = 2) -> str:
    """A short label for a finding's numbers: ``*_factor`` as ``name ×N``, others ``name N``."""
    parts = []
    for k, v in list(numbers.items())[:limit]:
        if k.endswith("_factor"):
            parts.append(f"{k[:-7].replace('_', ' ')} ×{_fmt_num(v)}")
        else:
            parts.append(f"{k.replace('_', ' ')} {_fmt_num(v)}")
    return "; ".join(parts)


_FIRING_KINDS = ("causes", "amplifies", "conflicts_with", "requires", "replaces")


def stack_view(report: dict[str, Any], catalog) -> nx.MultiDiGraph:
    """The view graph of a ``check`` report (``Report.to_dict()``): the stack's techniques, the
    catalog couplings between them, and for each finding the coupling behind it drawn as fired
    (role 'fired', label rule id + numbers; a synthetic edge to a cost node when the catalog has
    no matching coupling) and its suggested fixes (role 'fix', dashed)."""
    from kg.knowledge.graph import build_graph, pnode, tnode
    if not isinstance(report, dict) or report.get("kind") != "check":
        raise OptkgError("stack diagram: expected a check report (kind: check)")
    g = build_graph(catalog)
    axes = catalog.axes
    stack_ids = sorted({catalog.resolve(t) or t for t in (report.get("stack") or {}).get("techniques") or {}}
                       & set(catalog.techniques))
    vg = nx.MultiDiGraph()
    st = report.get("stack") or {}
    vg.graph.update({"name": "stack", "title": f"optkg stack: {st.get('name') or st.get('model') or 'stack'}",
                     "clusters": [], "palette": {k: list(v) for k, v in dimension_colours(axes).items()}})

    def add_tech(tid: str, role: str) -> str:
        n = tnode(tid)
        if n not in vg:
            t = catalog.techniques[tid]
            c = t["coordinates"]
            vg.add_node(n, type="technique", id=tid, label=t["name"], short_name=short_name(t), cluster="",
                        dimension=c["dimension"], stages=list(c["stages"]), layers=axes.layer_span(c["layers"]),
                        status=t["status"], tags=list(t.get("tags") or []), role=role, in_stack=(role == "technique"))
        return n

    def add_prop(pid: str) -> str:
        n = pnode(pid)
        if n not in vg:
            p = catalog.properties[pid]
            vg.add_node(n, type="property", id=pid, label=p.get("name", pid), cluster="",
                        dimension=p.get("dimension") or "", property_kind=p.get("kind", ""), role="property")
        return n

    for tid in stack_ids:
        add_tech(tid, "technique")
    stack_nodes = {tnode(t) for t in stack_ids}
    for u, v, k, d in sorted(g.edges(keys=True, data=True), key=lambda e: (e[0], e[1], e[2])):
        if u in stack_nodes and v in stack_nodes:
            vg.add_edge(u, v, key=k, kind=d["kind"], role="coupling",
                        label=_crossing(d.get("from_dimension"), d.get("to_dimension")),
                        from_dimension=d.get("from_dimension") or "", to_dimension=d.get("to_dimension") or "",
                        condition=d.get("condition") or "", mechanism=d.get("mechanism") or "",
                        severity=d.get("severity") or "")
    findings = report.get("findings") or []
    for f in findings:
        rid = f.get("rule_id", "?")
        techs = [tnode(t) for t in (catalog.resolve(x) for x in f.get("techniques") or []) if t in stack_ids]
        label = rid + ("\n" + numbers_text(f.get("numbers") or {}) if f.get("numbers") else "")
        cd, fd = f.get("cost_dimension"), f.get("from_dimension")
        matched: list[tuple[str, str, str, dict]] = []
        for u in techs:
            for _, v, k, d in sorted(g.out_edges(u, keys=True, data=True), key=lambda e: (e[1], e[2])):
                if d["kind"] not in _FIRING_KINDS or (cd and d.get("to_dimension") != cd) \
                        or (fd and d.get("from_dimension") != fd):
                    continue
                if v in techs or (v.startswith("p:") and v[2:] in catalog.properties):
                    matched.append((u, v, k, d))
        matched.sort(key=lambda m: (0 if m[1] in techs else 1, m[0], m[1], m[2]))
        heads: list[str] = []
        for u, v, k, d in matched[:2]:
            if v.startswith("p:"):
                add_prop(v[2:])
            attrs = {"kind": d["kind"], "role": "fired", "label": label, "rule": rid,
                     "from_dimension": d.get("from_dimension") or "", "to_dimension": d.get("to_dimension") or "",
                     "condition": d.get("condition") or "", "mechanism": f.get("message") or d.get("mechanism") or "",
                     "severity": f.get("severity") or ""}
            if vg.has_edge(u, v, key=k):
                vg.edges[u, v, k].update(attrs)
            else:
                vg.add_edge(u, v, key=k, **attrs)
            heads.append(v)
        if not matched and techs:
            if len(techs) >= 2:
                u, v = techs[0], techs[1]
            else:
                u, v = techs[0], f"x:{rid}"
                vg.add_node(v, type="cost", id=rid, label=f"{cd or 'cost'}: {f.get('title', rid)}", cluster="",
                            dimension=cd or "", role="cost")
            vg.add_edge(u, v, key=f"finding:{rid}", kind="finding", role="fired", label=label, rule=rid,
                        from_dimension=fd or "", to_dimension=cd or "", condition="",
                        mechanism=f.get("message") or "", severity=f.get("severity") or "")
            heads.append(v)
        for fx in f.get("fixes") or []:
            fid = catalog.resolve(fx.get("technique", "")) if isinstance(fx, dict) else None
            if not fid or not heads:
                continue
            n = add_tech(fid, "technique" if fid in stack_ids else "fix")
            for h in heads[:1]:
                key = f"fix:{rid}:{fid}"
                if not vg.has_edge(n, h, key=key):
                    vg.add_edge(n, h, key=key, kind="fix", role="fix", label="fix", rule=rid,
                                mechanism=f.get("fix") or f"suggested fix for {rid}", condition="")
    vg.graph["findings"] = [{"rule_id": f.get("rule_id"), "severity": f.get("severity"), "title": f.get("title"),
                             "techniques": list(f.get("techniques") or [])} for f in findings]
    return vg


def stack_diagram_build(report: dict[str, Any], catalog) -> Diagram:
    """The stack diagram (see ``stack_view``), drawn with ``dot`` left to right, findings listed below."""
    vg = stack_view(report, catalog)
    st = report.get("stack") or {}
    facts = " · ".join(x for x in (
        f"model {st.get('model')}" if st.get("model") else "",
        f"engine {st.get('engine')}{' ' + str(st['engine_version']) if st.get('engine_version') else ''}" if st.get("engine") else "",
        f"hardware {st.get('hardware')}{' x' + str(st['gpu_count']) if st.get('gpu_count') else ''}" if st.get("hardware") else "",
    ) if x)
    rows = "".join(
        f'<TR><TD ALIGN="LEFT"><FONT COLOR="{"#d62728" if f["severity"] == "error" else "#b35806" if f["severity"] == "warning" else "#555555"}">'
        f'{html_text(f["severity"] or "")}</FONT></TD><TD ALIGN="LEFT">{html_text(f["rule_id"] or "")}</TD>'
        f'<TD ALIGN="LEFT">{html_text(f["title"] or "")}</TD></TR>'
        for f in vg.graph["findings"][:15])
    more = len(vg.graph["findings"]) - 15
    if more > 0:
        rows += f'<TR><TD COLSPAN="3" ALIGN="LEFT">... and {more} more</TD></TR>'
    findings = (f'<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="2">{rows}</TABLE>' if rows
                else "no findings")
    lab = ('<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="2">'
           f'<TR><TD><FONT POINT-SIZE="18"><B>{html_text(vg.graph["title"])}</B></FONT></TD></TR>'
           f'<TR><TD><FONT POINT-SIZE="11">{html_text(facts or " ")}</FONT></TD></TR>'
           '<TR><TD><FONT POINT-SIZE="10" COLOR="#d62728">red: the coupling behind a finding, with its numbers</FONT>'
           '<FONT POINT-SIZE="10" COLOR="#1b9e77">   dashed green: suggested fix</FONT></TD></TR>'
           f'<TR><TD>{findings}</TD></TR></TABLE>')
    dot = graph_dot(vg, catalog.axes, "dot", {"label": HtmlLabel(lab), "labelloc": "t", "rankdir": "LR",
                                               "newrank": None}, clusters=False, legend=False)
    data = node_link(vg, "stack")
    return Diagram("stack", dot, data, vg, vg.graph["title"],
                   ("svg", "png", "pdf", "dot", "mermaid", "graphml", "json"))


def stack_diagram(report: dict[str, Any], catalog, out_path: Path | str, force: bool = False) -> Path:
    """Draw the stack diagram of a check report to ``out_path`` (format from its suffix: .svg .png
    .pdf .dot .mmd .json .graphml), atomically; refuses to overwrite unless ``force``."""
    p = Path(out_path)
    if p.suffix.lower() not in SUFFIXES:
        raise OptkgError(f"--diagram: cannot tell the format of {p} (use {', '.join(sorted(SUFFIXES))})")
    return write_diagram(stack_diagram_build(report, catalog), p, None, force)


# ---------------------------------------------------------------------------------------------
# the committed examples: optkg export --all

FOCUS_EXAMPLE = "tensor-parallelism"
MANIFEST = "manifest.json"


@dataclass
class ExportItem:
    """One file of ``exports/``: its name, a one-line description, and how to produce it."""

    name: str
    description: str
    diagram: str  # key into the built diagrams, or a text producer
    fmt: str


def _all_items(has_focus: bool, has_matrix: bool) -> list[ExportItem]:
    items = [
        ExportItem("map-combined.png", "Coordinate map, all stages combined (README image)", "map-combined", "png"),
        ExportItem("map-combined.svg", "Coordinate map, all stages combined", "map-combined", "svg"),
        ExportItem("map.svg", "Coordinate map: one panel per stage plus the combined panel", "map", "svg"),
        ExportItem("map.dot", "Coordinate map, Graphviz source", "map", "dot"),
        ExportItem("map.json", "Coordinate map cells as JSON", "map", "json"),
        ExportItem("map-gaps.svg", "Gaps view: ranked empty cells highlighted, annotated cells grey", "map-gaps", "svg"),
        ExportItem("gaps.md", "Empty cells ranked as new directions, with reasons (optkg gaps --format markdown)",
                   "gaps", "markdown"),
        ExportItem("gaps.json", "Empty cells ranked as new directions (optkg gaps --format json)", "gaps", "json"),
        ExportItem("graph.svg", "Coupling graph of the whole catalog (rows = layers, columns = dimensions)", "graph", "svg"),
        ExportItem("graph.dot", "Coupling graph, Graphviz source", "graph", "dot"),
        ExportItem("graph.mmd", "Coupling graph, Mermaid", "graph", "mermaid"),
        ExportItem("graph.graphml", "Coupling graph, GraphML (Gephi, yEd)", "graph", "graphml"),
        ExportItem("graph.json", "Coupling graph, node-link JSON", "graph", "json"),
    ]
    if has_focus:
        items += [
            ExportItem(f"graph-{FOCUS_EXAMPLE}.png", f"Coupling graph around {FOCUS_EXAMPLE}, depth 1 (dot; README image)",
                       "focus", "png"),
            ExportItem(f"graph-{FOCUS_EXAMPLE}.svg", f"Coupling graph around {FOCUS_EXAMPLE}, depth 1 (dot)", "focus", "svg"),
            ExportItem(f"graph-{FOCUS_EXAMPLE}.mmd", f"Coupling graph around {FOCUS_EXAMPLE}, depth 1, Mermaid",
                       "focus", "mermaid"),
        ]
    if has_matrix:
        items += [
            ExportItem("matrix.png", "Compatibility matrix image (✗ conflict, ⚠ conditional; SVG with tooltips: "
                       "optkg export matrix -o matrix.svg)", "matrix", "png"),
            ExportItem("matrix.txt", "Compatibility matrix, text form (what `optkg matrix` prints)", "matrix-txt", "text"),
            ExportItem("matrix.md", "Compatibility matrix, markdown table of the pairs that are not ✅", "matrix-md",
                       "markdown"),
            ExportItem("matrix.json", "Compatibility matrix, JSON (optkg matrix --format json)", "matrix", "json"),
        ]
    items.append(ExportItem("README.md", "This index", "index", "markdown"))
    return items


def _load_matrix(catalog, rules_dir: Path | None):
    """The compatibility matrix dict from kg.analyses.matrix, or None when that module is not installed."""
    try:
        from kg.analyses.matrix import compatibility_matrix
    except ModuleNotFoundError as e:
        if e.name and e.name.endswith("matrix"):
            return None
        raise
    from kg.engine.rules import load_ruleset
    return compatibility_matrix(catalog, load_ruleset("check", rules_dir))


def _index_md(items: list[ExportItem]) -> str:
    out = ["# Diagrams of the shipped catalog", "",
           "Generated by `optkg export --all` (`make export`); do not edit by hand. CI runs "
           "`optkg export --all --check` and fails when these files are stale.", "",
           "![Coordinate map](map-combined.png)", ""]
    if any(i.diagram == "focus" for i in items):
        out += [f"![Coupling graph around {FOCUS_EXAMPLE}](graph-{FOCUS_EXAMPLE}.png)", ""]
    out += ["| file | what |", "|---|---|"]
    for i in items:
        out.append(f"| [{i.name}]({i.name}) | {i.description} |")
    out += ["| [manifest.json](manifest.json) | Digests of the files and of the Graphviz source of each image "
            "(used by `--check`) |", ""]
    return "\n".join(out)


def _sha(b: bytes) -> str:
    import hashlib
    return hashlib.sha256(b).hexdigest()


def build_all(catalog, rules_dir: Path | None = None) -> tuple[list[ExportItem], dict[str, Any]]:
    """Build every diagram and text of ``exports/`` (nothing rendered yet).
    Returns (items, products) where products maps a diagram key to a Diagram or a str."""
    from kg.analyses.gaps import find_gaps, render_markdown
    from kg.output.report import to_json
    from kg.engine.rules import load_ruleset
    gaps = find_gaps(catalog, load_ruleset("gaps", rules_dir))
    matrix = _load_matrix(catalog, rules_dir)
    has_focus = FOCUS_EXAMPLE in catalog.techniques
    items = _all_items(has_focus, matrix is not None)
    products: dict[str, Any] = {
        "map": coordinate_map(catalog),
        "map-combined": coordinate_map(catalog, stage_panels=False),
        "map-gaps": coordinate_map(catalog, combined=False, gaps=gaps),
        "gaps": {"markdown": render_markdown(gaps), "json": to_json(gaps)},
        "graph": coupling_graph(catalog),
        "index": {"markdown": _index_md(items)},
    }
    if has_focus:
        products["focus"] = coupling_graph(catalog, focus=FOCUS_EXAMPLE, depth=1)
    if matrix is not None:
        products["matrix"] = matrix_diagram(matrix, catalog)
        products["matrix-md"] = {"markdown": matrix_markdown(matrix, catalog)}
        from kg.analyses.matrix import render_matrix_text
        names = {tid: t.get("short_name") or t["name"] for tid, t in catalog.techniques.items()}
        products["matrix-txt"] = {"text": render_matrix_text(matrix, names)}
    return items, products


def _text_of(item: ExportItem, products: dict[str, Any]) -> str | None:
    p = products[item.diagram]
    if isinstance(p, dict):
        return p[item.fmt]
    if item.fmt in RENDERED:
        return None
    return p.text(item.fmt)


def export_all(catalog, out_dir: Path, rules_dir: Path | None = None, *, check: bool = False,
               log=None) -> list[str]:
    """Write every file of ``exports/`` into ``out_dir`` (which must exist), or with ``check``
    compare instead and return the list of problems (empty = fresh).

    Text files (DOT, Mermaid, GraphML, JSON, markdown) are compared byte for byte. Rendered
    images depend on the local Graphviz build, so ``manifest.json`` records for each image the
    SHA-256 of the DOT it was drawn from and of the image; ``check`` regenerates the DOT and
    compares those digests (and the image's own digest, so a hand-edited image is stale too).
    Files in ``out_dir`` that ``--all`` did not write are reported. Only ``out_dir`` is touched.
    """
    import json

    from kg.output.report import to_json
    from kg.core.yamlio import atomic_write, read_text
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise OptkgError(f"{out_dir}: not a folder (create it, or pass -o DIR)")
    items, products = build_all(catalog, rules_dir)
    expected = {i.name for i in items} | {MANIFEST}
    problems: list[str] = []
    if check:
        mpath = out_dir / MANIFEST
        try:
            manifest = json.loads(read_text(mpath)) if mpath.is_file() else None
        except (OptkgError, json.JSONDecodeError):
            manifest = None
        files = (manifest or {}).get("files") or {}
        if manifest is None:
            problems.append(f"{mpath}: missing or unreadable")
        for it in items:
            path = out_dir / it.name
            if not path.is_file():
                problems.append(f"{path}: missing")
                continue
            text = _text_of(it, products)
            if text is not None:
                if path.read_bytes() != text.encode("utf-8"):
                    problems.append(f"{path}: stale (differs from what the catalog generates)")
                continue
            entry = files.get(it.name) or {}
            if entry.get("source_sha256") != _sha(products[it.diagram].dot.encode("utf-8")):
                problems.append(f"{path}: stale (drawn from an older diagram source)")
            elif entry.get("sha256") != _sha(path.read_bytes()):
                problems.append(f"{path}: changed since it was generated (digest differs from {MANIFEST})")
        for extra in sorted(p.name for p in out_dir.iterdir() if p.is_file() and not p.name.startswith(".")):
            if extra not in expected:
                problems.append(f"{out_dir / extra}: not written by `optkg export --all` (remove it)")
        return problems
    import time
    manifest_files: dict[str, Any] = {}
    for it in items:
        t0 = time.perf_counter()
        text = _text_of(it, products)
        if text is not None:
            payload = text.encode("utf-8")
            entry = {"sha256": _sha(payload), "source_sha256": None}
        else:
            d = products[it.diagram]
            payload = d.render(it.fmt)
            entry = {"sha256": _sha(payload), "source_sha256": _sha(d.dot.encode("utf-8"))}
        atomic_write(out_dir / it.name, payload, force=True)
        manifest_files[it.name] = entry
        if log:
            log(f"wrote {out_dir / it.name} ({len(payload):,} bytes, {time.perf_counter() - t0:.2f} s)")
    old = out_dir / MANIFEST
    if old.is_file():  # remove files an earlier --all wrote that are no longer generated
        try:
            previous = json.loads(old.read_text(encoding="utf-8")).get("files") or {}
        except (OSError, ValueError):
            previous = {}
        for name in sorted(previous):
            target = out_dir / name
            if name not in expected and "/" not in name and target.is_file():
                target.unlink()
                if log:
                    log(f"removed {target} (no longer generated)")
    manifest = {"schema_version": SCHEMA_VERSION, "kind": "exports", "generator": "optkg export --all",
                "graphviz": graphviz_version(), "files": manifest_files}
    atomic_write(out_dir / MANIFEST, to_json(manifest), force=True)
    return problems
