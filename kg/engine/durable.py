"""The only module that imports durable-rules. It does structural matching; nothing numeric.

A rule is given to the engine as ``(rule_id, patterns)``, where each pattern is a mapping of
fact properties to required values (equality only). The engine reports, for each set of facts,
which rules have every pattern matched by some fact, and with which facts. Numeric conditions are
evaluated afterwards in Python (kg.engine.expr), because durable-rules 2.0.28 segfaults on numeric
cross-fact joins (shared/reference/durable_rules_notes.md, pitfall 1).

How the engine's limits are kept (same notes):
- Rules are compiled once per process into rulesets of at most ``CHUNK`` rules (hard limits: 64
  rules per shared condition at assert, 257 at registration, 512 conditions per node).
- Each ruleset gets a unique name (a reused name drops rulesets silently, pitfall 5).
- We use our own ``durable.engine.Host`` without its timer threads, so actions run only on the
  calling thread, synchronously inside ``assert_facts`` (pitfall 4); no ``delete_state``
  (pitfall 3): facts are retracted after each match.
- Every fact gets an explicit unique ``id`` (pitfall 6); facts that no pattern of a ruleset can
  match are not sent to it (``MessageNotHandledException``).
- Values are encoded as type-tagged strings (``i:8``, ``s:gqa``, ``b:true``) so that ``"8"`` and
  ``8`` never compare equal and no type confusion reaches the C code (pitfall 7).
- Actions take one parameter (two would make them asynchronous, pitfall 8) and only record the
  match; an exception inside an action is collected and re-raised on the calling thread.
- A match is remembered per ruleset chunk, keyed on the candidate facts projected on the chunk's
  pattern keys (equality patterns match equal projections alike): a sweep over 2,048 stacks asserts
  the same technique/model/hardware shapes each time and reaches durable-rules once per shape.
- What ``match`` answers for a list of facts is kept across runs in the content-keyed cache (kg.core.cache:
  MAC-checked, keyed on the rules, the encoded facts and the durable-rules extension's file): a warm one-shot
  ``check`` of an unchanged stack reads its matches and neither imports durable-rules (with logging, threading,
  datetime, random) nor registers its rulesets (~10 % of such a run). durable-rules is imported, and the rulesets
  registered, on the first match not found there.
"""
from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import _thread  # threading's Lock and RLock are these; importing threading costs a warm check ~0.5 ms
from typing import Any, Iterable, Mapping, Sequence

_durable: Any = None  # durable.engine, imported on first use (_engine)

CHUNK = 40
MAX_PROPS = 250
MEMO_MAX = 4096  # remembered matches per compiled ruleset (bounded memory for a long process)
KEEP_MAX = 8  # answers of ``match`` one process adds to the cache per compiled ruleset
KEEP_MATCHES = True  # False: ``match`` neither reads nor keeps answers (tests/bench/pipeline.py times durable-rules)
KEPT_FORMAT = 1  # bump when what a kept answer holds changes


class EngineError(RuntimeError):
    """An internal failure of the rule engine (not a user error)."""


def _tag(v: Any) -> str:
    if isinstance(v, bool):
        return "b:true" if v else "b:false"
    if isinstance(v, int):
        return f"i:{v}"
    if isinstance(v, float):
        return f"f:{v!r}"
    if isinstance(v, str):
        return f"s:{v}"
    raise TypeError(f"fact values must be str, int, float or bool, found {type(v).__name__}")


def _engine() -> Any:
    """The ``durable.engine`` module, imported on first use."""
    global _durable
    if _durable is None:
        from durable import engine
        _durable = engine
    return _durable


_host: Any = None  # the _QuietHost
_host_lock = _thread.RLock()
_counter = itertools.count(1)


def _get_host() -> Any:
    global _host
    if _host is None:
        class _QuietHost(_engine().Host):
            """A durable Host that starts no timer threads: actions run only inside our assert calls."""

            def _run(self) -> None:  # noqa: D401 - overrides the timer loop
                return None
        _host = _QuietHost()
    return _host


Pattern = Mapping[str, Any]


class CompiledRules:
    """A set of rules compiled into durable-rules rulesets (partitioned, uniquely named).

    ``rules``: sequence of (rule_id, patterns); patterns is a non-empty list of property->value maps.
    Use ``match(facts)`` to get ``[(rule_id, [fact, ...])]`` in rule order, one entry per distinct
    combination of matching facts.
    """

    def __init__(self, rules: Sequence[tuple[str, Sequence[Pattern]]], label: str = "rules", chunk: int = CHUNK,
                 lazy: bool = False):
        if chunk < 1 or chunk > 50:
            raise ValueError("chunk must be 1..50 rules per ruleset")
        self._rules = [(rid, [dict(p) for p in pats]) for rid, pats in rules]
        for rid, pats in self._rules:
            if not pats:
                raise ValueError(f"rule {rid}: at least one pattern is needed")
        self._order = {rid: i for i, (rid, _) in enumerate(self._rules)}
        self._chunks: list[tuple[str, list[tuple[str, list[dict[str, Any]]]]]] = []
        self._tagged: list[dict[tuple[str, ...], set[tuple[str, ...]]]] = []  # per chunk: see _signatures
        self._results: list[tuple[str, dict[str, Any]]] = []
        self._errors: list[BaseException] = []
        self._lock = _thread.allocate_lock()
        # (chunk, the candidate facts projected on the chunk's pattern keys) -> [(rule id, fact ids)]: a pattern
        # is a conjunction of equalities on those keys, so equal projections match alike (see ``match``)
        self._memo: dict[tuple[int, tuple], list[tuple[str, tuple[int, ...]]]] = {}
        self._label, self._chunk = label, chunk
        self._keys: list[tuple[str, ...]] = []
        self._registered = False
        self.content: str | None = None  # compiled_rules: the digest of the rules, which keys the kept matches
        self._kept = 0  # matches this process added to the cache (``match``)
        if not lazy:  # compiled_rules registers on the first match to compute (kept matches need none)
            self._register()

    def _register(self) -> None:
        """Partition the rules into chunks and register them with durable-rules (on the first match to compute)."""
        if self._registered:
            return
        label, chunk = self._label, self._chunk
        digest = hashlib.sha1(json.dumps(self._rules, sort_keys=True, default=str).encode()).hexdigest()[:10]
        with _host_lock:
            host = _get_host()
            # chunks hold rules with equal pattern lists together (one durable rule each, see _definition),
            # so a chunk whose patterns no fact can match is skipped whole; results keep rule order
            grouped = sorted(self._rules, key=lambda r: json.dumps(r[1], sort_keys=True, default=str))
            for n in range(0, len(grouped), chunk):
                part = grouped[n : n + chunk]
                name = f"optkg_{label}_{digest}_{os.getpid()}_{next(_counter)}"
                host.register_rulesets({name: self._definition(part)})
                self._chunks.append((name, part))
                self._tagged.append(self._signatures(part))
        self._keys = [tuple(sorted({k for ks in t for k in ks})) for t in self._tagged]
        self._registered = True

    # -- compilation ---------------------------------------------------------------------
    def _definition(self, part: list[tuple[str, list[dict[str, Any]]]]) -> dict[str, Any]:
        """Durable definition of one chunk. Rules with identical pattern lists (e.g. the many rules
        that only need the model fact) share one durable rule whose action records all their ids, so
        the engine runs one action per distinct pattern list, not per rule."""
        groups: dict[str, tuple[list[str], list[dict[str, Any]]]] = {}
        for rid, pats in part:
            key = json.dumps([sorted((k, _tag(v)) for k, v in p.items()) for p in pats])
            groups.setdefault(key, ([], pats))[0].append(rid)
        definition: dict[str, Any] = {}
        for j, (rids, pats) in enumerate(groups.values()):
            alls = []
            for i, pat in enumerate(pats):
                terms = [{k: _tag(v)} for k, v in sorted(pat.items())]
                cond = terms[0] if len(terms) == 1 else {"$and": terms}
                alls.append({f"p{i}": cond})
            definition[f"g{j}"] = {"all": alls, "run": self._make_action(tuple(rids), len(pats))}
        return definition

    def _make_action(self, rids: tuple[str, ...], n: int):
        def action(c):  # exactly one parameter: synchronous (durable pitfall 8)
            try:
                matched = c._m
                m = {f"p{i}": dict(matched[f"p{i}"]) for i in range(n)}
                self._results.extend((rid, m) for rid in rids)
            except BaseException as e:  # surfaced after the assert returns
                self._errors.append(e)
        return action

    @staticmethod
    def _signatures(part: list[tuple[str, list[dict[str, Any]]]]) -> dict[tuple[str, ...], set[tuple[str, ...]]]:
        """The chunk's patterns as {sorted property names: {encoded value tuples}}, for ``_can_match``."""
        sig: dict[tuple[str, ...], set[tuple[str, ...]]] = {}
        for _, pats in part:
            for p in pats:
                keys = tuple(sorted(p))
                sig.setdefault(keys, set()).add(tuple(_tag(p[k]) for k in keys))
        return sig

    # -- matching ------------------------------------------------------------------------
    @staticmethod
    def _encode(facts: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for i, f in enumerate(facts):
            if len(f) > MAX_PROPS:
                raise EngineError(f"fact {i} has {len(f)} properties (limit {MAX_PROPS})")
            enc = {k: _tag(v) for k, v in f.items() if v is not None and k not in ("id", "sid")}
            enc["id"] = f"f{i}"
            enc["sid"] = "0"
            out.append(enc)
        return out

    @staticmethod
    def _can_match(fact: Mapping[str, str], signatures: Mapping[tuple[str, ...], set[tuple[str, ...]]]) -> bool:
        """True when some pattern of the chunk (see ``_signatures``) is matched by the encoded fact."""
        for keys, values in signatures.items():
            if tuple(map(fact.get, keys)) in values:  # no function made per call (a comprehension makes one)
                return True
        return False

    def match(self, facts: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
        """Return [(rule_id, matched facts in pattern order)] for ``facts`` (plain dicts of scalars).

        Deterministic: ordered by rule order, then by the indices of the matched facts.
        Raises EngineError if an action failed; TypeError for non-scalar fact values. The answer for these facts
        is kept in the cache (module doc): one entry per list of facts, at most ``KEEP_MAX`` new ones per
        process (a sweep matches through ``match_indices``, whose in-process memo serves it).
        """
        found = None
        keep = self.content is not None and KEEP_MATCHES
        if keep:
            found = self._kept_matches(facts)
        if found is None:
            found = self.match_indices(facts)
            if keep and self._kept < KEEP_MAX:
                self._kept += 1
                self._keep(facts, found)
        return [(rid, [dict(facts[i]) for i in ix]) for rid, ix in found]

    def _entry(self, facts: Sequence[Mapping[str, Any]]) -> tuple[Any, str]:
        """(the cache path, the key) of the kept matches for ``facts``."""
        from kg.core import cache
        from kg.core.digest import sha256_hex
        encoded = json.dumps(self._encode(facts), sort_keys=True, separators=(",", ":"))
        key = sha256_hex([f"rule-matches {KEPT_FORMAT}\0{self.content}\0{_engine_file()}\0".encode(),
                          encoded.encode("utf-8", "surrogatepass")])
        return cache.cache_file(f"rule-matches-{key[:32]}.json"), key

    def _kept_matches(self, facts: Sequence[Mapping[str, Any]]) -> list[tuple[str, tuple[int, ...]]] | None:
        """``match_indices(facts)`` as kept in the cache, or None (not kept, or not of these rules and facts)."""
        from kg.core import cache
        try:
            path, key = self._entry(facts)
        except (TypeError, ValueError, EngineError):  # facts the engine refuses: match_indices says why
            return None
        data = cache.read_data(path, "rule-matches", key)
        n = len(facts)
        if not (isinstance(data, list) and all(
                isinstance(x, list) and len(x) == 2 and x[0] in self._order and isinstance(x[1], list)
                and all(type(i) is int and 0 <= i < n for i in x[1]) for x in data)):
            return None
        return [(rid, tuple(ix)) for rid, ix in data]

    def _keep(self, facts: Sequence[Mapping[str, Any]], found: list[tuple[str, tuple[int, ...]]]) -> None:
        from kg.core import cache
        path, key = self._entry(facts)
        cache.write_data(path, "rule-matches", key, [[rid, list(ix)] for rid, ix in found])

    def match_indices(self, facts: Sequence[Mapping[str, Any]],
                      ordered: bool = True) -> list[tuple[str, tuple[int, ...]]]:
        """``match`` with the indices of the matched facts in ``facts`` instead of copies of them. ``ordered`` False:
        each rule's combinations in order (by the facts' indices), the rules in no particular order (a sweep's
        RuleState files them by rule: the sort of ~190 matches was ~15 % of this)."""
        encoded = self._encode(facts)
        self._register()
        host = _get_host()
        durable = _engine()
        found: list[tuple[str, tuple[int, ...]]] = []
        can_match = self._can_match
        with self._lock, _host_lock:
            for j, ((name, part), tagged) in enumerate(zip(self._chunks, self._tagged)):
                mine = [e for e in encoded if can_match(e, tagged)]
                if not mine:
                    continue
                # a sweep asserts the same technique/model/hardware facts for every combination: what durable
                # matched depends only on the pattern keys' values, so an equal projection reuses its answer
                keys = self._keys[j]
                memo_key = (j, tuple([(e["id"], tuple(map(e.get, keys))) for e in mine]))
                hit = self._memo.get(memo_key)
                if hit is None:
                    self._results, self._errors = [], []
                    try:
                        with contextlib.suppress(durable.MessageNotHandledException):
                            host.assert_facts(name, mine)
                    finally:
                        with contextlib.suppress(durable.MessageNotHandledException):
                            host.retract_facts(name, mine)
                    if self._errors:
                        raise EngineError(f"rule action failed: {self._errors[0]!r}")
                    # the facts' indices (their ids are f<index>, and part of the memo key), each distinct
                    # combination once, in rule order then by the indices
                    hit = [(rid, ix) for _, ix, rid in sorted({
                        (self._order[rid], tuple([int(m[f"p{i}"]["id"][1:]) for i in range(len(m))]), rid)
                        for rid, m in self._results})]
                    if len(self._memo) >= MEMO_MAX:
                        self._memo.clear()
                    self._memo[memo_key] = hit
                found += hit
        if not ordered:  # a rule is in one chunk, whose answer is in order
            return found
        order = self._order
        # by rule order, then the facts' indices (sorted tuples: no key function called per match)
        return [(rid, ix) for _, ix, rid in sorted({(order[rid], ix, rid) for rid, ix in found})]


_registry: dict[tuple[str, str, int], CompiledRules] = {}


def compiled_rules(rules: Sequence[tuple[str, Sequence[Pattern]]], label: str = "rules", chunk: int = CHUNK) -> CompiledRules:
    """``CompiledRules(rules, label, chunk)``, compiled once per process for each distinct rule content.

    durable-rules cannot unregister a ruleset (durable_rules_notes.md, pitfall 4), so compiling the
    same rules again on every load (every in-process ``main()`` or ``load_ruleset``) grew memory by
    ~1.5 MiB per call. Equal content (rule ids and patterns) gets the same compiled object back; it is
    safe to share (``match`` holds a lock and keeps no state between calls).
    """
    key = (label, hashlib.sha256(json.dumps([(rid, [dict(p) for p in pats]) for rid, pats in rules],
                                            sort_keys=True, default=str).encode()).hexdigest(), chunk)
    with _host_lock:
        found = _registry.get(key)
        if found is None:
            found = _registry[key] = CompiledRules(rules, label, chunk, lazy=True)
            found.content = f"{label}\0{chunk}\0{key[1]}"
        return found


def _engine_file() -> str:
    """The durable-rules extension's file (path, size, modification time): an upgrade reads no kept matches."""
    global _ENGINE_FILE
    if _ENGINE_FILE is None:
        from importlib.util import find_spec
        try:
            spec = find_spec("durable_rules_engine")
            origin = os.path.realpath(spec.origin) if spec is not None and spec.origin else None
            st = os.stat(origin) if origin else None
            _ENGINE_FILE = f"{origin}\0{st.st_size}\0{st.st_mtime_ns}" if st else "?"
        except (ImportError, ValueError, OSError):
            _ENGINE_FILE = "?"
    return _ENGINE_FILE


_ENGINE_FILE: str | None = None

