"""The coordinate map page (``index.html``) and the technique list (``techniques.html``).

The map is one table per stage plus one for all stages combined (rows L7..L1, columns the dimensions),
each cell listing its techniques by short name (the full name in ``<abbr title>`` and in the cell's
tooltip). An empty cell of a stage panel shows its rank among ``optkg gaps``' directions (or why it is
annotated away). Without JavaScript every panel shows; ``map.js`` adds the filters (stage, layer,
dimension, tag, status, engine, engine release) and the hover/focus tooltip.
"""
from __future__ import annotations

from typing import Any

from kg.output.site.html import data_island, esc, page, table, technique_href


def _chip(t: dict[str, Any]) -> str:
    return (f'<li data-t="{esc(t["id"])}"><a href="{technique_href(t["id"])}">'
            f'<abbr title="{esc(t["name"])}">{esc(t["short"])}</abbr></a></li>')


def _panel(m: dict[str, Any], panel: dict[str, Any]) -> str:
    ax = m["axes"]
    dims = {d["id"]: d for d in ax["dimensions"]}
    layers = {x["id"]: x for x in ax["layers"]}
    stage = panel["stage"]
    title = "All stages" if stage == "combined" else next(s["name"] for s in ax["stages"] if s["id"] == stage)
    cols = m["map"]["dimensions"]
    by = {(c["layer"], c["dimension"]): c for c in panel["cells"]}
    head = "".join(f'<th scope="col" data-dim="{esc(d)}"><abbr title="{esc(dims[d]["description"])}">'
                   f'{esc(dims[d]["name"])}</abbr></th>' for d in cols)
    rows = []
    for layer in m["map"]["layers"]:
        tds = []
        for d in cols:
            c = by[(layer, d)]
            names = [m["techniques"][t]["name"] for t in c["techniques"]]
            label = f"{layers[layer]['name']} × {dims[d]['name']}"
            attrs = (f'tabindex="0" data-layer="{esc(layer)}" data-dim="{esc(d)}" '
                     f'data-label="{esc(label)}"')
            if c["techniques"]:
                chips = "".join(_chip(m["techniques"][t]) for t in c["techniques"])
                tds.append(f'<td class="cell" {attrs} data-names="{esc(chr(10).join(names))}"><ul class="chips">{chips}</ul>'
                           '<span class="none" hidden>no match</span></td>')
                continue
            key = f"{stage}|{layer}|{d}"
            gap, where = m["gaps"].get(key), ""
            if stage == "combined":  # empty in every stage: the best-ranked of its stage cells
                ranked = sorted((m["gaps"][f"{s['id']}|{layer}|{d}"]["rank"], s["name"]) for s in ax["stages"]
                                if f"{s['id']}|{layer}|{d}" in m["gaps"])
                if ranked:
                    gap, where = m["gaps"][next(f"{s['id']}|{layer}|{d}" for s in ax["stages"]
                                                if s["name"] == ranked[0][1])], f" ({ranked[0][1].lower()})"
            ann = m["annotated"].get(key)
            if gap:
                why = " ".join(gap["reasons"][:1])
                tds.append(f'<td class="cell gap" {attrs} data-gap="{gap["rank"]}" data-names="">'
                           f'<span class="gapmark">gap #{gap["rank"]}{esc(where)}</span>'
                           f'<span class="sr"> (rank {gap["rank"]} of the directions optkg gaps lists: {esc(why)})</span></td>')
            elif ann:
                tds.append(f'<td class="cell annotated" {attrs} data-names="">'
                           f'<span class="annmark" title="{esc(ann["reason"])}">{esc(ann["status"])}</span></td>')
            else:
                tds.append(f'<td class="cell empty" {attrs} data-names=""><span class="emptymark">empty</span></td>')
        lab = layers[layer]
        rows.append(f'<tr data-layer="{esc(layer)}"><th scope="row"><abbr title="{esc(lab["description"])}">'
                    f'{esc(layer)}</abbr> {esc(lab["name"])}</th>{"".join(tds)}</tr>')
    n = panel["techniques"]
    return (f'<section class="panel" data-stage="{esc(stage)}" aria-labelledby="h-{esc(stage)}">'
            f'<h2 id="h-{esc(stage)}">{esc(title)} <span class="muted">({n} techniques, {panel["empty"]} empty cells)</span></h2>'
            f'<div class="scroll"><table class="map"><thead><tr><th scope="col">Layer \\ dimension</th>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div></section>')


def _select(name: str, label: str, options: list[tuple[str, str]]) -> str:
    opts = "".join(f'<option value="{esc(v)}">{esc(t)}</option>' for v, t in options)
    return (f'<label>{esc(label)} <select id="f-{name}" name="{name}"><option value="">all</option>{opts}</select></label>')


def _filters(m: dict[str, Any]) -> str:
    ax = m["axes"]
    rel_opts: list[tuple[str, str]] = []
    for e, info in sorted(m["engines"].items()):
        rel_opts += [(f"{e}|{i}", f"{e} {r}") for i, r in enumerate(info["releases"])]
    parts = [
        _select("stage", "Stage", [(s["id"], s["name"]) for s in ax["stages"]]),
        _select("layer", "Layer", [(x["id"], f"{x['id']} {x['name']}") for x in ax["layers"]]),
        _select("dimension", "Dimension", [(d["id"], d["name"]) for d in ax["dimensions"]]),
        _select("tag", "Tag", [(t, t) for t in m["tags"]]),
        _select("status", "Status", [(s, s) for s in m["statuses"]]),
        _select("engine", "Engine", [(e, e) for e in sorted(m["engines"])]),
        _select("release", "Engine release", rel_opts),
    ]
    return (f'<form id="filters" class="filters" hidden aria-label="Filters">{"".join(parts)}'
            '<button type="reset" id="f-reset">Clear filters</button></form>'
            '<p id="count" class="count" aria-live="polite"></p>')


def _glossary(m: dict[str, Any]) -> str:
    ax = m["axes"]
    abbr = [t for t in m["techniques"].values() if t["short"] != t["name"]]
    items = "".join(f'<dt><abbr title="{esc(t["name"])}">{esc(t["short"])}</abbr></dt>'
                    f'<dd><a href="{technique_href(t["id"])}">{esc(t["name"])}</a></dd>'
                    for t in sorted(abbr, key=lambda t: (t["short"].lower(), t["id"])))
    axes = "".join(f"<dt>{esc(x['id'])}</dt><dd>{esc(x['name'])}: {esc(x['description'])}</dd>" for x in ax["layers"])
    dims = "".join(f"<dt>{esc(x['name'])}</dt><dd>{esc(x['description'])}</dd>" for x in ax["dimensions"])
    stages = "".join(f"<dt>{esc(x['name'])}</dt><dd>{esc(x['description'])}</dd>" for x in ax["stages"])
    return ('<section aria-labelledby="h-legend"><h2 id="h-legend">What the map shows</h2>'
            "<p>Each technique sits in the cells of every stage it is used in × every layer it spans × its primary "
            "dimension. <strong>gap #N</strong>: an empty cell, ranked N among the new directions "
            "<code>optkg gaps</code> lists; <strong>impossible</strong> / <strong>out-of-scope</strong>: empty cells "
            "the axes annotate away (hover for the reason). The engine filter keeps the techniques that engine's "
            "launch flags (or its defaults) turn on, per release where optkg knows the releases.</p>"
            f"<h3>Layers</h3><dl class=\"gloss\">{axes}</dl><h3>Dimensions</h3><dl class=\"gloss\">{dims}</dl>"
            f"<h3>Stages</h3><dl class=\"gloss\">{stages}</dl>"
            f'<h3 id="abbreviations">Abbreviations</h3><dl class="gloss">{items}</dl></section>')


def map_page(m: dict[str, Any]) -> str:
    panels = [p for p in m["map"]["panels"] if p["stage"] == "combined"] + \
             [p for p in m["map"]["panels"] if p["stage"] != "combined"]
    data = {tid: {"n": t["name"], "s": t["short"], "st": t["stages"], "l": t["span"], "d": t["dimension"],
                  "tg": t["tags"], "ss": t["status"], "e": t["engines"]} for tid, t in m["techniques"].items()}
    gs = m["gap_summary"]
    body = (f"<h1>Coordinate map</h1><p>{len(m['techniques'])} techniques over stage × layer × dimension; "
            f"{gs['empty']} of {gs['cells']} stage cells are empty, {gs['directions']} of them ranked as new "
            "directions. Select a technique for its page; hover or focus a cell for its techniques' full names.</p>"
            + _filters(m) + "".join(_panel(m, p) for p in panels) + _glossary(m)
            + '<div id="tip" role="tooltip" hidden></div>'
            + data_island("map-data", {"techniques": data, "engines": m["engines"]}))
    return page("Coordinate map", body, current="index.html", scripts=["map.js"])


def techniques_page(m: dict[str, Any]) -> str:
    ax = m["axes"]
    stage_name = {s["id"]: s["name"] for s in ax["stages"]}
    dim_name = {d["id"]: d["name"] for d in ax["dimensions"]}
    rows = []
    for tid, t in m["techniques"].items():
        rows.append([f'<a href="{technique_href(tid)}">{esc(t["name"])}</a>', esc(t["short"]),
                     esc(", ".join(stage_name.get(s, s) for s in t["stages"])), esc("–".join(t["layers"])),
                     esc(dim_name.get(t["dimension"], t["dimension"])), esc(t["status"]), esc(t["summary"])])
    body = (f"<h1>Techniques ({len(rows)})</h1>"
            + table(["Technique", "Short", "Stages", "Layers", "Dimension", "Status", "Summary"], rows, "list"))
    return page("Techniques", body, current="techniques.html")
