"""LMDeploy launch commands: ``lmdeploy serve api_server <model> ...``.

Flags and defaults come from ``catalog/engines/lmdeploy.yaml`` (lmdeploy 0.18.0
``lmdeploy/cli/serve.py`` and ``lmdeploy/cli/utils.py``); ``--quant-policy`` 0/4/8/16/17 (or
none/int4/int8/fp8/fp8_e5m2) becomes the stack's ``kv_cache_dtype``. Parsing is ``kg.inputs.launch.argv``.
"""
from __future__ import annotations

from kg.inputs.launch.argv import parse_words, table_for
from kg.inputs.launch.registry import Launch, Launcher, apply_context, register
from kg.inputs.modelcfg import resolve_model
from kg.inputs.stack import Stack

ENGINE = "lmdeploy"


def parse_launch(launch: Launch) -> Stack:
    """A Stack from a detected ``lmdeploy serve api_server`` launch."""
    st = parse_words(list(launch.args), launch.catalog, ENGINE, label=launch.label, env=launch.env,
                     launch=launch.prefix, model_override=launch.model_override,
                     resolver=launch.resolver or resolve_model, engine_version=launch.engine_version)
    return apply_context(st, launch)


register(Launcher(name=ENGINE, kind="serving", programs=lambda: table_for(ENGINE, "lmdeploy")["programs"],
                  parse=parse_launch))
