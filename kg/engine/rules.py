"""Declarative rules from ``rules/*.yaml``: loading, validation, and evaluation over facts.

A rules file names its ``ruleset`` (what facts it reads: ``check`` stacks, ``diagnose``
snapshots, ``fit`` workloads, ``gaps`` cells) and lists rules. A rule has:

- ``match``: patterns (property -> value, equality only) that facts must satisfy; the engine
  (kg.engine.durable, durable-rules) finds the combinations. ``technique: <id>`` is short for a pattern
  ``{kind: technique, technique: <id>}``.
- ``condition``: an expression (kg.engine.expr) over the flat fact namespace, evaluated in Python.
- ``numbers``: name -> expression, computed when the rule fires and reported with the finding.
- ``applies_to``: engines and a version range (PEP 440 specifier, e.g. ``>=0.6,<0.8``, or one per
  engine); outside it the rule does not fire and ``--explain`` says why. A rule with engines must give
  bounds and ``evidence`` from the released source (kg.engine.scope; a validation error otherwise).
- ``severity`` (or ``severity_bands``: the first band whose condition holds), ``message``
  (a template over facts and numbers: ``{name}`` and ``{name:.0%}``-style number formats only, kg.core.template), ``mechanism``, ``cost_dimension``,
  ``from_dimension``, ``fixes`` (catalog ids), ``sources``, ``tags``, ``parent`` (fires only when
  the parent rule fired in the same evaluation).
Thresholds used by a ruleset are data too: ``thresholds:`` (name -> value, provenance, note),
overridable by the user; they appear in the fact namespace under their names.
"""
from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping


from kg.core import paths
from kg.core.relcmp import in_range, operators
from kg.engine import incremental
from kg.engine.durable import CompiledRules, compiled_rules
from kg.core.errors import OptkgError, Problem
from kg.engine.expr import ExprError, ExprTypeError, MissingFact, compile_expr, evaluate, names_in
from kg.core.template import check_template, render
from kg.core.yamlio import YamlDoc, parse_yaml, read_text
from kg.engine.scope import EVIDENCE_SCHEMA, VERSIONS_SCHEMA, scope_problems, spec_for

RULESET_KINDS = ("check", "diagnose", "fit", "gaps", "training")
SEVERITY_ORDER = {"none": 0, "info": 1, "low": 2, "warning": 3, "moderate": 3, "error": 4, "severe": 4, "critical": 5}

_SOURCE = {"type": "object", "required": ["title", "url"], "additionalProperties": False,
           "properties": {"title": {"type": "string"}, "url": {"type": "string", "pattern": "^https?://"},
                          "kind": {"type": "string"}, "note": {"type": "string"}}}
# A rule's kind: ``startup`` (the engine refuses the configuration) is the default; ``runtime-failure`` rules
# describe combinations the engine accepts that then crash, hang or silently degrade (see RUNTIME_OUTCOMES).
RULE_KINDS = ("startup", "runtime-failure")
RUNTIME_OUTCOMES = ("crash", "hang", "wrong-output", "degraded", "request-error")
_FAILURE = {
    "type": "object", "additionalProperties": False,
    "required": ["engine", "outcome", "affected", "fixed_in", "issue", "observed"],
    "properties": {
        "engine": {"type": "string"},
        "outcome": {"enum": list(RUNTIME_OUTCOMES)},
        # the releases that show the failure: a PEP 440 range with a lower bound, and an upper bound
        # ``<fixed_in`` when a fix was released
        "affected": {"type": "string"},
        # the first release without the failure (str), or null when no release fixes it; then ``fixed_in_note``
        # says why (still open, by design, fixed only on a branch ...)
        "fixed_in": {"type": ["string", "null"]},
        "fixed_in_note": {"type": "string"},
        # where the fix (or the unchanged behaviour) lives in the released source: path:line at a release
        "evidence": {"type": "array", "items": {
            "type": "object", "required": ["release", "path"], "additionalProperties": False,
            "properties": {"release": {"type": "string"}, "path": {"type": "string"}, "snippet": {"type": "string"},
                           "note": {"type": "string"}}}},
        "issue": {"type": "object", "required": ["url", "number"], "additionalProperties": False,
                  "properties": {"url": {"type": "string", "pattern": "^https://github\\.com/[^/]+/[^/]+/(issues|pull)/[0-9]+$"},
                                 "number": {"type": "integer", "minimum": 1},
                                 "reported_on": {"type": "string"}}},
        # what the reporter saw, in our words, with the exact numbers of the report
        "observed": {"type": "string"},
        "reported_numbers": {"type": "object", "additionalProperties": {"type": ["string", "integer", "number", "boolean"]}},
    },
}
RULE_FILE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["ruleset", "rules"],
    "$defs": {"coupling_ref": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*/[a-z_]+/[a-z0-9][a-z0-9_-]*(#[0-9]+)?$"}},
    "properties": {
        "ruleset": {"enum": list(RULESET_KINDS)},
        "description": {"type": "string"},
        "thresholds": {
            "type": "object",
            "additionalProperties": {
                "type": "object", "required": ["value", "provenance"], "additionalProperties": False,
                "properties": {"value": {"type": "number"}, "unit": {"type": "string"},
                               "provenance": {"type": "string"}, "note": {"type": "string"}},
            },
        },
        "rules": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["id", "title", "match", "message", "sources"],
                "properties": {
                    "id": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$"},
                    "title": {"type": "string"},
                    "aliases": {"type": "array", "items": {"type": "string"}},
                    "severity": {"enum": ["info", "warning", "error", "none", "low", "moderate", "severe", "critical"]},
                    "severity_bands": {"type": "array", "items": {
                        "type": "object", "required": ["severity", "when"], "additionalProperties": False,
                        "properties": {"severity": {"type": "string"}, "when": {"type": "string"}}}},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "match": {"type": "array", "minItems": 1, "items": {
                        "type": "object", "minProperties": 1,
                        "additionalProperties": {"type": ["string", "integer", "number", "boolean"]}}},
                    "condition": {"type": "string"},
                    "numbers": {"type": "object", "additionalProperties": {"type": "string"}},
                    "applies_to": {"type": "object", "additionalProperties": False, "properties": {
                        "engines": {"type": "array", "items": {"type": "string"}},
                        "versions": VERSIONS_SCHEMA}},
                    # where the behaviour lives in each engine's released source (kg.engine.scope)
                    "evidence": EVIDENCE_SCHEMA,
                    # an engine rule whose release scope is not checked yet: why (``optkg validate`` warns)
                    "evidence_todo": {"type": "string", "minLength": 10},
                    # an engine rule no released source could back: why, what was tried, and the public doc or issue
                    # (in ``sources``) it rests on; ``optkg evidence`` and docs/engine-checks.md list it as unpinned
                    "evidence_unpinned": {"type": "string", "minLength": 20},
                    "parent": {"type": "string"},
                    "message": {"type": "string"},
                    "mechanism": {"type": "string"},
                    "cost_dimension": {"type": "string"},
                    "from_dimension": {"type": "string"},
                    "fixes": {"type": "array", "items": {"type": "string"}},
                    # one text, or per engine: {default: ..., sglang: ..., vllm: ...} (kg.analyses.check renders the stack's engine)
                    "fix": {"oneOf": [{"type": "string"}, {"type": "object", "required": ["default"],
                                                           "additionalProperties": {"type": "string"}}]},
                    "involves": {"type": "array", "items": {"type": "string"}},
                    # the catalog coupling this rule refines (kg.knowledge.couplings.coupling_ref, e.g.
                    # 'zero-2/conflicts_with/pipeline-parallelism'): the rule replaces that coupling's generated rule
                    "refines": {"oneOf": [{"$ref": "#/$defs/coupling_ref"},
                                          {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/coupling_ref"}}]},
                    "sources": {"type": "array", "minItems": 1, "items": _SOURCE},
                    "kind": {"enum": list(RULE_KINDS)},
                    "failure": _FAILURE,
                },
                "allOf": [
                    {"if": {"not": {"required": ["severity_bands"]}}, "then": {"required": ["severity"]}},
                    {"if": {"required": ["kind"], "properties": {"kind": {"const": "runtime-failure"}}},
                     "then": {"required": ["failure", "mechanism", "cost_dimension", "fix"]},
                     "else": {"not": {"required": ["failure"]}}},
                ],
            },
        },
    },
}


@dataclass
class Rule:
    """One loaded rule (see module doc for field meanings)."""

    id: str
    ruleset: str
    title: str
    match: list[dict[str, Any]]
    message: str
    sources: list[dict[str, Any]]
    severity: str | None = None
    severity_bands: list[dict[str, str]] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    condition: str | None = None
    numbers: dict[str, str] = field(default_factory=dict)
    applies_to: dict[str, Any] = field(default_factory=dict)
    parent: str | None = None
    mechanism: str = ""
    cost_dimension: str | None = None
    from_dimension: str | None = None
    fixes: list[str] = field(default_factory=list)
    fix: str = ""
    fix_by_engine: dict[str, str] = field(default_factory=dict)  # engine -> fix text (``fix`` is the default)
    involves: list[str] = field(default_factory=list)
    kind: str = "startup"
    failure: dict[str, Any] = field(default_factory=dict)  # runtime-failure rules only (see _FAILURE)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    evidence_todo: str = ""
    evidence_unpinned: str = ""  # why no released source backs this engine rule (RULE_FILE_SCHEMA)
    refines: list[str] = field(default_factory=list)  # coupling refs a hand rule refines (RULE_FILE_SCHEMA)
    coupling: str | None = None  # set on rules generated from a catalog coupling: that coupling's ref
    file: str = ""
    line: int = 0

    @cached_property
    def pattern_text(self) -> str:
        """The match patterns as text (``kind=model; kind=technique, technique=x``), for "did not fire" reasons."""
        return "; ".join(", ".join(f"{k}={v}" for k, v in p.items()) for p in self.match)

    @property
    def techniques(self) -> list[str]:
        out = [p["technique"] for p in self.match if p.get("kind") == "technique" and "technique" in p]
        return out + [t for t in self.involves if t not in out]


@dataclass
class RuleSet:
    """All rules of one kind plus their default thresholds."""

    kind: str
    rules: list[Rule]
    thresholds: dict[str, dict[str, Any]]
    _compiled: CompiledRules | None = None

    def by_id(self, rid: str) -> Rule:
        for r in self.rules:
            if r.id == rid or rid in r.aliases:
                return r
        raise OptkgError(f"unknown rule '{rid}'")

    @property
    def compiled(self) -> CompiledRules:
        if self._compiled is None:
            self._compiled = compiled_rules([(r.id, r.match) for r in self.rules], label=self.kind)
        return self._compiled


def _normalise_match(match: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for p in match:
        p = dict(p)
        if "technique" in p and "kind" not in p:
            p["kind"] = "technique"
        out.append(p)
    return out


def failure_problems(r: Rule) -> list[tuple[str, str]]:
    """Consistency of a runtime-failure rule's ``failure`` block; returns (field, message) pairs.

    The affected range needs a lower bound; a released fix ``fixed_in`` must be outside the range and
    be its upper bound (``<fixed_in``); no fix needs ``fixed_in_note``; the issue number must be the
    one in its URL. ``applies_to`` is derived from the block (engine, affected range) when absent and
    must agree with it when given.
    """
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # validation only (a warm check skips it)
    from packaging.version import InvalidVersion, Version
    fb = r.failure
    out: list[tuple[str, str]] = []
    try:
        spec = SpecifierSet(fb["affected"])
    except InvalidSpecifier:
        return [("failure.affected", f"'{fb['affected']}' is not a version range (e.g. '>=0.6.0,<0.6.4')")]
    ops = {s.operator for s in spec}
    if not ops & {">=", ">", "==", "~="}:
        out.append(("failure.affected", f"'{fb['affected']}' has no lower bound (the first affected release)"))
    fixed = fb.get("fixed_in")
    if fixed is None:
        if not fb.get("fixed_in_note"):
            out.append(("failure.fixed_in_note", "fixed_in is null: say why no release is named (fixed_in_note)"))
    else:
        try:
            fv = Version(fixed)
        except InvalidVersion:
            out.append(("failure.fixed_in", f"'{fixed}' is not a release number"))
        else:
            if fv in spec:
                out.append(("failure.fixed_in", f"fixed_in {fixed} lies inside the affected range {fb['affected']}"))
            if not any(s.operator == "<" and Version(s.version) == fv for s in spec):
                out.append(("failure.affected", f"the affected range must end at the fix: add '<{fixed}'"))
    url, num = fb["issue"]["url"], fb["issue"]["number"]
    if not url.endswith(f"/{num}"):
        out.append(("failure.issue.number", f"issue number {num} is not the one in {url}"))
    derived = {"engines": [fb["engine"]], "versions": fb["affected"]}
    if not r.applies_to:
        r.applies_to = derived
    elif r.applies_to != derived:
        out.append(("applies_to", f"applies_to {r.applies_to} disagrees with the failure block {derived}"))
    return out


_PARSED: dict[str, tuple[YamlDoc, str]] = {}  # content digest -> (parsed document, never handed out; digest)
_PARSED_MAX = 64  # entries (one per rules file content, wherever the file is); bounded so a long process cannot grow it
_SCHEMA_OK: set[str] = set()  # content digests whose document the rule-file schema accepted (a verdict of the content)


def _load_rule_yaml(f: Path) -> tuple[YamlDoc, str]:
    """``load_yaml(f)`` (same size and file-kind refusals), parsed once per file content in a process:
    ``load_rules`` reads every file of the folder for each kind. Returns the shared parsed document
    (the caller copies it before handing its data on: ``_own``) and the content's digest."""
    import hashlib
    text = read_text(f)
    key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    hit = _PARSED.get(key)
    if hit is None:
        hit = (parse_yaml(text, str(f)), key)
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[key] = hit
    return hit[0], key


def _own(doc: YamlDoc, f: Path) -> YamlDoc:
    """A private copy of a shared parsed rules document under the name ``f`` (the rules built from
    it may be changed by their loader); the line map stays lazy (built for a problem only)."""
    import copy
    return doc.renamed(str(f), copy.deepcopy(doc.data))


def load_rules(kind: str, folder: Path | None = None, files: list[Path] | None = None) -> tuple[RuleSet, list[Problem]]:
    """Load every rules file of ``kind`` from ``folder`` (default: the shipped rules/).

    Returns (ruleset, problems). Problems name file, line and field: schema errors, duplicate
    ids, expressions outside the language, bad version specifiers, unknown parents.
    """
    folder = Path(folder) if folder else paths.rules_dir()
    files = files if files is not None else sorted(folder.glob("*.yaml"))
    import jsonschema  # here: a cached ruleset needs no validator (see load_ruleset)

    validator = jsonschema.Draft202012Validator(RULE_FILE_SCHEMA)
    rules: list[Rule] = []
    thresholds: dict[str, dict[str, Any]] = {}
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    for f in files:
        try:
            doc, digest = _load_rule_yaml(f)
        except OptkgError as e:
            problems.append(Problem(str(f), 1, 1, "", str(e), "yaml"))
            continue
        if not isinstance(doc.data, dict):
            problems.append(Problem(str(f), 1, 1, "", "a rules file must be a mapping with 'ruleset:' and 'rules:' "
                                    f"(found {type(doc.data).__name__ if doc.data is not None else 'an empty file'})",
                                    "rule-schema"))
            continue
        named = doc.data.get("ruleset")
        if named not in RULESET_KINDS:
            from difflib import get_close_matches
            line, col = doc.where(("ruleset",))
            near = get_close_matches(str(named), RULESET_KINDS, n=1)
            hint = f"; did you mean '{near[0]}'?" if near else ""
            problems.append(Problem(str(f), line, col, "ruleset", f"unknown ruleset {named!r}{hint} "
                                    f"(known: {', '.join(RULESET_KINDS)}); this file's rules would never run",
                                    "rule-schema"))
            continue
        if named != kind:
            continue
        doc = _own(doc, f)
        if digest not in _SCHEMA_OK:
            errs = list(validator.iter_errors(doc.data))
            for e in errs:
                line, col = doc.where(tuple(e.absolute_path))
                problems.append(Problem(str(f), line, col, "/".join(map(str, e.absolute_path)), e.message[:200], "rule-schema"))
            if errs:
                continue
            _SCHEMA_OK.add(digest)
        for name, t in (doc.data.get("thresholds") or {}).items():
            thresholds[name] = dict(t)
        for i, rd in enumerate(doc.data["rules"]):
            line, col = doc.where(("rules", i))
            r = Rule(ruleset=kind, file=str(f), line=line, **{k: v for k, v in rd.items()})
            if isinstance(r.fix, dict):  # per-engine fix texts: ``default`` plus one per engine
                r.fix_by_engine = {k: v for k, v in r.fix.items() if k != "default"}
                r.fix = r.fix["default"]
            r.match = _normalise_match(r.match)
            if isinstance(r.refines, str):
                r.refines = [r.refines]
            if r.id in seen:
                problems.append(Problem(str(f), line, col, f"rules[{i}].id", f"duplicate rule id '{r.id}' (also in {seen[r.id]})",
                                        "duplicate-rule-id"))
                continue
            seen[r.id] = str(f)
            exprs = [("condition", r.condition)] + [(f"numbers.{k}", v) for k, v in r.numbers.items()] + \
                    [(f"severity_bands[{j}].when", b["when"]) for j, b in enumerate(r.severity_bands)]
            bad = False
            for fld, text in exprs:
                if text is None:
                    continue
                try:
                    compile_expr(text, ("has",))
                except ExprError as e:
                    problems.append(Problem(str(f), line, col, f"rules[{i}].{fld}", f"rule '{r.id}': {e}", "rule-expression"))
                    bad = True
            if r.kind == "runtime-failure":
                for fld, msg in failure_problems(r):
                    problems.append(Problem(str(f), line, col, f"rules[{i}].{fld}", f"rule '{r.id}': {msg}", "rule-failure"))
                    bad = True
            for fld, text in [("message", r.message), ("fix", r.fix)] + [(f"fix.{k}", v) for k, v in r.fix_by_engine.items()]:
                for msg in check_template(text):
                    problems.append(Problem(str(f), line, col, f"rules[{i}].{fld}", f"rule '{r.id}': {msg}", "rule-expression"))
                    bad = True
            versions = r.applies_to.get("versions")
            for spec in (versions.values() if isinstance(versions, dict) else [versions] if versions else []):
                try:
                    operators(spec)
                except ValueError:  # packaging's InvalidSpecifier
                    problems.append(Problem(str(f), line, col, f"rules[{i}].applies_to.versions",
                                            f"rule '{r.id}': '{spec}' is not a version range (e.g. '>=0.6,<0.8')", "rule-version"))
                    bad = True
            if r.evidence_unpinned and r.evidence:
                problems.append(Problem(str(f), line, col, f"rules[{i}].evidence_unpinned",
                                        f"rule '{r.id}': evidence_unpinned with evidence items: keep one of them", "rule-scope"))
            if not bad and getattr(r, 'kind', 'startup') != 'runtime-failure' and not (r.evidence_todo and not r.evidence):
                for fld, msg in scope_problems(r.applies_to, r.evidence, unpinned=bool(r.evidence_unpinned)):
                    problems.append(Problem(str(f), line, col, f"rules[{i}].{fld}", f"rule '{r.id}': {msg}", "rule-scope"))
            if not bad:
                rules.append(r)
    ids = {r.id for r in rules}
    for r in rules:
        if r.parent and r.parent not in ids:
            problems.append(Problem(r.file, r.line, 1, "parent", f"rule '{r.id}': parent '{r.parent}' does not exist", "rule-parent"))
    return RuleSet(kind, rules, thresholds), problems


RULES_CACHE_VERSION = 3  # 3: files keyed by their place in the rules folder, entries move with it


def _rules_cache_key(kind: str, files: list[Path], folder: Path) -> str | None:
    """Digest of ``kind``, this module's source and every rules file's name inside ``folder`` (kg.core.cache.rooted:
    a copy of the folder elsewhere has the same key) and content digest (None when unreadable;
    kg.core.cache.file_digest: SHA-256 of the bytes, kept by the file's stat)."""
    import hashlib

    from kg.core.cache import file_digest, rooted
    try:
        h = hashlib.sha256(f"optkg-rules-{RULES_CACHE_VERSION}-2-{kind}".encode())
        h.update(file_digest(__file__).encode())  # a changed Rule/RuleSet shape never meets an old entry
        for f in files:
            h.update(rooted(f, folder).encode() + b"\0" + file_digest(f).encode() + b"\0")
    except OSError:
        return None
    return h.hexdigest()


def _ruleset_data(rs: RuleSet, folder: Path) -> dict[str, Any]:
    """``rs`` (loaded from ``folder``) as plain data for the cache (``_ruleset_from_data`` rebuilds it). The folder
    appears only in each rule's ``file``, which ``_ruleset_from_data`` moves to the folder it reads the entry for;
    anywhere else it pins the entry to this folder (kg.core.cache.rooted)."""
    from dataclasses import fields

    from kg.core.cache import mentions
    names = [f.name for f in fields(Rule)]
    rows = [[getattr(r, n) for n in names] for r in rs.rules]
    root = str(folder)
    pinned = mentions(rs.thresholds, root) or mentions([[v for n, v in zip(names, row) if n != "file"] for row in rows], root)
    return {"kind": rs.kind, "thresholds": rs.thresholds, "rules": rows, "fields": names, "root": root, "pinned": pinned}


def _ruleset_from_data(d: Any, kind: str, folder: Path) -> RuleSet | None:
    from dataclasses import fields

    from kg.core.cache import moved
    names = [f.name for f in fields(Rule)]
    if not isinstance(d, dict) or d.get("kind") != kind or d.get("fields") != names:
        return None
    try:
        old, new = d["root"], str(folder)
        if not isinstance(old, str) or (d["pinned"] is not False and old != new):
            return None
        rules = [Rule(**dict(zip(names, row))) for row in d["rules"]]
        if old != new:
            for r in rules:
                r.file = moved(r.file, old, new)
        return RuleSet(kind, rules, dict(d["thresholds"]))
    except (TypeError, KeyError, ValueError, AttributeError):
        return None


def folder_files(folder: Path, what: str = "--rules") -> list[Path]:
    """The ``*.yaml`` files of a rules folder; OptkgError when the folder is missing, not a folder or empty."""
    if not folder.exists():
        raise OptkgError(f"{what} {folder}: folder not found")
    if not folder.is_dir():
        raise OptkgError(f"{what} {folder}: not a folder (give the folder that holds the rules *.yaml files)")
    files = sorted(folder.glob("*.yaml"))
    if not files:
        raise OptkgError(f"{what} {folder}: no rules files (*.yaml) in this folder; nothing could be checked")
    return files


def invalid_rules(problems: list[Problem], folder: Path) -> OptkgError:
    """One line naming the first problem and how many more (``optkg validate --rules`` lists them all); every
    problem in ``details`` (the ``--format json`` error object)."""
    from kg.core.textsafe import one_line
    n = len(problems)
    more = f"; and {n - 1} more (`optkg validate --rules {one_line(folder)}` lists every one)" if n > 1 else ""
    return OptkgError(f"invalid rules: {problems[0].one_line()}{more}", [p.one_line() for p in problems])


def load_ruleset(kind: str, folder: Path | None = None) -> RuleSet:
    """Like ``load_rules`` but raises OptkgError (one line per problem) when any rule file is invalid,
    and when the folder is missing or empty or holds no rule of ``kind`` (nothing could be checked).

    A clean ruleset is cached like the catalog (``$OPTKG_CACHE_DIR``, default ``~/.cache/optkg``) as
    plain JSON, keyed on the bytes of every rules file, so unchanged rules are not re-parsed and re-validated.
    """
    folder = Path(folder) if folder else paths.rules_dir()
    files = folder_files(folder)
    key = _rules_cache_key(kind, files, folder)
    from kg.core import cache as _cache
    entry = _cache.cache_file(f"rules-{kind}-{key[:32]}.json") if key else None
    if entry is not None:
        rs = _ruleset_from_data(_cache.read_data(entry, "rules", key), kind, folder)
        if rs is not None:
            _preload_trees(rs)
            return rs
    rs, problems = load_rules(kind, folder, files)
    if problems:
        raise invalid_rules(problems, folder)
    if not rs.rules:
        raise OptkgError(f"--rules {folder}: no '{kind}' rules in {len(files)} rules file(s) "
                         f"(each file names its ruleset: {', '.join(RULESET_KINDS)}); nothing could be checked")
    if entry is not None:
        _cache.write_data(entry, "rules", key, _ruleset_data(rs, folder))  # an unwritable cache folder only costs speed
    _preload_trees(rs)
    return rs


def _preload_trees(rs: RuleSet) -> None:
    """The checked trees of every expression of ``rs`` from the cache (kg.engine.exprtrees): evaluating one does not
    parse it again."""
    from kg.engine.exprtrees import preload
    preload(t for r in rs.rules for t in (r.condition, *r.numbers.values(), *(b.get("when") for b in r.severity_bands)))


# ---------------------------------------------------------------------------------------------

OUTCOMES = ("fired", "held", "not_evaluable", "not_applicable")


@dataclass
class Firing:
    """The outcome of one rule over one set of facts: fired, or why not.

    ``outcome`` is one of ``OUTCOMES``: ``fired``; ``held`` (the rule applies and its condition,
    pattern attributes or severity bands evaluated false); ``not_evaluable`` (it applies but a fact it
    reads is missing - ``missing`` names every one of its names this input lacks - or could not be
    compared); ``not_applicable`` (another engine or release, a technique it is about is absent, or its
    parent rule did not fire).
    """

    rule: Rule
    fired: bool
    reason: str
    severity: str | None = None
    numbers: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    facts: list[dict[str, Any]] = field(default_factory=list)
    outcome: str = ""
    missing: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.outcome:
            self.outcome = "fired" if self.fired else "held"


def _version_ok(rule: Rule, engine: str | None, version: str | None) -> tuple[bool, str]:
    """(whether ``rule`` applies to ``engine`` at ``version``, why not). Memoised on the rule object itself, per
    engine and version: a sweep asks the same question for every rule of every stack, and each technique set's
    generated coupling rules are new objects with the same ids. The memo lives and dies with its rule: a module
    table holding the rules kept every RuleSet a process loaded alive (212 MiB over 100 check calls)."""
    memo = rule.__dict__.setdefault("_version_memo", {})
    key = (engine, version)
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = _version_ok_uncached(rule, engine, version)
    return hit


def _version_ok_uncached(rule: Rule, engine: str | None, version: str | None) -> tuple[bool, str]:
    at = rule.applies_to
    if not at:
        return True, ""
    engines = at.get("engines")
    if engines and engine not in engines:
        return False, f"applies to {', '.join(engines)}; the stack's engine is {engine or 'not given'}"
    spec = spec_for(at.get("versions"), engine)
    if spec:
        if not version:
            # With no version given we assume a current release: ranges with an upper bound
            # (old behaviour) do not apply; open-ended ranges do.
            if operators(spec) & {"<", "<=", "==", "~="}:
                return False, f"applies to {engine or 'engine'} {spec}; no engine version given (assumed current)"
            return True, ""
        try:
            if not in_range(version, spec):
                return False, f"applies to {engine} {spec}; the stack runs {version}"
        except ValueError:  # packaging's InvalidVersion (the range was checked when the rules were read)
            return False, f"engine version '{version}' is not a version number"
    return True, ""


def _fmt(template: str, values: Mapping[str, Any]) -> str:
    """A rule message or fix with its fields filled in (kg.core.template: names and number formats only)."""
    return render(template, values)


def _unmatched(rule: Rule, present: set[str], kinds: set[Any]) -> tuple[str, list[str]]:
    """Why ``rule``'s patterns found no facts: ('not_applicable', []) when a technique it is about is
    absent (``present``: the technique ids among the facts); ('not_evaluable', [kinds]) when no fact of a
    kind it needs exists at all (``kinds``; e.g. no ``hardware`` fact: no GPU given or the GPU is not in
    the catalog); else ('held', []): the facts are there but their attributes differ (the model is not MLA)."""
    for p in rule.match:
        if p.get("kind") == "technique" and p.get("technique") not in present:
            return "not_applicable", []
    absent_kinds: list[str] = []
    for p in rule.match:
        k = p.get("kind")
        if k not in kinds and str(k) not in absent_kinds:
            absent_kinds.append(str(k))
    return ("not_evaluable", absent_kinds) if absent_kinds else ("held", [])


def _missing_names(rule: Rule, local: Mapping[str, Any]) -> list[str]:
    """The fact names ``rule`` reads that ``local`` lacks (sorted): those of its condition when the condition
    lacks any, else those of its numbers and severity bands."""
    # the condition first: when it lacks facts, those are the ones that matter (and it is parsed already)
    texts = [rule.condition]
    if not rule.condition or not any(local.get(n) is None for n in names_in(rule.condition)):
        texts += list(rule.numbers.values()) + [b["when"] for b in rule.severity_bands]
    read: set[str] = set()
    for t in texts:
        if t:
            read |= names_in(t)
    read -= set(rule.numbers)  # bands may read the rule's own numbers
    return sorted(n for n in read if local.get(n) is None and n not in ("true", "false", "True", "False"))


def _false_without(rule: Rule, ns: Mapping[str, Any], functions: Mapping[str, Callable[..., Any]]) -> bool:
    """True when ``rule``'s condition is already false on the stack-wide facts ``ns`` alone (before any fact of
    a kind it matches on is known): then the rule holds whatever those facts would say. A condition that
    needs a missing fact, or is true, or cannot be compared, decides nothing."""
    try:
        return not evaluate(rule.condition, ns, functions)
    except (MissingFact, ExprTypeError, ZeroDivisionError, ValueError, TypeError, OverflowError):
        return False


def evaluate_rules(rs: RuleSet, facts: list[dict[str, Any]], namespace: Mapping[str, Any],
                   functions: Mapping[str, Callable[..., Any]] | None = None,
                   engine: str | None = None, version: str | None = None,
                   thresholds: Mapping[str, float] | None = None) -> list[Firing]:
    """Run ``rs`` over ``facts`` (engine match) then conditions/numbers over ``namespace`` (Python).

    Returns one Firing per rule, in rule order: fired ones with severity, numbers and message,
    and non-fired ones with the reason (no structural match, outside its version range, missing
    fact, condition false, parent did not fire) and ``outcome`` (see ``Firing``). Deterministic for
    equal inputs. Inside a sweep's ``kg.engine.incremental.use(session)`` a rule whose inputs (the values it
    reads, the matched facts, its parent's outcome) equal those of the previous stack keeps that stack's Firing.
    """
    ns = dict(namespace)
    for name, t in rs.thresholds.items():
        ns[name] = t["value"]
    if thresholds:
        ns.update(thresholds)
    if not functions or "has" not in functions:
        # rules may always ask has('<technique id>'); default to the namespace's technique list
        present = set(ns.get("techniques") or [])
        functions = {**(functions or {}), "has": present.__contains__}
    session = incremental.current()
    state = session.rules(rs, engine, version) if session is not None else None
    redo: set[int] | None = None
    if state is not None:
        matched, redo, vals, frozen = state.begin(facts, ns, rs.compiled)
        prev, prev_parent = state.prev_out, state.prev_parent
    else:
        matched = {}
        for rid, fs in rs.compiled.match(facts):
            matched.setdefault(rid, []).append(fs)
    kinds: list[Any] = []  # [technique ids among the facts, fact kinds] for _unmatched, computed once when needed
    if redo is not None:
        # the previous stack's Firings, except the rules reading a changed value and those whose parent's outcome
        # changed (in rule order, so a parent is final before its children are looked at)
        out, parent_fired = list(prev), list(prev_parent)
        for i in sorted(redo | state.with_parent):
            r = rs.rules[i]
            pf = bool(r.parent) and any(out[j].fired for j in state.pos.get(r.parent, ()) if j < i)
            parent_fired[i] = pf
            if i in redo or pf != prev_parent[i]:
                out[i] = state.firing(i, vals, pf, lambda: _fire(r, matched_facts(matched.get(r.id), facts), ns, functions,
                                                                 engine, version, facts, kinds, {r.parent} if pf else set()))
        state.end(matched, vals, frozen, out, parent_fired)
        session.last_rules = state
        return out
    out: list[Firing] = []
    parent_fired: list[bool] = []
    fired_ids: set[str] = set()
    # a new technique set's first stack: the rules whose inputs equal the stack before's keep its Firings
    last = session.last_rules if state is not None and state.prev_vals is None else None
    seeds = state.seeds(last) if last is not None else None
    for i, r in enumerate(rs.rules):
        pf = bool(r.parent) and r.parent in fired_ids
        parent_fired.append(pf)
        if seeds is not None and seeds[i] >= 0 and last.prev_parent[seeds[i]] == pf:
            f = last.prev_out[seeds[i]]
        elif state is not None:  # an earlier stack with the same facts and values it reads
            f = state.firing(i, vals, pf, lambda: _fire(r, matched_facts(matched.get(r.id), facts), ns, functions, engine,
                                                        version, facts, kinds, fired_ids))
        else:
            f = _fire(r, matched.get(r.id), ns, functions, engine, version, facts, kinds, fired_ids)
        if f.fired:
            fired_ids.add(r.id)
        out.append(f)
    if state is not None:
        state.end(matched, vals, frozen, out, parent_fired)
        session.last_rules = state
    return out


def matched_facts(found: list[tuple[int, ...]] | None, facts: list[dict[str, Any]]) -> list[list[dict[str, Any]]] | None:
    """The facts (copies) of each combination a rule matched, from their indices in ``facts``
    (kg.engine.incremental.RuleState.begin): copied only for a rule that runs."""
    if found is None:
        return None
    at = facts.__getitem__
    return [list(map(dict, map(at, ix))) for ix in found]


def _fire(r: Rule, matches: list[list[dict[str, Any]]] | None, ns: dict[str, Any],
          functions: Mapping[str, Callable[..., Any]], engine: str | None, version: str | None,
          facts: list[dict[str, Any]], kinds: list[Any], fired_ids: set[str]) -> Firing:
    """One rule's Firing (evaluate_rules): ``matches`` are the fact combinations the engine matched for it."""
    ok, why = _version_ok(r, engine, version)
    if not ok:
        return Firing(r, False, why, outcome="not_applicable")
    if matches is None:
        if not kinds:
            kinds += [{f.get("technique") for f in facts if f.get("kind") == "technique"}, {f.get("kind") for f in facts}]
        outcome, absent = _unmatched(r, kinds[0], kinds[1])
        if absent and r.condition and _false_without(r, ns, functions):
            # decided without the absent facts (`weight_is_fp8 and <hardware ...>` on a BF16 model): held
            return Firing(r, False, f"condition is false whatever the {' and '.join(absent)} facts: {r.condition}")
        if absent:
            why = f"needs {' and '.join(absent)} facts, which this input does not provide"
        else:
            why = f"{incremental.STATIC_HELD}{r.pattern_text})"  # a sweep keeps it per facts (RuleState.firing)
        return Firing(r, False, why, outcome=outcome, missing=absent)
    if r.parent and r.parent not in fired_ids:
        return Firing(r, False, f"its parent rule '{r.parent}' did not fire", outcome="not_applicable")
    # the namespace, then the first match's fact values for names it lacks (not a copy of ns per rule)
    extra: dict[str, Any] = {}
    for fact in matches[0]:
        for k, v in fact.items():
            if k not in ns and k not in extra:
                extra[k] = v
    local: Mapping[str, Any] = ChainMap(ns, extra) if extra else ns
    try:
        if r.condition and not evaluate(r.condition, local, functions):
            return Firing(r, False, f"condition is false: {r.condition}")
        nums = {k: evaluate(v, local, functions) for k, v in r.numbers.items()}
        sev = r.severity
        for band in r.severity_bands:  # the numbers, then the match's facts, then ns, for the names it reads
            if evaluate(band["when"], _view(names_in(band["when"]), nums, extra, ns), functions):
                sev = band["severity"]
                break
    except MissingFact as e:
        missing = _missing_names(r, local) or [e.name]
        return Firing(r, False, f"needs fact '{e.name}', which this input does not provide",
                      outcome="not_evaluable", missing=missing)
    except (ExprTypeError, ZeroDivisionError, ValueError, TypeError, OverflowError) as e:
        return Firing(r, False, f"could not evaluate: {e}", outcome="not_evaluable")
    if sev is None or sev == "none":
        return Firing(r, False, "no severity band applies")
    nums = {k: (int(v) if isinstance(v, float) and v.is_integer() else v) for k, v in nums.items()}
    return Firing(r, True, "fired", sev, nums, _fmt(r.message, _view(_fields(r.message), nums, extra, ns)), matches[0])


def _view(names: Any, *maps: Mapping[str, Any]) -> dict[str, Any]:
    """``names`` with the value of the first of ``maps`` holding each: what ``{**maps[-1], ..., **maps[0]}`` gives
    for them, without copying the ~280-name namespace for one message or severity band."""
    out: dict[str, Any] = {}
    for n in names:
        for m in maps:
            if n in m:
                out[n] = m[n]
                break
    return out


_FIELDS: dict[str, tuple[str, ...]] = {}


def _fields(template: Any) -> tuple[str, ...]:
    """The names ``render`` looks up for ``template`` (its ``{name}`` / ``{name:spec}`` fields), once per text."""
    if not isinstance(template, str):
        return ()
    hit = _FIELDS.get(template)
    if hit is None:
        from kg.core.template import _FIELD, MAX_TEMPLATE
        if len(_FIELDS) > 4096:
            _FIELDS.clear()
        hit = _FIELDS[template] = tuple(dict.fromkeys(
            m.group(1).partition(":")[0] for m in _FIELD.finditer(template[:MAX_TEMPLATE]) if m.group(1) is not None))
    return hit
