"""Closures kg.engine.expr's ``_build`` makes for the commonest nodes of a sweep's expressions, without a call per
constant, a loop or a list: a comparison with one operator, ``x in <a literal of constants>``, ``a and b`` /
``a or b`` and a call with one or two arguments.

The generated engine-check rows test values against literals of up to ~50 constants (``kv_cache_dtype not in
('auto', 'bf16', ...)``); the general closures built that list for every evaluation, one call per constant, and ran
a chained comparison's loop and type check (which does nothing for ``==``, ``!=``, ``in``, ``not in``). The
closures here return the same values and raise the same errors (tests/test_expr_trees.py compares ``_build`` with
the tree walker on every shipped expression). This module imports nothing of kg.engine.expr: ``_build`` passes in
what they use.
"""
from __future__ import annotations

import ast
from typing import Any, Callable

ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)  # the comparisons expr._check_types checks (== != in, not in: nothing)


def constant(value: Any) -> Callable[..., Any]:
    """A constant node's closure."""
    return lambda f, fns: value


def _constants(p: list[Any]) -> list[Any] | None:
    """The values of a ``list`` / ``set`` node (``plain`` form) whose elements are all constants, in order; else
    None."""
    if p[0] in ("list", "set") and all(x[0] == "c" for x in p[1]):
        return [x[1] for x in p[1]]
    return None


def literal(p: list[Any]) -> Callable[..., Any] | None:
    """The closure of a ``list`` / ``set`` node of constants: a new list (set) of them each time; else None."""
    consts = _constants(p)
    if consts is None:
        return None
    if p[0] == "list":
        return lambda f, fns: consts.copy()
    return lambda f, fns: set(consts)


def compare_one(first: Callable[..., Any], op_t: type, right: list[Any], build: Callable[..., Any],
                check_types: Callable[..., None], cmp: dict[type, Callable[[Any, Any], Any]]) -> Callable[..., Any]:
    """The closure of ``<first> <op_t> <right>`` (``right`` a node, built with ``build``): what the chained form
    returns, True or False. ``in`` / ``not in`` a literal of constants looks the value up in a frozenset of them
    (the constants are numbers, strings, booleans or None, whose hash agrees with ``==``, so a hashable value is
    found exactly when the list or set holds an equal one); an unhashable value is looked for in the list (a list
    literal, as before) or raises TypeError as the set did (a set literal)."""
    op = cmp[op_t]
    consts = _constants(right) if op_t is ast.In or op_t is ast.NotIn else None
    if consts is not None:
        table, negate, scan = frozenset(consts), op_t is ast.NotIn, right[0] == "list"

        def member(f: Any, fns: Any) -> bool:
            a = first(f, fns)
            try:
                hit = a in table
            except TypeError:
                if not scan:
                    raise
                hit = a in consts
            return not hit if negate else hit
        return member
    second = build(right)
    if op_t in ORDER:
        def order(f: Any, fns: Any) -> bool:
            a, b = first(f, fns), second(f, fns)
            ta, tb = a.__class__, b.__class__
            if not (((ta is int or ta is float) and (tb is int or tb is float)) or (ta is str and tb is str)):
                check_types(op_t, a, b)  # raises unless both are numbers or both strings (what it checks)
            return True if op(a, b) else False
        return order

    def compare(f: Any, fns: Any) -> bool:
        return True if op(first(f, fns), second(f, fns)) else False
    return compare


def pair(kind: str, a: Callable[..., Any], b: Callable[..., Any]) -> Callable[..., Any]:
    """``a and b`` / ``a or b``: the deciding operand, as the loop over operands returns it."""
    if kind == "and":
        return lambda f, fns: a(f, fns) and b(f, fns)
    return lambda f, fns: a(f, fns) or b(f, fns)


def call(fname: str, args: tuple[Callable[..., Any], ...]) -> Callable[..., Any]:
    """``fname(args...)``: the function looked up, then the arguments evaluated in order, as with a list of them."""
    if len(args) == 1:
        x, = args
        return lambda f, fns: fns[fname](x(f, fns))
    if len(args) == 2:
        x, y = args
        return lambda f, fns: fns[fname](x(f, fns), y(f, fns))
    return lambda f, fns: fns[fname](*[c(f, fns) for c in args])
