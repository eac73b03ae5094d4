"""``optkg check <training job> --format html``: the training report (``kind: training``) as one HTML page.

Input: the report dict of kg.analyses.training.check_training (the same mapping ``--format json``
prints). Sections: the job (framework, model, GPUs, techniques linked to their explorer pages), the
parallel layout, the batch arithmetic, memory per GPU as a table (weights, gradients, optimizer states,
gathered unit, model states, activations, total against the GPU, host offload) with its accounting and
the other accountings side by side (Megatron-LM's theoretical memory, llm-analysis, DeepSpeed's
estimator), the speed estimate (kg.speed.training), the findings (each linked to its techniques' pages), what is in effect, the rules that
could not be evaluated, notes. No KV-cache table and no serving terms: this is a training job. The
page frame (inline style, no script, Content-Security-Policy) is the serving report's
(kg.output.site.report.report_page).
"""
from __future__ import annotations

from typing import Any, Mapping

from kg.output.report import summary_line
from kg.output.site.html import esc, table
from kg.output.training_report import gpus_phrase

# GiB (2**30 B): GPU memory is sized and reported in it (torch.cuda, the serving reports), so the GPU's
# capacity and the estimate read in one unit (an H100-SXM: 79.65 GiB)
GIB = 2**30


def _gib(n: Any) -> str:
    return "–" if n is None else f"{n / GIB:,.2f} GiB"


def _size(v: Any) -> str:
    return "?" if v is None else f"{v:,}"


def _job(d: Mapping[str, Any], site: str) -> str:
    from kg.output.site.report import tech_link
    st = d.get("stack") or {}
    fw = " ".join(str(x) for x in (st.get("framework"), st.get("framework_version")) if x) or "?"
    techs = ", ".join(tech_link(t, site) for t in st.get("techniques") or []) or "–"
    rows = (("framework", esc(fw)), ("model", esc(st.get("model") or "(shape from arguments)")),
            ("GPUs", esc(gpus_phrase(d))), ("source", esc(st.get("source") or "–")), ("techniques", techs))
    return '<table class="stack"><tbody>' + "".join(
        f'<tr><th scope="row">{k}</th><td>{v}</td></tr>' for k, v in rows) + "</tbody></table>"


def _layout(d: Mapping[str, Any]) -> str:
    par = (d.get("derived") or {}).get("parallel") or {}
    if not par:
        return "<p>No parallel layout.</p>"
    s = (d.get("stack") or {}).get("settings") or {}
    rows = [[esc(label), esc(_size(par.get(key)))] for label, key in (
        ("tensor parallel (TP)", "tp_size"), ("pipeline parallel (PP)", "pp_size"), ("context parallel (CP)", "cp_size"),
        ("data parallel (DP)", "dp_size"), ("expert parallel (EP)", "ep_size"), ("GPUs (world size)", "world_size"))]
    extras = [label for label, ok in ((f"virtual stages {s.get('vpp_size')}", s.get("vpp_size")),
                                      ("sequence parallel", s.get("sequence_parallel")),
                                      (f"ZeRO-{s.get('zero_stage')}", s.get("zero_stage")),
                                      ("distributed optimizer", s.get("distributed_optimizer")),
                                      (f"FSDP {s.get('fsdp_sharding')}", s.get("fsdp_sharding")),
                                      (f"recompute {s.get('recompute_granularity')}", s.get("recompute_granularity")))
              if ok]
    if extras:
        rows.append([esc("sharding and memory savers"), esc(", ".join(extras))])
    return table(["Dimension", "Size"], rows, "layout")


def _batch(d: Mapping[str, Any]) -> str:
    ba = (d.get("derived") or {}).get("batch") or {}
    if not (ba.get("global_batch_size") or ba.get("micro_batch_size")):
        return "<p>No batch sizes given.</p>"
    rows = [[esc(label), esc(_size(ba.get(key)))] for label, key in (
        ("micro batch (sequences per GPU per step)", "micro_batch_size"),
        ("gradient accumulation steps", "gradient_accumulation_steps"), ("data parallel (DP)", "dp_size"),
        ("global batch (sequences)", "global_batch_size"), ("tokens per step", "tokens_per_step"))
        if key in ba]
    return table(["Quantity", "Value"], rows, "batch", caption="global = micro x grad-accum x DP")


def _memory(d: Mapping[str, Any]) -> str:
    der = d.get("derived") or {}
    mem = der.get("memory")
    if not mem:
        return "<p>Memory per GPU not computed (the notes say which input is missing).</p>"
    gpu = d.get("gpu_memory_bytes")
    rows = [("weights", mem["weights_bytes"], ""), ("gradients", mem["gradients_bytes"], ""),
            ("optimizer states", mem["optimizer_bytes"], "")]
    if mem.get("working_buffer_bytes"):
        rows.append(("gathered unit (ZeRO-3/FSDP)", mem["working_buffer_bytes"], ""))
    rows.append(("model states", mem["model_states_bytes"], ""))
    rows.append(("activations", mem["activations_bytes"],
                 f"{mem['layers_on_first_stage']} layers x {mem['in_flight_microbatches']:g} micro-batches in flight, "
                 f"{mem['activation_bytes_per_layer'] / 2**20:,.1f} MiB per layer"))
    rows.append(("total", mem["total_bytes"], f"of {_gib(gpu)} ({mem['total_bytes'] / gpu:.0%})" if gpu else ""))
    if mem.get("cpu_offload_bytes"):
        rows.append(("on the host (offload)", mem["cpu_offload_bytes"], ""))
    body = table(["Term", "Per GPU", "Basis"], [[esc(a), esc(_gib(b)), esc(c)] for a, b, c in rows], "memory",
                 caption=f"Memory per GPU (most loaded rank: {mem.get('stage') or 'first pipeline stage'}; estimate; "
                         "ZeRO paper model states, "
                         "Korthikanti et al. 2022 activations)")
    body += f"<p>parameters: {mem['params_per_gpu']:,} on this GPU of {mem['total_params']:,}</p>"
    acc = "".join(f"<li>{esc(a)}</li>" for a in mem.get("accounting") or [])
    if acc:
        body += f'<ul class="accounting">{acc}</ul>'
    other = []
    mt = der.get("megatron_theoretical")
    if mt:
        other.append([esc("Megatron-LM theoretical memory"), esc(f"{mt['total_mib']:,.2f} MiB"),
                      esc(f"weight and optimizer {mt['weight_and_optimizer_mib']:,.2f} MiB, activation "
                          f"{mt['activation_mib']:,.2f} MiB; {mt['formula']}")])
    la = der.get("llm_analysis")
    if la:
        other.append([esc("llm-analysis 0.2.2"), esc(_gib(la["total_bytes"])),
                      esc(f"activations {_gib(la['activations_bytes'])} ({la['difference']:+.1%} here): "
                          + "; ".join(la["why"]))])
    ds = der.get("deepspeed_estimator")
    if ds:
        other.append([esc(f"DeepSpeed's estimator ({ds['source']})"), esc(_gib(ds["bytes"])),
                      esc(f"{ds['formula']} (model states); it differs because {ds['why']}")])
    if other:
        body += table(["Accounting", "Per GPU", "How it counts"], other, "anchors",
                      caption="The same job in other accountings")
    return body


def _speed(d: Mapping[str, Any]) -> str:
    """The Speed section: the estimate's headline numbers, where the time goes and the links' traffic
    (kg.output.training_speed_report words them for the text report), or why it is not evaluable."""
    from kg.output.training_speed_report import DOC, TERMS, _bytes, _secs
    sp = d.get("speed")
    if not sp:
        return "<p>Not computed.</p>"
    if not sp.get("evaluable"):
        return f"<p>Not evaluable: {esc(sp.get('reason', '?'))}</p>"
    step = sp["step_time_s"]
    head = table(["Step time", "Tokens/s per GPU", "Tokens/s", "Model TFLOP/s per GPU", "MFU", "HFU"], [[
        esc(_secs(step)), esc(f"{sp['tokens_per_s_per_gpu']:,.0f}"), esc(f"{sp['tokens_per_s']:,.0f}"),
        esc(f"{sp['model_tflops_per_gpu']:,.0f}"), esc(f"{sp['mfu']:.1%}"), esc(f"{sp['hfu']:.1%}")]], "speed",
        caption=f"Estimate; MFU against the {sp['mfu_peak']}; constants fitted on published rows ({DOC})")
    terms = table(["Term", "Per step", "Share"], [[esc(name), esc(_secs(sp["terms"][k])), esc(f"{sp['terms'][k] / step:.0%}")]
                                                for k, name in TERMS if sp["terms"].get(k, 0) > 0.0005 * step],
                  "speed-terms", caption="Where the time goes")
    comm = table(["Traffic", "Bytes per GPU", "Per", "Link", "Overlapped", "On the critical path"], [[
        esc(c["kind"]), esc(_bytes(c["bytes"])), esc(c["per"]), esc(f"{c['link']} ({c['link_bytes_per_s'] / 1e9:,.0f} GB/s)"),
        esc("yes" if c["overlapped"] else "no"), esc(_secs(c["seconds"]))] for c in sp.get("communication") or []],
        "speed-comm") if sp.get("communication") else ""
    return head + terms + comm + f"<p>{esc(sp['constants']['source'])}</p>"


def training_section(d: Mapping[str, Any], site: str, n: int = 0) -> str:
    """One training job's section of the page (see module doc); ``site`` is the checked --site-url."""
    from kg.output.site.report import finding_html
    st = d.get("stack") or {}
    fs = d.get("findings") or []
    unknown = d.get("not_evaluable") or []
    if fs:
        verdict = ""
    elif unknown:
        verdict = (f"<p><strong>No rule fired, but {len(unknown)} rule(s) could not be evaluated</strong> (listed "
                   "below): this is not a clean bill of health.</p>")
    elif d.get("rules_evaluated"):
        verdict = (f"<p>No findings: {d['rules_evaluated']} of {d.get('rules_total', '?')} training rules apply to this "
                   "job and were checked.</p>")
    else:
        verdict = "<p>Nothing could be checked: no training rule applies to what this input gives.</p>"
    ne = table(["Rule", "Missing facts", "Reason"], [
        [f"<code>{esc(u['rule_id'])}</code>", esc(", ".join(u.get("needs") or u.get("missing") or ["?"])),
         esc(u.get("reason") or "")] for u in unknown], "ne") if unknown else \
        "<p>None: every rule that applies was evaluated.</p>"
    in_eff = "".join(f"<li>{esc(e['message'])} <code>{esc(e['coupling'])}</code></li>" for e in d.get("in_effect") or [])
    notes = "".join(f"<li>{esc(x)}</li>" for x in d.get("notes") or [])
    if d.get("ignored_flags"):
        notes += f"<li>not modelled (ignored): <code>{esc(' '.join(sorted(set(d['ignored_flags']))))}</code></li>"
    summary = f'<p class="summary"><strong>{esc(summary_line(d))}</strong></p>' if d.get("outcomes") else ""
    return (f'<section class="report training" id="job-{n}" aria-labelledby="h-job-{n}">'
            f'<h2 id="h-job-{n}">{esc(st.get("name") or st.get("source") or "training job")}</h2>{_job(d, site)}'
            f"{summary}<h3>Parallel layout</h3>{_layout(d)}<h3>Batch</h3>{_batch(d)}"
            f"<h3>Memory per GPU</h3>{_memory(d)}<h3>Speed</h3>{_speed(d)}"
            f'<h3>Findings ({len(fs)})</h3>{verdict}{"".join(finding_html(f, site) for f in fs)}'
            f"<h3>Could not be evaluated ({len(unknown)})</h3>{ne}"
            + (f"<h3>In effect (nothing to fix)</h3><ul>{in_eff}</ul>" if in_eff else "")
            + (f"<h3>Notes</h3><ul>{notes}</ul>" if notes else "") + "</section>")


def render_training_html(d: Mapping[str, Any], site_url: str, css: str = "") -> str:
    """The whole page for one training report ``d`` (kind ``training``); ``css`` is inlined."""
    from kg.output.site.report import check_site_url, report_page
    site = check_site_url(site_url)
    st = d.get("stack") or {}
    return report_page(f"{st.get('name') or st.get('source') or 'training job'} (training)",
                       training_section(d, site), site, css)
