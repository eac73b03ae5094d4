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
from kg.core.textsafe import WIDTH, fit_width, one_line  # noqa: F401 (fit_width: re-exported)

SHOWN_DEFAULTS = 8  # engine defaults no finding reads are named up to this many, else counted
SEV_MARK = {"error": "ERROR", "warning": "WARN ", "info": "INFO "}


def _wrap(text: str, indent: str, first: str | None = None) -> str:
    """``text`` filled to WIDTH columns; URLs and paths are never broken."""
    return textwrap.fill(" ".join(text.split()), width=WIDTH, initial_indent=indent if first is None else first,
                         subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)


class Sources:
    """Numbered sources: long citations leave the line they support as ``[n]`` and are listed once at the end."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def cite(self, text: str) -> str:
        text = " ".join(str(text).split())
        if text not in self.items:
            self.items.append(text)
        return f"[{self.items.index(text) + 1}]"

    def lines(self) -> list[str]:
        if not self.items:
            return []
        out = ["", "Sources"]
        for i, t in enumerate(self.items, 1):
            tag = f"  [{i}] "
            out.append(_wrap(t, " " * len(tag), first=tag))
        return out


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


def render_check_text(d: dict[str, Any], explain: bool = False, verbose: bool = False) -> str:
    """A readable report, at most WIDTH columns: stack summary, KV derivations, the effective configuration (what
    was given or is read by a finding or the KV budget; every default with ``verbose``), each finding, what could
    not be evaluated (one line per missing fact, with how to give it), numbered sources and the terms used."""
    s = d["stack"]
    refs = Sources()
    out = [_wrap(f"optkg check: {one_line(s['name'])}", "  ", first="")]
    assumed = " (assumed: the latest release optkg knows)" if s.get("engine_version_assumed") else ""
    out.append(_wrap(one_line(f"model: {s['model']} ({s['attention']});  hardware: {s['hardware'] or '-'}"
                              + (f" x{s['gpu_count']}" if s.get("gpu_count") else "")), "    ", first="  "))
    out.append(_wrap(one_line(f"engine: {s['engine'] or '-'}"
                              f"{' ' + s['engine_version'] if s.get('engine_version') else ''}{assumed}"), "    ",
                     first="  "))
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
                ("--max-total-tokens (SGLang)", "kv_max_total_tokens"),
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
                (f"max concurrency at {fmt_num(dv.get('max_concurrency_request_len'), REPORT)} tokens",
                 "max_concurrency_at_request_len"),
                ("KV tokens, all DP engines", "kv_tokens_all_dp_engines"),
                ("max concurrency, all DP engines", "max_concurrency_all_dp_engines")]
        hybrid_groups = bool(dv.get("kv_hybrid_manager") or " + " in str(dv.get("kv_layer_groups") or ""))
        if dv.get("kv_cache_dtype_checkpoint"):  # vLLM's 'auto' follows the checkpoint's KV format (kg.engines.vllm.kv_dtype)
            what = "" if dv.get("kv_cache_dtype_auto_reason") == "dsa" else " checkpoint"  # DSA on SM10x: no checkpoint
            out.append(one_line(f"  {'KV-cache dtype':<42} {dv.get('kv_cache_dtype')} (auto:{what}"
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
                        out.append(f"    {sign + line['name']:<40} {line['bytes'] / 2**30:,.2f} GiB "
                                   f"{refs.cite(line['source'])}")
                        out.append(_wrap(line["basis"], " " * 8))
                else:
                    src = str(dv.get("kv_budget_source") or "")
                    how = src[len("given "):] if src.startswith("given (") else ""  # (--kv-cache-memory-bytes)
                    out.append(f"  {'KV budget per GPU (given)':<42} {gib:,.2f} GiB" + (f"  {how}" if how else ""))
            elif key in ("kv_layer_groups", "kv_blocks_per_request") and not hybrid_groups:
                continue  # one kind of layer: the groups say nothing the rows above do not
            elif key in dv:
                out.append(f"  {label:<42} {fmt_num(dv[key], REPORT)}")
            elif key == "kv_tokens_per_gpu" and dv.get("kv_capacity_not_evaluable"):  # the engine's pool lacks a fact
                out.append(_wrap(f"not evaluable: {dv['kv_capacity_not_evaluable']}", " " * 45,
                                 first=f"  {label:<42} "))
        if "valid_dcp_sizes" in dv:
            if dv.get("dcp_possible"):
                out.append(f"  {'valid DCP sizes':<42} {fmt_num(dv['valid_dcp_sizes'], REPORT)}")
            else:
                why = dv.get("dcp_impossible_reason") or ("needs tp_size > num_key_value_heads for GQA/MHA,"
                                                          " and no sliding-window layers")
                out.append(_wrap(f"impossible here ({why})", " " * 45, first=f"  {'DCP':<42} "))
    out.extend(_effective_lines(d, refs, verbose))
    if d.get("speed"):
        from kg.output.speed_report import speed_lines
        out.extend(speed_lines(d["speed"], _wrap))
    out.append("")
    fs = d["findings"]
    unknown = d.get("not_evaluable") or []
    held = (d.get("outcomes") or {}).get("held")
    if not fs and not unknown:
        out.append(f"No findings: {held} applicable rule(s) held." if held is not None else "No findings.")
    elif not fs:
        out.append(_wrap(f"No rule fired, but {len(unknown)} rule(s) could not be evaluated (listed below): "
                         "this is not a clean bill of health.", "  ", first=""))
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
            out.append(_wrap("numbers: " + "; ".join(f"{k} = {fmt_num(v, REPORT)}" for k, v in f["numbers"].items()),
                             " " * 15, first="      "))
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
        cited = [refs.cite(one_line(f"{src['title']} <{src['url']}>")) for src in f.get("sources", [])[:3]]
        if cited:
            out.append(f"      sources: {' '.join(cited)}")
        if f.get("coupling") and not f.get("rule_line"):  # generated from a catalog coupling
            out.append(_wrap(f"coupling: {f['coupling']} ({repo_path(f['rule_file'])})", " " * 8, first="      "))
        else:
            out.append(_wrap(f"rule: {repo_path(f['rule_file'])}:{f['rule_line']}"
                             + (f" (refines coupling {f['coupling']})" if f.get("coupling") else ""), " " * 8,
                             first="      "))
        out.append("")
    if d.get("ignored_flags"):
        out.append(_wrap("ignored (not modelled): " + "; ".join(d["ignored_flags"]), ""))  # an item may hold spaces
    for n in d.get("notes") or []:
        out.append(_wrap(f"note: {one_line(n)}", "      ", first=""))
    eff_notes = d.get("in_effect") or []
    if eff_notes:
        out.append("")
        out.append("In effect (catalog couplings that apply to this stack; nothing to fix):")
        for e in eff_notes:
            out.append(_wrap(f"{e['message']} [{e['coupling']}]", "  "))
    if unknown:
        out.append("")
        out.extend(_unknown_lines(unknown, d.get("how_to_give") or {}))
    if explain:
        out.append("")
        out.append("Rules that did not fire:")
        for nf in d.get("not_fired", []):
            out.append(_wrap(f"{nf['rule']}: {nf['reason']}", "    ", first="  "))
    out.extend(refs.lines())
    body = "\n".join(out)
    out.extend(_terms_lines(body))
    out.append("")
    out.append(summary_line(d, width=WIDTH))
    return fit_width("\n".join(out).rstrip()) + "\n"


# settings the KV table above is computed from: shown with the effective configuration even when no finding reads them
BUDGET_INPUTS = ("gpu_memory_utilization", "mem_fraction_static", "max_model_len", "context_length", "max_num_seqs",
                 "max_running_requests", "max_num_batched_tokens", "chunked_prefill_size", "kv_cache_dtype",
                 "block_size", "page_size")


def _read_by_findings(d: dict[str, Any]) -> set[str]:
    """The names the fired rules read (their facts and numbers)."""
    names: set[str] = set()
    for f in d.get("findings") or []:
        names.update((f.get("facts") or {}).keys())
        names.update((f.get("numbers") or {}).keys())
    return names


def _effective_lines(d: dict[str, Any], refs: Sources, verbose: bool) -> list[str]:
    """The effective configuration: given settings, and the engine defaults a finding or the KV budget reads; the
    other defaults are counted on one line (each with ``verbose``; every one with its evidence in JSON)."""
    s = d["stack"]
    eff = d.get("effective_config") or []
    if not eff:
        return []
    read = _read_by_findings(d) | (set(BUDGET_INPUTS) if d.get("derived") else set())
    shown = [e for e in eff if verbose or e["source"] != "engine default" or e["setting"] in read]
    rest = [e for e in eff if e not in shown]
    out = ["", f"Effective configuration ({s['engine']} {s.get('engine_version') or ''}".rstrip()
           + ("): given, and the defaults a finding or the KV budget reads" if not verbose else "): every setting")]
    for e in shown:
        val = "?" if e["value"] is None else fmt_num(e["value"], REPORT)
        head = f"  {e['setting']:<30} {val:<9} {e['source']}"
        if e["source"] == "given" or not e.get("why"):
            out.append(head)
        else:
            out.append(_wrap(e["why"], " " * 6, first=head + ": ") if len(head) < 60 else head)
    if rest and len(rest) <= SHOWN_DEFAULTS:
        names = ", ".join(f"{e['setting']}={fmt_num(e['value'], REPORT)}" for e in rest)
        out.append(_wrap(f"+ {len(rest)} engine default(s) no finding reads: {names} (--verbose: each with its"
                         " release range; --format json: its evidence)", "    ", first="  "))
    elif rest:  # a wall of flags nobody asked about (SGLang: 43) is a count, and --verbose lists them
        out.append(_wrap(f"+ {len(rest)} engine default(s) no finding reads (--verbose: each with its value and"
                         " release range; --format json: its evidence)", "    ", first="  "))
    return out


def _unknown_lines(unknown: list[dict[str, Any]], how: dict[str, str]) -> list[str]:
    """One line per missing fact: the fact, how to give it, and the rules that wait for it."""
    by_fact: dict[str, list[str]] = {}
    for u in unknown:
        for n in u.get("needs") or u.get("missing") or [f"a comparison of mismatched types ({u.get('reason', '')})"]:
            by_fact.setdefault(n, []).append(u["rule_id"])
    out = [f"Could not be evaluated ({len(unknown)} rule(s); give these facts to decide them):"]
    for fact, rules in sorted(by_fact.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        give = f" ({how[fact]})" if how.get(fact) else ""
        out.append(_wrap(f"{fact}{give}: {', '.join(rules)}", "      ", first="  "))
    return out


def _terms_lines(body: str) -> list[str]:
    """``Terms`` naming each glossary abbreviation the report uses, with the glossary's anchor."""
    from kg.output.glossary import terms_in
    used = terms_in(body)
    if not used:
        return []
    out = ["", "Terms (each explained in docs/glossary.md)"]
    for t in used:
        out.append(_wrap(f"{t['term']}: {t['short']}", "      ", first="  "))
    return out


def summary_line(d: dict[str, Any], max_names: int = 6, width: int | None = None) -> str:
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
            head = " · ".join(parts) + f" · {len(unknown)} could not be evaluated (missing: "
            shown: list[str] = []
            for n in names[:max_names]:  # with ``width``, as many names as keep the line within it
                if width and shown and len(head + ", ".join(shown + [n]) + " …)") > width:
                    break
                shown.append(n)
            more = " …" if len(shown) < len(names) else ""
            part = f"{len(unknown)} could not be evaluated (missing: {', '.join(shown)}{more})"
            if width and len(" · ".join(parts + [part])) > width:
                part = f"{len(unknown)} could not be evaluated (listed above)"  # not even one name fits
            parts.append(part)
        else:
            parts.append("0 could not be evaluated")
    return " · ".join(parts)


def to_json(d: Any) -> str:
    """Deterministic JSON (sorted keys, 2-space indent, UTF-8 kept)."""
    return json.dumps(d, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n"
