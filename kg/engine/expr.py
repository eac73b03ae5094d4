"""A small, safe expression language for rule conditions and numbers (no ``eval``).

Grammar: Python expression syntax restricted to literals (numbers, strings, booleans, None,
lists/tuples/sets), names (looked up in the facts), ``and``/``or``/``not``, comparisons
(``< <= > >= == != in not in``, chained), arithmetic (``+ - * / // % **``, ``&`` of integers; ``+`` also
joins two strings or two lists), conditional
expressions (``a if c else b``), calls to the functions in ``FUNCTIONS`` and, per element of a list,
``any(<cond> for x in <list>)`` / ``all(...)`` / ``select(<value> for x in <list> if <cond>)`` (the values of the
elements the filters keep, as Python's ``[<value> for x in <list> if <cond>]``; one ``for`` over a list of at most
``MAX_ITEMS`` elements, a name or a tuple of names as its target, optional ``if`` filters, at most ``MAX_LOOPS``
nested). Anything else
(attributes, subscripts, lambdas, other comprehensions) is rejected when the rule is loaded.

A name missing from the facts raises ``MissingFact``: the rule does not apply and
``--explain`` says which fact was missing. Types are checked: comparing a string with a number
raises ``ExprTypeError`` instead of silently matching.
"""
from __future__ import annotations

import ast
import math
import operator
import re
import warnings
from functools import lru_cache
from typing import Any, Callable, Mapping

from kg.core.intmath import aligned_divisors, divisors
from kg.engine.exprcmp import ORDER, call, compare_one, constant, literal, pair


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
MAX_ITEMS = 512  # any(... for x in L) / all(...) over a list of more elements is an error
MAX_LOOPS = 2  # nesting of any / all generators: at most MAX_ITEMS ** MAX_LOOPS element evaluations
MAX_MATCH_CHARS = 1_000  # fullmatch's subject and is_regex's pattern: a longer string is an error (bounded time)


def _pow(a: Any, b: Any) -> Any:
    if abs(b) > MAX_EXPONENT:
        raise ExprTypeError(f"exponent {b!r} is over the limit of {MAX_EXPONENT}")
    if isinstance(a, int) and isinstance(b, int) and b > 0 and a.bit_length() * b > MAX_INT_BITS:
        raise ExprTypeError(f"{a} ** {b} would have more than {MAX_INT_BITS} bits")
    return operator.pow(a, b)


def _and(a: Any, b: Any) -> int:
    """``a & b`` of two integers (``size & (size - 1)``: a power of two; quantization.py:142 at 0.34.0)."""
    if type(a) is not int or type(b) is not int:
        raise ExprTypeError(f"& needs two integers, found {a!r} and {b!r}")
    return a & b


def _mul(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > MAX_INT_BITS:
        raise ExprTypeError(f"a product of more than {MAX_INT_BITS} bits")
    return operator.mul(a, b)


def _seq(v: Any, what: str) -> list | tuple:
    if not isinstance(v, (list, tuple)):
        raise ExprTypeError(f"{what} needs a list, found {v!r}")
    if len(v) > MAX_ITEMS:
        raise ExprTypeError(f"{what} over {len(v):,} elements; the limit is {MAX_ITEMS}")
    return v


def _dict(v: Any, what: str) -> dict:
    if not isinstance(v, dict):
        raise ExprTypeError(f"{what} needs a mapping, found {v!r}")
    return v


def _item(v: Any, i: Any) -> Any:
    """``v[i]``: an element of a list or string by integer position, or a mapping's value by key."""
    try:
        if isinstance(v, dict):
            return v[i]
        if isinstance(v, (list, tuple, str)) and isinstance(i, int) and not isinstance(i, bool):
            return v[i]
    except (KeyError, IndexError, TypeError):
        raise ExprTypeError(f"item: {v!r} has no element {i!r}") from None
    raise ExprTypeError(f"item: cannot index {v!r} by {i!r}")


def _tail(v: Any, n: Any) -> Any:
    """``v[n:]`` of a list or string."""
    if isinstance(v, (list, tuple, str)) and type(n) is int:
        return v[n:] if isinstance(v, str) else list(v[n:])
    raise ExprTypeError(f"tail: cannot slice {v!r} from {n!r}")


def _sorted(xs: Any) -> list:
    """The elements of a list in ascending order (numbers with numbers, strings with strings)."""
    try:
        return sorted(_seq(xs, "sorted"))
    except TypeError:
        raise ExprTypeError(f"sorted: cannot order the elements of {xs!r}") from None


def _isfinite(v: Any) -> bool:
    if not _is_num(v):
        raise ExprTypeError(f"isfinite needs a number, found {v!r}")
    return math.isfinite(v)


def _split(s: Any, sep: Any, maxsplit: Any = -1) -> list[str]:
    if not (isinstance(s, str) and isinstance(sep, str) and sep and type(maxsplit) is int):
        raise ExprTypeError(f"split needs a string, a separator and a count, found {s!r}, {sep!r}, {maxsplit!r}")
    return s.split(sep, maxsplit)


_pattern = lru_cache(maxsize=64)(re.compile)


def _fullmatch(pattern: Any, s: Any) -> bool:
    """``PATTERN.fullmatch(s) is not None``. The pattern is a string literal of the expression (compile_expr refuses any
    other: it comes from the catalog, i.e. from the engine's own source, never from a user); the subject is at most
    MAX_MATCH_CHARS characters, so a user's value cannot make the match run long."""
    if not (isinstance(pattern, str) and isinstance(s, str)):
        raise ExprTypeError(f"fullmatch needs a pattern and a string, found {pattern!r}, {s!r}")
    if len(s) > MAX_MATCH_CHARS:
        raise ExprTypeError(f"fullmatch of {len(s):,} characters; the limit is {MAX_MATCH_CHARS:,}")
    return _pattern(pattern).fullmatch(s) is not None


# The errors of Python's re for which the `regex` module (what vLLM compiles user patterns with: 0.34.0
# config/quantization.py:11 `import regex as re`) fails too, checked pattern by pattern against regex 2026.12.2:
# '[', '(foo', 'foo)', 'a**', 'a{2}{3}', 'x{2,1}', '[z-a]', '*.mlp', 'a|*', '\\' (end). re refuses but regex accepts
# '\p{L}', '(?|a|b)', 'a(?i)b', '(?<=a+)b', '[\d-z]', '^*', duplicate group names ...: those stay unknown.
_REGEX_ALSO_REFUSES = ("unterminated character set", "missing ), unterminated subpattern", "unbalanced parenthesis",
                       "multiple repeat", "min repeat greater than max repeat", "bad escape (end of pattern)")


def _is_regex(p: Any) -> bool:
    """Whether vLLM's ``re.compile(p)`` (the `regex` module) accepts the pattern ``p``, told without running it on any
    input: True where Python's re compiles it (regex accepts every such pattern), False for the errors both refuse,
    an ExprTypeError (not evaluable) where only re refuses or the pattern is over MAX_MATCH_CHARS characters."""
    if not isinstance(p, str):
        raise ExprTypeError(f"is_regex needs a string, found {p!r}")
    if len(p) > MAX_MATCH_CHARS:
        raise ExprTypeError(f"is_regex of {len(p):,} characters; the limit is {MAX_MATCH_CHARS:,}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # FutureWarning on '[[' (a possible nested set)
            re.compile(p)
        return True
    except re.error as e:
        msg, at = e.msg, e.pos or 0
        if msg.startswith(_REGEX_ALSO_REFUSES) or (msg.startswith("bad character range") and "\\" not in msg):
            return False
        before = p[:at]
        if msg == "nothing to repeat" and not before.endswith(("^", "$")) and not re.search(r"\\[A-Za-z]$", before):
            return False  # at the start, after '|' or '(' (regex repeats an anchor: '^*', '\\b*')
        raise ExprTypeError(f"is_regex: Python's re refuses {p!r} ({msg}); vLLM's regex module may accept it") from None
    except (OverflowError, RecursionError):
        raise ExprTypeError(f"is_regex: cannot tell for {p[:40]!r}") from None


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min, "max": max, "abs": abs, "round": round, "len": len,
    "ceil": math.ceil, "floor": math.floor, "log2": math.log2, "int": int, "float": float,
    "divisors": divisors,
    "gcd": math.gcd,
    "aligned_divisors": aligned_divisors,
    # text helpers for option strings ("periodic_flushing:format=hatchet" -> "periodic_flushing")
    "lower": lambda s: str(s).lower(),
    "split_first": lambda s, sep: str(s).split(str(sep), 1)[0],
    # per element (for any(... for x in L) / all(...)): a mapping's keys / values / [key, value] pairs, consecutive
    # [a, b] pairs of a list (itertools.pairwise), one element (``x[i]``), finiteness, a string's parts, the
    # distinct elements of a list (``set(x)``)
    "any": lambda xs: any(_seq(xs, "any")), "all": lambda xs: all(_seq(xs, "all")),
    "keys": lambda d: list(_dict(d, "keys")), "values": lambda d: list(_dict(d, "values").values()),
    "items": lambda d: [[k, v] for k, v in _dict(d, "items").items()],
    "pairs": lambda xs: [[a, b] for a, b in zip(_seq(xs, "pairs"), xs[1:])],
    "item": _item, "isfinite": _isfinite, "split": _split, "unique": lambda xs: _unique(_seq(xs, "unique")),
    # select(v for x in L if c): [v for x in L if c] (a generator argument, see the module doc; on a list, the list);
    # sorted(L); tail(x, n): x[n:]
    "select": lambda xs: list(_seq(xs, "select")), "sorted": _sorted, "tail": _tail,
    # fullmatch('literal pattern', s): re.fullmatch, bounded (see _fullmatch); is_regex(p): p compiles (_is_regex)
    "fullmatch": _fullmatch, "is_regex": _is_regex,
}

GENERATOR_FUNCTIONS = ("any", "all", "select")  # the functions a generator may be the one argument of


def _unique(xs: list | tuple) -> list:
    """The distinct elements of ``xs`` in first-seen order, equal as a Python set has them (1, 1.0 and True one)."""
    try:
        return list(dict.fromkeys(xs))
    except TypeError:
        raise ExprTypeError(f"unique: {xs!r} holds an element that is not a number, string or boolean") from None

_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: _mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: _pow, ast.BitAnd: _and}
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
        if not (op is ast.Add and ((isinstance(a, str) and isinstance(b, str))
                                   or (isinstance(a, list) and isinstance(b, list)))):
            raise ExprTypeError(f"arithmetic needs numbers, found {a!r} and {b!r}")


def _generators(node: ast.AST, depth: int = 0) -> None:
    """Every generator is the one argument of ``any`` / ``all`` / ``select``, has one ``for`` (not async) whose target
    is a name or a tuple of names, and nests at most ``MAX_LOOPS`` deep."""
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.GeneratorExp):
        g = node.args[0]
        if not (isinstance(node.func, ast.Name) and node.func.id in GENERATOR_FUNCTIONS and len(node.args) == 1):
            raise ExprError("a generator is allowed only as the one argument of any(), all() or select()")
        if len(g.generators) != 1 or g.generators[0].is_async:
            raise ExprError("any() / all() / select() take one 'for' over a list")
        t = g.generators[0].target
        if not (isinstance(t, ast.Name) or (isinstance(t, ast.Tuple) and t.elts
                                            and all(isinstance(e, ast.Name) for e in t.elts))):
            raise ExprError("the target of 'for' in any() / all() must be a name or a tuple of names")
        if depth + 1 > MAX_LOOPS:
            raise ExprError(f"any() / all() nest deeper than {MAX_LOOPS} levels")
        _generators(g.generators[0].iter, depth)
        for x in [g.elt, *g.generators[0].ifs]:
            _generators(x, depth + 1)
        return
    for c in ast.iter_child_nodes(node):
        if isinstance(c, ast.GeneratorExp):
            raise ExprError("a generator is allowed only as the one argument of any(), all() or select()")
        _generators(c, depth)


def _validate(node: ast.AST, functions: set[str]) -> None:
    loops = False
    for n in ast.walk(node):
        if isinstance(n, (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd,
                          ast.BinOp, ast.Compare, ast.Name, ast.Load, ast.Constant, ast.List, ast.Tuple, ast.Set,
                          ast.IfExp)) or type(n) in _BIN or type(n) in _CMP:
            continue
        if isinstance(n, (ast.GeneratorExp, ast.comprehension, ast.Store)):
            loops = True
            continue
        if isinstance(n, ast.Call):
            if not isinstance(n.func, ast.Name) or n.func.id not in functions or n.keywords:
                name = n.func.id if isinstance(n.func, ast.Name) else "?"
                raise ExprError(f"function '{name}' is not allowed (allowed: {', '.join(sorted(functions))})")
            if not _literal_pattern(n):
                raise ExprError("fullmatch needs two arguments, the first a string literal (the engine's pattern)")
            continue
        raise ExprError(f"'{type(n).__name__}' is not allowed in rule expressions")
    if loops:
        _generators(node)


def _literal_pattern(n: ast.Call) -> bool:
    """A call of fullmatch has a string literal as its pattern (never a fact, so never a user's pattern); other calls
    pass."""
    if not (isinstance(n.func, ast.Name) and n.func.id == "fullmatch"):
        return True
    return len(n.args) == 2 and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)


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


_LOOP_NODES = frozenset({ast.GeneratorExp, ast.comprehension, ast.Store})


def _plainly_valid(tree: ast.AST, functions: set[str]) -> bool:
    """True when ``_check_cost`` and ``_validate`` would both pass ``tree``: one walk over the same nodes in
    ``_check_cost``'s order with the same limits, by exact node types (~4x faster than the two walks; every
    ``check`` compiles ~190 expressions). False sends the tree to the two walks, which word the error."""
    nodes = 0
    loops = False
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
            if type(f) is not ast.Name or f.id not in functions or n.keywords or not _literal_pattern(n):
                return False
        elif t in _LOOP_NODES:
            loops = True
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
    if loops:  # any() / all() generators: their form, as _validate checks it
        try:
            _generators(tree)
        except ExprError:
            return False
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
    return frozenset(read_names(tree) - calls)


def read_names(node: ast.AST, bound: frozenset[str] = frozenset()) -> set[str]:
    """The names ``node`` reads from the facts: every name but those an ``any`` / ``all`` / ``select`` generator
    binds, within that generator (its element and filters; its list is read outside it). Function names are
    included."""
    if isinstance(node, ast.Name):
        return set() if node.id in bound or isinstance(node.ctx, ast.Store) else {node.id}
    if isinstance(node, ast.GeneratorExp):
        g = node.generators[0]
        inner = bound | {n.id for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        out = read_names(g.iter, bound)
        for x in [node.elt, *g.ifs]:
            out |= read_names(x, inner)
        return out
    out: set[str] = set()
    for c in ast.iter_child_nodes(node):
        out |= read_names(c, bound)
    return out


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
    fn = _BUILT.get((text, names))
    return (fn or _compiled(text, names))(facts, fns)


# text -> JSON of [the function names it calls, its tree in plain form (``plain``)], for texts already parsed and
# checked in an earlier run (kg.engine.exprtrees: a content-keyed cache entry); ``compiled`` builds from it
_TREES: dict[str, str] = {}


def add_trees(trees: Mapping[str, str]) -> None:
    """Make ``trees`` (``tree_json`` of each text) known to ``compiled``."""
    _TREES.update(trees)


# (text, extra function names) -> the closures ``_build`` made of its tree, once the text was evaluated twice
_BUILT: dict[tuple[str, tuple[str, ...]], Callable[[Mapping[str, Any], Mapping[str, Any]], Any]] = {}


def compiled(text: str, extra_functions: tuple[str, ...] = ()) -> Callable[[Mapping[str, Any], Mapping[str, Any]], Any]:
    """``text`` (``compile_expr``: same checks and errors) as a function of (facts, functions). Cached by text. Its
    first evaluation walks the tree (``_run``); the second builds one closure per node of the tree (``_build``), each
    holding its node's fields and children, which every later evaluation runs (a sweep evaluates the same few hundred
    expressions on every stack), while a one-shot ``check`` evaluates ~300 of its ~340 texts once: building their
    closures was ~10 % of its run. A text whose checked tree is known (``add_trees``) is not parsed again: its tree
    passed every check of ``compile_expr`` but the allowed functions, which are checked here (a ``check`` parses
    ~270 expressions otherwise: ~9 % of its run)."""
    return _BUILT.get((text, extra_functions)) or _compiled(text, extra_functions)


@lru_cache(maxsize=8192)
def _compiled(text: str, extra_functions: tuple[str, ...] = ()) -> Callable[[Mapping[str, Any], Mapping[str, Any]], Any]:
    known = _TREES.get(text)
    if known is not None:
        import json
        calls, tree = json.loads(known)
        if all(c in FUNCTIONS or c in extra_functions for c in calls):
            return _lazy((text, extra_functions), tree)
    return _lazy((text, extra_functions), plain(compile_expr(text, extra_functions).body))


def _clear() -> None:
    _BUILT.clear()
    _compiled.cache_clear()


compiled.cache_clear = _clear  # type: ignore[attr-defined]


def _lazy(key: tuple[str, tuple[str, ...]], tree: list[Any]) -> Callable[[Mapping[str, Any], Mapping[str, Any]], Any]:
    """The function of ``tree`` (``compiled``): ``_run`` on the first call, ``_build``'s closures from the second on
    (kept in ``_BUILT`` under ``key``, where ``evaluate`` finds them first)."""
    built: Any = None
    first = True

    def run(f: Mapping[str, Any], fns: Mapping[str, Any]) -> Any:
        nonlocal built, first
        if built is None:
            if first:
                first = False
                return _run(tree, f, fns)
            built = _build(tree)
            if len(_BUILT) >= 8192:
                _BUILT.clear()
            _BUILT[key] = built
        return built(f, fns)
    return run


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
    ["if", test, body, orelse], ["call", function, [arguments]],
    ["gen", "any" | "all" | "select", target name | [names], list, element, [filters]] (operators by their ``ast``
    class names)."""
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
        if n.args and isinstance(n.args[0], ast.GeneratorExp):  # any / all over a list (validated by _generators)
            g, c = n.args[0], n.args[0].generators[0]
            target = c.target.id if isinstance(c.target, ast.Name) else [e.id for e in c.target.elts]
            return ["gen", n.func.id, target, plain(c.iter), plain(g.elt), [plain(x) for x in c.ifs]]
        return ["call", n.func.id, [plain(a) for a in n.args]]  # validated at compile time
    return ["refused", type(n).__name__]  # pragma: no cover - rejected by _validate


_OPS = {t.__name__: t for t in (*_BIN, *_CMP)}


class _Scope:
    """The facts with an ``any`` / ``all`` generator's names bound to one element (read before the facts)."""
    __slots__ = ("base", "bound")

    def __init__(self, base: Mapping[str, Any], bound: dict[str, Any]):
        self.base, self.bound = base, bound

    def __contains__(self, name: object) -> bool:
        return name in self.bound or name in self.base

    def __getitem__(self, name: str) -> Any:
        return self.bound[name] if name in self.bound else self.base[name]


def _generator(p: list[Any]) -> Callable[[Mapping[str, Any], Mapping[str, Any]], Any]:
    """``any(elt for target in list if filter)`` / ``all(...)`` / ``select(...)``: the list must be a list (or tuple)
    of at most MAX_ITEMS elements; a tuple target takes an element of as many parts; ``any`` stops at the first true
    element, ``all`` at the first false one, as Python's do; ``select`` gives the list of ``elt`` of the elements the
    filters keep."""
    is_any, target = p[1] == "any", p[2]
    seq, elt, ifs = _build(p[3]), _build(p[4]), tuple(_build(x) for x in p[5])

    def gen(f: Mapping[str, Any], fns: Any) -> Any:
        kept: list[Any] = []
        for v in _seq(seq(f, fns), p[1]):
            if isinstance(target, str):
                scope = _Scope(f, {target: v})
            else:
                if not isinstance(v, (list, tuple)) or len(v) != len(target):
                    raise ExprTypeError(f"{p[1]}: cannot unpack {v!r} into {', '.join(target)}")
                scope = _Scope(f, dict(zip(target, v)))
            if ifs and not all(c(scope, fns) for c in ifs):
                continue
            if p[1] == "select":
                kept.append(elt(scope, fns))
            elif bool(elt(scope, fns)) is is_any:
                return is_any
        return kept if p[1] == "select" else not is_any
    return gen


def _run(p: list[Any], f: Mapping[str, Any], fns: Mapping[str, Any]) -> Any:
    """The value of node ``p`` (``plain`` form) on facts ``f``: what ``_build(p)(f, fns)`` returns or raises, without
    making the closures (each branch below is the closure ``_build`` makes for that kind of node, inlined)."""
    kind = p[0]
    if kind == "n":
        name = p[1]
        if name in ("true", "True"):
            return True
        if name in ("false", "False"):
            return False
        if f.__class__ is dict:
            v = f.get(name)
            if v is None:
                raise MissingFact(name)
            return v
        if name not in f or f[name] is None:
            raise MissingFact(name)
        return f[name]
    if kind == "c":
        return p[1]
    if kind == "cmp":
        a = _run(p[1], f, fns)
        for o, c in p[2]:
            op_t = _OPS[o]
            b = _run(c, f, fns)
            _check_types(op_t, a, b)
            if not _CMP[op_t](a, b):
                return False
            a = b
        return True
    if kind == "and":
        v: Any = True
        for c in p[1]:
            v = _run(c, f, fns)
            if not v:
                return v
        return v
    if kind == "or":
        v = False
        for c in p[1]:
            v = _run(c, f, fns)
            if v:
                return v
        return v
    if kind == "not":
        return not _run(p[1], f, fns)
    if kind == "-" or kind == "+":
        v = _run(p[1], f, fns)
        if not _is_num(v):
            raise ExprTypeError(f"unary minus needs a number, found {v!r}")
        return -v if kind == "-" else +v
    if kind == "bin":
        op_t = _OPS[p[1]]
        a = _run(p[2], f, fns)
        b = _run(p[3], f, fns)
        _check_types(op_t, a, b)
        return _BIN[op_t](a, b)
    if kind == "list":
        return [_run(x, f, fns) for x in p[1]]
    if kind == "set":
        return {_run(x, f, fns) for x in p[1]}
    if kind == "if":
        return _run(p[2], f, fns) if _run(p[1], f, fns) else _run(p[3], f, fns)
    if kind == "call":
        return fns[p[1]](*[_run(a, f, fns) for a in p[2]])
    if kind == "gen":
        is_any, target = p[1] == "any", p[2]
        kept: list[Any] = []
        for v in _seq(_run(p[3], f, fns), p[1]):
            if isinstance(target, str):
                scope = _Scope(f, {target: v})
            else:
                if not isinstance(v, (list, tuple)) or len(v) != len(target):
                    raise ExprTypeError(f"{p[1]}: cannot unpack {v!r} into {', '.join(target)}")
                scope = _Scope(f, dict(zip(target, v)))
            if p[5] and not all(_run(c, scope, fns) for c in p[5]):
                continue
            if p[1] == "select":
                kept.append(_run(p[4], scope, fns))
            elif bool(_run(p[4], scope, fns)) is is_any:
                return is_any
        return kept if p[1] == "select" else not is_any
    raise ExprError(f"'{p[1]}' is not allowed")  # pragma: no cover - rejected by _validate


def _build(p: list[Any]) -> Callable[[Mapping[str, Any], Mapping[str, Any]], Any]:
    """The closure of one node (``plain`` form). A name missing from the facts or None raises MissingFact; ``true`` /
    ``false`` are booleans; operands are type-checked (``_check_types``) before an operator applies; ``and`` / ``or``
    return the deciding operand; a chained comparison stops at the first false link; lists and tuples give lists."""
    kind = p[0]
    if kind == "c":
        return constant(p[1])
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
        if len(parts) == 2:  # most: Python's own (the deciding operand, as below), no loop (kg.engine.exprcmp)
            return pair(kind, *parts)
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
        if len(p[2]) == 1:  # most: kg.engine.exprcmp
            return compare_one(first, _OPS[p[2][0][0]], p[2][0][1], _build, _check_types, _CMP)
        chain = tuple((_OPS[o], _CMP[_OPS[o]], _build(c), _OPS[o] in ORDER) for o, c in p[2])  # else no check

        def compare(f: Mapping[str, Any], fns: Any) -> Any:
            a = first(f, fns)
            for op_t, op, c, order in chain:
                b = c(f, fns)
                if order:
                    _check_types(op_t, a, b)
                if not op(a, b):
                    return False
                a = b
            return True
        return compare
    if kind == "list" or kind == "set":  # a literal of constants: kg.engine.exprcmp
        elts, as_list = () if literal(p) else tuple(_build(x) for x in p[1]), kind == "list"
        return literal(p) or (lambda f, fns: [c(f, fns) for c in elts] if as_list else {c(f, fns) for c in elts})
    if kind == "if":
        test, body, orelse = _build(p[1]), _build(p[2]), _build(p[3])
        return lambda f, fns: body(f, fns) if test(f, fns) else orelse(f, fns)
    if kind == "call":  # kg.engine.exprcmp: no list made for one or two arguments
        return call(p[1], tuple(_build(a) for a in p[2]))
    if kind == "gen":
        return _generator(p)

    def refused(f: Mapping[str, Any], fns: Any) -> Any:  # pragma: no cover - rejected by _validate
        raise ExprError(f"'{p[1]}' is not allowed")
    return refused
