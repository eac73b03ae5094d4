"""Text rendering of a training report (``kind: training`` from kg.analyses.training.check_training).

Sections: the job (framework, model, GPUs), the parallel layout, batch arithmetic, memory per GPU
with its breakdown and accounting, then findings. A training report never prints serving terms
(KV cache, concurrency, max_model_len). "No findings" is printed only when rules were evaluated;
when the memory could not be computed the report says which input is missing.
"""
from __future__ import annotations

from typing import Any, Mapping

from kg.core.numfmt import fmt_pct
from kg.core.paths import repo_path
from kg.output.report import summary_line

# GiB (2**30 B): GPU memory is sized and reported in it (torch.cuda, the serving reports), so the GPU's
# capacity and the estimate read in one unit (an H100-SXM: 79.65 GiB)
GIB = 2**30


def _gib(n: int | float | None) -> str:
    return "-" if n is None else f"{n / GIB:,.2f} GiB"


def gpus_phrase(d: Mapping[str, Any]) -> str:
    """The header's GPUs: "16 x H100-SXM", "8 GPUs (GPU model not given)", "H100-SXM, count not given
    (the layout uses 8)" or "not given (the layout uses 8)". The count is given when the job names its
    world size (``--count``, a launcher's ``--nproc_per_node``/``--nnodes`` ...), else the layout's
    TP x PP x CP x DP is the number it would use."""
    st = d.get("stack") or {}
    s = st.get("settings") or {}
    par = (d.get("derived") or {}).get("parallel") or {}
    world, gpu = par.get("world_size"), st.get("gpu")
    given = "world_size" in s or "gpus_per_node" in s
    if given and world:
        n = f"{world:,} GPU" + ("" if world == 1 else "s")
        return f"{world:,} x {gpu}" if gpu else f"{n} (GPU model not given)"
    if st.get("gpu_count_unknown"):  # the launcher sizes the job from something optkg cannot read (a hostfile)
        return f"{gpu}, count unknown (give --count)" if gpu else "count unknown (give --count)"
    uses = f" (the layout uses {world:,})" if world else ""
    return f"{gpu}, count not given{uses}" if gpu else f"not given{uses}"


def _size(v: Any) -> str:
    return "?" if v is None else str(v)


def _wrap(text: str, indent: str = "  ", sub: str = "    ") -> list[str]:
    """``text`` as lines of at most 100 columns (output for people fits 100 columns)."""
    import textwrap
    return textwrap.wrap(text, width=100, initial_indent=indent, subsequent_indent=sub, break_on_hyphens=False) or [indent]


def _layout_lines(st: Mapping[str, Any], par: Mapping[str, Any]) -> tuple[list[str], bool]:
    """The parallel layout section and whether TP x PP x CP x DP contradicts the world size."""
    s = st.get("settings") or {}
    known = None not in (par["pp_size"], par["dp_size"])
    given = "world_size" in s or "gpus_per_node" in s
    dp_txt, mismatch = _size(par["dp_size"]), False
    if known:
        n = par['tp_size'] * par['pp_size'] * par['cp_size'] * par['dp_size']
        tail = f"= {n:,} GPU" + ("" if n == 1 else "s")
        mp = par['tp_size'] * par['pp_size'] * par['cp_size']
        if given and par.get("world_size") and n != par["world_size"]:
            # DP = world / (TP x PP x CP) (Megatron-core parallel_state.initialize_model_parallel): the one world
            # size of this report is the job's; a layout that does not divide it has no whole DP
            mismatch, dp_txt = True, "?"
            tail = f"(TP x PP x CP = {mp:,} does not divide the world size {par['world_size']:,} GPUs)"
    else:
        tail = f"(of {par['world_size']:,} GPUs; pipeline size unknown)" if given else "(pipeline size unknown)"
    line = f"  TP {par['tp_size']} x PP {_size(par['pp_size'])} x CP {par['cp_size']} x DP {dp_txt} {tail}"
    if par.get("ep_size", 1) > 1:
        line += f", EP {par['ep_size']}"
    extras = []
    for key, label in (("vpp_size", "virtual stages {}"), ("sequence_parallel", "sequence parallel"),
                       ("zero_stage", "ZeRO-{}"), ("distributed_optimizer", "distributed optimizer"),
                       ("fsdp_sharding", "FSDP {}"), ("recompute_granularity", "recompute {}")):
        if s.get(key):
            extras.append(label.format(s[key]))
    return ["Parallel layout", line + (f"   ({', '.join(extras)})" if extras else "")], mismatch


def _batch_lines(der: Mapping[str, Any], mismatch: bool) -> list[str]:
    ba = der.get("batch") or {}
    out: list[str] = []
    if ba.get("global_batch_size") or ba.get("micro_batch_size"):
        out.append("Batch")
        txt = (f"  micro {ba.get('micro_batch_size') or '?'} x grad-accum {ba.get('gradient_accumulation_steps') or '?'}"
               f" x DP {'?' if mismatch else _size(ba.get('dp_size'))}")
        if not mismatch and ba.get("batch_consistent") is False:  # all three given and they do not multiply out
            txt += (f" = {ba['expected_global_batch_size']:,} sequences, but the global batch given is "
                    f"{ba['global_batch_size']:,}")
        else:
            txt += f" = global {ba.get('global_batch_size') or '?'} sequences"
            if ba.get("tokens_per_step"):
                txt += f"; {ba['tokens_per_step']:,} tokens per step"
        out.append(txt)
    pl = der.get("pipeline")
    if pl:
        out += _wrap(f"pipeline bubble {pl['formula']} = {pl['bubble_fraction']:.1%} of the compute time "
                     f"(m from {pl['microbatches_from']}; {pl['source']})")
    return out


def _memory_lines(d: Mapping[str, Any], der: Mapping[str, Any], mem: Mapping[str, Any]) -> list[str]:
    out = [f"Memory per GPU (most loaded rank: {mem.get('stage') or 'first pipeline stage'}; estimate)",
           "  accounting: ZeRO paper model states, Korthikanti et al. 2022 activations; GiB = 2^30 bytes"]
    rows = [("weights", mem["weights_bytes"]), ("gradients", mem["gradients_bytes"]),
            ("optimizer states", mem["optimizer_bytes"])]
    if mem.get("working_buffer_bytes"):
        rows.append(("gathered unit (ZeRO-3/FSDP)", mem["working_buffer_bytes"]))
    rows.append(("model states", mem["model_states_bytes"]))
    for name, v in rows:
        out.append(f"  {name:<30} {_gib(v):>12}")
    out.append(f"  {'activations':<30} {_gib(mem['activations_bytes']):>12}   ({mem['layers_on_first_stage']} layers x "
               f"{mem['in_flight_microbatches']:g} micro-batches in flight, {mem['activation_bytes_per_layer'] / 2**20:,.1f} MiB per layer)")
    gpu = d.get("gpu_memory_bytes")
    total = f"  {'total':<30} {_gib(mem['total_bytes']):>12}"
    if gpu:
        total += f"   of {_gib(gpu)} ({fmt_pct(mem['total_bytes'] / gpu)})"  # as the rule's {fraction:.0%}
    out.append(total)
    if mem.get("cpu_offload_bytes"):
        # DeepSpeed ZeRO-Infinity's device nvme keeps the offloaded states on the SSD (the host holds pinned buffers)
        s = (d.get("stack") or {}).get("settings") or {}
        where = sorted({str(s.get(k)) for k in ("offload_optimizer", "offload_param") if s.get(k) not in (None, "none")})
        label = "on NVMe (offload)" if where == ["nvme"] else \
            "on the host / NVMe (offload)" if "nvme" in where else "on the host (offload)"
        out.append(f"  {label:<30} {_gib(mem['cpu_offload_bytes']):>12}")
    if mem.get("params_resident_per_gpu") is not None:
        out += _wrap(f"parameters: {mem['params_resident_per_gpu']:,} resident on this GPU after sharding over "
                     f"{mem['shard_group']:,} GPUs ({mem['params_per_gpu']:,} before sharding, gathered one unit at a "
                     f"time) of {mem['total_params']:,}")
    else:
        out.append(f"  parameters: {mem['params_per_gpu']:,} on this GPU of {mem['total_params']:,}")
    for a in mem.get("accounting") or []:
        out.append(f"  - {a}")
    mt = der.get("megatron_theoretical")
    if mt:
        out.append(f"  Megatron-LM's theoretical memory for these arguments: weight and optimizer="
                   f"{mt['weight_and_optimizer_mib']:,.2f} MB, activation={mt['activation_mib']:,.2f} MB, "
                   f"total={mt['total_mib']:,.2f} MB (MiB; {mt['formula']}; it counts 18 or 6 + 12/DP bytes per "
                   "parameter and the SwiGLU MLP as 4·ffn/h)")
        if mt.get("verdict"):
            out += _wrap(f"-> which matches these flags: {mt['verdict']}", "    ", "      ")
    la = der.get("llm_analysis")
    if la:
        out.append(f"  llm-analysis 0.2.2's accounting of the activations: {_gib(la['activations_bytes'])} "
                   f"(this report: {_gib(mem['activations_bytes'])}, Korthikanti Table 2); with these model states "
                   f"{_gib(la['total_bytes'])} against {_gib(mem['total_bytes'])} here ({la['difference']:+.1%}):")
        for w in la["why"]:
            out.append(f"    - {w}")
        if la.get("verdict"):
            out += _wrap(f"-> which matches these flags: {la['verdict']}", "    ", "      ")
    ds = der.get("deepspeed_estimator")
    if ds:
        out.append(f"  DeepSpeed's own estimator ({ds['source']}): {ds['formula']} = {_gib(ds['bytes'])} of model states;")
        out.append(f"    it differs because {ds['why']}.")
        if ds.get("verdict"):
            out += _wrap(f"-> which matches these flags: {ds['verdict']}", "    ", "      ")
    return out


def render_training_text(d: Mapping[str, Any], explain: bool = False) -> str:
    st = d.get("stack") or {}
    der = d.get("derived") or {}
    par = der.get("parallel") or {}
    out: list[str] = []
    fw = st.get("framework") or "?"
    if st.get("framework_version"):
        fw += f" {st['framework_version']}"
    if st.get("framework_assumed"):
        fw += " (assumed)"
    out.append(f"optkg check (training): {st.get('name') or st.get('source') or 'job'}")
    out.append(f"  framework: {fw}   model: {st.get('model') or '(shape from arguments)'}   "
               f"GPUs: {gpus_phrase(d)}")
    mismatch = False
    if par:
        lines, mismatch = _layout_lines(st, par)
        out += lines
    out += _batch_lines(der, mismatch)
    mem = der.get("memory")
    if mem:
        out += _memory_lines(d, der, mem)
    from kg.output.training_speed_report import training_speed_lines
    out += training_speed_lines(d.get("speed"))
    for n in d.get("notes") or []:
        out.append(f"note: {n}")
    if d.get("ignored_flags"):
        out.append(f"not modelled (ignored): {', '.join(sorted(set(d['ignored_flags'])))}")
    out.append("")
    findings = d.get("findings") or []
    unknown = d.get("not_evaluable") or []
    for f in findings:
        label = "WARN" if f["severity"] == "warning" else f["severity"].upper()  # as the serving report
        out.append(f"{label:<6}{f['rule_id']}: {f['title']}")
        out.append(f"      {f['message']}")
        if f.get("techniques"):
            out.append(f"      techniques: {', '.join(f['techniques'])}")
        if f.get("mechanism") and f.get("coupling") and not f.get("rule_line"):
            out.append(f"      why: {f['mechanism']}")
        if f.get("fix"):
            out.append(f"      fix: {f['fix']}")
        for s in (f.get("sources") or [])[:3]:
            out.append(f"      source: {s.get('title')} <{s.get('url')}>")
        if "generated" in (f.get("tags") or []):  # a check generated from the framework's released source
            out.append(f"      generated: {repo_path(f.get('rule_file', ''))} (site {f['rule_id']})")
        elif f.get("coupling") and not f.get("rule_line"):  # generated from a catalog coupling
            out.append(f"      coupling: {f['coupling']} ({repo_path(f.get('rule_file', ''))})")
        else:
            out.append(f"      rule: {repo_path(f.get('rule_file', ''))}:{f.get('rule_line')}"
                       + (f" (refines coupling {f['coupling']})" if f.get("coupling") else ""))
    if not findings and d.get("rules_evaluated") and not unknown:
        cp = d.get("couplings_evaluated")
        out.append(f"No findings ({d['rules_evaluated']} of {d.get('rules_total', '?')} training rules apply to this "
                   "job and were checked" + (f", and {cp} catalog coupling rule(s)" if cp else "")
                   + "; --explain lists the others).")
    elif not findings and unknown:
        out.append(f"No rule fired, but {len(unknown)} rule(s) could not be evaluated (listed below): "
                   "this is not a clean bill of health.")
    elif not findings:
        out.append("Nothing could be checked: no training rule applies to what this input gives (--explain says why).")
    eff = d.get("in_effect") or []
    if eff:
        out.append("")
        out.append("In effect (catalog couplings that apply to this job; nothing to fix):")
        for e in eff:
            out.append(f"  {e['message']} [{e['coupling']}]")
    if unknown:
        out.append("")
        out.append(f"Could not be evaluated ({len(unknown)}):")
        for u in unknown:
            out.append(f"  {u['rule_id']}: missing {', '.join(u.get('needs') or u.get('missing') or ['?'])}"
                       + ("" if u.get("missing") else f" ({u.get('reason', '')})"))
    if explain:
        out.append("")
        out.append("Rules that did not fire:")
        for nf in d.get("not_fired") or []:
            out.append(f"  {nf['rule']}: {nf['reason']}")
    if d.get("outcomes"):
        out.append("")
        out.append(summary_line(d))
    from kg.output.report import fit_width
    return fit_width("\n".join(out)) + "\n"  # output for people fits 100 columns
