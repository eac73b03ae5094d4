"""Launch inputs: one module per launch format, found through one registry.

``vllm``, ``sglang``, ``trtllm``, ``lmdeploy`` (engine commands), ``training`` (torchrun, deepspeed,
accelerate launch, ... -> a TrainingJob), ``docker`` (``docker run IMAGE
ARGS``), a shared argv helper (``argv``) and the program registry (``registry``).
``parse_launch(command, catalog, base_dir=...)`` detects the format of any pasted command;
``parse_command(command, catalog, engine, ...)`` parses a command of a named engine (``--vllm`` /
``--sglang``, which also take a bare list of flags).
"""
from __future__ import annotations

from typing import Any, Callable

from kg.core.errors import OptkgError
from kg.inputs.launch import docker, lmdeploy, sglang, training, trtllm, vllm  # noqa: F401  (each registers itself)
from kg.inputs.launch.registry import Launch, Launcher, detect, launchers, parse_launch, register
from kg.inputs.modelcfg import resolve_model
from kg.inputs.stack import Stack
from kg.knowledge.catalog import Catalog

__all__ = ["Launch", "Launcher", "detect", "launchers", "parse_command", "parse_launch", "register"]

# engine id -> parser module with ``parse(command, catalog, model_override, flag_label, resolver)``
ENGINE_PARSERS = {vllm.ENGINE: vllm, sglang.ENGINE: sglang}


def parse_command(command: str, catalog: Catalog, engine: str, model_override: str | None = None,
                  flag_label: str | None = None, resolver: Callable[[str], Any] = resolve_model) -> Stack:
    """Parse a launch command of ``engine`` ('vllm' or 'sglang') into a Stack.

    ``model_override`` is a config.json path that replaces the command's model; ``flag_label`` is
    how errors name the input (default ``--<engine>``). Raises OptkgError naming the flag.
    """
    mod = ENGINE_PARSERS.get(engine)
    if mod is None:
        raise OptkgError(f"{flag_label or '--' + engine}: no flag table for engine '{engine}'")
    return mod.parse(command, catalog, model_override, flag_label, resolver)
