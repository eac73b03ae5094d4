"""A user's stack: model, engine, hardware, techniques with parameters, and settings.

Built from a stack YAML file (``load_stack_file``) or from a pasted launch command
(``kg.inputs.launch``, one module per launch format, using the flag tables in ``catalog/engines/*.yaml``). Every
value optkg models is type-checked; a bad value is an OptkgError naming the flag or file:line
and what was expected. Flags optkg does not model are kept in ``ignored`` (users paste whole
commands). Stack file shape::

    name: Qwen3-235B on 8xH200        # optional
    model: Qwen/Qwen3-235B-A22B         # bundled hub id, or a folder/file with config.json
    config: path/to/config.json         # optional; overrides model
    engine: {name: vllm, version: "0.11.0"}   # or engine: vllm + engine_version: "0.11.0"
    framework: deepspeed                # training runtime (catalog/frameworks/*.yaml); or {name:, version:}
    framework_version: "0.14.4"         # optional
    hardware: {gpu: H200, count: 8}
    techniques:
      - tensor-parallelism: {tp_size: 8}
      - prefix-caching
    settings: {max_model_len: 32768, kv_cache_dtype: auto}
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Any

from kg.core import paths
from kg.knowledge.catalog import Catalog
from kg.knowledge.vocabulary import BASE_SETTINGS, PARALLEL_DEFAULTS
from kg.core.errors import OptkgError, get_close_matches
from kg.inputs.modelcfg import ModelFacts, load_config_file, resolve_model
from kg.inputs.settingcheck import (MAX_PARALLEL_SIZE, SETTING_MAXIMUM, SETTING_MINIMUM,  # noqa: F401 - re-exported
                                   checked_setting, coerce_value as _coerce)
from kg.core.yamlio import YamlDoc, load_yaml, parse_yaml
from kg.core.lazyre import lazy_re

# Sanity bound on every parallel size: far beyond any single serving deployment (the largest
# shipped model has 128 attention heads, so tp_size above that can never start); a larger value
# is a typo and is refused before any arithmetic runs on it.
@dataclass
class Stack:
    """A resolved stack. ``techniques`` maps technique id -> parameters; ``settings`` holds the rest."""

    name: str
    model: ModelFacts | None
    engine: str | None = None
    engine_version: str | None = None
    framework: str | None = None  # training framework id (catalog/frameworks/*.yaml)
    framework_version: str | None = None
    hardware: dict[str, Any] | None = None
    gpu_count: int | None = None
    techniques: dict[str, dict[str, Any]] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    source: str = ""
    # where each setting / technique came from: the flag as typed, or file:line (launch inputs)
    origins: dict[str, str] = field(default_factory=dict)
    engine_version_assumed: bool = False  # no release given: the latest known was assumed (kg.inputs.effective)
    # what a pasted command's flag table filled in without a flag: {"settings": {...}, "techniques": [...]}
    defaulted: dict[str, Any] = field(default_factory=dict)
    # options the engine release's CLI does not accept ({flag, release, suggestion, exists_in}): the engine refuses to
    # start ("unrecognized arguments"); kg.analyses.enginechecks turns them into facts for the rule engine-option-refused
    refused: list[dict[str, Any]] = field(default_factory=list)
    # a pasted command's own words: every option as the engine's parser reads it ({canonical option: raw value, True
    # for a value-less one, a list for nargs '+'}, the last occurrence winning) and the environment it sets; the
    # engine's generated check rows read the engine's inputs from them (kg.engines.<engine>.checkns)
    native: dict[str, Any] = field(default_factory=dict)
    native_env: dict[str, str] = field(default_factory=dict)

    def values(self) -> dict[str, Any]:
        """Flat namespace of every setting and parameter (parallel sizes default to 1)."""
        out: dict[str, Any] = dict(PARALLEL_DEFAULTS)
        out.update(self.settings)
        for params in self.techniques.values():
            out.update(params)
        return out


# ---------------------------------------------------------------------------------------------
# value checking

def _name_and_version(value: Any, field: str, example: str, at: Callable[..., str]) -> tuple[str, Any]:
    """``field: NAME`` or ``field: {name: NAME, version: V}`` of a stack file -> (NAME, V or None).
    Raises OptkgError at the field (``at(*path)`` gives file:line) for another shape or an unknown key."""
    if isinstance(value, str):
        value = {"name": value}
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise OptkgError(f"{at(field)}: {field} must be a name or {{name: {example}}}")
    extra = sorted(set(map(str, value)) - {"name", "version"})
    if extra:
        raise OptkgError(f"{at(field, extra[0])}: unknown {field} field '{extra[0]}' (fields: name, version)")
    return value["name"], value.get("version")


def _param_specs(catalog: Catalog, tid: str) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in catalog.techniques[tid].get("parameters") or []}


def add_technique(stack: Stack, catalog: Catalog, name: str, params: dict[str, Any] | None, where: str) -> None:
    """Add a technique (id or alias) with checked parameters. Raises OptkgError for unknown ids/params."""
    tid = catalog.resolve(name)
    if tid is None:
        near = get_close_matches(name, list(catalog.techniques) + list(catalog.aliases), n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise OptkgError(f"{where}: unknown technique '{name}'{hint}")
    t = catalog.techniques[tid]
    if name != tid:  # ids never die: an old id or alias resolves, with a note naming the current id
        stack.notes.append(f"{where}: {catalog.resolve_note(name)}")
    if t.get("status") == "deprecated" and t.get("replaced_by"):
        stack.notes.append(f"technique '{tid}' is deprecated; use '{t['replaced_by']}'")
    specs = _param_specs(catalog, tid)
    checked: dict[str, Any] = dict(stack.techniques.get(tid, {}))
    for k, v in (params or {}).items():
        if k not in specs:
            known = ", ".join(sorted(specs)) or "none"
            raise OptkgError(f"{where}: technique '{tid}' has no parameter '{k}' (parameters: {known})")
        spec = specs[k]
        hi = spec.get("maximum")
        if k in PARALLEL_DEFAULTS:
            hi = MAX_PARALLEL_SIZE if hi is None else min(hi, MAX_PARALLEL_SIZE)
        checked[k] = _coerce(v, spec["type"], f"{where}: {tid}.{k}", spec.get("minimum"), hi, spec.get("values"))
    stack.techniques[tid] = checked


def _setting_type(key: str) -> str | None:
    """The type of setting ``key`` (integer, number, ...) or None when it is not a known setting."""
    if key in PARALLEL_DEFAULTS:
        return "integer"
    if key in BASE_SETTINGS:
        return BASE_SETTINGS[key][0]
    from kg.inputs.runtimes import extra_settings
    return (extra_settings().get(key) or {}).get("type")


def _plain_number(value: Any, typ: str | None, where: str, key: str) -> None:
    """OptkgError when a stack file gives a number field as text (``tp_size: "8"``, ``!!str 8``, ``0x1f``):
    YAML says what a value is, and a file that made it a string did not write the number optkg would read
    (issue 26 #27). Launch commands, whose values are all text, are read by their own parsers."""
    if typ in ("integer", "number") and isinstance(value, str):
        what = "an integer" if typ == "integer" else "a number"
        raise OptkgError(f"{where}: {key}: expected {what}, found the text {value[:40]!r} (quoted, tagged !!str, or "
                         "octal/hex; write the number in decimal without quotes)")


def set_setting(stack: Stack, key: str, value: Any, where: str, catalog: Catalog | None = None) -> None:
    """Set one checked setting (type, minimum, maximum; ``kv_cache_dtype`` against the engine's values)."""
    if key in PARALLEL_DEFAULTS:
        stack.settings[key] = _coerce(value, "integer", f"{where}: {key}", 1, MAX_PARALLEL_SIZE)
        return
    if key not in BASE_SETTINGS:
        from kg.inputs.runtimes import extra_settings
        data = extra_settings().get(key)
        if data is not None:  # catalog/settings/*.yaml (training settings, ...)
            typ = data["type"]
            lo = data.get("minimum", 0) if typ in ("integer", "number") else None
            stack.settings[key] = _coerce(value, typ, f"{where}: {key}", lo, data.get("maximum"))
            return
        extra = []
        if catalog:
            extra = [p["name"] for t in catalog.techniques.values() for p in t.get("parameters") or []]
        if key in extra:
            stack.settings[key] = value
            return
        native = _native_setting(key)
        near = [native[0]] if native else \
            get_close_matches(key, list(dict.fromkeys([*BASE_SETTINGS, *PARALLEL_DEFAULTS, *extra])), n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        if native:
            hint += f" ({native[0]} is what {native[1]}'s {native[2]} sets)"
        raise OptkgError(f"{where}: unknown setting '{key}'{hint}")
    stack.settings[key] = checked_setting(key, value, where)
    if key == "kv_cache_dtype":
        _check_file_kv_dtype(stack, stack.settings[key], where)


def known_engines() -> dict[str, dict[str, Any]]:
    """Engine tables by name (``catalog/engines/*.yaml``), aliases included."""
    out: dict[str, dict[str, Any]] = {}
    for name, t in _engine_tables().items():
        out[name] = t
        for a in t.get("aliases") or []:
            out[str(a).lower()] = t
    return out


def resolve_engine(name: str, where: str) -> str:
    """The engine id for ``name`` (case-insensitive, aliases allowed); OptkgError listing the known engines."""
    tables = known_engines()
    key = str(name).strip().lower()
    if key in tables:
        return tables[key]["engine"]
    ids = sorted({t["engine"] for t in tables.values()})
    near = get_close_matches(key, list(tables), n=1)
    hint = f"; did you mean '{tables[near[0]]['engine']}'?" if near else ""
    raise OptkgError(f"{where}: unknown engine '{name}'{hint} (known: {', '.join(ids)}; "
                     f"add catalog/engines/<engine>.yaml to teach optkg another one)")


# a release as engines and frameworks number them: 1 to 4 numeric parts of at most 8 ASCII digits (0.11.0,
# 0.5.6, 2024.10.1), then PEP 440's pre/post/dev/local parts (0.9.1.post1, 0.6.0rc1, 2.7.0+cu126)
_RELEASE = lazy_re(r"v?[0-9]{1,8}(?:\.[0-9]{1,8}){0,3}(?:[-_.]?(?:a|b|rc|alpha|beta|c|pre|preview|post|rev|r|dev)"
                      r"[-_.]?[0-9]{0,8})*(?:\+[A-Za-z0-9.]{1,32})?", re.I)


def check_engine_version(version: Any, where: str, what: str = "an engine version number") -> str:
    """``version`` as text when it is a version number (PEP 440, e.g. 0.11.0 or 0.9.1.post1) of at most four
    numeric parts of at most eight ASCII digits each, else OptkgError ('' and 1.2.3.4.5.6 and a 5,000-digit
    number are no release, issue 26 #11, #26)."""
    from kg.core.relcmp import Release

    from kg.core.numparse import show
    from kg.core.yamlio import scalar_text
    if isinstance(version, bool) or version is None:
        raise OptkgError(f"{where}: expected {what} such as 0.11.0, found {version!r}")
    if isinstance(version, int) and version.bit_length() > 64:
        raise OptkgError(f"{where}: expected {what} such as 0.11.0, found {show(version)}")
    text = scalar_text(version).strip()  # `version: 0.10` is the YAML float 0.1; its text is "0.10"
    if not _RELEASE.fullmatch(text):
        shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"
        raise OptkgError(f"{where}: expected {what} such as 0.11.0 (at most 4 numeric parts), found {shown!r}")
    try:
        Release(text)
    except ValueError:
        raise OptkgError(f"{where}: expected {what} such as 0.11.0, found {text!r}") from None
    return text


def kv_cache_dtype_values(engine: str | None) -> list[str] | None:
    """The ``kv_cache_dtype`` values ``engine`` accepts (its table's ``kv_cache_dtypes``); every
    engine's values together when the engine is not known; None when no table lists any."""
    tables = _engine_tables()
    if engine and engine in tables:
        vals = tables[engine].get("kv_cache_dtypes")
        return [str(v) for v in vals] if vals else None
    union = sorted({str(v) for t in tables.values() for v in t.get("kv_cache_dtypes") or []})
    return union or None


def _check_file_kv_dtype(stack: Stack, value: Any, where: str) -> None:
    """Stack files: a value no engine knows is an error; one the stack's engine does not list is a note
    (a file may describe a what-if, e.g. the same pair on another engine)."""
    check_kv_cache_dtype(value, None, where)
    vals = kv_cache_dtype_values(stack.engine) if stack.engine in _engine_tables() else None
    if vals is not None and str(value).lower() not in vals:
        stack.notes.append(f"{where}: '{value}' is not a {stack.engine} kv_cache_dtype "
                           f"({stack.engine} accepts {', '.join(vals)}); the engine would refuse it")


def check_kv_cache_dtype(value: Any, engine: str | None, where: str) -> None:
    """OptkgError when ``value`` is not a kv_cache_dtype of ``engine`` (see ``kv_cache_dtype_values``)."""
    vals = kv_cache_dtype_values(engine)
    if vals is None or str(value).lower() in vals:
        return
    near = get_close_matches(str(value).lower(), vals, n=1)
    hint = f"; did you mean '{near[0]}'?" if near else ""
    who = f"{engine} " if engine in _engine_tables() else ""
    raise OptkgError(f"{where}: '{value}' is not a {who}kv_cache_dtype{hint} (valid: {', '.join(vals)})")


# vLLM's own spellings beside the catalog's speculative_method values: the model-specific MTP methods
# (MTPModelTypes, every name ends in _mtp), extract_hidden_states and '[ngram]' (vllm 0.34.0
# config/speculative.py:53-97, :1380); SGLang's --speculative-algorithm NEXTN / STANDALONE (any case)
_SPEC_METHODS_EXTRA = ("extract_hidden_states", "[ngram]", "nextn", "standalone")


def check_speculative_method(value: Any, where: str, catalog: Any) -> None:
    """OptkgError when ``value`` is no speculative method an engine knows: vLLM raises 'Unknown speculative
    method' at startup (0.34.0 config/speculative.py:1626-1633) unless a plugin registers it."""
    from kg.core.numparse import show
    if catalog is None or "speculative-decoding" not in catalog.techniques:
        return
    known = [str(v).lower() for v in _param_specs(catalog, "speculative-decoding").get("speculative_method", {})
             .get("values") or []]
    v = str(value).lower()
    if not known or v in known or v in _SPEC_METHODS_EXTRA or re.fullmatch(r"[a-z0-9_]+_mtp", v):
        return
    near = get_close_matches(v, known, n=1)
    hint = f"; did you mean '{near[0]}'?" if near else ""
    raise OptkgError(f"{where}: unknown speculative method {show(value)}{hint} (known: {', '.join(known)}, "
                     "or a model's *_mtp; vLLM refuses others at startup unless a plugin registers them)")


# ---------------------------------------------------------------------------------------------
# stack files

_TOP_KEYS = {"name", "model", "config", "engine", "engine_version", "framework", "framework_version", "hardware",
             "techniques", "settings", "description"}


def load_stack_file(path: Path | str, catalog: Catalog, resolver: Callable[[str], Any] = resolve_model,
) -> Stack:
    """Read a stack YAML file (shape in the module doc). Raises OptkgError with file:line.

    ``resolver`` turns the ``model:`` name into ModelFacts (default: bundled configs or a local
    config.json); a caller that can work without the model's shape may pass a lenient one.
    A ``hardware.gpu`` the catalog does not know is an error naming the closest GPUs, unless the file
    describes it (``memory_gib``, optionally ``compute_capability``: kg.knowledge.gpus).
    """
    doc = load_yaml(path, cache=True)  # through the content-keyed cache (kg.core.yamlio._fast_doc)
    return stack_from_doc(doc, catalog, base_dir=Path(path).parent, resolver=resolver)


def stack_from_mapping(data: dict[str, Any], catalog: Catalog, name: str = "<stack>") -> Stack:
    """Build a stack from an in-memory mapping (same shape as a stack file)."""
    return stack_from_doc(YamlDoc(name, data, {}), catalog, base_dir=Path("."))


def stack_from_doc(doc: YamlDoc, catalog: Catalog, base_dir: Path,
                   resolver: Callable[[str], Any] = resolve_model) -> Stack:
    d = doc.data

    def at(*p: Any) -> str:
        line, _ = doc.where(p)
        return f"{doc.path}:{line}"

    # a YAML file says what each value is: a count written as text is refused there (issue 26 #27); an
    # in-memory mapping (the Python API, values read from commands) may carry numbers as text
    plain_number = _plain_number if doc.has_lines() else (lambda *a: None)

    if not isinstance(d, dict):
        raise OptkgError(f"{doc.path}:1: a stack file must be a mapping with model, techniques, ...")
    for key_path, line, _col, first in doc.duplicate_keys or []:
        raise OptkgError(f"{doc.path}:{line}: '{'.'.join(map(str, key_path))}' is given twice (first on line {first}); "
                         "YAML would silently keep only the last one: remove one")
    if not set(d) & _TOP_KEYS and (isinstance(d.get("architectures"), list) or "model_type" in d):
        # a model's config.json handed to check as the stack: say what it is and where it goes (newuser9)
        raise OptkgError(f"{doc.path}: a model config.json, not a stack file: give it as --config beside a launch "
                         f"(optkg check --vllm \"vllm serve\" --config {doc.path}) or to optkg kv --config")
    for k in d:
        if k not in _TOP_KEYS:
            near = get_close_matches(str(k), sorted(_TOP_KEYS), n=1)
            raise OptkgError(f"{at(k)}: unknown field '{k}'" + (f"; did you mean '{near[0]}'?" if near else "") +
                             f" (fields: {', '.join(sorted(_TOP_KEYS))})")
    model = None
    if d.get("config") is not None:
        cfg = d["config"]
        if not isinstance(cfg, str):
            raise OptkgError(f"{at('config')}: config must be a path to config.json")
        p = Path(cfg) if Path(cfg).is_absolute() else base_dir / cfg
        model = load_config_file(p)
    elif d.get("model") is not None:
        if not isinstance(d["model"], str):
            raise OptkgError(f"{at('model')}: model must be a hub id or a path")
        m = d["model"]
        local = base_dir / m
        model = resolver(str(local) if (local.is_dir() or local.suffix == ".json") and local.exists() else m)
    name = d.get("name")
    if isinstance(name, (list, dict)):  # a scalar (text, number, date) is shown as text
        raise OptkgError(f"{at('name')}: name must be text, found {type(name).__name__}")
    st = Stack(name=str(name or Path(doc.path).stem), model=model, source=doc.path)
    eng = d.get("engine")
    if eng is not None:
        name, version = _name_and_version(eng, "engine", "vllm, version: '0.11.0'", at)
        st.engine = resolve_engine(name, f"{at('engine', 'name')}: engine")
        if version is not None:
            st.engine_version = check_engine_version(version, f"{at('engine', 'version')}: engine version")
    if d.get("engine_version") is not None:
        if st.engine is None:
            raise OptkgError(f"{at('engine_version')}: engine_version needs engine: (e.g. engine: vllm)")
        if st.engine_version is not None:
            raise OptkgError(f"{at('engine_version')}: the engine version is given twice (engine.version and engine_version)")
        st.engine_version = check_engine_version(d["engine_version"], f"{at('engine_version')}: engine_version")
    fw = d.get("framework")
    if fw is not None:
        from kg.inputs.runtimes import resolve_framework
        name, version = _name_and_version(fw, "framework", "deepspeed, version: '0.14.4'", at)
        st.framework = resolve_framework(name, f"{at('framework', 'name')}: framework")
        if version is not None:
            st.framework_version = check_engine_version(version, f"{at('framework', 'version')}: framework version",
                                                       "a version number")
    if d.get("framework_version") is not None:
        if st.framework is None:
            raise OptkgError(f"{at('framework_version')}: framework_version needs framework: (e.g. framework: deepspeed)")
        if st.framework_version is not None:
            raise OptkgError(f"{at('framework_version')}: the framework version is given twice")
        st.framework_version = check_engine_version(d["framework_version"], f"{at('framework_version')}: framework_version",
                                                   "a version number")
    hw = d.get("hardware")
    if hw is not None:
        if isinstance(hw, str):
            hw = {"gpu": hw}
        if not isinstance(hw, dict) or not isinstance(hw.get("gpu"), str):
            raise OptkgError(f"{at('hardware')}: hardware must be {{gpu: H100-SXM, count: 8}}")
        for k in ("memory_gib", "compute_capability"):
            if hw.get(k) is not None:
                plain_number(hw[k], "number", at("hardware", k), k)
        try:  # an unknown GPU is an error (kg.knowledge.gpus), unless the file describes it by its memory
            st.hardware = catalog.resolve_hardware(hw["gpu"], hw.get("memory_gib"), hw.get("compute_capability"),
                                                   "memory_gib: N (and compute_capability: X.Y) in hardware:")
        except OptkgError as e:
            raise OptkgError(f"{at('hardware', 'gpu')}: {e}") from None
        if hw.get("count") is not None:
            plain_number(hw["count"], "integer", at("hardware", "count"), "count")
            st.gpu_count = _coerce(hw["count"], "integer", f"{at('hardware', 'count')}: count", 1, 1_048_576)
    techs = d.get("techniques") or []
    if isinstance(techs, dict):
        techs = [{k: v} for k, v in techs.items()]
    if not isinstance(techs, list):
        raise OptkgError(f"{at('techniques')}: techniques must be a list of ids or {{id: {{param: value}}}}")
    listed: dict[str, str] = {}
    for i, item in enumerate(techs):
        where = at("techniques", i)
        if isinstance(item, str):
            name, params = item, None
        elif isinstance(item, dict) and len(item) == 1:
            (name, params), = item.items()
            name = str(name)
            if params is not None and not isinstance(params, dict):
                raise OptkgError(f"{where}: parameters of '{name}' must be a mapping, found {params!r}")
        else:
            raise OptkgError(f"{where}: each technique is an id or a one-key mapping {{id: {{param: value}}}}")
        tid = catalog.resolve(name)
        if tid is not None and tid in listed:
            raise OptkgError(f"{where}: technique '{tid}' is listed twice (first at {listed[tid]}); "
                             "keep one entry with all its parameters")
        if params and catalog.resolve(name) is not None:
            specs = _param_specs(catalog, catalog.resolve(name))
            for k, v in params.items():
                plain_number(v, (specs.get(k) or {}).get("type"), where, f"{catalog.resolve(name)}.{k}")
        add_technique(st, catalog, name, params, where)
        listed[catalog.resolve(name) or name] = where
    settings = d.get("settings") or {}
    if not isinstance(settings, dict):
        raise OptkgError(f"{at('settings')}: settings must be a mapping")
    for k, v in settings.items():
        plain_number(v, _setting_type(str(k)), at("settings", k), str(k))
        set_setting(st, str(k), v, at("settings", k), catalog)
    for tid, params in st.techniques.items():
        if params.get("kv_cache_dtype") is not None:
            _check_file_kv_dtype(st, params["kv_cache_dtype"], f"{listed.get(tid, at('techniques'))}: {tid}.kv_cache_dtype")
    return st


# ---------------------------------------------------------------------------------------------
# engine commands

_TABLES: dict[tuple, dict[str, dict[str, Any]]] = {}


def engine_table_problems(t: Any) -> list[str]:
    """What makes ``t`` (a parsed ``catalog/engines/<engine>.yaml``) unusable: one message per problem, [] when fine."""
    if not isinstance(t, dict):
        return [f"an engine table must be a mapping (engine:, programs:, flags:, ...), found {type(t).__name__}"]
    out = []
    if not isinstance(t.get("engine"), str) or not t["engine"].strip():
        out.append("engine table has no 'engine:' name (e.g. engine: vllm)")
    for key in ("programs", "flags"):
        if key in t and not isinstance(t[key], list):
            out.append(f"'{key}' must be a list, found {type(t[key]).__name__}")
        elif not t.get(key):
            out.append(f"engine table has no '{key}': optkg could not read any {t.get('engine')} command")
    return out


def _native_setting(key: str) -> tuple[str, str, str] | None:
    """(the optkg setting, the engine, its flag) when ``key`` is an engine's own name for a setting, written as a
    stack-file key: ``mem_fraction_static`` is SGLang's --mem-fraction-static, which sets gpu_memory_utilization."""
    flag = "--" + key.replace("_", "-")
    for engine, table in sorted(_engine_tables().items()):
        for spec in table.get("flags") or []:
            if flag in (spec.get("names") or []) and spec.get("set") and spec["set"] != key:
                return str(spec["set"]), engine, flag
    return None


def _engine_tables() -> dict[str, dict[str, Any]]:
    """``catalog/engines/*.yaml`` by engine id (read once per set of file versions; inside
    kg.core.paths.frozen_stamps, a sweep, looked up once)."""
    return paths.in_frozen(("engine-tables",), _read_engine_tables)


def _read_engine_tables() -> dict[str, dict[str, Any]]:
    files, key = paths.yaml_files_stamp(paths.catalog_path("engines"))
    if key not in _TABLES:
        from kg.core import cache

        def build() -> dict[str, dict[str, Any]]:
            out = {}
            for f in files:
                t = load_yaml(f).data
                bad = engine_table_problems(t)
                if bad:
                    raise OptkgError(f"{f}: {bad[0]}")
                out[t["engine"]] = t
            return out
        out = cache.built_from("engine-tables", files, build)  # parsing them is most of a warm `check`
        _TABLES.clear()
        _TABLES[key] = out
    return _TABLES[key]
