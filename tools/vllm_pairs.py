"""Order checks over a list as per-pair rows (kg.engine.expr ``any(... for a, b in pairs(L))``).

vLLM tests that a user's list is ordered in two spellings the loop walk (tools/vllm_loops.py) does not read:

- ``list(x) != sorted(set(x))``: x is not strictly increasing (0.34.0 config/speculative.py:322-325, the DSpark
  draft's target_layer_ids, after :314-320 made every element an int). For a list of numbers it equals
  ``any(a >= b for a, b in pairs(x))``: a duplicate makes ``set`` shorter, and without one ``sorted`` gives x back
  only when x ascends; ``==`` is its negation;
- ``any(x[i] OP x[i - 1] for i in range(1, n))`` (speculative.py:671, synthetic_acceptance_rates non-increasing):
  the pairs of x's first n elements, so ``any(b OP a for a, b in pairs(x))`` where ``len(x) == n`` (:662 refused
  any other length before) and not modelled (``__unknown__``) elsewhere.

``order_hook`` rewrites the node into the generator vllm_loops.element_hook translates; None for any other node.

``local_dict_loop``: ``for k, v in d.items()`` over a dict literal built in the function (speculative.py:268-301 at
0.34.0, the DSpark target's and draft's attention shapes, three literal keys) is walked once per key, k its literal
and v its value, as checkgen unrolls a loop over a module constant, under the conditions before the loop named once
(a let); a loop that breaks, continues, returns or has an ``else`` is left to the other readers.
"""
from __future__ import annotations

import ast
from typing import Any

import checkgen as cg

PREV, CUR = "_pair_prev", "_pair_cur"


def _pairs_gen(fn: str, elt: ast.expr, seq: ast.expr) -> ast.Call:
    target = ast.Tuple([ast.Name(PREV, ast.Store()), ast.Name(CUR, ast.Store())], ast.Store())
    gen = ast.GeneratorExp(elt, [ast.comprehension(target, ast.Call(ast.Name("pairwise", ast.Load()), [seq], []),
                                                   [], 0)])
    return ast.Call(ast.Name(fn, ast.Load()), [gen], [])


def _call_of(node: ast.AST, name: str) -> ast.expr | None:
    """x of ``name(x)`` (one argument, no keywords), else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name \
            and len(node.args) == 1 and not node.keywords:
        return node.args[0]
    return None


def _not_increasing(node: ast.Compare) -> ast.AST | None:
    """``list(x) != sorted(set(x))`` -> any(prev >= cur ...); ``==`` its negation; else None."""
    if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
        return None
    left, right = node.left, node.comparators[0]
    x = _call_of(left, "list")
    inner = _call_of(right, "sorted")
    y = _call_of(inner, "set") if inner is not None else None
    if x is None or y is None or ast.dump(x) != ast.dump(y):
        return None
    cmp = ast.Compare(ast.Name(PREV, ast.Load()), [ast.GtE()], [ast.Name(CUR, ast.Load())])
    got = _pairs_gen("any", cmp, x)
    return got if isinstance(node.ops[0], ast.NotEq) else ast.UnaryOp(ast.Not(), got)


class _Shift(ast.NodeTransformer):
    """x[i] -> cur, x[i - 1] -> prev; ``ok`` False when i or x appear any other way."""

    def __init__(self, x: str, i: str):
        self.x, self.i, self.ok = x, i, True

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == self.x:
            s = node.slice
            if isinstance(s, ast.Name) and s.id == self.i:
                return ast.Name(CUR, ast.Load())
            if (isinstance(s, ast.BinOp) and isinstance(s.op, ast.Sub) and isinstance(s.left, ast.Name)
                    and s.left.id == self.i and isinstance(s.right, ast.Constant) and s.right.value == 1):
                return ast.Name(PREV, ast.Load())
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in (self.x, self.i):
            self.ok = False
        return node


def _adjacent(node: ast.Call) -> tuple[ast.AST, ast.expr, ast.expr] | None:
    """``any/all(P(x[i], x[i - 1]) for i in range(1, n))`` -> (the pairs generator, x, n), else None."""
    fn = node.func.id if isinstance(node.func, ast.Name) else ""
    if fn not in ("any", "all") or len(node.args) != 1 or node.keywords:
        return None
    gen = node.args[0]
    if not isinstance(gen, ast.GeneratorExp) or len(gen.generators) != 1:
        return None
    g = gen.generators[0]
    rng = g.iter
    if (g.ifs or not isinstance(g.target, ast.Name) or not isinstance(rng, ast.Call)
            or not isinstance(rng.func, ast.Name) or rng.func.id != "range" or len(rng.args) != 2
            or rng.keywords or not (isinstance(rng.args[0], ast.Constant) and rng.args[0].value == 1)):
        return None
    subs = [s for s in ast.walk(gen.elt) if isinstance(s, ast.Subscript) and isinstance(s.value, ast.Name)]
    names = {s.value.id for s in subs}
    if len(names) != 1:
        return None
    x = names.pop()
    shift = _Shift(x, g.target.id)
    elt = shift.visit(ast.parse(ast.unparse(gen.elt), mode="eval").body)
    if not shift.ok:
        return None
    return _pairs_gen(fn, elt, ast.Name(x, ast.Load())), ast.Name(x, ast.Load()), rng.args[1]


def order_hook(w: Any, node: ast.AST, fr: cg.Frame, pc: list[str]) -> Any:
    """See the module doc."""
    if isinstance(node, ast.Compare):
        got = _not_increasing(node)
        if got is None:
            return None
        try:
            return w.value(ast.fix_missing_locations(ast.copy_location(got, node)), fr, pc)
        except cg.Untranslatable:
            return None
    if isinstance(node, ast.Call):
        got = _adjacent(node)
        if got is None:
            return None
        gen, x, n = got
        try:
            body = w.text(ast.fix_missing_locations(ast.copy_location(gen, node)), fr, pc, True)
            return cg.Expr(f"({body} if len({w.text(x, fr, pc)}) == {w.text(n, fr, pc)} else {cg.UNK})")
        except cg.Untranslatable:
            return None
    return None


def local_dict_loop(w: Any, s: ast.For, fr: cg.Frame, pc: list[str]) -> bool:
    """See the module doc; False when ``s`` is not such a loop."""
    it = s.iter
    if (s.orelse or not isinstance(s.target, ast.Tuple) or len(s.target.elts) != 2
            or not isinstance(it, ast.Call) or it.args or it.keywords or not isinstance(it.func, ast.Attribute)
            or it.func.attr != "items" or not isinstance(it.func.value, ast.Name)
            or any(isinstance(n, (ast.Break, ast.Continue, ast.Return)) for n in ast.walk(s))):
        return False
    d = fr.locals.get(it.func.value.id)
    pairs = getattr(d, "pairs", None)
    if pairs is None or getattr(d, "mutated", True) or getattr(d, "env", None) or len(pairs) > 16:
        return False
    # the conditions so far, once, as a named value: each key's copy of them would pass the row length limit
    conds = w.eff(fr, pc)
    named = None
    if conds and not cg.has_unknown(conds) and not any(c.startswith("<loop>") for c in conds):
        named = w.bind(cg.conj(conds))
    # the callers' part of the path (before fr.base) stays as long as it was, so a raise in the body still finds its
    # own conditions after fr.base (checkgen's exit)
    inner = ["True"] * fr.base + [named.text] if isinstance(named, cg.Expr) else pc
    exits, fr.exits = fr.exits, ([] if isinstance(named, cg.Expr) else fr.exits)
    try:
        for k, v in pairs:
            w.assign(s.target.elts[0], cg.Expr(k), fr, inner)
            w.assign(s.target.elts[1], cg.TAINT if v == cg.UNK else cg.Expr(v), fr, inner)
            w.run(s.body, fr, inner)
    finally:
        fr.exits = exits
    return True

