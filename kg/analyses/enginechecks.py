"""The engines' own incompatibility checks, as data, and which optkg rule covers each.

``scan_wheel`` lists every explicit "X is incompatible with / not supported with / mutually exclusive with Y"
message in an engine's configuration code inside its released wheel (``PATTERN`` over the files under
``roots``, comment lines skipped); the result is kept in ``catalog/engines/checks/<engine>-<release>.yaml``::

    engine: vllm
    release: "0.33.0"
    package: vllm
    scanned: {roots: [vllm/config/, vllm/engine/arg_utils.py], pattern: "..."}
    checks:
      - id: vllm-config-vllm-1214          # <engine>-<file stem path>-<line>, stable for one release
        path: vllm/config/vllm.py
        line: 1214
        snippet: '"--enable-return-routed-experts is incompatible with "'   # the matched source line, stripped
        message: "--enable-return-routed-experts is incompatible with ..."  # the joined string literal
        covered_by: [routed-experts-with-context-parallel]                 # rule ids, or:
        not_covered: "no optkg fact for watermarking"

``load_checks`` reads those files; ``coverage`` joins them with the rules (an id in ``covered_by`` must be a
rule). The snippets are evidence items (kg.analyses.evidence checks them like rule evidence).
"""
from __future__ import annotations

import re
from itertools import compress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

# module-level, not in the functions a sweep runs per stack or row: a function-level `from m import x` costs ~2.5 us
# in CPython 3.11 (the import system asks m for __path__, and a module lacking it builds an AttributeError)
from kg.analyses.draftkeys import draft_config_keys
from kg.analyses.enginerows import (_SharedLets, _let_names, _lets_read, _row_lazy, row_facts, sweep_config_keys,
                                    sweep_outcomes)
from kg.analyses.xpu_attention import xpu_attention_facts, xpu_batch_invariance_facts  # Intel XPU refusals
from kg.core.errors import OptkgError
from kg.core.lazyre import lazy_re
from kg.engine.expr import ExprError, ExprTypeError, MissingFact, evaluate
from kg.engine.incremental import current
from kg.inputs.effective import setting_given_fn

PATTERN = (r"incompatible with|not supported with|not compatible with|cannot be used with|cannot be combined with"
           r"|mutually exclusive|not supported together")
_STRING = lazy_re(r"""^\s*(?:raise \w+\(|[\w.]+\()?\s*[rbuf]*(["'])(.*?)(?<!\\)\1""")


@dataclass
class EngineCheck:
    """One check an engine makes on its configuration, found in its source (``path:line``); the rules covering it."""
    id: str
    path: str
    line: int
    snippet: str
    message: str
    covered_by: list[str] = field(default_factory=list)
    not_covered: str = ""


def _message(lines: list[str], i: int) -> str:
    """The string literal that starts on line ``i`` (0-based) and its continuation lines, joined."""
    parts = []
    for ln in lines[i:i + 6]:
        m = _STRING.match(ln)
        if not m:
            if parts:
                break
            continue
        parts.append(m.group(2))
        if ln.rstrip().endswith((")", ",")) and parts:
            break
    return " ".join(" ".join(parts).split())[:400]


def scan_text(path: str, text: str, engine: str, pattern: str = PATTERN) -> list[EngineCheck]:
    rx = re.compile(pattern)
    lines = text.splitlines()
    out = []
    stem = re.sub(r"[^a-z0-9]+", "-", path.rsplit(".", 1)[0].split("/", 1)[-1].lower()).strip("-")
    for i, ln in enumerate(lines):
        if ln.lstrip().startswith("#") or not rx.search(ln):
            continue
        if '"' not in ln and "'" not in ln:
            continue  # the phrase in code, not in a message
        snippet = ln.strip()[:300]
        out.append(EngineCheck(f"{engine}-{stem}-{i + 1}", path, i + 1, snippet, _message(lines, i) or snippet))
    return out


def scan_wheel(wheel: Path, engine: str, roots: Iterable[str], pattern: str = PATTERN) -> list[EngineCheck]:
    """Every message matching ``pattern`` in the ``.py`` files of ``wheel`` under ``roots`` (prefixes), in path order."""
    import zipfile  # only the wheel scan reads one (zipfile loads shutil, bz2 and lzma: ~12 M instructions a check)
    roots = list(roots)
    out: list[EngineCheck] = []
    try:
        with zipfile.ZipFile(wheel) as z:
            for name in sorted(z.namelist()):
                if name.endswith(".py") and any(name == r or name.startswith(r) for r in roots):
                    out.extend(scan_text(name, z.read(name).decode("utf-8", errors="replace"), engine, pattern))
    except (OSError, zipfile.BadZipFile) as e:
        raise OptkgError(f"{wheel}: not a readable wheel ({e})") from None
    return out


def load_checks(folder: Path) -> list[dict[str, Any]]:
    """Every ``<engine>-<release>.yaml`` in ``folder`` as {engine, release, package, checks: [EngineCheck], file}."""
    from kg.core.yamlio import load_yaml
    out = []
    for f in sorted(Path(folder).glob("*.yaml")):
        d = load_yaml(f).data
        if not isinstance(d, dict) or not d.get("engine") or not d.get("release"):
            raise OptkgError(f"{f}:1: an engine checks file needs engine: and release:")
        checks = []
        for i, c in enumerate(d.get("checks") or []):
            if not isinstance(c, dict) or not all(k in c for k in ("id", "path", "line", "snippet")):
                raise OptkgError(f"{f}: checks[{i}] needs id, path, line and snippet")
            checks.append(EngineCheck(str(c["id"]), str(c["path"]), int(c["line"]), str(c["snippet"]),
                                      str(c.get("message") or c["snippet"]), [str(x) for x in c.get("covered_by") or []],
                                      str(c.get("not_covered") or "")))
        out.append({"engine": str(d["engine"]), "release": str(d["release"]),
                    "package": str(d.get("package") or d["engine"]), "checks": checks, "file": str(f)})
    return out


def coverage(check_files: list[dict[str, Any]], rule_ids: set[str]) -> list[dict[str, Any]]:
    """Per file: counts and each check's status (covered / not covered / unmapped) with the rules that cover it.

    A ``covered_by`` id that is not a rule is an error (OptkgError naming the file and check)."""
    out = []
    for cf in check_files:
        rows = []
        for c in cf["checks"]:
            missing = [r for r in c.covered_by if r not in rule_ids]
            if missing:
                raise OptkgError(f"{cf['file']}: check {c.id} names unknown rule(s) {', '.join(missing)}")
            status = "covered" if c.covered_by else ("not covered" if c.not_covered else "unmapped")
            rows.append({"check": c, "status": status})
        n = len(rows)
        cov = sum(1 for r in rows if r["status"] == "covered")
        out.append({**cf, "rows": rows, "total": n, "covered": cov,
                    "percent": round(100.0 * cov / n, 1) if n else 0.0})
    return out


# ---------------------------------------------------------------------------------------------
# Every startup check site per release (tools/engine_check_sites.py) and the generated check rows

CLASSES = ("rule", "table", "unknowable", "uncovered")
CLASS_NAMES = {"rule": "covered by a rule", "table": "covered by a generated table row",
               "unknowable": "not knowable before start", "uncovered": "not covered"}


def sites_dir() -> Path:
    from kg.core import paths
    return paths.catalog_dir() / "engines" / "checks" / "sites"


_SITES: dict[str, tuple[int, dict[str, Any]]] = {}


def _read_sites(path: Path) -> dict[str, Any]:
    from kg.core.yamlio import load_yaml
    d = load_yaml(path).data
    if not isinstance(d, dict) or not d.get("engine") or not d.get("release") or not isinstance(d.get("sites"), list):
        raise OptkgError(f"{path}:1: a sites file needs engine:, release: and a sites: list")
    for i, s in enumerate(d["sites"]):
        if not isinstance(s, dict) or s.get("class") not in CLASSES or not s.get("id"):
            raise OptkgError(f"{path}: sites[{i}] needs an id and a class ({', '.join(CLASSES)})")
    d["release"] = str(d["release"])
    return d


def load_sites(path: Path) -> dict[str, Any]:
    """One generated sites file (engine, release, package, scanned, counts, sites), parsed once per content (the
    content-keyed cache, kg.core.cache.built_from: the four shipped files are 1.5 MB of YAML) and kept per process
    by mtime. A file without engine / release / sites is an OptkgError naming it."""
    path = Path(path)
    return _per_file(_SITES, "engine-sites", path, lambda: _read_sites(path))


def _per_file(memo: dict[str, tuple[int, Any]], kind: str, path: Path, build: Any) -> Any:
    """``build()`` (plain data from ``path``) through the content-keyed cache (kg.core.cache.built_from under
    ``kind``), kept in ``memo`` by the file's mtime; OptkgError when the file cannot be read."""
    try:
        mtime = path.stat().st_mtime_ns
    except OSError as e:
        raise OptkgError(f"{path}: cannot read ({e.strerror})") from None
    got = memo.get(str(path))
    if got and got[0] == mtime:
        return got[1]
    from kg.core import cache
    data = cache.built_from(kind, [path], build)
    memo[str(path)] = (mtime, data)
    return data


_ALL_SITES: dict[str, tuple[tuple, list[dict[str, Any]]]] = {}


def all_sites(folder: Path | None = None) -> list[dict[str, Any]]:
    """Every sites file of ``folder`` (default catalog/engines/checks/sites), engine then release order; listed
    and sorted again only when a file's name, size or mtime changes (every checked stack asks)."""
    from kg.core.paths import yaml_files_stamp
    folder = Path(folder) if folder else sites_dir()
    if not folder.is_dir():
        return []
    names, stamp = yaml_files_stamp(folder)
    hit = _ALL_SITES.get(str(folder))
    if hit is None or hit[0] != stamp:
        files = {f: load_sites(Path(f)) for f in names}
        hit = (stamp, [files[f] for _, _, f in _release_files(folder)])
        _ALL_SITES[str(folder)] = hit
    return list(hit[1])


_INDEX: dict[str, tuple[tuple, list[list[str]]]] = {}


def _release_files(folder: Path) -> list[list[str]]:
    """[engine, release, path] of every sites file of ``folder``, engine then release order: from the content-keyed
    cache, so a stack's check reads only its own release's file, not all of them."""
    from kg.core.paths import yaml_files_stamp
    names, stamp = yaml_files_stamp(folder)
    hit = _INDEX.get(str(folder))
    if hit is None or hit[0] != stamp:
        from kg.core.relcmp import Release

        from kg.core import cache

        def build() -> list[list[str]]:
            out = [[d["engine"], d["release"], f] for f, d in ((f, load_sites(Path(f))) for f in names)]
            return sorted(out, key=lambda r: (r[0], Release(r[1])))
        hit = (stamp, cache.built_from("engine-sites-index", [Path(f) for f in names], build))
        _INDEX[str(folder)] = hit
    return hit[1]


def site_counts(d: dict[str, Any]) -> dict[str, Any]:
    """The four counts of one release, and coverage of the sites knowable before start (rule + table over all
    but unknowable)."""
    n = {c: sum(1 for s in d["sites"] if s["class"] == c) for c in CLASSES}
    knowable = len(d["sites"]) - n["unknowable"]
    cov = n["rule"] + n["table"]
    return {**n, "total": len(d["sites"]), "knowable": knowable, "covered": cov,
            "percent": round(100.0 * cov / knowable, 1) if knowable else 0.0}


def _release_path(engine: str | None, version: str | None, folder: Path | None = None) -> str | None:
    """The sites file a stack of ``engine`` at ``version`` is checked against (see ``sites_release_for``)."""
    folder = Path(folder) if folder else sites_dir()
    if not folder.is_dir():
        return None
    mine = [r for r in _release_files(folder) if r[0] == engine]
    if not mine:
        return None
    if not version:
        return mine[-1][2]
    for r in mine:
        if r[1] == str(version):
            return r[2]
    from kg.core.relcmp import Release
    try:
        return mine[-1][2] if Release(str(version)) > Release(mine[-1][1]) else None
    except ValueError:  # packaging's InvalidVersion
        return None


def sites_release_for(engine: str | None, version: str | None, folder: Path | None = None) -> dict[str, Any] | None:
    """The sites file a stack of ``engine`` at ``version`` is checked against: that release's, or the newest scanned
    one when no version is given or the version is newer than every scanned release; None otherwise."""
    path = _release_path(engine, version, folder)
    return load_sites(Path(path)) if path else None


_READS = {"true", "True", "false", "False"}  # constants, not facts (kg.engine.expr._eval)


def _always_read(node: Any) -> set[str]:
    """The fact names evaluating ``node`` reads whatever the values (kg.engine.expr._eval: ``and`` / ``or`` read
    their first operand, a comparison its first two, ``a if c else b`` its test; arithmetic, containers and a
    call's arguments all of theirs). A row missing one of them raises MissingFact before it decides anything."""
    import ast
    if isinstance(node, ast.Expression):
        return _always_read(node.body)
    if isinstance(node, ast.Name):
        return set() if node.id in _READS else {node.id}
    if isinstance(node, ast.BoolOp):
        return _always_read(node.values[0])
    if isinstance(node, ast.Compare):
        return _always_read(node.left) | _always_read(node.comparators[0])
    if isinstance(node, ast.IfExp):
        return _always_read(node.test)
    if isinstance(node, ast.BinOp):
        return _always_read(node.left) | _always_read(node.right)
    if isinstance(node, ast.UnaryOp):
        return _always_read(node.operand)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return set().union(*(_always_read(x) for x in node.elts))
    if isinstance(node, ast.Call):
        return set().union(*(_always_read(x) for x in node.args))
    return set()


def _needs(expr: str, lets: set[str]) -> list[list[str]]:
    """[inputs, lets] ``expr`` always reads (``_always_read``), sorted; [[], []] when it does not parse (evaluating
    it then says why)."""
    import ast
    try:
        names = _always_read(ast.parse(expr.strip(), mode="eval"))
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        names = set()
    return [sorted(names - lets), sorted(names & lets)]


def _build_rows(path: Path) -> dict[str, Any]:
    d = load_sites(path)
    lets = [(str(x["name"]), str(x["expr"])) for x in d.get("lets") or []]
    let_names = {n for n, _ in lets}
    rows = []
    for s in d["sites"]:
        if s["class"] != "table" or not s.get("expr"):
            continue
        r = {k: s[k] for k in ("id", "path", "line", "message", "expr", "defaults", "set_by_technique", "fills")
             if k in s}
        r["needs"], r["needs_lets"] = _needs(str(s["expr"]), let_names)
        r["lets"] = [n for n, _ in _lets_read(str(s["expr"]), lets)]
        r["reads"] = [] if d.get("inputs") else _names_read(r, lets)  # rows over an engine's own inputs: one namespace
        rows.append(r)
    return {"release": d["release"], "inputs": d.get("inputs"), "rows": rows,
            "lets": [[n, e, *_needs(e, let_names)] for n, e in lets], "let_names": _let_names(lets)}


def _names_read(s: dict[str, Any], lets: list[tuple[str, str]]) -> list[str]:
    """Every name row ``s`` reads, sorted: its expression's, its message fields' (``fills``) and those of the lets
    either reads (kg.frameworks.checkrows.names_of); an expression that does not parse adds none (evaluating it
    says why, whatever the facts)."""
    from kg.frameworks.checkrows import names_of
    let_expr = dict(lets)
    names = set(s["lets"])
    fills = [str(t) for t in (s.get("fills") or {}).values() if t is not None]  # the message's fields read these
    fill_lets = {n for t in fills for n, _ in _lets_read(t, list(let_expr.items()))}
    names |= fill_lets
    for text in [s["expr"], *fills, *(let_expr[n] for n in [*s["lets"], *fill_lets])]:
        try:
            names |= set(names_of(str(text)))
        except (SyntaxError, RecursionError, MemoryError, ValueError):
            pass
    return sorted(names)


_ROWS: dict[str, tuple[int, dict[str, Any]]] = {}


def check_rows(path: Path | str) -> dict[str, Any]:
    """The generated check rows (class ``table`` with an ``expr``) of sites file ``path``, as ``generated_refusals``
    evaluates them: {release, inputs, lets: [[name, expr, inputs read, lets read]], rows: [site fields + needs
    (the inputs the row always reads), needs_lets (the lets it always reads), lets (every let it reads, in
    definition order), reads (every name it reads, through its lets: [] for rows over an engine's own inputs)]}.
    Built once per file content (kg.core.cache.built_from), kept per process by mtime: a one-shot ``check``
    neither parses the sites YAML nor walks 400 expressions for the names they read."""
    path = Path(path)
    # the kind names the shape of the entry: bump it when _build_rows changes what it keeps (2: message fills;
    # 3: each row's read set; 4: each let's names)
    d = _per_file(_ROWS, "engine-check-rows-4", path, lambda: _build_rows(path))
    if _TREES_READ.get(id(d)) is not d:  # the rows' and lets' checked trees (kg.engine.exprtrees), once per table
        from kg.engine.exprtrees import preload
        preload([*(s["expr"] for s in d["rows"]), *(x[1] for x in d["lets"])])
        if len(_TREES_READ) > 64:
            _TREES_READ.clear()
        _TREES_READ[id(d)] = d
    return d


_TREES_READ: dict[int, dict[str, Any]] = {}


class _LetFacts(dict):
    """The engine's inputs plus the sites file's ``lets`` (named sub-expressions the rows share), each let evaluated
    the first time a row reads it; a let that cannot be evaluated (a missing input) stays missing."""

    def __init__(self, base: dict[str, Any], lets: dict[str, str], functions: dict[str, Any]):
        super().__init__(base)
        self.lets, self.functions, self.failed = lets, functions, set()

    def __contains__(self, name: object) -> bool:
        if dict.__contains__(self, name):
            return True
        if name in self.lets and name not in self.failed:
            try:
                self[name] = evaluate(self.lets[name], self, self.functions)
                return True
            except (MissingFact, ExprTypeError, ExprError, TypeError, ValueError, ZeroDivisionError):
                self.failed.add(name)
        return False


def row_functions(d: dict[str, Any]) -> dict[str, Any]:
    """The functions the rows of sites file ``d`` call: the engine's own (``check_functions``) for rows over its
    inputs (``inputs: <engine>``), else kg.frameworks.checkrows.FUNCTIONS."""
    if d.get("inputs"):
        from kg.engines import get
        return get(str(d["inputs"])).check_functions()
    from kg.frameworks.checkrows import FUNCTIONS
    return FUNCTIONS


def _input_rows(d: dict[str, Any], stack: Any) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(facts, functions) for a sites file whose rows read the engine's own inputs (``inputs: <engine>``): the
    engine's namespace for ``stack`` with the file's lets; (None, {}) without a stack or an inputs table."""
    from kg.engines import get
    if stack is None:
        return None, {}
    base = get(str(d["inputs"])).check_inputs(stack, d["release"])
    if base is None:
        return None, {}
    fns = row_functions(d)
    lets = {str(x[0]): str(x[1]) for x in d.get("lets") or []}
    return _LetFacts(base, lets, fns), fns


def generated_refusals(engine: str | None, version: str | None, ns: dict[str, Any],
                       folder: Path | None = None, stack: Any = None) -> dict[str, Any]:
    """Evaluate every generated check row (class ``table``) of the stack's release against ``ns``.

    A row's ``expr`` (kg.engine.expr; ``truthy`` / ``is_a`` as in kg.frameworks.checkrows, None as ``'__none__'``)
    is true when the engine refuses. An input the row reads (a name in its ``defaults``, or an input of the
    release's generated inputs table, kg.inputs.launch.engineinputs) takes the stack's value only when the stack
    gives it (a flag, a stack-file setting, a technique parameter: kg.inputs.effective.setting_given), else the
    engine's own default recorded with the row: optkg's table defaults (block size 16 ...) and derived numbers are
    not what the engine's check reads. A boolean option the stack does not set but whose technique it names
    (``set_by_technique``: ``enable_eplb`` <- expert-load-balancing-eplb; not an engine-default technique of a
    pasted command) is true. Model and GPU facts come from ``ns``. A row that still lacks a name (or reads
    ``__unknown__``, a value the generator could not model), or whose operands do not compare, is not evaluable
    and only counted. Returns ``{engine_check_release, engine_check_rows, engine_check_rows_evaluated,
    engine_check_refusal_count, engine_check_refusals (list of {id, path, line, message, expr}),
    engine_check_refusals_text}``. A release whose sites file says ``inputs: <engine>`` (SGLang) has rows over the
    engine's own inputs: one namespace for every row, the engine's ``check_inputs`` for the stack, with the file's
    ``lets`` and the engine's ``check_functions``."""
    sweep = current()
    got = _release_rows(engine, version, folder) if sweep is None else \
        sweep.extra.get(("release-rows", engine, version, folder))
    if got is None:  # a sweep reads the release's rows once (its data folders are read once: paths.frozen_stamps)
        got = sweep.extra[("release-rows", engine, version, folder)] = _release_rows(engine, version, folder)
    if not got:
        return {}
    d, inputs = got
    given = _given_names(stack, ns)
    defaulted_techs = set(((getattr(stack, "defaulted", None) or {}).get("techniques")) or []) if stack else set()
    techniques = set(ns.get("techniques") or ())
    rows = d["rows"]
    lets = {x[0]: x for x in d["lets"]} if sweep is None else None  # named long values, evaluated before a row
    reads, union = _row_reads(d)
    refusals, evaluated = [], 0
    own = _input_rows(d, stack) if d.get("inputs") else None
    base: dict[str, Any] | None = None  # the stack's facts every row starts from (built once, not per row)
    draft: dict[str, Any] | None = {}  # the draft's config.json keys (kg.analyses.draftkeys); None: not readable
    shared: Any = None  # the rows' let values (kg.analyses.enginerows._LetValues), made on the first row evaluated
    for i, s in enumerate(rows):
        # a row (or let) missing a name it always reads raises MissingFact whatever the other values: such a row
        # is not evaluable, so it is counted as such without being compiled and run
        if own is not None:  # rows over the engine's own inputs (one namespace for every row)
            if own[0] is None:
                continue
            facts, fns = own
            if not all(n in facts and facts[n] is not None for n in s["needs"]):
                continue
        else:
            if base is None:
                # the engine reads its own default, not optkg's table default or a derived number, for an
                # input the stack does not give; rows compare strings case-insensitively. Only the names some
                # row reads (directly or through its lets): a row's outcome depends on nothing else
                lower = _lower
                if sweep is None:
                    base = {k: (lower.get(v) or _lowered(v)) if v.__class__ is str else v for k in union
                            if (v := ns.get(k)) is not None and not (k in inputs and not given(k))}
                else:  # the same, over the names passing the 2nd test (kept per given set) that ns has (C speed)
                    names = _base_names(sweep, union, inputs, given)
                    base = {k: (lower.get(v) or _lowered(v)) if v.__class__ is str else v
                            for k in compress(names, map(ns.__contains__, names)) if (v := ns[k]) is not None}
                base.update(model_config_keys(stack, given, ns) if sweep is None else
                            sweep_config_keys(stack, given, ns, sweep, model_config_keys))
                draft = draft_keys(stack, given, ns, union)
                base.update(draft or {})
            if sweep:
                # every row's [outcome, refusal] as on an earlier stack whose values it reads were the same
                # (kg.analyses.enginerows); a refusal's entry is kept with it, its message read from the same values
                for j, entry in enumerate(sweep_outcomes(d, reads, union, base, given, techniques, defaulted_techs,
                                                         sweep)):
                    if entry[0]:
                        evaluated += 1
                        if entry[0] == 2:
                            if entry[1] is None:
                                entry[1] = _refusal(rows[j], reads[j], base, given, techniques, defaulted_techs, d)
                            refusals.append(dict(entry[1]))
                break
            if shared is None:  # one value per let and values of the names it reads, for every row of the stack
                shared, collide = _SharedLets(lets, d["let_names"]), not lets.keys().isdisjoint(base)
            # its lets evaluated only when its expression reaches them, as in a sweep (same outcome as row_outcome)
            done = _row_lazy(s, row_facts(s, reads[i], base, given, techniques, defaulted_techs), shared, [None], 0,
                             collide)
            if done:
                evaluated += 1
                if done == 2:
                    refusals.append(_refusal(s, reads[i], base, given, techniques, defaulted_techs, d))
            continue
        if not all(n in facts and facts[n] is not None for n in s["needs_lets"]):
            continue
        try:
            hit = evaluate(s["expr"], facts, fns)
        except (MissingFact, ExprTypeError, ExprError, TypeError, ValueError, ZeroDivisionError):
            continue
        evaluated += 1
        if hit is True:
            refusals.append({"id": s["id"], "path": s["path"], "line": s["line"],
                             "message": fill_message(s.get("message") or "", s.get("fills"), facts, fns),
                             "expr": s["expr"]})
    text = "; ".join(f"{r['message'] or r['expr']} ({r['path']}:{r['line']})" for r in refusals)
    if own is None and draft is None:
        draft_note(stack, ns, rows)
    return {"engine_check_release": d["release"], "engine_check_rows": len(rows),
            "engine_check_rows_evaluated": evaluated, "engine_check_refusal_count": len(refusals),
            "engine_check_refusals": refusals, "engine_check_refusals_text": text}


def _base_names(sweep: Any, union: frozenset[str], inputs: set[str], given: Any) -> tuple[str, ...]:
    """The names of ``union`` a row's base facts may take from the stack: not an input of the engine the stack does
    not give. Per sweep, rows and set of given names (``given`` is such a set's test): of the ~290 names the rows
    read, a stack gives few of the engine's inputs, so most are passed over without a look-up."""
    owner = getattr(given, "__self__", None)
    if owner.__class__ is not frozenset:
        return tuple(k for k in union if not (k in inputs and not given(k)))
    key = ("row-base-names", id(union), id(inputs), owner)
    hit = sweep.extra.get(key)
    if hit is None or hit[0] is not union or hit[1] is not inputs:
        hit = sweep.extra[key] = (union, inputs, tuple(k for k in union if not (k in inputs and not given(k))))
    return hit[2]


_lower: dict[str, str] = {}  # text -> text.lower(), one object per text (a sweep compares them by identity first)


def _lowered(v: str) -> str:
    if len(_lower) > 50_000:
        _lower.clear()
    out = _lower[v] = v.lower()
    return out


def _refusal(s: dict[str, Any], reads: tuple[str, ...], base: dict[str, Any], given: Any, techniques: set[str],
             defaulted_techs: set[str], d: dict[str, Any]) -> dict[str, Any]:
    """The ``engine_check_refusals`` entry of refusing row ``s`` (its message's fields filled from the facts)."""
    from kg.frameworks.checkrows import FUNCTIONS
    message = s.get("message") or ""
    if s.get("fills"):  # the message's fields read names and lets of their own
        facts = row_facts(s, reads, base, given, techniques, defaulted_techs)
        message = fill_message(message, s["fills"], _fill_facts(s["fills"], {**base, **facts}, d), FUNCTIONS)
    return {"id": s["id"], "path": s["path"], "line": s["line"], "message": message, "expr": s["expr"]}


def _release_rows(engine: str | None, version: str | None, folder: Path | None) -> tuple[dict[str, Any], set[str]] | ():
    """(the release's check rows ``check_rows``, the names of its generated inputs table), or () without rows."""
    path = _release_path(engine, version, folder)
    if path is None:
        return ()
    d = check_rows(path)  # the rows, the names each always reads and the lets it needs: cached by content
    from kg.inputs.launch.engineinputs import release_inputs
    return d, set(release_inputs(str(engine), d["release"])) if engine else set()


_READ_PLANS: dict[int, tuple[dict[str, Any], tuple[list[tuple[str, ...]], frozenset[str]]]] = {}


def _row_reads(d: dict[str, Any]) -> tuple[list[tuple[str, ...]], frozenset[str]]:
    """Per row of ``check_rows`` result ``d``: every name it reads (its expression's, its lets' names and theirs);
    the union of them. Once per ``d`` (kept per file content)."""
    hit = _READ_PLANS.get(id(d))
    if hit is not None and hit[0] is d:
        return hit[1]
    # each row's read set (its expression's names, its message fields' and its lets') is built with the cached
    # table (_names_read): walking every row and let here cost ~12 % of a one-shot check
    reads: list[tuple[str, ...]] = [tuple(s["reads"]) for s in d["rows"]]
    plan = (reads, frozenset(n for r in reads for n in r))
    if len(_READ_PLANS) > 64:
        _READ_PLANS.clear()
    _READ_PLANS[id(d)] = (d, plan)
    return plan


def _fill_facts(fills: dict[str, Any], facts: dict[str, Any], d: dict[str, Any]) -> dict[str, Any]:
    """``facts`` with the lets the message fields ``fills`` read evaluated (those that evaluate)."""
    from kg.analyses.enginerows import fill_lets
    from kg.frameworks.checkrows import FUNCTIONS
    out = dict(facts)
    for name, expr in fill_lets(fills, d):
        try:
            out[name] = evaluate(expr, out, FUNCTIONS)
        except (MissingFact, ExprTypeError, ExprError, TypeError, ValueError, ZeroDivisionError):
            pass
    return out


def fill_message(message: str, fills: dict[str, str] | None, facts: Any, fns: dict[str, Any]) -> str:
    """The engine's message with its f-string fields (``{self.tensor_parallel_size}``) as the values the row's stack
    gives them (``fills``: every field of the message -> an expression over the row's facts, or None where the
    generator could not tell; written by the generator); a field without a value reads ``<name>`` (its last name),
    never the raw ``{...}``. Literal braces of the message are left as they are."""
    import re
    from kg.frameworks.checkrows import NONE
    for key, expr in (fills or {}).items():
        if key not in message:
            continue
        v = None
        if expr is not None:
            try:
                v = evaluate(str(expr), facts, fns)
            except (MissingFact, ExprTypeError, ExprError, TypeError, ValueError, ZeroDivisionError):
                v = None
        if v is None:
            names = re.findall(r"[A-Za-z_]\w*", key)
            text = f"<{names[-1]}>" if names else "<?>"
        else:
            text = "None" if v == NONE else str(v)
        message = message.replace(key, text)
    return message


# sub-configs transformers' get_text_config may pick as the text model (any of them but text_config alone: unknown)
TEXT_SECTIONS = ("text_config", "llm_config", "language_config", "thinker_config", "decoder", "generator",
                 "text_encoder")


def model_config_keys(stack: Any, given: Any, ns: dict[str, Any]) -> dict[str, Any]:
    """The served model's config.json keys as the vLLM rows read them (tools/vllm_generated_checks.py model_obj):
    ``hf__<key>`` for the whole file, ``hf_text__<key>`` for its text model (the file itself, or its
    ``text_config`` when that is its only sub-model section); None as ``'__none__'``, strings as written. A key
    the file lacks is left out (the transformers config class may give it a default: rows reading it are not
    evaluated). Nothing when vLLM would not read this file as it is: ``--hf-overrides``, ``--hf-config-path``, or a
    ``--config-format`` other than auto / hf given."""
    raw = getattr(getattr(stack, "model", None), "raw_config", None)
    if not isinstance(raw, dict) or not raw or given("hf_overrides") or given("hf_config_path"):
        return {}
    if given("config_format") and str(ns.get("config_format", "auto")).lower() not in ("auto", "hf"):
        return {}
    from kg.analyses.configdefaults import class_default
    from kg.frameworks.checkrows import NONE

    def keys(prefix: str, d: dict[str, Any]) -> dict[str, Any]:
        return {f"{prefix}{k}": NONE if v is None else v for k, v in d.items() if isinstance(k, str) and k.isidentifier()}
    out = keys("hf__", raw)
    subs = [k for k in TEXT_SECTIONS if isinstance(raw.get(k), dict)]
    text = raw if not subs else raw["text_config"] if subs == ["text_config"] else None
    if text is not None:
        out.update(keys("hf_text__", text))
    remote = isinstance(raw.get("auto_map"), dict) and "AutoConfig" in raw["auto_map"]  # its own config class
    for prefix, d in (("hf__", raw), ("hf_text__", text)):  # a key the file leaves out: the class default
        got = None if remote or d is None else class_default("is_encoder_decoder", d.get("model_type"))
        if got is not None:
            out.setdefault(f"{prefix}is_encoder_decoder", got)
    if text is not None and not remote:  # PretrainedConfig's None, read at 0.34.0 config/vllm.py:771-772
        out.setdefault("hf_text__architectures", NONE)
    return out


def draft_keys(stack: Any, given: Any, ns: dict[str, Any], union: Any) -> dict[str, Any] | None:
    """kg.analyses.draftkeys.draft_config_keys for a stack (nothing without one)."""
    if stack is None:
        return {}
    return draft_config_keys(stack, given, ns, union)


def draft_note(stack: Any, ns: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """A note on ``stack``: the rows over the draft's config.json were not evaluable, it could not be read."""
    from kg.analyses.draftkeys import DRAFT_METHODS, PREFIX
    over = [r for r in rows if any(str(n).startswith(PREFIX) for n in r["reads"])]
    if not over or stack is None or str(ns.get("speculative_method") or "").lower() not in DRAFT_METHODS:
        return
    note = (f"not evaluable: needs the draft model's config.json ({ns.get('speculative_model')} is not a folder "
            f"with config.json, not in the Hugging Face cache and not bundled; OPTKG_HF_DOWNLOAD=1 fetches it): "
            f"{len(over)} of the engine's startup checks read it ({over[0]['path']}:{over[0]['line']} ...)")
    if note not in stack.notes:
        stack.notes.append(note)


def _given_names(stack: Any, ns: dict[str, Any]):
    """name -> whether the stack gives it itself (kg.inputs.effective.setting_given); without a stack every
    name in ``ns`` counts as given."""
    if stack is None:
        return lambda name: name in ns
    return setting_given_fn(stack)


def refused_option_facts(stack: Any) -> dict[str, Any]:
    """Facts of the options the stack's release refuses (``Stack.refused``, kg.inputs.launch.argv): their count (0
    for an engine stack that gives none), text (option, release, nearest spelling) and argparse's error."""
    refused = list(getattr(stack, "refused", None) or [])
    parts = []
    for r in refused:
        hint = f"; did you mean {r['suggestion']}?" if r.get("suggestion") else ""
        where = f" (it exists in {stack.engine} {r['exists_in']})" if r.get("exists_in") else ""
        assumed = " (the newest release optkg has scanned; pass --engine-version)" if r.get("assumed") else ""
        amb = r.get("ambiguous")  # argparse: "ambiguous option: --kv-cache-dt could match ..."
        if r.get("value_given") is not None:  # a boolean flag given a value (kg.inputs.launch.argv._boolean_value)
            parts.append(f"{r['option']} takes no value in {stack.engine} {r['release']}{assumed}, so {r['flag']} "
                         f"is refused{hint}")
            continue
        parts.append(f"{r['flag']} is ambiguous in {stack.engine} {r['release']}{assumed} (could match "
                     f"{', '.join(amb[:6])}{' ...' if len(amb) > 6 else ''}){hint}" if amb else
                     f"{r['flag']} is not an option of {stack.engine} {r['release']}{assumed}{where}{hint}")
    kinds = {"value" if r.get("value_given") is not None and "=" in r["flag"] else bool(r.get("ambiguous"))
             for r in refused}
    pairs = (("unrecognized arguments", False), ("ambiguous option", True), ("ignored explicit argument", "value"))
    errors = " / ".join(f'argparse "{e}"' for e, k in pairs if k in kinds)
    return {"refused_option_count": len(refused), "refused_options_text": "; ".join(parts), "refused_argparse_error": errors}


def engine_check_facts(stack: Any, ns: dict[str, Any]) -> dict[str, Any]:
    """Everything this module adds to the check namespace of ``stack``: the generated check rows of its release
    (``generated_refusals``), the options its release refuses (``refused_option_facts``) and the attention backends
    (``attention_backend_facts``, kg.analyses.xpu_attention)."""
    out = generated_refusals(stack.engine, stack.engine_version, ns, stack=stack)
    if stack.engine:
        out.update(refused_option_facts(stack))
    session = current()  # a sweep: the same values give the same backends (it reads nothing but ns)
    out.update(attention_backend_facts(ns) if session is None else session.call(attention_backend_facts, ns))
    out.update(xpu_attention_facts(ns))
    out.update(xpu_batch_invariance_facts(ns))
    return out


# ---------------------------------------------------------------------------------------------
# Attention backends: the release's declared support (catalog/support/vllm-attention-backends.yaml, generated by
# tools/engine_capabilities.py) against the stack, as the selector's validate_configuration does

NOT_CUDA = ("rocm", "aiter", "xpu", "cpu", "hpu", "tpu", "zentorch")
FP8_KV = ("fp8", "fp8_e4m3", "fp8_e5m2")


def _cc_ok(cond: Any, cc: float | None) -> bool | None:
    """A backend's compute-capability condition at ``cc``: True / False, None when unknown (no GPU, 'depends')."""
    if cond is None or cc is None:
        return None if cc is None and cond not in (None, "True") else True
    if isinstance(cond, bool):
        return cond
    text = str(cond)
    if text.startswith("depends"):
        return None
    try:
        return bool(evaluate(text, {"cc": round(float(cc), 1), "cc_major": int(cc)}))
    except (ExprError, ExprTypeError, MissingFact, ValueError):
        return None


def backend_refusals(row: dict[str, Any], ns: dict[str, Any]) -> list[str]:
    """The reasons vLLM's selector gives for ``row`` (one backend) on the stack in ``ns``, in its own words
    (v1/attention/backend.py validate_configuration); only declared literals are compared."""
    out = []
    mla, sparse = bool(ns.get("is_mla")), ns.get("index_head_dim") is not None
    head = (int(ns["kv_lora_rank"]) + int(ns.get("qk_rope_head_dim") or 0)) if mla and ns.get("kv_lora_rank") \
        else ns.get("head_dim")
    sizes = row.get("head_sizes")
    if isinstance(sizes, list) and sizes and head is not None and int(head) not in sizes:
        out.append("head_size not supported")
    dtype = str(ns.get("dtype") or "")
    if isinstance(row.get("dtypes"), list) and dtype in ("float16", "bfloat16", "float32") and dtype not in row["dtypes"]:
        out.append("dtype not supported")
    kv = str(ns.get("kv_cache_dtype") or "auto")
    if isinstance(row.get("kv_cache_dtypes"), list) and kv != "auto" and kv not in row["kv_cache_dtypes"]:
        out.append("kv_cache_dtype not supported")
    if isinstance(row.get("mla"), bool) and row["mla"] != mla:
        out.append("MLA not supported" if mla else "non-MLA not supported")
    if isinstance(row.get("sparse"), bool) and row["sparse"] != sparse and mla:
        out.append("sparse not supported" if sparse else "non-sparse not supported")
    if _cc_ok(row.get("compute_capability"), ns.get("gpu_compute_capability")) is False:
        out.append("compute capability not supported")
    return out


def attention_backend_facts(ns: dict[str, Any]) -> dict[str, Any]:
    """``attention_backend_refusal`` (the forced backend's reasons, text; '' when it is valid or none is forced),
    ``attention_backend_candidates`` (CUDA backends of the release with no refusal; None without a GPU) and
    ``attention_backend_candidates_text``; {} when the release has no generated table or the stack no model."""
    table = ns.get("attention_backends")
    if not isinstance(table, dict) or ns.get("num_attention_heads") is None:
        return {}
    out: dict[str, Any] = {"attention_backend_refusal": ""}
    forced = str(ns.get("attention_backend") or "").upper()
    if forced:
        row = table.get(forced)
        if row is None:
            out["attention_backend_refusal"] = ""
        else:
            why = backend_refusals(row, ns)
            if why:
                out["attention_backend_refusal"] = (f"{forced} ({row.get('source')}): {', '.join(why)}")
    if ns.get("gpu_compute_capability") is not None:
        cands = sorted(n for n, r in table.items()
                       if not any(x in str(r.get("source", "")) for x in NOT_CUDA) and not backend_refusals(r, ns))
        out["attention_backend_candidates"] = cands
        out["attention_backend_candidate_count"] = len(cands)
    return out
