"""The stack diagram of a ``check`` report (``stack_diagram``): its techniques and the couplings
between them; couplings behind fired findings red with their numbers, suggested fixes dashed.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx

from kg.core.errors import OptkgError
from kg.core.numfmt import DIAGRAM, fmt_num
from kg.output.diagrams.dot import HtmlLabel
from kg.output.diagrams.escape import html_text
from kg.output.diagrams.graphview import _crossing, graph_dot, node_link
from kg.output.diagrams.render import Diagram, SUFFIXES, write_diagram
from kg.output.diagrams.style import dimension_colours, short_name


# ---------------------------------------------------------------------------------------------
# stack diagram (optkg check --diagram)

def numbers_text(numbers: dict[str, Any], limit: int = 2) -> str:
    """A short label for a finding's numbers: ``*_factor`` as ``name ×N``, others ``name N``."""
    parts = []
    for k, v in list(numbers.items())[:limit]:
        if k.endswith("_factor"):
            parts.append(f"{k[:-7].replace('_', ' ')} ×{fmt_num(v, DIAGRAM)}")
        else:
            parts.append(f"{k.replace('_', ' ')} {fmt_num(v, DIAGRAM)}")
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
    from kg.knowledge.couplings import iter_couplings
    edge_of: dict[str, tuple[str, str, str, dict]] = {}
    for cp in iter_couplings(catalog):
        dst = tnode(cp.target) if cp.target else pnode(cp.prop) if cp.prop else None
        key = f"{cp.technique}#{cp.index}"
        if dst and g.has_edge(tnode(cp.technique), dst, key=key):
            edge_of[cp.ref] = (tnode(cp.technique), dst, key, g.edges[tnode(cp.technique), dst, key])
    findings = report.get("findings") or []
    for f in findings:
        rid = f.get("rule_id", "?")
        techs = [tnode(t) for t in (catalog.resolve(x) for x in f.get("techniques") or []) if t in stack_ids]
        label = rid + ("\n" + numbers_text(f.get("numbers") or {}) if f.get("numbers") else "")
        cd, fd = f.get("cost_dimension"), f.get("from_dimension")
        matched: list[tuple[str, str, str, dict]] = []
        ref = f.get("coupling")
        if ref and ref in edge_of:  # generated from (or refining) a coupling: that very edge
            matched.append(edge_of[ref])
        for u in ([] if matched else techs):
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
            elif v not in vg:  # e.g. a required technique the stack lacks
                add_tech(v[2:], "fix")
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
    for u, v, k, d in vg.edges(keys=True, data=True):
        if d.get("role") == "coupling":  # between the stack's techniques, but no finding fired on it
            d["role"] = "held"
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
           '<FONT POINT-SIZE="10" COLOR="#1b9e77">   dashed green: suggested fix</FONT>'
           '<FONT POINT-SIZE="10" COLOR="#9e9e9e">   dashed grey: a coupling that did not fire</FONT></TD></TR>'
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
