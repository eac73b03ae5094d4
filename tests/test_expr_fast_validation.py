"""kg.engine.expr._plainly_valid (one walk) says "valid" only for what the two walks it stands in front of
(_check_cost, _validate) accept, so compile_expr's answers and error texts are unchanged."""
from __future__ import annotations

import ast

import pytest

from kg.analyses.enginechecks import all_sites
from kg.engine import expr

ALLOWED = set(expr.FUNCTIONS) | {"has", "truthy", "is_a"}
INVALID = [
    "a.b", "a[0]", "lambda: 1", "[x for x in y]", "f(a)", "min(a, key=b)", "x ** y", "2 ** 65",
    "+".join(["a"] * 401), "(" * 41 + "a" + ")" * 41 + " + " + "-" * 45 + "a", "1" * 1300, "'" + "s" * 2001 + "'",
    "a if b else c.d", "max(*a)",
]
VALID = ["a and not b", "x ** 2 + y ** -3", "min(a, b) >= 8 or c in ('x', 'y')", "has('t') if p else q",
         "-(a % 4) // 2 != 0", "{1, 2} and [3] and (4,)", "any(x > 0 for x, y in items(d) if y)"]
INVALID += ["(x for x in y)", "any(x for x in y for z in y)", "any(any(any(x for x in z) for z in y) for y in w)",
            "any(x for x[0] in y)"]


def _two_walks(tree, allowed) -> bool:
    try:
        expr._check_cost(tree)
        expr._validate(tree, allowed)
    except expr.ExprError:
        return False
    return True


def _tree(text):
    try:
        return ast.parse(text, mode="eval")
    except (SyntaxError, RecursionError):
        return None


@pytest.mark.parametrize("text", INVALID + VALID)
def test_one_walk_agrees_with_the_two_walks(text):
    tree = _tree(text)
    assert tree is not None
    assert expr._plainly_valid(tree, ALLOWED) is _two_walks(tree, ALLOWED) is (text in VALID)


def test_one_walk_agrees_on_every_shipped_row_expression():
    texts = [s["expr"] for d in all_sites() for s in d["sites"] if s.get("expr")]
    texts += [x["expr"] for d in all_sites() for x in d.get("lets") or []]
    assert len(texts) > 500
    for text in texts:
        tree = _tree(str(text).strip())
        if tree is not None:
            assert expr._plainly_valid(tree, ALLOWED) is _two_walks(tree, ALLOWED), text
