"""Launch inputs: the launch formats that are not one engine's, and the registry every format joins.

``argv`` (the table-driven flag parser every engine's launch reader uses), ``registry`` (program patterns ->
launch format; whole-file formats), ``docker`` (``docker run IMAGE ARGS``), ``kubernetes`` / ``compose`` /
``container`` (the serving containers a manifest describes), ``training`` (torchrun, deepspeed, accelerate
launch, ... -> a TrainingJob) and ``files`` (what kind of file ``optkg check FILE`` was given). Each serving
engine's own launch reader is ``kg.engines.<engine>.launch``, registered by ``kg.engines``; read commands and
files through ``kg.engines.launch`` (``parse_launch``, ``parse_command``, ``stacks_from_file``), which makes
sure every engine has joined the registry.
"""
from __future__ import annotations

from kg.inputs.launch import docker, training  # noqa: F401  (each registers itself)
from kg.inputs.launch.registry import Launch, Launcher, launchers, register

__all__ = ["Launch", "Launcher", "launchers", "register"]
