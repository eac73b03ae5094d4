"""Renderers for ``optkg check`` reports: text (people) and JSON (machines).

Input is the dict of ``Report.to_dict()``; nothing here reaches back into the catalog or the
engine. Other formats (SARIF, GitHub annotations, markdown) live in kg.output.formats.
"""
from __future__ import annotations

import json
import textwrap
from typing import Any

from kg.core.numfmt import REPORT, fmt_error_gib, fmt_num
from kg.core.paths import repo_path
from kg.core.textsafe import one_line

SEV_MARK = {"error": "ERROR", "warning": "WARN ", "info": "INFO "}


def _wrap(text: str, indent: str) -> str:
    return textwrap.fill(" ".join(text.split()), width=100, initial_indent=indent, subsequent_indent=indent)


OUTCOME_TEXT = {"crash": "starts, then crashes", "hang": "starts, then hangs", "wrong-output": "starts, then returns wrong output",
                "degraded": "starts, then silently degrades", "request-error": "starts, then fails requests"}


def _runtime_lines(f: dict[str, Any]) -> list[str]:
    """The header line a runtime-failure finding adds: what happens, affected releases, the fix release."""
    fb = f.get("failure") or {}
    fixed = f"fixed in {fb['fixed_in']}" if fb.get("fixed_in") else "no fixed release"
    return [_wrap(f"{OUTCOME_TEXT.get(fb.get('outcome'), 'starts, then fails')}: affected {fb.get('engine', '')} "
                  f"{fb.get('affected', '')}; {fixed}", "      ")]


def _runtime_tail(f: dict[str, Any]) -> list[str]:
    """What the reporter saw, why no fix is named, and the issue (URL never wrapped)."""
    fb = f.get("failure") or {}
    issue = fb.get("issue") or {}
    out = [_wrap(f"reported: {fb.get('observed', '')}", "      ")]
    if not fb.get("fixed_in") and fb.get("fixed_in_note"):
        out.append(_wrap(f"no fix: {fb['fixed_in_note']}", "      "))
    out.append(f"      issue: #{issue.get('number', '?')} <{issue.get('url', '')}>")
    return out


def render_check_text(d: dict[str, Any], explain: bool = False) -> str:
    """A readable report: stack summary, KV derivations, then each finding with numbers, costs, fixes, sources."""
    s = d["stack"]
    out = [f"optkg check: {one_line(s['name'])}"]
    assumed = " (assumed: the latest release optkg knows)" if s.get("engine_version_assumed") else ""
    out.append(one_line(f"  model: {s['model']} ({s['attention']})   engine: {s['engine'] or '-'}"
               f"{' ' + s['engine_version'] if s.get('engine_version') else ''}{assumed}   hardware: {s['hardware'] or '-'}")
               + f"{' x' + str(s['gpu_count']) if s.get('gpu_count') else ''}")
    dv = d.get("derived") or {}
    if dv.get("nodes_assumed"):
        out.append(_wrap(f"nodes: {dv['nodes_assumed']}", "  "))
    eng_block = dv.get("kv_block_size")  # the block the engine plans with (raised for sparse MLA / Mamba hybrids)

    def param(a: str, b: Any) -> str:
        return f"{a}={eng_block} (engine; table {b})" if a == "block_size" and eng_block and eng_block != b else f"{a}={b}"
    techs = ", ".join(f"{k}({', '.join(param(a, b) for a, b in v.items())})" if v else k for k, v in s["techniques"].items())
    out.append(_wrap(f"techniques: {techs or '-'}", "  "))
    if dv:
        out.append("")
        out.append("KV cache")
        rows = [("bytes/token, whole model", "kv_bytes_per_token_model"),
                ("bytes/token per GPU", "kv_bytes_per_token_per_gpu"),
                ("+ the draft's bytes/token per GPU", "draft_kv_bytes_per_token_per_gpu"),
                ("bytes/token per GPU without replication", "kv_bytes_per_token_per_gpu_unreplicated"),
                ("KV-head replication (after DCP)" if "valid_dcp_sizes" in dv else "KV-head replication", "kv_replication"),
                ("cross-attn bytes/encoder token per GPU", "kv_cross_bytes_per_encoder_token_per_gpu"),
                ("cross-attn encoder tokens per request", "kv_cross_encoder_tokens_per_request"),
                ("KV blocks per request (self + cross)", "kv_cross_blocks_total_per_request"),
                ("KV budget per GPU (bytes)", "kv_budget_bytes_per_gpu"),
                ("KV layer groups (vLLM)", "kv_layer_groups"),
                ("hybrid KV-cache manager (vLLM)", "kv_hybrid_manager"),
                ("blocks per request at max_model_len", "kv_blocks_per_request"),
                ("KV tokens per GPU", "kv_tokens_per_gpu"),
                ("SGLang SWA-pool tokens per GPU", "kv_sglang_swa_pool_tokens"),
                ("SGLang pools' layers", "kv_sglang_pool_layers"),
                ("SGLang Mamba state per request (bytes)", "kv_sglang_mamba_state_bytes_per_request"),
                ("SGLang Mamba pool per GPU (bytes)", "kv_sglang_mamba_pool_bytes"),
                ("SGLang Mamba state slots per GPU", "kv_sglang_max_mamba_cache_size"),
                ("SGLang Mamba slots per running request", "kv_sglang_mamba_slots_per_request"),
                ("max running requests (Mamba-capped)" if dv.get("max_running_requests_capped_by_mamba")
                 else "max running requests", "max_running_requests"),
                (f"KV tokens, all pools ({dv['kv_tokens_total_basis'].split(':')[0]})"
                 if str(dv.get("kv_tokens_total_basis", "")).startswith("x dp")
                 else f"KV tokens, scheduler-wide ({str(dv.get('kv_tokens_total_basis') or 'x dcp').split(':')[0]})",
                 "kv_tokens_total"),
                ("max concurrency at max_model_len", "max_concurrency"),
                ("KV tokens, all DP engines", "kv_tokens_all_dp_engines"),
                ("max concurrency, all DP engines", "max_concurrency_all_dp_engines")]
        hybrid_groups = bool(dv.get("kv_hybrid_manager") or " + " in str(dv.get("kv_layer_groups") or ""))
        if dv.get("kv_cache_dtype_checkpoint"):  # vLLM's 'auto' follows the checkpoint's KV format (kg.derive.kv_dtype)
            out.append(one_line(f"  {'KV-cache dtype':<42} {dv.get('kv_cache_dtype')} (auto: checkpoint"
                                f" {dv['kv_cache_dtype_checkpoint']}; {dv.get('kv_cache_dtype_source')})"))
        for label, key in rows:
            if key == "kv_budget_bytes_per_gpu" and key in dv:
                # the budget is an estimate unless the user gave it: say so, in GiB, not to the byte
                gib = dv[key] / 2**30
                if str(dv.get("kv_budget_source", "")).startswith("estimated"):
                    err = fmt_error_gib(dv.get("kv_budget_error_bytes") or 0)
                    out.append(f"  {'KV budget per GPU (estimate)':<42} ~{gib:,.1f} GiB ({err})")
                    for i, line in enumerate(dv.get("kv_budget_breakdown") or []):
                        sign = "" if i == 0 else "- "
                        out.append(f"    {sign + line['name']:<40} {line['bytes'] / 2**30:,.2f} GiB  {line['basis']}"
                                   f" [{line['source']}]")
                else:
                    src = str(dv.get("kv_budget_source") or "")
                    how = src[len("given "):] if src.startswith("given (") else ""  # (--kv-cache-memory-bytes)
                    out.append(f"  {'KV budget per GPU (given)':<42} {gib:,.2f} GiB" + (f"  {how}" if how else ""))
            elif key in ("kv_layer_groups", "kv_blocks_per_request") and not hybrid_groups:
                continue  # one kind of layer: the groups say nothing the rows above do not
            elif key in dv:
                out.append(f"  {label:<42} {fmt_num(dv[key], REPORT)}")
        if "valid_dcp_sizes" in dv:
            if dv.get("dcp_possible"):
                out.append(f"  {'valid DCP sizes':<42} {fmt_num(dv['valid_dcp_sizes'], REPORT)}")
            else:
                why = dv.get("dcp_impossible_reason") or ("needs tp_size > num_key_value_heads for GQA/MHA,"
                                                          " and no sliding-window layers")
                out.append(f"  {'DCP':<42} impossible here ({why})")
    eff = d.get("effective_config") or []
    if eff:
        out.append("")
        out.append(f"Effective configuration ({s['engine']} {s.get('engine_version') or ''})".rstrip())
        brief = [e for e in eff if e.get("brief") and e["source"] == "engine default"]
        for e in eff:
            if e in brief:
                continue
            val = "?" if e["value"] is None else fmt_num(e["value"], REPORT)
            src = {"given": "given", "unknown": "unknown"}.get(e["source"], e["source"])
            head = f"  {e['setting']:<28} {val:<8} {src}"
            if e["source"] == "given":
                out.append(head)
            else:
                out.append(head + ":")
                out.append(_wrap(e["why"], " " * 6))
        if brief:
            shown = ", ".join(f"{e['setting']}={fmt_num(e['value'], REPORT)}" for e in brief)
            out.append(f"  engine defaults ({len(brief)}; release ranges and evidence with --format json):")
            out.append(_wrap(shown, " " * 6))
    out.append("")
    fs = d["findings"]
    unknown = d.get("not_evaluable") or []
    held = (d.get("outcomes") or {}).get("held")
    if not fs and not unknown:
        out.append(f"No findings: {held} applicable rule(s) held." if held is not None else "No findings.")
    elif not fs:
        out.append(f"No rule fired, but {len(unknown)} rule(s) could not be evaluated (listed below): "
                   "this is not a clean bill of health.")
    runtime = [f for f in fs if f.get("kind") == "runtime-failure"]
    for f in [f for f in fs if f.get("kind") != "runtime-failure"] + runtime:
        if runtime and f is runtime[0]:
            out.append(f"Starts, then fails at run time ({len(runtime)}): the engine accepts these settings; "
                       "the failure shows under load or on some requests")
            out.append("")
        out.append(f"{SEV_MARK.get(f['severity'], f['severity'].upper()):5} {f['rule_id']}: {one_line(f['title'])}")
        if f.get("kind") == "runtime-failure":
            out.extend(_runtime_lines(f))
        out.append(_wrap(f["message"], "      "))
        if f.get("location"):
            out.append(f"      at: {f['location']}")
        if f.get("numbers"):
            out.append("      numbers: " + "; ".join(f"{k} = {fmt_num(v, REPORT)}" for k, v in f["numbers"].items()))
        if f.get("cost_dimension"):
            cross = f"{f['from_dimension']} -> {f['cost_dimension']}" if f.get("from_dimension") else f["cost_dimension"]
            out.append(f"      cost lands in: {cross}")
        if f.get("techniques"):
            cells = "; ".join(
                f"{c['technique']} [{'/'.join(c.get('stages', []))} x {'-'.join(c.get('layers', []))} x {c.get('dimension', '?')}]"
                for c in f.get("coordinates", []))
            out.append(_wrap(f"techniques: {cells}", "      "))
        if f.get("mechanism"):
            out.append(_wrap(f"why: {f['mechanism']}", "      "))
        if f.get("kind") == "runtime-failure":
            out.extend(_runtime_tail(f))
        if f.get("fix") or f.get("fixes"):
            fx = f.get("fix") or ", ".join(x["technique"] for x in f["fixes"])
            ids = ", ".join(x["technique"] for x in f.get("fixes", []))
            out.append(_wrap(f"fix: {fx}" + (f" (catalog: {ids})" if ids and f.get('fix') else ""), "      "))
        for src in f.get("sources", [])[:3]:
            out.append(one_line(f"      source: {src['title']} <{src['url']}>"))
        if f.get("coupling") and not f.get("rule_line"):  # generated from a catalog coupling
            out.append(f"      coupling: {f['coupling']} ({repo_path(f['rule_file'])})")
        else:
            out.append(f"      rule: {repo_path(f['rule_file'])}:{f['rule_line']}"
                       + (f" (refines coupling {f['coupling']})" if f.get("coupling") else ""))
        out.append("")
    if d.get("ignored_flags"):
        out.append(_wrap("ignored (not modelled): " + " ".join(d["ignored_flags"]), ""))
    for n in d.get("notes") or []:
        out.append(f"note: {one_line(n)}")
    eff_notes = d.get("in_effect") or []
    if eff_notes:
        out.append("In effect (catalog couplings that apply to this stack; nothing to fix):")
        for e in eff_notes:
            out.append(_wrap(f"{e['message']} [{e['coupling']}]", "  "))
    if unknown:
        out.append("")
        out.append(f"Could not be evaluated ({len(unknown)}):")
        for u in unknown:
            out.append(_wrap(f"{u['rule_id']}: missing {', '.join(u.get('needs') or u.get('missing') or ['?'])}"
                             + ("" if u.get("missing") else f" ({u.get('reason', '')})"), "  "))
    if explain:
        out.append("")
        out.append("Rules that did not fire:")
        for nf in d.get("not_fired", []):
            out.append(_wrap(f"{nf['rule']}: {nf['reason']}", "  "))
    out.append(summary_line(d))
    return "\n".join(out).rstrip() + "\n"


def summary_line(d: dict[str, Any], max_names: int = 6) -> str:
    """``2 finding(s) (1 error, 1 warning) · 74 rules held · 7 could not be evaluated (missing: a, b …)``.

    Counts come from the report's ``outcomes`` (rules that fired, held, could not be evaluated);
    the missing inputs are the ``needs`` of every not-evaluable rule, most frequent first."""
    fs = d["findings"]
    counts: dict[str, int] = {}
    for f in fs:
        counts[f["severity"]] = counts.get(f["severity"], 0) + 1
    parts = [f"{len(fs)} finding(s)" + (" (" + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) + ")"
                                        if counts else "")]
    oc = d.get("outcomes")
    if oc:
        parts.append(f"{oc.get('held', 0)} rules held")
        unknown = d.get("not_evaluable") or []
        if unknown:
            freq: dict[str, int] = {}
            for u in unknown:
                for n in u.get("needs") or u.get("missing") or ["a comparison of mismatched types"]:
                    freq[n] = freq.get(n, 0) + 1
            names = sorted(freq, key=lambda n: (-freq[n], n))
            more = " …" if len(names) > max_names else ""
            parts.append(f"{len(unknown)} could not be evaluated (missing: {', '.join(names[:max_names])}{more})")
        else:
            parts.append("0 could not be evaluated")
    return " · ".join(parts)


def to_json(d: Any) -> str:
    """Deterministic JSON (sorted keys, 2-space indent, UTF-8 kept)."""
    return json.dumps(d, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n"
