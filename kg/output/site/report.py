"""``optkg check … --format html -o report.html``: one self-contained HTML page per check run.

Input: the versioned report dicts (``Report.to_dict()``, one per stack) and, per report, the stack
diagram as SVG text (drawn by the real ``dot``: kg.output.diagrams.stack.stack_diagram_build) or None.
Sections per stack: the stack, the KV cache / memory table, the effective configuration, the findings
(each linked to its techniques' pages), what is in effect, the rules that could not be evaluated, the
summary line, the stack diagram inline.

Links to technique pages: ``<site_url>technique-<id>.html``. ``site_url`` defaults to ``site/``, a
folder named ``site`` beside the report (``optkg export site -o site`` writes it); ``--site-url``
points elsewhere: another relative folder (``../exports/site/``) or an absolute ``http(s)``/``file``
URL. The page's style is inline and it loads nothing: it opens offline from anywhere.
"""
from __future__ import annotations

import re
from typing import Any

from kg.core.numfmt import REPORT, fmt_error_gib, fmt_num
from kg.output.report import summary_line
from kg.output.site.html import esc, sources_list, table

DEFAULT_SITE_URL = "site/"
_SEV = {"error": "ERROR", "warning": "WARNING", "info": "INFO"}
_KV_ROWS = (("bytes/token, whole model", "kv_bytes_per_token_model"),
            ("bytes/token per GPU", "kv_bytes_per_token_per_gpu"),
            ("bytes/token per GPU without replication", "kv_bytes_per_token_per_gpu_unreplicated"),
            ("KV-head replication (after DCP)", "kv_replication"),
            ("cross-attention bytes/encoder token per GPU", "kv_cross_bytes_per_encoder_token_per_gpu"),
            ("cross-attention encoder tokens per request", "kv_cross_encoder_tokens_per_request"),
            ("KV tokens per GPU", "kv_tokens_per_gpu"),
            ("KV tokens, scheduler-wide (x dcp)", "kv_tokens_total"),
            ("max concurrency at max_model_len", "max_concurrency"),
            ("max concurrency at the request length (--request-len)", "max_concurrency_at_request_len"),
            ("weights per GPU (estimate, bytes)", "weight_bytes_per_gpu_estimate"))


def check_site_url(url: str) -> str:
    """The ``--site-url`` value, with a trailing ``/``; OptkgError for one that could run script."""
    from kg.core.errors import OptkgError
    u = url.strip()
    if not u or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", u) and not re.match(r"^(https?|file):", u, re.I):
        raise OptkgError(f"--site-url: '{url}' is neither a relative folder nor an http(s)/file URL")
    if any(c in u for c in "\"'<>\r\n\t"):
        raise OptkgError(f"--site-url: '{url}' contains quotes, angle brackets or control characters")
    return u if u.endswith("/") else u + "/"


def tech_link(tid: str, site: str) -> str:
    """A technique id as a link to its explorer page under ``site`` (the checked --site-url)."""
    return f'<a class="tech" href="{esc(site)}technique-{esc(tid)}.html">{esc(tid)}</a>'



def _kv(dv: dict[str, Any]) -> str:
    rows = []
    for label, key in _KV_ROWS:
        if key == "kv_tokens_total" and dv.get("kv_tokens_total_basis"):  # x dcp N, or x dp N for SGLang's pools
            basis = str(dv["kv_tokens_total_basis"]).split(":")[0]
            label = f"KV tokens, all pools ({basis})" if basis.startswith("x dp") else f"KV tokens, scheduler-wide ({basis})"
        if key in dv:
            rows.append([esc(label), esc(fmt_num(dv[key], REPORT))])
        elif key == "kv_tokens_per_gpu" and dv.get("kv_capacity_not_evaluable"):  # the engine's pool lacks a fact
            rows.append([esc(label), esc(f"not evaluable: {dv['kv_capacity_not_evaluable']}")])
        if key == "kv_replication" and "kv_budget_bytes_per_gpu" in dv:
            gib = dv["kv_budget_bytes_per_gpu"] / 2**30
            if str(dv.get("kv_budget_source", "")).startswith("estimated"):
                err = fmt_error_gib(dv.get("kv_budget_error_bytes") or 0)
                rows.append([esc("KV budget per GPU (estimate)"), esc(f"~{gib:,.1f} GiB ({err})")])
                for i, line in enumerate(dv.get("kv_budget_breakdown") or []):
                    rows.append([esc(("" if i == 0 else "− ") + line["name"]),
                                 esc(f"{line['bytes'] / 2**30:,.2f} GiB  {line['basis']} [{line['source']}]")])
            else:
                rows.append([esc("KV budget per GPU (given)"), esc(f"{gib:,.2f} GiB")])
    if "valid_dcp_sizes" in dv:
        rows.append([esc("valid DCP sizes"), esc(fmt_num(dv["valid_dcp_sizes"], REPORT)) if dv.get("dcp_possible")
                     else esc("impossible here (needs tp_size > num_key_value_heads for GQA/MHA)")])
    return table(["Quantity", "Value"], rows, "kv") if rows else "<p>No KV-cache derivation for this stack.</p>"


def finding_html(f: dict[str, Any], site: str) -> str:
    """One finding (a ``findings[]`` item of a check or training report) as an ``<article>``, its techniques
    and catalog fixes linked to their pages."""
    sev = f.get("severity") or ""
    parts = [f'<h3><span class="sev-{esc(sev)}">{esc(_SEV.get(sev, sev.upper()))}</span> '
             f'<code>{esc(f.get("rule_id"))}</code>: {esc(f.get("title"))}</h3>', f"<p>{esc(f.get('message'))}</p>"]
    dl = []
    if f.get("location"):
        dl.append(("at", esc(f["location"])))
    if f.get("numbers"):
        dl.append(("numbers", esc("; ".join(f"{k} = {fmt_num(v, REPORT)}" for k, v in f["numbers"].items()))))
    if f.get("cost_dimension"):
        dl.append(("cost lands in", esc(f"{f['from_dimension']} → {f['cost_dimension']}" if f.get("from_dimension")
                                        else f["cost_dimension"])))
    if f.get("techniques"):
        coords = {c["technique"]: c for c in f.get("coordinates") or []}
        items = []
        for tid in f["techniques"]:
            c = coords.get(tid)
            where = (f" [{'/'.join(c.get('stages', []))} × {'-'.join(c.get('layers', []))} × {c.get('dimension', '?')}]"
                     if c else "")
            items.append(tech_link(tid, site) + esc(where))
        dl.append(("techniques", ", ".join(items)))
    if f.get("mechanism"):
        dl.append(("why", esc(f["mechanism"])))
    if f.get("fix") or f.get("fixes"):
        fx = esc(f.get("fix") or "")
        links = ", ".join(tech_link(x["technique"], site) for x in f.get("fixes") or [] if x.get("technique"))
        dl.append(("fix", fx + (f" (catalog: {links})" if links else "")))
    if f.get("coupling") and not f.get("rule_line"):
        dl.append(("coupling", esc(f"{f['coupling']} ({_short_path(f.get('rule_file'))})")))
    else:
        dl.append(("rule", esc(f"{_short_path(f.get('rule_file'))}:{f.get('rule_line')}")
                   + (esc(f" (refines coupling {f['coupling']})") if f.get("coupling") else "")))
    body = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in dl)
    return (f'<article class="finding {esc(sev)}" data-rule="{esc(f.get("rule_id"))}">{"".join(parts)}'
            f'<dl class="gloss">{body}</dl>{sources_list(f.get("sources") or [])}</article>')


def _short_path(path: Any) -> str:
    from kg.core.paths import display_path
    return display_path(str(path)) if path else ""


def _inline_svg(svg: str) -> str:
    """dot's SVG without its XML prolog, doctype and comments (so it can sit inside HTML)."""
    svg = re.sub(r"<\?xml[^>]*\?>", "", svg)
    svg = re.sub(r"<!DOCTYPE[^>]*>", "", svg)
    svg = re.sub(r"<!--.*?-->", "", svg, flags=re.S)
    return svg.strip()


def _stack(d: dict[str, Any], svg: str | None, site: str, n: int) -> str:
    s = d["stack"]
    assumed = " (assumed: the latest release optkg knows)" if s.get("engine_version_assumed") else ""
    techs = ", ".join(tech_link(k, site) + (esc(" (" + ", ".join(f"{a}={b}" for a, b in v.items()) + ")") if v else "")
                      for k, v in (s.get("techniques") or {}).items())
    head = '<table class="stack"><tbody>' + "".join(f'<tr><th scope="row">{k}</th><td>{v}</td></tr>' for k, v in (
        ("model", esc(f"{s.get('model')} ({s.get('attention')})")),
        ("engine", esc(f"{s.get('engine') or '-'} {s.get('engine_version') or ''}{assumed}")),
        ("hardware", esc(f"{s.get('hardware') or '-'}" + (f" x{s['gpu_count']}" if s.get("gpu_count") else ""))),
        ("techniques", techs or "–"))) + "</tbody></table>"
    eff = d.get("effective_config") or []
    eff_t = _effective(d, eff) if eff else "<p>None.</p>"
    fs = d["findings"]
    unknown = d.get("not_evaluable") or []
    held = (d.get("outcomes") or {}).get("held")
    if not fs and not unknown:
        verdict = f"<p>No findings: {held} applicable rule(s) held.</p>" if held is not None else "<p>No findings.</p>"
    elif not fs:
        verdict = (f"<p><strong>No rule fired, but {len(unknown)} rule(s) could not be evaluated</strong> (listed "
                   "below): this is not a clean bill of health.</p>")
    else:
        verdict = ""
    finds = "".join(finding_html(f, site) for f in fs)
    ne = _unknown_table(unknown, d.get("how_to_give") or {}) if unknown else \
        "<p>None: every rule that applies was evaluated.</p>"
    in_eff = "".join(f"<li>{esc(e['message'])} <code>{esc(e['coupling'])}</code></li>" for e in d.get("in_effect") or [])
    notes = "".join(f"<li>{esc(x)}</li>" for x in d.get("notes") or [])
    if d.get("ignored_flags"):
        notes += f"<li>ignored (not modelled): <code>{esc('; '.join(d['ignored_flags']))}</code></li>"
    diagram = (f'<figure class="diagram">{_inline_svg(svg)}<figcaption>Stack diagram (Graphviz dot)</figcaption></figure>'
               if svg else "<p>No diagram.</p>")
    return (f'<section class="report" id="stack-{n}" aria-labelledby="h-stack-{n}">'
            f'<h2 id="h-stack-{n}">{esc(s.get("name"))}</h2>{head}'
            f'<p class="summary"><strong>{esc(summary_line(d))}</strong></p>'
            f'<h3>KV cache and memory</h3>{_kv(d.get("derived") or {})}'
            f'<h3>Findings ({len(fs)})</h3>{verdict}{finds}'
            f'<h3>Could not be evaluated ({len(unknown)})</h3>{ne}'
            + (f"<h3>In effect (nothing to fix)</h3><ul>{in_eff}</ul>" if in_eff else "")
            + (f"<h3>Notes</h3><ul>{notes}</ul>" if notes else "")
            + f'<h3>Effective configuration</h3>{eff_t}<h3>Stack diagram</h3>{diagram}'
            + _terms(d, site) + '</section>')


def _effective(d: dict[str, Any], eff: list[dict[str, Any]]) -> str:
    """Given settings and the defaults a finding or the KV budget reads (as the text report), the other defaults
    folded into a <details> below."""
    from kg.output.report import BUDGET_INPUTS, _read_by_findings
    read = _read_by_findings(d) | (set(BUDGET_INPUTS) if d.get("derived") else set())

    def rows(es: list[dict[str, Any]]) -> list[list[str]]:
        return [[f"<code>{esc(e['setting'])}</code>", esc("?" if e["value"] is None else fmt_num(e["value"], REPORT)),
                 esc(e["source"]), esc(e.get("why") or "")] for e in es]
    shown = [e for e in eff if e["source"] != "engine default" or e["setting"] in read]
    rest = [e for e in eff if e not in shown]
    out = table(["Setting", "Value", "Source", "Why"], rows(shown), "eff") if shown else ""
    if rest:
        out += (f"<details><summary>{len(rest)} more engine default(s) no finding reads</summary>"
                + table(["Setting", "Value", "Source", "Why"], rows(rest), "eff") + "</details>")
    return out


def _unknown_table(unknown: list[dict[str, Any]], how: dict[str, str]) -> str:
    """One row per missing fact: the fact, how to give it, the rules that wait for it (as the text report)."""
    by_fact: dict[str, list[str]] = {}
    for u in unknown:
        for n in u.get("needs") or u.get("missing") or [u.get("reason") or "?"]:
            by_fact.setdefault(n, []).append(u["rule_id"])
    rows = [[f"<code>{esc(f)}</code>", esc(how.get(f) or "–"), ", ".join(f"<code>{esc(r)}</code>" for r in rules)]
            for f, rules in sorted(by_fact.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
    return table(["Missing fact", "How to give it", "Rules that wait for it"], rows, "ne")


def _terms(d: dict[str, Any], site: str) -> str:
    """The glossary terms the report uses, each linked to its entry in the explorer's glossary page."""
    from kg.output.glossary import terms_in
    from kg.output.report import render_check_text
    used = terms_in(render_check_text(d))  # the terms the text report of the same stack uses
    if not used:
        return ""
    items = "".join(f'<li><a href="{esc(site)}glossary.html#{esc(t["anchor"])}">{esc(t["term"])}</a>: '
                    f'{esc(t["short"])}</li>' for t in used)
    return f"<h3>Terms</h3><ul class=\"terms\">{items}</ul>"


def render_check_html(reports: list[dict[str, Any]], svgs: list[str | None], site_url: str = DEFAULT_SITE_URL,
                      css: str = "") -> str:
    """The whole page (see module doc). ``svgs[i]`` belongs to ``reports[i]``; ``css`` is inlined."""
    site = check_site_url(site_url)
    title = reports[0]["stack"].get("name") if len(reports) == 1 else f"{len(reports)} serving containers"
    body = "".join(_stack(d, svgs[i] if i < len(svgs) else None, site, i) for i, d in enumerate(reports))
    return report_page(title, body, site, css)


def report_page(title: str, body: str, site: str, css: str = "") -> str:
    """The check report's page frame around ``body`` (HTML): inline ``css``, no script, a Content-Security-Policy
    that loads nothing, and the note on where technique links point (``site``, already checked)."""
    return ("<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "img-src data:\">"
            f"<title>optkg check: {esc(title)}</title><style>{css}</style></head>"
            f'<body><main id="main"><h1>optkg check: {esc(title)}</h1>'
            f'<p class="muted">Technique links point to <code>{esc(site)}</code> (the explorer'
            + ("" if re.match(r"^[a-z]+:", site, re.I) else f': <code>optkg export site -o {esc(site.rstrip("/"))}</code>')
            + '; choose with <code>--site-url</code>).</p>'
            f"{body}</main></body></html>\n")
