"""Training launchers in the launch registry: ``torchrun``, ``deepspeed``, ``accelerate launch``,
``python -m torch.distributed.run|launch``, ``python -m verl.trainer.main_ppo``, ms-swift's ``megatron``
and ``python pretrain_*.py``. ``parse(launch)`` returns a kg.inputs.training.job.TrainingJob (kind
``training``, not a serving Stack) read by kg.inputs.training.parse_training_command; ``optkg check
--cmd`` sends it to the training report."""
from __future__ import annotations

from typing import Any

from kg.inputs.launch.registry import Launch, Launcher, register

PROGRAMS: tuple[tuple[str, ...], ...] = (
    ("torchrun",), ("deepspeed",), ("accelerate", "launch"),
    ("python", "-m", "torch.distributed.run"), ("python", "-m", "torch.distributed.launch"),
    ("python", "-m", "verl.trainer.main_ppo"), ("python", "-m", "torchtitan.train"),
    ("megatron",), ("python", "pretrain_*.py"), ("python", "*/pretrain_*.py"),
)


def parse(launch: Launch) -> Any:
    from kg.inputs.modelcfg import load_config_file, resolve_model
    from kg.inputs.training import parse_training_command
    model = load_config_file(launch.model_override) if launch.model_override else None
    job = parse_training_command(launch.command, model=model, where=launch.label, base_dir=launch.base_dir,
                                 resolver=launch.resolver or resolve_model)
    if launch.engine_version and not job.framework_version:
        job.framework_version = launch.engine_version
    if launch.gpu_count is not None and "world_size" not in job.settings:
        job.set("world_size", launch.gpu_count, f"{launch.label}: GPU count")
    job.notes[:0] = launch.notes
    return job


register(Launcher(name="training", kind="training", programs=PROGRAMS, parse=parse))
