"""Evaluating generated engine-check rows (kg.analyses.enginechecks.generated_refusals): one row's facts and outcome,
and the rows across the stacks of a sweep (kg.engine.incremental), where a row keeps its outcome while its inputs
do not change and is looked up by its inputs otherwise, so each distinct set of inputs is evaluated once per
sweep. The outcomes equal a fresh evaluation's (tests/test_sweep_incremental.py). ``reads``: the names each row
reads (kg.analyses.enginechecks._row_reads, with their ``union``)."""
from __future__ import annotations

from itertools import repeat
from operator import is_, is_not
from typing import Any

from kg.core.lazyre import lazy_re
from kg.engine.incremental import MISSING, Memo, Numbers, changed, freeze, same

_EXPR: tuple = ()  # (evaluate, FUNCTIONS, NONE, the errors a let may raise, those a row may raise, MissingFact)


def _expr() -> tuple:
    """kg.engine.expr's evaluator and kg.frameworks.checkrows' functions, imported on first use (not with this module)
    and bound once: an import statement costs ~1 us a call, and a sweep's first stack evaluates ~550 lets and ~220
    rows (the imports in ``value``, ``_row_again`` and ``_verdict`` were ~12 % of it)."""
    global _EXPR
    if not _EXPR:
        from kg.engine.expr import ExprError, ExprTypeError, MissingFact, evaluate
        from kg.frameworks.checkrows import FUNCTIONS, NONE
        _EXPR = (evaluate, FUNCTIONS, NONE, (MissingFact, ExprTypeError, TypeError, ValueError, ZeroDivisionError),
                 (MissingFact, ExprTypeError, ExprError, TypeError, ValueError, ZeroDivisionError), MissingFact)
    return _EXPR



def sweep_config_keys(stack: Any, given: Any, ns: dict[str, Any], session: Any, build: Any) -> dict[str, Any]:
    """``build`` (kg.analyses.enginechecks.model_config_keys) in a sweep: once per config.json object and the four
    inputs it reads besides it (the result is only read, by ``base.update``)."""
    raw = getattr(getattr(stack, "model", None), "raw_config", None)
    key = ("config-keys", id(raw), given("hf_overrides"), given("hf_config_path"), given("config_format"),
           str(ns.get("config_format", "auto")).lower())
    hit = session.extra.get(key)
    if hit is None or hit[0] is not raw:
        hit = session.extra[key] = (raw, build(stack, given, ns))  # raw is kept: its id stays unique
    return hit[1]


def sweep_outcomes(d: dict[str, Any], reads: list[tuple[str, ...]], union: frozenset[str], base: dict[str, Any],
                   given: Any, techniques: set[str], defaulted_techs: set[str], session: Any) -> list[list]:
    """Every row's ``[outcome, refusal]`` (``row_outcome``; ``refusal``: the entry kg.analyses.enginechecks
    .generated_refusals lists for a refusing row, filled in by it on first use, else None) for one stack of a sweep:
    a row none of whose inputs (the values of the names it reads, whether the stack gives its defaulted names and
    technique-set options, those techniques) changed since the previous stack keeps its entry; the others are
    looked up by those inputs (they decide the facts ``row_facts`` gives it, and the message's fields: they are
    among the names it reads), and run only for inputs not met before in the sweep."""
    rows = d["rows"]
    plan = session.extra.get(("rows", id(d)))
    if plan is None or plan[0] is not d:
        index, inputs, flags, named, let_names, pos, lets, gflags, tflags, hflags = _rows_plan(d, reads)
        plan = session.extra[("rows", id(d))] = [d, index, None, inputs, flags, Memo(), named,
                                                 Numbers(), _LetValues(lets, let_names), pos, None, None, lets,
                                                 gflags, tflags, frozenset(gflags), {}, hflags,
                                                 frozenset(named)]  # 10, 11: unused
    index, inputs, flags, memo, names, numbers = plan[1], plan[3], plan[4], plan[5], plan[6], plan[7]
    let_values, pos, lets = plan[8], plan[9], plan[12]
    gflags, tflags = plan[13], plan[14]
    # one state per technique set, as kg.engine.incremental.RuleState: a stack is compared with the last stack of
    # its technique set (a sweep alternates them: KV fp8 on / off), so the rows reading ``techniques`` stay put
    tset = frozenset(techniques)
    state = plan[16].get(tset)
    if state is None:
        if len(plan[16]) > 256:
            plan[16].clear()
        was = plan[2]  # a new set starts from the last stack's state (a copy): its rows are compared with that stack
        state = plan[16][tset] = [None, [None] * len(rows), [None] * len(rows)] if was is None else \
            [was[0], [p[:] for p in was[1]], list(was[2])]
    plan[2] = state
    prev, parts, last = state
    # the flags that are true: the defaulted names the stack gives, the techniques that set an option
    given_now = frozenset(filter(given, plan[15]))
    tech_now = frozenset([t for t in tflags if t in techniques and t not in defaulted_techs])
    hflags = plan[17]
    has_now = frozenset([t for t in hflags if t in techniques])  # the techniques rows ask about that are there

    def number(n: Any) -> int:
        if n.__class__ is tuple:  # a flag
            v = n[1] in given_now if n[0] == "given" else n[1] in tech_now if n[0] == "technique" else n[1] in has_now
        else:
            v = base.get(n, MISSING)
        return numbers.number(None, freeze(v))
    collide = not let_values.lets.keys().isdisjoint(base)  # a let's name among the stack's facts (none so far)
    if prev is None:  # every row's input numbers, kept per row and updated where an input changes
        todo, out = range(len(rows)), [None] * len(rows)
        seen: dict[Any, int] = {}  # each input numbered once (rows share most of theirs: ~2,300 inputs, ~300 names)
        for i in todo:
            parts[i] = [seen[n] if n in seen else seen.setdefault(n, number(n)) for n in inputs[i]]
    else:
        redo: set[int] = set()
        # the names whose value differs from the last stack's: only names of the two stacks' base facts (~100 of the
        # ~530 some row reads) can; the others are missing both times. Compared in ``names`` order
        was = prev[2]
        both = base.keys() | was.keys()
        ks = tuple(sorted(both & plan[18])) if len(both) < len(names) else names
        moved = changed(ks, tuple(map(base.get, ks, repeat(MISSING, len(ks)))),
                        tuple(map(was.get, ks, repeat(MISSING, len(ks))))) + [gflags[n] for n in given_now ^ prev[0]] \
            + [tflags[t] for t in tech_now ^ prev[3]] + [hflags[t] for t in has_now ^ prev[4]]
        for n in moved:
            k = number(n)
            for i in index[n]:
                parts[i][pos[i][n]] = k
            redo |= index[n]
        todo, out = sorted(redo), list(prev[1])
    for i in todo:
        key = (i, tuple(parts[i]))
        done = memo.get(key)
        if done is None:
            s = rows[i]
            done = memo.put(key, [_row_lazy(s, row_facts(s, reads[i], base, given, techniques, defaulted_techs),
                                            let_values, last, i, collide), None])
        out[i] = done
    state[0] = (given_now, out, base, tech_now, has_now)  # base: only read (kg.analyses.enginechecks makes one a stack)
    return out


_PLANS: dict[int, tuple[Any, Any, tuple]] = {}


def _rows_plan(d: dict[str, Any], reads: list[tuple[str, ...]]) -> tuple:
    """What ``sweep_outcomes`` reads of the rows ``d`` (the names ``reads``) whatever the stack: per row its inputs
    (names, ``("has", id)`` for a technique it only tests, ``("given", name)``, ``("technique", id)``) and their
    places, the rows reading each input, the flags by kind, the names some row reads, each let's names. Once per
    rows object (kept, like the rules' read sets: kg.engine.incremental.RuleState), not per sweep: building it cost
    ~15 % of a sweep's first stack."""
    hit = _PLANS.get(id(d))
    if hit is not None and hit[0] is d and hit[1] is reads:
        return hit[2]
    rows = d["rows"]
    index: dict[Any, set[int]] = {}
    inputs: list[tuple[Any, ...]] = []
    lets = {x[0]: x for x in d["lets"]}
    for i, s in enumerate(rows):
        mine = list(reads[i])
        tests = _technique_tests(s, lets, d) if "techniques" in mine and "techniques" not in (s.get("defaults")
                                                                                               or {}) else None
        if tests is not None:  # it asks only whether some techniques are there: those answers are its inputs
            mine = [n for n in mine if n != "techniques"] + [("has", t) for t in tests]
        for k in [*(s.get("defaults") or {}), *(s.get("set_by_technique") or {})]:
            mine.append(("given", k))
        for tid in (s.get("set_by_technique") or {}).values():
            mine.append(("technique", tid))
        inputs.append(tuple(dict.fromkeys(mine)))
        for n in inputs[-1]:
            index.setdefault(n, set()).add(i)
    flags = tuple(k for k in index if k.__class__ is tuple)
    from kg.frameworks.checkrows import names_of
    let_names = {x[0]: names_of(str(x[1])) for x in d["lets"]}
    pos = [{n: j for j, n in enumerate(ins)} for ins in inputs]
    # the flags' names: ("given", name) -> name, ("technique", id) -> id, each kind apart
    gflags = {k[1]: k for k in flags if k[0] == "given"}
    tflags = {k[1]: k for k in flags if k[0] == "technique"}
    hflags = {k[1]: k for k in flags if k[0] == "has"}
    named = tuple(sorted(k for k in index if k.__class__ is str))  # the names some row reads (not as a flag)
    out = (index, inputs, flags, named, let_names, pos, lets, gflags, tflags, hflags)
    if len(_PLANS) > 64:
        _PLANS.clear()
    _PLANS[id(d)] = (d, reads, out)  # d and reads kept: their ids are not reused meanwhile
    return out


_MEMBER = lazy_re(r"""(['"])([^'"\\]+)\1\s+(?:not\s+)?in\s+techniques\b""")
_TECHNIQUES = lazy_re(r"\btechniques\b")


def _technique_tests(s: dict[str, Any], lets: dict[str, list], d: dict[str, Any]) -> tuple[str, ...] | None:
    """The technique ids row ``s`` tests with ``'<id>' in techniques`` (or ``not in``) in its expression, its lets and
    its message's fields (and their lets), when that is all it does with ``techniques``; else None (it reads the
    list otherwise: the whole list is its input)."""
    texts = [str(s.get("expr") or ""), *(str(lets[n][1]) for n in s.get("lets") or [])]
    pairs = [(x[0], str(x[1])) for x in d["lets"]]
    for text in (s.get("fills") or {}).values():
        if text is not None:
            texts += [str(text), *(e for _, e in _lets_read(str(text), pairs))]
    ids: list[str] = []
    for t in texts:
        found = _MEMBER.findall(t)
        if len(found) != len(_TECHNIQUES.findall(t)):
            return None  # another use (or the word in a string): not only membership tests
        ids += [x[1] for x in found]
    return tuple(dict.fromkeys(ids))


def _let_names(lets: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Each let's names (kg.frameworks.checkrows.names_of: its value depends on nothing else); a let whose expression
    does not parse is left out (its rows are evaluated without sharing it)."""
    from kg.frameworks.checkrows import names_of
    out = {}
    for n, e in lets:
        try:
            out[n] = list(names_of(e))
        except (SyntaxError, RecursionError, MemoryError, ValueError):
            pass
    return out


def _lets_read(expr: str, lets: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The lets ``expr`` reads, directly or through other lets, in definition order (kg.frameworks.checkrows)."""
    if not lets:
        return []
    from kg.frameworks.checkrows import lets_read_by, names_of
    return lets_read_by(names_of(expr), lets)


_FILL_LETS: dict[int, tuple[Any, Any, list[tuple[str, str]]]] = {}


def fill_lets(fills: dict[str, Any], d: dict[str, Any]) -> list[tuple[str, str]]:
    """The lets (name, expression) of ``d`` the message fields ``fills`` read, directly or through other lets, in
    definition order (kg.analyses.enginechecks._fill_facts). Once per fields object: the expressions are parsed
    to find them, and a sweep fills a refusing row's message for each new set of its values."""
    hit = _FILL_LETS.get(id(fills))
    if hit is not None and hit[0] is fills and hit[1] is d:
        return hit[2]
    lets = [(x[0], x[1]) for x in d["lets"]]
    need: list[tuple[str, str]] = []
    for text in fills.values():
        if text is not None:
            need += [x for x in _lets_read(str(text), lets) if x not in need]
    out = sorted(need, key=lambda x: lets.index(x))
    if len(_FILL_LETS) > 4096:
        _FILL_LETS.clear()
    _FILL_LETS[id(fills)] = (fills, d, out)  # both kept: their ids are not reused meanwhile
    return out


def row_facts(s: dict[str, Any], reads: tuple[str, ...], base: dict[str, Any], given: Any, techniques: set[str],
              defaulted_techs: set[str]) -> dict[str, Any]:
    """The facts row ``s`` is evaluated on: the stack's (``base``) for the names it reads, its own defaults for the
    names the stack does not give, and the options its techniques set (``generated_refusals``)."""
    NONE = (_EXPR or _expr())[2]
    dflt = s.get("defaults") or {}
    facts = {k: base[k] for k in reads if k in base}  # the names this row reads
    for k in dflt:  # and for the row's own defaulted names
        if k in facts and not given(k):
            del facts[k]
    for k, v in dflt.items():
        if k not in facts and v is not None:
            facts[k] = v.lower() if isinstance(v, str) and v != NONE else v
    for fact, tid in (s.get("set_by_technique") or {}).items():
        if not given(fact) and tid in techniques and tid not in defaulted_techs:
            facts[fact] = True
    return facts


_FAILED = object()  # a let that raised (the rows reading it are then not evaluable)


class _LetValues:
    """A sweep's let values (``row_outcome``): a let's value depends on nothing but the values of the names its
    expression reads (inputs, the row's defaults, lets before it), so it is kept per let and those values
    (numbered: kg.engine.incremental.Numbers; a value seen again as the same object is not frozen again). Rows
    share most of their lets: one evaluation serves every row and stack reading it at those values."""

    def __init__(self, lets: dict[str, list], names: dict[str, tuple[str, ...]]):
        self.lets, self.names = lets, names
        self.expr = _expr()
        self.numbers, self.memo, self.last = Numbers(), Memo(), {}
        self.seen: dict[str, tuple[tuple[Any, ...], Any]] = {}  # let -> the values it read last, its value
        order = {n: i for i, n in enumerate(lets)}
        # each let's names that are lets defined before it (evaluated first; a later one is not there yet)
        self.before = {n: tuple(m for m in names.get(n, ()) if order.get(m, len(order)) < order[n]) for n in lets}
        self.mine: dict[int, tuple[Any, frozenset[str]]] = {}  # id(row) -> (row, the lets it reads)

    def row_lets(self, s: dict[str, Any]) -> frozenset[str]:
        """The lets row ``s`` reads (directly or through other lets), as a set, once per row object."""
        hit = self.mine.get(id(s))
        if hit is None or hit[0] is not s:
            hit = self.mine[id(s)] = (s, frozenset(s["lets"]))  # s is kept: its id is not reused meanwhile
        return hit[1]

    def resolve(self, name: str, facts: dict[str, Any], failed: set[str]) -> None:
        """Let ``name`` into ``facts`` as ``row_outcome`` evaluates it in definition order: the lets before it that it
        reads first, then it when every input and let it always reads is there (else, or when it raises, it stays
        out and goes into ``failed``)."""
        for m in self.before[name]:
            if m not in facts and m not in failed:
                self.resolve(m, facts, failed)
        _, expr, needs, needs_lets = self.lets[name]
        get = facts.get  # every input and let it always reads is there (at C speed: a generator is ~2 K instructions)
        if all(map(is_not, map(get, needs), repeat(None))) and all(map(is_not, map(get, needs_lets), repeat(None))):
            v = self.value(name, expr, facts)
            if v is not _FAILED:
                facts[name] = v
                return
        failed.add(name)

    def value(self, name: str, expr: str, facts: dict[str, Any]) -> Any:
        names = self.names[name]
        vals = tuple(map(facts.get, names, repeat(MISSING, len(names))))
        seen = self.seen.get(name)
        if seen is not None and all(map(is_, vals, seen[0])):
            out = seen[1]  # the very values of its last evaluation (the rows of a stack share most lets)
            return None if out is _NONE else out
        last, number, parts = self.last, self.numbers.number, []
        for n, v in zip(names, vals):
            hit = last.get(n)
            if hit is None or hit[0] is not v:
                hit = last[n] = (v, number(v))
            parts.append(hit[1])
        key = (name, tuple(parts))
        out = self.memo.get(key)
        if out is None:
            evaluate, functions, _, errors, _, _ = self.expr
            try:
                out = evaluate(expr, facts, functions)
            except errors:
                out = _FAILED
            out = self.memo.put(key, out if out is not None else _NONE)
        self.seen[name] = (vals, out)  # the values are kept: their identities are not reused meanwhile
        return None if out is _NONE else out


_NONE = object()  # a let whose value is None, as kept


class _SharedLets(_LetValues):
    """The let values of one stack's rows outside a sweep (kg.analyses.enginechecks.generated_refusals): rows share
    most lets, and a let's value depends on nothing but the values of the names it reads (``names``: the cached
    table's ``let_names``), so it is evaluated once per such values (a check of vLLM 0.34.0 evaluated 73 lets ~320
    times). A let missing from ``names`` (its expression does not parse) is evaluated for each row."""

    def value(self, name: str, expr: str, facts: dict[str, Any]) -> Any:
        if name in self.names:
            return super().value(name, expr, facts)
        from kg.engine.expr import ExprTypeError, MissingFact, evaluate
        from kg.frameworks.checkrows import FUNCTIONS
        try:
            return evaluate(expr, facts, FUNCTIONS)
        except (MissingFact, ExprTypeError, TypeError, ValueError, ZeroDivisionError):
            return _FAILED


def _row_lazy(s: dict[str, Any], facts: dict[str, Any], let_values: _LetValues, last: list, i: int,
              collide: bool = False) -> int:
    """``row_outcome`` of row ``s`` (index ``i``) on ``facts`` (``row_facts``) in a sweep or a check (kg.analyses
    .enginechecks: ``last`` is then ``[None]``), its lets evaluated only
    when the row reads them: those it always reads (``needs_lets``) first, then one each time its expression stops at
    a let not evaluated yet (MissingFact names it), and the expression again from the start. The outcome is that of
    evaluating all its lets first (``row_outcome``): an expression is a pure function of its facts, so a run stops at
    the same place until the let it reads is there, and a let's value depends only on the names it reads (those that
    are lets defined before it are evaluated first, as in definition order). A first stack of vLLM 0.34.0 reads 139
    of its rows' 1,214 lets this way (``and`` / ``or`` / ``if`` stop early). The lets evaluated on the row's last
    evaluation (``last[i]``: its facts, with the lets there, and those that failed) are kept, except those reading a
    name whose value differs from then, directly or through another let."""
    if not all(map(is_not, map(facts.get, s["needs"]), repeat(None))):  # a name it always reads is missing
        return 0
    was = None if collide else last[i]
    if was is None:
        full, failed = dict(facts), set()
        if collide:  # a let's name among the stack's facts: the let's value replaces it (row_outcome)
            for n in s["lets"]:
                full.pop(n, None)
    else:
        before, full, failed = was
        full, failed = dict(full), set(failed)
        if facts.keys() == before.keys():  # the same names (most rows): their values compared at C speed first
            ks = tuple(facts)
            moved = changed(ks, tuple(map(facts.__getitem__, ks)), tuple(map(before.__getitem__, ks)))
        else:
            moved = [n for n in facts.keys() | before.keys()
                     if not same(facts.get(n, MISSING), before.get(n, MISSING))]
        if moved:
            dirty = set(moved)
            for n in moved:
                v = facts.get(n, MISSING)
                if v is MISSING:
                    del full[n]
                else:
                    full[n] = v
            names = let_values.names
            for name in s["lets"]:  # in definition order, those evaluated last time reading a changed name
                if dirty.isdisjoint(names[name]) or (name not in full and name not in failed):
                    continue  # as last time (there with that value, failed, or not evaluated)
                old = full.pop(name, MISSING)
                failed.discard(name)
                let_values.resolve(name, full, failed)  # at once: likely read again
                if not same(full.get(name, MISSING), old):
                    dirty.add(name)
    last[i] = (facts, full, failed)
    for n in s["needs_lets"]:
        if n not in full and n not in failed:
            let_values.resolve(n, full, failed)
        if full.get(n) is None:
            return 0
    evaluate, functions, _, _, errors, missing = _EXPR or _expr()
    expr, mine = s["expr"], None
    while True:
        try:
            hit = evaluate(expr, full, functions)
        except missing as e:
            n = e.name
            if mine is None:
                mine = let_values.row_lets(s)
            if n in mine and n not in full and n not in failed:
                let_values.resolve(n, full, failed)
                continue  # again from the start, the let now there (or known to fail)
            return 0
        except errors:
            return 0
        return 2 if hit is True else 1


def row_outcome(s: dict[str, Any], lets: dict[str, list], facts: dict[str, Any], let_values: Any = None) -> int:
    """Row ``s`` on ``facts`` (the names it reads; its lets are added to a copy): 0 not evaluable, 1 the engine
    accepts, 2 it refuses. A row (or let) missing a name it always reads raises MissingFact whatever the other
    values: it is counted as not evaluable without being run. ``let_values``: a sweep's ``_LetValues``."""
    if not all(facts.get(n) is not None for n in s["needs"]):
        return 0
    evaluate, functions, _, errors, _, _ = _EXPR or _expr()
    facts = dict(facts)
    for name in s["lets"]:
        _, expr, needs, needs_lets = lets[name]
        if not all(facts.get(n) is not None for n in needs) or not all(facts.get(n) is not None for n in needs_lets):
            continue  # it would raise MissingFact; the rows reading it are then not evaluable
        if let_values is not None:
            v = let_values.value(name, expr, facts)
            if v is not _FAILED:
                facts[name] = v
            continue
        try:
            facts[name] = evaluate(expr, facts, functions)
        except errors:
            pass  # the rows reading it are then not evaluable
    return _verdict(s, facts)


def _verdict(s: dict[str, Any], facts: dict[str, Any]) -> int:
    """Row ``s`` on ``facts`` with its lets added: 0 not evaluable (a let it reads is missing or the row raises),
    1 the engine accepts, 2 it refuses."""
    if not all(n in facts and facts[n] is not None for n in s["needs_lets"]):
        return 0
    evaluate, functions, _, _, errors, _ = _EXPR or _expr()
    try:
        hit = evaluate(s["expr"], facts, functions)
    except errors:
        return 0
    return 2 if hit is True else 1
