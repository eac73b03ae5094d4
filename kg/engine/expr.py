"""A small, safe expression language for rule conditions and numbers (no ``eval``).

Grammar: Python expression syntax restricted to literals (numbers, strings, booleans, None,
lists/tuples/sets), names (looked up in the facts), ``and``/``or``/``not``, comparisons
(``< <= > >= == != in not in``, chained), arithmetic (``+ - * / // % **``), conditional
expressions (``a if c else b``) and calls to the functions in ``FUNCTIONS``. Anything else
(attributes, subscripts, lambdas, comprehensions) is rejected when the rule is loaded.

A name missing from the facts raises ``MissingFact``: the rule does not apply and
``--explain`` says which fact was missing. Types are checked: comparing a string with a number
raises ``ExprTypeError`` instead of silently matching.
"""
from __future__ import annotations

import ast
import math
import operator
from functools import lru_cache
from typing import Any, Callable, Mapping


class ExprError(Exception):
    """The expression text is not in the allowed language (raised at load time)."""


class MissingFact(Exception):
    """A name the expression needs is not among the facts. ``.name`` is that name."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class ExprTypeError(Exception):
    """Operands of incompatible types (e.g. '8' > 4)."""


def _divisors(n: int) -> list[int]:
    n = int(n)
    return [d for d in range(1, n + 1) if n % d == 0] if n > 0 else []


def _aligned_divisors(candidates: list[int], size: int, align: int) -> list[int]:
    """The candidates d (e.g. valid tp sizes) for which size / d is a whole multiple of align.

    Used for sharding checks such as "intermediate_size / tp_size must be a multiple of the
    quantisation group": aligned_divisors([1, 2, 4, 8], 1536, 128) == [1, 2, 4].
    """
    align = int(align)
    if align <= 0:
        return [int(d) for d in candidates if d > 0 and size % d == 0]
    return [int(d) for d in candidates if d > 0 and size % (int(d) * align) == 0]


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min, "max": max, "abs": abs, "round": round, "len": len,
    "ceil": math.ceil, "floor": math.floor, "log2": math.log2, "int": int, "float": float,
    "divisors": _divisors,
    "gcd": math.gcd,
    "aligned_divisors": _aligned_divisors,
}

_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_CMP = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
        ast.Eq: operator.eq, ast.NotEq: operator.ne,
        ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_types(op: type, a: Any, b: Any) -> None:
    if op in (ast.Lt, ast.LtE, ast.Gt, ast.GtE):
        if not ((_is_num(a) and _is_num(b)) or (isinstance(a, str) and isinstance(b, str))):
            raise ExprTypeError(f"cannot order {a!r} and {b!r}")
    if op in _BIN and not (_is_num(a) and _is_num(b)):
        if not (op is ast.Add and isinstance(a, str) and isinstance(b, str)):
            raise ExprTypeError(f"arithmetic needs numbers, found {a!r} and {b!r}")


def _validate(node: ast.AST, functions: set[str]) -> None:
    for n in ast.walk(node):
        if isinstance(n, (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd,
                          ast.BinOp, ast.Compare, ast.Name, ast.Load, ast.Constant, ast.List, ast.Tuple, ast.Set,
                          ast.IfExp)) or type(n) in _BIN or type(n) in _CMP:
            continue
        if isinstance(n, ast.Call):
            if not isinstance(n.func, ast.Name) or n.func.id not in functions or n.keywords:
                name = n.func.id if isinstance(n.func, ast.Name) else "?"
                raise ExprError(f"function '{name}' is not allowed (allowed: {', '.join(sorted(functions))})")
            continue
        raise ExprError(f"'{type(n).__name__}' is not allowed in rule expressions")


@lru_cache(maxsize=4096)
def compile_expr(text: str, extra_functions: tuple[str, ...] = ()) -> ast.Expression:
    """Parse and check ``text``. Raises ExprError with the reason. Cached by text."""
    if not isinstance(text, str) or not text.strip():
        raise ExprError("empty expression")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise ExprError(f"syntax error at column {e.offset}: {e.msg}") from None
    _validate(tree, set(FUNCTIONS) | set(extra_functions))
    return tree


@lru_cache(maxsize=8192)
def names_in(text: str) -> frozenset[str]:
    """Fact names an expression reads (function names excluded)."""
    tree = compile_expr(text, ("has",))
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return frozenset({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - calls)


def evaluate(text: str, facts: Mapping[str, Any], functions: Mapping[str, Callable[..., Any]] | None = None) -> Any:
    """Evaluate ``text`` over ``facts``. Raises MissingFact, ExprTypeError, ExprError, ZeroDivisionError."""
    fns = dict(FUNCTIONS)
    if functions:
        fns.update(functions)
    tree = compile_expr(text, tuple(sorted(functions or ())))
    return _eval(tree.body, facts, fns)


def _eval(n: ast.AST, f: Mapping[str, Any], fns: Mapping[str, Callable[..., Any]]) -> Any:
    if isinstance(n, ast.Constant):
        return n.value
    if isinstance(n, ast.Name):
        if n.id in ("true", "True"):
            return True
        if n.id in ("false", "False"):
            return False
        if n.id not in f or f[n.id] is None:
            raise MissingFact(n.id)
        return f[n.id]
    if isinstance(n, ast.BoolOp):
        if isinstance(n.op, ast.And):
            v: Any = True
            for x in n.values:
                v = _eval(x, f, fns)
                if not v:
                    return v
            return v
        v = False
        for x in n.values:
            v = _eval(x, f, fns)
            if v:
                return v
        return v
    if isinstance(n, ast.UnaryOp):
        v = _eval(n.operand, f, fns)
        if isinstance(n.op, ast.Not):
            return not v
        if not _is_num(v):
            raise ExprTypeError(f"unary minus needs a number, found {v!r}")
        return -v if isinstance(n.op, ast.USub) else +v
    if isinstance(n, ast.BinOp):
        a, b = _eval(n.left, f, fns), _eval(n.right, f, fns)
        _check_types(type(n.op), a, b)
        return _BIN[type(n.op)](a, b)
    if isinstance(n, ast.Compare):
        left = _eval(n.left, f, fns)
        for op, comp in zip(n.ops, n.comparators):
            right = _eval(comp, f, fns)
            _check_types(type(op), left, right)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(n, (ast.List, ast.Tuple)):
        return [_eval(x, f, fns) for x in n.elts]
    if isinstance(n, ast.Set):
        return {_eval(x, f, fns) for x in n.elts}
    if isinstance(n, ast.IfExp):
        return _eval(n.body, f, fns) if _eval(n.test, f, fns) else _eval(n.orelse, f, fns)
    if isinstance(n, ast.Call):
        fn = fns[n.func.id]  # validated at compile time
        return fn(*[_eval(a, f, fns) for a in n.args])
    raise ExprError(f"'{type(n).__name__}' is not allowed")  # pragma: no cover - rejected by _validate
