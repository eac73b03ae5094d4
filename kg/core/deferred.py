"""A standard-library module that a command-line process loads only when something reads from it.

``dataclasses`` imports ``inspect`` at its top (with ``ast``, ``dis``, ``tokenize``, ``linecache``: ~30 M
instructions, a tenth of ``optkg kv``: issue 31) but uses it only to write a docstring for a dataclass that has
none (``inspect.signature``); every dataclass in kg has a docstring. ``defer("inspect")`` puts a stand-in module in
``sys.modules``: ``import inspect`` binds the stand-in, and the first attribute read from it imports the real
module, copies its namespace into the stand-in (so earlier importers see every name) and puts the real module
in ``sys.modules``. A program that uses the module gets it as before, one attribute read later.

durable-rules reads one function of ``inspect`` for every action it registers: ``inspect.ismethod(f)``, which is
``isinstance(f, types.MethodType)``; the stand-in answers that one itself (``defer``'s ``same``), so a ``check``
does not load ``inspect`` either (~14 M instructions).

Only ``kg.cli`` calls this, before its first import of ``dataclasses``, and only when the module is not loaded
yet (a test session or an embedding program already has it: nothing changes there).
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import types


class _Deferred(types.ModuleType):
    """Stands in for a module until an attribute is read from it."""

    def __getattr__(self, attr: str):
        name = self.__name__
        if sys.modules.get(name) is self:
            del sys.modules[name]
        real = importlib.import_module(name)
        self.__dict__.update(real.__dict__)
        return getattr(real, attr)


def defer(name: str, **same: object) -> None:
    """Put a stand-in for the top-level module ``name`` in ``sys.modules`` unless the module is loaded already.
    ``same``: attributes the stand-in answers itself, each doing exactly what the module's attribute of that name
    does (reading one of them does not load the module; the module's own replace them once it is loaded)."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None:
        return
    stand_in = _Deferred(name)
    stand_in.__dict__.update(same)
    # the real module's spec (not initializing): `import name` takes the stand-in as loaded, and
    # importlib.util.find_spec(name) still answers while the stand-in is in place
    stand_in.__spec__ = spec
    sys.modules[name] = stand_in
