"""``optkg check``: a stack -> facts -> rule engine -> findings.

``stack_facts`` turns a Stack into (engine facts, flat namespace). The namespace holds every model field, hardware
fact, setting and technique parameter, plus the KV derivations of kg.derive.kv (``kv_replication``,
``kv_bytes_per_token_per_gpu``, ``valid_dcp_sizes``, capacity and concurrency when the hardware or a KV budget is
known), the capacity facts the startup rules of rules/capacity.yaml read (``gpu_memory_bytes`` from the hardware's
``memory_visible_mib`` else ``memory_gib``; ``weight_bytes_per_gpu_estimate`` / ``weights_exceed_gpu_memory``;
``max_model_len_limit`` = the engine's context limit, ``max_model_len_effective`` = the given max_model_len else
that limit; ``kv_request_bytes_at_max_model_len``, ``max_model_len_that_fits``; ``gpus_required``), and the engine
facts of ``engine_facts`` (effective settings, weight quantisation and kernel, per-rank sharded sizes, draft TP,
FlashAttention version, engine generation). ``check_stack`` runs the ``check`` ruleset and returns a Report of
Findings, each tracing back to its rule, the catalog entries involved, their coordinates, the dimension the cost
lands in, its numbers, fixes and sources.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from kg.knowledge.catalog import Catalog
from kg.engine.expr import names_in
from kg.core.errors import OptkgError
from kg.derive.kv_dtype import apply_vllm_auto_kv_cache_dtype
from kg.derive.kv import (GIB, UnmodelledKVDtype, divisors, engine_dcp_sizes, engine_has_dcp, gpu_memory_bytes,
                 kv_capacity, kv_layout, request_kv_bytes_per_gpu)
from kg.derive.budget import weight_share_bytes
from kg.derive.kv_specs import null_block_bytes
from kg.derive.encoder_cache import cross_attention_summary, encoder_item_facts
from kg.derive.weights import estimate_weight_bytes, weight_bytes_per_gpu, weight_scheme
from kg.engine.rules import SEVERITY_ORDER, Firing, RuleSet, _fmt, evaluate_rules
from kg.inputs.launch.argv import flag_defaults
from kg.inputs.stack import Stack
from kg.analyses.kv_actual import STORED_KV_DTYPE, stored_kv_capacity
from kg.analyses.v0_capacity import apply_v0_blocks, uses_v0
from kg.analyses.sglang_capacity import sglang_capacity
from kg.analyses.checkpointfacts import apply_checkpoint_size, relabel_weights_line
from kg.analyses.weightfacts import compute_capability, dtype_facts, weight_quant_facts
from kg.inputs.support_ns import support_namespace

SCHEMA_VERSION = "1.1"  # 1.1: outcomes (fired / held / not evaluable) and not_evaluable[] added

# Facts stack_facts derives only from the hardware (the GPU entry, its memory, what the KV budget
# estimate needs): a rule missing one of them "needs hardware" when the stack names no known GPU.
HARDWARE_FACTS = frozenset({
    "gpu", "gpu_vendor", "gpu_memory_gib", "gpu_compute_capability", "gpu_fp8_supported", "gpu_count",
    "gpu_memory_bytes", "gpu_memory_usable_bytes", "weight_bytes_per_gpu_estimate", "weight_bytes_total_estimate",
    "weights_exceed_gpu_memory", "kv_block_size", "kv_budget_bytes_per_gpu", "kv_tokens_per_gpu", "kv_tokens_total",
    "max_concurrency", "max_model_len_that_fits", "kv_request_bytes_at_max_model_len",
    "kv_tokens_per_gpu_if_unreplicated", "flash_attn_version_effective", "hardware", "kv_null_block_bytes",
})


@dataclass
class Finding:
    """One fired rule on one stack (see module doc). ``numbers`` values are ints/floats/lists."""

    rule_id: str
    title: str
    severity: str
    message: str
    techniques: list[str]
    facts: dict[str, Any]
    numbers: dict[str, Any]
    cost_dimension: str | None
    from_dimension: str | None
    coordinates: list[dict[str, Any]]
    mechanism: str
    fixes: list[dict[str, str]]
    fix: str
    sources: list[dict[str, Any]]
    tags: list[str]
    rule_file: str = ""
    rule_line: int = 0
    fingerprint: str = ""
    kind: str = "startup"  # or "runtime-failure": the engine starts, then crashes, hangs or degrades
    failure: dict[str, Any] = field(default_factory=dict)  # runtime-failure: outcome, affected, fixed_in, issue
    coupling: str | None = None  # the catalog coupling the rule was generated from or refines (kg.knowledge.couplings)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class Report:
    """The outcome of checking one stack."""

    stack: dict[str, Any]
    findings: list[Finding]
    derived: dict[str, Any]
    not_fired: list[dict[str, str]] = field(default_factory=list)
    ignored_flags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    not_evaluable: list[dict[str, Any]] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)
    effective_config: list[dict[str, Any]] = field(default_factory=list)
    in_effect: list[dict[str, Any]] = field(default_factory=list)

    def max_severity(self) -> int:
        return max((SEVERITY_ORDER.get(f.severity, 0) for f in self.findings), default=0)

    def to_dict(self, explain: bool = False) -> dict[str, Any]:
        d = {"schema_version": SCHEMA_VERSION, "kind": "check", "stack": self.stack, "derived": self.derived,
             "findings": [f.to_dict() for f in self.findings], "ignored_flags": self.ignored_flags,
             "notes": self.notes, "not_evaluable": self.not_evaluable, "outcomes": self.outcomes,
             "effective_config": self.effective_config, "in_effect": self.in_effect}
        if explain:
            d["not_fired"] = self.not_fired
        return d


def stack_facts(stack: Stack) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Engine facts (structural) and the flat namespace (numeric) for ``stack``."""
    ns: dict[str, Any] = stack.values()
    facts: list[dict[str, Any]] = [{"kind": "stack", "engine": stack.engine or "unknown",
                                    "framework": stack.framework or "unknown"}]
    for tid in sorted(stack.techniques):
        facts.append({"kind": "technique", "technique": tid})
    ns["techniques"] = sorted(stack.techniques)
    ns["engine"] = stack.engine or "unknown"
    ns["engine_version"] = stack.engine_version
    # the training runtime: absent (not 'unknown') when the stack names none, so a condition on it
    # cannot be decided rather than silently false
    if stack.framework:
        ns["framework"] = stack.framework
        if stack.framework_version:
            ns["framework_version"] = stack.framework_version
    m = stack.model
    derived: dict[str, Any] = {}
    if m is not None:
        md = m.to_dict()
        for k, v in md.items():
            if k in ("warnings", "source", "name", "quantization_config", "quantization_config_source"):
                continue
            if k == "weight_block_size":
                if isinstance(v, list) and len(v) == 2:
                    ns["weight_block_n"], ns["weight_block_k"] = v
                continue
            ns.setdefault(k, v)
        ns["model_name"] = m.name
        ns["has_sliding_window"] = bool(m.sliding_window)
        facts.append({"kind": "model", "attention": m.attention, "is_moe": m.is_moe,
                      "has_sliding_window": bool(m.sliding_window), "quant_method": m.quant_method or "none"})
        tp, pp, dcp = ns["tp_size"], ns["pp_size"], ns["dcp_size"]
        # SGLang DP attention splits the TP group into dp_size attention replicas of tp / dp ranks,
        # each caching its own requests: the KV layout follows the attention TP size
        # (SGLang docs/advanced_features/dp_dpa_smg_guide.md; ServerArgs._handle_data_parallelism).
        tp_kv = tp
        dp_attn = int(ns.get("dp_size") or 1)
        if "dp-attention" in stack.techniques and dp_attn > 1 and tp % dp_attn == 0:
            tp_kv = tp // dp_attn
            derived["attention_tp_size"] = tp_kv
        apply_vllm_auto_kv_cache_dtype(m, stack.engine, stack.engine_version, ns, derived)  # 'auto' = checkpoint's
        kvdt = str(ns.get("kv_cache_dtype") or "auto")
        sized = True
        try:
            lay = kv_layout(m, tp_kv, pp, 1, kvdt)
            lay_dcp = kv_layout(m, tp_kv, pp, dcp, kvdt) if dcp > 1 else lay
        except UnmodelledKVDtype:
            # a value the engine accepts but optkg cannot size: keep head/replication facts, drop byte facts
            sized = False
            lay = kv_layout(m, tp_kv, pp, 1, "auto")
            lay_dcp = kv_layout(m, tp_kv, pp, dcp, "auto") if dcp > 1 else lay
            stack.notes.append(f"kv_cache_dtype '{kvdt}': optkg does not model its cache size; "
                               "KV bytes, budget and capacity are not computed")
        derived.update({
            "kv_heads_per_rank": lay.kv_heads_per_rank,
            "kv_replication_tp": lay.replication_factor,
            "kv_replication": lay_dcp.replication_factor,
            "valid_dcp_sizes": lay.valid_dcp_sizes,
            "dcp_possible": lay.dcp_possible,
            "max_useful_dcp_size": max(lay.valid_dcp_sizes), "dcp_impossible_reason": lay.dcp_impossible_reason,
            "valid_tp_sizes": divisors(m.num_attention_heads),
        })
        if stack.engine and stack.engine != "vllm":  # the sizes above are vLLM's; SGLang has its own (kg.derive.kv)
            sg = engine_dcp_sizes(stack.engine, stack.engine_version, m, tp_kv)
            derived.update({"valid_dcp_sizes": sg, "dcp_possible": len(sg) > 1, "max_useful_dcp_size": max(sg)})
        if sized:
            derived.update({
                "kv_bytes_per_token_model": lay.bytes_per_token_model,
                "kv_bytes_per_token_per_gpu": lay.bytes_per_token_per_gpu,
                "kv_bytes_per_token_per_gpu_unreplicated": lay.bytes_per_token_per_gpu_unreplicated,
                "kv_bytes_per_token_per_gpu_effective": lay_dcp.bytes_per_token_per_gpu_effective,
                "kv_element_bytes": lay.kv_element_bytes,
            })
        # the context limit the engine enforces, and the max_model_len it runs with when none is given
        engine = stack.engine or ""
        limit = {"vllm": m.derived_max_model_len, "sglang": m.sglang_context_length}.get(engine)
        if limit is None:
            limit = m.max_position_embeddings
        if limit is not None:
            derived["max_model_len_limit"] = int(limit)
        mml = ns.get("max_model_len") or derived.get("max_model_len_limit")
        if mml:
            derived["max_model_len_effective"] = int(mml)
        # one weight-quantisation fact per report: the scheme kg.derive.weights reads from the flags and files
        scheme = weight_scheme(m, ns.get("quantization"), ns.get("dtype"), ns.get("expert_dtype"))
        derived["weight_quant_source"] = scheme.source
        derived["weight_bytes_per_param"] = scheme.dominant
        stack.notes.extend(n for n in scheme.notes if n not in stack.notes)
        draft = stack_draft(stack, ns, m, tp_kv, kvdt)
        if draft is not None:
            derived["draft_kind"] = draft.kind
            derived["draft_layers"] = draft.layers
            derived["draft_weight_bytes_per_gpu_estimate"] = round(draft.weight_bytes_per_gpu)
            derived["draft_kv_bytes_per_token_per_gpu"] = draft.kv_bytes_per_token_per_gpu
            if draft.max_position_embeddings:
                derived["draft_max_position_embeddings"] = draft.max_position_embeddings
            derived.update({f"draft_{k}": v for k in ("vocab_size", "architecture") if (v := getattr(draft, k))})
            stack.notes.extend(n for n in draft.notes if n not in stack.notes)
        elif not any(str(n).startswith("draft not sized") for n in stack.notes):
            derived["draft_kind"] = "none"  # no draft model (no speculative decoding, or ngram / suffix)
        hw = stack.hardware
        block = int(ns.get("block_size") or 16)
        util, util_source = engine_utilization(stack, ns)
        derived["kv_budget_gpu_memory_utilization"] = util
        derived["kv_budget_utilization_source"] = util_source
        mem = gpu_memory_bytes(hw) if hw else None
        if mem is not None:
            derived["gpu_memory_bytes"] = round(mem)
            derived["gpu_memory_usable_bytes"] = round(weight_share_bytes(engine, mem, util))  # trtllm: the device
            expert_shards = tp
            if "expert-parallelism" in stack.techniques:
                ep = int(ns.get("ep_size") or 1)
                expert_shards = ep if ep > 1 else tp * int(ns.get("dp_size") or 1)
            weights = weight_bytes_per_gpu(m, tp, pp, expert_shards, scheme)
            if tp_kv != tp:
                # DP attention: every rank holds the attention weights of its tp / dp attention group, not 1/tp
                # of them (SGLang dp_attention: attention TP size = tp_size / dp_size)
                attn = estimate_weight_bytes(m, parts=True, scheme=scheme)["attention"]
                extra = attn / (tp_kv * pp) - attn / (tp * pp)
                weights += extra
                derived["weight_bytes_attention_replicated_per_gpu"] = round(extra)
            derived["weight_bytes_per_gpu_estimate"] = round(weights)
            derived["weight_bytes_total_estimate"] = round(estimate_weight_bytes(m, scheme=scheme))
            derived["weights_exceed_gpu_memory"] = weights > derived["gpu_memory_usable_bytes"]
            weights = apply_checkpoint_size(stack, derived, weights)  # model.safetensors(.index.json) when present
        budget = None
        if ns.get("kv_budget_gib") is not None:
            budget = float(ns["kv_budget_gib"]) * GIB
            derived["kv_budget_source"] = "given (kv_budget_gib)"
            derived["weights_exceed_gpu_memory"] = False  # a measured budget means the weights loaded
        elif ns.get("kv_cache_memory_bytes") is not None and engine == "vllm":
            # vLLM reserves exactly this, skipping the profile and gpu_memory_utilization (0.33.0 gpu_worker.py:656-675)
            budget = float(ns["kv_cache_memory_bytes"])
            derived["kv_budget_source"] = "given (--kv-cache-memory-bytes)"
        elif mem is not None:
            sb = stack_budget(stack, ns, m, mem, util, util_source, derived.get(
                "weight_bytes_per_gpu_checkpoint", derived["weight_bytes_per_gpu_estimate"]), tp,
                              derived.get("draft_weight_bytes_per_gpu_estimate", 0))
            budget = sb.kv_bytes
            derived["kv_budget_breakdown"] = [dict(x.__dict__) for x in sb.lines]
            relabel_weights_line(derived)
            derived["kv_budget_error_bytes"] = round(sb.error_bytes)
            derived["kv_budget_source"] = sb.source_text()
        plan = None
        if sized and engine != "sglang" and derived.get("max_model_len_effective"):
            plan = vllm_plan(stack, ns, m, tp_kv, pp, dcp, kvdt, derived["max_model_len_effective"],
                             draft.layers if draft is not None and draft.kind != "mtp" else
                             (draft.layers if draft is not None else 0))
            if plan is not None:
                block = plan.block_size
                if ns.get("num_gpu_blocks_override") is not None and engine == "vllm":
                    # the block count replaces the budget's (0.33.0 v1/core/kv_cache_planning.py:240-247, 681-682)
                    n = int(ns["num_gpu_blocks_override"])
                    budget = float(n * plan.bytes_per_block)
                    derived["kv_budget_source"] = (f"given (--num-gpu-blocks-override {n:,} blocks x "
                                                   f"{plan.bytes_per_block:,} B per block)")
                derived["kv_blocks_per_request"] = plan.blocks_per_request
                derived["kv_bytes_per_block"] = plan.bytes_per_block
                derived["kv_groups"] = "; ".join(f"{s.kind} x{s.layers} ({s.groups} group(s), {s.blocks_per_request} "
                                                 f"blocks/request)" for s in plan.specs)
                derived["kv_max_in_flight_tokens"] = plan.max_in_flight_tokens
                derived["kv_layer_groups"] = plan.groups_text()
                if plan.hybrid_reason:
                    derived["kv_hybrid_manager"] = plan.hybrid_reason
                stack.notes.extend(n for n in plan.notes if n not in stack.notes)
                cross = cross_attention_summary(m, tp_kv, lay.kv_element_bytes, plan.max_num_batched_tokens,
                                                plan.block_size, stack.engine_version)
                if cross:  # encoder-decoder (Whisper): the cross-attention cache each request reserves
                    derived["kv_cross_attention_layers"] = cross["layers"]
                    derived["kv_cross_bytes_per_encoder_token_per_gpu"] = cross["bytes_per_encoder_token_per_gpu"]
                    derived["kv_cross_encoder_tokens_per_request"] = cross["encoder_tokens_reserved_per_request"]
                    derived["kv_cross_blocks_per_request"] = cross["blocks_per_request"]
                    derived["kv_cross_blocks_total_per_request"] = plan.blocks_per_request
        if engine == "vllm":  # rules/capacity.yaml encoder-item-exceeds-batched-tokens (kg.derive.encoder_cache)
            derived.update(encoder_item_facts(m, serving_defaults(stack, ns, m)[0]))
        if budget is not None and sized:
            null = null_block_bytes(engine, stack.engine_version, plan.bytes_per_block if plan else lay_dcp.bytes_per_token_per_gpu * block)
            # max_model_len_effective: the given length, else the engine's default (SGLang: the model's context length)
            cap = kv_capacity(lay_dcp, budget, derived.get("max_model_len_effective"), block, null)  # null block held back
            derived["kv_null_block_bytes"] = round(null)
            if stack.engine == "sglang":
                cap = sglang_capacity(cap, derived, m, tp_kv, budget, ns, kvdt)
            derived["kv_block_size"] = block
            derived["kv_budget_bytes_per_gpu"] = round(budget)
            derived["kv_tokens_per_gpu"] = cap.kv_tokens_per_gpu
            derived["kv_tokens_total"] = cap.kv_tokens_total
            if plan is not None:
                # vLLM V1's own numbers: "GPU KV cache size" = int(max_concurrency x max_model_len) (kg.derive.kv_specs)
                pc = plan.capacity(budget)
                derived["kv_num_blocks"] = pc["num_blocks"]
                derived["kv_tokens_total"] = pc["kv_cache_size_tokens"]
                derived["kv_tokens_per_gpu"] = pc["kv_cache_size_tokens"] if dcp == 1 else pc["num_blocks"] * plan.block_size
                derived["max_concurrency_at_max_model_len_effective"] = pc["max_concurrency"]
            # what kv_tokens_total multiplies the per-GPU pool by: the DCP group (vLLM "Multiplying the GPU KV cache
            # size by the dcp_world_size", SGLang DCP alike); SGLang --dp: the dp pools (below)
            derived["kv_tokens_total_basis"] = f"x dcp {dcp}: one pool, its tokens sharded over the DCP group"
            if stack.engine == "sglang" and dp_attn > 1:
                # SGLang --dp N runs N schedulers, each with its own KV pool (N attention groups of
                # tp / N ranks under DP attention, else N replicas of tp ranks): the total counts every pool
                derived["kv_tokens_total"] = cap.kv_tokens_total * dp_attn
                derived["kv_tokens_total_basis"] = f"x dp {dp_attn}: one pool per scheduler"
            elif stack.engine == "vllm" and dp_attn > 1:  # vLLM -dp N: N engine cores, each with its own KV cache
                derived["kv_tokens_all_dp_engines"] = derived["kv_tokens_total"] * dp_attn
            if cap.max_concurrency is not None:
                derived["max_concurrency"] = cap.max_concurrency if plan is None else pc["max_concurrency"]
                if stack.engine == "sglang" and dp_attn > 1:
                    # each of the dp_size schedulers admits its own requests into its own pool: the
                    # deployment serves dp_size times one pool's concurrency
                    derived["max_concurrency_per_attention_group"] = cap.max_concurrency
                    derived["max_concurrency"] = round(cap.max_concurrency * dp_attn, 2)
                elif stack.engine == "vllm" and dp_attn > 1:  # each engine core admits its own requests
                    derived["max_concurrency_all_dp_engines"] = round(derived["max_concurrency"] * dp_attn, 2)
            from kg.analyses.request_len import add_request_len_facts  # --request-len / --isl + --osl
            add_request_len_facts(derived, ns.get("request_len"), plan, lay_dcp, budget, stack.engine == "sglang",
                                  dp_attn if stack.engine == "sglang" else 1)
            if uses_v0(engine, stack.engine_version, ns.get("vllm_use_v1")):  # V0 counts whole blocks
                apply_v0_blocks(derived, ns, block, stack.engine_version)
            derived["max_model_len_that_fits"] = cap.max_model_len_that_fits
            if plan is not None and plan.window_bounded():  # hybrid chunked / sliding groups: their blocks stop growing
                derived["max_model_len_that_fits"] = plan.longest_request(budget - null)
            if plan is not None:
                derived["kv_request_bytes_at_max_model_len"] = plan.blocks_per_request * plan.bytes_per_block
            elif derived.get("max_model_len_effective"):
                derived["kv_request_bytes_at_max_model_len"] = round(
                    request_kv_bytes_per_gpu(lay_dcp, derived["max_model_len_effective"], block))
            if lay_dcp.replication_factor > 1 and lay.bytes_per_token_per_gpu_unreplicated:
                derived["kv_tokens_per_gpu_if_unreplicated"] = int(budget // lay.bytes_per_token_per_gpu_unreplicated)
    if stack.hardware:
        hw = stack.hardware
        facts.append({"kind": "hardware", "gpu": hw["id"], "vendor": str(hw.get("vendor", "unknown"))})
        ns["gpu"] = hw["id"]
        ns["gpu_vendor"] = hw.get("vendor")
        ns["gpu_memory_gib"] = hw.get("memory_gib")
        ns["gpu_compute_capability"] = compute_capability(hw)
        ns["gpu_fp8_supported"] = hw.get("fp8_dense_tflops") is not None
    if stack.gpu_count is not None:  # from the hardware entry, --count or CUDA_VISIBLE_DEVICES
        ns["gpu_count"] = stack.gpu_count
    from kg.analyses.nodefacts import node_facts
    nodes = node_facts(stack, ns)
    ns.update(nodes)
    if nodes.get("gpus_per_node_source"):  # the node size came from the hardware entry, not from the launch
        derived["nodes_assumed"] = (f"{nodes['nnodes']} node(s) of {nodes['gpus_per_node']} GPUs "
                                    f"({nodes['gpus_per_node_source']}; --nnodes / gpus_per_node say otherwise)")
    ns.update(derived)
    ns.update(engine_facts(stack, ns))
    ns.update(support_namespace(stack, ns))  # per-release support data (catalog/support/)
    from kg.analyses.enginechecks import engine_check_facts  # generated check rows, refused options (issue 27)
    ns.update(engine_check_facts(stack, ns))
    for f in facts:
        if f["kind"] == "model":
            f["has_sliding_window"] = ns["has_sliding_window"]
    return facts, ns


def engine_utilization(stack: Stack, ns: dict[str, Any]) -> tuple[float, str]:
    """gpu_memory_utilization and its source (kg.derive.budget.resolve_utilization). Whether the stack gave
    it is the effective configuration's decision (kg.inputs.effective), so the budget, the header and the
    "Effective configuration" section show one value."""
    from kg.derive.budget import engine_table, resolve_utilization
    from kg.inputs.effective import setting_given
    table_default = ((engine_table(stack.engine or "") or {}).get("defaults") or {}).get("gpu_memory_utilization")
    given = setting_given(stack, "gpu_memory_utilization")
    if stack.engine == "sglang" and not given and stack.hardware and stack.model is not None:
        # SGLang computes its default mem_fraction_static from the GPU (kg.derive.sglang_memfrac, >= 0.5.18)
        from kg.derive.kv import gpu_memory_bytes
        from kg.derive.sglang_memfrac import default_mem_fraction
        dp = int(ns.get("dp_size") or 1)
        mf = default_mem_fraction(
            gpu_memory_bytes(stack.hardware), int(ns.get("tp_size") or 1), int(ns.get("pp_size") or 1),
            is_mla=bool(stack.model.is_mla),
            attn_dp_size=dp if "dp-attention" in stack.techniques else 1,
            chunked_prefill_size=ns.get("chunked_prefill_size") if setting_given(stack, "chunked_prefill_size") else None,
            max_running_requests=ns.get("max_num_seqs") if setting_given(stack, "max_num_seqs") else None,
            cuda_graph_disabled="cuda-graphs" not in stack.techniques,
            deepep=str(ns.get("moe_a2a_backend") or "").lower() == "deepep", engine_version=stack.engine_version)
        if mf is not None:
            return mf.fraction, (f"{mf.basis()} [sglang 0.5.23 srt/arg_groups/memory_hook.py:281-399; "
                                 f"0.5.18 srt/server_args.py:4969-4980, 5082-5118]")
    return resolve_utilization(stack.engine, stack.engine_version, ns.get("gpu_memory_utilization"), table_default,
                               given)


def serving_defaults(stack: Stack, ns: dict[str, Any], m=None) -> tuple[int, int]:
    """max_num_batched_tokens and max_num_seqs the engine runs with (given, else vllm serve's GPU defaults:
    vLLM 0.33.0 engine/arg_utils.py:2970-3006; an encoder-decoder ``m`` without chunked prefill:
    kg.derive.encoder_cache.encoder_decoder_batched_tokens)."""
    from kg.derive.kv_specs import default_max_num_batched_tokens
    hw = stack.hardware or {}
    gib = float(hw["memory_gib"]) if hw.get("memory_gib") else None
    mnbt = ns.get("max_num_batched_tokens") or (8192 if stack.engine == "trtllm" else  # BuildConfig.max_num_tokens
                                                default_max_num_batched_tokens(gib, str(hw.get("id") or "")))
    seqs = ns.get("max_num_seqs") or (256 if mnbt == 2048 else 1024)
    mml = ns.get("max_model_len") or (m.vllm_default_max_model_len if m is not None else None)
    from kg.inputs.effective import setting_given
    if m is not None and m.is_encoder_decoder and mml and not setting_given(stack, "max_num_batched_tokens"):
        from kg.derive.encoder_cache import encoder_decoder_batched_tokens
        mnbt = encoder_decoder_batched_tokens(int(mnbt), int(mml), int(seqs))
    return int(mnbt), int(seqs)


def stack_draft(stack: Stack, ns: dict[str, Any], m, tp: int, kvdt: str):
    """The speculative-decoding draft of the stack (kg.derive.drafts), or None; an unresolvable draft is a note."""
    from kg.derive.drafts import draft_facts
    from kg.inputs.modelcfg import config_dict, resolve_model
    method, name = ns.get("speculative_method"), ns.get("speculative_model")
    if not method and not name:
        return None
    base = None
    if stack.source:
        from pathlib import Path
        src = Path(stack.source)
        base = src if src.is_dir() else src.parent

    def resolver(x: str):
        from pathlib import Path
        if base is not None and not Path(x).expanduser().exists() and (base / x).exists():
            return resolve_model(str(base / x))
        return resolve_model(x)
    if name and str(name).startswith(("/", "./", "../", "~")):
        # a local path the engine would open: missing is the user's input error, not a draft optkg cannot size
        from pathlib import Path
        p = Path(str(name)).expanduser()
        if not p.exists() and not (base is not None and (base / str(name)).exists()):
            where = stack.origins.get("speculative_model", "speculative model")
            raise OptkgError(f"{where}: the draft model path '{name}' does not exist")
    try:
        return draft_facts(str(method or ""), str(name) if name else None, m, tp,
                           int(ns["draft_tp_size"]) if ns.get("draft_tp_size") else None, resolver, kvdt,
                           lambda x: config_dict(x, base))
    except OptkgError as e:
        stack.notes.append(f"draft not sized: {e}")
        return None


def stack_budget(stack: Stack, ns: dict[str, Any], m, mem: float, util: float, util_source: str, weights: float,
                 tp: int, draft_weights: float = 0.0):
    """The KV budget breakdown of kg.derive.budget for this stack."""
    from kg.derive.budget import serving_budget
    mnbt, seqs = serving_defaults(stack, ns, m)
    moe_tp = tp
    if "expert-parallelism" in stack.techniques:
        ep = int(ns.get("ep_size") or 1)
        moe_tp = max(1, tp // ep) if ep > 1 else 1
    sb = serving_budget(stack.engine or "vllm", mem, util, util_source, weights, m, tp, mnbt, seqs,
                        bool(ns.get("enforce_eager")), moe_tp, draft_weight_bytes=draft_weights,
                        engine_version=stack.engine_version, max_model_len=ns.get("max_model_len"),
                        limit_mm_per_prompt=ns.get("limit_mm_per_prompt"),
                        language_model_only=bool(ns.get("language_model_only")))
    stack.notes.extend(n for n in sb.encoder_notes if n not in stack.notes)  # kg.derive.encoder_cache
    return sb


def vllm_plan(stack: Stack, ns: dict[str, Any], m, tp: int, pp: int, dcp: int, kvdt: str, mml: int,
              draft_layers: int = 0):
    """vLLM V1's KV plan for the stack (kg.derive.kv_specs), with ``vllm serve``'s defaults for the GPU;
    None when the plan cannot be made (e.g. a DCP size the sliding-window layers refuse)."""
    from kg.derive.kv_specs import plan_kv_cache
    hw = stack.hardware or {}
    mnbt, _ = serving_defaults(stack, ns, m)
    spec_tokens = int(ns.get("num_speculative_tokens") or 0)
    try:
        return plan_kv_cache(
            m, tp, pp, dcp, kvdt, mml, int(ns["block_size"]) if ns.get("block_size") else None, int(mnbt),
            async_scheduling=ns.get("async_scheduling") is not False,
            hybrid_allocator=None if ns.get("disable_hybrid_kv_cache_manager") is None
            else not ns["disable_hybrid_kv_cache_manager"], engine_version=stack.engine_version,
            chunked_hybrid_env=ns.get("chunked_local_attn_hybrid_kv_cache"),
            speculative_method=ns.get("speculative_method"),
            kv_connector=(str(ns.get("kv_connector") or "") if "kv-cache-connector" in stack.techniques else None),
            disable_sliding_window=bool(ns.get("disable_sliding_window")),
            enable_prefix_caching=("prefix-caching" in stack.techniques) if ns.get("enable_prefix_caching") is None
            else bool(ns["enable_prefix_caching"]), num_speculative_tokens=spec_tokens,
            gpu_compute_capability=compute_capability(hw) if hw else None, extra_full_layers=draft_layers,
            mamba_cache_dtype=ns.get("mamba_cache_dtype"), mamba_ssm_cache_dtype=ns.get("mamba_ssm_cache_dtype"))
    except OptkgError:
        return None


FP8_KV_DTYPES = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla")
def _exact_div(a: int, b: int) -> int | float:
    """a / b as an int when it divides exactly, else the float quotient (e.g. 29568 / 2 = 14784, 1536 / 8 = 192)."""
    q = a / b
    return int(q) if q == int(q) else q


def engine_facts(stack: Stack, ns: dict[str, Any]) -> dict[str, Any]:
    """Derived facts the engine-constraint, quantisation and feature rules read (sizes in elements).

    - Effective settings: ``kv_cache_dtype`` / ``speculative_method`` lower-cased; ``has_sliding_window``
      false when the model has no effective window or ``disable_sliding_window`` is set;
      dtype and weight quantisation facts from kg.analyses.weightfacts (``dtype_effective``, ``dtype_loaded``,
      ``weight_quant``, ``weight_quant_kernel``, ``weight_is_fp8``, ``weight_is_fp8_block``, block shape ...).
    - Sharded sizes per rank: ``intermediate_size_per_rank = intermediate_size / tp_size`` (dense MLP,
      column-parallel gate/up, row-parallel down); ``moe_tp_size`` = tp_size without expert parallelism,
      ``tp_size // ep_size`` with an explicit ep_size (SGLang), 1 with vLLM's --enable-expert-parallel
      (experts are split whole over EP = TP x DP ranks); ``moe_intermediate_size_per_rank =
      moe_intermediate_size / moe_tp_size``; ``shared_expert_intermediate_size_per_rank =
      shared_expert_intermediate_size / tp_size``. Values are ints when they divide, else floats.
      ``ep_size_effective``; ``has_dense_mlp`` (some layer has a dense MLP); ``has_shared_experts``.
    - ``draft_tp_size_effective``: draft_tp_size, else 1 for mlp_speculator, else tp_size (vLLM
      ``SpeculativeConfig._verify_and_get_draft_tp``).
    - ``flash_attn_version_effective``: flash_attn_version, else 3 on compute capability 9.x and 2 on
      8.x (vLLM ``get_flash_attn_version``); absent otherwise.
    - ``engine_uses_v0``: vLLM with VLLM_USE_V1=0, or a version below 0.8.0 (V1 became the default);
      a V1 stack on vLLM < 0.8.0 without an attention backend gets ``attention_backend`` FLASH_ATTN (its
      only non-MLA backend then, vLLM PR 14221).
    Sources: shared/reference/serving_engine_facts.md §1-§4.
    """
    out: dict[str, Any] = {}
    m = stack.model
    techs = stack.techniques
    tp, dp = int(ns["tp_size"]), int(ns["dp_size"])
    kvdt = str(ns.get("kv_cache_dtype") or "auto").lower()
    out["kv_cache_dtype"] = kvdt
    out["kv_cache_is_fp8"] = kvdt in FP8_KV_DTYPES
    if ns.get("speculative_method") is not None:
        sm = str(ns["speculative_method"]).lower()
        out["speculative_method"] = "mtp" if sm == "nextn" else sm
    out["has_sliding_window"] = bool(m is not None and m.sliding_window) and not bool(ns.get("disable_sliding_window"))
    out.update(dtype_facts(stack, ns))
    if ns.get("attention_backend") is not None:
        out["attention_backend"] = str(ns["attention_backend"])
    out.update(weight_quant_facts(stack, ns))
    cc = compute_capability(stack.hardware)
    vendor = str((stack.hardware or {}).get("vendor") or "nvidia").lower()
    # expert parallelism and per-rank sizes
    ep = int(ns.get("ep_size") or 1)
    if "expert-parallelism" in techs:
        out["ep_size_effective"] = ep if ep > 1 else tp * dp
        moe_tp = max(1, tp // ep) if ep > 1 else 1
    else:
        out["ep_size_effective"] = 1
        moe_tp = tp
    out["moe_tp_size"] = moe_tp
    if m is not None:
        if m.intermediate_size:
            out["intermediate_size_per_rank"] = _exact_div(m.intermediate_size, tp)
        if m.moe_intermediate_size:
            out["moe_intermediate_size_per_rank"] = _exact_div(m.moe_intermediate_size, moe_tp)
        if m.shared_expert_intermediate_size:
            out["shared_expert_intermediate_size_per_rank"] = _exact_div(m.shared_expert_intermediate_size, tp)
        out["has_dense_mlp"] = not m.is_moe or m.num_moe_layers < m.num_hidden_layers
        out["has_shared_experts"] = bool(m.shared_expert_intermediate_size)
        out["num_redundant_experts"] = int(ns.get("num_redundant_experts") or 0)
    # speculative decoding
    if "speculative-decoding" in techs or ns.get("speculative_method") or ns.get("speculative_model"):
        if ns.get("draft_tp_size") is not None:
            out["draft_tp_size_effective"] = int(ns["draft_tp_size"])
        else:
            out["draft_tp_size_effective"] = 1 if out.get("speculative_method") == "mlp_speculator" else tp
    # FlashAttention version and engine generation
    if ns.get("flash_attn_version") is not None:
        out["flash_attn_version_effective"] = int(ns["flash_attn_version"])
    elif cc is not None and vendor == "nvidia" and 8.0 <= cc < 10.0:
        out["flash_attn_version_effective"] = 3 if cc >= 9.0 else 2
    out["engine_uses_v0"] = v0 = uses_v0(stack.engine, stack.engine_version, ns.get("vllm_use_v1"))
    # vLLM V1 before 0.8.0 had FLASH_ATTN as its only non-MLA attention backend (vLLM PR 14221)
    if (stack.engine == "vllm" and not v0 and ns.get("attention_backend") is None and stack.engine_version
            and m is not None and not m.is_mla):
        from packaging.version import InvalidVersion, Version
        with contextlib.suppress(InvalidVersion):  # an unparsable version was refused when the stack was read
            if Version(stack.engine_version) < Version("0.8.0"):
                out["attention_backend"] = "FLASH_ATTN"
    out["has_kv_connector"] = "kv-cache-connector" in techs
    # bytes per weight element as stored: kg.derive.weights (stack_facts puts it in ns); scales included
    # GPUs the launch needs: vLLM world size PP x TP x PCP per data-parallel rank, times DP
    # (ParallelConfig, facts §2.1); SGLang TP x PP, times DP unless DP attention splits the TP group
    # (ServerArgs._handle_data_parallelism: dp_size divides tp_size there)
    pp, pcp = int(ns.get("pp_size") or 1), int(ns.get("pcp_size") or 1)
    if stack.engine == "sglang" and "dp-attention" in techs:
        out["gpus_required"] = tp * pp
    else:
        out["gpus_required"] = tp * pp * pcp * dp
    if ns.get("allow_long_max_model_len") is None:
        out["allow_long_max_model_len"] = False
    # engine defaults for settings the rules compare (when the stack does not set them)
    for key, default in (("enable_dbo", False), ("calculate_kv_scales", False), ("kv_sharing_fast_prefill", False),
                         ("disable_sliding_window", False), ("enforce_eager", False),
                         ("enable_return_routed_experts", False), ("async_scheduling", False)):
        if ns.get(key) is None:
            out[key] = default
    # the flag table's defaults for options the stack does not give, and flags given with their JSON twin
    from kg.inputs.optiondefaults import option_facts
    for key, default in option_facts(stack.engine, stack.engine_version, stack.settings).items():
        if ns.get(key) is None:
            out[key] = default
    if ns.get("all2all_backend") is None and stack.engine == "vllm":
        out["all2all_backend"] = "allgather_reducescatter"  # vLLM default (EngineArgs.all2all_backend)
    for key, default in flag_defaults(stack.engine).items():  # `default:` of the engine's flag entries
        if ns.get(key) is None and key not in out:
            out[key] = default
    if ns.get("moe_a2a_backend") is None and stack.engine == "sglang":
        out["moe_a2a_backend"] = "none"  # SGLang default (ServerArgs.moe_a2a_backend)
    return out


def _functions(stack: Stack):
    present = set(stack.techniques)
    return {"has": lambda tid: tid in present}


def _coords(catalog: Catalog, tid: str) -> dict[str, Any]:
    t = catalog.techniques.get(tid)
    if not t:
        return {"technique": tid}
    c = t["coordinates"]
    return {"technique": tid, "stages": c["stages"], "layers": c["layers"], "dimension": c["dimension"]}


def _fingerprint(rule_id: str, techniques: list[str], numbers: dict[str, Any]) -> str:
    import hashlib
    import json
    key = json.dumps([rule_id, sorted(techniques), numbers], sort_keys=True, default=str)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


_READS: dict[tuple[str, ...], frozenset[str]] = {}


def _rule_reads(r) -> frozenset[str]:
    """Fact names a rule's condition and numbers read (parsed once per distinct expression set)."""
    key = (r.condition or "",) + tuple(r.numbers.values())
    got = _READS.get(key)
    if got is None:
        read: set[str] = set()
        for text in key:
            if text:
                read |= names_in(text)
        got = _READS[key] = frozenset(read)
    return got


def firing_to_finding(f: Firing, ns: dict[str, Any], catalog: Catalog) -> Finding:
    r = f.rule
    read = _rule_reads(r)
    facts = {k: ns[k] for k in sorted(read) if k in ns and k not in f.numbers}
    techs = [t for t in r.techniques]
    fixes = [{"technique": x, "name": catalog.techniques[x]["name"] if x in catalog.techniques else x} for x in r.fixes]
    fix = r.fix_by_engine.get(str(ns.get("engine") or ""), r.fix) if getattr(r, "fix_by_engine", None) else r.fix
    return Finding(
        rule_id=r.id, title=r.title, severity=f.severity or "info", message=f.message, techniques=techs,
        facts=facts, numbers=f.numbers, cost_dimension=r.cost_dimension, from_dimension=r.from_dimension,
        coordinates=[_coords(catalog, t) for t in techs], mechanism=r.mechanism, fixes=fixes,
        fix=_fmt(fix, {**ns, **f.numbers}) if fix and "{" in fix else fix,
        sources=r.sources, tags=r.tags, rule_file=r.file, rule_line=r.line,
        fingerprint=_fingerprint(r.id, techs, f.numbers), coupling=r.coupling or (r.refines[0] if r.refines else None),
        kind=getattr(r, "kind", "startup"), failure=dict(getattr(r, "failure", {}) or {}),
    )


def describe_stack(stack: Stack) -> dict[str, Any]:
    return {
        "name": stack.name, "source": stack.source,
        "model": stack.model.name if stack.model else None,
        "attention": stack.model.attention if stack.model else None,
        "engine": stack.engine, "engine_version": stack.engine_version,
        "engine_version_assumed": stack.engine_version_assumed,
        "framework": stack.framework, "framework_version": stack.framework_version,
        "hardware": stack.hardware["id"] if stack.hardware else None, "gpu_count": stack.gpu_count,
        "techniques": {k: dict(sorted(v.items())) for k, v in sorted(stack.techniques.items())},
        "settings": {k: v for k, v in sorted(stack.settings.items()) if not isinstance(v, dict)},
    }


def check_stack(stack: Stack, catalog: Catalog, rules: RuleSet) -> Report:
    """Run the check rules over ``stack``. Findings are sorted by severity (worst first), then rule id.

    First the engine's effective configuration is applied to a copy of the stack (kg.inputs.effective:
    the release assumed when none is given, release defaults for settings the stack does not give)."""
    import copy
    from kg.inputs.effective import effective_configuration
    stack = copy.copy(stack)
    stack.settings, stack.notes = dict(stack.settings), list(stack.notes)
    stack.techniques = {k: dict(v) for k, v in stack.techniques.items()}
    effective = effective_configuration(stack)
    facts, ns = stack_facts(stack)
    firings = _evaluate(rules, facts, ns, stack, catalog)
    stored = stored_kv_capacity(stack, {f.rule.id for f in firings if f.fired}, stack_facts)
    if stored is not None:  # capacity (table and rules) at the KV dtype the engine stores; the rule saying so stays
        keep = {f.rule.id: f for f in firings if f.rule.id in STORED_KV_DTYPE}
        ns = {**ns, **stored[0], "kv_bytes_per_token_per_gpu_requested": ns.get("kv_bytes_per_token_per_gpu")}
        stack.notes.append(stored[1])
        firings = [keep.get(f.rule.id, f) for f in _evaluate(rules, facts, ns, stack, catalog)]
    # an informational effect coupling that applies (DCP causes communication volume when dcp_size > 1) is
    # "in effect", listed apart from findings: nothing to fix
    notes_only = {f.rule.id for f in firings if f.fired and _is_effect_note(f.rule)}
    findings = [firing_to_finding(f, ns, catalog) for f in firings if f.fired and f.rule.id not in notes_only]
    in_effect = [{"rule_id": f.rule.id, "coupling": f.rule.coupling, "message": f.message,
                  "techniques": f.rule.techniques, "sources": f.rule.sources} for f in firings if f.rule.id in notes_only]
    outcomes = {k: sum(f.outcome == k for f in firings) for k in ("fired", "held", "not_evaluable", "not_applicable")}
    unknown = {e["setting"]: e["why"] for e in effective if e["source"] == "unknown"}
    not_evaluable = [not_evaluable_entry(f, stack, unknown) for f in firings if f.outcome == "not_evaluable"]
    findings.sort(key=lambda x: (-SEVERITY_ORDER.get(x.severity, 0), x.rule_id))
    derived = {k: ns[k] for k in sorted(ns) if k.startswith(("kv_", "valid_", "dcp_", "max_", "weight_", "draft_", "nodes_"))
               and not isinstance(ns[k], dict)}
    if stack.engine and stack.engine != "vllm" and not engine_has_dcp(stack.engine, stack.engine_version):
        for k in ("valid_dcp_sizes", "dcp_possible", "max_useful_dcp_size", "dcp_impossible_reason"):  # no DCP there
            derived.pop(k, None)
    notes = list(stack.notes) + (stack.model.warnings if stack.model else [])
    shown = describe_stack(stack)
    if str(ns.get("kv_budget_utilization_source") or "").startswith("SGLang default"):
        # the fraction SGLang computes replaces the table's placeholder wherever the report shows it
        for params in shown["techniques"].values():
            if "gpu_memory_utilization" in params:
                params["gpu_memory_utilization"] = ns["kv_budget_gpu_memory_utilization"]
        for e in effective:
            if e.get("setting") == "gpu_memory_utilization":
                e["value"] = ns["kv_budget_gpu_memory_utilization"]
                e["why"] = ns["kv_budget_utilization_source"]
    return Report(shown, findings, derived,
                  [{"rule": f.rule.id, "reason": f.reason, "outcome": f.outcome} for f in firings if not f.fired],
                  list(stack.ignored), notes, not_evaluable, outcomes, effective, in_effect)


def _is_effect_note(rule) -> bool:
    from kg.knowledge.couplings import EFFECT_KINDS
    return bool(rule.coupling) and (rule.severity or "info") == "info" and len(rule.tags) > 1 \
        and rule.tags[1] in EFFECT_KINDS


def not_evaluable_entry(f: Firing, stack: Stack, unknown: dict[str, str] | None = None) -> dict[str, Any]:
    """``{rule_id, missing, needs, reason}`` for a rule that could not be evaluated. ``missing``: the fact
    names (or fact kinds, e.g. ``hardware``) it lacks; ``needs``: the input that would provide them -
    ``hardware`` for GPU-derived facts, and for engine defaults that depend on the GPU class
    (``unknown``: setting -> why, from the effective configuration), when the stack names no known GPU;
    else the fact name itself (a setting the stack could give)."""
    needs: list[str] = []
    for name in f.missing:
        if stack.hardware is None and (name in HARDWARE_FACTS or "depends on hardware" in (unknown or {}).get(name, "")):
            n = "hardware"  # a GPU-derived fact, or an engine default that depends on the GPU class
        else:
            n = name
        if n not in needs:
            needs.append(n)
    return {"rule_id": f.rule.id, "missing": list(f.missing), "needs": needs, "reason": f.reason}


def _evaluate(rules: RuleSet, facts: list[dict[str, Any]], ns: dict[str, Any], stack: Stack,
              catalog: Catalog) -> list[Firing]:
    """evaluate_rules over the rules the stack's techniques can match (kg.knowledge.couplings.ruleset_for);
    generated coupling rules about techniques the stack lacks are not applicable without an engine run."""
    from kg.knowledge.couplings import ruleset_for
    active, skipped = ruleset_for(catalog, rules, set(stack.techniques))
    firings = evaluate_rules(active, facts, ns, _functions(stack), stack.engine, stack.engine_version)
    if skipped:
        firings += [Firing(r, False, "a technique it is about is not in the stack", outcome="not_applicable")
                    for r in skipped]
    return firings


def run_fixture(data: dict[str, Any], catalog: Catalog, rules: RuleSet, base_dir) -> list[Firing]:
    """Fixture runner for the ``check`` ruleset: ``data`` is a stack mapping (stack-file shape)."""
    stack = fixture_stack(data, catalog, base_dir)
    facts, ns = stack_facts(stack)
    return _evaluate(rules, facts, ns, stack, catalog)


def fixture_stack(data: dict[str, Any], catalog: Catalog, base_dir) -> Stack:
    """The stack of a check fixture's ``input``: a stack mapping, or ``{command, engine}`` (a launch command, e.g.
    one with an option the release refuses)."""
    if isinstance(data, dict) and set(data) == {"command", "engine"}:
        from kg.engines.launch import parse_command
        return parse_command(str(data["command"]), catalog, str(data["engine"]))
    from kg.inputs.stack import stack_from_doc
    from kg.core.yamlio import YamlDoc
    return stack_from_doc(YamlDoc(str(base_dir), data, {}), catalog, base_dir)
