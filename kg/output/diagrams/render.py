"""Built diagrams (``Diagram``) and how they become files: output formats and suffixes, running the
Graphviz ``dot`` binary (``render_dot``; PNGs capped at PNG_MAX_IN inches, PDF dates fixed), and
``write_diagram`` (atomic, never overwrites without ``force``).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx

from kg.core.errors import OptkgError
from kg.output.diagrams.graphml import to_graphml
from kg.output.diagrams.mermaid import to_mermaid


SCHEMA_VERSION = "1.0"

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
