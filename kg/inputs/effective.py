"""The effective configuration: what an engine release runs with, before any rule looks at the stack.

Data: ``catalog/engines/releases/<engine>.yaml`` (shape in that file's header): the releases optkg
knows, and per setting the default each release range applies, optionally only ``when`` an expression
over the stack's facts holds (GPU class, other settings), with the released source as evidence.

``effective_configuration(stack)`` (mutates ``stack``; returns the entries for the report):

1. The release: the stack's ``engine_version``; without one, the latest known release is assumed
   (``stack.engine_version_assumed``; a note says so); a release newer than every known one keeps its
   number and gets the newest knowledge (note).
2. Per setting of the table, in file order: a value the stack gives (a flag, ``settings:``, a technique
   parameter) wins, source ``given``. Otherwise the first entry whose ``releases`` holds the release and
   whose ``when`` is true sets it, source ``engine default`` (with the release range and evidence). When
   a ``when`` reads a fact the stack lacks (e.g. ``gpu_memory_gib`` without a GPU) and no entry decides,
   the setting is ``unknown`` and left unset, so rules that need it are reported as not evaluable.
3. An entry with ``technique`` also switches that technique in a pasted command: a default the engine
   turns off (prefix caching before vLLM 0.8.0) removes the technique the flag table assumed, unless a
   flag set it.

Entries: ``{setting, value, source, releases, evidence, why}`` (value None when unknown); an engine default from a
table entry marked ``brief: true`` (a plain switch whose evidence is its ServerArgs field) also has ``brief: True``,
and the text report lists those on one line.
Errors: OptkgError for an unreadable table (file:line).
"""
from __future__ import annotations

import contextlib

from typing import Any, Callable

from kg.core import paths
from kg.core.errors import OptkgError
from kg.core.relcmp import Release, in_range
from kg.engine.incremental import MISSING, Memo, current, freeze, plain_copy  # light (kg.core.paths): check loads it

_TABLES: dict[tuple, dict[str, dict[str, Any]]] = {}


def release_tables() -> dict[str, dict[str, Any]]:
    """``catalog/engines/releases/*.yaml`` by engine id (read once per set of file versions; inside
    kg.core.paths.frozen_stamps, a sweep, looked up once)."""
    return paths.in_frozen(("release-tables",), _release_tables)


def _release_tables() -> dict[str, dict[str, Any]]:
    files, key = paths.yaml_files_stamp(paths.catalog_path("engines", "releases"))
    if key not in _TABLES:
        from kg.core import cache

        def build() -> dict[str, dict[str, Any]]:
            import yaml

            from kg.core.yamlio import _loader_class, read_text
            out = {}
            for f in files:
                try:
                    d = yaml.load(read_text(f), Loader=_loader_class())  # noqa: S506 - a safe loader
                except yaml.YAMLError as e:
                    raise OptkgError(f"{f}: not valid YAML ({str(e).splitlines()[0]})") from None
                if not isinstance(d, dict) or not isinstance(d.get("engine"), str):
                    raise OptkgError(f"{f}:1: a release table needs `engine:` and `releases:`")
                out[d["engine"]] = d
                # the releases in PEP 440 order, kept in the entry: sorting them needs packaging for the few that
                # are not plain (0.4.0.post1), which a warm run then never imports
                d["_sorted"] = sorted((str(v) for v in d.get("releases") or []), key=Release)
            return out
        # shipped data read on every check (no line map needed): parsed with the safe loader, then served
        # from a content-keyed, checksummed cache entry (kg.core.cache.built_from)
        out = cache.built_from("release-tables", files, build)
        _TABLES.clear()
        _TABLES[key] = out
    return _TABLES[key]


def known_releases(engine: str | None) -> list[str]:
    """The engine's known releases, ascending (empty for an engine without a table)."""
    t = release_tables().get(engine or "")
    if t is None:
        return []
    if "_sorted" not in t:  # sorted once per table version
        t["_sorted"] = sorted((str(v) for v in t.get("releases") or []), key=Release)
    return list(t["_sorted"])


def latest_release(engine: str | None) -> str | None:
    t = release_tables().get(engine or "")
    if t is None:
        return None
    if "_sorted" not in t:
        known_releases(engine)
    return t["_sorted"][-1] if t["_sorted"] else None


def newer_release_note(engine: str | None, version: str | None) -> str | None:
    """The note every command prints for a release newer than the newest one optkg knows (None otherwise)."""
    latest = latest_release(engine)
    try:
        if latest and version and Release(version) > Release(latest):
            return (f"{engine} {version} is newer than the latest release optkg knows ({latest}): "
                    f"checked with the knowledge of {latest}")
    except ValueError:  # not a release (packaging's InvalidVersion)
        return None
    return None


def resolve_release(stack: Any) -> None:
    """Step 1 of the module doc: set ``stack.engine_version`` (assumed latest when missing) and note it."""
    latest = latest_release(stack.engine)
    if latest is None:
        if stack.engine and stack.engine_version:  # TensorRT-LLM, LMDeploy: no release list to match it against
            stack.notes.append(f"{stack.engine} {stack.engine_version}: optkg keeps no release list for "
                               f"{stack.engine}, so this release is not checked (an unknown or mistyped version is "
                               "not caught); its options and defaults are read from one source (catalog/engines/"
                               f"{stack.engine}.yaml), not per release")
        return
    if not stack.engine_version:
        stack.engine_version = latest
        stack.engine_version_assumed = True
        stack.notes.append(f"{stack.engine} release not given: assumed {latest}, the latest optkg knows "
                           "(pass --engine-version or engine_version: to check another)")
        return
    try:
        given = Release(stack.engine_version)
        if given > Release(latest):
            stack.notes.append(newer_release_note(stack.engine, stack.engine_version))
            return
        known = known_releases(stack.engine)
        if known and given not in {Release(r) for r in known}:
            first = known[0]
            if given < Release(first):
                where = (f"it is older than every known release, so the rules and defaults bounded from a known "
                         f"release on do not apply to it")
            else:
                below = max((r for r in known if Release(r) < given), key=Release)
                above = min((r for r in known if Release(r) > given), key=Release)
                where = f"release-bounded rules and defaults are matched against {stack.engine_version} as given (between {below} and {above})"
            stack.notes.append(f"release {stack.engine_version} is not in optkg's release list for {stack.engine} "
                               f"(known: {first}-{latest}); {where}")
    except ValueError:  # not a release: the CLI and stack readers refuse it first; an API caller gets no note
        pass


def setting_given(stack: Any, name: str) -> bool:
    """Whether ``stack`` sets ``name`` itself (a flag, an environment variable, a stack-file setting or
    technique parameter) rather than through the launch parser's table default."""
    return _given(stack, name)


def setting_given_fn(stack: Any) -> Callable[[str], bool]:
    """``setting_given`` for many names of one stack that does not change meanwhile: its given names are collected
    once (a check asks for every generated check row's inputs)."""
    names = set(stack.settings)
    for p in stack.techniques.values():
        names.update(p)
    table_default = (getattr(stack, "defaulted", None) or {}).get("settings", {})
    settings = stack.settings
    given = frozenset(n for n in names if not (n in table_default and settings.get(n) == table_default[n]))
    return given.__contains__  # a C-level test: a sweep asks for ~300 names a stack


def _given(stack: Any, name: str) -> bool:
    if name not in stack.settings and not any(name in p for p in stack.techniques.values()):
        return False
    table_default = (getattr(stack, "defaulted", None) or {}).get("settings", {})
    return not (name in table_default and stack.settings.get(name) == table_default[name])


def _facts(stack: Any, release_facts: Callable[[Any, dict[str, Any]], dict[str, Any]] | None = None,
           read: set[str] | None = None) -> dict[str, Any]:
    """The facts ``when`` conditions read (``stack_facts``); ``read``: a set that collects every name read from them,
    by this function, ``release_facts`` and the expressions (``_Recorded``)."""
    ns = dict(stack.values()) if read is None else _Recorded(stack.values(), read)
    hw = stack.hardware or {}
    if hw:
        ns["gpu"] = hw.get("id")
        ns["gpu_memory_gib"] = hw.get("memory_gib")
        ns["gpu_name_lower"] = f"{hw.get('id', '')} {hw.get('name', '')}".lower()
        ns["gpu_compute_capability"] = str(hw.get("compute_capability") or "")  # "12.1": GB10 (vLLM's is_gb10)
    if ns.get("max_model_len"):
        ns["max_model_len_effective"] = int(ns["max_model_len"])
    if release_facts is not None:  # the engine's own (kg.engines.base.Engine.release_facts)
        ns.update(release_facts(stack, ns))
    return ns


def stack_facts(stack: Any, release_facts: Callable[[Any, dict[str, Any]], dict[str, Any]] | None = None
                ) -> dict[str, Any]:
    """The facts the release table's ``when`` conditions read for ``stack`` (its values, the GPU's, the engine's
    ``release_facts``): what ``effective_configuration`` evaluates, for a caller that asks one default itself
    (kg.engines.base.Engine.memory_fraction)."""
    return _facts(stack, release_facts)


def effective_configuration(stack: Any, release_facts: Callable[[Any, dict[str, Any]], dict[str, Any]] | None = None
                            ) -> list[dict[str, Any]]:
    """Apply the engine's release defaults to ``stack`` (module doc); return the entries for the report.
    ``release_facts(stack, ns)``: facts of the engine's own the ``when`` conditions read (the engine protocol's
    ``release_facts``; this module sits below the engine packages, so the caller passes it)."""
    t = release_tables().get(stack.engine or "")
    if t is None:
        resolve_release(stack)  # no release table (TensorRT-LLM, LMDeploy): a given release is noted as unchecked
        return []
    resolve_release(stack)
    try:
        version = Release(stack.engine_version)
    except (ValueError, TypeError):  # ValueError: packaging's InvalidVersion
        return []
    latest = latest_release(stack.engine)
    if latest and version > Release(latest):
        version = Release(latest)  # newer than known: the newest knowledge
    present = set(stack.techniques)
    by_setting = _by_setting(t)
    ranged = _in_range_entries(t, by_setting, version)  # None: an entry's range raised; each is asked in turn
    session = current() if ranged is not None else None
    if session is None:
        return _apply_defaults(stack, by_setting, ranged, version, present, release_facts, None, None)
    # a sweep: the same entries again for a stack that gives the same names, has the same techniques, model, GPU and
    # release, and the same values of the names the last run read (``_Recorded``; by induction it reads the same ones)
    given = _given_names(stack)
    defaulted = frozenset((getattr(stack, "defaulted", None) or {}).get("techniques") or ())
    owner = getattr(release_facts, "__self__", None)
    ctx = ("effective", id(t), stack.engine, stack.engine_version, getattr(release_facts, "__func__", release_facts),
           id(owner), id(stack.model), id(stack.hardware), frozenset(present), defaulted, given)
    for obj in (t, owner, stack.model, stack.hardware):
        session.kept.setdefault(id(obj), obj)  # keyed by identity above: kept so the ids are not reused
    entries = session.extra.get(ctx)
    if entries is None:
        entries = session.extra[ctx] = []
    values = stack.values()
    for names, memo in entries:
        hit = memo.get(tuple([freeze(values.get(n, MISSING)) for n in names]))
        if hit is not None:
            return _replay(stack, hit, values)
    read: set[str] = set()
    steps: list[tuple] | None = []
    out = _apply_defaults(stack, by_setting, ranged, version, present, release_facts, steps, read)
    if not steps or steps[-1][0] != "dropped":  # a default dropped a technique (its given names change): not kept
        names = tuple(sorted(read))
        memo = next((m for n, m in entries if n == names), None)
        if memo is None:
            if len(entries) > 64:
                entries.clear()
            memo = Memo(4096)
            entries.append((names, memo))
        memo.put(tuple([freeze(values.get(n, MISSING)) for n in names]), steps)
    return out


class _Recorded(dict):
    """The facts of ``_facts`` for a sweep's first run of a set of inputs: a dict that adds each name read by name
    (``get``, ``[]``, ``in``: what kg.engine.expr and ``release_facts`` use) to ``read``."""

    __slots__ = ("read",)

    def __init__(self, d: dict[str, Any], read: set[str]):
        super().__init__(d)
        self.read = read

    def get(self, name: Any, default: Any = None) -> Any:
        self.read.add(name)
        return super().get(name, default)

    def __getitem__(self, name: Any) -> Any:
        self.read.add(name)
        return super().__getitem__(name)

    def __contains__(self, name: Any) -> bool:
        self.read.add(name)
        return super().__contains__(name)


def _apply_defaults(stack: Any, by_setting: dict[str, list[dict[str, Any]]],
                    ranged: dict[str, list[dict[str, Any]]] | None, version: Any, present: set[str],
                    release_facts: Callable[[Any, dict[str, Any]], dict[str, Any]] | None, steps: list[tuple] | None,
                    read: set[str] | None) -> list[dict[str, Any]]:
    """Step 2 and 3 of the module doc over the table's settings (``effective_configuration``). ``steps``: a list that
    collects what was decided per setting, for ``_replay`` (set to None when a technique is dropped); ``read``: the
    names read from the facts (``_facts``)."""
    from kg.engine.expr import ExprTypeError, MissingFact, evaluate
    fns = {"has": present.__contains__}
    out: list[dict[str, Any]] = []
    facts = None  # the stack's facts: built when a `when` or value expression reads them, again after a default
    given = None  # the names the stack gives (_given of each): collected once, again after a technique is dropped
    values = None  # stack.values(): again after a default
    for name, entries in by_setting.items():
        if given is None:
            given = _given_names(stack)
        if name in given:
            if values is None:
                values = stack.values()
            out.append({"setting": name, "value": values.get(name), "source": "given", "releases": None,
                        "evidence": [], "why": "set by the stack"})
            if steps is not None:
                steps.append(("given", name, dict(out[-1]), None))
            continue
        chosen, lacking = None, set()
        for e in (entries if ranged is None else ranged[name]):
            if ranged is None and not in_range(version, str(e["releases"])):
                continue
            if facts is None and (e.get("when") or "value_expr" in e):  # built when an expression reads it
                facts = _facts(stack, release_facts, read)
                # given('x'): the stack sets option x (a `when` about an option that is usually absent)
                fns["given"] = lambda n, f=facts: f.get(n) not in (None, "")
            try:
                if e.get("when") and not evaluate(str(e["when"]), facts, fns):
                    continue
                value = evaluate(str(e["value_expr"]), facts, fns) if "value_expr" in e else e["value"]
            except MissingFact as err:
                lacking.add(err.name)
                continue
            except (ExprTypeError, ZeroDivisionError, TypeError, ValueError):
                continue
            chosen = (e, value)
            break
        if chosen is None:
            if lacking:
                needs = "hardware" if lacking & {"gpu_memory_gib", "gpu_name_lower", "gpu"} else ", ".join(sorted(lacking))
                out.append({"setting": name, "value": None, "source": "unknown", "releases": None, "evidence": [],
                            "why": f"the {stack.engine} {stack.engine_version} default depends on {needs}, "
                                   "which the stack does not give"})
                if steps is not None:
                    steps.append(("unknown", name, dict(out[-1]), None))
            continue
        e, value = chosen
        stack.settings[name] = value
        facts = values = None
        # still a default (the release's), not given: setting_given stays false, also for a stack file that
        # does not name the setting (new dicts: the caller's stack is not changed)
        old = getattr(stack, "defaulted", None) or {}
        with contextlib.suppress(AttributeError):  # a stack-like object without the field
            stack.defaulted = {**old, "settings": {**(old.get("settings") or {}), name: value}}
        for params in stack.techniques.values():  # technique parameters mirror the settings they came from
            if name in params:
                params[name] = value
        tid = e.get("technique")
        if tid and value is False and tid in stack.techniques and \
                tid in ((getattr(stack, "defaulted", None) or {}).get("techniques") or []):
            del stack.techniques[tid]
            present.discard(tid)
            given = None  # its parameters no longer count as given
            if steps is not None:
                steps.append(("dropped", name, None, None))
                steps = None
        ev = [dict(x) for x in e.get("evidence") or []]
        where = f"{ev[0]['path']}:{ev[0]['line']} at {stack.engine} {ev[0]['release']}" if ev else "no evidence"
        out.append({"setting": name, "value": value, "source": "engine default", "releases": str(e["releases"]),
                    "evidence": ev, "why": f"{stack.engine} {e['releases']} default ({where})"
                                          + (f", because {e['when']}" if e.get("when") else ""),
                    "brief": bool(e.get("brief"))})
        if steps is not None:  # the entry and a list or dict value kept as copies: the caller may change its own
            kept = plain_copy(value) if value.__class__ in (list, dict) else value
            steps.append(("default", name, {**out[-1], "value": kept, "evidence": [dict(x) for x in ev]}, kept))
    return out


def _replay(stack: Any, steps: list[tuple], values: dict[str, Any]) -> list[dict[str, Any]]:
    """``_apply_defaults`` again from what it decided (``steps``: per setting its kind, name and entry) for a stack with
    the same inputs: the same changes to ``stack`` and the same entries (new dicts and lists; a value that is a list or
    dict copied)."""
    out: list[dict[str, Any]] = []
    defaults: dict[str, Any] = {}
    for kind, name, entry, value in steps:
        d = dict(entry)
        if kind == "given":  # the defaults applied before it change only other settings: its value as given
            d["value"] = values.get(name)
            d["evidence"] = []
        elif kind == "unknown":
            d["evidence"] = []
        else:
            if value.__class__ is list or value.__class__ is dict:
                value = plain_copy(value)
            stack.settings[name] = value
            defaults[name] = value
            d["value"] = value
            d["evidence"] = [dict(x) for x in entry["evidence"]]
        out.append(d)
    if defaults:
        for params in stack.techniques.values():  # technique parameters mirror the settings they came from
            for name in defaults.keys() & params.keys():
                params[name] = defaults[name]
        old = getattr(stack, "defaulted", None) or {}
        # what _apply_defaults leaves after its last default (one dict, not one per default)
        with contextlib.suppress(AttributeError):  # a stack-like object without the field
            stack.defaulted = {**old, "settings": {**(old.get("settings") or {}), **defaults}}
    return out


def _given_names(stack: Any) -> frozenset[str]:
    """The names ``_given`` is true for on ``stack`` as it is now (a name it sets, not to its table default)."""
    names = set(stack.settings)
    for p in stack.techniques.values():
        names.update(p)
    table_default = (getattr(stack, "defaulted", None) or {}).get("settings", {})
    settings = stack.settings
    return frozenset(n for n in names if not (n in table_default and settings.get(n) == table_default[n]))


_IN_RANGE: dict[tuple[int, str], tuple[dict[str, Any], dict[str, list[dict[str, Any]]] | None]] = {}


def _in_range_entries(t: dict[str, Any], by_setting: dict[str, list[dict[str, Any]]],
                      version: Release) -> dict[str, list[dict[str, Any]]] | None:
    """``by_setting`` with only the entries whose ``releases`` hold ``version`` (once per table object and release:
    a sweep asked ~30 ranges per stack); None when a range raises (the caller asks each in turn, as it reaches it)."""
    key = (id(t), str(version))
    hit = _IN_RANGE.get(key)
    if hit is not None and hit[0] is t:
        return hit[1]
    try:
        out = {name: [e for e in entries if in_range(version, str(e["releases"]))]
               for name, entries in by_setting.items()}
    except ValueError:  # packaging's InvalidVersion / InvalidSpecifier
        out = None
    if len(_IN_RANGE) > 256:
        _IN_RANGE.clear()
    _IN_RANGE[key] = (t, out)  # the table is kept: its id is not reused meanwhile
    return out


_BY_SETTING: dict[int, tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]] = {}


def _by_setting(t: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """A release table's default entries per setting, in file order (once per table object: a sweep asks per stack;
    read only)."""
    hit = _BY_SETTING.get(id(t))
    if hit is None or hit[0] is not t:
        by_setting: dict[str, list[dict[str, Any]]] = {}
        for e in t.get("defaults") or []:
            by_setting.setdefault(str(e["setting"]), []).append(e)
        if len(_BY_SETTING) > 64:
            _BY_SETTING.clear()
        hit = _BY_SETTING[id(t)] = (t, by_setting)  # the table is kept: its id is not reused meanwhile
    return hit[1]


def engine_default(engine: str, setting: str, version: str | None, facts: dict[str, Any]) -> tuple[Any, str]:
    """The release default of one ``setting`` for ``facts`` (e.g. ``{gpu_memory_gib, gpu_name_lower}``):
    (value, why), or (None, why) when no entry decides. ``version`` None means the latest known release.
    ``optkg fit`` and ``optkg check`` read the same table through this and ``effective_configuration``.
    In a sweep (kg.engine.incremental) an answer is kept per engine, setting, release and (with facts) the values of
    the facts its entries' ``when`` read: the sweep reads the release tables once (kg.core.paths.frozen_stamps), and
    each stack asks for its memory fraction."""
    from kg.engine.incremental import current
    session = current()
    if session is not None and not facts:
        key = ("engine-default", engine, setting, version)
        hit = session.extra.get(key)
        if hit is None:
            hit = session.extra[key] = _engine_default(engine, setting, version, facts)
        return hit
    if session is not None:  # the facts its rows' `when` read (by name), the same values: the same answer
        return session.call(lambda f: {"answer": _engine_default(engine, setting, version, f)}, facts,
                            key=("engine-default", engine, setting, version, "facts"))["answer"]
    return _engine_default(engine, setting, version, facts)


def _engine_default(engine: str, setting: str, version: str | None, facts: dict[str, Any]) -> tuple[Any, str]:
    t = release_tables().get(engine)
    rel = version or latest_release(engine)
    if t is None or rel is None:
        return None, f"no release table for {engine}"
    v = Release(rel)
    latest = latest_release(engine)
    if latest and v > Release(latest):
        v = Release(latest)
    for e in t.get("defaults") or []:
        if e["setting"] != setting or not in_range(v, str(e["releases"])):
            continue
        if e.get("when") or "value_expr" in e:
            value, decided = _entry_value(e, facts)
            if not decided:
                continue
        else:  # a plain value (block_size): nothing to evaluate, so `optkg kv` imports no expression compiler
            value = e["value"]
        ev = (e.get("evidence") or [{}])[0]
        return value, f"{engine} {e['releases']} default ({ev.get('path')}:{ev.get('line')} at {engine} {ev.get('release')})"
    return None, f"no {engine} {rel} default for {setting} decided by these facts"


def _entry_value(e: dict[str, Any], facts: dict[str, Any]) -> tuple[Any, bool]:
    """(value, True) when entry ``e`` of a release table applies to ``facts`` (its ``when`` holds), else (None, False)."""
    from kg.engine.expr import ExprTypeError, MissingFact, evaluate
    try:
        if e.get("when") and not evaluate(str(e["when"]), facts, {"has": lambda _t: False,
                                                                   "given": lambda n: facts.get(n) not in (None, "")}):
            return None, False
        return (evaluate(str(e["value_expr"]), facts) if "value_expr" in e else e["value"]), True
    except (MissingFact, ExprTypeError, ZeroDivisionError, TypeError, ValueError):
        return None, False


def default_block_size(engine: str, version: str | None) -> int:
    """The KV block size ``engine`` uses at ``version`` when --block-size is not given (the release table:
    vLLM 16, 64 from 0.34.0); 16 when no release decides."""
    value, _ = engine_default(engine, "block_size", version, {})
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else 16
