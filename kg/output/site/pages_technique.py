"""One page per technique (``technique-<id>.html``): coordinates, benefits and costs by dimension,
parameters, couplings out and in (condition, mechanism, sources), the rules that involve it, its
compatibility-matrix cells, the engines whose flags turn it on, references. Plain HTML; no script.
"""
from __future__ import annotations

from typing import Any

from kg.output.site.html import esc, page, source_link, sources_list, table, technique_href

KIND_LABEL = {"causes": "causes", "amplifies": "amplifies", "mitigates": "mitigates",
              "conflicts_with": "conflicts with", "requires": "requires", "replaces": "replaces"}


def node_link(m: dict[str, Any], node: str) -> str:
    """A graph node as a link (technique) or a named property."""
    kind, _, ident = node.partition(":")
    if kind == "t" and ident in m["techniques"]:
        t = m["techniques"][ident]
        return f'<a href="{technique_href(ident)}">{esc(t["name"])}</a>'
    p = m["properties"].get(ident)
    name = p["name"] if p else ident
    return f'<span class="prop" title="{esc((p or {}).get("description", ""))}">property {esc(name)}</span>'


def _couplings(m: dict[str, Any], edges: list[dict[str, Any]], other: str) -> str:
    if not edges:
        return "<p>None.</p>"
    rows = []
    for e in edges:
        dims = " → ".join(x for x in (e["from_dimension"], e["to_dimension"]) if x)
        rows.append([esc(KIND_LABEL.get(e["kind"], e["kind"])), node_link(m, e[other]),
                     f"<code>{esc(e['condition'])}</code>" if e["condition"] else "always",
                     esc(e["mechanism"]), esc(e["severity"]), esc(dims), esc(", ".join(e["engines"]) or "all"),
                     sources_list(e["sources"])])
    return table(["Kind", "With" if other == "target" else "From", "Condition", "Mechanism", "Severity",
                  "Cost moves", "Engines", "Sources"], rows, "couplings")


def _by_dimension(m: dict[str, Any], t: dict[str, Any]) -> str:
    dims = [d["id"] for d in m["axes"]["dimensions"]]
    name = {d["id"]: d["name"] for d in m["axes"]["dimensions"]}
    used = [d for d in dims if any(b.get("dimension") == d for b in t["benefits"] + t["costs"])]
    if not used:
        return "<p>None declared.</p>"
    rows = []
    for d in used:
        ben = "".join(f"<li>{esc(b.get('what'))}</li>" for b in t["benefits"] if b.get("dimension") == d)
        cost = "".join(f"<li>{esc(c.get('what'))}" + (f" <span class=\"muted\">(who pays: {esc(c['who'])})</span>"
                                                      if c.get("who") else "") + "</li>"
                       for c in t["costs"] if c.get("dimension") == d)
        rows.append([f"<strong>{esc(name.get(d, d))}</strong>", f"<ul>{ben}</ul>" if ben else "–",
                     f"<ul>{cost}</ul>" if cost else "–"])
    return table(["Dimension", "Benefit", "Cost (where it lands)"], rows, "bc")


def _parameters(t: dict[str, Any]) -> str:
    if not t["parameters"]:
        return "<p>None.</p>"
    rows = []
    for p in t["parameters"]:
        rng = []
        for k in ("minimum", "maximum", "default"):
            if p.get(k) is not None:
                rng.append(f"{k} {p[k]}")
        if p.get("enum"):
            rng.append("one of " + ", ".join(str(x) for x in p["enum"]))
        rows.append([f"<code>{esc(p.get('name'))}</code>", esc(p.get("type")), esc("; ".join(rng)), esc(p.get("unit")),
                     esc(" ".join(str(f) for f in p.get("flags") or [])), esc(p.get("description"))])
    return table(["Name", "Type", "Range", "Unit", "Flags", "Description"], rows, "params")


def _rules(rules: list[dict[str, Any]]) -> str:
    if not rules:
        return "<p>No rule names this technique.</p>"
    rows = [[f'<code id="rule-{esc(r["id"])}">{esc(r["id"])}</code>', esc(r["ruleset"]), esc(r["severity"]),
             esc(r["title"]), f"<code>{esc(r['condition'])}</code>" if r["condition"] else "–",
             esc(r["applies_to"] or "all engines"),
             esc(r["where"]) + (f" <span class=\"muted\">(from coupling {esc(r['coupling'])})</span>" if r["coupling"] else "")]
            for r in rules]
    return table(["Rule", "Ruleset", "Severity", "Title", "Condition", "Applies to", "Defined in"], rows, "rules")


def _matrix_cells(m: dict[str, Any], tid: str) -> str:
    cells = [c for c in m["matrices"][0]["cells"] if tid in (c["a"], c["b"])]
    if not cells:
        return "<p>No conflict or conditional pair (all engines).</p>"
    rows = []
    for c in cells:
        other = c["b"] if c["a"] == tid else c["a"]
        rows.append([f'<a href="{technique_href(other)}">{esc(m["techniques"][other]["name"])}</a>',
                     f'<a href="matrix.html#cell-{esc(c["a"])}--{esc(c["b"])}">{esc(c["mark"])}</a>',
                     f"<code>{esc(c['condition'])}</code>" if c["condition"] else "–", esc(c["rule"] or "–")])
    return table(["With", "Mark", "Condition", "Rule"], rows, "mx")


def _engines(m: dict[str, Any], t: dict[str, Any]) -> str:
    if not t["engines"]:
        return "<p>No engine flag table optkg has turns it on.</p>"
    items = []
    for e, idx in sorted(t["engines"].items()):
        rels = m["engines"][e]["releases"]
        if not rels:
            items.append(f"<li>{esc(e)} (releases not tracked)</li>")
        else:
            items.append(f"<li>{esc(e)} {esc(rels[idx[0]])} – {esc(rels[idx[-1]])} "
                         f"<span class=\"muted\">({len(idx)} of {len(rels)} known releases)</span></li>")
    return f"<ul>{''.join(items)}</ul>"


def technique_page(m: dict[str, Any], tid: str) -> str:
    t = m["techniques"][tid]
    ax = m["axes"]
    sname = {s["id"]: s["name"] for s in ax["stages"]}
    lname = {x["id"]: x["name"] for x in ax["layers"]}
    dname = {d["id"]: d["name"] for d in ax["dimensions"]}
    node = f"t:{tid}"
    out_edges = [e for e in m["graph"]["edges"] if e["source"] == node]
    in_edges = [e for e in m["graph"]["edges"] if e["target"] == node]
    coords = table(["Axis", "Value"], [
        ["Stages", esc(", ".join(sname.get(s, s) for s in t["stages"]))],
        ["Layers", esc(", ".join(f"{x} {lname.get(x, '')}" for x in t["span"]))],
        ["Primary dimension", esc(dname.get(t["dimension"], t["dimension"]))],
        ["Secondary dimensions", esc(", ".join(dname.get(x, x) for x in t["secondary"]) or "–")],
    ], "coords")
    meta = [f"status {esc(t['status'])}"]
    if t["tags"]:
        meta.append("tags " + esc(", ".join(t["tags"])))
    if t["aliases"]:
        meta.append("aliases " + esc(", ".join(t["aliases"])))
    if t.get("replaced_by"):
        meta.append(f'replaced by <a href="{technique_href(t["replaced_by"])}">{esc(t["replaced_by"])}</a>')
    refs = "".join(f"<li>{source_link(r.get('title'), r.get('url'))}</li>" for r in t["references"])
    body = (f"<h1>{esc(t['name'])} <span class=\"muted\">({esc(t['short'])})</span></h1>"
            f"<p class=\"lead\">{esc(t['summary'])}</p><p class=\"muted\"><code>{esc(tid)}</code> · {' · '.join(meta)}</p>"
            f'<p><a href="graph.html#focus=t:{esc(tid)}">Coupling graph around it</a> · '
            f'<a href="index.html">Where it sits on the map</a></p>'
            f'<section aria-labelledby="h-coords"><h2 id="h-coords">Coordinates</h2>{coords}</section>'
            f'<section aria-labelledby="h-bc"><h2 id="h-bc">Benefits and costs by dimension</h2>{_by_dimension(m, t)}</section>'
            f'<section aria-labelledby="h-params"><h2 id="h-params">Parameters</h2>{_parameters(t)}</section>'
            f'<section aria-labelledby="h-out" id="couplings-out"><h2 id="h-out">Couplings out ({len(out_edges)})</h2>'
            f'{_couplings(m, out_edges, "target")}</section>'
            f'<section aria-labelledby="h-in" id="couplings-in"><h2 id="h-in">Couplings in ({len(in_edges)})</h2>'
            f'{_couplings(m, in_edges, "source")}</section>'
            f'<section aria-labelledby="h-rules" id="rules"><h2 id="h-rules">Rules that involve it</h2>'
            f'{_rules(m["rules"].get(tid, []))}</section>'
            f'<section aria-labelledby="h-mx"><h2 id="h-mx">Compatibility (all engines)</h2>{_matrix_cells(m, tid)}</section>'
            f'<section aria-labelledby="h-eng"><h2 id="h-eng">Engines whose flags turn it on</h2>{_engines(m, t)}</section>'
            f'<section aria-labelledby="h-refs"><h2 id="h-refs">References</h2><ul>{refs or "<li>none</li>"}</ul></section>')
    return page(t["name"], body)
