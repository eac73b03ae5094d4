"""SGLang launch commands: ``python -m sglang.launch_server --model-path <model> ...`` and ``sglang serve``.

Flags, defaults and environment variables come from ``catalog/engines/sglang.yaml`` (SGLang's
``python/sglang/srt/server_args.py``); the parsing itself is ``kg.inputs.launch.argv``.
"""
from __future__ import annotations

import json
from kg.core.errors import OptkgError
from kg.core.yamlio import load_yaml
from kg.inputs.launch.registry import Launch, resolve_file


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
