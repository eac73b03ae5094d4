"""The compatibility matrix pages: ``matrix.html`` (all engines), ``matrix-<engine>.html`` (one engine,
any release) and ``matrix-<engine>-<first release>.html`` (one engine, a run of releases whose matrix is
the same).

Each page draws the matrix as a grid: every technique that is in a non-ok pair, as a row and as a column (grouped
by dimension, then by name), the headers sticky while the grid scrolls, each cell coloured by its verdict (conflict,
conditional; blank: no coupling or rule relates the two). A cell's title gives the condition, rule and evidence on
hover (``matrix.js`` shows the same as a tooltip, also on keyboard focus); a click jumps to its row in the pair list
below, which holds both techniques, the mark, the condition, the engines, the rule ``optkg check`` runs for it and
the evidence (sources). The engine and release choice is a list of links (a ``<select>`` with JavaScript).
"""
from __future__ import annotations

from typing import Any

from kg.output.site.html import CURRENT, esc, page, sources_list, table, technique_href

MARK = {"conflict": "✗ conflict", "conditional": "⚠ conditional"}


def _title(p: dict[str, Any]) -> str:
    if not p["engine"]:
        return "Compatibility matrix, all engines"
    if not p["releases"]:
        return f"Compatibility matrix, {p['engine']} (any release)"
    r = p["releases"]
    return f"Compatibility matrix, {p['engine']} {r[0]}" + (f" – {r[-1]}" if len(r) > 1 else "")


def _chooser(pages: list[dict[str, Any]], cur: dict[str, Any]) -> str:
    engines = [p for p in pages if not p["releases"]]
    eng = "".join(f'<li><a href="{esc(p["slug"])}.html"{CURRENT if p is cur else ""}>'
                  f'{esc(p["engine"] or "all engines")}</a></li>' for p in engines)
    out = f'<nav aria-label="Engine"><p>Engine:</p><ul class="inline">{eng}</ul></nav>'
    if cur["engine"]:
        rel = [p for p in pages if p["engine"] == cur["engine"] and p["releases"]]
        if rel:
            links = "".join(
                f'<li><a href="{esc(p["slug"])}.html"{CURRENT if p is cur else ""}>'
                f'{esc(p["releases"][0])}{(" – " + esc(p["releases"][-1])) if len(p["releases"]) > 1 else ""}</a></li>'
                for p in rel)
            opts = "".join(f'<option value="{esc(p["slug"])}.html"{" selected" if p is cur else ""}>'
                           f'{esc(r)}</option>' for p in rel for r in p["releases"])
            out += (f'<nav aria-label="Release"><p>{esc(cur["engine"])} release (releases with the same matrix share a page):</p>'
                    f'<ul class="inline">{links}</ul>'
                    f'<label class="js-only" hidden>Go to release <select id="release-select">'
                    f'<option value="{esc(cur["engine"] and ("matrix-" + cur["engine"]))}.html">any</option>{opts}</select></label></nav>')
    return out


SYMBOL = {"conflict": "✗", "conditional": "⚠"}


def _pair_text(c: dict[str, Any], names: dict[str, str]) -> str:
    """One pair as plain text (a cell's title and tooltip): the verdict, condition, engines, rule and evidence."""
    lines = [f"{names[c['a']]} × {names[c['b']]}: {c['mark']}",
             f"condition: {c['condition'] or 'always'}", f"engines: {', '.join(c['engines']) or 'all'}"]
    if c["rule"]:
        lines.append(f"rule: {c['rule']}")
    lines += [f"evidence: {s['title']}" for s in c["sources"][:3]]
    return "\n".join(lines)


def grid(m: dict[str, Any], cells: list[dict[str, Any]]) -> str:
    """The technique x technique grid of ``cells`` (see module doc)."""
    t = m["techniques"]
    names = {tid: x["name"] for tid, x in t.items()}
    by_pair = {}
    for i, c in enumerate(cells):
        by_pair[(c["a"], c["b"])] = by_pair[(c["b"], c["a"])] = (i, c)
    ids = sorted({x for c in cells for x in (c["a"], c["b"])},
                 key=lambda i: (t[i].get("dimension") or "", names[i].lower()))
    short = {i: t[i].get("short") or names[i] for i in ids}
    head = "".join(f'<th scope="col" class="col" title="{esc(names[i])}"><span>{esc(short[i])}</span></th>' for i in ids)
    rows = []
    for a in ids:
        tds = []
        for b in ids:
            if a == b:
                tds.append('<td class="self" aria-label="same technique"></td>')
            elif (a, b) in by_pair:
                i, c = by_pair[(a, b)]
                tds.append(f'<td class="v {esc(c["mark"])}"><a href="#pair-{i}" data-pair="{i}" '
                           f'title="{esc(_pair_text(c, names))}" aria-label="{esc(names[a])} with {esc(names[b])}: '
                           f'{esc(c["mark"])}">{SYMBOL.get(c["mark"], "?")}</a></td>')
            else:
                tds.append("<td></td>")
        rows.append(f'<tr><th scope="row" title="{esc(names[a])}"><a href="{technique_href(a)}">{esc(short[a])}</a>'
                    f'</th>{"".join(tds)}</tr>')
    legend = ('<p class="legend"><span class="key conflict">✗</span> conflict '
              '<span class="key conditional">⚠</span> conditional (combines only when the condition does not hold) '
              '<span class="key none"></span> no coupling or rule relates them · hover a cell for its condition, rule '
              'and evidence; click it for its row below</p>')
    return (legend + f'<div class="gridwrap" tabindex="0" aria-label="Matrix grid, scrolls both ways">'
            f'<table class="grid"><thead><tr><th scope="col" class="corner">technique × with</th>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def matrix_page(m: dict[str, Any], p: dict[str, Any]) -> str:
    names = {tid: t["name"] for tid, t in m["techniques"].items()}
    rows = []
    for c in p["cells"]:
        rows.append([f'<a id="cell-{esc(c["a"])}--{esc(c["b"])}" href="{technique_href(c["a"])}">{esc(names[c["a"]])}</a>',
                     f'<a href="{technique_href(c["b"])}">{esc(names[c["b"]])}</a>',
                     f'<span class="mark {esc(c["mark"])}">{esc(MARK.get(c["mark"], c["mark"]))}</span>',
                     f"<code>{esc(c['condition'])}</code>" if c["condition"] else "–",
                     esc(", ".join(c["engines"]) or "all"),
                     f"<code>{esc(c['rule'])}</code>" if c["rule"] else "–", sources_list(c["sources"])])
    conflicts = sum(c["mark"] == "conflict" for c in p["cells"])
    body = (f"<h1>{esc(_title(p))}</h1>" + _chooser(m["matrices"], p)
            + f"<p>{len(p['cells'])} pairs of {len(names)} techniques are not plainly compatible: {conflicts} conflict, "
            f"{len(p['cells']) - conflicts} conditional (the pair combines only when the condition does not hold, or on "
            "other engines, releases or backends). Every other pair: no coupling or rule relates them. Source: "
            "<code>optkg matrix" + (f" --engine {esc(p['engine'])}" if p["engine"] else "")
            + (f" --engine-version {esc(p['releases'][0])}" if p["releases"] else "") + "</code>.</p>"
            + grid(m, p["cells"])
            + '<h2 id="pairs">Pairs</h2>'
            + table(["Technique", "With", "Mark", "Condition", "Engines", "Rule", "Evidence"], rows, "matrix pairs")
            + '<div id="tip" role="tooltip" hidden></div>')
    body = _row_ids(body)
    return page(_title(p), body, current="matrix.html" if not p["engine"] else "", scripts=["matrix.js"])


def _row_ids(body: str) -> str:
    """``id="pair-<n>"`` on the n-th row of the pair list (the grid's cells link to it)."""
    head, sep, rest = body.partition('<table class="matrix pairs">')
    if not sep:
        return body
    parts = rest.split("<tr><td>")
    return head + sep + parts[0] + "".join(f'<tr id="pair-{i}"><td>{x}' for i, x in enumerate(parts[1:]))
