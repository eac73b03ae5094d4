"""Serving engines: one package per engine (``kg/engines/<name>/``), found by name, over one protocol.

``get(name)`` returns the engine's protocol object (``kg.engines.<name>.ENGINE``, a ``kg.engines.base.Engine``),
importing its package on first use; a name without a package, or no name, gets ``kg.engines.base.UNKNOWN`` (the
generic behaviour), so generic code never asks which engine a stack runs. ``of(stack)`` is ``get(stack.engine)``;
``names()`` lists the packages.

``kg.engines.launch`` holds the entry points that detect a command or file and hand it to its engine
(``parse_launch``, ``parse_command``, ``stacks_from_file``); importing it registers every engine's launch reader
with ``kg.inputs.launch.registry`` (the programs are read from ``catalog/engines/<name>.yaml`` when a command is
detected) and its whole-file formats. Importing this package itself stays cheap (``optkg kv`` imports one engine's
module and nothing of the launch readers).

Not to be confused with ``kg.engine`` (the rule engine: expressions, rule files, durable-rules).
"""
from __future__ import annotations

import importlib
import os
from functools import lru_cache
from typing import Any

from kg.engines.base import UNKNOWN, Engine, NotEvaluable, SpeedBackend

__all__ = ["Engine", "NotEvaluable", "SpeedBackend", "UNKNOWN", "get", "names", "of"]


@lru_cache(maxsize=1)
def names() -> tuple[str, ...]:
    """The engine packages under kg/engines/ (folders with an ``__init__.py``), sorted. A directory scan, as
    ``pkgutil.iter_modules`` would make it, without importing pkgutil for every ``optkg kv``."""
    found = set()
    for folder in __path__:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        found.update(e.name for e in entries if e.name.isidentifier() and e.is_dir()
                     and os.path.isfile(os.path.join(e.path, "__init__.py")))
    return tuple(sorted(found))


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
