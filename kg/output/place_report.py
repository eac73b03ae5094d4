"""Rendering an ``optkg place`` verdict dict (kg.analyses.place.place_technique) as text
(``render_text``) or markdown (``render_markdown``; kg.output.formats adds the hidden marker).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator


# ---------------------------------------------------------------------------------------------
# renderers

def _checked_stacks(d: dict[str, Any], skipped: Callable[[str, Any], None]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(file name, result) of each example stack the verdict checked; ``skipped(name, reason)`` for the others."""
    for s in d["stacks"]:
        name = Path(s["stack"]).name
        if s.get("status") != "checked":
            skipped(name, s.get("reason"))
            continue
        yield name, s


def render_text(d: dict[str, Any]) -> str:
    t = d["technique"]
    out = [f"optkg place: {t['id']}" + (f" ({t['name']})" if t.get("name") else "")]
    if d.get("problems"):
        out.append("the entry has problems; fix them first (optkg validate):")
        from kg.output.validate_report import render_text as vtext
        return "\n".join(out) + "\n" + vtext(d["problems"], 0)
    c = t.get("coordinates") or {}
    out.append(f"  coordinates: stages {', '.join(c.get('stages', []))} x layers {'-'.join(c.get('layers', []))} "
               f"x dimension {c.get('dimension')}")
    if d.get("existing_text"):
        out.append(f"already in the catalog: {d['existing_text']}")
    out.append(f"verdict: {d['verdict_text']}")
    out.append("")
    out.append("cells (stage / layer / dimension: " + ("the other techniques there)" if d.get("existing")
                                                          else "techniques already there)"))
    for r in d["cells"]:
        occ = ", ".join(r["occupants"]) if r["occupants"] else "EMPTY"
        ann = f"  [marked empty on purpose: {r['annotation']}]" if r.get("annotation") else ""
        out.append(f"  {r['stage']} / {r['layer']} / {r['dimension']}: {occ}{ann}")
    out.append("")
    import textwrap
    if d["candidates"]:
        out.append("replacement candidates")
        out.append(textwrap.fill(d.get("scoring") or "", width=110, initial_indent="  (", subsequent_indent="   ") + ")")
        for cnd in d["candidates"][:10]:
            flag = "  declared: replaces" if cnd["declared_replaces"] else ""
            tags = f"  tags {', '.join(cnd['shared_tags'])}" if cnd.get("shared_tags") else ""
            out.append(f"  {cnd['score']:.2f}  {cnd['id']:<34} cells {cnd['coordinate_overlap']:.2f}  benefits "
                       f"{cnd['benefit_overlap']:.2f}  costs {cnd['cost_overlap']:.2f}  shared {len(cnd['shared_cells'])}"
                       f"{tags}{flag}")
        if len(d["candidates"]) > 10:
            out.append(f"  ... and {len(d['candidates']) - 10} more (see --format json)")
    else:
        out.append("replacement candidates: none (no technique of the same kind shares a cell)")
    if d.get("neighbours"):
        out.append("neighbours in its cells, not alternatives: " + "; ".join(
            f"{n['id']} ({n['why_not']})" for n in d["neighbours"][:8])
            + (f"; ... and {len(d['neighbours']) - 8} more" if len(d["neighbours"]) > 8 else ""))
    if d.get("declared_elsewhere"):
        out.append("declared alternatives in other cells ('replaces'): " + ", ".join(
            f"{x['id']} ({x['dimension']})" for x in d["declared_elsewhere"]))
    out.append("")
    out.append((f"couplings it contributes to the graph: {len(d['couplings_added'])}" if d.get("existing") else
                f"couplings added to the graph: {len(d['couplings_added'])}"))
    for cp in d["couplings_added"]:
        cond = f" when {cp['condition']}" if cp.get("condition") else ""
        alias = f" (written '{cp['written']}')" if cp.get("written") and cp["written"] not in (cp["to"], cp["from"]) \
            and not str(cp["to"]).startswith("property:") else ""
        out.append(f"  [{cp['direction']:>3}] {cp['from']} --{cp['kind']}--> {cp['to']}  "
                   f"({cp['from_dimension']} -> {cp['to_dimension']}){cond}{alias}")
    for b in d.get("bridges") or []:
        out.append(f"  joins parts of the graph that were separate: {' | '.join(', '.join(g) for g in b)}")
    if d.get("rules"):
        out.append("")
        if d.get("existing"):
            out.append("rules that name it (each resolves to this entry; without it they would name nothing):")
        else:
            out.append("rules that name it:")
        for r in d["rules"]:
            now = "" if r["resolved_before"] or d.get("existing") else \
                "  (named nothing until this entry: it resolves the name now)"
            out.append(f"  {r['rule_id']} ({r['ruleset']}, {r['field']}){now}")
    out.append("")
    out.append("example stacks (check findings that change):")
    if not d["stacks"]:
        out.append("  none given (pass --stack FILE or a folder)")
    for name, s in _checked_stacks(d, lambda name, why: out.append(f"  {name}: skipped ({why})")):
        ch = s["changes"]
        ad = s["if_adopted"]
        if s.get("kind") == "training":  # its techniques follow from its settings: nothing to adopt by name
            held = "holds the entry" if s.get("uses_entry") else "does not hold the entry"
            out.append(f"  {name} (training job; {held}): {len(ch)} finding(s) change with the entry in the catalog")
        elif d.get("existing"):
            out.append(f"  {name}: {len(ch)} finding(s) depend on the entry being in the catalog; {len(ad)} change(s) "
                       "if the stack adopts it")
        else:
            out.append(f"  {name}: {len(ch)} change(s) with the entry in the catalog; {len(ad)} if it is adopted")
        for label, changes in (("catalog", ch), ("adopted", ad)):
            for x in changes:
                out.append(f"    [{label}] {x['change']}: {x['severity']} {x['rule_id']}: {x['message'][:160]}")
        for it in s.get("interactions", []):
            state = "present" if it["other_present"] else "absent"
            out.append(f"    couples: {it['from']} {it['kind']} {it['to']} ({it['other']} {state})"
                       + (f" when {it['condition']}" if it.get("condition") else ""))
    if d.get("warnings"):
        out.append("")
        out.append(f"{len(d['warnings'])} warning(s): run `optkg validate {t['file']}`")
    from kg.output.report import fit_width
    return fit_width("\n".join(out).rstrip()) + "\n"  # output for people fits 100 columns


def render_markdown(d: dict[str, Any]) -> str:
    """Markdown body of the placement verdict (kg.output.formats adds the hidden marker)."""
    from kg.output.mdtext import md_cell as _md
    t = d["technique"]
    out = [f"### optkg place: `{t['id']}`" + (f" ({_md(t['name'])})" if t.get("name") else "")]
    if d.get("problems"):
        out.append("")
        out.append(f"The entry has {len(d['problems'])} problem(s); run `optkg validate {t['file']}`.")
        out.append("")
        out.append("| Location | Field | Problem | Hint |")
        out.append("| --- | --- | --- | --- |")
        for p in d["problems"]:
            out.append(f"| `{p['file']}:{p['line']}:{p['column']}` | `{_md(p['path'])}` | {_md(p['message'])} | {_md(p['hint'])} |")
        return "\n".join(out) + "\n"
    c = t.get("coordinates") or {}
    out.append("")
    if d.get("existing_text"):
        out.append(f"**Already in the catalog:** {_md(d['existing_text'])}")
        out.append("")
    out.append(f"**Verdict:** {_md(d['verdict_text'])}")
    out.append("")
    out.append(f"Coordinates: stages `{', '.join(c.get('stages', []))}` × layers `{'-'.join(c.get('layers', []))}` × "
               f"dimension `{c.get('dimension')}`")
    out.append("")
    out.append("| Stage | Layer | Dimension | Already there |")
    out.append("| --- | --- | --- | --- |")
    for r in d["cells"]:
        occ = ", ".join(f"`{o}`" for o in r["occupants"]) if r["occupants"] else "**empty**"
        out.append(f"| {r['stage']} | {r['layer']} | {r['dimension']} | {occ} |")
    if d["candidates"]:
        out.append("")
        out.append(f"**Replacement candidates** ({_md(d.get('scoring') or '')})")
        out.append("")
        out.append("| Score | Technique | Cells | Benefits | Costs | Shared cells |")
        out.append("| --- | --- | --- | --- | --- | --- |")
        for cnd in d["candidates"][:10]:
            out.append(f"| {cnd['score']:.2f} | `{cnd['id']}`{' (declared: replaces)' if cnd['declared_replaces'] else ''} | "
                       f"{cnd['coordinate_overlap']:.2f} | {cnd['benefit_overlap']:.2f} | {cnd['cost_overlap']:.2f} | "
                       f"{len(cnd['shared_cells'])} |")
    out.append("")
    out.append(f"**Couplings added:** {len(d['couplings_added'])}")
    if d["couplings_added"]:
        out.append("")
        out.append("| Dir | Coupling | Dimensions | Condition |")
        out.append("| --- | --- | --- | --- |")
        for cp in d["couplings_added"]:
            out.append(f"| {cp['direction']} | `{cp['from']}` {cp['kind']} `{cp['to']}` | {cp['from_dimension']} → "
                       f"{cp['to_dimension']} | {_md(cp.get('condition') or '')} |")
    out.append("")
    out.append("**Example stacks**")
    out.append("")
    if not d["stacks"]:
        out.append("No example stacks given.")
    for name, s in _checked_stacks(d, lambda name, why: out.append(f"- `{name}`: skipped ({_md(why)})")):
        out.append(f"- `{name}`: {len(s['changes'])} finding change(s) with the entry in the catalog, "
                   f"{len(s['if_adopted'])} if adopted")
        for label, changes in (("catalog", s["changes"]), ("adopted", s["if_adopted"])):
            for x in changes:
                out.append(f"  - [{label}] {x['change']} `{x['rule_id']}` ({x['severity']}): {_md(x['message'])}")
        for it in s.get("interactions", []):
            out.append(f"  - couples: `{it['from']}` {it['kind']} `{it['to']}` ({'present' if it['other_present'] else 'absent'})")
    return "\n".join(out) + "\n"
