"""SGLang launch commands: ``python -m sglang.launch_server --model-path <model> ...`` and ``sglang serve``.

Flags, defaults and environment variables come from ``catalog/engines/sglang.yaml`` (SGLang's
``python/sglang/srt/server_args.py``); the parsing itself is ``kg.inputs.launch.argv``.
"""
from __future__ import annotations

from typing import Any, Callable

from kg.inputs.launch.argv import parse_with_table, parse_words, table_for
from kg.inputs.launch.registry import Launch, Launcher, apply_context, register
from kg.inputs.modelcfg import resolve_model
from kg.inputs.stack import Stack
from kg.knowledge.catalog import Catalog

ENGINE = "sglang"


def parse(command: str, catalog: Catalog, model_override: str | None = None, flag_label: str | None = None,
          resolver: Callable[[str], Any] = resolve_model) -> Stack:
    """A Stack from an SGLang launch command (see ``argv.parse_with_table`` for the rules and errors)."""
    return parse_with_table(command, catalog, ENGINE, model_override, flag_label, resolver)


def parse_launch(launch: Launch) -> Stack:
    """A Stack from a detected SGLang launch."""
    st = parse_words(list(launch.args), launch.catalog, ENGINE, label=launch.label, env=launch.env,
                     launch=launch.prefix, model_override=launch.model_override,
                     resolver=launch.resolver or resolve_model, engine_version=launch.engine_version)
    return apply_context(st, launch)


register(Launcher(name=ENGINE, kind="serving", programs=lambda: table_for(ENGINE, "sglang")["programs"],
                  parse=parse_launch))
