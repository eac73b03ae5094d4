"""Training-job inputs: one reader per framework format, one registry that picks the reader.

``COMMAND_READERS`` (framework -> command reader) and ``detect_command`` decide which reader a
pasted command goes to (a Megatron script, the ``deepspeed`` launcher, ``accelerate launch`` or a
Trainer script, torchtitan's ``--job.config_file``); ``load_training_file`` does the same for a
file (DeepSpeed JSON, accelerate YAML, torchtitan TOML, stack YAML with ``framework:``). Every reader
returns a kg.inputs.training.job.TrainingJob.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kg.core.errors import OptkgError
from kg.inputs.training.job import FRAMEWORKS, SETTINGS, TrainingJob

MEGATRON_SCRIPTS = re.compile(r"^(pretrain_[a-z0-9_]+\.py|megatron)$")
TRAINING_HINTS = re.compile(r"(verl\.trainer|openrlhf|pretrain_[a-z0-9_]+\.py|--tensor-model-parallel-size|--deepspeed|^\s*deepspeed\s|"
                            r"accelerate\s+launch|torchtitan|--job\.config[_-]file|--fsdp|--per_device_train_batch_size|"
                            r"--micro-batch-size)", re.M)


def is_training_command(text: str) -> bool:
    """True when ``text`` looks like a training launch (used by ``optkg check --cmd`` routing)."""
    return bool(TRAINING_HINTS.search(text or ""))


def detect_command(text: str, where: str = "--cmd") -> str:
    """The reader for ``text``: verl, torchtitan, megatron, deepspeed (Megatron-DeepSpeed) or hf-trainer.

    A Megatron script (``pretrain_*.py``, swift's ``megatron``) or Megatron flags go to the Megatron
    reader, or the DeepSpeed one when ``--deepspeed`` is among them; anything else (HF Trainer, TRL,
    OpenRLHF, accelerate scripts, also under the ``deepspeed`` launcher) to the HF reader, which reads
    ``--deepspeed ds.json`` / ``--fsdp`` itself.
    """
    from kg.inputs.training.argv import split_command
    cmd = split_command(text, where)
    if cmd.script is None:
        raise OptkgError(f"{where}: no training script or module in the command (expected e.g. `torchrun ... "
                         "pretrain_gpt.py ...`, `deepspeed train.py --deepspeed ds.json`, `accelerate launch train.py`)")
    args = " ".join(cmd.args)
    script = (cmd.script or "").rsplit("/", 1)[-1]
    if "verl.trainer" in script:
        return "verl"
    if "--job.config_file" in args or "--job.config-file" in args or "torchtitan" in script:
        return "torchtitan"
    if "openrlhf" in script:
        return "hf-trainer"
    megatron = bool(MEGATRON_SCRIPTS.search(script)) or "--tensor-model-parallel-size" in args or \
        "--tensor_model_parallel_size" in args or "--micro-batch-size" in args
    if megatron:
        return "deepspeed" if re.search(r"--deepspeed(_config)?\b", args) else "megatron"
    return "hf-trainer"


def parse_training_command(text: str, model=None, where: str = "--cmd", base_dir: Path | None = None,
                           resolver=None, framework: str | None = None) -> TrainingJob:
    """Read a pasted training command with the reader ``detect_command`` picks (or ``framework``'s)."""
    fw = detect_command(text, where)
    if fw == "verl":
        from kg.inputs.training.verl import parse_verl_command
        return parse_verl_command(text, model, where, resolver)
    if fw == "megatron" or (framework in ("megatron", "nemo", "verl") and fw != "deepspeed"):
        from kg.inputs.training.megatron import parse_megatron_command
        job = parse_megatron_command(text, model, where)
    elif fw == "deepspeed":
        from kg.inputs.training.deepspeed import parse_deepspeed_command
        job = parse_deepspeed_command(text, model, where, base_dir)
    elif fw == "torchtitan":
        from kg.inputs.training.argv import split_command
        from kg.inputs.training.torchtitan import load_torchtitan_toml
        cmd = split_command(text, where)
        cfg = None
        for i, t in enumerate(cmd.args):
            name, eq, val = t.partition("=")
            if name in ("--job.config_file", "--job.config-file"):
                cfg = val if eq else (cmd.args[i + 1] if i + 1 < len(cmd.args) else None)
        if not cfg:
            raise OptkgError(f"{where}: torchtitan command without --job.config_file")
        p = Path(cfg)
        p = p if p.is_absolute() or base_dir is None else base_dir / p
        if not p.exists():
            raise OptkgError(f"{where}: torchtitan config '{cfg}' not found")
        world = None
        if cmd.launcher_args.get("gpus_per_node"):
            world = int(cmd.launcher_args["gpus_per_node"]) * int(cmd.launcher_args.get("num_nodes", 1))
        job = load_torchtitan_toml(p, resolver, world)
        job.model = model or job.model
    else:
        from kg.inputs.training.hf import parse_hf_command
        job = parse_hf_command(text, model, where, base_dir, resolver)
    if framework and framework != job.framework and framework in FRAMEWORKS:
        job.notes.append(f"framework {framework} (command read as {job.framework})")
        job.framework = framework
    return job


def load_training_file(path: Path | str, catalog, resolver, job: TrainingJob | None = None) -> TrainingJob:
    """Read a training file by its content: DeepSpeed JSON, accelerate YAML, torchtitan TOML or a stack YAML."""
    p = Path(path)
    if not p.exists():
        raise OptkgError(f"{p}: no such file")
    if p.suffix == ".toml":
        from kg.inputs.training.torchtitan import load_torchtitan_toml
        t = load_torchtitan_toml(p, resolver)
        if job is None:
            return t
        job.settings.update(t.settings)
        job.model = job.model or t.model
        return job
    from kg.core.yamlio import load_yaml
    doc = load_yaml(p)
    data = doc.data
    from kg.inputs.training.deepspeed import apply_deepspeed_config, looks_like_deepspeed_config
    from kg.inputs.training.stackfile import is_training_stack, job_from_stack_doc
    if looks_like_deepspeed_config(data):
        job = job or TrainingJob(framework="deepspeed", source=str(p), name=p.name)
        apply_deepspeed_config(job, data, str(p), doc.where)
        return job
    if isinstance(data, dict) and "distributed_type" in data:
        from kg.inputs.training.hf import apply_accelerate_config
        job = job or TrainingJob(framework="hf-trainer", source=str(p), name=p.name)
        apply_accelerate_config(job, data, str(p), doc.where, p.parent)
        return job
    if is_training_stack(data) and job is None:
        return job_from_stack_doc(doc, str(p), catalog, resolver)
    raise OptkgError(f"{p}: not a training config (expected a DeepSpeed JSON, an accelerate config, a torchtitan "
                     "TOML or a stack YAML with `framework:`)")


def is_training_file(path: Path | str) -> bool:
    """True when ``path`` holds a training config (by suffix and content), without raising."""
    p = Path(path)
    try:
        if p.suffix == ".toml":
            return True
        from kg.core.yamlio import load_yaml
        data = load_yaml(p).data
    except (OptkgError, OSError):
        return False
    from kg.inputs.training.deepspeed import looks_like_deepspeed_config
    from kg.inputs.training.stackfile import is_training_stack
    return looks_like_deepspeed_config(data) or is_training_stack(data) or \
        (isinstance(data, dict) and "distributed_type" in data)


__all__ = ["FRAMEWORKS", "SETTINGS", "TrainingJob", "detect_command", "is_training_command", "is_training_file",
           "load_training_file", "parse_training_command"]
