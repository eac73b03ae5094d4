"""The compatibility-matrix diagram (``matrix_diagram``) and its markdown table (``matrix_markdown``).
"""
from __future__ import annotations

from typing import Any

from kg.core.errors import OptkgError
from kg.output.diagrams.dot import DotWriter, HtmlLabel
from kg.output.diagrams.escape import _clean, html_text
from kg.output.diagrams.filters import Filters
from kg.output.diagrams.render import Diagram
from kg.output.diagrams.style import FONT


MATRIX_MARKS = {"conflict": ("✗", "#f4a3a3"), "conditional": ("⚠", "#fde3a1"), "ok": ("", "#ffffff")}


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

    def md(s: Any) -> str:  # HTML escaped too: a technique named <script> renders as text (kg.core.textsafe)
        from kg.core.textsafe import markdown
        return markdown(_clean(s))

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
