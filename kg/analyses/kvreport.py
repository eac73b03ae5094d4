"""The KV-cache report of a model at a parallel layout: what ``optkg kv --format json`` prints and
``kg.kv`` returns (the command prints its text form from the same numbers).

Formulas and sources: kg.derive.kv (layout, capacity) and kg.engines.vllm.kv_plan (vLLM V1's per-layer plan).
"""
from __future__ import annotations

from typing import Any

from kg.core.errors import OptkgError
from kg.derive.kv import GIB, check_parallel_sizes, kv_capacity, kv_layout
from kg.derive.encoder_cache import cross_attention_summary, longest_decoder_request
from kg.engines.vllm.kv_plan import null_block_bytes, plan_kv_cache
from kg.inputs.modelcfg import VLLM_NO_LENGTH_KEY_DEFAULT


def kv_report(model, tp: int = 1, pp: int = 1, dcp: int = 1, kv_cache_dtype: str = "auto",
              kv_budget_gib: float | None = None, max_model_len: int | None = None, block_size: int | None = None,
              max_num_batched_tokens: int | None = None, mamba_ssm_cache_dtype: str | None = None,
              gpu_compute_capability: float | None = None, engine_version: str | None = None,
              disable_hybrid_kv_cache_manager: bool | None = None) -> tuple[dict[str, Any], Any, Any]:
    """(report dict, ``KVLayout``, vLLM plan or None) for ``model`` (ModelFacts) at ``tp``/``pp``/``dcp``.

    ``kv_budget_gib``: KV memory per GPU in GiB (adds ``capacity``); ``max_model_len`` tokens per
    request; ``block_size`` tokens per KV block (None: vLLM's choice for the model); ``max_num_batched_tokens``
    tokens per scheduler step; ``mamba_ssm_cache_dtype`` the SSM-state dtype of Mamba / GDN layers and
    ``gpu_compute_capability`` the GPU's; ``engine_version`` the vLLM release (None: the latest optkg knows) and
    ``disable_hybrid_kv_cache_manager`` vLLM's flag (True / False / None), which decide the hybrid KV-cache
    manager and the tokens in flight (kg.engines.vllm.kv_plan.plan_kv_cache). Raises OptkgError when tp does not divide the heads, pp exceeds the
    layers or dcp is not valid at this tp.
    """
    check_parallel_sizes(model, tp, pp)  # tp must divide the heads, pp <= layers (exit 2 otherwise)
    base = kv_layout(model, tp, pp, 1, kv_cache_dtype)
    if dcp > 1 and dcp not in base.valid_dcp_sizes:
        raise OptkgError(f"--dcp: {dcp} is not valid for this model at tp {tp} (valid: {base.valid_dcp_sizes})")
    lay = kv_layout(model, tp, pp, dcp, kv_cache_dtype)
    out = {"schema_version": "1.0", "kind": "kv", "model": model.name, "attention": model.attention,
           "num_attention_heads": model.num_attention_heads, "num_key_value_heads": model.num_key_value_heads,
           "head_dim": model.head_dim, "num_hidden_layers": model.num_hidden_layers, "layout": lay.to_dict()}
    if model.is_mla:
        out["kv_lora_rank"], out["qk_rope_head_dim"] = model.kv_lora_rank, model.qk_rope_head_dim
    if model.warnings:
        out["notes"] = list(model.warnings)
    limit = model.derived_max_model_len
    if limit is not None:
        out["max_model_len_limit"] = int(limit)
    else:
        out.setdefault("notes", []).append(
            "config.json names none of the length keys vLLM reads (max_position_embeddings, n_positions, ...): "
            f"vLLM runs with max_model_len {VLLM_NO_LENGTH_KEY_DEFAULT:,} and a warning, and accepts any --max-model-len "
            "(vllm 0.34.0 config/model.py:2633, _get_and_verify_max_len)")
    if max_model_len and limit and max_model_len > limit:
        # the rule `optkg check` fires for the same stack (rules/capacity.yaml)
        out["warnings"] = [{"rule_id": "max-model-len-exceeds-max-position-embeddings", "message": (
            f"max_model_len {max_model_len:,} is above the {int(limit):,} tokens vLLM derives from the model config "
            "(max_position_embeddings and its RoPE scaling): vLLM refuses to start unless "
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (vllm 0.33.0 config/model.py:2657-2683, _get_and_verify_max_len)")}]
    plan = None
    try:
        if block_size is None:  # the release's default block (16; 64 from vLLM 0.34.0), as check uses
            from kg.inputs.effective import default_block_size, latest_release
            block_size = default_block_size("vllm", engine_version or latest_release("vllm"))
        plan = plan_kv_cache(model, tp, pp, dcp, kv_cache_dtype, max_model_len,
                             block_size, max_num_batched_tokens, gpu_compute_capability=gpu_compute_capability,
                             mamba_ssm_cache_dtype=mamba_ssm_cache_dtype, engine_version=engine_version,
                             hybrid_allocator=None if disable_hybrid_kv_cache_manager is None
                             else not disable_hybrid_kv_cache_manager)
    except OptkgError as e:
        out.setdefault("notes", []).append(f"no vLLM KV plan: {e}")
    if plan is not None:
        out["vllm_plan"] = plan.to_dict()
        out.setdefault("notes", []).extend(plan.notes)
        cross = cross_attention_summary(model, tp, lay.kv_element_bytes, plan.max_num_batched_tokens, plan.block_size)
        if cross:
            out["cross_attention"] = cross
    if kv_budget_gib is not None:
        block = plan.block_size if plan is not None else (block_size or 16)
        # the longest request vLLM (latest release) accepts: the budget less the null block (kg.engines.vllm.kv_plan)
        null = null_block_bytes(engine_version,
                                plan.bytes_per_block if plan is not None else lay.bytes_per_token_per_gpu * block)
        cap = kv_capacity(lay, kv_budget_gib * GIB, max_model_len, block, null).to_dict()
        if plan is not None:
            # vLLM V1's numbers (kg.engines.vllm.kv_plan): blocks, concurrency, "GPU KV cache size"
            pc = plan.capacity(kv_budget_gib * GIB)
            cap.update({"num_blocks": pc["num_blocks"], "blocks_per_request": plan.blocks_per_request,
                        "gpu_kv_cache_size_tokens": pc["kv_cache_size_tokens"]})
            if max_model_len:
                cap["max_concurrency"] = pc["max_concurrency"]
            if dcp == 1:
                cap["kv_tokens_per_gpu"] = cap["kv_tokens_total"] = pc["kv_cache_size_tokens"]
            if out.get("cross_attention"):  # a decoder request shares the pool with its cross-attention blocks
                cap["max_model_len_that_fits"] = longest_decoder_request(
                    plan.bytes_per_block, plan.blocks_per_request, out["cross_attention"]["blocks_per_request"],
                    plan.block_size, kv_budget_gib * GIB, null)
            elif plan.window_bounded():
                cap["max_model_len_that_fits"] = plan.longest_request(kv_budget_gib * GIB - null)
        out["capacity"] = cap
    return out, lay, plan


def engine_default_budget(engine: Any, model, hardware: dict[str, Any], tp: int, pp: int, catalog: Any,
                          engine_version: str | None):
    """The ServingBudget ``optkg check`` derives for ``engine``'s default launch of ``model`` at ``tp`` x ``pp`` on
    ``hardware`` (the engine protocol's ``default_launch_command``): the command goes through the engine's flag table,
    its release defaults (kg.inputs.effective) and check's stack facts, so ``optkg kv --engine sglang --gpu`` and
    ``check --sglang`` agree. None when the engine has no such command (vLLM: kg.engines.vllm.budget.gpu_default_budget).
    Raises OptkgError when the stack has no budget."""
    cmd = engine.default_launch_command(str(model.name or "model"), tp, pp)
    if cmd is None:
        return None
    from kg.analyses.stackfacts import stack_facts
    from kg.derive.budget import BudgetLine, ServingBudget
    from kg.engines.launch import parse_command
    from kg.inputs.effective import effective_configuration
    st = parse_command(cmd, catalog, engine.name, None, "kv", resolver=lambda _name: model)
    st.model, st.hardware, st.gpu_count = model, dict(hardware), tp * pp
    if engine_version is not None:
        st.engine_version, st.engine_version_assumed = engine_version, False
    effective_configuration(st, engine.release_facts)
    _facts, ns = stack_facts(st)
    rows = ns.get("kv_budget_breakdown")
    if not rows:
        raise OptkgError(f"kv: no {engine.name} KV budget for {model.name} at tp {tp} x pp {pp} on "
                         f"{hardware.get('id')} ({'; '.join(st.notes) or 'see optkg check'})")
    return ServingBudget(engine.name, float(ns["kv_budget_gpu_memory_utilization"]),
                         str(ns["kv_budget_utilization_source"]), [BudgetLine(**r) for r in rows],
                         float(ns["kv_budget_bytes_per_gpu"]), float(ns.get("kv_budget_error_bytes") or 0.0))
