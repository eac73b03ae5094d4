"""vLLM launch commands: ``vllm serve <model> ...`` and ``python -m vllm.entrypoints.openai.api_server``.

Flags, defaults and environment variables come from ``catalog/engines/vllm.yaml`` (each entry
cites vLLM's ``vllm/engine/arg_utils.py``); the parsing itself is ``kg.inputs.launch.argv``.
``--config X.yaml`` is expanded as vLLM's FlexibleArgumentParser does (vllm 0.33.0
``vllm/utils/argparse_utils.py:551-672``): each key becomes ``--key value`` (``true`` -> ``--key``,
``false`` -> ``--no-key`` where that flag exists, a mapping -> its JSON), inserted right after the
positional model, so flags on the command line win over the file.
"""
from __future__ import annotations

import json

from kg.core.errors import OptkgError
from kg.core.yamlio import load_yaml
from kg.inputs.launch.registry import Launch, resolve_file


def config_words(path: str, launch: Launch) -> list[str]:
    """The ``--key value`` words of a ``vllm serve --config`` YAML file (read relative to the launch's directory)."""
    doc = load_yaml(resolve_file(path, launch))
    if not isinstance(doc.data, dict):
        raise OptkgError(f"{doc.path}:1: a vLLM --config file must be a mapping of engine arguments")
    out: list[str] = []
    for key, value in doc.data.items():
        k = f"--{key}"
        if isinstance(value, bool):
            if value:
                out.append(k)
            else:
                out.append(f"--no-{key}")
        elif isinstance(value, list):
            if value:
                out += [k, *map(str, value)]
        elif isinstance(value, dict):
            out += [k, json.dumps(value)]
        elif value is not None:
            out += [k, str(value)]
    return out


def expand_config(args: list[str], launch: Launch) -> list[str]:
    """``args`` with a ``--config FILE`` replaced by the file's words, after the positional model."""
    if "--config" not in args:
        return args
    i = args.index("--config")
    if i + 1 >= len(args):
        raise OptkgError(f"{launch.label} --config: expects a YAML file")
    cfg = config_words(args[i + 1], launch)
    rest = args[:i] + args[i + 2:]
    if rest and not rest[0].startswith("-"):
        return rest[:1] + cfg + rest[1:]
    return cfg + rest
