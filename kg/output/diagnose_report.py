"""Rendering an ``optkg diagnose`` report dict (kg.analyses.diagnose.diagnose) as text (``render_text``)
or markdown (``render_markdown``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kg.analyses.diagnose_namespace import _pct
from kg.core.numfmt import DIAGNOSE, fmt_num


# ---------------------------------------------------------------------------------------------
# rendering

READING_ROWS = (
    ("kv_cache_usage", "KV-cache usage", "pct"), ("requests_running", "requests running", "num"),
    ("requests_waiting", "requests waiting", "num"), ("preemptions_total", "preemptions since start", "num"),
    ("preemptions_new", "preemptions in the window", "num"), ("retracted_requests", "retracted requests", "num"),
    ("prefix_cache_hit_rate", "prefix-cache hit rate", "pct"), ("throughput_tokens_per_s", "throughput, output tokens/s", "num"),
    ("target_throughput_tokens_per_s", "target throughput, tokens/s", "num"), ("success_rate", "success rate", "pct"),
    ("compute_util", "compute", "pct"), ("tensor_active", "tensor-pipe activity", "pct"),
    ("bandwidth_util", "memory bandwidth", "pct"), ("device_memory_used_fraction", "device memory used", "pct"),
    ("power_w", "power draw, W", "num"), ("power_limit_w", "power limit, W", "num"), ("power_ratio", "power / limit", "pct"),
    ("video_engine_util", "video engines (enc/dec)", "pct"),
)


def _q(s: dict[str, Any], key: str) -> str:
    """A quantile cell: '=' exact (one observation), '<=' an upper bound from _sum/_count (see Histogram.summary)."""
    v = fmt_num(s.get(key), DIAGNOSE)
    if s.get(key) is None:
        return v
    if s.get("estimate") == "exact":
        return f"={v}"
    if key in (s.get("capped") or []):
        return f"<={v}"
    return v


QUANTILE_NOTE = ("quantiles are PromQL histogram_quantile estimates: linear interpolation inside the bucket "
                 "that holds the rank, the lowest bucket starting at 0, a rank in the +Inf bucket giving the "
                 "highest finite bound; so they cannot be finer than the buckets. '=' marks one observation "
                 "(every quantile is that observation, the _sum); '<=' marks an upper bound: the q-quantile of n "
                 "non-negative observations is at most _sum / (n - ceil(q x n) + 1), and the interpolated "
                 "estimate was above it")


def _quantile_notes(latency: dict[str, Any]) -> list[str]:
    """One line per histogram whose interpolated quantiles were replaced (what PromQL gave, and why)."""
    out = []
    for k, sm in latency.items():
        prom = sm.get("promql") or {}
        if sm.get("estimate") == "exact":
            out.append(f"{k}: one observation of {fmt_num(sm['mean'], DIAGNOSE)}; PromQL would interpolate p50 "
                       f"{fmt_num(prom.get('p50'), DIAGNOSE)}, p99 {fmt_num(prom.get('p99'), DIAGNOSE)} inside its bucket")
        elif sm.get("estimate") == "capped":
            got = ", ".join(f"{q} {fmt_num(prom.get(q), DIAGNOSE)}" for q in sm["capped"])
            out.append(f"{k}: PromQL interpolates {got}, but {fmt_num(sm['count'], DIAGNOSE)} observations with mean "
                       f"{fmt_num(sm['mean'], DIAGNOSE)} cannot have quantiles that high: shown as upper bounds")
    return out


def _reading_rows(d: dict[str, Any], short=lambda t: t) -> list[list[str]]:
    r, src = d["readings"], {k: short(v) for k, v in d["reading_sources"].items()}
    rows = []
    for key, label, kind in READING_ROWS:
        if key not in r:
            continue
        val = _pct(r[key], 1) if kind == "pct" else fmt_num(r[key], DIAGNOSE)
        rows.append([label, val, src.get(key, "")])
    return rows


def _wall_line(name: str, w: dict[str, Any] | None) -> list[str]:
    if w is None:
        return [name, "-", ""]
    if w["fired"]:
        return [name, f"YES ({w['severity']}, {w.get('confidence') or '-'} confidence)", w["message"] or ""]
    return [name, "no", w.get("status") or w["reason"] or ""]


def _inert(rows: list[list[Any]]) -> list[list[Any]]:
    """Table rows with every text cell on one line (a file name with a line break cannot start a line)."""
    from kg.core.textsafe import one_line
    return [[one_line(c) if isinstance(c, str) else c for c in r] for r in rows]


def render_text(d: dict[str, Any], verbose: bool = False) -> str:
    """A readable report (see ``optkg diagnose --help``)."""
    import textwrap

    from tabulate import tabulate

    from kg.core.textsafe import one_line

    def wrap(text: str, indent: str = "  ") -> str:
        return textwrap.fill(" ".join(one_line(text).split()), width=100, initial_indent=indent, subsequent_indent=indent + "  ")

    dirs = sorted({str(Path(s["path"]).parent) + "/" for s in d["inputs"] if "/" in s["path"]}, key=len, reverse=True)

    def short(text: str) -> str:
        for prefix in dirs:
            text = text.replace(prefix, "")
        return text

    out = []
    ins = ", ".join(f"{Path(s['path']).name} [{s['format']}{', ' + s['phase'] if s.get('phase') else ''}"
                    f"{', before' if s['role'] == 'before' else ''}]" for s in d["inputs"])
    out.append(wrap(f"optkg diagnose: {ins}", ""))
    wl = d["workload"] + (f" ({d['engine']}: engines preallocate GPU memory, so memory means KV-pool pressure)"
                          if d["workload"] == "serving" and d.get("engine") else "")
    out.append(f"  workload: {wl}")
    v = d["verdict"]
    out.append("")
    conf = f"   confidence: {v['confidence']}" if v.get("confidence") else ""
    out.append(f"VERDICT: {v['label'].upper()}   severity: {v['severity']}{conf}")
    out.append(wrap(v["message"]))
    if v.get("also"):
        out.append(wrap("also on: " + ", ".join(f"{w} wall" for w in v["also"])))
    if v.get("walls_read_separately"):
        out.append(wrap("the wall table below reads each input on its own ("
                        + ", ".join(f"{w} wall fires" for w in v["walls_read_separately"])
                        + "); with inputs that disagree it is not a verdict"))
    if not v["comparable"]:
        out.append(wrap(v["comparability"]))
    for w in d.get("input_warnings") or []:
        if w["rule_id"] != v.get("rule_id"):
            out.append(wrap(f"WARNING [{w['rule_id']}]: {w['message']}", ""))
    if d.get("invalid_readings"):
        n = len(d["invalid_readings"])
        out.append(wrap(f"note: {n} invalid reading(s) were left out (NaN, infinite, negative or out of range); "
                        "see the findings" + ("" if verbose else " and --verbose"), ""))
    out.append("")
    out.append("Walls")
    rows = [_wall_line(n, d["walls"].get(n)) for n in ("memory", "compute", "bandwidth", "neither")]
    out.append(textwrap.indent(tabulate(_inert(rows), tablefmt="plain", maxcolwidths=[None, 28, 54]), "  "))
    for n in ("memory", "compute", "bandwidth", "neither"):
        for det in (d["walls"].get(n) or {}).get("details", []):
            out.append(wrap(f"{n} detail [{det['rule_id']}]: {det['message']}"))
    rr = _reading_rows(d, short)
    if rr:
        out.append("")
        out.append("Readings (worst GPU)")
        out.append(textwrap.indent(tabulate(_inert(rr), headers=["reading", "value", "from"], tablefmt="simple",
                                            maxcolwidths=[26, None, 54]), "  "))
    sv = d.get("serving")
    if sv and sv.get("latency"):
        out.append("")
        span = f"over the {sv['window_s']:g} s window" if sv.get("window_s") else (
            "over the window" if sv.get("window_deltas") else "since the server started")
        out.append(f"Serving distributions ({sv['engine']}, {span})")
        lrows = [[k, fmt_num(s["count"], DIAGNOSE), fmt_num(s["mean"], DIAGNOSE), _q(s, "p50"), _q(s, "p90"), _q(s, "p99")]
                 for k, s in sv["latency"].items()]
        out.append(textwrap.indent(tabulate(lrows, headers=["histogram", "count", "mean", "p50", "p90", "p99"],
                                            tablefmt="simple", disable_numparse=True), "  "))
        qn = _quantile_notes(sv["latency"])
        if qn or verbose:
            out.append(wrap(QUANTILE_NOTE))
            for line in qn:
                out.append(wrap(line, "    "))
        if sv.get("kv_capacity_tokens"):
            out.append(f"  KV capacity: {fmt_num(sv['kv_capacity_tokens'], DIAGNOSE)} tokens")
    out.append("")
    g = d["operator_gate"]
    out.append(wrap(f"Operator-layer gate: {g['state']} -- {g['message']}", ""))
    out.append("")
    out.append("Collection checklist")
    for grp in d["checklist"]["groups"]:
        missing = [i for i in grp["items"] if i["status"] in ("missing", "invalid")]
        coarse = [i for i in grp["items"] if i.get("quality") == "coarse"]
        out.append(f"  {grp['label']:<32} {grp['present']}/{grp['applicable']}")
        for i in missing:
            out.append(wrap(f"{i['status']} {i['label']}: {i['hint']}", "    "))
        for i in coarse:
            out.append(wrap(f"coarse {i['label']}: {i['hint']}", "    "))
    cf = d["checklist"].get("collector_fields")
    if cf:
        out.append(wrap("dcgm-exporter field list: " + ", ".join(f"{k} {'on' if on else 'OFF'}" for k, on in cf.items()), "  "))
    for n in ("memory", "compute", "bandwidth"):
        w = d["walls"].get(n)
        if not w or not w["fired"] or "techniques" not in w:
            continue
        out.append("")
        out.append(wrap(f"Techniques for the {n} wall (benefit in {w['dimension']}); direction: {w['direction']}", ""))
        st = w.get("stack")
        if st:
            for x in st["first"]:
                out.append(wrap(f"first: {x['rule_id']} -- {x['message']} Fix: {x['fix']}", "  "))
        shown = w["techniques"][:8]
        for c in shown:
            costs = "; ".join(f"{x['dimension']}: {x['what']}" for x in c["costs"]) or "none declared"
            flags = []
            if c.get("in_stack"):
                flags.append("already in your stack")
            if c.get("do_first_because"):
                flags.append("do this first (" + ", ".join(c["do_first_because"]) + ")")
            for col in c.get("collides") or []:
                flags.append(f"collides: {col['rule_id']} ({col['severity']})")
            for dc in c.get("declared_conflicts") or []:
                if dc["holds_now"] is False:
                    continue  # the declared condition does not hold on this stack (JSON keeps it)
                cond = f" when {dc['condition']}" if dc.get("condition") and dc["holds_now"] is None else ""
                flags.append(f"{'conflicts' if dc['holds_now'] else 'may conflict'} with {dc['with']}{cond}")
            out.append(wrap(f"- {c['technique']}: {c['benefits'][0]}" + (f" [{'; '.join(flags)}]" if flags else ""), "  "))
            out.append(wrap(f"cost -- {costs}", "      "))
        if len(w["techniques"]) > len(shown):
            out.append(f"  ... and {len(w['techniques']) - len(shown)} more (--format json lists all)")
    out.append("")
    out.append("Findings")
    for f in d["findings"]:
        out.append(wrap(f"{f['severity'].upper():8} {f['rule_id']}: {f['message']}"))
    if not d["findings"]:
        out.append("  none")
    out.append("")
    out.append("Thresholds used (defaults from rules/walls.yaml are running experience: recalibrate per machine)")
    trows = [[k, fmt_num(t["value"], DIAGNOSE), t["unit"] or "", t["source"] if t["source"] != "default" else "default"]
             for k, t in d["thresholds"].items()]
    out.append(textwrap.indent(tabulate(_inert(trows), headers=["threshold", "value", "unit", "source"], tablefmt="simple",
                                        maxcolwidths=[30, 10, 10, 40], disable_numparse=True), "  "))
    if verbose:
        out.append("")
        out.append("Threshold provenance")
        for k, t in d["thresholds"].items():
            out.append(wrap(f"{k}: {t['provenance']}"))
    if d["notes"]:
        out.append("")
        for n in d["notes"]:
            out.append(wrap(f"note: {n}", ""))
    unk = d.get("unknown_metrics") or {}
    nunk = sum(len(v) for v in unk.values())
    if verbose:
        out.append("")
        inv = d.get("invalid_readings") or []
        out.append(f"Invalid readings (left out): {len(inv)}")
        for i in inv:
            out.append(wrap(f"{i['path']}: {i['metric']} for {i['entity']} ({i['reading']}) = {i['value']}: {i['why']}"))
        if d.get("machines"):
            out.append("")
            out.append("GPUs and hosts per input")
            for m in d["machines"]:
                out.append(wrap(f"{m['path']}: {', '.join(m['gpu_names']) or 'GPU model not reported'}"
                                + (f"; host {', '.join(m['hosts'])}" if m["hosts"] else "")))
        out.append("")
        out.append(f"Unknown metric names (ignored): {nunk}")
        for path, names in sorted(unk.items()):
            out.append(wrap(f"{path}: {', '.join(names)}"))
        out.append("")
        out.append("Rules that did not fire")
        for nf in d["not_fired"]:
            out.append(wrap(f"{nf['rule']}: {nf['reason']}"))
    elif nunk:
        out.append(f"({nunk} unknown metric names ignored; --verbose lists them)")
    return short("\n".join(out).rstrip()) + "\n"


def render_markdown(d: dict[str, Any], verbose: bool = False) -> str:
    """GitHub-flavoured markdown: verdict, walls, readings, gate, checklist, findings, thresholds."""
    from tabulate import tabulate

    def cell(s: Any) -> str:
        return " ".join(str(s).split()).replace("|", "\\|")

    v = d["verdict"]
    out = ["<!-- optkg:diagnose -->", "## optkg diagnose", ""]
    out.append(f"**Verdict: {v['label']}** (severity {v['severity']}"
               + (f", {v['confidence']} confidence" if v.get("confidence") else "") + ")")
    out.append("")
    out.append(cell(v["message"]))
    if not v["comparable"]:
        out += ["", f"_{cell(v['comparability'])}_"]
    for w in d.get("input_warnings") or []:
        if w["rule_id"] != v.get("rule_id"):
            out += ["", f"> **Warning** ({w['rule_id']}): {cell(w['message'])}"]
    out += ["", "| wall | on it | detail |", "|---|---|---|"]
    for n in ("memory", "compute", "bandwidth", "neither"):
        w = d["walls"].get(n)
        if w:
            row = _wall_line(n, w)
            out.append(f"| {row[0]} | {cell(row[1])} | {cell(row[2])} |")
    rr = _reading_rows(d)
    if rr:
        out += ["", "### Readings", "", tabulate([[cell(c) for c in r] for r in rr], headers=["reading", "value", "from"],
                                                 tablefmt="github")]
    g = d["operator_gate"]
    out += ["", f"**Operator-layer gate:** {g['state']} -- {cell(g['message'])}", "", "### Collection checklist", ""]
    for grp in d["checklist"]["groups"]:
        out.append(f"- **{grp['label']}** {grp['present']}/{grp['applicable']}")
        for i in grp["items"]:
            if i["status"] in ("missing", "invalid"):
                out.append(f"  - {i['status']} {i['label']}: {cell(i['hint'])}")
    for n in ("memory", "compute", "bandwidth"):
        w = d["walls"].get(n)
        if w and w["fired"] and w.get("techniques"):
            out += ["", f"### Techniques for the {n} wall", ""]
            out.append(tabulate([[c["technique"], cell(c["benefits"][0]),
                                  cell("; ".join(f"{x['dimension']}: {x['what']}" for x in c["costs"]))]
                                 for c in w["techniques"][:10]], headers=["technique", "benefit", "costs"], tablefmt="github"))
    out += ["", "### Findings", ""]
    for f in d["findings"]:
        out.append(f"- `{f['severity']}` **{f['rule_id']}**: {cell(f['message'])}")
    out += ["", "### Thresholds used", "",
            tabulate([[k, fmt_num(t["value"], DIAGNOSE), t["unit"] or "", cell(t["source"]), cell(t["provenance"])]
                      for k, t in d["thresholds"].items()], headers=["threshold", "value", "unit", "source", "provenance"],
                     tablefmt="github"),
            "", "_Thresholds are running experience, not physical limits: recalibrate per machine._"]
    if verbose and d.get("unknown_metrics"):
        out += ["", "### Unknown metric names (ignored)", ""]
        for path, names in sorted(d["unknown_metrics"].items()):
            out.append(f"- `{path}`: {cell(', '.join(names))}")
    return "\n".join(out).rstrip() + "\n"
