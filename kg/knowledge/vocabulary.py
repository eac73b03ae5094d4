"""The names a stack carries besides technique parameters, which coupling conditions and rules may read.

``BASE_SETTINGS``: engine settings that are not technique parameters, name -> (JSON type, description;
units in the name). ``PARALLEL_DEFAULTS``: the parallel sizes and their defaults. ``MODEL_FACT_NAMES``:
the model facts (fields and properties of ``kg.inputs.modelcfg.ModelFacts``; tests/test_architecture.py
checks the two agree).

They live here, below the stack model (kg.inputs.stack), because catalog validation
(kg.knowledge.crosschecks) needs them to tell a known fact name from a typo, and the knowledge layer
may not import the inputs layer.
"""
from __future__ import annotations

# Settings that are not technique parameters: name -> (type, description). Units in names.
BASE_SETTINGS: dict[str, tuple[str, str]] = {
    "max_model_len": ("integer", "longest request context, tokens"),
    "gpu_memory_utilization": ("number", "fraction of GPU memory the engine may use (vLLM; SGLang mem_fraction_static)"),
    "block_size": ("integer", "KV-cache block/page size, tokens"),
    "kv_cache_dtype": ("string", "KV-cache element type: auto, fp8, fp8_e4m3, fp8_e5m2, int8"),
    "swa_full_tokens_ratio": ("number", "SGLang --swa-full-tokens-ratio: SWA-pool tokens per full-pool token (default 0.8)"),
    "disable_hybrid_swa_memory": ("boolean", "SGLang --disable-hybrid-swa-memory: one pool for every layer"),
    "mamba_cache_dtype": ("string", "Mamba / GDN conv-state dtype (vLLM --mamba-cache-dtype): auto, float32, bfloat16, float16"),
    "mamba_ssm_cache_dtype": ("string", "Mamba / GDN SSM-state dtype (vLLM --mamba-ssm-cache-dtype): auto, float32, bfloat16, float16"),
    "attention_backend": ("string", "attention kernel backend name"),
    "quantization": ("string", "weight quantization method"),
    "max_num_batched_tokens": ("integer", "tokens per scheduler step"),
    "max_num_seqs": ("integer", "max concurrent sequences"),
    "kv_budget_gib": ("number", "KV-cache memory per GPU, GiB (as logged by the engine); overrides the estimate"),
    "enforce_eager": ("boolean", "disable CUDA graphs"),
    "dtype": ("string", "model dtype override"),
    "nnodes": ("integer", "nodes the engine spans (vLLM/SGLang --nnodes)"),
    "gpus_per_node": ("integer", "GPUs in one node (one NVLink domain), when the node count does not say"),
    # named by catalog/techniques/gang-scheduling.yaml; known here so gpus_per_node is not offered as its typo fix
    "gpus_per_pod": ("integer", "GPUs one pod of a gang-scheduled job requests"),
    "expert_dtype": ("string", "stored dtype of the MoE expert weights when it differs from the rest (fp4, mxfp4, fp8, int4)"),
    "kv_connector": ("string", "KV connector name (LMCache, NixlConnector, ...)"),
    "kv_role": ("string", "KV connector role"),
    "speculative_method": ("string", "speculative decoding method (eagle, eagle3, mtp, ngram, draft_model, ...)"),
    "speculative_model": ("string", "draft model"),
    "num_speculative_tokens": ("integer", "draft tokens per step"),
    "draft_tp_size": ("integer", "tensor-parallel size of the draft model"),
    "cp_kv_cache_interleave_size": ("integer", "DCP interleave, tokens"),
    "enable_prefix_caching": ("boolean", "prefix caching on"),
    "enable_chunked_prefill": ("boolean", "chunked prefill on"),
    "enable_lora": ("boolean", "LoRA adapters on"),
    "enable_expert_parallel": ("boolean", "expert parallelism on"),
    "enable_eplb": ("boolean", "expert load balancer on"),
    "enable_dp_attention": ("boolean", "SGLang DP attention on"),
    "enable_hierarchical_cache": ("boolean", "SGLang host KV cache tier on"),
    "disable_sliding_window": ("boolean", "treat sliding-window layers as full attention"),
    "flash_attn_version": ("integer", "FlashAttention major version (2, 3, 4)"),
    "vllm_use_v1": ("integer", "VLLM_USE_V1"),
    "swap_space_gib": ("number", "CPU swap space per GPU, GiB"),
    "kv_offloading_size": ("number", "host KV offload size, GiB"),
    "chunked_prefill_size": ("integer", "SGLang chunked prefill size, tokens"),
    "speculative_eagle_topk": ("integer", "EAGLE top-k"),
    "lora_paths": ("string", "LoRA adapter paths"),
    "disaggregation_mode": ("string", "prefill/decode disaggregation role"),
    "speculative_config": ("object", "vLLM --speculative-config JSON"),
    "kv_transfer_config": ("object", "vLLM --kv-transfer-config JSON"),
    "pcp_size": ("integer", "prefill context parallel size"),
    "kv_cache_reuse": ("boolean", "TensorRT-LLM KV block reuse (prefix caching)"),
    "model": ("string", "model id"),
    # engine settings read by rules/engine_constraints.yaml, quantization.yaml, features.yaml
    "dcp_comm_backend": ("string", "vLLM DCP communication backend: ag_rs or a2a"),
    "host_memory_gib": ("number", "CPU RAM of the host, GiB (vLLM checks swap_space x tp_size against it)"),
    "enable_dbo": ("boolean", "vLLM dual-batch overlap (micro-batching) on"),
    "all2all_backend": ("string", "MoE all-to-all backend (vLLM --all2all-backend)"),
    "num_redundant_experts": ("integer", "redundant experts kept by the expert load balancer"),
    "kv_sharing_fast_prefill": ("boolean", "vLLM KV-sharing fast prefill on"),
    "calculate_kv_scales": ("boolean", "estimate FP8 KV scales at run time"),
    "pytorch_cuda_alloc_conf": ("string", "PYTORCH_CUDA_ALLOC_CONF environment value"),
    "moe_a2a_backend": ("string", "SGLang MoE all-to-all backend (none, deepep, mooncake, ...)"),
    "deepep_mode": ("string", "SGLang DeepEP mode: auto, normal, low_latency"),
    "moe_runner_backend": ("string", "SGLang MoE kernel backend (auto, triton, flashinfer_cutlass, cutlass, ...)"),
    "enable_sequence_parallelism": ("boolean", "vLLM sequence-parallelism compile pass on"),
    "eplb_config": ("object", "vLLM --eplb-config JSON"),
    "speculative_num_draft_tokens": ("integer", "SGLang draft tokens verified per step"),
    "enable_return_routed_experts": ("boolean", "vLLM returns the routed expert ids per token"),
    "max_num_partial_prefills": ("integer", "vLLM concurrent partial prefills"),
    "async_scheduling": ("boolean", "vLLM asynchronous scheduling on"),
    # read by the runtime-failure rules (rules/runtime_failures_*.yaml) and kg.inputs.support_ns
    "max_lora_rank": ("integer", "largest LoRA rank the engine preallocates for (vLLM --max-lora-rank)"),
    "lora_adapter_rank": ("integer", "largest rank r of the LoRA adapters served (adapter_config.json r)"),
    "num_scheduler_steps": ("integer", "vLLM V0 multi-step scheduling: forward steps per scheduler call"),
    "structured_outputs_backend": ("string", "structured-output (guided decoding) backend: xgrammar, guidance, outlines, ..."),
    "kv_cache_type": ("string", "TensorRT-LLM trtllm-build --kv_cache_type: paged, continuous or disabled"),
    "disable_cascade_attn": ("boolean", "vLLM --disable-cascade-attn (V1 cascade attention off)"),
    "sglang_enable_spec_v2": ("boolean", "SGLANG_ENABLE_SPEC_V2 set: SGLang overlap speculative decoding (spec v2)"),
    "distributed_executor_backend": ("string", "vLLM --distributed-executor-backend: mp, ray, uni, external_launcher"),
    "allow_long_max_model_len": ("boolean", "VLLM_ALLOW_LONG_MAX_MODEL_LEN / SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN set"),
}
PARALLEL_DEFAULTS = {"tp_size": 1, "pp_size": 1, "dp_size": 1, "dcp_size": 1, "pcp_size": 1, "ep_size": 1}

MODEL_FACT_NAMES: tuple[str, ...] = (
    "name", "model_type", "num_attention_heads", "num_key_value_heads", "head_dim", "v_head_dim",
    "hidden_size", "num_hidden_layers", "dtype", "dtype_bytes", "is_mla", "kv_lora_rank", "qk_rope_head_dim",
    "sliding_window", "num_sliding_layers", "num_full_layers", "intermediate_size", "moe_intermediate_size",
    "shared_expert_intermediate_size", "num_experts", "num_experts_per_tok", "quant_method", "weight_block_size",
    "quant_group_size", "quant_bits", "checkpoint_kv_scales", "num_moe_layers", "max_position_embeddings",
    "vocab_size", "expert_intermediate_size", "dense_intermediate_size", "tie_word_embeddings", "q_lora_rank",
    "qk_nope_head_dim", "quant_modules_not_converted", "derived_max_model_len", "sglang_context_length",
    "source", "warnings",
    "attention_chunk_size", "index_head_dim", "num_nextn_predict_layers", "layer_kinds", "linear_attention",
    "quantization_config", "quantization_config_source", "vllm_default_max_model_len",
    # vision tower of a multimodal config (kg.inputs.vision)
    "vision_model_type", "vision_num_attention_heads", "vision_hidden_size", "vision_num_hidden_layers",
    "vision_tp_split",
    # read by the runtime-failure rules (kg.inputs.support_ns)
    "architecture", "attn_logit_softcapping",
    # properties
    "attention", "is_moe",
)
