"""Whether a generated row can ever be true, by the values its parts can take (checkgen.Firing looks at structure
only: ``truthy(__unknown__ if c else False)`` or ``not (('__none__' if x == '__none__' else __unknown__) == '__none__')``
can never be true, yet Firing says it can).

``ValueFiring.fires(expr)`` over-approximates "some stack makes the row true" under kg.engine.expr's evaluation
(``__unknown__`` and a let that always reaches it raise MissingFact; ``truthy`` is kg.frameworks.checkrows.truthy):
each part of the expression gets the set of values it may take, ``ANY`` for an input's value (anything) and ``RAISE``
where its evaluation may raise. A row fires when its set holds a value that is true (or ``ANY``). Used by
tools/vllm_generated_checks.py: a row that can never be true refuses nothing and its site is not covered.
"""
from __future__ import annotations

import ast
from typing import Any

import checkgen as cg

ANY = object()    # any value (an input, a let over inputs, an operation not modelled here)
RAISE = object()  # evaluation stops with MissingFact (reads __unknown__)
FALSY = object()  # some false value (an input where an ``and`` stopped at it)
TRUTHY = object()  # some true value (an input where an ``or`` stopped at it)
VAGUE = (ANY, FALSY, TRUTHY)
OPS = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
       ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
       ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
LIMIT = 16        # a set larger than this becomes {ANY} (+ RAISE)


def _truth(v: Any) -> set[Any]:
    """The truth values ``v`` may have as a condition."""
    return {True, False} if v is ANY else {False} if v is FALSY else {True} if v is TRUTHY else {bool(v)}


def _truthy(v: Any) -> set[Any]:
    """kg.frameworks.checkrows.truthy of ``v``."""
    if v in VAGUE:
        return {True, False} if v is not FALSY else {False}
    return {v not in (cg.NONE, None) and bool(v)}


def _boolean(n: ast.AST) -> bool:
    """``n`` is True or False whenever it has a value (so an assumed truth is its value)."""
    return (isinstance(n, (ast.Compare, ast.BoolOp)) and not (isinstance(n, ast.BoolOp) and not all(
        _boolean(v) for v in n.values))) or (isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not)) or (
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("truthy", "is_a"))


def _can_be_true(v: Any) -> bool:
    return v is ANY or v is TRUTHY or (v is not RAISE and v is not FALSY and bool(v))


_DUMPS: dict[int, tuple[ast.AST, Any]] = {}


def _dump(n: Any) -> Any:
    """A structural key of ``n`` (equal for equal subtrees), once per node (the node is held with its key, so its
    id is not reused)."""
    if not isinstance(n, ast.AST):
        return tuple(_dump(x) for x in n) if isinstance(n, list) else n
    hit = _DUMPS.get(id(n))
    if hit is None or hit[0] is not n:
        if len(_DUMPS) > 200_000:
            _DUMPS.clear()
        key = (type(n).__name__,) + tuple(_dump(getattr(n, f, None)) for f in n._fields if f != "ctx")
        hit = _DUMPS[id(n)] = (n, key)
    return hit[1]


def _assume(d: dict[Any, bool], n: ast.AST, truth: bool) -> dict[Any, bool]:
    """``d`` with ``n`` (and what ``not`` wraps in it) assumed of truth ``truth``."""
    d[_dump(n)] = truth
    while isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
        n, truth = n.operand, not truth
        d[_dump(n)] = truth
    return d


def _conjuncts(n: ast.AST) -> list[ast.AST]:
    if isinstance(n, ast.BoolOp) and isinstance(n.op, ast.And):
        return [x for v in n.values for x in _conjuncts(v)]
    return [n]


class ValueFiring(cg.Firing):
    def __init__(self, lets: dict[str, str]):
        super().__init__(lets)
        self.values_memo: dict[str, frozenset] = {}

    def fires(self, expr: str) -> bool:
        if not super().fires(expr):
            return False
        body = ast.parse(expr, mode="eval").body
        # a true `and` has every operand true in the same evaluation: each operand is read with the others true
        parts = _conjuncts(body)
        try:
            for i, p in enumerate(parts):
                others: dict[Any, bool] = {}
                for j, q in enumerate(parts):
                    if j != i:
                        _assume(others, q, True)
                if not any(_can_be_true(v) for v in self.values(p, others)):
                    return False
            return any(_can_be_true(v) for v in self.values(body))
        except RecursionError:
            return True

    def values(self, n: ast.AST, assume: dict[Any, bool] | None = None) -> set[Any]:
        """The values ``n`` may take where the conditions in ``assume`` (structural key -> truth) hold: the operands
        before it in an ``and`` / ``or`` (a row's later parts often test its first part again)."""
        assume = assume or {}
        if assume and _boolean(n):
            key = _dump(n)
            if key in assume:
                return {assume[key]}
        out = self._values(n, assume)
        plain = {v for v in out if v is not RAISE}
        if len(plain) > LIMIT:
            return {ANY} | (out & {RAISE})
        return out

    def truth(self, n: ast.AST, assume: dict[Any, bool]) -> tuple[set[Any], set[bool]]:
        """({RAISE} or {}, the truth values ``n`` may have as a condition) where ``assume`` holds."""
        key = _dump(n)
        if key in assume:
            return set(), {assume[key]}
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            raises, conds = self.truth(n.operand, assume)
            return raises, {not c for c in conds}
        vals = self.values(n, assume)
        return vals & {RAISE}, {c for v in vals if v is not RAISE for c in _truth(v)}

    def _values(self, n: ast.AST, assume: dict[Any, bool]) -> set[Any]:
        if isinstance(n, ast.Constant):
            return {n.value}
        if isinstance(n, ast.Name):
            if n.id == cg.UNK:
                return {RAISE}
            if n.id in ("True", "False", "None"):
                return {{"True": True, "False": False, "None": None}[n.id]}
            if n.id in self.lets:
                if n.id not in self.values_memo:
                    self.values_memo[n.id] = frozenset({ANY, RAISE})  # no cycles (lets come before use); be safe
                    self.values_memo[n.id] = frozenset(self.values(ast.parse(self.lets[n.id], mode="eval").body))
                return set(self.values_memo[n.id])
            return {ANY}
        if isinstance(n, ast.IfExp):
            out, conds = self.truth(n.test, assume)
            if True in conds:
                out |= self.values(n.body, _assume(dict(assume), n.test, True))
            if False in conds:
                out |= self.values(n.orelse, _assume(dict(assume), n.test, False))
            return out
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            raises, conds = self.truth(n.operand, assume)
            return raises | {not c for c in conds}
        if isinstance(n, ast.BoolOp):
            # left to right: an operand's value is the result where it decides (falsy for `and`, truthy for `or`)
            stop = isinstance(n.op, ast.Or)
            out: set[Any] = set()
            seen = dict(assume)
            for i, part in enumerate(n.values):
                vals = self.values(part, seen)
                _assume(seen, part, not stop)  # the next operand runs only where this one did not decide
                out |= vals & {RAISE}
                last = i == len(n.values) - 1
                going = False
                for v in vals - {RAISE}:
                    for tv in _truth(v):
                        if last or tv == stop:
                            out.add(v if v is not ANY or last else TRUTHY if stop else FALSY)
                        else:
                            going = True
                if not going:
                    break
            return out
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "truthy" and len(n.args) == 1:
            a = self.values(n.args[0], assume)
            return (a & {RAISE}) | {x for v in a if v is not RAISE for x in _truthy(v)}
        if isinstance(n, ast.Compare) and len(n.ops) == 1:
            left, right = self.values(n.left, assume), self.values(n.comparators[0], assume)
            if left == {RAISE} or right == {RAISE}:
                return {RAISE}
            out = (left | right) & {RAISE}
            ls, rs = left - {RAISE}, right - {RAISE}
            op = OPS.get(type(n.ops[0]))
            if op is None or any(v in VAGUE for v in ls | rs):
                return out | {True, False}
            for a in ls:
                for b in rs:
                    try:
                        out.add(bool(op(a, b)))
                    except Exception:
                        out.add(RAISE)
            return out
        # anything else: its parts may raise (as checkgen.Firing tells), else any value
        return {RAISE} if self.raises(n) else {ANY, RAISE} if self._may_raise(n) else {ANY}

    def _may_raise(self, n: ast.AST) -> bool:
        return any(isinstance(x, ast.Name) and (x.id == cg.UNK or x.id in self.lets) for x in ast.walk(n))
