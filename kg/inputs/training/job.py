"""A training job: framework, model shape, parallel layout, precision, memory savers, batch sizes.

Every framework reader (``megatron``, ``deepspeed``, ``hf``, ``torchtitan``, ``stackfile``) turns
its own input into one ``TrainingJob`` with settings under the canonical names of ``SETTINGS``
(name -> (type, description, unit)). Canonical names follow Megatron-core's
``ModelParallelConfig``/``TransformerConfig`` where the field has one (``tp_size`` =
``tensor_model_parallel_size`` ...). Values are checked here once: a bad one is an OptkgError
naming where it came from (``file:line``, ``--flag``) and what was expected.

Model shape (``shape()``): the Megatron names (``num_layers``, ``hidden_size``,
``ffn_hidden_size``, ``num_attention_heads``, ``num_query_groups``, ``kv_channels``,
``vocab_size``) come from the framework's own arguments when given, else from the HF config
(``num_hidden_layers``, ``intermediate_size``, ``num_key_value_heads``, ``head_dim``), as
Megatron's ``--num-layers/--hidden-size/...`` win over a checkpoint's config.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kg.core.errors import OptkgError
from kg.inputs.modelcfg import ModelFacts

# name -> (type, description). Types: integer, number, boolean, string, or a tuple of allowed strings.
SETTINGS: dict[str, tuple[Any, str]] = {
    # parallel layout
    "tp_size": ("integer", "tensor-parallel size (Megatron tensor_model_parallel_size)"),
    "pp_size": ("integer", "pipeline-parallel size (stages)"),
    "vpp_size": ("integer", "virtual pipeline stages (model chunks) per pipeline rank; interleaved 1F1B when > 1"),
    "layers_per_virtual_stage": ("integer", "Megatron --num-layers-per-virtual-pipeline-stage"),
    "num_layers_in_first_pipeline_stage": ("integer", "uneven pipeline: layers on the first stage"),
    "num_layers_in_last_pipeline_stage": ("integer", "uneven pipeline: layers on the last stage"),
    "dp_size": ("integer", "data-parallel size (replicas); derived from world_size when not given"),
    "cp_size": ("integer", "context-parallel size (sequence split across ranks)"),
    "ep_size": ("integer", "expert-parallel size"),
    "etp_size": ("integer", "expert tensor-parallel size (Megatron default: tp_size)"),
    "sequence_parallel": ("boolean", "Megatron sequence parallelism (shards LayerNorm/dropout activations over TP)"),
    "world_size": ("integer", "GPUs in the job"),
    "gpus_per_node": ("integer", "GPUs per node"),
    "num_nodes": ("integer", "nodes"),
    "pipeline_engine": ("boolean", "DeepSpeed PipelineModule / PipelineEngine in use"),
    # sharding and offload
    "zero_stage": ("integer", "DeepSpeed ZeRO stage 0-3"),
    "distributed_optimizer": ("boolean", "Megatron --use-distributed-optimizer (optimizer states sharded over DP)"),
    "fsdp_sharding": (("full_shard", "hybrid_shard", "shard_grad_op", "hybrid_shard_zero2", "no_shard"),
                      "FSDP sharding strategy"),
    "fsdp_version": ("integer", "FSDP 1 or 2 (fully_shard)"),
    "dp_shard_size": ("integer", "FSDP2/torchtitan data_parallel_shard_degree (sharding group size)"),
    "dp_replicate_size": ("integer", "FSDP2/torchtitan data_parallel_replicate_degree"),
    "use_orig_params": ("boolean", "FSDP1 use_orig_params"),
    "fsdp_auto_wrap_policy": ("string", "accelerate FSDP plugin auto-wrap policy name (fsdp_config.fsdp_auto_wrap_policy)"),
    "offload_optimizer": (("none", "cpu", "nvme"), "optimizer states (and fp32 master weights) offloaded"),
    "offload_param": (("none", "cpu", "nvme"), "parameters offloaded (ZeRO-3 / FSDP cpu_offload)"),
    "optimizer": ("string", "optimizer name (adam, adamw, sgd, adafactor, lion, muon, ...)"),
    "optimizer_source": (("config", "client"), "DeepSpeed: optimizer built from the ds_config `optimizer` section, or passed in by the script (client)"),
    # precision
    "params_dtype": (("bf16", "fp16", "fp32"), "training precision of weights and activations"),
    "fp8": ("boolean", "FP8 training (Transformer Engine / torchao float8)"),
    "fp8_format": ("string", "FP8 recipe format (e4m3, hybrid, ...)"),
    "grad_dtype": (("bf16", "fp16", "fp32"), "gradient buffer precision (Megatron main_grad: fp32)"),
    # memory savers
    "recompute_granularity": (("none", "selective", "full"), "activation recomputation (Korthikanti et al. 2022)"),
    "recompute_num_layers": ("integer", "Megatron --recompute-num-layers"),
    "use_reentrant": ("boolean", "torch.utils.checkpoint use_reentrant"),
    "use_flash_attn": ("boolean", "fused/flash attention (no s x s score activations stored)"),
    "peft": ("string", "parameter-efficient fine-tuning method (lora, qlora, ...)"),
    "weight_quantization": (("none", "bnb-4bit", "bnb-8bit"), "base weights loaded quantised (bitsandbytes 4-bit / 8-bit)"),
    "packing": ("boolean", "several samples packed into one sequence (TRL packing, NeMo sequence_packing)"),
    "fp8_recipe": ("string", "FP8 scaling recipe (delayed, tensorwise, rowwise, blockwise, mxfp8)"),
    "ac_memory_budget": ("boolean", "torchtitan activation_checkpoint.mode memory_budget (torch.compile picks what to "
                                    "recompute under a memory budget)"),
    "float8_moe": ("boolean", "float8 grouped GEMMs in the MoE experts (torchtitan quantize.grouped_mm.float8 converter)"),
    # speed (kg.speed.training): what overlaps and how the kernels are built
    "tp_comm_overlap": ("boolean", "TP communication overlapped with the GEMMs (Megatron --tp-comm-overlap, torchtitan "
                                   "async TP)"),
    "overlap_grad_reduce": ("boolean", "gradient reduction overlapped with the backward pass (Megatron "
                                       "--overlap-grad-reduce, DeepSpeed overlap_comm)"),
    "torch_compile": ("boolean", "model compiled with torch.compile (torchtitan compile.enable, Trainer --torch_compile)"),
    "autotp_size": ("integer", "DeepSpeed AutoTP size (config tensor_parallel.autotp_size)"),
    "quant_storage": ("string", "bitsandbytes 4-bit storage dtype (bnb_4bit_quant_storage: uint8 unless set)"),
    "accelerate_ds_fields_ignored": ("string", "accelerate config deepspeed_config keys (and a config-file mixed_precision) "
                                               "that a deepspeed_config_file makes accelerate refuse"),
    "trainer": ("string", "the trainer the script runs (TRL grpo/sft/dpo, LLaMA-Factory stage)"),
    "num_generations": ("integer", "completions sampled per prompt (TRL GRPO num_generations, verl rollout.n)"),
    "steps_per_generation": ("integer", "TRL GRPO steps_per_generation (default: gradient_accumulation_steps)"),
    "lora_rank": ("integer", "LoRA rank r"),
    # batch
    "micro_batch_size": ("integer", "sequences per GPU per forward pass"),
    "global_batch_size": ("integer", "sequences per optimizer step across the job"),
    "gradient_accumulation_steps": ("integer", "micro-batches accumulated per optimizer step per DP rank"),
    "seq_length": ("integer", "tokens per sequence"),
    # model shape (Megatron names; override the HF config)
    "num_layers": ("integer", "transformer layers"),
    "hidden_size": ("integer", "hidden size h"),
    "ffn_hidden_size": ("integer", "MLP hidden size"),
    "num_attention_heads": ("integer", "attention heads a"),
    "num_query_groups": ("integer", "KV heads / query groups (GQA)"),
    "kv_channels": ("integer", "head dim"),
    "vocab_size": ("integer", "vocabulary size (before padding)"),
    "make_vocab_size_divisible_by": ("integer", "Megatron vocab padding multiple (default 128, times tp_size)"),
    "swiglu": ("boolean", "gated MLP (3 matrices)"),
    "untie_embeddings_and_output_weights": ("boolean", "separate output layer"),
    "normalization": (("RMSNorm", "LayerNorm"), "norm type"),
    "num_experts": ("integer", "routed experts per MoE layer"),
    "moe_ffn_hidden_size": ("integer", "FFN size of one expert"),
    "moe_shared_expert_intermediate_size": ("integer", "shared-expert FFN size"),
    "moe_router_topk": ("integer", "experts per token"),
    "moe_layer_freq": ("integer", "every n-th layer is MoE"),
}
# catalog techniques a training job holds, as conditions over the training namespace
# (kg.analyses.training.training_facts): the job's part of the coupling graph (issue 12). The inverse of
# kg.inputs.training.stackfile.TECHNIQUE_SETTINGS, plus the parallel sizes. A technique whose condition
# reads a fact the job lacks is not held.
JOB_TECHNIQUES: dict[str, str] = {
    "tensor-parallelism": "tp_size > 1",
    "pipeline-parallelism": "pp_size > 1",
    "data-parallelism": "dp_size > 1",
    "training-context-parallelism": "cp_size > 1",
    "expert-parallelism": "ep_size > 1",
    "3d-parallelism": "tp_size > 1 and pp_size > 1 and dp_size > 1",
    "sequence-parallelism": "sequence_parallel",
    # Megatron's distributed optimizer shards optimizer states over DP: ZeRO-1 (Megatron-LM docs/distrib_optimizer.md)
    # ZeRO's stages are cumulative (Rajbhandari et al. 2020 §5: P_os, P_os+g, P_os+g+p): stage 2/3 and FSDP
    # sharding partition optimizer states as stage 1 does
    "zero-1": "zero_stage >= 1 or distributed_optimizer or fsdp_sharding in ('full_shard', 'hybrid_shard', 'shard_grad_op', 'hybrid_shard_zero2')",
    "zero-2": "zero_stage == 2 or fsdp_sharding in ('shard_grad_op', 'hybrid_shard_zero2')",
    "zero-3-fsdp": "zero_stage == 3 or fsdp_sharding in ('full_shard', 'hybrid_shard')",
    "activation-checkpointing": "recompute_granularity != 'none'",
    "gradient-accumulation": "gradient_accumulation_steps > 1 or derived_gradient_accumulation_steps > 1",
    "lora-finetuning": "peft != ''",
    "fp8-training": "fp8",
    "optimizer-offload": "offload_optimizer != 'none'",
    "mixed-precision-bf16": "params_dtype == 'bf16'",
    "flash-attention": "use_flash_attn",
    "mixture-of-experts": "num_experts > 1",
}
MAX_SIZE = 1 << 20  # any parallel size or layer count beyond this is a typo


def _coerce(name: str, value: Any, where: str) -> Any:
    typ, _ = SETTINGS[name]
    if isinstance(typ, tuple):
        v = str(value)
        if v not in typ:
            raise OptkgError(f"{where}: {name} must be one of {', '.join(typ)}, found {value!r}")
        return v
    if typ == "integer":
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise OptkgError(f"{where}: {name} must be an integer, found {value!r}")
        try:
            v = int(value)
        except ValueError:
            raise OptkgError(f"{where}: {name} must be an integer, found {value!r}") from None
        if v < 0 or v > MAX_SIZE * 1024:
            raise OptkgError(f"{where}: {name} must be between 0 and {MAX_SIZE * 1024}, found {v}")
        return v
    if typ == "boolean":
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
            return value.lower() in ("true", "1")
        if not isinstance(value, bool):
            raise OptkgError(f"{where}: {name} must be true or false, found {value!r}")
        return value
    if typ == "number":
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise OptkgError(f"{where}: {name} must be a number, found {value!r}") from None
        if not math.isfinite(v):
            raise OptkgError(f"{where}: {name} must be finite, found {value!r}")
        return v
    if value is None or str(value) == "":
        raise OptkgError(f"{where}: {name} must be a non-empty string")
    return str(value)


@dataclass
class TrainingJob:
    """One training job as optkg models it (see module doc). ``hardware`` is a catalog GPU entry."""

    framework: str
    framework_version: str | None = None
    model: ModelFacts | None = None
    hardware: dict[str, Any] | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # settings the input leaves open and no default may stand in for (e.g. ``pp_size`` of a DeepSpeed
    # pipeline engine whose stage count is set in the script): rules reading them are not evaluable
    unknown: set[str] = field(default_factory=set)
    source: str = ""
    name: str = ""
    # the framework's own arguments as the command gave them (flag -> raw value, True for a bare switch), for the
    # checks a framework package generates from its released source
    native: dict[str, Any] = field(default_factory=dict)
    # the framework config files the job was read from, as parsed (e.g. "deepspeed" -> the ds_config mapping), for the
    # checks each framework generates over its own config keys (TrainingFramework.config_checks)
    configs: dict[str, Any] = field(default_factory=dict)
    # the launcher runs one process per GPU of the node without a number (kg.inputs.training.argv.Command.node_gpus)
    node_gpus: str = ""

    def set(self, name: str, value: Any, where: str) -> None:
        """Set a canonical setting after checking its type; unknown names are a bug of the reader."""
        if name not in SETTINGS:
            raise KeyError(name)
        self.settings[name] = _coerce(name, value, where)

    def get(self, name: str, default: Any = None) -> Any:
        return self.settings.get(name, default)

    # -- layout ------------------------------------------------------------------------------
    def parallel(self) -> dict[str, int]:
        """tp/pp/cp/ep/dp/world sizes with defaults; dp = world / (tp * pp * cp) when not given."""
        tp = self.get("tp_size", 1) or 1
        pp = self.get("pp_size", 1) or 1
        cp = self.get("cp_size", 1) or 1
        ep = self.get("ep_size", 1) or 1
        world = self.get("world_size")
        if world is None and self.get("gpus_per_node"):
            world = (self.get("num_nodes") or 1) * self.get("gpus_per_node")
        dp = self.get("dp_size")
        if dp is None and world:
            dp = world // (tp * pp * cp) if world % (tp * pp * cp) == 0 else None
        if dp is None:
            dp = 1
        if world is None:
            world = tp * pp * cp * dp
        return {"tp_size": tp, "pp_size": pp, "cp_size": cp, "ep_size": ep, "dp_size": dp, "world_size": world}

    def shape(self) -> dict[str, Any]:
        """Model shape under Megatron names: the job's own arguments win over the HF config."""
        m = self.model
        out: dict[str, Any] = {}
        if m is not None:
            dense_ffn = m.dense_intermediate_size or m.intermediate_size
            out.update({
                "num_layers": m.num_hidden_layers, "hidden_size": m.hidden_size,
                "num_attention_heads": m.num_attention_heads, "num_query_groups": m.num_key_value_heads,
                "kv_channels": m.head_dim, "vocab_size": m.vocab_size, "swiglu": True,
                "untie_embeddings_and_output_weights": not m.tie_word_embeddings,
                "normalization": "RMSNorm",
            })
            if dense_ffn:
                out["ffn_hidden_size"] = dense_ffn
            if m.is_moe:
                out["num_experts"] = m.num_experts
                out["moe_ffn_hidden_size"] = m.expert_intermediate_size or m.moe_intermediate_size
                out["moe_router_topk"] = m.num_experts_per_tok
                if m.shared_expert_intermediate_size:
                    out["moe_shared_expert_intermediate_size"] = m.shared_expert_intermediate_size
                if m.num_moe_layers and m.num_moe_layers != m.num_hidden_layers:
                    out["num_moe_layers"] = m.num_moe_layers
        for k in ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups",
                  "kv_channels", "vocab_size", "swiglu", "untie_embeddings_and_output_weights", "normalization",
                  "num_experts", "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size", "moe_router_topk",
                  "moe_layer_freq"):
            if k in self.settings:
                out[k] = self.settings[k]
        if out.get("hidden_size") and out.get("num_attention_heads"):
            out.setdefault("kv_channels", out["hidden_size"] // out["num_attention_heads"])
            out.setdefault("num_query_groups", out["num_attention_heads"])
            out.setdefault("ffn_hidden_size", 4 * out["hidden_size"])
        if (out.get("num_experts") or 0) > 1 and not out.get("moe_ffn_hidden_size") and out.get("ffn_hidden_size"):
            # megatron-core 0.16.1 transformer/transformer_config.py:1054-1055: an expert's FFN is ffn_hidden_size
            # when --moe-ffn-hidden-size is not given
            out["moe_ffn_hidden_size"] = out["ffn_hidden_size"]
        if "moe_layer_freq" in out and out.get("num_layers") and "num_moe_layers" not in out:
            f = out["moe_layer_freq"] or 1
            out["num_moe_layers"] = sum(1 for i in range(out["num_layers"]) if i % f == 0)
        return out


def derive_virtual_pipeline(job: TrainingJob) -> None:
    """vpp_size from --num-layers-per-virtual-pipeline-stage: (layers // PP) // N, as Megatron computes it."""
    n = job.get("layers_per_virtual_stage")
    if not n or job.get("vpp_size"):
        return
    layers = job.shape().get("num_layers")
    pp = job.get("pp_size", 1) or 1
    if layers:
        vpp = (layers // pp) // n
        if vpp > 1:
            job.settings["vpp_size"] = vpp
