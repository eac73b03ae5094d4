"""Which reader a pasted training command goes to (``detect_command``) and reading it
(``parse_training_command``); ``is_training_command`` routes ``optkg check --cmd``."""
from __future__ import annotations

import re
from pathlib import Path

from kg.core.errors import OptkgError
from kg.inputs.training.job import FRAMEWORKS, TrainingJob

MEGATRON_SCRIPTS = re.compile(r"^(pretrain_[a-z0-9_]+\.py|megatron)$")
TRAINING_HINTS = re.compile(r"(verl\.trainer|openrlhf|pretrain_[a-z0-9_]+\.py|--tensor-model-parallel-size|--deepspeed|^\s*deepspeed\s|"
                            r"accelerate\s+launch|torchtitan|--job\.config[_-]file|--fsdp|--per_device_train_batch_size|"
                            r"--micro-batch-size|(^|\s)(\S*/)?torchrun\s|torch\.distributed\.(run|launch)|"
                            r"(^|\s)megatron\s+(sft|pt|rlhf)\b)", re.M)


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
