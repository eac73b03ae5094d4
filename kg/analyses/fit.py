"""Context fit: the Context Fit Checklist, the triangle and the three patterns, from a measured trace.

Input: a ``TraceMeasurement`` (kg.analyses.fitmeasure) or its flat features, an optional model (its KV
layout under tp/pp/dcp, kg.derive.kv), an optional GPU (catalog hardware: ``memory_gib``) or KV budget, and
facts the user states: ``causal`` (strict causal dependency), ``session_length`` (turns per
session), ``attention_locality`` ('local' or 'global'). Output: a report dict (``kind: fit``) with

- ``measurements`` (kg.analyses.fitmeasure summary) and ``features`` (the flat namespace the rules read);
- ``cost_curve``: KV bytes per GPU vs sequence length (batch 1) and vs batch size (at the p50
  request length), and the knees where they cross the GPU's KV budget (the free memory after
  weights: ``memory_gib x gpu_memory_utilization - estimated weights per GPU``, kg.derive.kv); the longest
  single sequence is the smaller of the memory knee and the model's context limit
  (``--max-model-len``, else ``max_position_embeddings``), and the report says which binds;
- the scheduler's batch limit the memory knee is compared with: ``--max-num-seqs``, else vLLM's
  default for the GPU (``scheduler_max_num_seqs``, thresholds in rules/fit.yaml with their source
  and release);
- ``capacities``: the LRU hit-ratio points with each capacity in KV bytes per GPU and for the
  whole parallel group, and whether it fits the GPU budget or needs host memory;
- ``checklist`` (items 1-5 of the method, each with its answer, evidence and rule outcomes),
  ``triangle`` (parallel granularity, state locality, state lifetime) and ``patterns`` (the
  three patterns, each tied to catalog techniques and their declared costs);
- ``rules``: every fit rule with fired / reason, so each recommendation is explainable.

The recommendations come from ``rules/fit.yaml`` evaluated by kg.engine.rules (durable-rules matching plus
kg.engine.expr conditions); thresholds are data in that file. Method: shared/method/000_591192a31bee64c3.txt.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from kg.core.errors import OptkgError
from kg.derive.kv import cacheable_tokens
from kg.analyses.fitmeasure import DEFINITIONS, TraceMeasurement, measure_trace
from kg.analyses.fitcurve import cost_curve, window_plan
from kg.engine.rules import Firing, RuleSet, evaluate_rules, load_ruleset

SCHEMA_VERSION = "1.0"
LOCALITY_VALUES = ("local", "global")

CHECKLIST = [
    (1, "Dependency type", "Is the dependency strictly causal? Then is fine-grained (token-level) pipeline parallelism viable?"),
    (2, "Context reuse", "How much prefix reuse, how long are sessions, how often does reused state come back?"),
    (3, "Attention topology", "Can sliding-window or grouped attention replace global attention?"),
    (4, "Cost curve", "Where does KV memory cross the GPU's free memory: memory first or latency first?"),
    (5, "Prototype validation", "What to validate in a prototype: P99 latency, throughput, host memory, cache hit rate."),
]

PATTERNS = [
    {"id": "pattern-1", "rule": "fit-compact-kv-pattern",
     "name": "Local attention + multi-query / grouped KV sharing + cross-layer sharing",
     "when": "long sessions or local attention, high prefix reuse, memory-bound",
     "techniques": ["sliding-window-attention", "multi-query-attention", "grouped-query-attention", "cross-layer-kv-sharing"]},
    {"id": "pattern-2", "rule": "fit-host-kv-cache",
     "name": "Host-side stateful KV cache + hashed longest-prefix match",
     "when": "long-lived, frequently reused state that outgrows the GPU cache",
     "techniques": ["host-kv-offload", "prefix-caching", "kv-cache-connector"]},
    {"id": "pattern-3", "rule": "fit-token-level-parallelism",
     "name": "Token-level parallelism",
     "when": "no strict causal dependency (batch or diffusion-style workloads)",
     "techniques": ["token-level-pipeline-parallelism"]},
]


# ---------------------------------------------------------------------------------------------
# features

def workload_features(m: TraceMeasurement | Mapping[str, Any]) -> dict[str, Any]:
    """Flat features of a measurement (the names the fit rules read). None values are left out."""
    s = m.summary if isinstance(m, TraceMeasurement) else m
    f: dict[str, Any] = {"trace_format": s["format"], "requests": s["requests"],
                         "duration_s": s["time"]["duration_s"], "arrival_rate_rps": s["time"]["arrival_rate_rps"]}
    for key, name in (("input", "input_len"), ("output", "output_len"), ("request", "request_len")):
        d = s["lengths"][key]
        for q in ("mean", "p50", "p90", "p99", "max"):
            if q in d:
                f[f"{name}_{q}"] = d[q]
    pr = s["prefix_reuse"]
    f["prefix_measurable"] = bool(pr["measurable"])
    if pr["measurable"]:
        f["block_size"] = s["block_size"]
        f["prefix_reuse_ratio"] = pr["ratio_blocks"]
        f["prefix_reuse_token_ratio"] = pr["ratio_tokens"]
        cap = s["lru"].get("capacity_for") or {}
        f["capacity_50_blocks"] = (cap.get("50") or {}).get("blocks")
        f["capacity_90_blocks"] = (cap.get("90") or {}).get("blocks")
        ru = s["reuse"]
        f["distinct_blocks"] = ru["distinct_blocks"]
        f["reused_blocks"] = ru["reused_blocks"]
        f["refs_per_reused_block_mean"] = ru["references_per_reused_block"].get("mean")
        f["reuse_distance_p50"] = ru["stack_distance_blocks"].get("p50")
        f["reuse_distance_p90"] = ru["stack_distance_blocks"].get("p90")
        f["reuse_interval_p50_s"] = ru["reuse_interval_s"].get("p50")
    return {k: v for k, v in f.items() if v is not None}


def model_is_causal(model) -> tuple[bool | None, str]:
    """(causal, source) from the config's ``architectures`` (``*ForCausalLM`` -> causal); (None, why) otherwise."""
    src = Path(model.source) if model is not None and model.source else None
    if src is not None and src.is_dir():
        src = src / "config.json"
    try:
        cfg = json.loads(src.read_text(encoding="utf-8")) if src and src.is_file() else {}
    except (OSError, ValueError):
        cfg = {}
    archs = [a for a in (cfg.get("architectures") or []) if isinstance(a, str)]
    if any(a.endswith("ForCausalLM") for a in archs):
        return True, f"model config architectures: {', '.join(archs)}"
    if archs:
        return None, f"model architectures {', '.join(archs)} do not say; pass --causal yes|no"
    return None, "not stated; pass --causal yes|no"


def model_context(model, tp: int = 1, pp: int = 1, dcp: int = 1, kv_cache_dtype: str = "auto",
                  hardware: Mapping[str, Any] | None = None, kv_budget_gib: float | None = None,
                  gpu_memory_utilization: float | None = None, max_model_len: int | None = None,
                  engine_args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """KV layout of ``model`` under tp/pp/dcp and the GPU's KV budget (bytes) when a GPU or budget is given.

    ``engine_args``: keyword arguments of ``stack_serving_budget`` (``catalog`` and the engine flags); when
    given with a GPU, the budget is the one ``optkg check`` prints for that ``vllm serve`` stack.

    Budget: ``kv_budget_gib`` when given; else ``memory_gib x gpu_memory_utilization - estimated
    weights per GPU`` (kg.derive.kv.kv_budget_bytes, weight_bytes_per_gpu: what kg.analyses.check uses). Context limit (tokens of
    one sequence): ``max_model_len`` when given, else the config's ``max_position_embeddings``
    (``context_limit``, ``context_limit_by``). Raises OptkgError for a tp/pp size the model does not
    allow (kg.derive.kv.check_parallel_sizes, as ``optkg kv``), a DCP size the model does not allow, a GPU entry without ``memory_gib``, or a ``max_model_len`` that is not a positive integer.
    """
    from kg.derive.kv import GIB, check_parallel_sizes, kv_layout
    check_parallel_sizes(model, tp, pp)  # same tp/pp checks as `optkg kv` (OptkgError naming the valid sizes)
    base = kv_layout(model, tp, pp, 1, kv_cache_dtype)
    if dcp > 1 and dcp not in base.valid_dcp_sizes:
        raise OptkgError(f"--dcp: {dcp} is not valid for {model.name} at tp {tp} (valid: {base.valid_dcp_sizes})")
    lay = kv_layout(model, tp, pp, dcp, kv_cache_dtype) if dcp > 1 else base
    # vLLM's default KV block at the release check sizes for (16; 64 from 0.34.0), so the knee is check's number
    from kg.inputs.effective import default_block_size, latest_release
    block = default_block_size("vllm", (engine_args or {}).get("engine_version") or latest_release("vllm"))
    ctx: dict[str, Any] = {"model": model, "layout": lay, "budget_bytes": None, "budget_source": None, "gpu": None,
                           "context_limit": None, "context_limit_by": None, "block_size": block,
                           "plan": window_plan(model, tp, pp, dcp, kv_cache_dtype, hardware, block)}
    if max_model_len is not None:
        if isinstance(max_model_len, bool) or not isinstance(max_model_len, int) or max_model_len < 1:
            raise OptkgError(f"--max-model-len: expected a positive number of tokens, found {max_model_len!r}")
        ctx["context_limit"], ctx["context_limit_by"] = max_model_len, "--max-model-len"
    elif model.max_position_embeddings:
        ctx["context_limit"], ctx["context_limit_by"] = model.max_position_embeddings, "max_position_embeddings"
    if hardware is not None:
        ctx["gpu"] = hardware.get("id")
        ctx["gpu_name"] = hardware.get("name") or hardware.get("id")
        # the memory vLLM's get_batch_defaults compares (torch's total, GiB: the visible memory where the catalog has
        # it, 140.40 GiB on an H200 whose vendor figure is 141 GB), as every budget line of the report uses
        vis = hardware.get("memory_visible_mib")
        ctx["gpu_memory_gib"] = vis / 1024 if isinstance(vis, (int, float)) and vis > 0 else hardware.get("memory_gib")
        ctx["gpu_compute_capability"] = hardware.get("compute_capability")
    if kv_budget_gib is not None:
        from kg.derive.kv import checked_kv_budget_gib  # at most the GPU's memory, as check / kv / sweep
        ctx["budget_bytes"] = checked_kv_budget_gib(kv_budget_gib, "--kv-budget-gib", hardware) * GIB
        ctx["budget_source"] = "given with --kv-budget-gib"
    elif hardware is not None:
        mem = hardware.get("memory_gib")
        if not isinstance(mem, (int, float)) or isinstance(mem, bool) or mem <= 0:
            raise OptkgError(f"GPU '{hardware.get('id')}' has no memory_gib in the catalog (catalog/hardware/)")
        # the budget kg.analyses.check prints for the same stack (kg.derive.budget.gpu_default_budget, or the
        # `vllm serve` stack of the engine flags through check itself: stack_serving_budget)
        from kg.engines.vllm.budget import gpu_default_budget
        from kg.derive.kv import gpu_memory_bytes
        if engine_args and engine_args.get("catalog") is not None:
            sb = stack_serving_budget(model, hardware, tp, pp, gpu_memory_utilization=gpu_memory_utilization,
                                      kv_cache_dtype=kv_cache_dtype, max_model_len=max_model_len, **engine_args)
        else:
            sb = gpu_default_budget(model, hardware, tp, pp, gpu_memory_utilization)
        total, util = gpu_memory_bytes(hardware), sb.gpu_memory_utilization
        ctx["budget_bytes"] = sb.kv_bytes
        ctx["budget_breakdown"] = sb.to_dict()
        if len(sb.lines) == 1:  # given by a flag (--kv-cache-memory-bytes, --num-gpu-blocks-override)
            ctx["budget_source"] = sb.lines[0].name
            return ctx
        weights = sb.lines[1].bytes
        ctx["weight_bytes_per_gpu_estimate"] = weights
        ctx["gpu_memory_usable_bytes"] = total * util
        ctx["budget_source"] = (f"{hardware.get('id')}: {total / GIB:.2f} GiB x gpu_memory_utilization {util:g} - "
                                + " - ".join(f"{x.name} {x.bytes / GIB:.2f} GiB" for x in sb.lines[1:])
                                + f" (kg.derive.budget; {sb.error_text})")
    return ctx


def stack_serving_budget(model, hardware: Mapping[str, Any], tp: int = 1, pp: int = 1, *, catalog,
                         gpu_memory_utilization: float | None = None, kv_cache_dtype: str = "auto",
                         max_model_len: int | None = None, max_num_seqs: int | None = None,
                         quantization: str | None = None, engine_version: str | None = None,
                         speculative_config: str | None = None, kv_cache_memory_bytes: str | None = None,
                         num_gpu_blocks_override: int | None = None):
    """The ServingBudget (kg.derive.budget) ``optkg check`` derives for ``vllm serve MODEL -tp N -pp M`` with
    the given flags on ``hardware``: the command goes through the vLLM flag table (kg.inputs.launch) and
    check's stack facts (kg.analyses.check.stack_facts), so weights (``--quantization``), the draft
    (``--speculative-config``), the sampler's requests (``--max-num-seqs``) and the release
    (``engine_version``) are check's. Raises OptkgError for a flag value vLLM refuses, or when the
    stack has no budget (e.g. a KV dtype optkg does not size)."""
    import shlex
    from kg.analyses.check import stack_facts
    from kg.derive.budget import BudgetLine, ServingBudget
    from kg.engines.launch import parse_command
    from kg.inputs.stack import check_engine_version
    argv = ["vllm", "serve", str(model.name or "model"), "-tp", str(tp), "-pp", str(pp)]
    for flag, v in (("--gpu-memory-utilization", gpu_memory_utilization), ("--max-num-seqs", max_num_seqs),
                    ("--max-model-len", max_model_len), ("--quantization", quantization),
                    ("--speculative-config", speculative_config), ("--kv-cache-memory-bytes", kv_cache_memory_bytes),
                    ("--num-gpu-blocks-override", num_gpu_blocks_override)):
        if v is not None:
            argv += [flag, f"{v:g}" if isinstance(v, float) else str(v)]
    if kv_cache_dtype and kv_cache_dtype != "auto":
        argv += ["--kv-cache-dtype", kv_cache_dtype]
    st = parse_command(shlex.join(argv), catalog, "vllm", None, "fit", resolver=lambda _name: model)
    st.model, st.hardware = model, dict(hardware)
    st.gpu_count = tp * pp
    if engine_version is not None:
        st.engine_version = check_engine_version(engine_version, "--engine-version")
    _facts, ns = stack_facts(st)
    rows = ns.get("kv_budget_breakdown")
    src = str(ns.get("kv_budget_source") or "")
    if src.startswith("given (") and ns.get("kv_budget_bytes_per_gpu") is not None:  # --kv-cache-memory-bytes ...
        kv = float(ns["kv_budget_bytes_per_gpu"])
        return ServingBudget("vllm", float(ns["kv_budget_gpu_memory_utilization"]),
                             str(ns["kv_budget_utilization_source"]), [BudgetLine(src, kv, src, "vllm (given)")], kv, 0.0)
    if not rows:
        raise OptkgError(f"fit: no KV budget for {' '.join(argv[2:])} on {hardware.get('id')} "
                         f"({'; '.join(st.notes) or 'see optkg check'})")
    lines = [BudgetLine(**r) for r in rows]
    kv = float(ns.get("kv_budget_bytes_per_gpu", max(0.0, lines[0].bytes - sum(x.bytes for x in lines[1:]))))
    return ServingBudget("vllm", float(ns["kv_budget_gpu_memory_utilization"]), str(ns["kv_budget_utilization_source"]),
                         lines, kv, float(ns.get("kv_budget_error_bytes") or 0.0))


def capacity_bytes(m: TraceMeasurement, layout, budget: float | None) -> dict[str, Any]:
    """Each LRU capacity point in KV bytes per GPU and for the parallel group, with its tier; the GPU's capacity in
    trace blocks (kg.derive.kv.cacheable_tokens: vLLM's 16-token blocks less its null block).

    bytes per GPU = blocks x block_size x KV bytes per token per GPU (after DCP sharding; an upper bound for sliding-window
    layers); group = per GPU x tp_size x pp_size (a host tier for the whole group); tier 'gpu' when it fits the budget."""
    s = m.summary
    bs = s["block_size"]
    per_tok = layout.bytes_per_token_per_gpu_effective
    group = layout.tp_size * layout.pp_size
    pts = []
    for p in s["lru"]["points"]:
        b = p["capacity_blocks"] * bs * per_tok
        pts.append({**p, "kv_bytes_per_gpu": b, "kv_bytes_group": b * group,
                    "tier": None if budget is None else ("gpu" if b <= budget else "host")})
    out: dict[str, Any] = {"points": pts, "group_gpus": group}
    for share in ("50", "90"):
        c = (s["lru"].get("capacity_for") or {}).get(share, {}).get("blocks")
        if c is not None:
            b = c * bs * per_tok
            out[f"capacity_{share}"] = {"blocks": c, "kv_bytes_per_gpu": b, "kv_bytes_group": b * group,
                                        "tier": None if budget is None else ("gpu" if b <= budget else "host")}
    if budget is not None and per_tok:
        gpu_blocks = cacheable_tokens(layout, budget) // bs  # vLLM's 16-token blocks less its null block
        hb, ht = m.hit_ratio_at(gpu_blocks)
        out["gpu_capacity"] = {"blocks": gpu_blocks, "hit_ratio_blocks": hb, "hit_ratio_tokens": ht}
    return out


def _triangle(ns: Mapping[str, Any], th: Mapping[str, float], causal_source: str, model) -> dict[str, Any]:
    causal = ns.get("causal")
    if causal is False:
        pg = ("token", f"no strict causal dependency ({causal_source}): token-level splitting is viable")
    elif causal is True:
        pg = ("layer", f"strict causal dependency ({causal_source}): keep layer/tensor granularity; "
                       "token-level only with a load-balanced slice schedule")
    else:
        pg = ("unknown", "causal dependency not known; pass --causal yes|no")
    loc = ns.get("attention_locality")
    if loc in LOCALITY_VALUES:
        sl = (loc, f"stated with --attention-locality {loc}")
    elif model is not None:
        if model.sliding_window and model.num_sliding_layers >= model.num_hidden_layers:
            sl = ("local", f"every layer of {model.name} uses a {model.sliding_window}-token sliding window")
        elif model.sliding_window or model.attention_chunk_size:
            sl = ("mixed", f"{model.num_sliding_layers} of {model.num_hidden_layers} layers slide "
                           f"({model.sliding_window}-token window), the rest attend globally" if model.sliding_window else
                  f"{model.layer_kinds.count('chunked')} of {model.num_hidden_layers} layers attend within "
                  f"{model.attention_chunk_size}-token chunks (chunked local attention), the rest globally")
        else:
            sl = ("global", f"{model.name} attends globally in every layer; whether the task tolerates a window "
                            "is not known (pass --attention-locality)")
    else:
        sl = ("unknown", "no model and no --attention-locality")
    reuse = ns.get("prefix_reuse_token_ratio")
    sess = ns.get("session_length")
    long_turns = th["long_session_turns"]
    if reuse is not None and reuse >= th["prefix_reuse_high"]:
        lt = ("long", f"prefix reuse {reuse:.3f} of prompt tokens >= {th['prefix_reuse_high']:g}")
    elif sess is not None and sess >= long_turns:
        lt = ("long", f"sessions of {sess:g} turns >= {long_turns:g}")
    elif reuse is not None and reuse < th["prefix_reuse_min"]:
        lt = ("short", f"prefix reuse {reuse:.3f} of prompt tokens < {th['prefix_reuse_min']:g}")
    elif reuse is not None:
        lt = ("medium", f"prefix reuse {reuse:.3f} of prompt tokens between {th['prefix_reuse_min']:g} "
                        f"and {th['prefix_reuse_high']:g}")
    elif sess is not None:
        lt = ("short" if sess < 2 else "medium", f"sessions of {sess:g} turns (prefix reuse not measurable)")
    else:
        lt = ("unknown", "prefix reuse not measurable and no --session-length")
    return {"parallel_granularity": {"value": pg[0], "why": pg[1]},
            "state_locality": {"value": sl[0], "why": sl[1]},
            "state_lifetime": {"value": lt[0], "why": lt[1]}}


def scheduler_limit(th: Mapping[str, float], ctx: Mapping[str, Any] | None,
                    max_num_seqs: int | None = None) -> tuple[int, str]:
    """(max_num_seqs, where it comes from): given, else vLLM's default for the GPU (thresholds in rules/fit.yaml).

    vLLM >= 0.9.0 (EngineArgs.get_batch_defaults): ``max_num_seqs_large_gpu`` (1024) when the GPU has
    at least ``large_gpu_min_gib`` and its name has no 'a100', else ``max_num_seqs_default`` (256).
    """
    if max_num_seqs is not None:
        return int(max_num_seqs), "given with --max-num-seqs"
    mem = (ctx or {}).get("gpu_memory_gib")
    gpu = (ctx or {}).get("gpu")
    if gpu and isinstance(mem, (int, float)):
        name = f"{gpu} {(ctx or {}).get('gpu_name') or ''}".lower()
        big = mem >= th["large_gpu_min_gib"] and "a100" not in name
        why = (f"{mem:.2f} GiB >= {th['large_gpu_min_gib']:g} GiB, not an A100" if big else
               ("an A100" if "a100" in name else f"{mem:.2f} GiB < {th['large_gpu_min_gib']:g} GiB"))
        val = th["max_num_seqs_large_gpu"] if big else th["max_num_seqs_default"]
        from kg.inputs.effective import engine_default  # the release table `optkg check` applies too
        cc = str((ctx or {}).get("gpu_compute_capability") or "")
        table, _ = engine_default("vllm", "max_num_seqs", None, {"gpu_memory_gib": mem, "gpu_name_lower": name,
                                                                  "gpu_compute_capability": cc})
        val = table if table is not None and (th.get("max_num_seqs_large_gpu"), th.get("max_num_seqs_default")) == (1024, 256) else val
        if big and cc == "12.1" and int(val) == th["max_num_seqs_default"]:
            why = "GB10 (compute capability 12.1), kept on the small tier from vLLM 0.33.0 (arg_utils.py:2986)"
        return int(val), f"vLLM >= 0.9 default max_num_seqs on {gpu}: {why}"
    return int(th["max_num_seqs_default"]), (
        f"vLLM >= 0.9 default max_num_seqs without --gpu (GPUs under {th['large_gpu_min_gib']:g} GiB and A100; "
        f"{int(th['max_num_seqs_large_gpu'])} on larger GPUs): pass --gpu or --max-num-seqs")


def _host_tier_size(ns: Mapping[str, Any], th: Mapping[str, float], group: int) -> dict[str, Any]:
    """The host KV tier to recommend for the parallel group (GiB) and why that size.

    90 % of the unbounded hits (``capacity_90_kv_bytes_group``) when it fits ``host_dram_per_gpu_gib``
    per GPU; else the DRAM-sized tier (``host_dram_per_gpu_gib x group GPUs``) and the hit ratio it
    reaches with the GPU cache (``lru_hit_ratio_with_host_dram``).
    """
    need = ns["capacity_90_kv_bytes_per_gpu"]
    dram = th["host_dram_per_gpu_gib"] * 2**30
    if need <= dram:
        return {"host_tier_gib": round(ns["capacity_90_kv_bytes_group"] / 2**30, 2),
                "host_tier_basis": "90 % of the unbounded hits"}
    hr = ns.get("lru_hit_ratio_with_host_dram")
    return {"host_tier_gib": round(dram * group / 2**30, 2),
            "host_tier_basis": (f"sized to {th['host_dram_per_gpu_gib']:g} GiB of host DRAM per GPU x {group} GPU(s); "
                                f"90 % of the unbounded hits would need {ns['capacity_90_kv_bytes_group'] / 2**30:.2f} GiB"
                                + (f"; with the GPU cache it hits {hr:.4f} of prompt tokens" if hr is not None else ""))}


KV_COMPACTION_FEATURES = ("GQA", "MQA", "MLA", "sliding window")


def _compaction_status(model) -> dict[str, Any]:
    """Which KV-compacting attention features ``model`` already has and which need retraining.

    Features: GQA (1 < KV heads < query heads), MQA (1 KV head), MLA (a compressed latent),
    sliding window (``sliding_window`` set). Returns ``kv_features_present`` / ``kv_features_missing``
    (lists) and ``kv_compaction_status`` (one sentence).
    """
    att = model.attention  # 'mla', 'mqa', 'gqa' or 'mha' (kg.inputs.modelcfg)
    have = {"GQA": att == "gqa", "MQA": att == "mqa", "MLA": att == "mla", "sliding window": bool(model.sliding_window)}
    present = [k for k in KV_COMPACTION_FEATURES if have[k]]
    missing = [k for k in KV_COMPACTION_FEATURES if not have[k]]
    if att == "gqa":
        detail = f"GQA ({model.num_key_value_heads} KV heads for {model.num_attention_heads} query heads)"
    elif att == "mqa":
        detail = f"MQA (1 KV head for {model.num_attention_heads} query heads)"
    elif att == "mla":
        detail = f"MLA (latent of kv_lora_rank {model.kv_lora_rank})"
    else:
        detail = None
    parts = [detail] if detail else []
    if model.sliding_window:
        parts.append(f"a {model.sliding_window}-token sliding window on {model.num_sliding_layers} of "
                     f"{model.num_hidden_layers} layers")
    has = f"{model.name} already has {' and '.join(parts)}" if parts else \
        f"{model.name} has none of them (full multi-head KV, global attention)"
    status = (f"{has}; {', '.join(missing)} and cross-layer KV sharing need retraining or a different model"
              if missing else f"{has}; cross-layer KV sharing needs retraining or a different model")
    return {"kv_features_present": ", ".join(present) or "none", "kv_features_missing": ", ".join(missing) or "none",
            "kv_compaction_status": status}


TECHNIQUE_FEATURE = {"sliding-window-attention": "sliding window", "multi-query-attention": "MQA",
                     "grouped-query-attention": "GQA", "multi-head-latent-attention": "MLA"}


def _in_model(tid: str, ns: Mapping[str, Any]) -> dict[str, Any]:
    """For a pattern-1 technique: ``in_model`` (the model already has it) and ``needs`` (what adopting it takes)."""
    if "kv_features_present" not in ns:
        return {}
    feat = TECHNIQUE_FEATURE.get(tid)
    have = feat is not None and feat in ns["kv_features_present"].split(", ")
    return {"in_model": have, "needs": "already in the model" if have else "retraining or a different model"}


def build_facts(features: Mapping[str, Any], ctx: Mapping[str, Any] | None = None,
                measurement: TraceMeasurement | None = None, *, causal: bool | None = None,
                session_length: float | None = None, attention_locality: str | None = None,
                thresholds: Mapping[str, float] | None = None,
                max_num_seqs: int | None = None) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """(facts, namespace, derived sections) for the fit ruleset.

    ``features``: flat workload features (``workload_features``); ``ctx``: ``model_context`` or
    None; ``measurement``: needed for hit ratios at the GPU capacity (else taken from features
    ``lru_hit_ratio_at_gpu_capacity`` if given). Facts: ``workload``, and when known
    ``dependency`` (causal), ``session``, ``locality``, ``model``, ``kv_budget``.
    """
    if attention_locality is not None and attention_locality not in LOCALITY_VALUES:
        raise OptkgError(f"--attention-locality: expected local or global, found {attention_locality!r}")
    if session_length is not None and (isinstance(session_length, bool) or not isinstance(session_length, (int, float))
                                       or session_length < 1):
        raise OptkgError(f"--session-length: expected a number of turns >= 1, found {session_length!r}")
    th = dict(thresholds) if thresholds is not None else _thresholds(load_ruleset("fit"), None)
    if max_num_seqs is not None and (isinstance(max_num_seqs, bool) or not isinstance(max_num_seqs, int)
                                     or max_num_seqs < 1):
        raise OptkgError(f"--max-num-seqs: expected a positive number of sequences, found {max_num_seqs!r}")
    ns: dict[str, Any] = dict(features)
    ns["scheduler_max_num_seqs"], ns["scheduler_max_num_seqs_source"] = scheduler_limit(th, ctx, max_num_seqs)
    derived: dict[str, Any] = {}
    facts: list[dict[str, Any]] = [{"kind": "workload", "format": str(features.get("trace_format", "unknown")),
                                    "prefix_measurable": bool(features.get("prefix_measurable"))}]
    model = ctx["model"] if ctx else None
    causal_source = "stated with --causal"
    if causal is None and model is not None:
        causal, causal_source = model_is_causal(model)
    elif causal is None:
        causal_source = "not stated; pass --causal yes|no"
    ns["causal_source"] = causal_source
    if causal is not None:
        ns["causal"] = bool(causal)
        facts.append({"kind": "dependency", "causal": bool(causal)})
    if session_length is not None:
        ns["session_length"] = session_length
        facts.append({"kind": "session"})
    if attention_locality is not None:
        ns["attention_locality"] = attention_locality
        facts.append({"kind": "locality", "attention_locality": attention_locality})
    if ctx:
        lay = ctx["layout"]
        ns.update({"model_name": model.name, "attention": model.attention,
                   "num_attention_heads": model.num_attention_heads, "num_key_value_heads": model.num_key_value_heads,
                   "has_sliding_window": bool(model.sliding_window), "tp_size": lay.tp_size, "pp_size": lay.pp_size,
                   "dcp_size": lay.dcp_size, "kv_bytes_per_token_per_gpu": lay.bytes_per_token_per_gpu_effective,
                   "kv_bytes_per_token_model": lay.bytes_per_token_model})
        if model.sliding_window:
            ns["sliding_window"] = model.sliding_window
        facts.append({"kind": "model", "attention": model.attention, "has_sliding_window": bool(model.sliding_window)})
        budget = ctx.get("budget_bytes")
        curve = cost_curve(lay, budget, features, ctx.get("context_limit"), ctx.get("context_limit_by"), ctx.get("plan"),
                           ctx.get("block_size", 16))
        derived["cost_curve"] = curve
        if ctx.get("context_limit"):
            ns["context_limit"], ns["context_limit_by"] = ctx["context_limit"], ctx["context_limit_by"]
        if curve.get("seq_len_limit") is not None:
            ns["seq_len_limit"], ns["seq_len_limit_by"] = curve["seq_len_limit"], curve["seq_len_limit_by"]
        weights = ctx.get("weight_bytes_per_gpu_estimate")
        usable = ctx.get("gpu_memory_usable_bytes")
        weights_fit = True
        if weights is not None and usable is not None:
            weights_fit = weights <= usable
            ns["weight_bytes_per_gpu_estimate"], ns["gpu_memory_usable_bytes"] = weights, usable
            ns["weight_bytes_total_estimate"] = weights * lay.tp_size * lay.pp_size
            ns["weights_fit_gpu"] = weights_fit
            facts.append({"kind": "weights", "fit": weights_fit})
        ns.update(_compaction_status(model))
        if budget is not None:
            ns["gpu_kv_budget_bytes"] = budget
            if ctx.get("gpu"):
                ns["gpu"] = ctx["gpu"]
            if curve.get("knee_seq_len") is not None:
                ns["knee_seq_len"] = curve["knee_seq_len"]
            for q, v in curve.get("knee_batch", {}).items():
                ns[f"knee_batch_{q}"] = v
            if weights_fit:  # no KV advice (compression, host tier) when the weights alone do not load
                facts.append({"kind": "kv_budget"})
        if features.get("prefix_measurable") and "block_size" in features:
            per_tok = lay.bytes_per_token_per_gpu_effective
            bs = features["block_size"]
            group = lay.tp_size * lay.pp_size
            for share in ("50", "90"):
                c = features.get(f"capacity_{share}_blocks")
                if c is not None:
                    ns[f"capacity_{share}_kv_bytes_per_gpu"] = c * bs * per_tok
                    ns[f"capacity_{share}_kv_bytes_group"] = c * bs * per_tok * group
            if budget is not None and per_tok:
                gpu_blocks = (gpu_tokens := cacheable_tokens(lay, budget)) // bs  # whole blocks less the null block
                ns["gpu_capacity_blocks"] = gpu_blocks
                if measurement is not None and measurement.prefix_measurable:
                    ns["lru_hit_ratio_at_gpu_capacity"] = measurement.hit_ratio_at(gpu_blocks)[1]
                    # GPU cache plus a host tier as large as a server's DRAM per GPU (rules/fit.yaml)
                    host_blocks = int((gpu_tokens + th["host_dram_per_gpu_gib"] * 2**30 // per_tok) // bs)
                    ns["lru_hit_ratio_with_host_dram"] = measurement.hit_ratio_at(host_blocks)[1]
                if "capacity_90_kv_bytes_per_gpu" in ns:
                    ns.update(_host_tier_size(ns, th, group))
            if measurement is not None and measurement.prefix_measurable:
                derived["capacities"] = capacity_bytes(measurement, lay, budget)
    tri = _triangle(ns, th, causal_source, model)
    derived["triangle"] = tri
    for k, v in tri.items():
        ns[k] = v["value"]
    ns = {k: v for k, v in ns.items() if v is not None}
    return facts, ns, derived


# ---------------------------------------------------------------------------------------------
# evaluation and report

def _thresholds(rs: RuleSet, overrides: Mapping[str, float] | None) -> dict[str, float]:
    th = {k: v["value"] for k, v in rs.thresholds.items()}
    for k, v in (overrides or {}).items():
        if k not in th:
            raise OptkgError(f"unknown fit threshold '{k}' (known: {', '.join(sorted(th))})")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise OptkgError(f"threshold '{k}': expected a number, found {v!r}")
        th[k] = v
    return {k: (int(v) if isinstance(v, float) and v.is_integer() and v > 1 else v) for k, v in th.items()}


def _technique(catalog, tid: str) -> dict[str, Any]:
    t = (catalog.techniques.get(tid) if catalog is not None else None) or {}
    return {"id": tid, "name": t.get("name", tid), "in_catalog": bool(t), "status": t.get("status"),
            "costs": [{"dimension": c.get("dimension"), "what": c.get("what"), "who": c.get("who")}
                      for c in t.get("costs") or []]}


class _Keep(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _fmt(template: str, values: Mapping[str, Any]) -> str:
    """``str.format`` over ``values``; unknown names stay as written."""
    try:
        return template.format_map(_Keep(values))
    except (ValueError, TypeError, IndexError, KeyError, AttributeError):
        return template


def _rule_dict(f: Firing, catalog, ns: Mapping[str, Any]) -> dict[str, Any]:
    r = f.rule
    d = {"id": r.id, "title": r.title, "fired": f.fired, "reason": f.reason, "tags": list(r.tags),
         "rule_file": r.file, "rule_line": r.line}
    if f.fired:
        d.update({"severity": f.severity, "message": " ".join(f.message.split()), "numbers": f.numbers,
                  "mechanism": " ".join(_fmt(r.mechanism, {**ns, **f.numbers}).split()),
                  "fix": " ".join(_fmt(r.fix, {**ns, **f.numbers}).split()),
                  "fixes": [_technique(catalog, t) for t in r.fixes], "involves": list(r.involves),
                  "cost_dimension": r.cost_dimension, "from_dimension": r.from_dimension,
                  "sources": r.sources})
    return d


def _validation(ns: Mapping[str, Any], fired: set[str], derived: Mapping[str, Any]) -> list[dict[str, Any]]:
    ns = {**ns, **{k: v for k, v in derived.get("thresholds", {}).items() if k not in ns}}
    out = []
    exp = None
    if "lru_hit_ratio_at_gpu_capacity" in ns:
        exp = (f"about {ns['lru_hit_ratio_at_gpu_capacity']:.3f} of prompt tokens with a GPU-only cache; up to "
               f"{ns['prefix_reuse_token_ratio']:.3f} with an unbounded cache")
    elif "prefix_reuse_token_ratio" in ns:
        exp = f"at most {ns['prefix_reuse_token_ratio']:.3f} of prompt tokens (unbounded cache)"
    out.append({"metric": "cache hit rate", "expect": exp or "not measurable from this trace; measure it in the prototype"})
    rate = ns.get("arrival_rate_rps")
    out.append({"metric": "P99 latency (TTFT, inter-token latency)",
                "expect": f"replay the trace's arrivals ({rate:.3g} req/s) and lengths (p99 request "
                          f"{ns.get('request_len_p99')} tokens)" if rate else "replay the trace's arrivals and lengths"})
    kb, sched = ns.get("knee_batch_p50"), ns.get("scheduler_max_num_seqs")
    if kb is not None and sched is not None and sched < kb:
        exp = f"at up to {sched} concurrent requests (the scheduler limit; the KV knee is {kb} median requests)"
    elif kb is not None:
        exp = f"at up to {kb} concurrent median requests (the KV knee)"
    else:
        exp = "at the engine's max_num_seqs (no KV knee without --model and --gpu/--kv-budget-gib)"
    out.append({"metric": "throughput", "expect": exp})
    if "fit-host-kv-cache" in fired or "fit-long-sessions" in fired:
        g = ns.get("capacity_90_kv_bytes_group")
        exp = (f"about {g / 2**30:.1f} GiB of host KV for 90 % of the unbounded hits" if g is not None
               else "size the host tier from the session length and KV bytes per token")
        if "fit-host-tier-exceeds-host-memory" in fired:
            exp += (f"; that is {ns['capacity_90_kv_bytes_per_gpu'] / 2**30:.1f} GiB per GPU, above a typical "
                    f"{ns['host_dram_per_gpu_gib']:g} GiB of host DRAM per GPU: validate a DRAM-sized tier "
                    f"(hit ratio {ns['lru_hit_ratio_with_host_dram']:.3f}) and where the rest would live")
        out.append({"metric": "host memory", "expect": exp})
    else:
        out.append({"metric": "host memory", "expect": "no host tier recommended"})
    return out


def _answers(ns: Mapping[str, Any], derived: Mapping[str, Any]) -> dict[int, str]:
    a: dict[int, str] = {}
    c = ns.get("causal")
    a[1] = {True: "strictly causal", False: "not strictly causal"}.get(c, "unknown") + f" ({ns.get('causal_source')})"
    if ns.get("prefix_measurable"):
        s = (f"prefix reuse {ns['prefix_reuse_token_ratio']:.3f} of prompt tokens ({ns['prefix_reuse_ratio']:.3f} of blocks); "
             f"50 % / 90 % of it at {ns.get('capacity_50_blocks')} / {ns.get('capacity_90_blocks')} blocks; "
             f"a reused block is referenced {ns.get('refs_per_reused_block_mean', 0):.2f} times on average")
    else:
        s = "prefix reuse not measurable (token counts only)"
    s += f"; session length {ns['session_length']:g} turns" if "session_length" in ns else "; session length not stated"
    a[2] = s
    if "attention" in ns:
        s = f"{ns['model_name']}: {ns['attention'].upper()}, {ns['num_key_value_heads']} KV heads"
        s += f", sliding window {ns['sliding_window']}" if "sliding_window" in ns else ", no sliding window"
    else:
        s = "no model given"
    s += f"; task locality {ns['attention_locality']}" if "attention_locality" in ns else "; task locality not stated"
    a[3] = s
    if ns.get("weights_fit_gpu") is False:
        a[4] = (f"weights {ns['weight_bytes_per_gpu_estimate'] / 2**30:.2f} GiB per GPU exceed the "
                f"{ns['gpu_memory_usable_bytes'] / 2**30:.2f} GiB the engine may use: no KV budget, fix the weights first")
    elif "knee_batch_p50" in ns:
        a[4] = (f"{ns['kv_bytes_per_token_per_gpu']:,.0f} bytes/token per GPU; budget {ns['gpu_kv_budget_bytes'] / 2**30:.2f} GiB; "
                f"knee at {ns['knee_batch_p50']} median requests ({ns.get('knee_batch_p99')} at p99) against a scheduler "
                f"limit of {ns['scheduler_max_num_seqs']} ({ns['scheduler_max_num_seqs_source']}); "
                f"single sequence {seq_limit_text(derived.get('cost_curve') or {})}")
    elif "kv_bytes_per_token_per_gpu" in ns:
        a[4] = f"{ns['kv_bytes_per_token_per_gpu']:,.0f} bytes/token per GPU; no GPU budget (--gpu or --kv-budget-gib) so no knee"
    else:
        a[4] = "no model given (--model/--config), so no cost curve"
    a[5] = "see the validation targets"
    return a


def seq_limit_text(cc: Mapping[str, Any]) -> str:
    """'up to N tokens (which limit binds; the other)' for the longest single sequence of a cost curve."""
    lim, by, knee, ctx_lim = cc.get("seq_len_limit"), cc.get("seq_len_limit_by"), cc.get("knee_seq_len"), cc.get("context_limit")
    if lim is None:
        return "length unbounded by KV memory (window-bounded layers) and no context limit known"
    if by == "KV memory" and ctx_lim == lim:
        return f"up to {lim:,} tokens (KV memory and the model's {cc.get('context_limit_by')} both end there)"
    if by == "KV memory":
        other = (f"; the model's {cc.get('context_limit_by')} would allow {ctx_lim:,}" if ctx_lim else
                 "; no context limit known (pass --max-model-len)")
        return f"up to {lim:,} tokens (KV memory binds{other})"
    cache = cc.get("kv_tokens_per_gpu")
    mem = (f"KV memory alone would hold {knee:,}" + (f", the GPU KV cache's {cache:,} tokens less vLLM's null block"
                                                     if cache and cache > knee else "") if knee is not None else
           "KV memory does not bound it (window-bounded layers)" if "knee_seq_len" in cc else "no GPU budget given")
    return f"up to {lim:,} tokens ({by} binds; {mem})"


def evaluate_fit(features: Mapping[str, Any], ctx: Mapping[str, Any] | None = None,
                 measurement: TraceMeasurement | None = None, *, catalog=None, ruleset: RuleSet | None = None,
                 causal: bool | None = None, session_length: float | None = None,
                 attention_locality: str | None = None,
                 thresholds: Mapping[str, float] | None = None,
                 max_num_seqs: int | None = None) -> tuple[dict[str, Any], list[Firing]]:
    """Run the fit ruleset; return (report dict, firings). See the module doc for the report's shape."""
    rs = ruleset or load_ruleset("fit")
    th = _thresholds(rs, thresholds)
    facts, ns, derived = build_facts(features, ctx, measurement, causal=causal, session_length=session_length,
                                     attention_locality=attention_locality, thresholds=th, max_num_seqs=max_num_seqs)
    firings = evaluate_rules(rs, facts, ns, thresholds=th)
    fired = {f.rule.id for f in firings if f.fired}
    rules = [_rule_dict(f, catalog, {**ns, **th}) for f in firings]
    derived["thresholds"] = th
    answers = _answers(ns, derived)
    checklist = []
    for n, name, question in CHECKLIST:
        tag = f"checklist-{n}"
        item = {"item": n, "name": name, "question": question, "answer": answers[n],
                "fired": [r["id"] for r in rules if tag in r["tags"] and r["fired"]],
                "not_fired": [{"id": r["id"], "reason": r["reason"]} for r in rules if tag in r["tags"] and not r["fired"]]}
        if n == 5:
            item["validate"] = _validation(ns, fired, derived)
        checklist.append(item)
    patterns = []
    by_id = {f.rule.id: f for f in firings}
    for p in PATTERNS:
        f = by_id.get(p["rule"])
        patterns.append({"id": p["id"], "name": p["name"], "when": p["when"], "rule": p["rule"],
                         "recommended": bool(f and f.fired), "reason": f.reason if f else "rule not loaded",
                         "message": " ".join(f.message.split()) if f and f.fired else "",
                         "techniques": [{**_technique(catalog, t), **(_in_model(t, ns) if p["id"] == "pattern-1" else {})}
                                        for t in p["techniques"]]})
    model = ctx["model"] if ctx else None
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "kind": "fit",
        "features": {k: v for k, v in sorted(ns.items())},
        "thresholds": {k: {"value": th[k], **{x: y for x, y in rs.thresholds[k].items() if x != "value"}} for k in sorted(th)},
        "model": None if model is None else {
            "name": model.name, "attention": model.attention, "num_attention_heads": model.num_attention_heads,
            "num_key_value_heads": model.num_key_value_heads, "num_hidden_layers": model.num_hidden_layers,
            "sliding_window": model.sliding_window, "num_sliding_layers": model.num_sliding_layers,
            "tp_size": ctx["layout"].tp_size, "pp_size": ctx["layout"].pp_size, "dcp_size": ctx["layout"].dcp_size,
            "kv_cache_dtype": ctx["layout"].kv_cache_dtype,
            "kv_bytes_per_token_per_gpu": ctx["layout"].bytes_per_token_per_gpu_effective,
            "kv_bytes_per_token_model": ctx["layout"].bytes_per_token_model},
        "gpu": None if not ctx or ctx.get("budget_bytes") is None else {
            "id": ctx.get("gpu"), "kv_budget_bytes_per_gpu": ctx["budget_bytes"], "budget_source": ctx["budget_source"]},
        "cost_curve": derived.get("cost_curve"),
        "scheduler": {"max_num_seqs": ns["scheduler_max_num_seqs"], "source": ns["scheduler_max_num_seqs_source"]},
        "capacities": derived.get("capacities"),
        "triangle": derived["triangle"],
        "checklist": checklist,
        "patterns": patterns,
        "rules": rules,
        "definitions": DEFINITIONS,
        "notes": (list((measurement.summary.get("notes") or [])) if measurement is not None else [])
                 + _notes(features, ctx, derived.get("cost_curve")),
    }
    if measurement is not None:
        report["measurements"] = {k: v for k, v in measurement.summary.items() if k != "elapsed_s"}
    return report, firings


def _notes(features: Mapping[str, Any], ctx: Mapping[str, Any] | None,
           curve: Mapping[str, Any] | None = None) -> list[str]:
    notes = []
    lim = (curve or {}).get("context_limit")
    longest = features.get("request_len_max")
    if lim and longest and longest > lim:
        p99 = features.get("request_len_p99")
        notes.append(f"the trace's longest request ({longest:,} tokens{f', p99 {p99:,}' if p99 else ''}) exceeds the "
                     f"model's context limit ({lim:,} tokens, {(curve or {}).get('context_limit_by')}): such requests "
                     "are refused or truncated whatever the memory")
    if features.get("prefix_measurable"):
        eng = (ctx or {}).get("block_size")  # the engine release's default block (64 tokens from vLLM 0.34.0)
        notes.append(f"prefix reuse is measured at the trace's {features.get('block_size')}-token block granularity; "
                     + (f"the engine caches {eng}-token blocks" if eng else "engines cache smaller blocks")
                     + ", so real hit ratios can be slightly higher")
        notes.append("the LRU model holds only cached prefixes; running requests also occupy the KV budget, "
                     "so hit ratios at the GPU capacity are upper bounds")
    if ctx and ctx["model"].sliding_window:
        notes.append("KV bytes of cached prefix blocks count sliding-window layers in full (an upper bound)")
    if ctx and ctx.get("budget_bytes") is None:
        notes.append("no GPU KV budget (pass --gpu or --kv-budget-gib): no knee and no GPU/host tier split")
    return notes


def analyse_trace(path: Path | str, *, trace_format: str = "auto", block_size: int = 512, model=None,
                  tp: int = 1, pp: int = 1, dcp: int = 1, kv_cache_dtype: str = "auto", hardware=None,
                  kv_budget_gib: float | None = None, gpu_memory_utilization: float | None = None,
                  causal: bool | None = None, session_length: float | None = None,
                  attention_locality: str | None = None, catalog=None, ruleset: RuleSet | None = None,
                  thresholds: Mapping[str, float] | None = None, max_model_len: int | None = None,
                  max_num_seqs: int | None = None,
                  engine_args: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], list[Firing], TraceMeasurement]:
    """Measure ``path`` and evaluate the fit (the Python API behind ``optkg fit``). ``engine_args``: the
    vLLM flags of ``stack_serving_budget`` besides ``max_num_seqs`` (``quantization``, ``engine_version``,
    ``speculative_config`` ...); with a GPU the budget is check's for that stack."""
    eargs = {"catalog": catalog, "max_num_seqs": max_num_seqs, **(engine_args or {})} if catalog is not None else None
    ctx = model_context(model, tp, pp, dcp, kv_cache_dtype, hardware, kv_budget_gib, gpu_memory_utilization,
                        max_model_len, eargs) if model is not None else None
    m = measure_trace(path, trace_format, block_size)
    report, firings = evaluate_fit(workload_features(m), ctx, m, catalog=catalog, ruleset=ruleset, causal=causal,
                                   session_length=session_length, attention_locality=attention_locality,
                                   thresholds=thresholds, max_num_seqs=max_num_seqs)
    return report, firings, m
