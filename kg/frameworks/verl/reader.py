"""verl jobs: ``python3 -m verl.trainer.main_ppo [--config-name ppo_megatron_trainer] key=value ...`` (Hydra
overrides) and verl YAML configs, read on top of verl's own defaults of the pinned release.

The defaults are verl's generated, fully composed trainer configs of the release (verl 0.9.1 wheel:
``verl/trainer/config/_generated_ppo_trainer.yaml`` (FSDP workers) and ``_generated_ppo_megatron_trainer.yaml``,
copied to ``data/0.9.1/``); the Megatron one is the base when the command names ``--config-name
ppo_megatron_trainer`` or sets ``actor_rollout_ref.actor.strategy=megatron``. Overrides and the user's YAML
are merged on top (kg.inputs.training.configtree: ``+key``, ``~key``, ``${oc.select:...}``).

Read for the actor (``actor_rollout_ref.actor``): ``strategy`` (megatron, fsdp, fsdp2),
``megatron.{tensor,pipeline,virtual_pipeline,context,expert,expert_tensor}_model_parallel_size``,
``megatron.sequence_parallel`` (verl's default true, verl#1050), ``megatron.use_distributed_optimizer``,
``megatron.param_offload`` / ``optimizer_offload``, ``fsdp_config.param_offload`` / ``optimizer_offload``,
``ulysses_sequence_parallel_size``, ``ppo_micro_batch_size_per_gpu`` (micro batch), ``ppo_mini_batch_size``
x ``rollout.n`` (sequences per optimizer step); ``actor_rollout_ref.model.path`` (the model, when given),
``enable_gradient_checkpointing``, ``lora_rank``; ``trainer.n_gpus_per_node`` x ``trainer.nnodes``;
``data.max_prompt_length`` + ``data.max_response_length`` (sequence length).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kg.core.errors import OptkgError
from kg.inputs.training.argv import split_command
from kg.inputs.training.configtree import ConfigTree, apply_overrides, apply_table, load_tree
from kg.inputs.training.job import TrainingJob

RELEASE = "0.9.1"
DATA = Path(__file__).parent / "data" / RELEASE
A = "actor_rollout_ref.actor."
KEYS: dict[str, Any] = {
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
    "actor_rollout_ref.rollout.n": "num_generations",
    "actor_rollout_ref.model.lora_rank": ("lora_rank", lambda v: v or None),
}


def is_verl_config(data: Any) -> bool:
    return isinstance(data, dict) and "actor_rollout_ref" in data and ("trainer" in data or "data" in data)


def base_tree(megatron: bool) -> ConfigTree:
    """verl's own composed defaults of the pinned release (FSDP or Megatron workers)."""
    return load_tree(DATA / ("_generated_ppo_megatron_trainer.yaml" if megatron else "_generated_ppo_trainer.yaml"))


def parse_verl_command(text: str, model=None, where: str = "--cmd", resolver=None) -> TrainingJob:
    """A TrainingJob (framework verl) from a verl launch with Hydra overrides (see module doc)."""
    cmd = split_command(text, where)
    args = list(cmd.args)
    config_name = ""
    rest: list[str] = []
    i = 0
    while i < len(args):
        name, eq, val = args[i].partition("=")
        if name in ("--config-name", "--config_name", "-cn", "--config-path", "--config_path", "-cp"):
            if not eq:
                val = args[i + 1] if i + 1 < len(args) else ""
                i += 1
            if "name" in name or name == "-cn":
                config_name = val
        else:
            rest.append(args[i])
        i += 1
    megatron = "megatron" in config_name or any(t.lstrip("+") == A + "strategy=megatron" for t in rest)
    tree = base_tree(megatron)
    base_files = set(tree.files)
    unknown = struct_misses(tree, rest)
    ignored = apply_overrides(tree, [t for t in rest if t.split("=", 1)[0] not in {k for k, _ in unknown}], where)
    job = TrainingJob(framework="verl", model=model, source=where, name=(cmd.script or "verl").rsplit(".", 1)[-1])
    job.ignored.extend(ignored)
    if unknown:
        job.configs["verl_unknown_overrides"] = [[f"{where}: {k}", near] for k, near in unknown]
    return job_from_tree(job, tree, base_files, where, resolver)


def struct_misses(tree: ConfigTree, items: list[str]) -> list[tuple[str, str]]:
    """(key, nearest known key) for each ``key=value`` override (no ``+``) whose key is not in verl's composed
    config: Hydra composes it in struct mode and refuses such an override ("Could not override 'key'. To append
    to your config use +key=value", hydra/_internal/config_loader_impl.py; verl's trainer entry points are
    ``@hydra.main``). A key under an empty or null mapping of the defaults is left alone (its schema is open)."""
    from difflib import get_close_matches
    keys = set(tree.values)
    prefixes = {k.rsplit(".", i)[0] for k in keys for i in range(1, k.count(".") + 1)}
    out = []
    for t in items:
        if "=" not in t or t.startswith(("+", "~", "-")):
            continue
        k = t.split("=", 1)[0]
        if k in keys or k in prefixes or not re.fullmatch(r"[A-Za-z_][\w.]*", k):
            continue
        parent = k.rsplit(".", 1)[0] if "." in k else ""
        while parent and parent not in prefixes and parent not in keys:
            parent = parent.rsplit(".", 1)[0] if "." in parent else ""
        if parent in keys:
            continue  # under a leaf of the defaults (an empty/null mapping): not a struct key Hydra knows of
        siblings = sorted(x for x in keys | prefixes if x.rsplit(".", 1)[0] == parent and "." in x) if parent else \
            sorted(x for x in prefixes if "." not in x)
        near = get_close_matches(k, siblings, n=1)
        out.append((k, near[0] if near else ""))
    return out


def load_verl_config(path: Path, job: TrainingJob | None, resolver=None) -> TrainingJob:
    """A verl YAML config (the keys of verl's trainer config) on top of verl's defaults."""
    from kg.inputs.training.configtree import load_tree as load
    user = load(path)
    # a Hydra config names verl's own base in its defaults list (`- ppo_megatron_trainer`, `- ppo_trainer`):
    # that base is the generated config of the release, not a file beside the user's
    bases = [Path(f).stem for f in user.values.pop("_missing_defaults", None) or []]
    strategy = user.get(A + "strategy") or ("megatron" if "ppo_megatron_trainer" in bases else "fsdp")
    tree = base_tree(strategy == "megatron")
    base_files = set(tree.files)
    from kg.inputs.training.configtree import _merge, resolve
    _merge(tree, {k: v for k, v in user.values.items() if not k.startswith("hydra.")}, user.origin)
    resolve(tree)
    job = job or TrainingJob(framework="verl", source=str(path), name=Path(path).name)
    job.framework = "verl"
    return job_from_tree(job, tree, base_files, str(path), resolver)


def job_from_tree(job: TrainingJob, tree: ConfigTree, base_files: set[str], where: str, resolver) -> TrainingJob:
    def given(key: str) -> bool:
        return tree.has(key) and tree.origin.get(key, "").split(":")[0] not in base_files
    strategy = str(tree.get(A + "strategy", "fsdp"))
    table = dict(KEYS)
    if strategy != "megatron":
        for k in [k for k in table if ".megatron." in k]:
            table.pop(k)
    apply_table(job, tree, table)
    if strategy == "megatron":
        job.set("grad_dtype", "fp32", f"{tree.where(A + 'strategy')} (Megatron keeps fp32 main grads)")
        if job.get("sequence_parallel") and (job.get("tp_size") or 1) <= 1:
            job.notes.append(f"{tree.where(A + 'megatron.sequence_parallel')} with TP 1: verl >= 0.4.0 turns sequence "
                             "parallelism off itself (megatron_actor.py:146-147 at 0.4.0, engine.py:234-236 at 0.9.1); "
                             "0.3.x passes it to Megatron-core, which refuses it")
        if tree.get(A + "megatron.optimizer_offload"):
            job.set("offload_optimizer", "cpu", tree.where(A + "megatron.optimizer_offload"))
        if tree.get(A + "megatron.param_offload"):
            job.set("offload_param", "cpu", tree.where(A + "megatron.param_offload"))
    elif strategy in ("fsdp", "fsdp2"):
        job.set("fsdp_sharding", "full_shard", tree.where(A + "strategy"))
        if strategy == "fsdp2":
            job.set("fsdp_version", 2, tree.where(A + "strategy"))
        if tree.get(A + "fsdp_config.optimizer_offload"):
            job.set("offload_optimizer", "cpu", tree.where(A + "fsdp_config.optimizer_offload"))
        if tree.get(A + "fsdp_config.param_offload"):
            job.set("offload_param", "cpu", tree.where(A + "fsdp_config.param_offload"))
        sp = tree.get(A + "ulysses_sequence_parallel_size") or 1
        if sp > 1:  # DeepSpeed-Ulysses over the FSDP group: the sequence splits over sp ranks (like CP)
            job.set("cp_size", sp, tree.where(A + "ulysses_sequence_parallel_size"))
    mini, n = tree.get(A + "ppo_mini_batch_size"), tree.get("actor_rollout_ref.rollout.n") or 1
    if isinstance(mini, int) and isinstance(n, int):
        job.set("global_batch_size", mini * n, f"{tree.where(A + 'ppo_mini_batch_size')} x rollout.n {n}")
    if tree.get("actor_rollout_ref.model.enable_gradient_checkpointing"):
        job.set("recompute_granularity", "full", tree.where("actor_rollout_ref.model.enable_gradient_checkpointing"))
    if job.get("lora_rank"):
        job.set("peft", "lora", tree.where("actor_rollout_ref.model.lora_rank"))
    try:
        seq = int(tree.get("data.max_prompt_length") or 0) + int(tree.get("data.max_response_length") or 0)
    except (TypeError, ValueError):
        raise OptkgError(f"{tree.where('data.max_prompt_length')}: data.max_prompt_length / data.max_response_length "
                         "must be integers") from None
    if seq and (given("data.max_prompt_length") or given("data.max_response_length")):
        job.set("seq_length", seq, f"{where}: data.max_prompt_length + data.max_response_length")
    elif seq:
        job.set("seq_length", seq, f"verl {RELEASE} defaults: data.max_prompt_length + data.max_response_length")
        job.notes.append(f"sequence length {seq} = verl {RELEASE}'s default max_prompt_length + max_response_length")
    path = tree.get("actor_rollout_ref.model.path")
    if job.model is None and path and given("actor_rollout_ref.model.path") and resolver is not None:
        try:
            job.model = resolver(str(path))
        except OptkgError as e:
            job.notes.append(f"actor_rollout_ref.model.path {path}: {e}")
    job.notes.append(f"verl actor strategy {strategy} (verl {RELEASE} defaults for what the input leaves out)")
    return job
