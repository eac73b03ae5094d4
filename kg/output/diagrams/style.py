"""Shared diagram styling: font and layout seed, coupling-kind edge styles (``EDGE_STYLES``), the
per-dimension palette, technique short names and the legend.
"""
from __future__ import annotations

from typing import Any

from kg.output.diagrams.dot import HtmlLabel
from kg.output.diagrams.escape import html_text


FONT = "DejaVu Sans"
SEED = 7  # fixed start= for force-directed layouts

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
# a coupling between the stack's techniques whose finding did not fire (held, or not evaluable): grey,
# so only fired couplings are red (issue 12)
HELD_STYLE = {"color": "#9e9e9e", "style": "dashed", "penwidth": "0.8"}

# (fill, stroke) per dimension, assigned in axes order and cycled when the axes grow.
DIMENSION_PALETTE = [
    ("#c6dbef", "#3182bd"), ("#fdd0a2", "#e6550d"), ("#c7e9c0", "#31a354"), ("#dadaeb", "#756bb1"),
    ("#fcc5e0", "#c51b8a"), ("#fff7a8", "#b8860b"), ("#d9d9d9", "#525252"), ("#ccebc5", "#1b7837"),
]


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
