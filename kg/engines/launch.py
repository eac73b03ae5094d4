"""Reading launch commands and files through their engine: the entry points every caller uses.

``parse_launch(command, catalog, ...)`` detects the launch format of any pasted command (an engine, ``docker
run``, a training launcher; kg.inputs.launch.registry) and parses it; ``detect`` returns the launcher and the
``Launch`` without parsing; ``parse_command(command, catalog, engine, ...)`` reads a command of a named engine
(``--vllm`` / ``--sglang``, which also take a bare list of flags) with that engine's ``parse_command``;
``stacks_from_file(path, catalog, ...)`` reads a stack file, manifest, compose file or an engine's own file
(kg.inputs.launch.files). Importing this module registers every engine package with the launch registry.
"""
from __future__ import annotations

from typing import Any, Callable

from kg.engines import get, names
from kg.inputs.launch.files import stacks_from_file
from kg.inputs.launch.registry import Launcher, detect, parse_launch, register, register_file_format
from kg.inputs.modelcfg import resolve_model

__all__ = ["detect", "parse_command", "parse_launch", "stacks_from_file"]


def _programs(name: str) -> list[list[str]]:
    from kg.inputs.stack import _engine_tables
    return list((_engine_tables().get(name) or {}).get("programs") or [])


def _register() -> None:
    """Every engine package's launch reader and whole-file formats join the launch registry (once, on import)."""
    for name in names():
        eng = get(name)  # the package's __init__ only: its modules are imported when a command is read
        register(Launcher(name=name, kind="serving", programs=lambda n=name: _programs(n), parse=eng.read_launch))
        for fmt in eng.file_formats():
            register_file_format(fmt)


_register()


def parse_command(command: str, catalog: Any, engine: str, model_override: str | None = None,
                  flag_label: str | None = None, resolver: Callable[[str], Any] = resolve_model) -> Any:
    """A Stack from a command of ``engine`` (or a bare list of its flags). ``model_override`` is a config.json
    path that replaces the command's model; ``flag_label`` is how errors name the input (default ``--<engine>``).
    Raises OptkgError naming the flag, or saying that ``engine`` has no flag table."""
    return get(engine).parse_command(command, catalog, model_override, flag_label or f"--{engine}", resolver)
