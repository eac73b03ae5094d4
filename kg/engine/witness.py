"""Witnesses for rule conditions: a small assignment of facts that makes an expression true (or false).

Used to generate fixtures from conditions (issue 12): for a coupling compiled into a rule, a
must-fire case is a witness of its condition and a must-not-fire case a witness of its negation.

``witness(text, want, fixed)`` returns ``{name: value}`` for every name the expression reads (except
those in ``fixed``, which are given) such that ``evaluate(text, {...}) == want`` (truthiness), or None
when no combination of candidate values does. Candidates per name come from the expression itself:
the constants it is compared with (and their neighbours ±1, /2, x2 for numbers), the members of
``in`` lists plus one value outside them, small lists for a name on the right of ``in``, True/False for names used as truth values, lists for names
passed to ``max``/``min``/``len``, and small powers of two for names only compared with other names.
The search is exhaustive over at most ``limit`` combinations (deterministic order: smallest
candidates first), so the answer is a smallest-looking witness, not a random one.
"""
from __future__ import annotations

import ast
import itertools
from typing import Any, Callable, Mapping

from kg.engine.expr import ExprTypeError, MissingFact, compile_expr, evaluate

OTHER = "zz-other"  # a string no condition names: "some other value"
POW2 = (1, 2, 3, 4, 6, 8, 16, 64, 128)


def _consts(n: ast.AST) -> list[Any]:
    if isinstance(n, ast.Constant):
        return [n.value]
    if isinstance(n, (ast.Tuple, ast.List, ast.Set)):
        return [v for e in n.elts for v in _consts(e)]
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) and isinstance(n.operand, ast.Constant):
        return [-n.operand.value]
    return []


def _numeric_neighbours(v: Any) -> list[Any]:
    if isinstance(v, bool):
        return [v, not v]
    if not isinstance(v, (int, float)):
        return [v]
    out = [v, v + 1, v - 1, v * 2]
    if isinstance(v, int) and v > 1:
        out.append(v // 2)
    if isinstance(v, float):
        out += [v + 0.5, v - 0.5]
    return out


def candidates(text: str, functions: tuple[str, ...] = ("has",)) -> dict[str, list[Any]]:
    """Candidate values per name read by ``text`` (see module doc), in search order."""
    tree = compile_expr(text, functions).body
    cands: dict[str, list[Any]] = {}

    def add(name: str, vals: list[Any]) -> None:
        cur = cands.setdefault(name, [])
        for v in vals:
            if v not in cur or type(v) is not type(cur[cur.index(v)]):
                cur.append(v)

    for n in ast.walk(tree):
        if isinstance(n, ast.Compare):
            parts = [n.left, *n.comparators]
            consts = [v for p in parts for v in _consts(p)]
            in_ops = any(isinstance(op, (ast.In, ast.NotIn)) for op in n.ops)
            for p in parts:
                for name in (x.id for x in ast.walk(p) if isinstance(x, ast.Name)):
                    if consts:
                        vals: list[Any] = []
                        for c in consts:
                            vals += _numeric_neighbours(c) if not isinstance(p, ast.Name) or not in_ops else [c]
                        if any(isinstance(c, str) for c in consts):
                            vals.append(OTHER)
                        if in_ops and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in consts):
                            vals.append(max(consts) + 1)
                        if not isinstance(p, ast.Name):  # inside arithmetic: any size may matter
                            vals += list(POW2)
                        add(name, vals)
                    else:
                        add(name, list(POW2))
            for op, right in zip(n.ops, n.comparators):  # ``x in names``: the container is a list fact
                if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, ast.Name):
                    add(right.id, [[1], [1, 2], [1, 2, 4, 8]])
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("max", "min", "len"):
            for a in n.args:
                if isinstance(a, ast.Name):
                    add(a.id, [[128, 128], [64, 64], [1]])
    for n in ast.walk(tree):  # bare names used as truth values (``is_moe``, ``not enforce_eager``)
        if isinstance(n, ast.Name) and n.id not in cands and n.id not in ("true", "false", "True", "False"):
            add(n.id, [True, False])
    for name, vals in cands.items():
        if any(isinstance(v, bool) for v in vals):
            continue
        if all(isinstance(v, (int, float)) for v in vals):
            vals.sort(key=lambda v: (v <= 0, abs(v), v))  # positive sizes first: a plausible stack
    return cands


def witness(text: str, want: bool, fixed: Mapping[str, Any] | None = None,
            functions: Mapping[str, Callable[..., Any]] | None = None, limit: int = 20_000) -> dict[str, Any] | None:
    """An assignment of the names ``text`` reads that makes it evaluate to ``want`` (see module doc)."""
    fixed = dict(fixed or {})
    fn_names = tuple(sorted(functions or {"has": None}))
    cands = {k: v for k, v in candidates(text, fn_names).items() if k not in fixed}
    names = sorted(cands)
    pools = [cands[n] for n in names]
    for i, combo in enumerate(itertools.product(*pools)):
        if i >= limit:
            return None
        env = {**fixed, **dict(zip(names, combo))}
        try:
            got = evaluate(text, env, functions)
        except (MissingFact, ExprTypeError, ZeroDivisionError, TypeError, ValueError, OverflowError):
            continue
        if bool(got) == want:
            return dict(zip(names, combo))
    return None
