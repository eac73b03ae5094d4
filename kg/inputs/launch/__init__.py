"""Launch inputs: one module per launch format (``vllm``, ``sglang``), a shared argv helper (``argv``).

``parse_command(command, catalog, engine, ...)`` parses a pasted launch command of a named engine
into a :class:`kg.inputs.stack.Stack`.
"""
from __future__ import annotations

from typing import Any, Callable

from kg.core.errors import OptkgError
from kg.inputs.launch import sglang, vllm
from kg.inputs.modelcfg import resolve_model
from kg.inputs.stack import Stack
from kg.knowledge.catalog import Catalog

# engine id -> parser module (each has ``parse(command, catalog, model_override, flag_label, resolver)``)
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
