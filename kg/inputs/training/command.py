"""Which framework reads a pasted training command (``detect_command``) and reading it
(``parse_training_command``); ``is_training_command`` routes ``optkg check --cmd``.

The frameworks decide (kg.frameworks.registry.command_framework: each package's ``claims_command``);
this module knows no framework by name.
"""
from __future__ import annotations

import re
from pathlib import Path

from kg.core.errors import OptkgError
from kg.inputs.training.job import TrainingJob

TRAINING_HINTS = re.compile(r"(verl\.trainer|openrlhf|pretrain_[a-z0-9_]+\.py|--tensor-model-parallel-size|--deepspeed|^\s*deepspeed\s|"
                            r"accelerate\s+launch|torchtitan|--job\.config[_-]file|--fsdp|--per_device_train_batch_size|"
                            r"--micro-batch-size|(^|\s)(\S*/)?torchrun\s|torch\.distributed\.(run|launch)|"
                            r"(^|\s)megatron\s+(sft|pt|rlhf)\b)", re.M)


def is_training_command(text: str) -> bool:
    """True when ``text`` looks like a training launch (used by ``optkg check --cmd`` routing)."""
    return bool(TRAINING_HINTS.search(text or ""))


def _reader(text: str, where: str):
    from kg.frameworks.registry import command_framework
    from kg.inputs.training.argv import split_command
    cmd = split_command(text, where)
    if cmd.script is None:
        raise OptkgError(f"{where}: no training script or module in the command (expected e.g. `torchrun ... "
                         "pretrain_gpt.py ...`, `deepspeed train.py --deepspeed ds.json`, `accelerate launch train.py`)")
    return command_framework(cmd, " ".join(cmd.args), (cmd.script or "").rsplit("/", 1)[-1])


def detect_command(text: str, where: str = "--cmd") -> str:
    """The id of the framework whose reader takes ``text`` (verl, torchtitan, megatron, deepspeed for
    Megatron-DeepSpeed, openrlhf, else hf-trainer, which reads ``--deepspeed ds.json`` / ``--fsdp`` itself)."""
    return _reader(text, where).id


def parse_training_command(text: str, model=None, where: str = "--cmd", base_dir: Path | None = None,
                           resolver=None, framework: str | None = None) -> TrainingJob:
    """Read a pasted training command with the reader ``detect_command`` picks; a stack's ``framework``
    whose package names a ``command_reader`` (NeMo, verl: Megatron's) takes it over unless the detected
    reader keeps its own commands (DeepSpeed, verl)."""
    from kg.frameworks import registry
    fw = _reader(text, where)
    hinted = registry.get(framework) if framework else None
    if hinted is not None and hinted.command_reader and not fw.keeps_reader_over_hint:
        fw = registry.get(hinted.command_reader)
    job = fw.read_command(text, model, where, base_dir, resolver)
    from kg.inputs.training.argv import split_command
    cmd = split_command(text, where)
    if not ({"world_size", "gpus_per_node"} & job.settings.keys()):
        if cmd.node_gpus:
            job.node_gpus = cmd.node_gpus
        elif cmd.gpus_unknown:
            job.unknown.add("world_size")
            job.notes.append(f"{cmd.gpus_unknown}: the GPU count is unknown; give --count")
    if framework and framework != job.framework and framework in registry.ids():
        job.notes.append(f"framework {framework} (command read as {job.framework})")
        job.framework = framework
    return job
