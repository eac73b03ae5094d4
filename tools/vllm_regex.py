"""Regular expressions in vLLM's startup checks, as rows (kg/engine/expr.py's fullmatch and is_regex).

1. ``NAME.fullmatch(x)`` where NAME is a module-level ``re.compile(r"...")`` of the release (0.34.0
   config/parallel.py:35 ``_NUMACTL_CPUSET_PATTERN``, checked at :544-548; 0.33.0 :35, :506): ``fullmatch('<the
   pattern>', x)``. The pattern is the release's own literal, and only one in the syntax Python's re and the `regex`
   module vLLM imports (``import regex as re``, parallel.py:10) read alike: literals, ``\\d \\w \\s`` and escaped
   punctuation, sets, repeats, ``(...)`` and ``(?:...)`` groups, ``^ $ |``. Anything else: no value (not translated).
2. ``try: re.compile(X) except re.error: raise ...`` (0.34.0 config/quantization.py:248-253, a ``--quantization-
   config`` targets key ``re:<pattern>``; 0.33.0 :171-176): the handler runs where ``not is_regex(X)``.
"""
from __future__ import annotations

import ast
import re
from typing import Any

import checkgen as cg

# the pattern syntax both engines read alike: any character but a backslash or '(', an escaped class or punctuation
# mark, '(' not opening an extension, or '(?:'
_SHARED = re.compile(r"(?:[^\\(]|\\[dDwWsS.\-+*?()\[\]{}|^$\\/,:]|\((?!\?)|\(\?:)*")


def _regex_module(w: Any, path: str) -> bool:
    m = w.modules.get(path)
    return m is not None and m.imports.get("re") in ("re", "regex")


def compiled_pattern(w: Any, name: str, path: str) -> str | None:
    """The pattern of the module-level ``name = re.compile(r"...")`` (no flags) of ``path``, if its syntax is shared."""
    m = w.modules.get(path)
    if m is None or not _regex_module(w, path):
        return None
    for s in m.tree.body:
        if (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                and s.targets[0].id == name and isinstance(s.value, ast.Call)
                and ast.unparse(s.value.func) == "re.compile" and len(s.value.args) == 1 and not s.value.keywords
                and isinstance(s.value.args[0], ast.Constant) and isinstance(s.value.args[0].value, str)):
            p = s.value.args[0].value
            if not _SHARED.fullmatch(p):
                return None
            try:
                re.compile(p)
            except re.error:
                return None
            return p
    return None


def value_hook(w: Any, node: ast.AST, fr: cg.Frame, pc: list[str]) -> Any:
    """``NAME.fullmatch(x)`` of a module's compiled pattern -> ``fullmatch('<pattern>', x)``; None otherwise."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "fullmatch"
            and isinstance(node.func.value, ast.Name) and len(node.args) == 1 and not node.keywords
            and node.func.value.id not in fr.locals):
        return None
    p = compiled_pattern(w, node.func.value.id, fr.path)
    if p is None:
        return None
    try:
        return cg.Expr(f"fullmatch({p!r}, {w.text(node.args[0], fr, pc)})")
    except cg.Untranslatable:
        return None


def try_compile(w: Any, s: ast.Try, fr: cg.Frame, pc: list[str]) -> bool:
    """Walk ``try: re.compile(X) except re.error [as e]: <body>`` with the handler under ``not is_regex(X)``; False
    (not handled) for any other try statement."""
    if not (len(s.body) == 1 and isinstance(s.body[0], ast.Expr) and isinstance(s.body[0].value, ast.Call)
            and len(s.handlers) == 1 and not s.orelse and not s.finalbody and _regex_module(w, fr.path)):
        return False
    call, h = s.body[0].value, s.handlers[0]
    if not (ast.unparse(call.func) == "re.compile" and len(call.args) == 1 and not call.keywords
            and h.type is not None and ast.unparse(h.type) == "re.error"):
        return False
    w.lineno = s.lineno
    try:
        x = w.text(call.args[0], fr, pc)
    except cg.Untranslatable:
        return False
    if h.name:
        w.assign(ast.Name(h.name, ast.Store()), cg.TAINT, fr, pc)
    w.run(h.body, fr, pc + [f"(not is_regex({x}))"])
    return True
