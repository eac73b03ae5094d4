"""Training-job inputs: one reader per framework format, one registry that picks the reader.

``COMMAND_READERS`` (framework -> command reader) and ``detect_command`` decide which reader a
pasted command goes to (a Megatron script, the ``deepspeed`` launcher, ``accelerate launch`` or a
Trainer script, torchtitan's ``--job.config_file``); ``load_training_file`` does the same for a
file (DeepSpeed JSON, accelerate YAML, torchtitan TOML, stack YAML with ``framework:``). Every reader
returns a kg.inputs.training.job.TrainingJob.
"""
from __future__ import annotations

from kg.inputs.training.command import detect_command, is_training_command, parse_training_command
from kg.inputs.training.job import FRAMEWORKS, SETTINGS, TrainingJob
from kg.inputs.training.stackfile import is_training_file, load_training_file

__all__ = ["FRAMEWORKS", "SETTINGS", "TrainingJob", "detect_command", "is_training_command", "is_training_file",
           "load_training_file", "parse_training_command"]
