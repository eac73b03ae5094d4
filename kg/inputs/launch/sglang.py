"""SGLang launch commands: ``python -m sglang.launch_server --model-path <model> ...`` and ``sglang serve``.

Flags, defaults and environment variables come from ``catalog/engines/sglang.yaml`` (SGLang's
``python/sglang/srt/server_args.py``); the parsing itself is ``kg.inputs.launch.argv``.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from kg.core.errors import OptkgError
from kg.core.yamlio import load_yaml
from kg.inputs.launch.argv import parse_with_table, parse_words, table_for
from kg.inputs.launch.registry import Launch, Launcher, apply_context, register, resolve_file
from kg.inputs.modelcfg import resolve_model
from kg.inputs.stack import Stack
from kg.knowledge.catalog import Catalog

ENGINE = "sglang"


def parse(command: str, catalog: Catalog, model_override: str | None = None, flag_label: str | None = None,
          resolver: Callable[[str], Any] = resolve_model) -> Stack:
    """A Stack from an SGLang launch command (see ``argv.parse_with_table`` for the rules and errors)."""
    return parse_with_table(command, catalog, ENGINE, model_override, flag_label, resolver)


def expand_config(args: list[str], launch: Launch) -> list[str]:
    """``args`` with ``--config FILE`` (YAML) expanded as SGLang's ConfigArgumentMerger does (sglang 0.5.23
    ``sglang/srt/utils/server_args_config_parser.py:75-210``): each key becomes ``--key value`` spelled as
    written (``true`` -> ``--key``, ``false`` -> nothing, a list -> its items, a mapping -> JSON), and the
    file's words go before the command line's, so flags on the command line win."""
    if "--config" not in args:
        return args
    i = args.index("--config")
    if i + 1 >= len(args):
        raise OptkgError(f"{launch.label} --config: expects a YAML file")
    doc = load_yaml(resolve_file(args[i + 1], launch))
    if not isinstance(doc.data, dict):
        raise OptkgError(f"{doc.path}:1: an SGLang --config file must be a mapping of server arguments")
    words: list[str] = []
    for key, value in doc.data.items():
        if isinstance(value, bool):
            words += [f"--{key}"] if value else []
        elif isinstance(value, list):
            words += [f"--{key}", *map(str, value)] if value else []
        elif isinstance(value, dict):
            words += [f"--{key}", json.dumps(value)]
        elif value is not None:
            words += [f"--{key}", str(value)]
    return words + args[:i] + args[i + 2:]


def parse_launch(launch: Launch) -> Stack:
    """A Stack from a detected SGLang launch (``--config FILE`` expanded first)."""
    st = parse_words(expand_config(list(launch.args), launch), launch.catalog, ENGINE, label=launch.label, env=launch.env,
                     launch=launch.prefix, model_override=launch.model_override,
                     resolver=launch.resolver or resolve_model, engine_version=launch.engine_version)
    return apply_context(st, launch)


register(Launcher(name=ENGINE, kind="serving", programs=lambda: table_for(ENGINE, "sglang")["programs"],
                  parse=parse_launch))
