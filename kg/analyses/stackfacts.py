"""The facts rules read about a stack: a short pipeline over the engine protocol (kg.engines.base.Engine).

``stack_facts(stack)`` -> (structural facts, flat namespace). The namespace holds every model field, hardware fact,
setting and technique parameter, plus, step by step:

1. the KV layout (``_kv_layout``): the engine's KV dtype for 'auto', kv_layout of kg.derive.kv at the attention TP
   size, replication, the DCP sizes (the engine's, else vLLM's rule), bytes per token;
2. limits and weights (``_limits``): the context limit the engine enforces (``max_model_len_limit``) and the
   max_model_len it runs with, the weight-quantisation scheme, a speculative draft;
3. the budget (``_budget``): the engine's memory fraction, the weights per GPU against the share they must fit, the
   KV budget (given, given in the engine's own terms, or the engine's breakdown);
4. the KV plan (``_plan``): the engine's per-layer plan when it has one (vLLM V1's for most), a block count the
   stack gives, cross-attention;
5. capacity (``_capacity``): tokens, blocks, concurrency, the longest request that fits, in the engine's pools and
   totals (SGLang's pools and dp schedulers, vLLM's dp engine cores and V0 whole blocks);
6. hardware, nodes (kg.analyses.nodefacts), ``engine_facts`` and the per-release support data
   (kg.analyses.supportfacts).

None of these asks which engine it is: each calls ``kg.engines.of(stack)``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kg.core.errors import OptkgError
from kg.analyses.checkpointfacts import apply_checkpoint_size, apply_cpu_offload, relabel_weights_line
from kg.analyses.weightfacts import dtype_facts, weight_quant_facts
from kg.derive.budget import BudgetInputs
from kg.derive.encoder_cache import cross_attention_summary
from kg.derive.kv import (GIB, UnmodelledKVDtype, per_layer_kv_shape_reason, checked_kv_budget_gib, compute_capability, gpu_memory_bytes,
                          kv_capacity, kv_layout, request_kv_bytes_per_gpu, valid_tp_sizes)
from kg.derive.weights import estimate_weight_bytes, weight_bytes_per_gpu, weight_scheme
from kg.engines import of
from kg.engines.base import Engine, NotEvaluable
from kg.inputs.launch.argv import flag_defaults
from kg.inputs.stack import Stack

# Facts stack_facts derives only from the hardware (the GPU entry, its memory, what the KV budget
# estimate needs): a rule missing one of them "needs hardware" when the stack names no known GPU.
HARDWARE_FACTS = frozenset({
    "gpu", "gpu_vendor", "gpu_memory_gib", "gpu_compute_capability", "gpu_fp8_supported", "gpu_count",
    "gpu_memory_bytes", "gpu_memory_usable_bytes", "weight_bytes_per_gpu_estimate", "weight_bytes_total_estimate",
    "weights_exceed_gpu_memory", "kv_block_size", "kv_budget_bytes_per_gpu", "kv_tokens_per_gpu", "kv_tokens_total",
    "max_concurrency", "max_model_len_that_fits", "kv_request_bytes_at_max_model_len",
    "kv_tokens_per_gpu_if_unreplicated", "flash_attn_version_effective", "hardware", "kv_null_block_bytes",
})
FP8_KV_DTYPES = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla")


@dataclass
class KVContext:
    """What the KV steps of ``stack_facts`` share (one stack with a model): the engine, the namespace built so far,
    the ``derived`` facts, the parallel sizes (``attention_tp``: the TP size the KV layout follows), the KV dtype
    and layouts, and what the budget and plan steps found."""

    stack: Stack
    engine: Engine
    ns: dict[str, Any]
    derived: dict[str, Any]
    model: Any
    tp: int
    pp: int
    dcp: int
    attention_tp: int
    dp_size: int
    kv_cache_dtype: str = "auto"
    layout: Any = None
    layout_dcp: Any = None
    sized: bool = True
    scheme: Any = None
    draft: Any = None
    block_size: int = 16
    budget: float | None = None
    plan: Any = None
    notes: list[str] = field(default_factory=list)

    def note(self, *notes: str) -> None:
        self.stack.notes.extend(n for n in notes if n not in self.stack.notes)


def stack_facts(stack: Stack) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Engine facts (structural) and the flat namespace (numeric) for ``stack`` (module doc)."""
    _runtime_dtype(stack)
    ns, facts = _base_facts(stack)
    derived: dict[str, Any] = {}
    m = stack.model
    if m is not None:
        facts.append({"kind": "model", "attention": m.attention, "is_moe": m.is_moe,
                      "has_sliding_window": bool(m.sliding_window), "quant_method": m.quant_method or "none"})
        ctx = _kv_layout(stack, ns, derived)
        _limits(ctx)
        _budget(ctx)
        _plan(ctx)
        _capacity(ctx)
        _auto_fit_max_model_len(ctx)
    _hardware_facts(stack, ns, facts)
    from kg.analyses.nodefacts import node_facts
    nodes = node_facts(stack, ns)
    ns.update(nodes)
    if nodes.get("gpus_per_node_source"):  # the node size came from the hardware entry, not from the launch
        n, per = nodes["nnodes"], nodes["gpus_per_node"]
        used = stack.gpu_count or ns.get("world_size")
        derived["nodes_assumed"] = (f"{n} node{'s' if n != 1 else ''} of {per} GPUs"
                                    + (f", {used} used" if used and used != n * per else "")
                                    + f" ({nodes['gpus_per_node_source']}; --nnodes / gpus_per_node say otherwise)")
    ns.update(derived)
    ns.update(engine_facts(stack, ns))
    from kg.analyses.supportfacts import support_namespace
    ns.update(support_namespace(stack, ns))  # per-release support data (catalog/support/)
    from kg.analyses.enginechecks import engine_check_facts  # generated check rows, refused options (issue 27)
    ns.update(engine_check_facts(stack, ns))
    for f in facts:
        if f["kind"] == "model":
            f["has_sliding_window"] = ns["has_sliding_window"]
    return facts, ns


def _runtime_dtype(stack: Stack) -> None:
    """A float32 checkpoint under ``--dtype auto`` is sized as the 16-bit dtype the engine runs it in
    (kg.analyses.weightfacts.runtime_model), with a note."""
    from kg.analyses.weightfacts import runtime_model
    stack.model, note = runtime_model(of(stack), stack.model, stack.settings.get("dtype"),
                                      compute_capability(stack.hardware), stack.engine_version)
    if note and note not in stack.notes:
        stack.notes.append(note)


def _base_facts(stack: Stack) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The stack's values, techniques, engine and framework; the model's fields."""
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
    if m is not None:
        from kg.engine.incremental import model_dict
        for k, v in model_dict(m).items():
            if k in ("warnings", "source", "name", "quantization_config", "quantization_config_source"):
                continue
            if k == "weight_block_size":
                if isinstance(v, list) and len(v) == 2:
                    ns["weight_block_n"], ns["weight_block_k"] = v
                continue
            ns.setdefault(k, v)
        ns["model_name"] = m.name
        ns["has_sliding_window"] = bool(m.sliding_window)
    return ns, facts


def _kv_layout(stack: Stack, ns: dict[str, Any], derived: dict[str, Any]) -> KVContext:
    """Step 1 (module doc)."""
    m, eng = stack.model, of(stack)
    tp, pp, dcp = ns["tp_size"], ns["pp_size"], ns["dcp_size"]
    # DP attention splits the TP group into dp_size attention replicas of tp / dp ranks, each caching its own
    # requests: the KV layout follows the attention TP size (SGLang docs/advanced_features/dp_dpa_smg_guide.md;
    # ServerArgs._handle_data_parallelism)
    tp_kv = tp
    dp = eng.attention_dp_size(stack, ns, tp, int(ns.get("dp_size") or 1))
    if ("dp-attention" in stack.techniques or ns.get("enable_dp_attention")) and dp > 1 and tp % dp == 0:
        tp_kv = tp // dp
        derived["attention_tp_size"] = tp_kv
    ctx = KVContext(stack, eng, ns, derived, m, tp, pp, dcp, tp_kv, dp)
    hw = stack.hardware or {}
    cc = compute_capability(hw) if str(hw.get("vendor", "")).lower() == "nvidia" else None  # a CUDA GPU's
    eng.apply_auto_kv_cache_dtype(m, stack.engine_version, ns, derived, cc)  # 'auto': checkpoint / DSA on SM10x
    kvdt = ctx.kv_cache_dtype = str(ns.get("kv_cache_dtype") or "auto")
    if shape_reason := per_layer_kv_shape_reason(m):
        return _unsized_per_layer_shape(ctx, shape_reason)
    try:
        lay = kv_layout(m, tp_kv, pp, 1, kvdt)
        lay_dcp = kv_layout(m, tp_kv, pp, dcp, kvdt) if dcp > 1 else lay
    except UnmodelledKVDtype:
        # a value the engine accepts but optkg cannot size: keep head/replication facts, drop byte facts
        ctx.sized = False
        lay = kv_layout(m, tp_kv, pp, 1, "auto")
        lay_dcp = kv_layout(m, tp_kv, pp, dcp, "auto") if dcp > 1 else lay
        stack.notes.append(f"kv_cache_dtype '{kvdt}': optkg does not model its cache size; "
                           "KV bytes, budget and capacity are not computed")
    ctx.layout, ctx.layout_dcp = lay, lay_dcp
    derived.update({
        "kv_heads_per_rank": lay.kv_heads_per_rank,
        "kv_replication_tp": lay.replication_factor,
        "kv_replication": lay_dcp.replication_factor,
        "valid_dcp_sizes": lay.valid_dcp_sizes,
        "dcp_possible": lay.dcp_possible,
        "max_useful_dcp_size": max(lay.valid_dcp_sizes), "dcp_impossible_reason": lay.dcp_impossible_reason,
        "valid_tp_sizes": valid_tp_sizes(m),  # every split the engine asserts on (kv.valid_tp_sizes)
    })
    sizes = eng.dcp_sizes(stack.engine_version, m, tp_kv)  # the engine's own, else vLLM's rule above
    if sizes is not None:
        derived.update({"valid_dcp_sizes": sizes, "dcp_possible": len(sizes) > 1, "max_useful_dcp_size": max(sizes)})
    if ctx.sized:
        derived.update({
            "kv_bytes_per_token_model": lay.bytes_per_token_model,
            "kv_bytes_per_token_per_gpu": lay.bytes_per_token_per_gpu,
            "kv_bytes_per_token_per_gpu_unreplicated": lay.bytes_per_token_per_gpu_unreplicated,
            "kv_bytes_per_token_per_gpu_effective": lay_dcp.bytes_per_token_per_gpu_effective,
            "kv_element_bytes": lay.kv_element_bytes,
        })
    return ctx


def _unsized_per_layer_shape(ctx: KVContext, reason: str) -> KVContext:
    """A model whose global layers cache another KV shape (Gemma 4): the sliding layers' layout stands in for the
    attributes later steps read, but no KV bytes, head or replication fact is derived from it."""
    from dataclasses import replace
    ctx.sized = False
    m = replace(ctx.model, global_head_dim=None, num_global_key_value_heads=None)
    ctx.layout = ctx.layout_dcp = kv_layout(m, ctx.attention_tp, ctx.ns["pp_size"], 1, "auto")
    ctx.derived["valid_tp_sizes"] = valid_tp_sizes(ctx.model)
    ctx.stack.notes.append(f"KV cache {reason}: KV bytes, budget and capacity are not computed")
    return ctx


def _limits(ctx: KVContext) -> None:
    """Step 2 (module doc): the context limit and max_model_len, the weight scheme, the draft."""
    stack, ns, derived, m = ctx.stack, ctx.ns, ctx.derived, ctx.model
    limit = ctx.engine.context_limit(m, ns, stack.engine_version)
    if limit is not None:
        derived["max_model_len_limit"] = int(limit)
    mml = ns.get("max_model_len") or derived.get("max_model_len_limit")
    if mml:
        derived["max_model_len_effective"] = int(mml)
        # where it came from, for messages that quote it: the user's value is never "the model's default", and a
        # value the release table filled in (vLLM's max_model_len default: the model's length) is not "given"
        from kg.inputs.effective import setting_given
        derived["max_model_len_source"] = (
            "given with --max-model-len" if ns.get("max_model_len") and setting_given(stack, "max_model_len")
            else f"{getattr(ctx.engine, 'title', None) or 'the engine'}'s default: --max-model-len is not given"
            if ns.get("max_model_len")
            else "the model's default: --max-model-len is not given")
    # one weight-quantisation fact per report: the scheme kg.derive.weights reads from the flags and files
    scheme = ctx.scheme = weight_scheme(m, ns.get("quantization"), ns.get("dtype"), ns.get("expert_dtype"))
    derived["weight_quant_source"] = scheme.source
    derived["weight_bytes_per_param"] = scheme.dominant
    ctx.note(*scheme.notes)
    draft = ctx.draft = stack_draft(stack, ns, m, ctx.attention_tp, ctx.kv_cache_dtype)
    if draft is not None:
        derived["draft_kind"] = draft.kind
        derived["draft_layers"] = draft.layers
        derived["draft_weight_bytes_per_gpu_estimate"] = round(draft.weight_bytes_per_gpu)
        derived["draft_kv_bytes_per_token_per_gpu"] = draft.kv_bytes_per_token_per_gpu
        if draft.max_position_embeddings:
            derived["draft_max_position_embeddings"] = draft.max_position_embeddings
        derived.update({f"draft_{k}": v for k in ("vocab_size", "architecture") if (v := getattr(draft, k))})
        ctx.note(*draft.notes)
    elif not any(str(n).startswith("draft not sized") for n in stack.notes):
        derived["draft_kind"] = "none"  # no draft model (no speculative decoding, or ngram / suffix)


def _vision_shards(ns: dict[str, Any], tp: int) -> int:
    """The GPUs a vision tower is split over (kg.derive.weights.weight_bytes_per_gpu): 0 when no modality may send
    items (``--language-model-only``, or ``--limit-mm-per-prompt`` 0 for image and video: vLLM 0.34.0
    model_executor/models/interfaces.py:382-394 skips the tower), 1 with ``--mm-encoder-tp-mode data``, else TP."""
    from kg.derive.encoder_cache import mm_limits
    limits = mm_limits(ns.get("limit_mm_per_prompt"), bool(ns.get("language_model_only")))
    if limits.get("image") == 0 and limits.get("video") == 0:
        return 0
    return 1 if str(ns.get("mm_encoder_tp_mode") or "") == "data" else tp


def _budget(ctx: KVContext) -> None:
    """Step 3 (module doc): the memory fraction, the weights per GPU, the KV budget."""
    stack, ns, derived, m, eng, tp = ctx.stack, ctx.ns, ctx.derived, ctx.model, ctx.engine, ctx.tp
    ctx.block_size = int(ns.get("block_size") or 16)
    util, util_source = engine_utilization(stack, ns)
    derived["kv_budget_gpu_memory_utilization"] = util
    derived["kv_budget_utilization_source"] = util_source
    mem = gpu_memory_bytes(stack.hardware) if stack.hardware else None
    if mem is not None:
        derived["gpu_memory_bytes"] = round(mem)
        derived["gpu_memory_usable_bytes"] = round(eng.weight_share_bytes(mem, util))
        expert_shards = eng.expert_shards(stack, ns, tp)
        vision_shards = _vision_shards(ns, tp)
        weights = weight_bytes_per_gpu(m, tp, ctx.pp, expert_shards, ctx.scheme, vision_shards)
        if m.vision_model_type and not m.vision_params and vision_shards:
            ctx.note(f"weights: the vision tower ({m.vision_model_type}) is not counted: optkg sizes only Qwen3-VL / "
                     "Qwen3.5 towers (kg.inputs.vision), so the weights are low and the KV budget high by its size")
        if m.is_moe:
            derived["weight_expert_shards"] = expert_shards
        if ctx.attention_tp != tp:
            # DP attention: every rank holds the attention weights of its tp / dp attention group, not 1/tp
            # of them (SGLang dp_attention: attention TP size = tp_size / dp_size)
            attn = estimate_weight_bytes(m, parts=True, scheme=ctx.scheme)["attention"]
            extra = attn / (ctx.attention_tp * ctx.pp) - attn / (tp * ctx.pp)
            weights += extra
            derived["weight_bytes_attention_replicated_per_gpu"] = round(extra)
        derived["weight_bytes_per_gpu_estimate"] = round(weights)
        derived["weight_bytes_total_estimate"] = round(estimate_weight_bytes(m, scheme=ctx.scheme))
        derived["weights_exceed_gpu_memory"] = weights > derived["gpu_memory_usable_bytes"]
        apply_checkpoint_size(stack, derived, weights)  # model.safetensors(.index.json) when present
        if ns.get("cpu_offload_gb"):
            apply_cpu_offload(stack, derived, ns["cpu_offload_gb"])
    given = eng.given_kv_budget(ns)
    derived["kv_size_given_by"] = eng.kv_size_given(ns) or "none"
    if mem is not None and ns.get("kv_budget_gib") is None and derived["kv_size_given_by"] != "none":
        _given_size_limits(ctx, mem)
    if ns.get("kv_budget_gib") is not None:
        # a file's or a log's budget too: at most the GPU's memory (kg.derive.kv.checked_kv_budget_gib)
        where = f"{stack.source or stack.name}: kv_budget_gib"
        ctx.budget = checked_kv_budget_gib(ns["kv_budget_gib"], where, stack.hardware) * GIB
        derived["kv_budget_source"] = "given (kv_budget_gib)"
        derived["weights_exceed_gpu_memory"] = False  # a measured budget means the weights loaded
    elif given is not None:
        ctx.budget, derived["kv_budget_source"] = given
    elif mem is not None:
        sb = stack_budget(stack, ns, m, mem, util, util_source,
                          derived.get("weight_bytes_per_gpu_checkpoint", derived["weight_bytes_per_gpu_estimate"]), tp,
                          derived.get("draft_weight_bytes_per_gpu_estimate", 0),
                          ctx.layout_dcp.bytes_per_token_per_gpu * ctx.block_size if ctx.sized else None)
        ctx.budget = sb.kv_bytes
        derived["kv_budget_breakdown"] = [dict(x.__dict__) for x in sb.lines]
        relabel_weights_line(derived)
        derived["kv_budget_error_bytes"] = round(sb.error_bytes)
        derived["kv_budget_source"] = sb.source_text()


def _given_size_limits(ctx: KVContext, mem: float) -> None:
    """A KV size the stack gives (vLLM --kv-cache-memory-bytes, --num-gpu-blocks-override) is allocated as is, in one
    tensor, whatever the GPU holds (kg.engines.vllm.VLLM.kv_size_given, ``kv_size_given_by``). What it is checked against, bytes per GPU:
    ``kv_given_allocatable_bytes_per_gpu``, the memory after the weights (draft, LoRA slots) and non-torch, which the
    allocation cannot exceed; ``kv_given_gpu_limit_bytes_per_gpu``, the same less the activation peak, the CUDA
    graphs and vLLM's 150 MiB buffer (the value vLLM suggests "to fully utilize gpu memory", 0.34.0
    v1/worker/gpu_worker.py:1135-1146); ``kv_given_error_bytes``, the estimate's error bar (the profile estimate at
    gpu_memory_utilization 1.0: these flags ignore the fraction)."""
    derived = ctx.derived
    sb = stack_budget(ctx.stack, ctx.ns, ctx.model, mem, 1.0, "the whole GPU",
                      derived.get("weight_bytes_per_gpu_checkpoint", derived["weight_bytes_per_gpu_estimate"]), ctx.tp,
                      derived.get("draft_weight_bytes_per_gpu_estimate", 0))
    transient = sum(x.bytes for x in sb.lines if x.name in ("activation peak", "encoder cache (profiled)", "CUDA graphs"))
    derived["kv_given_allocatable_bytes_per_gpu"] = round(sb.kv_bytes + transient)
    derived["kv_given_gpu_limit_bytes_per_gpu"] = max(0, round(sb.kv_bytes - 150 * 2**20))
    derived["kv_given_error_bytes"] = round(sb.error_bytes)


def _plan(ctx: KVContext) -> None:
    """Step 4 (module doc): the engine's KV plan, a block count given, cross-attention, the model's limits."""
    stack, ns, derived, m, eng = ctx.stack, ctx.ns, ctx.derived, ctx.model, ctx.engine
    if ctx.sized and derived.get("max_model_len_effective"):
        draft = ctx.draft
        plan = ctx.plan = eng.kv_plan(stack, ns, m, ctx.attention_tp, ctx.pp, ctx.dcp, ctx.kv_cache_dtype,
                                      derived["max_model_len_effective"], serving_defaults(stack, ns, m)[0],
                                      draft.layers if draft is not None else 0)
        if plan is not None:
            ctx.block_size = plan.block_size
            given = eng.block_count_budget(ns, plan)
            if given is not None:
                ctx.budget, derived["kv_budget_source"] = given
            derived["kv_blocks_per_request"] = plan.blocks_per_request
            derived["kv_bytes_per_block"] = plan.bytes_per_block
            derived["kv_groups"] = "; ".join(f"{s.kind} x{s.layers} ({s.groups} group(s), {s.blocks_per_request} "
                                             f"blocks/request)" for s in plan.specs)
            derived["kv_max_in_flight_tokens"] = plan.max_in_flight_tokens
            derived["kv_layer_groups"] = plan.groups_text()
            if plan.hybrid_reason:
                derived["kv_hybrid_manager"] = plan.hybrid_reason
            ctx.note(*plan.notes)
            cross = cross_attention_summary(m, ctx.attention_tp, ctx.layout.kv_element_bytes,
                                            plan.max_num_batched_tokens, plan.block_size, stack.engine_version)
            if cross:  # encoder-decoder (Whisper): the cross-attention cache each request reserves
                derived["kv_cross_attention_layers"] = cross["layers"]
                derived["kv_cross_bytes_per_encoder_token_per_gpu"] = cross["bytes_per_encoder_token_per_gpu"]
                derived["kv_cross_encoder_tokens_per_request"] = cross["encoder_tokens_reserved_per_request"]
                derived["kv_cross_blocks_per_request"] = cross["blocks_per_request"]
                derived["kv_cross_blocks_total_per_request"] = plan.blocks_per_request
    derived.update(eng.model_limits(stack, ns, m, serving_defaults(stack, ns, m)[0]))


def _capacity(ctx: KVContext) -> None:
    """Step 5 (module doc): tokens, blocks, concurrency and the longest request in the engine's pools."""
    budget, plan, derived, ns, eng = ctx.budget, ctx.plan, ctx.derived, ctx.ns, ctx.engine
    if budget is None or not ctx.sized:
        return
    lay, lay_dcp, block = ctx.layout, ctx.layout_dcp, ctx.block_size
    null = eng.null_block_bytes(ctx.stack.engine_version,
                                plan.bytes_per_block if plan else lay_dcp.bytes_per_token_per_gpu * block)
    # max_model_len_effective: the given length, else the engine's default (SGLang: the model's context length)
    cap = kv_capacity(lay_dcp, budget, derived.get("max_model_len_effective"), block, null)  # null block held back
    derived["kv_null_block_bytes"] = round(null)
    cap = eng.capacity(cap, ctx)  # the engine's own pools (SGLang, TensorRT-LLM, LMDeploy)
    derived["kv_block_size"] = block
    derived["kv_budget_bytes_per_gpu"] = round(budget)
    if isinstance(cap, NotEvaluable):  # the engine's pool needs a fact optkg lacks: no token count, not vLLM's
        derived["kv_capacity_not_evaluable"] = cap.reason
        return
    derived["kv_tokens_per_gpu"] = cap.kv_tokens_per_gpu
    derived["kv_tokens_total"] = cap.kv_tokens_total
    pc = None
    if plan is not None:
        # the plan's own numbers: "GPU KV cache size" = int(max_concurrency x max_model_len) (kg.engines.vllm.kv_plan)
        pc = plan.capacity(budget)
        derived["kv_num_blocks"] = pc["num_blocks"]
        derived["kv_tokens_total"] = pc["kv_cache_size_tokens"]
        derived["kv_tokens_per_gpu"] = pc["kv_cache_size_tokens"] if ctx.dcp == 1 else pc["num_blocks"] * plan.block_size
        derived["max_concurrency_at_max_model_len_effective"] = pc["max_concurrency"]
    # what kv_tokens_total multiplies the per-GPU pool by: the DCP group (vLLM "Multiplying the GPU KV cache
    # size by the dcp_world_size", SGLang DCP alike); an engine's data-parallel pools: its capacity_totals
    derived["kv_tokens_total_basis"] = f"x dcp {ctx.dcp}: one pool, its tokens sharded over the DCP group"
    if cap.max_concurrency is not None:
        derived["max_concurrency"] = cap.max_concurrency if pc is None else pc["max_concurrency"]
    eng.capacity_totals(derived, cap, ctx)  # data-parallel pools and engine cores
    from kg.analyses.request_len import add_request_len_facts  # --request-len / --isl + --osl
    add_request_len_facts(derived, ns.get("request_len"), plan, lay_dcp, budget, eng.kv_token_pool,
                          ctx.dp_size if eng.total_counts_every_dp_pool else 1)
    eng.finish_capacity(derived, ctx)  # an engine generation that counts otherwise (vLLM V0: whole blocks)
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


def _auto_fit_max_model_len(ctx: KVContext) -> None:
    """Step 5b: ``--max-model-len auto`` / ``-1`` (vLLM >= 0.14.0, kg.inputs.launch.argv sets ``max_model_len_auto``):
    vLLM keeps the model's length when one request of it fits the KV cache and otherwise lowers max_model_len to the
    longest that fits (0.34.0 v1/core/kv_cache_planning.py:1381-1500 ``_auto_fit_max_model_len``, called at :1647
    when ``original_max_model_len == -1``; 0.14.0 v1/core/kv_cache_utils.py:1389, :1508). The plan and capacity are
    then those of the fitted length. With no memory left for one token vLLM raises ("Cannot auto-fit max_model_len"),
    which kv-budget-exhausted reports: the length is left as is."""
    ns, derived = ctx.ns, ctx.derived
    if not ns.get("max_model_len_auto") or not derived.get("max_model_len_effective"):
        return
    full, fits = int(derived["max_model_len_effective"]), derived.get("max_model_len_that_fits")
    if ctx.budget is None or fits is None:
        derived["max_model_len_source"] = (f"--max-model-len auto: not fitted (no KV budget without a GPU), the "
                                           f"model's {full:,} assumed")
        return
    if int(fits) <= 0 or int(fits) >= full:
        derived["max_model_len_source"] = f"--max-model-len auto: the model's full {full:,} fit in the KV cache"
        return
    ns["max_model_len"] = int(fits)
    derived["max_model_len_effective"] = int(fits)
    _plan(ctx)
    _capacity(ctx)
    derived["max_model_len_source"] = (f"--max-model-len auto: vLLM lowers it from the model's {full:,} to the "
                                       f"longest that fits in the KV cache")


def _hardware_facts(stack: Stack, ns: dict[str, Any], facts: list[dict[str, Any]]) -> None:
    """Step 6 (module doc): the GPU entry's facts and the GPU count."""
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
    # an Intel GPU (vLLM's XPU platform): the generated vLLM rows of that platform's walk read it; False without a
    # GPU, where they read the CUDA / ROCm rows (tools/vllm_generated_checks.py combine)
    ns["gpu_is_xpu"] = str((stack.hardware or {}).get("vendor") or "").lower() == "intel"


def engine_utilization(stack: Stack, ns: dict[str, Any]) -> tuple[float, str]:
    """The engine's memory fraction and its source (the protocol's ``memory_fraction``). Whether the stack gave
    it is the effective configuration's decision (kg.inputs.effective), so the budget, the header and the
    "Effective configuration" section show one value."""
    return of(stack).memory_fraction(stack, ns)


def serving_defaults(stack: Stack, ns: dict[str, Any], m=None) -> tuple[int, int]:
    """max_num_batched_tokens and max_num_seqs the engine runs with (given, else the engine's default for the GPU,
    ``vllm serve``'s for most: vLLM 0.33.0 engine/arg_utils.py:2970-3006; an encoder-decoder ``m`` without chunked
    prefill: kg.derive.encoder_cache.encoder_decoder_batched_tokens)."""
    eng = of(stack)
    mnbt = ns.get("max_num_batched_tokens") or eng.default_max_num_batched_tokens(stack.hardware or {})
    seqs = ns.get("max_num_seqs") or eng.default_max_num_seqs(stack.hardware or {}, int(mnbt))
    mml = ns.get("max_model_len") or (m.vllm_default_max_model_len if m is not None else None)
    from kg.inputs.effective import setting_given
    if m is not None and m.is_encoder_decoder and mml and not setting_given(stack, "max_num_batched_tokens"):
        from kg.derive.encoder_cache import encoder_decoder_batched_tokens
        mnbt = encoder_decoder_batched_tokens(int(mnbt), int(mml), int(seqs))
    return int(mnbt), int(seqs)


def stack_draft(stack: Stack, ns: dict[str, Any], m, tp: int, kvdt: str):
    """The speculative-decoding draft of the stack (kg.derive.drafts), or None; an unresolvable draft is a note."""
    from pathlib import Path

    from kg.derive.drafts import draft_facts
    from kg.inputs.modelcfg import config_dict, resolve_model
    method, name = ns.get("speculative_method"), ns.get("speculative_model")
    if not method and not name:
        return None
    base = None
    if stack.source:
        src = Path(stack.source)
        base = src if src.is_dir() else src.parent

    def resolver(x: str):
        if base is not None and not Path(x).expanduser().exists() and (base / x).exists():
            return resolve_model(str(base / x))
        return resolve_model(x)
    if name and str(name).startswith(("/", "./", "../", "~")):
        # a local path the engine would open: missing is the user's input error, not a draft optkg cannot size
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
                 tp: int, draft_weights: float = 0.0, kv_bytes_per_block: float | None = None):
    """The KV budget breakdown (kg.derive.budget.ServingBudget) the stack's engine makes (its ``budget``)."""
    mnbt, seqs = serving_defaults(stack, ns, m)
    moe_tp = tp
    if "expert-parallelism" in stack.techniques:
        ep = int(ns.get("ep_size") or 1)
        moe_tp = max(1, tp // ep) if ep > 1 else 1
    lora, lora_note = of(stack).lora_slot_bytes(m, tp, ns)  # vLLM --enable-lora: adapter slots at start-up
    if lora_note and lora_note not in stack.notes:
        stack.notes.append(lora_note)
    sb = _engine_budget(of(stack), BudgetInputs(
        stack.engine, mem, util, util_source, weights, m, tp, mnbt, seqs, bool(ns.get("enforce_eager")), moe_tp,
        draft_weight_bytes=draft_weights, lora_slot_bytes=lora, engine_version=stack.engine_version, max_model_len=ns.get("max_model_len"),
        limit_mm_per_prompt=ns.get("limit_mm_per_prompt"), language_model_only=bool(ns.get("language_model_only")),
        kv_bytes_per_block=kv_bytes_per_block, backend=of(stack).backend(stack, ns),
        kv_sizing=of(stack).kv_sizing(stack, ns)))
    stack.notes.extend(n for n in sb.encoder_notes if n not in stack.notes)  # kg.derive.encoder_cache
    return sb


_BUDGET_FIELDS: tuple[str, ...] = ()


def _engine_budget(eng: Engine, inp: BudgetInputs):
    """``eng.budget(inp)``; in a sweep (kg.engine.incremental) once per engine and inputs (the model by identity,
    the rest by value: the budget reads nothing else). Its result is only read: the caller copies the lines it keeps.
    A 2,048-stack sweep over TP x DCP x KV dtype has ~130 distinct inputs (the weights follow TP, a KV block the
    layout)."""
    from kg.engine.incremental import current, freeze
    session = current()
    if session is None:
        return eng.budget(inp)
    global _BUDGET_FIELDS
    if not _BUDGET_FIELDS:
        from dataclasses import fields
        _BUDGET_FIELDS = tuple(f.name for f in fields(BudgetInputs) if f.name != "model")
    memo = session.extra.get("budgets")
    if memo is None:
        from kg.engine.incremental import Memo
        memo = session.extra["budgets"] = Memo(4096)
    key = (id(eng), id(inp.model), *[freeze(getattr(inp, n)) for n in _BUDGET_FIELDS])
    hit = memo.get(key)
    if hit is None:
        session.kept.setdefault(id(eng), eng)  # both kept: their ids are not reused meanwhile
        session.kept.setdefault(id(inp.model), inp.model)
        hit = memo.put(key, eng.budget(inp))
    return hit


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
    - ``engine_uses_v0``: the engine's legacy generation (vLLM V0: VLLM_USE_V1=0, or a version below 0.8.0).
    - ``gpus_required`` (the engine's ``world_size``) and the defaults of settings the rules compare: the flag
      table's, then the engine's own (``engine_facts`` of its protocol: vLLM's V1 attention backend before 0.8.0
      and ``all2all_backend``, SGLang's ``moe_a2a_backend``).
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
    eng = of(stack)
    out["engine_uses_v0"] = eng.uses_v0(stack.engine_version, ns)
    out["has_kv_connector"] = "kv-cache-connector" in techs
    # bytes per weight element as stored: kg.derive.weights (stack_facts puts it in ns); scales included
    # GPUs the launch needs: vLLM world size PP x TP x PCP per data-parallel rank, times DP
    # (ParallelConfig, facts §2.1); SGLang TP x PP, times DP unless DP attention splits the TP group
    # (ServerArgs._handle_data_parallelism: dp_size divides tp_size there)
    pp, pcp = int(ns.get("pp_size") or 1), int(ns.get("pcp_size") or 1)
    out["gpus_required"] = eng.world_size(tp, pp, pcp, dp, techs)
    if ns.get("allow_long_max_model_len") is None:
        out["allow_long_max_model_len"] = False
    # engine defaults for settings the rules compare (when the stack does not set them)
    for key, default in (("enable_dbo", False), ("calculate_kv_scales", False), ("kv_sharing_fast_prefill", False),
                         ("disable_sliding_window", False), ("enforce_eager", False),
                         ("enable_return_routed_experts", False), ("async_scheduling", False)):
        if ns.get(key) is None:
            out[key] = default
    # the flag table's defaults for options the stack does not give, and flags given with their JSON twin
    for key, default in _option_facts(stack).items():
        if ns.get(key) is None:
            out[key] = default
    eng.engine_facts(stack, ns, out)  # the engine's own (vLLM all2all_backend, SGLang moe_a2a_backend ...)
    for key, default in flag_defaults(stack.engine).items():  # `default:` of the engine's flag entries
        if ns.get(key) is None and key not in out:
            out[key] = default
    return out


def _option_facts(stack: Stack) -> dict[str, Any]:
    """kg.inputs.optiondefaults.option_facts of the stack's engine, release and settings. It reads the settings by
    name only, so in a sweep its result is kept per (engine, release, flag table) for the values of the settings it
    read (kg.engine.incremental.Session.call)."""
    from kg.engine.incremental import current
    from kg.inputs.optiondefaults import option_facts
    engine, version = stack.engine, stack.engine_version
    session = current()
    if session is None:
        return option_facts(engine, version, stack.settings)
    from kg.inputs.stack import _engine_tables
    table = _engine_tables().get(engine or "")
    return session.call(lambda settings: option_facts(engine, version, settings), stack.settings,
                        key=(option_facts, engine, version, id(table)), keep=(table,),
                        fresh=("options_given_twice",))  # the rest are the table's or the settings' own values


def _exact_div(a: int, b: int) -> int | float:
    """a / b as an int when it divides exactly, else the float quotient (e.g. 29568 / 2 = 14784, 1536 / 8 = 192)."""
    q = a / b
    return int(q) if q == int(q) else q
