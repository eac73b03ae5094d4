"""Reading launch commands and files through their engine: the entry points every caller uses.

``parse_launch(command, catalog, ...)`` detects the launch format of any pasted command (an engine, ``docker
run``, a training launcher; kg.inputs.launch.registry) and parses it; ``detect`` returns the launcher and the
``Launch`` without parsing; ``parse_command(command, catalog, engine, ...)`` reads a command of a named engine
(``--vllm`` / ``--sglang``, which also take a bare list of flags) with that engine's ``parse_command``;
``stacks_from_file(path, catalog, ...)`` reads a stack file, manifest, compose file or an engine's own file
(kg.inputs.launch.files). This module sits above every engine package, so importing it has registered them all.
"""
from __future__ import annotations

from typing import Any, Callable

from kg.engines import get
from kg.inputs.launch.files import stacks_from_file
from kg.inputs.launch.registry import detect, parse_launch
from kg.inputs.modelcfg import resolve_model

__all__ = ["detect", "parse_command", "parse_launch", "stacks_from_file"]


def parse_command(command: str, catalog: Any, engine: str, model_override: str | None = None,
                  flag_label: str | None = None, resolver: Callable[[str], Any] = resolve_model) -> Any:
    """A Stack from a command of ``engine`` (or a bare list of its flags). ``model_override`` is a config.json
    path that replaces the command's model; ``flag_label`` is how errors name the input (default ``--<engine>``).
    Raises OptkgError naming the flag, or saying that ``engine`` has no flag table."""
    return get(engine).parse_command(command, catalog, model_override, flag_label or f"--{engine}", resolver)
