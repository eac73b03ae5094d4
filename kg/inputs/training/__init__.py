"""Training-job inputs: one reader per framework format, one registry that picks the reader.

The readers live in the framework packages (kg.frameworks.<name>); ``detect_command`` asks them which
one takes a pasted command (a Megatron script, the ``deepspeed`` launcher, ``accelerate launch`` or a
Trainer script, torchtitan's ``--job.config_file``), ``load_training_file`` which one takes a file
(DeepSpeed JSON, accelerate YAML, torchtitan TOML; a stack YAML with ``framework:`` is read here).
Every reader returns a kg.inputs.training.job.TrainingJob.
"""
from __future__ import annotations

from kg.inputs.training.command import detect_command, is_training_command, parse_training_command
from kg.inputs.training.job import SETTINGS, TrainingJob
from kg.inputs.training.stackfile import is_training_file, load_training_file

__all__ = ["SETTINGS", "TrainingJob", "detect_command", "is_training_command", "is_training_file",
           "load_training_file", "parse_training_command"]
