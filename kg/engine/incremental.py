"""Exact reuse of results across the stacks of a sweep: a result that depends only on some named values is
computed once per distinct set of those values.

A sweep checks thousands of copies of one stack that differ in a few settings (TP, DCP, KV dtype ...). Most
rules and generated engine-check rows read none of the facts those settings change, and the rest read them
at a handful of distinct values. ``freeze`` turns the values an item reads into a key that is equal only for
values every expression treats alike (the type is part of it: ``True`` is not ``1``, ``1`` is not ``1.0``), so
a memo keyed on it returns exactly what evaluating again would return (tests/test_sweep_incremental.py compares
a sweep's findings with and without the memo). ``Memo`` is such a memo, bounded.
"""
from __future__ import annotations

from typing import Any, Hashable

def freeze(v: Any) -> Hashable:
    """A hashable key for ``v`` equal to another's only when the two values are of the same types throughout and
    equal (``-0.0`` and ``0.0`` differ too: text formats them apart). A value of another type gets a key equal to
    nothing else, so a memo never reuses a result for it."""
    t = v.__class__
    if t is str or t is int or t is bool or v is None:
        return (t, v)
    if t is float:
        return (t, v) if v else (t, v, repr(v))
    if t is list or t is tuple:
        return (t, tuple([freeze(x) for x in v]))
    if t is dict:
        return (t, tuple([(freeze(k), freeze(x)) for k, x in v.items()]))
    if t is set or t is frozenset:
        return (t, frozenset([freeze(x) for x in v]))
    return (t, object())  # unknown type: a key equal to nothing else


class Memo(dict):
    """key -> result, cleared when it holds ``limit`` entries (a long process stays bounded)."""

    def __init__(self, limit: int = 200_000):
        super().__init__()
        self.limit = limit

    def put(self, key: Hashable, value: Any) -> Any:
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value


MISSING = object()  # a name the namespace lacks (distinct from a fact that is None)


def same(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are of the same types throughout and equal (what ``freeze`` keys alike), checked without
    building keys: most values of two stacks of a sweep are the very same objects."""
    if a is b:
        return True
    t = a.__class__
    if t is not b.__class__:
        return False
    if t is str or t is int or t is bool:
        return a == b
    if t is float:
        return a == b and (a != 0 or repr(a) == repr(b))
    if t is list or t is tuple:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if t is dict:
        return list(a) == list(b) and all(same(v, b[k]) for k, v in a.items())
    if t is set or t is frozenset:
        return freeze(a) == freeze(b)
    return False  # another type: not known to be equal


class RuleState:
    """What one ruleset gave on the previous stack of a sweep (kg.engine.rules.evaluate_rules with a ``Session``):
    per rule the names it reads, so that on the next stack only the rules reading a changed value re-run.

    A rule's Firing depends on: the engine and release (part of the state's key), the facts the engine matched
    (any change of the structural facts re-runs every rule), its parent's outcome, and the namespace values of the
    names its condition, numbers, severity bands and message read, plus ``techniques`` when it calls a function
    beyond kg.engine.expr.FUNCTIONS (``has``, which reads the stack's techniques)."""

    def __init__(self, rs: Any):
        from kg.core.template import _FIELD, MAX_TEMPLATE
        from kg.engine.expr import FUNCTIONS, compile_expr, names_in
        import ast
        self.reads: list[tuple[str, ...]] = []
        index: dict[str, list[int]] = {}
        for i, r in enumerate(rs.rules):
            texts = [t for t in [r.condition, *r.numbers.values(), *(b["when"] for b in r.severity_bands)] if t]
            names: set[str] = set()
            for t in texts:
                names |= names_in(t)
                tree = compile_expr(t, ("has",))
                if any(isinstance(n, ast.Call) and n.func.id not in FUNCTIONS for n in ast.walk(tree)):
                    names.add("techniques")
            for m in _FIELD.finditer(r.message[:MAX_TEMPLATE] if isinstance(r.message, str) else ""):
                if m.group(1) is not None:
                    names.add(m.group(1).partition(":")[0])
            self.reads.append(tuple(sorted(names)))
            for n in names:
                index.setdefault(n, []).append(i)
        self.index = index
        self.union = tuple(sorted(index))
        self.prev_vals: dict[str, Any] | None = None
        self.prev_facts: Any = None
        self.prev_matched: dict[str, list] | None = None
        self.prev_out: list[Any] = []
        self.prev_parent: list[bool] = []
        self.matches = Memo(4096)  # frozen facts -> what the engine matched

    def begin(self, facts: list[dict[str, Any]], ns: dict[str, Any], match) -> tuple[dict[str, list], set[int] | None,
                                                                                  dict[str, Any], Any]:
        """(matched rules, the rule indices to re-run or None for all, this stack's values, its frozen facts)."""
        ff = tuple(freeze(f) for f in facts)
        vals = {n: ns.get(n, MISSING) for n in self.union}
        if ff == self.prev_facts and self.prev_vals is not None:
            pv, redo = self.prev_vals, set()
            for n, v in vals.items():
                if not same(v, pv[n]):
                    redo.update(self.index[n])
            return self.prev_matched, redo, vals, ff
        matched = self.matches.get(ff)
        if matched is None:
            matched = {}
            for rid, fs in match(facts):
                matched.setdefault(rid, []).append(fs)
            self.matches.put(ff, matched)
        return matched, None, vals, ff

    def end(self, matched: dict[str, list], vals: dict[str, Any], ff: Any, out: list[Any], parent: list[bool]) -> None:
        self.prev_matched, self.prev_vals, self.prev_facts, self.prev_out, self.prev_parent = matched, vals, ff, out, parent


class Session:
    """The per-sweep state of every ruleset evaluated under it (``use``): one RuleState per ruleset object, engine
    and release. Only a caller whose rule functions read nothing but the namespace's ``techniques`` may use one
    (kg.analyses.check: ``has``)."""

    def __init__(self) -> None:
        self.states: dict[tuple[int, Any, Any], tuple[Any, RuleState]] = {}

    def rules(self, rs: Any, engine: str | None, version: str | None) -> RuleState:
        key = (id(rs), engine, version)
        hit = self.states.get(key)
        if hit is None or hit[0] is not rs:
            if len(self.states) > 256:
                self.states.clear()
            hit = self.states[key] = (rs, RuleState(rs))  # the ruleset is kept: its id is not reused meanwhile
        return hit[1]


_CURRENT: Any = None


def current() -> Session | None:
    """The Session ``use`` made current in this context (None outside a sweep)."""
    return _CURRENT.get() if _CURRENT is not None else None


def use(session: Session | None):
    """Context manager: evaluate_rules inside it reuses ``session``'s results (None: plain evaluation)."""
    import contextlib
    import contextvars
    global _CURRENT
    if _CURRENT is None:
        _CURRENT = contextvars.ContextVar("optkg_incremental", default=None)
    var = _CURRENT

    @contextlib.contextmanager
    def cm():
        token = var.set(session)
        try:
            yield session
        finally:
            var.reset(token)
    return cm()
