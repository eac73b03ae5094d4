"""Serving engines: one package per engine (``kg/engines/<name>/``), found by name, over one protocol.

``get(name)`` returns the engine's protocol object (``kg.engines.<name>.ENGINE``, a ``kg.engines.base.Engine``),
importing its package on first use; a name without a package, or no name, gets ``kg.engines.base.UNKNOWN`` (the
generic behaviour), so generic code never asks which engine a stack runs. ``of(stack)`` is ``get(stack.engine)``;
``names()`` lists the packages.

Importing this package registers every engine's launch reader with ``kg.inputs.launch.registry`` (the programs
are read from ``catalog/engines/<name>.yaml`` when a command is detected; the engine's package is imported when
one of its commands is read) and its whole-file formats; ``kg.engines.launch`` holds the entry points that
detect a command or file and hand it to its engine (``parse_launch``, ``parse_command``, ``stacks_from_file``).

Not to be confused with ``kg.engine`` (the rule engine: expressions, rule files, durable-rules).
"""
from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from typing import Any

from kg.engines.base import UNKNOWN, Engine, NotEvaluable, SpeedBackend
from kg.inputs.launch.registry import Launcher, register, register_file_format

__all__ = ["Engine", "NotEvaluable", "SpeedBackend", "UNKNOWN", "get", "names", "of"]


@lru_cache(maxsize=1)
def names() -> tuple[str, ...]:
    """The engine packages under kg/engines/, sorted."""
    return tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if m.ispkg))


_ENGINES: dict[str, Engine] = {}


def get(name: str | None) -> Engine:
    """The protocol object of engine ``name`` (``UNKNOWN`` for no name or a name without a package)."""
    if not name or name not in names():
        return UNKNOWN
    eng = _ENGINES.get(name)
    if eng is None:
        eng = _ENGINES[name] = importlib.import_module(f"{__name__}.{name}").ENGINE
    return eng


def of(stack: Any) -> Engine:
    """The engine of ``stack`` (anything with an ``engine`` attribute)."""
    return get(getattr(stack, "engine", None))


def _programs(name: str) -> list[list[str]]:
    from kg.inputs.stack import _engine_tables
    return list((_engine_tables().get(name) or {}).get("programs") or [])


def _register() -> None:
    for name in names():
        eng = get(name)  # the package's __init__ only: its modules are imported when a command is read
        register(Launcher(name=name, kind="serving", programs=lambda n=name: _programs(n), parse=eng.read_launch))
        for fmt in eng.file_formats():
            register_file_format(fmt)


_register()
