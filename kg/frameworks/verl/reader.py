"""verl training commands: ``python3 -m verl.trainer.main_ppo key=value ...`` (Hydra overrides).

Read for the actor (``actor_rollout_ref.actor``): ``strategy`` (megatron, fsdp, fsdp2),
``megatron.{tensor,pipeline,context,expert,expert_tensor}_model_parallel_size`` /
``..._parallel_size``, ``megatron.virtual_pipeline_model_parallel_size``,
``megatron.sequence_parallel``, ``megatron.use_distributed_optimizer``,
``ppo_micro_batch_size_per_gpu``, ``ulysses_sequence_parallel_size``; the model from
``actor_rollout_ref.model.path``; GPUs from ``trainer.n_gpus_per_node`` x ``trainer.nnodes``;
``data.max_prompt_length`` + ``data.max_response_length`` as the sequence length.
verl's Megatron actor config turned ``sequence_parallel`` on by default while TP defaulted to 1
(verl-project/verl#1050), so an unset ``sequence_parallel`` with strategy megatron counts as true.
"""
from __future__ import annotations

from typing import Any

from kg.core.errors import OptkgError
from kg.inputs.training.argv import split_command
from kg.inputs.training.job import TrainingJob

A = "actor_rollout_ref.actor."
KEYS = {
    A + "megatron.tensor_model_parallel_size": "tp_size",
    A + "megatron.pipeline_model_parallel_size": "pp_size",
    A + "megatron.virtual_pipeline_model_parallel_size": "vpp_size",
    A + "megatron.context_parallel_size": "cp_size",
    A + "megatron.expert_model_parallel_size": "ep_size",
    A + "megatron.expert_tensor_parallel_size": "etp_size",
    A + "megatron.sequence_parallel": "sequence_parallel",
    A + "megatron.use_distributed_optimizer": "distributed_optimizer",
    A + "ppo_micro_batch_size_per_gpu": "micro_batch_size",
    "trainer.n_gpus_per_node": "gpus_per_node",
    "trainer.nnodes": "num_nodes",
}


def is_verl_command(text: str) -> bool:
    return "verl.trainer" in text


def parse_verl_command(text: str, model=None, where: str = "--cmd", resolver=None) -> TrainingJob:
    """A TrainingJob (framework verl) from a verl launch with Hydra overrides (see module doc)."""
    cmd = split_command(text, where)
    job = TrainingJob(framework="verl", model=model, source=where, name=(cmd.script or "verl").rsplit(".", 1)[-1])
    over: dict[str, str] = {}
    for t in cmd.args:
        if "=" in t and not t.startswith("-"):
            k, v = t.lstrip("+").split("=", 1)
            over[k] = v
        else:
            job.ignored.append(t)
    strategy = over.get(A + "strategy", "fsdp")
    for k, name in KEYS.items():
        if k in over:
            job.set(name, over[k], f"{where}: {k}")
    if strategy == "megatron":
        job.set("grad_dtype", "fp32", f"{where}: {A}strategy=megatron (Megatron keeps fp32 main grads)")
    if strategy == "megatron" and "sequence_parallel" not in job.settings:
        job.set("sequence_parallel", True, f"{where}: {A}megatron.sequence_parallel (verl default, verl#1050)")
    if strategy in ("fsdp", "fsdp2"):
        job.set("fsdp_sharding", "full_shard", f"{where}: {A}strategy={strategy}")
        if strategy == "fsdp2":
            job.set("fsdp_version", 2, f"{where}: {A}strategy")
    try:
        seq = int(over.get("data.max_prompt_length", 0)) + int(over.get("data.max_response_length", 0))
    except ValueError:
        raise OptkgError(f"{where}: data.max_prompt_length / data.max_response_length must be integers") from None
    if seq:
        job.set("seq_length", seq, f"{where}: data.max_prompt_length + data.max_response_length")
    path = over.get("actor_rollout_ref.model.path")
    if job.model is None and path and resolver is not None:
        try:
            job.model = resolver(path)
        except OptkgError as e:
            job.notes.append(f"actor_rollout_ref.model.path {path}: {e}")
    job.notes.append(f"verl actor strategy {strategy}")
    return job
