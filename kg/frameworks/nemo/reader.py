"""NeMo's YAML configs: NeMo-RL (``examples/configs/grpo_*.yaml``, ``sft_*.yaml``, ``dpo*.yaml``: ``policy:``,
``cluster:``, with ``defaults: parent.yaml`` inheritance) and NeMo Automodel (``examples/llm_finetune/**.yaml``:
``step_scheduler:``, ``distributed:``, ``model:``), read by their own keys (kg.inputs.training.configtree).

NeMo-RL's policy runs on Megatron-core when ``policy.megatron_cfg.enabled`` (the job is then sized with
Megatron's accounting: framework ``nemo``) and on PyTorch DTensor/FSDP2 when ``policy.dtensor_cfg.enabled``
(framework ``fsdp``, FSDP2 full shard over the data-parallel ranks), as nemo_rl/models/policy/ picks its
worker. NeMo Automodel shards with FSDP2 (``distributed.strategy: fsdp2``, the default manager).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from kg.inputs.training.configtree import ConfigTree, apply_table, load_tree
from kg.inputs.training.job import TrainingJob

P = "policy."
PRECISION = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16", "float32": "fp32", "fp32": "fp32"}
NEMO_RL_COMMON: dict[str, Any] = {
    P + "train_global_batch_size": "global_batch_size",
    P + "train_micro_batch_size": "micro_batch_size",
    P + "max_total_sequence_length": "seq_length",
    P + "precision": ("params_dtype", lambda v: PRECISION.get(str(v))),
    P + "sequence_packing.enabled": "packing",
    "cluster.gpus_per_node": "gpus_per_node",
    "cluster.num_nodes": "num_nodes",
    "grpo.num_generations_per_prompt": "num_generations",
}
M = P + "megatron_cfg."
NEMO_RL_MEGATRON: dict[str, Any] = {
    M + "tensor_model_parallel_size": "tp_size",
    M + "pipeline_model_parallel_size": "pp_size",
    M + "context_parallel_size": "cp_size",
    M + "expert_model_parallel_size": "ep_size",
    M + "expert_tensor_parallel_size": "etp_size",
    M + "sequence_parallel": "sequence_parallel",
    M + "optimizer.use_distributed_optimizer": "distributed_optimizer",
    M + "optimizer.optimizer": ("optimizer", lambda v: str(v).lower() or None),
    M + "activation_checkpointing": ("recompute_granularity", lambda v: "full" if v else None),
    M + "optimizer.optimizer_cpu_offload": ("offload_optimizer", lambda v: "cpu" if v else None),
    M + "fp8_cfg.enabled": "fp8",
    M + "fp8_cfg.fp8_recipe": "fp8_recipe",
}
D = P + "dtensor_cfg."
NEMO_RL_DTENSOR: dict[str, Any] = {
    D + "tensor_parallel_size": "tp_size",
    D + "context_parallel_size": "cp_size",
    D + "sequence_parallel": "sequence_parallel",
    D + "activation_checkpointing": ("recompute_granularity", lambda v: "full" if v else None),
    D + "cpu_offload": ("offload_param", lambda v: "cpu" if v else None),
}
AUTOMODEL: dict[str, Any] = {
    "step_scheduler.global_batch_size": "global_batch_size",
    "step_scheduler.local_batch_size": "micro_batch_size",
    "distributed.tp_size": ("tp_size", lambda v: v if isinstance(v, int) else None),
    "distributed.cp_size": ("cp_size", lambda v: v if isinstance(v, int) else None),
    "distributed.pp_size": ("pp_size", lambda v: v if isinstance(v, int) else None),
    "distributed.ep_size": ("ep_size", lambda v: v if isinstance(v, int) else None),
    "distributed.dp_size": ("dp_size", lambda v: v if isinstance(v, int) else None),
    "distributed.sequence_parallel": "sequence_parallel",
    "distributed.activation_checkpointing": ("recompute_granularity", lambda v: "full" if v else None),
    "peft.dim": "lora_rank",
}


def is_nemo_rl_config(data: Any) -> bool:
    return isinstance(data, dict) and "policy" in data and ("cluster" in data or "defaults" in data) and \
        any(k in data for k in ("grpo", "sft", "dpo", "ppo", "distillation", "rm", "cluster", "defaults"))


def is_automodel_config(data: Any) -> bool:
    return isinstance(data, dict) and "step_scheduler" in data and ("model" in data or "distributed" in data)


def load_nemo_rl(path: Path, job: TrainingJob | None, resolver) -> TrainingJob:
    tree = load_tree(path)
    megatron = bool(tree.get(M + "enabled"))
    fw = "nemo" if megatron else "fsdp"
    job = job or TrainingJob(framework=fw, source=str(path), name=Path(path).name)
    job.framework = fw
    apply_table(job, tree, NEMO_RL_COMMON)
    if megatron:
        apply_table(job, tree, NEMO_RL_MEGATRON)
        job.set("grad_dtype", "fp32", f"{tree.where(M + 'enabled')} (Megatron keeps fp32 main grads)")
        job.notes.append(f"NeMo-RL policy on Megatron-core ({tree.where(M + 'enabled')})")
    else:
        apply_table(job, tree, NEMO_RL_DTENSOR)
        job.set("fsdp_sharding", "full_shard", tree.where(D + "enabled") if tree.has(D + "enabled") else str(path))
        job.set("fsdp_version", 2, tree.where(D + "enabled") if tree.has(D + "enabled") else str(path))
        job.notes.append("NeMo-RL policy on DTensor (FSDP2 over the data-parallel ranks"
                         + (f", {tree.where(D + 'enabled')})" if tree.has(D + "enabled") else ")"))
    if tree.get(P + "lora_cfg.enabled") or tree.get(M + "peft.enabled"):
        job.set("peft", "lora", tree.where(P + "lora_cfg.enabled"))
        if isinstance(tree.get(P + "lora_cfg.dim"), int):
            job.set("lora_rank", tree.get(P + "lora_cfg.dim"), tree.where(P + "lora_cfg.dim"))
    _model(job, tree, P + "model_name", resolver)
    _missing(job, tree)
    return job


def load_automodel(path: Path, job: TrainingJob | None, resolver) -> TrainingJob:
    tree = load_tree(path)
    job = job or TrainingJob(framework="fsdp", source=str(path), name=Path(path).name)
    job.framework = "fsdp"
    apply_table(job, tree, AUTOMODEL)
    strategy = tree.get("distributed.strategy", "fsdp2")
    where = tree.where("distributed.strategy") if tree.has("distributed.strategy") else str(path)
    job.set("fsdp_sharding", "full_shard", where)
    job.set("fsdp_version", 2, where)
    job.notes.append(f"NeMo Automodel, distributed strategy {strategy} (FSDP2 over the data-parallel ranks)")
    if tree.has("peft.dim") or any(k.startswith("peft.") for k in tree.values):
        job.set("peft", "lora", tree.where("peft.dim") if tree.has("peft.dim") else str(path))
    seq = tree.get("packed_sequence.packed_sequence_size") or tree.get("dataset.seq_length") or \
        tree.get("dataset.max_length")
    if isinstance(seq, int) and seq > 0:
        key = next(k for k in ("packed_sequence.packed_sequence_size", "dataset.seq_length", "dataset.max_length")
                   if tree.get(k) == seq)
        job.set("seq_length", seq, tree.where(key))
        if key.startswith("packed"):
            job.set("packing", True, tree.where(key))
    for k in ("model.load_in_4bit", "quantization.load_in_4bit"):
        if tree.get(k) is True:
            job.set("weight_quantization", "bnb-4bit", tree.where(k))
            storage = tree.get(k.rsplit(".", 1)[0] + ".bnb_4bit_quant_storage")
            if storage:
                job.set("quant_storage", str(storage), tree.where(k.rsplit(".", 1)[0] + ".bnb_4bit_quant_storage"))
    _model(job, tree, "model.pretrained_model_name_or_path", resolver)
    _missing(job, tree)
    return job


def _model(job: TrainingJob, tree: ConfigTree, key: str, resolver) -> None:
    name = tree.get(key)
    if job.model is None and name and resolver is not None:
        from kg.core.errors import OptkgError
        try:
            job.model = resolver(str(name))
        except OptkgError as e:
            job.notes.append(f"{tree.where(key)} {name}: {e}")


def _missing(job: TrainingJob, tree: ConfigTree) -> None:
    for f in tree.values.get("_missing_defaults") or []:
        job.notes.append(f"defaults file {f} not found: its keys are not read")
