"""The compiled methods of kg's dataclasses, kept between runs beside kg's own bytecode cache.

CPython writes each dataclass's ``__init__``, ``__repr__`` and ``__eq__`` (frozen: ``__setattr__``,
``__delattr__``, ``__hash__``) as source text and compiles that text every time the class is created
(``dataclasses._create_fn`` calls ``exec(text, globals, ns)``): a warm ``optkg check`` creates ~40 classes from
162 texts (~100 KB), ~11 % of its CPU time (19 of 170 ms), most of it in the parser. The text depends only on
the class's fields and options, so its compiled code can be kept as Python keeps a module's: ``install`` points
the name ``exec`` in the ``dataclasses`` module at ``_exec``, which hands ``exec`` the code object compiled from
exactly that text (found by the text itself) instead of the text. Same code, same globals, same namespace: the
methods are those CPython makes (tests/test_class_code.py compares them).

Only texts of kg's own modules are kept. The code objects live in one file beside kg's bytecode, where Python
writes it (``importlib.util.cache_from_source``: ``kg/__pycache__``, or under ``sys.pycache_prefix``), marshalled
behind the interpreter's bytecode magic number like a ``.pyc``, and only when Python may write bytecode (not
with ``PYTHONDONTWRITEBYTECODE`` or ``-B``): whoever can write that folder can already write kg's ``.pyc`` files.
A missing, foreign or damaged file only means the texts are compiled as before. ``save`` (called by
``kg.cli.main``) writes new texts once per process, atomically.
"""
from __future__ import annotations

import marshal
import os
import sys
from typing import Any

MAX_ENTRIES = 2000  # texts kept in the file (kg's classes make ~400): a file that grew past it starts again
_code: dict[str, Any] | None = None  # text -> code object, read from the file on first use
_new: list[str] = []  # texts compiled by this process, not in the file yet


def _path() -> str | None:
    if sys.flags.optimize:  # -O strips asserts from code: keep one file, for the usual interpreter
        return None
    try:
        from importlib.util import cache_from_source
        init = cache_from_source(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                              "__init__.py"))
    except (ImportError, NotImplementedError, ValueError):  # no cache_tag: an interpreter without bytecode caching
        return None
    return os.path.join(os.path.dirname(init), f"dataclass-methods.{sys.implementation.cache_tag}.bin")


def _load() -> dict[str, Any]:
    global _code
    if _code is None:
        _code = {}
        path = _path()
        if path is not None:
            try:
                with open(path, "rb") as fh:
                    raw = fh.read()
                from importlib.util import MAGIC_NUMBER
                if raw[:len(MAGIC_NUMBER)] == MAGIC_NUMBER:
                    data = marshal.loads(raw[len(MAGIC_NUMBER):])
                    if isinstance(data, dict):
                        code_type = type(_load.__code__)
                        _code = {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, code_type)}
            except (OSError, ValueError, EOFError, TypeError):  # missing or damaged: compile the texts
                _code = {}
    return _code


def _exec(source: Any, globals: Any = None, locals: Any = None) -> None:
    """``exec`` as ``dataclasses`` calls it; a method text of a kg module runs from its kept code object."""
    if type(source) is str:
        # what exec(source) in dataclasses compiles: file name "<string>", none of this module's __future__ flags
        if type(globals) is dict and str(globals.get("__name__", "")).startswith("kg."):
            code = _load().get(source)
            if code is None:
                code = _code[source] = compile(source, "<string>", "exec", dont_inherit=True)
                _new.append(source)
            source = code
        else:
            source = compile(source, "<string>", "exec", dont_inherit=True)
    exec(source, globals, locals)


def install() -> None:
    """Make ``dataclasses`` run kg's method texts from kept code (module doc); once, and never over another's hook."""
    import dataclasses
    if "exec" not in vars(dataclasses) and _path() is not None:
        dataclasses.exec = _exec


def save() -> None:
    """Write the texts compiled by this process into the file (module doc); nothing when there are none or when
    Python may not write bytecode. A folder that cannot be written only costs the compile next time."""
    if not _new or sys.dont_write_bytecode:
        return
    path = _path()
    if path is None:
        return
    keep = _code if len(_code) <= MAX_ENTRIES else {k: _code[k] for k in _new}
    _new.clear()
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        from importlib.util import MAGIC_NUMBER
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(MAGIC_NUMBER + marshal.dumps(keep))
        os.replace(tmp, path)
    except (OSError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass
