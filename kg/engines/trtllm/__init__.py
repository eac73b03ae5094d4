"""TensorRT-LLM (``trtllm-serve``, its LLM-API YAML): what optkg knows about it, behind the engine protocol.

Data: ``catalog/engines/trtllm.yaml`` (click options of ``trtllm-serve serve`` and the LLM-API keys optkg models).
Modules: ``launch`` (the command with its ``--extra_llm_api_options`` / ``--config`` YAML, and an LLM-API YAML
read on its own), ``budget`` (its cache as a fraction of the memory free after the profiling run), ``kv`` (that
memory in tokens_per_block blocks, or not evaluable).
"""
from __future__ import annotations

from typing import Any

from kg.engines.base import Engine, NotEvaluable, SpeedBackend, dp_pool_totals


class TensorRTLLM(Engine):
    name = "trtllm"
    decode_context_parallel = False
    keeps_null_block = False
    kv_command = False  # its pool is not vLLM's plan: `optkg kv` refuses it, check reports it (kv.py)
    title = "TensorRT-LLM"
    fraction_given_source = ("given (--kv_cache_free_gpu_memory_fraction / --free_gpu_memory_fraction / "
                             "kv_cache_config.free_gpu_memory_fraction): a fraction of the memory free after loading")
    fraction_table_source = ("trtllm default free_gpu_memory_fraction (catalog/engines/trtllm.yaml defaults: serve.py "
                             "--kv_cache_free_gpu_memory_fraction default=0.9), a fraction of the memory free after loading")

    # ---- launch
    def read_launch(self, launch: Any) -> Any:
        """The flags, then the LLM-API YAML the command names over them (kg.engines.trtllm.launch)."""
        from kg.engines.trtllm.launch import read_launch
        return read_launch(launch)

    def file_formats(self) -> list[Any]:
        """The LLM-API YAML on its own (``optkg check extra.yaml``)."""
        from kg.engines.trtllm.launch import LLM_API_FILE
        return [LLM_API_FILE]

    # ---- defaults and budget
    def default_max_num_batched_tokens(self, hardware: dict[str, Any]) -> int:
        """``BuildConfig.max_num_tokens``: 8,192."""
        return 8192

    def weight_share_bytes(self, total_memory_bytes: float, fraction: float) -> float:
        """The whole device: its fraction is of the memory left after loading (kg.engines.trtllm.budget)."""
        return float(total_memory_bytes)

    def expert_shards(self, stack: Any, ns: dict[str, Any], tp: int) -> int:
        """The TP size, whatever ``--ep_size`` says: the MoE layers split the TP group into ``moe_tp_size x
        moe_ep_size x moe_cluster_size == tp_size``, and an EP size alone leaves ``moe_tp_size = tp_size //
        moe_ep_size`` (so ``--tp_size 4 --ep_size 2`` splits each expert 2 ways and the experts 2 ways: 4).
        NVIDIA/TensorRT-LLM tensorrt_llm/mapping.py:138-146, 175-181 (``Mapping.__init__``) at 05ebebb2 (the
        stored snapshot; the wheels cannot be fetched here, release not pinned)."""
        return tp

    def budget(self, inp: Any) -> Any:
        from kg.engines.trtllm.budget import budget
        return budget(inp)

    # ---- KV pool: tokens_per_block blocks of the budget, no vLLM plan (kg.engines.trtllm.kv)
    def kv_plan(self, stack: Any, ns: dict[str, Any], model: Any, tp: int, pp: int, dcp: int, kv_cache_dtype: str,
                max_model_len: int, max_num_batched_tokens: int, draft_layers: int = 0) -> Any:
        """None: TensorRT-LLM sizes its pool from max_tokens in tokens_per_block blocks (``capacity``), not by
        vLLM's per-layer plan."""
        return None

    def capacity(self, cap: Any, ctx: Any) -> Any:
        """TensorRT-LLM's pool (kg.engines.trtllm.kv.pool), or ``NotEvaluable`` with the fact it lacks."""
        from kg.engines.trtllm.kv import caps_given, not_evaluable, pool
        chunked = ctx.ns.get("enable_chunked_prefill")
        reason = not_evaluable(ctx.model, ctx.attention_tp, ctx.kv_cache_dtype, "prefix-caching" in ctx.stack.techniques,
                               None if chunked is None else bool(chunked))
        given = caps_given(ctx.stack)
        if reason or given:
            return NotEvaluable(reason or f"TensorRT-LLM's pool under {given} (a cap optkg does not read)")
        per_token = ctx.layout_dcp.bytes_per_token_per_gpu + float(ctx.derived.get("draft_kv_bytes_per_token_per_gpu")
                                                                   or 0)
        return pool(ctx.budget, per_token, ctx.block_size, ctx.derived.get("max_model_len_effective"), ctx.derived)

    # ---- attention DP: every rank runs attention whole on its own requests
    total_counts_every_dp_pool = True  # kv_tokens_total counts every attention-DP rank's pool

    def dp_attention_splits_tp(self, techniques: Any) -> bool:
        """``enable_attention_dp`` runs the attention of the TP group's ranks data-parallel: no extra GPUs."""
        return "dp-attention" in techniques

    def attention_dp_size(self, stack: Any, ns: dict[str, Any], tp: int, dp: int) -> int:
        """``enable_attention_dp``: one attention rank per GPU of the TP group, so the DP size is ``tp_size`` and the
        KV cache manager sizes every layer's heads at TP 1 (each rank caches its own requests, all heads):
        ``KVCacheManager.__init__`` ``tp_size = mapping.tp_size; if mapping.enable_attention_dp: tp_size = 1``
        (NVIDIA/TensorRT-LLM tensorrt_llm/_torch/pyexecutor/resource_manager.py at 001541ba, the stored snapshot;
        ``Mapping.dp_size`` = tp_size with attention DP)."""
        return tp if "dp-attention" in stack.techniques or ns.get("enable_dp_attention") else dp

    def capacity_totals(self, derived: dict[str, Any], cap: Any, ctx: Any) -> None:
        """Attention DP: ``tp_size`` ranks, each with its own KV pool and requests; the total counts every pool and
        the server holds ``tp_size`` times one rank's concurrency."""
        dp_pool_totals(derived, cap, ctx.dp_size, "one pool per attention-DP rank")

    # ---- speed
    def speed_backend(self, stack: Any) -> SpeedBackend:
        """aiconfigurator-core's ``trtllm`` backend (sdk/backends/factory.py at 0.12.0); ``release``: the stack's
        TensorRT-LLM release, which kg.speed maps to the nearest release the estimator's database has."""
        return SpeedBackend("trtllm", getattr(stack, "engine_version", None) or "",
                            "aiconfigurator-core backend 'trtllm' (sdk/backends/trtllm_backend.py)")


ENGINE = TensorRTLLM()
