"""SGLang launch commands: ``python -m sglang.launch_server --model-path <model> ...`` and ``sglang serve``.

Flags, defaults and environment variables come from ``catalog/engines/sglang.yaml`` (SGLang's
``python/sglang/srt/server_args.py``); the parsing itself is ``kg.inputs.launch.argv``.
"""
from __future__ import annotations

from typing import Any, Callable

from kg.inputs.launch.argv import parse_with_table
from kg.inputs.modelcfg import resolve_model
from kg.inputs.stack import Stack
from kg.knowledge.catalog import Catalog

ENGINE = "sglang"


def parse(command: str, catalog: Catalog, model_override: str | None = None, flag_label: str | None = None,
          resolver: Callable[[str], Any] = resolve_model) -> Stack:
    """A Stack from an SGLang launch command (see ``argv.parse_with_table`` for the rules and errors)."""
    return parse_with_table(command, catalog, ENGINE, model_override, flag_label, resolver)
