"""Renderers for ``optkg fit`` reports: text, markdown and a PNG plot.

Input is the report dict of ``kg.analyses.fit.evaluate_fit`` (plus ``measurements``); nothing here reaches
back into the catalog, the rules or the trace. The plot uses matplotlib with the Agg backend and is
written atomically (kg.core.yamlio.atomic_write), never over an existing file without ``force``.
"""
from __future__ import annotations

import io
import textwrap
from pathlib import Path
from typing import Any

from kg.core.numfmt import FIT, fmt_num
from kg.core.textsafe import one_line

GIB = 1024**3
SEV = {"error": "ERROR", "warning": "WARN ", "info": "INFO "}


def _gib(b: float | None) -> str:
    return "-" if b is None else f"{b / GIB:,.2f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f} %"


def _wrap(text: str, indent: str = "  ", width: int = 100) -> str:
    return textwrap.fill(" ".join(str(text).split()), width=width, initial_indent=indent, subsequent_indent=indent + "  ")


def _table(rows: list[list[Any]], headers: list[str], fmt: str) -> str:
    import tabulate as tb
    # no extra padding beside a header wider than its column (tabulate's MIN_PADDING 2): with it the capacity
    # table ran to 104 columns; the two-space column gap stays
    pad, tb.MIN_PADDING = tb.MIN_PADDING, 0
    try:
        return tb.tabulate(rows, headers=headers, tablefmt=fmt, disable_numparse=True)
    finally:
        tb.MIN_PADDING = pad


def measurement_sections(m: dict[str, Any], fmt: str = "simple") -> list[tuple[str, list[str]]]:
    """(title, lines) sections for the trace measurements, shared by the text and markdown renderers."""
    out: list[tuple[str, list[str]]] = []
    t = m["time"]
    lines = [f"requests: {fmt_num(m['requests'], FIT)} (lines read: {fmt_num(m['last_line'], FIT)})",
             f"duration: {fmt_num(t['duration_s'], FIT)} s (last minus first arrival)",
             f"arrival rate: {fmt_num(t['arrival_rate_rps'], FIT)} req/s (requests / duration)"]
    if t.get("out_of_order_requests"):
        lines.append(f"requests arriving earlier than the line before: {fmt_num(t['out_of_order_requests'], FIT)} (processed in file order)")
    out.append(("Requests", lines))
    rows = []
    for key, label in (("input", "input (prompt)"), ("output", "output (generated)"), ("request", "request (input + output)")):
        d = m["lengths"][key]
        rows.append([label] + [fmt_num(d.get(q), FIT) for q in ("mean", "p50", "p90", "p99", "max")])
    out.append(("Lengths (tokens; pN = nearest rank)", _table(rows, ["", "mean", "p50", "p90", "p99", "max"], fmt).splitlines()))
    pr = m["prefix_reuse"]
    if not pr["measurable"]:
        out.append(("Prefix reuse", [f"not measurable: {pr['reason']}"]))
        return out
    out.append((f"Prefix reuse (unbounded prefix cache, longest-prefix match, {m['block_size']}-token blocks)", [
        f"blocks: {fmt_num(pr['blocks_hit'], FIT)} of {fmt_num(pr['blocks_total'], FIT)} hit = {_pct(pr['ratio_blocks'])}",
        f"tokens: {fmt_num(pr['tokens_hit'], FIT)} of {fmt_num(pr['tokens_total'], FIT)} hit = {_pct(pr['ratio_tokens'])}"]))
    ru = m["reuse"]
    rf, sd, iv = ru["references_per_reused_block"], ru["stack_distance_blocks"], ru["reuse_interval_s"]
    rows = [["references per reused block"] + [fmt_num(rf.get(q), FIT) for q in ("mean", "p50", "p90", "p99", "max")],
            ["stack distance of a reuse (blocks)"] + [fmt_num(sd.get(q), FIT) for q in ("mean", "p50", "p90", "p99", "max")],
            ["time between reuses (s)"] + [fmt_num(iv.get(q), FIT) for q in ("mean", "p50", "p90", "p99", "max")]]
    out.append(("Reuse frequency and distance", [
        f"distinct blocks: {fmt_num(ru['distinct_blocks'], FIT)}; referenced once: {fmt_num(ru['blocks_referenced_once'], FIT)}; "
        f"reused: {fmt_num(ru['reused_blocks'], FIT)}; reuse references: {fmt_num(ru['reuse_references'], FIT)} "
        f"({_pct(ru['reuse_reference_share'])} of block references)"]
        + _table(rows, ["", "mean", "p50", "p90", "p99", "max"], fmt).splitlines()))
    return out


def _lru_section(rep: dict[str, Any], fmt: str) -> tuple[str, list[str]] | None:
    m = rep.get("measurements") or {}
    if not m or not m["prefix_reuse"]["measurable"]:
        return None
    caps = rep.get("capacities")
    gpu_blocks = (caps or {}).get("gpu_capacity", {}).get("blocks")
    pts = caps["points"] if caps else m["lru"]["points"]
    rows = []
    for p in pts:
        row = [fmt_num(p["capacity_blocks"], FIT), fmt_num(p["capacity_tokens"], FIT), _pct(p["hit_ratio_blocks"]), _pct(p["hit_ratio_tokens"])]
        if caps:
            row += [_gib(p["kv_bytes_per_gpu"]), _gib(p["kv_bytes_group"]), p["tier"] or "-"]
        rows.append(row)
    headers = ["capacity (blocks)", "tokens", "hit (blocks)", "hit (tokens)"]
    if caps:
        headers += ["KV GiB/GPU", f"KV GiB x{caps['group_gpus']} GPUs", "tier"]
    lines = _table(rows, headers, fmt).splitlines()
    cf = m["lru"].get("capacity_for") or {}
    for share in ("50", "90"):
        c = cf.get(share) or {}
        extra = ""
        if caps and caps.get(f"capacity_{share}"):
            cc = caps[f"capacity_{share}"]
            extra = f" = {_gib(cc['kv_bytes_per_gpu'])} GiB per GPU, {_gib(cc['kv_bytes_group'])} GiB for the group ({cc['tier'] or '-'})"
        lines.append(f"{share} % of the unbounded hits at {fmt_num(c.get('blocks'), FIT)} blocks "
                     f"({fmt_num(c.get('tokens_based_blocks'), FIT)} counting tokens){extra}")
    if gpu_blocks is not None:
        g = caps["gpu_capacity"]
        lines.append(f"GPU KV budget holds {fmt_num(gpu_blocks, FIT)} blocks: LRU hit ratio {_pct(g['hit_ratio_blocks'])} of blocks, "
                     f"{_pct(g['hit_ratio_tokens'])} of tokens")
    return ("LRU prefix cache: hit ratio vs capacity", lines)


def _cost_section(rep: dict[str, Any], fmt: str) -> tuple[str, list[str]] | None:
    cc, md = rep.get("cost_curve"), rep.get("model")
    if not cc or not md:
        return None
    lines = [f"model: {md['name']} ({md['attention'].upper()}, {md['num_key_value_heads']} KV heads, {md['num_hidden_layers']} layers)"
             f", tp {md['tp_size']} pp {md['pp_size']} dcp {md['dcp_size']}, kv_cache_dtype {md['kv_cache_dtype']}",
             f"KV bytes per token per GPU: {fmt_num(cc['kv_bytes_per_token_per_gpu'], FIT)}"]
    budget = cc.get("budget_bytes_per_gpu")
    if rep.get("gpu"):
        lines.append(f"GPU KV budget (free memory for KV): {_gib(budget)} GiB per GPU ({rep['gpu']['budget_source']})")
    ctx_lim = cc.get("context_limit")

    def fits(p: dict[str, Any]) -> str:
        mem = "-" if budget is None else ("yes" if p["kv_bytes_per_gpu"] <= budget else "no")
        return f"{mem}, over the {fmt_num(ctx_lim, FIT)}-token context limit" if ctx_lim and p["seq_len"] > ctx_lim else mem
    rows = [[fmt_num(p["seq_len"], FIT), _gib(p["kv_bytes_per_gpu"]), fits(p)] for p in cc["by_seq_len"]]
    lines += ["KV per GPU vs sequence length (batch 1):"] + _table(rows, ["seq len", "KV GiB/GPU", "fits"], fmt).splitlines()
    if cc.get("by_batch"):
        bb = cc["by_batch"]
        rows = [[fmt_num(p["batch"], FIT), _gib(p["kv_bytes_per_gpu"]),
                 "-" if budget is None else ("yes" if p["kv_bytes_per_gpu"] <= budget else "no")] for p in bb["points"]]
        lines += [f"KV per GPU vs batch size (requests of the p50 length, {fmt_num(bb['seq_len'], FIT)} tokens):"] + \
            _table(rows, ["batch", "KV GiB/GPU", "fits"], fmt).splitlines()
    from kg.analyses.fit import seq_limit_text
    if budget is not None:
        kb = cc.get("knee_batch", {})
        lines.append(f"knee: one sequence {seq_limit_text(cc)}; "
                     f"{fmt_num(kb.get('p50'), FIT)} concurrent p50 requests, {fmt_num(kb.get('p99'), FIT)} p99 requests")
    elif cc.get("context_limit"):
        lines.append(f"one sequence: {seq_limit_text(cc)}")
    sch = rep.get("scheduler")
    if sch:
        lines.append(f"scheduler limit: {fmt_num(sch['max_num_seqs'], FIT)} sequences ({sch['source']})")
    return ("Cost curve (KV memory per GPU)", lines)


def _finding_lines(r: dict[str, Any], indent: str, md: bool) -> list[str]:
    head = f"{SEV.get(r['severity'], r['severity'])} {r['id']}: {r['title']}"
    lines = [(f"{indent}- **{r['severity']}** `{r['id']}`: {r['title']}" if md else indent + head)]
    sub = indent + ("  " if md else "      ")
    lines.append(_wrap(r["message"], sub) if not md else sub + r["message"])
    if r.get("numbers"):
        nums = "; ".join(f"{k} = {fmt_num(v, FIT)}" for k, v in r["numbers"].items())
        lines.append(_wrap(f"numbers: {nums}", sub) if not md else f"{sub}numbers: {nums}")
    if r.get("fixes"):
        fx = ", ".join(f"{t['id']}" for t in r["fixes"])
        lines.append(f"{sub}techniques: {fx}")
    if r.get("fix"):
        lines.append(_wrap(f"fix: {r['fix']}", sub) if not md else f"{sub}fix: {r['fix']}")
    return lines


def render_fit_text(rep: dict[str, Any], verbose: bool = False) -> str:
    """A readable report: measurements, capacity curve, cost curve, triangle, checklist, patterns."""
    m = rep.get("measurements") or {}
    out = [f"optkg fit: {one_line(m.get('trace', '-'))} ({m.get('format', '?')} trace"
           + (f", {m['block_size']}-token blocks)" if m.get("block_size") else ")")]
    sections = measurement_sections(m) if m else []
    for extra in (_lru_section(rep, "simple"), _cost_section(rep, "simple")):
        if extra:
            sections.append(extra)
    for title, lines in sections:
        out += ["", title] + ["  " + x for x in lines]
    out += ["", "Triangle"]
    for axis, v in rep["triangle"].items():
        out.append(_wrap(f"{axis.replace('_', ' ')}: {v['value']} ({v['why']})", "  "))
    rules = {r["id"]: r for r in rep["rules"]}
    out += ["", "Context Fit Checklist"]
    for item in rep["checklist"]:
        out.append(f"  {item['item']}. {item['name']}: {item['question']}")
        out.append(_wrap(f"answer: {item['answer']}", "     "))
        for rid in item["fired"]:
            out += _finding_lines(rules[rid], "     ", False)
        for v in item.get("validate", []):
            out.append(_wrap(f"- {v['metric']}: {v['expect']}", "     "))
    out += ["", "Patterns"]
    for p in rep["patterns"]:
        mark = "RECOMMENDED" if p["recommended"] else "not indicated"
        out.append(f"  {p['id']}: {p['name']} [{mark}]")
        out.append(_wrap(f"when: {p['when']}; rule {p['rule']}: " + (p["message"] if p["recommended"] else p["reason"]), "      "))
        if p["recommended"]:
            for t in p["techniques"]:
                costs = "; ".join(f"{c['dimension']}: {c['what']}" for c in t["costs"]) or "no declared costs"
                needs = f" [{t['needs']}]" if t.get("needs") else ""
                out.append(_wrap(f"{t['id']} ({t['name']}){needs} costs: {costs}", "      "))
    nm = m.get("not_measurable") or []
    if nm:
        out += ["", "Not measurable from this trace"] + [textwrap.fill(" ".join(x.split()), width=100, initial_indent="  - ", subsequent_indent="    ") for x in nm]
    for n in rep.get("notes") or []:
        out.append(_wrap(f"note: {n}", ""))
    if verbose:
        out += ["", "Definitions"] + [_wrap(f"{k}: {v}", "  ") for k, v in rep["definitions"].items()]
        out += ["", "Thresholds (data in rules/fit.yaml; recalibrate per machine)"]
        for k, t in rep["thresholds"].items():
            out.append(_wrap(f"{k} = {fmt_num(t['value'], FIT)} {t.get('unit', '')}: {t.get('provenance', '')}", "  "))
        out += ["", "Rules that did not fire"]
        for r in rep["rules"]:
            if not r["fired"]:
                out.append(_wrap(f"{r['id']}: {r['reason']}", "  "))
        if m.get("elapsed_s") is not None:
            out.append(f"measured in {m['elapsed_s']:.2f} s")
    fired = [r for r in rep["rules"] if r["fired"]]
    counts: dict[str, int] = {}
    for r in fired:
        counts[r["severity"]] = counts.get(r["severity"], 0) + 1
    out += ["", f"{len(fired)} finding(s)" + (": " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) if counts else "")]
    return "\n".join(out).rstrip() + "\n"


def render_partial_text(m: dict[str, Any]) -> str:
    """The measurements of the lines read before a bad line (``--verbose`` on error)."""
    out = [f"optkg fit: partial measurements of {one_line(m.get('trace', '-'))}: the {fmt_num(m['requests'], FIT)} request(s) before "
           f"the bad line (last good line {fmt_num(m['last_line'], FIT)})"]
    for title, lines in measurement_sections(m):
        out += ["", title] + ["  " + x for x in lines]
    return "\n".join(out).rstrip() + "\n"


def render_fit_markdown(rep: dict[str, Any]) -> str:
    """The same report as GitHub-flavoured markdown (tables as pipe tables)."""
    m = rep.get("measurements") or {}
    out = [f"# optkg fit: `{one_line(Path(str(m.get('trace', '-'))).name)}`", "",
           f"{m.get('format', '?')} trace, {fmt_num(m.get('requests'), FIT)} requests"
           + (f", {m['block_size']}-token prefix blocks" if m.get("block_size") else ""), ""]
    sections = measurement_sections(m, "github") if m else []
    for extra in (_lru_section(rep, "github"), _cost_section(rep, "github")):
        if extra:
            sections.append(extra)
    for title, lines in sections:
        out += [f"## {title}", ""]
        prev_table = False
        for x in lines:
            table = x.startswith("|")
            if table != prev_table and out[-1] != "":
                out.append("")
            out.append(x if table or x.endswith(":") else f"- {x}")
            prev_table = table
        out.append("")
    out += ["## Triangle", "", "| axis | placement | why |", "|---|---|---|"]
    for axis, v in rep["triangle"].items():
        out.append(f"| {axis.replace('_', ' ')} | {v['value']} | {v['why']} |")
    out += ["", "## Context Fit Checklist", ""]
    rules = {r["id"]: r for r in rep["rules"]}
    for item in rep["checklist"]:
        out.append(f"{item['item']}. **{item['name']}**: {item['question']}  ")
        out.append(f"   answer: {item['answer']}")
        for rid in item["fired"]:
            out += _finding_lines(rules[rid], "   ", True)
        for v in item.get("validate", []):
            out.append(f"   - {v['metric']}: {v['expect']}")
    out += ["", "## Patterns", ""]
    for p in rep["patterns"]:
        out.append(f"- **{p['id']}: {p['name']}**: {'recommended' if p['recommended'] else 'not indicated'} "
                   f"(rule `{p['rule']}`: {p['message'] if p['recommended'] else p['reason']})")
        if p["recommended"]:
            for t in p["techniques"]:
                costs = "; ".join(f"{c['dimension']}: {c['what']}" for c in t["costs"]) or "no declared costs"
                out.append(f"  - `{t['id']}` ({t['name']}) costs: {costs}")
    nm = m.get("not_measurable") or []
    if nm:
        out += ["", "## Not measurable from this trace", ""] + [f"- {x}" for x in nm]
    if rep.get("notes"):
        out += ["", "## Notes", ""] + [f"- {x}" for x in rep["notes"]]
    return "\n".join(out).rstrip() + "\n"


def seq_len_markers(cc: dict[str, Any]) -> list[tuple[int, str, str]]:
    """Vertical lines of the memory-vs-sequence-length panel: (tokens, legend label, matplotlib colour).

    First the KV-memory knee (when a budget is known), then the context limit (``--max-model-len``
    or ``max_position_embeddings``), labelled 'binds' when it is the smaller of the two.
    """
    out: list[tuple[int, str, str]] = []
    if cc.get("budget_bytes_per_gpu") is not None and cc.get("knee_seq_len"):
        out.append((cc["knee_seq_len"], f"knee {cc['knee_seq_len']:,} tokens", "tab:red"))
    lim = cc.get("context_limit")
    if lim:
        binds = " (binds)" if cc.get("seq_len_limit_by") == cc.get("context_limit_by") and cc.get("seq_len_limit") == lim else ""
        out.append((lim, f"context limit {lim:,} tokens ({cc.get('context_limit_by')}){binds}", "tab:purple"))
    return out


def plot_fit(rep: dict[str, Any], path: Path | str, force: bool = False) -> Path:
    """Draw the hit-ratio-vs-capacity curve and the memory cost curves to a PNG at ``path``.

    Panels: LRU hit ratio (blocks and tokens) vs capacity in blocks (log scale) with the
    unbounded ratio and the GPU capacity; KV GiB per GPU vs sequence length and vs batch size with
    the GPU budget. Raises OptkgError when there is nothing to draw or the file exists without force.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kg.core.errors import OptkgError
    from kg.core.yamlio import atomic_write

    m = rep.get("measurements") or {}
    have_lru = bool(m) and m["prefix_reuse"]["measurable"] and m["lru"]["points"]
    cc = rep.get("cost_curve")
    panels = (1 if have_lru else 0) + (2 if cc and cc.get("by_batch") else 1 if cc else 0)
    if not panels:
        raise OptkgError("--plot: nothing to draw: the trace has no prefix block ids (no hit-ratio curve) "
                         "and no --model/--config was given (no cost curve)")
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 4.2), squeeze=False)
    axes = list(axes[0])
    budget = cc.get("budget_bytes_per_gpu") if cc else None
    if have_lru:
        ax = axes.pop(0)
        pts = m["lru"]["points"]
        xs = [p["capacity_blocks"] for p in pts]
        ax.plot(xs, [p["hit_ratio_blocks"] for p in pts], marker="o", ms=3, label="hit ratio (blocks)")
        ax.plot(xs, [p["hit_ratio_tokens"] for p in pts], marker="s", ms=3, ls="--", label="hit ratio (tokens)")
        ax.axhline(m["prefix_reuse"]["ratio_blocks"], color="grey", lw=0.8, ls=":", label="unbounded (blocks)")
        g = (rep.get("capacities") or {}).get("gpu_capacity")
        if g and g["blocks"] > 0:
            ax.axvline(g["blocks"], color="tab:red", lw=1, label=f"GPU KV budget ({g['blocks']:,} blocks)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel(f"LRU capacity (blocks of {m['block_size']} tokens)")
        ax.set_ylabel("prefix-cache hit ratio")
        ax.set_ylim(0, max(0.05, m["prefix_reuse"]["ratio_tokens"], m["prefix_reuse"]["ratio_blocks"]) * 1.15)
        ax.set_title("Hit ratio vs capacity (longest-prefix LRU)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    if cc:
        ax = axes.pop(0)
        xs = [p["seq_len"] for p in cc["by_seq_len"]]
        ax.plot(xs, [p["kv_bytes_per_gpu"] / GIB for p in cc["by_seq_len"]], marker="o", ms=3, label="KV per sequence")
        if budget is not None:
            ax.axhline(budget / GIB, color="tab:red", lw=1, label="GPU KV budget")
        for x, label, color in seq_len_markers(cc):
            ax.axvline(x, color=color, ls=":" if color == "tab:red" else "--", lw=1, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length (tokens), batch 1")
        ax.set_ylabel("KV GiB per GPU")
        ax.set_title("Memory cost vs sequence length")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
        if cc.get("by_batch"):
            ax = axes.pop(0)
            bb = cc["by_batch"]
            xs = [p["batch"] for p in bb["points"]]
            ax.plot(xs, [p["kv_bytes_per_gpu"] / GIB for p in bb["points"]], marker="o", ms=3,
                    label=f"KV of p50 requests ({bb['seq_len']:,} tokens)")
            if budget is not None:
                ax.axhline(budget / GIB, color="tab:red", lw=1, label="GPU KV budget")
                kb = (cc.get("knee_batch") or {}).get("p50")
                if kb:
                    ax.axvline(kb, color="tab:red", ls=":", lw=1, label=f"knee {kb:,} requests")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("batch size (concurrent requests)")
            ax.set_ylabel("KV GiB per GPU")
            ax.set_title("Memory cost vs batch size")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7, loc="upper left")
    name = Path(str(m.get("trace", ""))).name
    if name:
        fig.suptitle(f"optkg fit: {name}", fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return atomic_write(path, buf.getvalue(), force=force)
