"""``optkg sweep`` as text and CSV, from ``SweepResult.to_dict()`` (kg.analyses.sweep)."""
from __future__ import annotations

from typing import Any

from kg.analyses.sweep import CSV_COLUMNS
from kg.core.numfmt import SWEEP, fmt_num

# axis -> column head in the text table (an axis shows only when the sweep varies it)
AXIS_HEADS = {"tp_size": "tp", "pp_size": "pp", "dp_size": "dp", "ep_size": "ep", "enable_dp_attention": "dpa",
              "dcp_size": "dcp", "max_num_seqs": "seqs", "quantization": "quant", "kv_cache_dtype": "kv dtype",
              "gpu": "GPU", "engine": "engine"}


def _speed_cells(c: dict[str, Any]) -> list[str]:
    sp = c.get("speed") or {}
    if sp.get("status") != "ok":
        return ["-", "-", "-", "-", {"infeasible": "-", "not_evaluable": "n/e"}.get(sp.get("status"), "-")]
    slo = "yes" if c.get("meets_slo") else "no"
    return [f"{sp['ttft_ms']:,.0f}", f"{sp['itl_ms']:,.1f}", f"{sp['tokens_per_s_per_gpu']:,.0f}",
            f"{sp['tokens_per_s_per_request']:,.1f}", slo + (" *" if c.get("pareto") else "")]


def render_text(d: dict[str, Any]) -> str:
    """A table (tabulate), best first: the axes the sweep varies, GPUs, KV tokens per GPU (check's figure), the speed
    (TTFT, ITL, output tokens/s per GPU and per request, SLO met; ``*`` the Pareto front), the verdict."""
    from tabulate import tabulate
    b = d["base"]
    w = d.get("workload")
    from kg.core.textsafe import one_line  # names stay on their line (a line break cannot start a line)
    gpus = [g for g in (d.get("axes") or {}).get("gpu") or [] if g]
    hw = ", ".join(gpus) if len(gpus) > 1 else (b['hardware'] or '-')  # a GPU axis: every GPU it sweeps, not the first
    engines = [e for e in (d.get("axes") or {}).get("engine") or [] if e]
    name = b["name"]
    if len(engines) > 1:  # an engine axis: every engine it sweeps, not the base command's (nor in the name)
        name = name.removesuffix(f" ({b['engine']})")
    engine = ", ".join(engines) if len(engines) > 1 else (b['engine'] or '-')
    out = [f"optkg sweep: {one_line(name)}",
           f"  model: {one_line(b['model'])} ({b['attention']})   engine: {engine}   hardware: {hw}"
           f"{' x' + str(d['gpu_count']) if d.get('gpu_count') else ''}",
           f"  KV budget: {d.get('kv_budget_source') or 'unknown'}"]
    if w:
        slo = d.get("slo") or {}
        lim = ", ".join(f"{k[:-3].upper()} <= {v:g} ms" for k, v in slo.items() if v is not None) or "none"
        out.append(f"  speed at ISL {w['isl']:,}, OSL {w['osl']:,}, concurrency {w['concurrency']:,}; limits: {lim}; "
                   "TTFT and ITL in ms")
    out.append("")
    axes = d.get("axes") or {}
    shown = [k for k in AXIS_HEADS if len(axes.get(k) or []) > 1] or ["tp_size"]
    # DCP (or replicated KV heads) makes distinct tokens differ from check's figure: the ranking's column is shown
    uniq = any((c.get("dcp_size") or 1) > 1 or (c.get("kv_replication") or 1) > 1 for c in d["combinations"])
    heads = ["#", *(AXIS_HEADS[k] for k in shown), "GPUs", "KV tok/GPU", *(["distinct"] if uniq else [])]
    if w:  # the findings move to --format json/csv: the row keeps 100 columns
        heads += ["TTFT", "ITL", "tok/s/GPU", "tok/s/req", "SLO"]
    heads += ["verdict"] + ([] if w else ["findings"])
    rows = []
    for c in d["combinations"]:
        verdict = "ok" if c["valid"] and c["fits"] else ("invalid" if not c["valid"] else "no fit")
        row = [c["rank"], *(fmt_num(c.get(k), SWEEP) if not isinstance(c.get(k), bool)
                             else ("on" if c[k] else "off") for k in shown),
               c["gpus_needed"], fmt_num(c["kv_tokens_per_gpu"], SWEEP)]  # check's "KV tokens per GPU"
        if uniq:
            row.append(fmt_num(c.get("unique_kv_tokens_per_gpu"), SWEEP))
        if w:
            row += _speed_cells(c)
        others = ", ".join(f["rule_id"] for f in c["findings"]) or "-"
        row += [verdict] + ([] if w else [others if len(others) <= 40 else others[:39] + "~"])
        rows.append(row)
    import tabulate as tab
    pad, tab.MIN_PADDING = tab.MIN_PADDING, 0  # headers as wide as their text: the table fits 100 columns
    try:
        out.append(tabulate(rows, headers=heads, tablefmt="simple", disable_numparse=True))
    finally:
        tab.MIN_PADDING = pad
    s = d["summary"]
    out.append("")
    reasons = sorted({r for c in d["combinations"] for r in c["reasons"] if not r.startswith("rule ")})
    for r in reasons[:5]:  # an impossible layout is invalid (as the rules' refusals), the rest does not fit
        out.append(f"invalid {r}" if r.startswith("layout: ") else f"does not fit: {r}")
    for n in d.get("notes") or []:
        out.append(f"note: {n}")
    if len(d["combinations"]) > 1:  # the column is check's figure; a copy of a replicated KV head is no new token
        by = "limits met, then tok/s/GPU, then distinct" if w else "distinct"
        out.append(f"rank: by {by} tokens per GPU (KV tokens, scheduler-wide / GPUs;\n"
                   "      unique_kv_tokens_per_gpu in --format json); KV tok/GPU is check's 'KV tokens per GPU'")
    best = s["best"]
    desc = " ".join(f"{AXIS_HEADS.get(k, k)} {('on' if v else 'off') if isinstance(v, bool) else v}"
                    for k, v in (best or {}).items())
    line = (f"{s['combinations']} combination(s): {s['valid']} valid by the rules and the layout, "
            f"{s['valid_and_fit']} valid and fit"
            + (f"; best: {desc}" if best else "; none runs"))
    out.append(line)
    if w:
        out.append(f"speed: {s.get('with_speed', 0)} timed, {s.get('meeting_slo', 0)} meet the limits, "
                   f"{s.get('pareto', 0)} on the Pareto front of tok/s/GPU and tok/s/req (*)")
        # why combinations that run were not timed (a workload longer than max_model_len, a model outside the data)
        why = sorted({r for c in d["combinations"] if c.get("valid") and c.get("fits")
                      for r in (c.get("speed") or {}).get("reasons") or [] if (c.get("speed") or {}).get("status") != "ok"})
        from kg.core.textsafe import fit_width
        out += [fit_width(f"not timed: {r}") for r in why[:3]]
        out.append("findings of each combination: --format json or csv")
    return "\n".join(out) + "\n"


def render_csv(d: dict[str, Any]) -> str:
    """One row per combination, columns ``CSV_COLUMNS``; lists joined with ';'; whole-number byte/token
    counts written as integers (max_concurrency, a ratio, keeps its decimals); speed columns empty without one."""
    import csv
    import io
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for c in d["combinations"]:
        sp = c.get("speed") or {}
        flat = {**c, "speed_status": sp.get("status"), **{k: sp.get(k) for k in (
            "ttft_ms", "itl_ms", "tokens_per_s_per_gpu", "tokens_per_s_per_request", "running", "queued")}}
        row = []
        for k in CSV_COLUMNS:
            v = flat.get(k)
            if k == "findings":
                v = ";".join(f"{f['rule_id']}:{f['severity']}" for f in v)
            elif k == "reasons":
                v = ";".join(v)
            elif isinstance(v, bool):
                v = "true" if v else "false"
            elif v is None:
                v = ""
            elif isinstance(v, float) and k in ("ttft_ms", "itl_ms", "tokens_per_s_per_gpu", "tokens_per_s_per_request"):
                v = round(v, 3)
            elif isinstance(v, float) and v.is_integer() and k != "max_concurrency":
                v = int(v)  # byte and token counts are whole numbers: 24064, not 24064.0
            row.append(v)
        w.writerow(row)
    return buf.getvalue()
