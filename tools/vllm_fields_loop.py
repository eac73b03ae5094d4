"""A loop over a config object's fields, walked once per field (checkgen's ``unrolled`` takes constant lists only).

0.34.0 engine/arg_utils.py:2845-2855 (0.33.0 :2808-2818) copies the top-level ``--ir-op-priority`` into
``--kernel-config``'s::

    for op_name, op_priority in asdict(self.ir_op_priority).items():
        if not op_priority:
            continue
        if getattr(kernel_config.ir_op_priority, op_name):
            raise ValueError(...)  # :2852 [:2815], both name the op
        setattr(kernel_config.ir_op_priority, op_name, op_priority)

``asdict(X).items()`` of a value the walk holds as an object of a ``@config`` / dataclass class with known fields is
walked once per field, in declaration order, with the target's first name the field's name (a string literal) and
its second the field's value. ``if C: continue`` at the head of the body is modelled (the rest of that field's
walk is under ``not C``); a loop with any other ``continue``, a ``break``, a ``return`` or an ``else`` is left to the
other loop walks. Exact: the fields and their order are the class's own, and each field is walked as the engine
walks it.
"""
from __future__ import annotations

import ast
from typing import Any

import checkgen as cg

MAX_FIELDS = 64


def _target(s: ast.For) -> tuple[ast.Name, ast.Name] | None:
    t = s.target
    if isinstance(t, ast.Tuple) and len(t.elts) == 2 and all(isinstance(e, ast.Name) for e in t.elts):
        return t.elts[0], t.elts[1]
    return None


def _split(body: list[ast.stmt]) -> tuple[list[ast.expr], list[ast.stmt]] | None:
    """(the tests of the leading ``if C: continue`` statements, the rest); None where the rest leaves the loop early."""
    skips: list[ast.expr] = []
    i = 0
    while i < len(body) and isinstance(body[i], ast.If) and not body[i].orelse and len(body[i].body) == 1 \
            and isinstance(body[i].body[0], ast.Continue):
        skips.append(body[i].test)
        i += 1
    rest = body[i:]
    for n in ast.walk(ast.Module(body=rest, type_ignores=[])):
        if isinstance(n, (ast.Continue, ast.Break, ast.Return, ast.Yield, ast.YieldFrom, ast.FunctionDef,
                          ast.Lambda, ast.ClassDef)):
            return None
    return skips, rest


def fields_loop(w: Any, s: ast.For, fr: cg.Frame, pc: list[str]) -> bool:
    """Walk ``s`` once per field (module doc); False (nothing walked) for any other loop."""
    it = s.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "items"
            and not it.args and isinstance(it.func.value, ast.Call)
            and ast.unparse(it.func.value.func) in ("asdict", "dataclasses.asdict")
            and len(it.func.value.args) == 1 and not it.func.value.keywords):
        return False
    names, split = _target(s), _split(s.body)
    if s.orelse or isinstance(s, ast.AsyncFor) or names is None or split is None:
        return False
    try:
        obj = w.value(it.func.value.args[0], fr, pc)
    except cg.Untranslatable:
        return False
    if not isinstance(obj, cg.Obj) or isinstance(obj, cg.ObjIf) or not obj.cls:
        return False
    fields = w.dataclass_fields(obj.cls, obj.path)
    if not fields or len(fields) > MAX_FIELDS:
        return False
    skips, rest = split
    for f in fields:
        w.assign(names[0], w.literal(f), fr, pc)
        try:
            v = w.get_attr(obj, f, pc)
        except cg.Untranslatable:
            v = cg.TAINT
        w.assign(names[1], v, fr, pc)
        here = list(pc)
        for t in skips:
            c = w.test(t, fr, here)
            here.append(c if cg.is_unknown(c) else f"(not {c})")
        w.run(rest, fr, here)
    return True
