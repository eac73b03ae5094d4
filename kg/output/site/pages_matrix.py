"""The compatibility matrix pages: ``matrix.html`` (all engines), ``matrix-<engine>.html`` (one engine,
any release) and ``matrix-<engine>-<first release>.html`` (one engine, a run of releases whose matrix is
the same). Each non-ok pair is a row: both techniques, the mark, the condition, the engines, the rule
``optkg check`` runs for it and the evidence (sources). Pairs not listed are compatible as far as optkg
knows. The engine and release choice is a list of links (a ``<select>`` with JavaScript).
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
            + table(["Technique", "With", "Mark", "Condition", "Engines", "Rule", "Evidence"], rows, "matrix"))
    return page(_title(p), body, current="matrix.html" if not p["engine"] else "", scripts=["matrix.js"])
