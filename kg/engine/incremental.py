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

from itertools import chain, compress, repeat
from operator import is_, is_not
from typing import Any, Hashable, Mapping

from kg.core.paths import frozen_stamps

MISSING = object()  # a name the namespace lacks (distinct from a fact that is None)
STATIC_HELD = "no facts match its pattern ("  # kg.engine.rules._fire's reason when the facts decide it alone

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
    if v is MISSING:
        return "<missing>"
    return (t, object())  # unknown type: a key equal to nothing else


_SCALARS = (str, int, float, bool, type(None))
_MUTABLE = frozenset({list, dict, set})  # a value of these types may have changed though it is the same object


def plain_copy(v: Any) -> Any:
    """A deep copy of plain data (what ``dataclasses.asdict`` returns): new lists, tuples and dicts throughout, the
    same immutable scalars, ``copy.deepcopy`` for anything else."""
    t = v.__class__
    if t in _SCALARS:
        return v
    if t is list:
        return [plain_copy(x) for x in v]
    if t is dict:
        return {plain_copy(k): plain_copy(x) for k, x in v.items()}
    if t is tuple:
        return tuple([plain_copy(x) for x in v])
    import copy
    return copy.deepcopy(v)


def _fresh(d: dict[str, Any], names: tuple[str, ...] | None) -> dict[str, Any]:
    """A copy of ``d`` with new lists for its list values (``names`` None), or new lists and dicts for the values of
    ``names`` (their items shared)."""
    if names is None:
        return {k: list(v) if v.__class__ is list else v for k, v in d.items()}
    out = dict(d)
    for k in names:
        v = out.get(k)
        if v.__class__ is list or v.__class__ is dict:
            out[k] = v.copy()
    return out


def model_dict(m: Any) -> dict[str, Any]:
    """``m.to_dict()`` (a fresh deep copy). In a sweep (a current Session) the model's dict is built once per model
    object and copied for each stack: every stack of a sweep shares its base's model object, which nothing changes
    after the stack is read, and a copy is ~30x cheaper than ``dataclasses.asdict``."""
    session = current()
    if session is None:
        return m.to_dict()
    key = ("model_dict", id(m))
    hit = session.extra.get(key)
    if hit is None or hit[0] is not m:
        d = m.to_dict()
        hit = session.extra[key] = (m, d, tuple(k for k, v in d.items() if v.__class__ not in _SCALARS))  # m kept
    out = dict(hit[1])  # plain_copy of it: the scalars (most of the ~100 fields) as they are, the rest copied
    for k in hit[2]:
        out[k] = plain_copy(out[k])
    return out


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


_PLAIN = frozenset({str, int, bool, type(None)})  # types whose ``same`` is ``==`` (within one type)


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
        if len(a) != len(b):
            return False
        ta = list(map(type, a))  # of str / int / bool / None items alike: ``==`` at C speed
        if ta == list(map(type, b)) and _PLAIN.issuperset(ta):
            return a == b
        return all(same(x, y) for x, y in zip(a, b))
    if t is dict:
        return list(a) == list(b) and all(same(v, b[k]) for k, v in a.items())
    if t is set or t is frozenset:
        return freeze(a) == freeze(b)
    return False  # another type: not known to be equal


def same_facts(a: Any, b: Any) -> bool:
    """``same(a, b)`` for two lists of facts (dicts): when every value is a str, int, bool or None (what stack_facts
    builds) it is the same keys in the same order, the same types and equal values, all compared at C speed
    (a Python call per value cost ~0.3 M instructions a stack); else ``same``."""
    if a is b:
        return True
    if a.__class__ is not list or b.__class__ is not list or len(a) != len(b):
        return same(a, b)
    try:
        va = list(chain.from_iterable(map(dict.values, a)))
        vb = list(chain.from_iterable(map(dict.values, b)))
    except TypeError:  # not all dicts
        return same(a, b)
    ta = list(map(type, va))
    if ta != list(map(type, vb)) or not _PLAIN.issuperset(ta):
        return same(a, b)
    return va == vb and list(map(len, a)) == list(map(len, b)) and \
        list(chain.from_iterable(a)) == list(chain.from_iterable(b))


def changed(names: tuple[str, ...], now: tuple[Any, ...], before: tuple[Any, ...]) -> list[str]:
    """The names (in ``names`` order) whose value in ``now`` is not ``same`` as in ``before`` (tuples of values in
    ``names`` order). Values that are the very same objects, most of them, are passed over at C speed."""
    out = []
    for n, v, w in compress(zip(names, now, before), map(is_not, now, before)):
        t = v.__class__
        if t is w.__class__ and (t is str or t is int or t is bool) and v == w:
            continue  # what ``same`` says for these, without the call
        if not same(v, w):
            out.append(n)
    return out


def rule_reads(r: Any) -> tuple[str, ...]:
    """The names rule ``r``'s condition, numbers, severity bands and message read, plus ``techniques`` when it calls
    a function beyond kg.engine.expr.FUNCTIONS (``has``), sorted. Once per rule object, kept on the rule itself (it
    lives and dies with the rule; no table holds rules): a sweep's stacks run several subsets of one ruleset
    (kg.knowledge.couplings.ruleset_for), which share their Rule objects."""
    hit = r.__dict__.get("_sweep_reads")
    if hit is not None:
        return hit
    import ast

    from kg.core.template import _FIELD, MAX_TEMPLATE
    from kg.engine.expr import FUNCTIONS, compile_expr, names_in
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
    out = r.__dict__["_sweep_reads"] = tuple(sorted(names))
    return out


class Numbers:
    """A number per frozen value (``_key``), equal for equal keys, never given to another key: memo keys made of
    them are hashed fast, and a number forgotten (the table is bounded) is not reused, so an old key never meets a
    new value."""

    def __init__(self, limit: int = 100_000):
        self.ids: dict[Any, int] = {}
        self.kept: dict[int, Any] = {}  # values keyed by identity (``_key``): alive while numbered, ids not reused
        self.next, self.limit = 1, limit

    def number(self, v: Any, key: Any = None) -> int:
        k = _key(v) if key is None else key
        n = self.ids.get(k)
        if n is None:
            if len(self.ids) >= self.limit:
                self.ids.clear()
                self.kept.clear()
            if key is None and k[1].__class__ is int and (v.__class__ is dict or v.__class__ is list):
                self.kept[id(v)] = v
            n = self.ids[k] = self.next
            self.next += 1
        return n


class RuleState:
    """What one ruleset gave on the previous stack of a sweep (kg.engine.rules.evaluate_rules with a ``Session``):
    per rule the names it reads, so that on the next stack only the rules reading a changed value re-run.

    A rule's Firing depends on: the engine and release (part of the state's key), the facts the engine matched
    (any change of the structural facts re-runs every rule), its parent's outcome, and the namespace values of the
    names its condition, numbers, severity bands and message read, plus ``techniques`` when it calls a function
    beyond kg.engine.expr.FUNCTIONS (``has``, which reads the stack's techniques)."""

    def __init__(self, rs: Any, engine: Any = None, version: Any = None, shared: "Memo | None" = None,
                 numbers: "Numbers | None" = None):
        plan = rs.__dict__.get("_sweep_plan")
        if plan is None or plan[0] is not rs.rules:
            # the read sets and their index are the ruleset's own: built once per RuleSet object (a sweep's stacks
            # run a few subsets of one ruleset, kept in the process: kg.knowledge.couplings.ruleset_for)
            reads: list[tuple[str, ...]] = []
            index: dict[str, list[int]] = {}
            for i, r in enumerate(rs.rules):
                names = rule_reads(r)
                reads.append(names)
                for n in names:
                    index.setdefault(n, []).append(i)
            pos: dict[str, list[int]] = {}
            for i, r in enumerate(rs.rules):
                pos.setdefault(r.id, []).append(i)
            with_parent = frozenset(i for i, r in enumerate(rs.rules) if r.parent)
            union = tuple(sorted(index))
            at = {n: j for j, n in enumerate(union)}
            rpos = [tuple([at[n] for n in names]) for names in reads]  # each rule's names' places in ``union``
            plan = rs.__dict__["_sweep_plan"] = (rs.rules, reads, index, with_parent, pos, union, rpos)
        self.rules, self.reads, self.index, self.with_parent, self.pos, self.union, self.rpos = plan
        self.at = {n: j for j, n in enumerate(self.union)}  # a name's place in ``union`` (``begin``)
        self.cur_keys: dict[int, int] = {}
        self.engine, self.version = engine, version
        self.prev_vals: tuple[Any, ...] | None = None
        self.prev_facts: Any = None
        self.prev_raw: Any = None  # the facts list ``prev_facts`` froze
        self.prev_matched: dict[str, list] | None = None
        self.prev_out: list[Any] = []
        self.prev_parent: list[bool] = []
        self.matches = Memo(4096)  # the facts (their numbers) -> what the engine matched
        self.fact_ids: dict[Any, int] = {}  # the facts (their numbers) -> a small number, for the firing memo's keys
        self.firings = Memo(200_000)  # (facts number, rule index, values it reads, parent fired) -> Firing
        self.static: dict[tuple[int, int, bool], Any] = {}  # (facts number, rule index, parent fired) -> Firing
        # the Session's memo over every ruleset of the sweep: (rule object, engine, release, what the engine matched
        # for that rule, parent fired, values it reads) -> Firing. Each technique set runs its own subset of the
        # ruleset (own facts, own RuleState), but most rules are the same objects and their inputs the same
        self.shared = shared if shared is not None else Memo(200_000)
        self.numbers = numbers if numbers is not None else Numbers()  # the memo keys' numbers for values
        self.fid = 0
        self.cur_matched: dict[str, list] = {}
        self.cur_match_keys: dict[str, tuple] = {}
        self.cur_kinds: tuple[set, set] | None = None
        self.cur_mkeys: dict[int, Any] = {}
        self.mkeys: dict[int, dict[int, Any]] = {}  # facts number -> rule index -> its match key

    def begin(self, facts: list[dict[str, Any]], ns: dict[str, Any], compiled) -> tuple[dict[str, list], set[int] | None,
                                                                                  tuple[Any, ...], Any]:
        """(matched rules: per rule id the indices in ``facts`` of each combination of facts it matched, the rule
        indices to re-run or None for all, this stack's values in ``union`` order, its facts as numbers of their
        frozen forms)."""
        if self.prev_raw is not None and same_facts(facts, self.prev_raw):
            ff = self.prev_facts  # the facts of the last stack again (most stacks): not frozen again
        else:
            # each fact as the number of its frozen form (``Numbers``: equal numbers only for equal facts): the match
            # keys built of them are compared and hashed as small ints, not as nested tuples (``seeds`` compared
            # ~190 matches of two technique sets item by item, ~2 M instructions a set's first stack)
            number = self.numbers.number
            ff = tuple([number(None, freeze(f)) for f in facts])
        self.cur_raw = facts
        union = self.union
        # this stack's values of the names the rules read, in ``union`` order (``firing`` reads them by position)
        vals = tup = self.cur_tup = tuple(map(ns.get, union, repeat(MISSING, len(union))))
        fid = self.fact_ids.get(ff)
        if fid is None:
            if len(self.fact_ids) > 4096:
                self.fact_ids.clear()
                self.firings.clear()
                self.static.clear()
            fid = self.fact_ids[ff] = len(self.fact_ids) + 1 + self.fid
            self.fid = fid
        self.current = fid
        mk = self.mkeys.get(fid)
        if mk is None:
            if len(self.mkeys) > 4096:
                self.mkeys.clear()
            mk = self.mkeys[fid] = {}
        self.cur_mkeys, self.cur_kinds = mk, None
        self.cur_facts = facts
        if ff == self.prev_facts and self.prev_vals is not None:
            redo, index, keys, at = set(), self.index, self.cur_keys, self.at
            for n in changed(union, tup, self.prev_tup):
                redo.update(index[n])
                keys.pop(at[n], None)
            # the numbers ``firing`` gave the last stack's values (``cur_keys``, by position) stay those of the values
            # that did not change: ``same`` values freeze alike, so they number alike (a list is not frozen again)
            self.cur_matched = self.prev_matched  # and cur_match_keys: this state's last stack had these facts
            return self.prev_matched, redo, vals, ff
        got = self.matches.get(ff)
        if got is None:
            # per rule the indices of the facts it matched (kg.engine.rules.matched_facts copies them for a rule that
            # runs: ~190 matches, ~60 rules run on a technique set's first stack) and their numbers
            matched: dict[str, list] = {}
            keys: dict[str, list] = {}
            number_at = ff.__getitem__
            for rid, ix in compiled.match_indices(facts, ordered=False):
                m = matched.get(rid)
                if m is None:
                    m = matched[rid] = []
                    keys[rid] = []
                m.append(ix)
                keys[rid].append(tuple(map(number_at, ix)))
            got = self.matches.put(ff, (matched, {rid: tuple(k) for rid, k in keys.items()}))
        matched, self.cur_match_keys = got
        self.cur_matched = matched
        self.cur_keys = {}
        return matched, None, vals, ff

    def firing(self, i: int, vals: tuple[Any, ...], parent: bool, fire) -> Any:
        """Rule ``i``'s Firing: kept from an earlier stack with the same facts, values it reads and parent outcome,
        else from an earlier stack of another technique set with the same rule object, engine match for it, values
        and parent outcome (``shared``), else ``fire()``. A rule found not applicable (another engine or release, a
        technique it is about absent from the facts, its parent not fired) or held because no fact matches its
        pattern is kept for those facts and parent outcome whatever the values: kg.engine.rules._fire decides these
        before reading any value."""
        skey = (self.current, i, parent)
        hit = self.static.get(skey)
        if hit is not None:
            return hit
        keys = self.cur_keys
        vk = []
        for j in self.rpos[i]:
            k = keys.get(j)
            if k is None:
                k = keys[j] = self.numbers.number(vals[j])
            vk.append(k)
        vk = tuple(vk)
        key = (self.current, i, parent, vk)
        hit = self.firings.get(key)
        if hit is None:
            r = self.rules[i]
            gkey = (id(r), self.engine, self.version, self._match_key(i, r), parent, vk)  # the Firing keeps r
            hit = self.shared.get(gkey)
            if hit is None:
                hit = self.shared.put(gkey, fire())
            self.firings.put(key, hit)
            if hit.outcome == "not_applicable" or (hit.outcome == "held" and hit.reason.startswith(STATIC_HELD)):
                self.static[skey] = hit
        return hit

    def _match_key(self, i: int, r: Any) -> Hashable:
        """What kg.engine.rules._fire reads of this stack's facts for rule ``r``: the fact combinations the engine
        matched for it, or (none matched) per pattern of it whether a fact of its kind exists and, for a technique
        pattern, whether that technique is among the facts."""
        mk = self.cur_mkeys.get(i)
        if mk is None:
            mk = self.cur_match_keys.get(r.id)
            if mk is None:
                present, kinds = self._kinds()
                mk = ("unmatched", tuple([(p.get("kind") in kinds, p.get("kind") == "technique"
                                           and p.get("technique") in present) for p in r.match]))
            self.cur_mkeys[i] = mk
        return mk

    def end(self, matched: dict[str, list], vals: tuple[Any, ...], ff: Any, out: list[Any], parent: list[bool]) -> None:
        self.prev_matched, self.prev_vals, self.prev_facts, self.prev_out, self.prev_parent = matched, vals, ff, out, parent
        self.prev_tup, self.prev_raw = self.cur_tup, self.cur_raw

    def seeds(self, last: "RuleState | None") -> list[int] | None:
        """On this state's first stack (after ``begin``): per rule, the index in ``last`` (the state of the stack
        before, another technique set's ruleset) of the same rule object whose Firing there this stack may keep when
        its parent's outcome is the same too (-1: none), or None. A rule's Firing depends on nothing else (``firing``):
        the engine and release (equal states only), what the engine matched for it and the values it reads (here
        equal to that stack's). This is what ``shared`` would return, without building ~300 memo keys."""
        if last is None or last is self or last.prev_vals is None or (last.engine, last.version) != (
                self.engine, self.version):
            return None
        pairs, was_at = _pair_plan(self, last)
        now, was, index = self.cur_tup, last.prev_tup, self.index
        dirty: set[int] = set()
        if was_at is None:  # the same names in the same order (the technique sets' rulesets read alike): C speed
            for n in changed(self.union, now, was):
                dirty.update(index[n])
        else:
            for n, v, j in zip(self.union, now, was_at):
                if j < 0 or (v is not was[j] and not same(v, was[j])):
                    dirty.update(index[n])
        # what the engine matched for a rule: the same facts (numbers), or (none matched either time) the same fact
        # kinds and, for each technique its patterns name, the same presence among the facts (``_match_key``)
        mine, theirs = self.cur_match_keys, last.cur_match_keys
        (present, kinds), (lpresent, lkinds) = self._kinds(), last._kinds()
        moved = present ^ lpresent if kinds == lkinds else None
        out = [-1] * len(self.rules)
        for i, j, r, rid, techs in pairs:
            if i in dirty:
                continue
            a, b = mine.get(rid), theirs.get(rid)
            if a is not None or b is not None:
                ok = a == b  # both matched the same facts (one matched, the other not: unequal)
            elif moved is not None:
                ok = moved.isdisjoint(techs)
            else:
                ok = self._match_key(i, r) == last._match_key(j, r)
            if ok:
                out[i] = j
        return out

    def _kinds(self) -> tuple[set, set]:
        """(the technique ids among this stack's facts, the facts' kinds), once per stack."""
        if self.cur_kinds is None:
            fs = self.cur_facts
            self.cur_kinds = ({f.get("technique") for f in fs if f.get("kind") == "technique"},
                              {f.get("kind") for f in fs})
        return self.cur_kinds


_PAIRS: dict[tuple[int, int], tuple[Any, Any, tuple]] = {}


def _pair_plan(state: RuleState, last: RuleState) -> tuple[tuple, tuple[int, ...] | None]:
    """What ``seeds`` reads of two rulesets whatever the stack: (the rules both hold, as (index here, index in
    ``last``, rule, id, ``_pattern_techniques``), and each of ``state``'s names' place in ``last``'s (-1: not
    there), None when the names are the same: a rule list's names are its rules'). Once per pair of rule lists
    (kept, as their read sets): a sweep's technique sets run a few subsets of one ruleset."""
    key = (id(state.rules), id(last.rules))
    hit = _PAIRS.get(key)
    if hit is not None and hit[0] is state.rules and hit[1] is last.rules:
        return hit[2][0], hit[2][1]
    at = {id(r): j for j, r in enumerate(last.rules)}
    pairs = tuple((i, at[id(r)], r, r.id, _pattern_techniques(r)) for i, r in enumerate(state.rules) if id(r) in at)
    lpos = {n: j for j, n in enumerate(last.union)}
    was_at = None if state.union == last.union else tuple(lpos.get(n, -1) for n in state.union)
    if len(_PAIRS) > 256:
        _PAIRS.clear()
    _PAIRS[key] = (state.rules, last.rules, (pairs, was_at))  # both kept: ids not reused
    return pairs, was_at


def _pattern_techniques(r: Any) -> frozenset:
    """The technique ids rule ``r``'s technique patterns name, once per rule object (kept on it, as ``rule_reads``)."""
    hit = r.__dict__.get("_sweep_techniques")
    if hit is None:
        hit = r.__dict__["_sweep_techniques"] = frozenset(
            p.get("technique") for p in r.match if p.get("kind") == "technique")
    return hit


class _Reads(Mapping):
    """A read-only view of a namespace that records the names read (``get``, ``[]``, ``in``)."""

    def __init__(self, ns: Mapping[str, Any]):
        self.ns, self.read = ns, {}

    def __getitem__(self, name: str) -> Any:
        self.read[name] = None
        return self.ns[name]

    def get(self, name: str, default: Any = None) -> Any:
        self.read[name] = None
        return self.ns.get(name, default)

    def __contains__(self, name: object) -> bool:
        self.read[name] = None
        return name in self.ns

    def __iter__(self):
        raise TypeError("a recorded namespace is read by name only")

    def __len__(self) -> int:
        raise TypeError("a recorded namespace is read by name only")


def _key(v: Any) -> Hashable:
    """``freeze(v)``, but a large container (a catalog table in the namespace) by identity: such tables come from
    the process's caches and are not changed."""
    t = v.__class__
    if (t is dict or t is list) and len(v) > 16:
        return (t, id(v))
    return freeze(v)


class Session:
    """The per-sweep state of every ruleset evaluated under it (``use``): one RuleState per ruleset object, engine
    and release. Only a caller whose rule functions read nothing but the namespace's ``techniques`` may use one
    (kg.analyses.check: ``has``). ``call`` keeps the results of functions of the namespace alone."""

    def __init__(self) -> None:
        self.states: dict[tuple[int, Any, Any], tuple[Any, RuleState]] = {}
        self.calls: dict[Any, list[tuple[tuple[str, ...], Memo]]] = {}
        self.last_call: dict[Any, tuple[tuple[str, ...], tuple[Any, ...], Any]] = {}  # key -> names, values, result
        self.pinned: list[Any] = []  # large values keyed by identity (``_key``) are kept alive
        self.extra: dict[Any, Any] = {}  # other modules' per-sweep state (kg.analyses.enginechecks: rows)
        self.kept: dict[int, Any] = {}  # objects ``call`` keys name by identity
        self.stamps: dict[str, Any] = {}  # data folders as the sweep first read them (kg.core.paths.frozen_stamps)
        self.firings = Memo(200_000)  # every RuleState's shared Firings (RuleState.firing)
        self.last_rules: RuleState | None = None  # the RuleState of the last stack evaluated (RuleState.seeds)
        self.numbers = Numbers()  # the numbers their memo keys hold for values

    def call(self, fn: Any, ns: Mapping[str, Any], key: Hashable = None, keep: tuple = (),
             fresh: tuple[str, ...] | None = None) -> Any:
        """``fn(ns)`` for a function that reads nothing but ``ns`` (by name: ``get``, ``[]``, ``in``) and returns a
        dict of plain values: the names it read are recorded, and a later namespace with the same values for them
        gets that result again: a new dict, with new lists for its list values, or (``fresh``) new lists and dicts
        for the values of those names only (the ones ``fn`` builds; the others are a data table's entries, which
        every call shares, and a copy would make them compare item by item). ``key``: what else the result depends on (default
        ``fn``: nothing else), e.g. ``(option_facts, engine, release, id(table))`` for a closure over those;
        ``keep``: objects ``key`` names by identity, kept alive for the session so their ids are not reused."""
        if key is None:
            key = fn
        for obj in keep:
            self.kept.setdefault(id(obj), obj)
        last = self.last_call.get(key)
        if last is not None:
            # the values it read last time are the very same (immutable) objects: the same result, without keys
            vals = tuple(map(ns.get, last[0], repeat(MISSING, len(last[0]))))
            if all(map(is_, vals, last[1])) and not any([v.__class__ in _MUTABLE for v in vals]):
                return _fresh(last[2], fresh)
        entries = self.calls.setdefault(key, [])
        for names, memo in entries:
            hit = memo.get(tuple([_key(ns.get(n, MISSING)) for n in names]))
            if hit is not None:
                self.last_call[key] = (names, tuple(map(ns.get, names, repeat(MISSING, len(names)))), hit)
                return _fresh(hit, fresh)
        rec = _Reads(ns)
        out = fn(rec)
        names = tuple(rec.read)
        vals = [ns.get(n, MISSING) for n in names]
        self.pinned.extend(v for v in vals if (v.__class__ is dict or v.__class__ is list) and len(v) > 16)
        if len(self.pinned) > 10_000:
            self.pinned.clear()
            self.calls.clear()  # an unpinned identity could be reused: forget everything keyed on one
            self.last_call.clear()
            entries = self.calls.setdefault(key, [])
        memo = next((m for n, m in entries if n == names), None)
        if memo is None:
            memo = Memo(50_000)
            entries.append((names, memo))
        hit = memo.put(tuple([_key(v) for v in vals]), _fresh(out, fresh))
        self.last_call[key] = (names, tuple(vals), hit)
        return out

    def rules(self, rs: Any, engine: str | None, version: str | None) -> RuleState:
        key = (id(rs), engine, version)
        hit = self.states.get(key)
        if hit is None or hit[0] is not rs:
            if len(self.states) > 256:
                self.states.clear()
            hit = self.states[key] = (rs, RuleState(rs, engine, version, self.firings, self.numbers))  # rs kept
        return hit[1]


_CURRENT: Any = None


def current() -> Session | None:
    """The Session ``use`` made current in this context (None outside a sweep)."""
    return _CURRENT.get() if _CURRENT is not None else None


def use(session: Session | None):
    """Context manager: evaluate_rules inside it reuses ``session``'s results (None: plain evaluation), and the data
    folders are read as the session first read them (kg.core.paths.frozen_stamps)."""
    global _CURRENT
    if _CURRENT is None:
        import contextvars
        _CURRENT = contextvars.ContextVar("optkg_incremental", default=None)
    return _Use(session)


class _Use:
    """``use``'s context manager (a class: a sweep enters one per combination)."""

    __slots__ = ("session", "token", "stamps")

    def __init__(self, session: Session | None):
        self.session = session

    def __enter__(self) -> Session | None:
        session = self.session
        self.token = _CURRENT.set(session)
        try:
            self.stamps = frozen_stamps(session.stamps if session is not None else None)
            self.stamps.__enter__()
        except BaseException:
            _CURRENT.reset(self.token)
            raise
        return session

    def __exit__(self, *exc: Any) -> None:
        try:
            self.stamps.__exit__(*exc)
        finally:
            _CURRENT.reset(self.token)
