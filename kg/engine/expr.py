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

from kg.core.intmath import aligned_divisors, divisors


class ExprError(Exception):
    """The expression text is not in the allowed language (raised at load time)."""


class MissingFact(Exception):
    """A name the expression needs is not among the facts. ``.name`` is that name."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class ExprTypeError(Exception):
    """Operands of incompatible types (e.g. '8' > 4)."""


MAX_CHARS = 2_000  # an expression longer than this is refused unparsed (the shipped ones are < 300)
MAX_NODES = 400  # syntax-tree nodes
MAX_DEPTH = 40  # nesting of the syntax tree
MAX_EXPONENT = 64  # ``a ** b`` needs |b| <= 64 (2**30 for GiB is the use); 9**9**9 is refused
MAX_INT_BITS = 4_096  # an intermediate integer past this many bits (~1,233 digits) is an error


def _pow(a: Any, b: Any) -> Any:
    if abs(b) > MAX_EXPONENT:
        raise ExprTypeError(f"exponent {b!r} is over the limit of {MAX_EXPONENT}")
    if isinstance(a, int) and isinstance(b, int) and b > 0 and a.bit_length() * b > MAX_INT_BITS:
        raise ExprTypeError(f"{a} ** {b} would have more than {MAX_INT_BITS} bits")
    return operator.pow(a, b)


def _mul(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > MAX_INT_BITS:
        raise ExprTypeError(f"a product of more than {MAX_INT_BITS} bits")
    return operator.mul(a, b)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min, "max": max, "abs": abs, "round": round, "len": len,
    "ceil": math.ceil, "floor": math.floor, "log2": math.log2, "int": int, "float": float,
    "divisors": divisors,
    "gcd": math.gcd,
    "aligned_divisors": aligned_divisors,
    # text helpers for option strings ("periodic_flushing:format=hatchet" -> "periodic_flushing")
    "lower": lambda s: str(s).lower(),
    "split_first": lambda s, sep: str(s).split(str(sep), 1)[0],
}

_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: _mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: _pow}
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


def _check_cost(tree: ast.AST) -> None:
    """Refuse expressions whose evaluation could cost more than a few microseconds per node:
    too many nodes, too deep, or a power whose exponent is not a small number literal."""
    nodes = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        n, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise ExprError(f"expression is too large (over {MAX_NODES} terms)")
        if depth > MAX_DEPTH:
            raise ExprError(f"expression nests deeper than {MAX_DEPTH} levels")
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow):
            e = n.right
            neg = isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd))
            lit = e.operand if neg else e
            if not (isinstance(lit, ast.Constant) and isinstance(lit.value, (int, float))
                    and not isinstance(lit.value, bool) and abs(lit.value) <= MAX_EXPONENT):
                raise ExprError(f"the exponent of ** must be a number literal of at most {MAX_EXPONENT} "
                                "(e.g. 2**30); a computed or larger exponent could take hours")
        if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool) \
                and n.value.bit_length() > MAX_INT_BITS:
            raise ExprError("an integer literal of more than 1,233 digits")
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and len(n.value) > MAX_CHARS:
            raise ExprError(f"a string literal of more than {MAX_CHARS} characters")
        stack.extend((c, depth + 1) for c in ast.iter_child_nodes(n))


_PLAIN = frozenset({ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd, ast.BinOp,
                    ast.Compare, ast.Name, ast.Load, ast.Constant, ast.List, ast.Tuple, ast.Set, ast.IfExp}
                   | set(_BIN) | set(_CMP))


def _plainly_valid(tree: ast.AST, functions: set[str]) -> bool:
    """True when ``_check_cost`` and ``_validate`` would both pass ``tree``: one walk over the same nodes in
    ``_check_cost``'s order with the same limits, by exact node types (~4x faster than the two walks; every
    ``check`` compiles ~190 expressions). False sends the tree to the two walks, which word the error."""
    nodes = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        n, depth = pop()
        nodes += 1
        if nodes > MAX_NODES or depth > MAX_DEPTH:
            return False
        t = type(n)
        if t is ast.Constant:
            v = n.value
            if (type(v) is int and v.bit_length() > MAX_INT_BITS) or (type(v) is str and len(v) > MAX_CHARS):
                return False
            continue  # no child nodes
        if t is ast.Call:
            f = n.func
            if type(f) is not ast.Name or f.id not in functions or n.keywords:
                return False
        elif t not in _PLAIN:
            return False
        elif t is ast.BinOp and type(n.op) is ast.Pow:
            e = n.right
            lit = e.operand if type(e) is ast.UnaryOp and type(e.op) in (ast.USub, ast.UAdd) else e
            if not (type(lit) is ast.Constant and type(lit.value) in (int, float) and abs(lit.value) <= MAX_EXPONENT):
                return False
        depth += 1
        for name in n._fields:  # ast.iter_child_nodes, inlined
            v = getattr(n, name, None)
            if isinstance(v, ast.AST):
                push((v, depth))
            elif type(v) is list:
                for x in v:
                    if isinstance(x, ast.AST):
                        push((x, depth))
    return True


@lru_cache(maxsize=4096)
def compile_expr(text: str, extra_functions: tuple[str, ...] = ()) -> ast.Expression:
    """Parse and check ``text`` (language and cost, see ``_check_cost``). Raises ExprError with the reason. Cached by text."""
    if not isinstance(text, str) or not text.strip():
        raise ExprError("empty expression")
    if len(text) > MAX_CHARS:
        raise ExprError(f"expression is {len(text):,} characters; the limit is {MAX_CHARS:,}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise ExprError(f"syntax error at column {e.offset}: {e.msg}") from None
    except (RecursionError, MemoryError):
        raise ExprError(f"expression nests deeper than {MAX_DEPTH} levels") from None
    allowed = set(FUNCTIONS) | set(extra_functions)
    if not _plainly_valid(tree, allowed):
        _check_cost(tree)
        _validate(tree, allowed)
    return tree




@lru_cache(maxsize=8192)
def names_in(text: str) -> frozenset[str]:
    """Fact names an expression reads (function names excluded)."""
    tree = compile_expr(text, ("has",))
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return frozenset({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - calls)


_MERGED: tuple[Any, Any, tuple] = (None, FUNCTIONS, ())  # the last ``functions`` mapping, FUNCTIONS + it, its names


def _merged(functions: Mapping[str, Callable[..., Any]] | None) -> tuple[Mapping[str, Callable[..., Any]], tuple]:
    """FUNCTIONS with ``functions`` on top, and the extra names; merged once per mapping object, not per call (a
    rule loop evaluates hundreds of expressions with one mapping). The mapping is kept, so its id is not reused."""
    if not functions:
        return FUNCTIONS, ()
    global _MERGED
    last = _MERGED  # one tuple, replaced whole: a thread never sees one mapping's names with another's functions
    if last[0] is functions:
        return last[1], last[2]
    fns = {**FUNCTIONS, **functions}
    names = tuple(sorted(functions))
    _MERGED = (functions, fns, names)
    return fns, names


def evaluate(text: str, facts: Mapping[str, Any], functions: Mapping[str, Callable[..., Any]] | None = None) -> Any:
    """Evaluate ``text`` over ``facts``. Raises MissingFact, ExprTypeError, ExprError, ZeroDivisionError."""
    fns, names = _merged(functions)
    return compiled(text, names)(facts, fns)


# text -> JSON of [the function names it calls, its tree in plain form (``plain``)], for texts already parsed and
# checked in an earlier run (kg.engine.exprtrees: a content-keyed cache entry); ``compiled`` builds from it
_TREES: dict[str, str] = {}


def add_trees(trees: Mapping[str, str]) -> None:
    """Make ``trees`` (``tree_json`` of each text) known to ``compiled``."""
    _TREES.update(trees)


@lru_cache(maxsize=8192)
def compiled(text: str, extra_functions: tuple[str, ...] = ()) -> Callable[[Mapping[str, Any], Mapping[str, Any]], Any]:
    """``text`` (``compile_expr``: same checks and errors) as a function of (facts, functions): one closure per node
    of its tree, each holding its node's fields and children, so an evaluation does not walk the tree (a sweep
    evaluates the same few hundred expressions on every stack). Cached by text. A text whose checked tree is known
    (``add_trees``) is not parsed again: its tree passed every check of ``compile_expr`` but the allowed functions,
    which are checked here (a ``check`` parses ~270 expressions otherwise: ~9 % of its run)."""
    known = _TREES.get(text)
    if known is not None:
        import json
        calls, tree = json.loads(known)
        if all(c in FUNCTIONS or c in extra_functions for c in calls):
            return _build(tree)
    return _build(plain(compile_expr(text, extra_functions).body))


def tree_json(text: str) -> str | None:
    """[the function names ``text`` calls, its tree (``plain``)] as JSON when ``text`` passes ``compile_expr`` with
    those functions allowed and JSON keeps every constant exactly (numbers, strings, booleans, None); else None."""
    import json
    try:
        tree = ast.parse(text.strip(), mode="eval")
        calls = sorted({n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)})
        body = plain(compile_expr(text, tuple(c for c in calls if c not in FUNCTIONS)).body)
        out = json.dumps([calls, body], separators=(",", ":"), allow_nan=False)
    except (ExprError, SyntaxError, RecursionError, MemoryError, ValueError, TypeError):
        return None
    return out if _same(json.loads(out), [calls, body]) else None


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same types throughout (1, 1.0 and True are equal in Python, not in a tree)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


_CONSTANT_TYPES = (int, float, str, bool, type(None))


def plain(n: ast.AST) -> list[Any]:
    """A checked expression tree (``compile_expr(...).body``) as nested lists of names, constants and lists, the form
    ``_build`` takes: ["c", value], ["n", name], ["and" | "or", [operands]], ["not" | "-" | "+", operand],
    ["bin", operator, left, right], ["cmp", left, [[operator, right], ...]], ["list" | "set", [elements]],
    ["if", test, body, orelse], ["call", function, [arguments]] (operators by their ``ast`` class names)."""
    if isinstance(n, ast.Constant):
        if not isinstance(n.value, _CONSTANT_TYPES):
            raise TypeError(f"constant {n.value!r} has no plain form")
        return ["c", n.value]
    if isinstance(n, ast.Name):
        return ["n", n.id]
    if isinstance(n, ast.BoolOp):
        return ["and" if isinstance(n.op, ast.And) else "or", [plain(x) for x in n.values]]
    if isinstance(n, ast.UnaryOp):
        return ["not" if isinstance(n.op, ast.Not) else "-" if isinstance(n.op, ast.USub) else "+", plain(n.operand)]
    if isinstance(n, ast.BinOp):
        return ["bin", type(n.op).__name__, plain(n.left), plain(n.right)]
    if isinstance(n, ast.Compare):
        return ["cmp", plain(n.left), [[type(op).__name__, plain(c)] for op, c in zip(n.ops, n.comparators)]]
    if isinstance(n, (ast.List, ast.Tuple)):
        return ["list", [plain(x) for x in n.elts]]
    if isinstance(n, ast.Set):
        return ["set", [plain(x) for x in n.elts]]
    if isinstance(n, ast.IfExp):
        return ["if", plain(n.test), plain(n.body), plain(n.orelse)]
    if isinstance(n, ast.Call):
        return ["call", n.func.id, [plain(a) for a in n.args]]  # validated at compile time
    return ["refused", type(n).__name__]  # pragma: no cover - rejected by _validate


_OPS = {t.__name__: t for t in (*_BIN, *_CMP)}


def _build(p: list[Any]) -> Callable[[Mapping[str, Any], Mapping[str, Any]], Any]:
    """The closure of one node (``plain`` form). A name missing from the facts or None raises MissingFact; ``true`` /
    ``false`` are booleans; operands are type-checked (``_check_types``) before an operator applies; ``and`` / ``or``
    return the deciding operand; a chained comparison stops at the first false link; lists and tuples give lists."""
    kind = p[0]
    if kind == "c":
        value = p[1]
        return lambda f, fns: value
    if kind == "n":
        name = p[1]
        if name in ("true", "True"):
            return lambda f, fns: True
        if name in ("false", "False"):
            return lambda f, fns: False

        def get(f: Mapping[str, Any], fns: Any) -> Any:
            if f.__class__ is dict:  # one lookup: a dict's get gives None for a missing name too
                v = f.get(name)
                if v is None:
                    raise MissingFact(name)
                return v
            if name not in f or f[name] is None:
                raise MissingFact(name)
            return f[name]
        return get
    if kind == "and" or kind == "or":
        parts = tuple(_build(x) for x in p[1])
        if kind == "and":
            def and_(f: Mapping[str, Any], fns: Any) -> Any:
                v: Any = True
                for c in parts:
                    v = c(f, fns)
                    if not v:
                        return v
                return v
            return and_

        def or_(f: Mapping[str, Any], fns: Any) -> Any:
            v: Any = False
            for c in parts:
                v = c(f, fns)
                if v:
                    return v
            return v
        return or_
    if kind == "not" or kind == "-" or kind == "+":
        operand = _build(p[1])
        if kind == "not":
            return lambda f, fns: not operand(f, fns)
        neg = kind == "-"

        def sign(f: Mapping[str, Any], fns: Any) -> Any:
            v = operand(f, fns)
            if not _is_num(v):
                raise ExprTypeError(f"unary minus needs a number, found {v!r}")
            return -v if neg else +v
        return sign
    if kind == "bin":
        op_t = _OPS[p[1]]
        left, right, op = _build(p[2]), _build(p[3]), _BIN[op_t]

        def binop(f: Mapping[str, Any], fns: Any) -> Any:
            a, b = left(f, fns), right(f, fns)
            _check_types(op_t, a, b)
            return op(a, b)
        return binop
    if kind == "cmp":
        first = _build(p[1])
        chain = tuple((_OPS[o], _CMP[_OPS[o]], _build(c)) for o, c in p[2])

        def compare(f: Mapping[str, Any], fns: Any) -> Any:
            a = first(f, fns)
            for op_t, op, c in chain:
                b = c(f, fns)
                _check_types(op_t, a, b)
                if not op(a, b):
                    return False
                a = b
            return True
        return compare
    if kind == "list":
        elts = tuple(_build(x) for x in p[1])
        return lambda f, fns: [c(f, fns) for c in elts]
    if kind == "set":
        elts = tuple(_build(x) for x in p[1])
        return lambda f, fns: {c(f, fns) for c in elts}
    if kind == "if":
        test, body, orelse = _build(p[1]), _build(p[2]), _build(p[3])
        return lambda f, fns: body(f, fns) if test(f, fns) else orelse(f, fns)
    if kind == "call":
        fname, args = p[1], tuple(_build(a) for a in p[2])
        return lambda f, fns: fns[fname](*[c(f, fns) for c in args])

    def refused(f: Mapping[str, Any], fns: Any) -> Any:  # pragma: no cover - rejected by _validate
        raise ExprError(f"'{p[1]}' is not allowed")
    return refused
