"""Classify the check sites tools/engine_check_sites.py lists (see that module's doc for the four classes).

Tables, not if-chains:

- ``UNKNOWABLE``: (kind, pattern over the site's function / condition / message / exception, why) — a site that
  needs what exists only once the engine runs; the first match wins.
- ``NAME_BASES``: the names a config object goes by in a check (``self``, ``cfg``, ``args``, ...);
  ``SUBCONFIGS``: vLLM's sub-config attributes (``self.parallel_config.X``).
- the field map: a config field ``f`` whose flag ``--f`` (or alias) the engine's flag table
  (catalog/engines/<engine>.yaml) maps to an optkg setting; JSON flags map their fields (``fields:``); model
  config fields (``hf_config.X``) map to the model facts of the same name (kg.inputs.modelcfg.ModelFacts).
- the hand classification catalog/engines/checks/classify/<engine>.yaml: ``sites: {id: {class, by|kind|why}}``
  and ``patterns: [{path, function, condition, message, class, kind, why, releases}]`` (regular expressions;
  ``releases``, a list, limits a pattern to those releases).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]

CLASSES = ("rule", "table", "unknowable", "uncovered")
GENERIC_RULE = "engine-startup-check-refuses"  # rules/engine_check_table.yaml: evaluates the table rows
UNKNOWABLE_KINDS = {
    "tensor": "reads tensor values or shapes the engine computes at run time",
    "network": "needs the network (a hub download, a remote endpoint, a port)",
    "filesystem": "reads files or folders present only on the serving machine",
    "server": "needs a running engine or distributed group (ranks, Ray, a process group)",
    "packages": "depends on which Python packages / kernels are installed",
    "internal": "an invariant of the engine's own code (abstract method, unreachable branch, internal state)",
    "request": "checks a request or per-call argument, not the startup configuration",
    "devices": "reads the GPUs the serving machine's driver reports or the worker's visible devices",
}
# (kind, field it searches: function|condition|message|exc|all, regex)
UNKNOWABLE: list[tuple[str, str, str]] = [
    ("internal", "exc", r"^NotImplementedError$"),
    ("packages", "exc", r"^(ImportError|ModuleNotFoundError)$"),
    ("packages", "all", r"\bimportlib\b|find_spec|is_installed|has_\w+_kernel|_available\(\)|import_module|"
                        r"version\(|__version__|is_torch_equal|is_torch_less|torch_version|cuda_version"),
    ("network", "all", r"requests\.|urlopen|hf_hub|huggingface_hub|HfApi|get_hf_file|socket|\bport\b|"
                       r"\bhost\b|http|\burl\b|_addr|zmq|api_key|endpoint"),
    ("filesystem", "all", r"os\.path|\.exists\(|\bopen\(|isfile|isdir|listdir|file_or_path_exists|"
                          r"Path\(|\.json\b|glob|_dir\b|directory|file not found|No such file"),
    ("server", "all", r"\bray\b|torch\.distributed|\bdist\.|get_world_group|process_group|is_initialized|"
                      r"\brank\b|world_size\(\)|mp\.|multiprocessing|get_tp_group|subprocess"),
    ("tensor", "all", r"\.shape\b|\.numel\(|\.data_ptr|\btensor\b|torch\.cuda\.mem_get_info|torch\.empty|"
                      r"\.device\b|\bweights?\[|state_dict|torch\.Tensor"),
    ("internal", "condition", r"^$"),  # an unconditional raise/assert left after the guards: the caller decides
    ("internal", "all", r"\bunreachable\b|should not happen|should never|This should not|Unknown \w+ type|"
                        r"by this point|must have been|should have been|not initiali[sz]ed"),
]
NAME_BASES = {"self", "cfg", "args", "server_args", "engine_args", "config", "vllm_config", "llm_args", "c",
              "backend_config", "engine_config"}
SUBCONFIGS = {"parallel_config", "model_config", "cache_config", "scheduler_config", "speculative_config",
              "lora_config", "compilation_config", "kv_transfer_config", "device_config", "load_config",
              "attention_config", "kernel_config", "observability_config", "structured_outputs_config",
              "quant_config", "multimodal_config", "profiler_config", "ec_transfer_config", "eplb_config"}
# optional sub-configs: a check inside one runs only when the user gave it; the expression that says so
PRESENCE = {"speculative_config": "('speculative-decoding' in techniques)", "lora_config": "(enable_lora == True)",
            # LMDeploy builds one engine config: TurboMind unless --backend pytorch, and the PyTorch engine when
            # TurboMind does not support the architecture (lmdeploy 0.18.0 cli/serve.py:233-240 api_server,
            # archs.py:31-42 autoget_backend; catalog/support/lmdeploy-turbomind-archs.yaml)
            "turbomind_engine_config": "((lmdeploy_backend != 'pytorch') and turbomind_supports_arch)",
            "pytorch_engine_config": "((lmdeploy_backend == 'pytorch') or not (turbomind_supports_arch))"}
# facts a PRESENCE expression reads besides the flag table's: a stack carries them (kg.knowledge.support), and the
# engine's default of the flag ones (--backend default turbomind, lmdeploy 0.18.0 cli/utils.py:397)
PRESENCE_FACTS = {"turbomind_supports_arch"}
# per engine, where its own option says a sub-config (by attribute or class name) is given: LMDeploy builds
# SpeculativeConfig only when --speculative-algorithm is given (0.18.0 cli/utils.py:95 get_speculative_config)
ENGINE_PRESENCE = {"lmdeploy": {"speculative_config": "(lmdeploy_speculative_algorithm != '__none__')",
                               # built from --kv-transfer-config by the PyTorch engine config only (messages.py:642-643)
                               "KVTransferConfig": PRESENCE["pytorch_engine_config"]}}
NONE_TEXT = "__none__"  # None in a row (kg.frameworks.checkrows.NONE)
PRESENCE_DEFAULTS = {"lmdeploy_backend": "turbomind", "lmdeploy_speculative_algorithm": "__none__"}
OPTIONAL = {"speculative_config", "lora_config", "kv_transfer_config", "ec_transfer_config", "pooler_config",
            "multimodal_config", "kv_events_config", "profiler_config", "weight_transfer_config", "offload_config",
            "engram_config", "watermark_config", "reasoning_config", "speech_to_text_config", "diffusion_config",
            "turbomind_engine_config", "pytorch_engine_config"}
# functions that run at start for every configuration (validators, post-inits); a check elsewhere runs when some
# code path calls it, which a generated row cannot tell
STARTUP_FUNCTION = re.compile(r"(^|\.)(__post_init__|__init__|model_post_init|_?post_init\w*|_?verify\w*|_?validate\w*|"
                              r"_?check\w*|create_engine_config|from_cli_args|_?handle\w*|_?set_\w*default\w*|"
                              r"_?resolve\w*|_?adjust\w*)$")
MODEL_BASES = {"hf_config", "hf_text_config", "text_config", "model_config.hf_config", "model_config.hf_text_config"}
TYPES_OK = (int, float, bool, str, type(None))
NO_DEFAULT = object()  # a fact read without an engine default (a model fact, or a field without a literal default)


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text()) if path.exists() else None


FLAG_TECHNIQUES: dict[str, str] = {}  # boolean fact -> the technique its flag adds (filled by field_map)
VALUE_MAPS: dict[str, dict[str, str]] = {}  # fact -> {engine value: optkg value} of its flag (filled by field_map)


def field_map(engine: str) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """({config field: optkg fact}, {json sub-config attribute: {field: fact}}) from the engine's flag table; a
    boolean flag that adds a technique is also recorded in FLAG_TECHNIQUES (a stack may name the technique only)."""
    table = _load(ROOT / "catalog" / "engines" / f"{engine}.yaml") or {}
    flat: dict[str, str] = {}
    sub: dict[str, dict[str, str]] = {}
    for spec in table.get("flags") or []:
        if not isinstance(spec, dict) or not spec.get("set"):
            continue
        for n in spec.get("names") or []:
            if str(n).startswith("--"):
                flat.setdefault(str(n)[2:].replace("-", "_"), str(spec["set"]))
        if spec.get("type") == "flag" and spec.get("technique"):
            FLAG_TECHNIQUES.setdefault(str(spec["set"]), str(spec["technique"]))
        if isinstance(spec.get("value_map"), dict):
            VALUE_MAPS.setdefault(str(spec["set"]), {str(k).lower(): str(v) for k, v in spec["value_map"].items()})
        if spec.get("type") == "json" and isinstance(spec.get("fields"), dict):
            sub[str(spec["set"])] = {str(k): str(v) for k, v in spec["fields"].items()}
    return flat, sub


def model_fact_names() -> set[str]:
    from dataclasses import fields

    from kg.inputs.modelcfg import ModelFacts
    return {f.name for f in fields(ModelFacts)} - {"name", "warnings", "source", "quantization_config"}


def _classes(sources: dict[str, list[str]]):
    """Every class definition of the scanned files (a file that does not parse is passed over)."""
    for text in sources.values():
        try:
            tree = ast.parse("\n".join(text))
        except SyntaxError:
            continue
        yield from (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))


def class_defaults(sources: dict[str, list[str]]) -> dict[str, Any]:
    """{field: literal default} of every annotated class attribute in the scanned files (dataclass / pydantic
    fields ``f: T = <literal>`` or ``Field(default=<literal>)``); a field with two different defaults is left out."""
    out: dict[str, Any] = {}
    clash: set[str] = set()
    for cls in _classes(sources):
        for st in cls.body:
            ok, val = literal_default(st)
            if not ok:
                continue
            name = st.target.id
            if name in out and out[name] != val:
                clash.add(name)
            out.setdefault(name, val)
    return {k: v for k, v in out.items() if k not in clash}


def literal_default(st: ast.AST) -> tuple[bool, Any]:
    """(True, value) for a class attribute ``f: T = <literal>`` or ``f: T = Field(default=<literal>)`` (a number,
    string, bool or None); (False, None) otherwise."""
    if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None):
        return False, None
    v = st.value
    if isinstance(v, ast.Call) and _callname(v) in ("Field", "field"):
        kw = {k.arg: k.value for k in v.keywords}
        v = kw.get("default") or (v.args[0] if v.args else None)
    try:
        val = ast.literal_eval(v) if v is not None else None
    except (ValueError, SyntaxError, TypeError):
        return False, None
    return (v is not None and isinstance(val, TYPES_OK)), val


def class_fields(sources: dict[str, list[str]]) -> set[str]:
    """Names of every annotated class attribute in the scanned files (the config fields)."""
    out: set[str] = set()
    for cls in _classes(sources):
        out |= {st.target.id for st in cls.body if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)}
    return out


def _callname(c: ast.Call) -> str:
    f = c.func
    return f.id if isinstance(f, ast.Name) else (f.attr if isinstance(f, ast.Attribute) else "")


def _chain(n: ast.AST) -> list[str] | None:
    out = []
    while isinstance(n, ast.Attribute):
        out.append(n.attr)
        n = n.value
    if isinstance(n, ast.Name):
        out.append(n.id)
        return out[::-1]
    return None


class Untranslatable(Exception):
    pass


class Translator:
    """A site's condition in optkg's expression language (kg.engine.expr), or Untranslatable naming why."""

    def __init__(self, flat: dict[str, str], sub: dict[str, dict[str, str]], model: set[str], defaults: dict[str, Any],
                 function: str, engine: str = ""):
        self.flat, self.sub, self.model, self.defaults = flat, sub, model, defaults
        self.cls = function.split(".")[0]
        self.presence: set[str] = set()
        self.engine = engine
        self.cli_facts: set[str] = set()  # facts read through CLI_FIELDS (their None default is '__none__')
        if self.cls in ENGINE_PRESENCE.get(engine, {}):
            self.presence.add(ENGINE_PRESENCE[engine][self.cls])
        elif _snake(self.cls) in OPTIONAL:
            self.presence.add(self.present(_snake(self.cls)))
        self.reads: dict[str, Any] = {}  # fact -> engine default (None when the engine has none / it is a model fact)
        self.unmapped: list[str] = []

    def name(self, n: ast.AST) -> str:
        ch = _chain(n)
        if ch and ch[0] in SUBCONFIGS:
            ch = ["self"] + ch  # a sub-config passed as an argument (verify_with_parallel_config(parallel_config))
        if not ch or len(ch) < 2 or ch[0] not in NAME_BASES:
            raise Untranslatable(_short(n))
        rest = ch[1:]
        path = ".".join(rest[:-1])
        fld = rest[-1]
        owner_cls = "args" if ch[0] == "args" else self.cls
        if path == "" and fld in CLI_FIELDS.get(owner_cls, {}):
            fact, dflt = CLI_FIELDS[owner_cls][fld]
            self.cli_facts.add(fact)
            if fact in VALUE_MAPS and dflt is not NO_DEFAULT:  # the engine's value as optkg names it
                dflt = VALUE_MAPS[fact].get(str(dflt).lower(), NO_DEFAULT)
            self.reads[fact] = dflt
            return fact
        if path in MODEL_BASES or (path == "" and self.cls in ("ModelConfig",) and fld in self.model
                                   and fld not in self.flat):
            if fld in self.model:
                self.reads[fld] = NO_DEFAULT
                return fld
        elif path == "" or path in SUBCONFIGS:
            owner = _snake(self.cls) if path == "" else path
            if owner in OPTIONAL:
                self.presence.add(self.present(owner))
            sub_json = self.sub.get(owner)
            if sub_json is not None and fld not in sub_json:
                self.unmapped.append(".".join(rest))
                raise Untranslatable(".".join(rest))
            if sub_json and fld in sub_json:
                self.reads[sub_json[fld]] = self.defaults.get(fld, NO_DEFAULT)
                return sub_json[fld]
            if fld in self.flat and (path == "" or path not in self.sub):
                fact = self.flat[fld]
                dflt = self.defaults.get(fld, NO_DEFAULT)
                if fact in VALUE_MAPS and dflt is not NO_DEFAULT:  # the engine's value as optkg names it
                    dflt = VALUE_MAPS[fact].get(str(dflt).lower(), NO_DEFAULT)
                self.reads[fact] = dflt
                return fact
        self.unmapped.append(".".join(rest))
        raise Untranslatable(".".join(rest))

    def present(self, owner: str) -> str:
        """The expression that is true when optional sub-config ``owner`` is given (ENGINE_PRESENCE, PRESENCE)."""
        got = ENGINE_PRESENCE.get(self.engine, {}).get(owner) or PRESENCE.get(owner)
        if got is None:
            raise Untranslatable(f"{owner} is optional and optkg cannot tell when it is given")
        return got

    def __call__(self, n: ast.AST) -> str:
        t = self.tr(n)
        return t

    def tr(self, n: ast.AST) -> str:  # noqa: C901 - one branch per node kind
        if isinstance(n, ast.BoolOp):
            op = " and " if isinstance(n.op, ast.And) else " or "
            return "(" + op.join(self.tr(v) for v in n.values) + ")"
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            return f"not ({self.tr(n.operand)})"
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return f"-{self.tr(n.operand)}"
        if isinstance(n, ast.Compare):
            parts = [self.tr(n.left)]
            mapped = VALUE_MAPS.get(parts[0])  # a fact whose flag maps the engine's values onto optkg's names
            for op, right in zip(n.ops, n.comparators):
                if parts[0] in self.cli_facts and isinstance(right, ast.Constant) and right.value is None \
                        and isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)):
                    # an option's value as the command gives it, None when not given ('__none__' in rows)
                    parts += ["==" if isinstance(op, (ast.Is, ast.Eq)) else "!=", repr(NONE_TEXT)]
                    continue
                if mapped is not None:
                    if not isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                        raise Untranslatable(f"orders {parts[0]}, whose values optkg names ({_short(n)})")
                    parts += [{ast.Eq: "==", ast.NotEq: "!=", ast.In: "in", ast.NotIn: "not in"}[type(op)],
                              self.mapped(right, mapped)]
                    continue
                sym = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
                       ast.In: "in", ast.NotIn: "not in"}.get(type(op))
                if isinstance(op, (ast.Is, ast.IsNot)):
                    raise Untranslatable("an identity test (is / is not) on a value the engine fills in itself")
                if isinstance(right, ast.Constant) and right.value is None:
                    raise Untranslatable("compares with None (the engine fills the value in itself)")
                if sym is None:
                    raise Untranslatable(type(op).__name__)
                parts += [sym, self.tr(right)]
            return "(" + " ".join(parts) + ")"
        if isinstance(n, ast.BinOp):
            sym = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%"}.get(type(n.op))
            if sym is None:
                raise Untranslatable(type(n.op).__name__)
            return f"({self.tr(n.left)} {sym} {self.tr(n.right)})"
        if isinstance(n, ast.Constant) and isinstance(n.value, TYPES_OK):
            return repr(n.value)
        if isinstance(n, (ast.Tuple, ast.List, ast.Set)):
            return "(" + ", ".join(self.tr(e) for e in n.elts) + ("," if len(n.elts) == 1 else "") + ")"
        if isinstance(n, ast.Attribute):
            return self.name(n)
        raise Untranslatable(_short(n))

    def mapped(self, n: ast.AST, vmap: dict[str, str]) -> str:
        """A constant, an enum member (``QuantPolicy.FP8``: ENUMS) or a tuple of them compared with a fact whose flag
        maps the engine's values onto optkg's names (VALUE_MAPS), as optkg names it."""
        if isinstance(n, (ast.Tuple, ast.List, ast.Set)):
            return "(" + ", ".join(self.mapped(e, vmap) for e in n.elts) + ("," if len(n.elts) == 1 else "") + ")"
        ch = _chain(n)
        if ch and ".".join(ch) in ENUMS:
            value: Any = ENUMS[".".join(ch)]
        elif isinstance(n, ast.Constant) and isinstance(n.value, (int, str)):
            value = n.value
        else:
            raise Untranslatable(_short(n))
        if str(value).lower() not in vmap:
            raise Untranslatable(f"{_short(n)} has no optkg name")
        return repr(vmap[str(value).lower()])


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _short(n: ast.AST) -> str:
    try:
        return ast.unparse(n)[:60]
    except Exception:  # noqa: BLE001
        return type(n).__name__


MUTATED: set[str] = set()  # config fields engine code assigns somewhere in the scanned files (mutated_fields)
ENUMS: dict[str, Any] = {}  # "Enum.MEMBER" -> literal value of every enum class of the scanned files (enum_members)
# {config class (or "args" for the parsed options): {field: (fact, default)}}: the fields the engine's command line
# sets, read by its generator (GENERATORS' ``class_fields``); None defaults are '__none__', so ``is None`` translates
CLI_FIELDS: dict[str, dict[str, tuple[str, Any]]] = {}


def enum_members(sources: dict[str, list[str]]) -> dict[str, Any]:
    """{"Class.MEMBER": value} of every class of the scanned files that derives from an ``enum`` base
    (``class QuantPolicy(enum.IntEnum): FP8 = 16``), for members with a literal value."""
    out: dict[str, Any] = {}
    for cls in _classes(sources):
        if not any("Enum" in _short(b) for b in cls.bases):
            continue
        for st in cls.body:
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                ok, val = _literal(st.value)
                if ok:
                    out[f"{cls.name}.{st.targets[0].id}"] = val
    return out


def _literal(n: ast.AST) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(n)
    except (ValueError, SyntaxError, TypeError):
        return False, None


def mutated_fields(sources: dict[str, list[str]]) -> set[str]:
    """Fields the engine's own code assigns (``x.f = ...``, ``x.f += ...``, ``setattr(x, "f", ...)``) anywhere in the
    scanned files: a check reading one may see the engine's value, not the user's, so it is not translated."""
    out: set[str] = set()
    # x.f = / x.f += ; setattr(x, "f", ...); SGLang's resolution pipeline: {"f": value} returned or declared["f"] = ...,
    # and declare_resolution(..., f=value)
    rx = re.compile(r"\.(\w+)\s*(?:=[^=]|\+=|-=|\*=)|setattr\(\s*\w+\s*,\s*[\"'](\w+)[\"']"
                    r"|[\"'](\w+)[\"']\s*:\s*[^\s,}]|\[[\"'](\w+)[\"']\]\s*=[^=]")
    kw = re.compile(r"\b(\w+)\s*=[^=]")
    enums = {k.split(".")[0] for k in enum_members(sources)}
    for lines in sources.values():
        for ln in lines:
            if _enum_conversion(ln, enums):
                continue
            for m in rx.finditer(ln):
                out.add(next(g for g in m.groups() if g))
            if "declare_resolution(" in ln:
                out |= {m.group(1) for m in kw.finditer(ln.split("declare_resolution(", 1)[1])}
    return out


_CONVERSION = re.compile(r"\.(\w+)\s*=\s*(\w+)\(\s*\w+\.(\w+)\s*\)\s*$")


def _enum_conversion(line: str, enums: set[str]) -> bool:
    """``x.f = Enum(x.f)``: the same value as a member of one of the scanned files' enums (LMDeploy's
    ``self.quant_policy = QuantPolicy(self.quant_policy)``), not a new value; a value outside the enum raises."""
    m = _CONVERSION.search(line)
    return bool(m) and m.group(2) in enums and m.group(1) == m.group(3)


def assigned_before(fn_src: str, site_line: int, fields: set[str]) -> set[str]:
    """Fields the function assigns (``x.f = ...``) before ``site_line``: the engine changed them before its check
    (converting one to a member of an enum of the scanned files keeps its value)."""
    enums = {k.split(".")[0] for k in ENUMS}
    src = "\n".join(ln for ln in fn_src.splitlines() if not _enum_conversion(ln, enums))
    return {f for f in fields if re.search(rf"\.{re.escape(f)}\s*(=[^=]|\+=|-=)", src)}


def translate(site: Any, tr: Translator) -> str:
    """The expression that is true when the engine refuses (the guards and the assert test negated)."""
    parts = []
    own = tr.cls
    for test, pos, cls in site.context or []:
        tr.cls = cls
        parts.append(tr.tr(test) if pos else f"not ({tr.tr(test)})")
    tr.cls = own
    for test, pos in site.guards:
        parts.append(tr.tr(test) if pos else f"not ({tr.tr(test)})")
    if site.test is not None:
        parts.append(f"not ({tr.tr(site.test)})")
    if not parts:
        raise Untranslatable("unconditional")
    return _lower_strings(" and ".join(sorted(tr.presence) + parts))


def _lower_strings(expr: str) -> str:
    """The expression with its string constants in lower case: rows compare case-insensitively (optkg keeps
    'eagle' where SGLang's parser keeps 'EAGLE'; kg.analyses.enginechecks lowers the stack's strings alike)."""
    tree = ast.parse(expr, mode="eval")
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            n.value = n.value.lower()
    return ast.unparse(tree)


def _field_text(site: Any, which: str) -> str:
    return {"function": site.function, "condition": site.condition, "message": site.message, "exc": site.exc,
            "all": f"{site.function} {site.condition} {site.message}"}[which]


def unknowable_kind(site: Any) -> tuple[str, str] | None:
    for kind, where, rx in UNKNOWABLE:
        m = re.search(rx, _field_text(site, where), re.I if where != "exc" else 0)
        if m:
            return kind, f"{UNKNOWABLE_KINDS[kind]} (matched '{m.group(0)}' in the {where})"
    return None


def rule_evidence(package: str, engine: str | None = None, release: str | None = None) -> dict[str, list[tuple[str, str]]]:
    """{path: [(snippet, rule id)]} of every rule's evidence items for ``package`` (any release), of the rules that
    apply to ``engine`` at ``release`` when both are given: a rule of older releases does not cover a site of this
    one because a generic snippet of its evidence appears there (async-scheduling-pipeline-parallel, vLLM
    0.10.0-0.14.x, 'if self.parallel_config.pipeline_parallel_size > 1:' matched HiSparse's PP check at 0.34.0)."""
    from kg.engine.rules import RULESET_KINDS, _version_ok, load_rules
    out: dict[str, list[tuple[str, str]]] = {}
    for kind in RULESET_KINDS:
        rs, _ = load_rules(kind, ROOT / "rules")
        for r in rs.rules:
            if r.id == GENERIC_RULE:
                continue  # its evidence is a sample table row, not a rule of its own
            if engine and release and not _version_ok(r, engine, release)[0]:
                continue
            for e in r.evidence or []:
                if str(e.get("package")) == package:
                    out.setdefault(str(e["path"]), []).append((str(e["snippet"]), r.id))
    return out


def _site_text(site: Any, lines: list[str]) -> str:
    """The site's own lines plus the lines of the ``if`` tests guarding it."""
    idx = set(range(site.line, site.end_line + 1))
    for test, _ in site.guards[-2:]:
        idx |= set(range(test.lineno, (getattr(test, "end_lineno", test.lineno) or test.lineno) + 1))
    idx |= {site.line - 1}  # the line above a raise often holds the message start or the if
    return "\n".join(lines[i - 1] for i in sorted(idx) if 0 < i <= len(lines))


# engine -> tools module whose ``rows_for(release, wheel)`` walks the engine's startup code symbolically and returns
# ({(path, line): {expr, ...}}, lets, walker): rows over the engine's own inputs (``inputs: <engine>`` in the sites
# file, evaluated over kg.engines.<engine>.ENGINE.check_inputs), replacing the per-site translation for that engine
INPUT_GENERATORS = {"sglang": "sglang_generated_checks"}
GENERATED: dict[str, Any] = {}  # what the last classify_all's generator produced: lets, inputs (for render)


def generated_rows(engine: str, release: str, wheel: Any) -> tuple[dict, list, Any] | None:
    if engine not in INPUT_GENERATORS or wheel is None:
        return None
    import importlib
    return importlib.import_module(INPUT_GENERATORS[engine]).rows_for(release, wheel)


def classify_all(engine: str, release: str, sites: list[Any], sources: dict[str, list[str]],
                 generated: dict[str, Any] | None = None, wheel: Any = None) -> list[dict[str, Any]]:
    """One row per site: rule (evidence), the hand classification, a row of the engine's input generator
    (``INPUT_GENERATORS``, from ``wheel``), a generated row of the engine's symbolic walk (``generated``: {rows,
    never, why} by (path, line), tools/engine_check_sites.GENERATORS), else ``_auto``."""
    generated = generated or {}
    from engine_check_sites import SCOPES
    gen = generated_rows(engine, release, wheel)
    GENERATED.clear()
    package = SCOPES[engine][0]
    hand = _load(ROOT / "catalog" / "engines" / "checks" / "classify" / f"{engine}.yaml") or {}
    by_id = hand.get("sites") or {}
    # a pattern with ``releases:`` holds at those releases only (its why cites their lines and callers)
    patterns = [p for p in hand.get("patterns") or [] if release in p.get("releases", [release])]
    evidence = rule_evidence(package, engine, release)
    flat, sub = field_map(engine)
    MUTATED.clear()
    MUTATED.update(mutated_fields(sources))
    model = model_fact_names()
    defaults = class_defaults(sources)
    fields_ = class_fields(sources)
    by_fact: dict[str, set[str]] = {}
    for f, fact in flat.items():
        if f in fields_:
            by_fact.setdefault(fact, set()).add(f)
    flat = {f: fact for f, fact in flat.items() if len(by_fact.get(fact, ())) <= 1}  # two fields, one fact: ambiguous
    # the engine's command line -> config fields (and their command-line defaults) its generator read from the wheel
    CLI_FIELDS.clear()
    for cls, fmap in (generated.get("class_fields") or {}).items():
        dflt = (generated.get("class_defaults") or {}).get(cls) or {}
        CLI_FIELDS[cls] = {f: (fact, dflt.get(f, NO_DEFAULT)) for f, fact in fmap.items()}
    if generated.get("options"):
        dflt = generated.get("option_defaults") or {}
        CLI_FIELDS["args"] = {d: (fact, dflt.get(d, NO_DEFAULT)) for d, fact in generated["options"].items()}
    ENUMS.clear()
    ENUMS.update(enum_members(sources))
    rows = []
    for s in sites:
        row: dict[str, Any] = {"id": s.id, "path": s.path, "line": s.line, "function": s.function, "kind": s.kind,
                               "exc": s.exc, "condition": s.condition[:MAXC], "message": s.message}
        lines = sources.get(s.path, [])
        text = _site_text(s, lines)
        rules = sorted({rid for snip, rid in evidence.get(s.path, []) if snip in text})
        h = by_id.get(s.id)
        pat = next((p for p in patterns if all(re.search(p[k], _pat_field(s, k)) for k in
                                               ("path", "function", "condition", "message") if k in p)), None)
        if rules:
            row.update({"class": "rule", "by": rules})
        elif h:
            row.update({k: v for k, v in h.items()})
        elif gen is not None and (s.path, s.line) in gen[0]:
            row.update({"class": "table", "expr": gen[0][(s.path, s.line)]["expr"]})
        elif pat:
            row.update({k: v for k, v in pat.items() if k in ("class", "kind", "why", "by")})
        elif (s.path, s.line) in (generated.get("rows") or {}) and (unknowable_kind(s) or ("",))[0] != "internal":
            # a condition the walk translated reads only options, model and GPU facts: knowable before start (the
            # word patterns of UNKNOWABLE guess from the text; an internal invariant stays one)
            row.update({"class": "table", **generated["rows"][(s.path, s.line)]})
        if "class" not in row:
            row.update(_auto(s, lines, flat, sub, model, defaults, engine, release))
            key = (s.path, s.line)
            if gen is not None and row["class"] == "table":  # rows of this engine come from its generator only
                row = {k: v for k, v in row.items() if k not in ("expr", "defaults", "set_by_technique")}
                row.update({"class": "uncovered", "why": "not translated: " + _walk_why(gen[2], s)})
            elif gen is not None and row["class"] == "uncovered":
                row["why"] = "not translated: " + _walk_why(gen[2], s)
            elif row["class"] == "uncovered" and key in (generated.get("never") or {}):
                row["why"] = generated["never"][key]
            elif row["class"] == "uncovered" and key in (generated.get("why") or {}):
                row["why"] = "not translated (walk of the startup code): " + generated["why"][key][:200]
        rows.append(row)
    if gen is not None:
        used = {r["expr"] for r in rows if r["class"] == "table"}
        GENERATED.update({"inputs": engine, "lets": _lets_used(used, gen[1])})
    if generated:
        generated["used_facts"] = {n for r in rows if r["class"] == "table" and r.get("expr") for n in _names(r["expr"])}
    return rows


def _walk_why(walker: Any, s: Any) -> str:
    """Why the generator's walk wrote no row for site ``s`` (the first condition it could not translate)."""
    why = getattr(walker, "why", {}).get((s.path, s.line))
    if why:
        return re.sub(r" #\d+$", "", str(why))[:200]
    if (s.path, s.line) in getattr(walker, "sites", {}):
        return "every path to it is unconditional or too long to evaluate"
    return "not reached from the engine's startup entry points (" + (s.context_why or "no caller followed") + ")"


def _lets_used(exprs: set[str], lets: list[tuple[str, str]]) -> dict[str, str]:
    """The lets the rows read, directly or through other lets, in definition order."""
    table = dict(lets)
    need: set[str] = set()
    todo = [n for e in exprs for n in _names(e) if n in table]
    while todo:
        n = todo.pop()
        if n in need:
            continue
        need.add(n)
        todo.extend(m for m in _names(table[n]) if m in table and m not in need)
    return {n: t for n, t in lets if n in need}


def _names(expr: str) -> set[str]:
    from kg.engine.expr import read_names
    tree = ast.parse(expr, mode="eval")
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return read_names(tree) - calls


MAXC = 300


def _pat_field(s: Any, k: str) -> str:
    return {"path": s.path, "function": s.function, "condition": s.condition, "message": s.message}[k]


def _auto(s: Any, lines: list[str], flat, sub, model, defaults, engine: str, release: str) -> dict[str, Any]:
    uk = unknowable_kind(s)
    expr = None
    why = ""
    tr = None
    try:
        tr = Translator(flat, sub, model, defaults, s.function, engine)
        if s.exc not in ("ValueError", "AssertionError", "TypeError", "RuntimeError", "NotImplementedError") \
                and not s.exc.endswith("Error"):
            raise Untranslatable(f"raises {s.exc}")
        if s.context is None:
            raise Untranslatable(s.context_why)
        if not s.straight:
            raise Untranslatable("reached through a loop, an except handler or after an early return")
        expr = translate(s, tr)
        from kg.engine.expr import names_in
        known = set(flat.values()) | {v for m in sub.values() for v in m.values()} | model | {"techniques"} \
            | PRESENCE_FACTS | {f for m in CLI_FIELDS.values() for f, _ in m.values()}
        unknown = sorted(names_in(expr) - known)
        if unknown:  # a presence guard over a fact no stack of this engine carries (LMDeploy --backend)
            tr.unmapped += unknown
            raise Untranslatable("optkg lacks " + ", ".join(unknown))
        fn = _function_source(s, lines)
        changed = assigned_before(fn, s.line, {k for k in _fields_read(s)}) | (_fields_read(s) & MUTATED)
        if changed:  # the engine may have changed the value before its check: the user's value is not what it tests
            raise Untranslatable("the engine assigns " + ", ".join(sorted(changed)) + " itself")
    except Untranslatable as e:
        expr, why = None, str(e)
    if expr is not None and not uk:
        dflt = {k: v for k, v in sorted(tr.reads.items()) if v is not NO_DEFAULT}
        from kg.engine.expr import names_in
        dflt.update({k: v for k, v in PRESENCE_DEFAULTS.items() if k in names_in(expr)})
        dflt = dict(sorted(dflt.items()))
        techs = {k: FLAG_TECHNIQUES[k] for k in sorted(tr.reads) if k in FLAG_TECHNIQUES}
        return {"class": "table", "expr": expr, **({"defaults": dflt} if dflt else {}),
                **({"set_by_technique": techs} if techs else {})}
    if uk:
        return {"class": "unknowable", "kind": uk[0], "why": uk[1]}
    lacks = sorted(set(tr.unmapped)) if tr else []
    if lacks:
        return {"class": "uncovered", "why": "optkg lacks the option(s) / fact(s): " + ", ".join(lacks)[:200]}
    return {"class": "uncovered", "why": "not translated: " + why[:200]}


def _fields_read(s: Any) -> set[str]:
    out = set()
    for t, _ in s.guards:
        out |= {n.attr for n in ast.walk(t) if isinstance(n, ast.Attribute)}
    if s.test is not None:
        out |= {n.attr for n in ast.walk(s.test) if isinstance(n, ast.Attribute)}
    return out


def _function_source(s: Any, lines: list[str]) -> str:
    """The lines of the site's function from its start up to the site (found by walking up to the ``def``)."""
    name = s.function.split(".")[-1]
    i = s.line - 1
    while i > 0 and not re.match(rf"\s*(async\s+)?def\s+{re.escape(name)}\b", lines[i - 1]):
        i -= 1
    guard_start = min([t.lineno for t, _ in s.guards] + [s.line])
    return "\n".join(lines[max(i - 1, 0):guard_start - 1])


def render(engine: str, release: str, scope: tuple[str, list[str]], rows: list[dict[str, Any]],
           lets: list[dict[str, str]] | None = None, origin: dict[str, Any] | None = None) -> str:
    """The sites file; ``lets`` (named long values the rows read, evaluated before them in order) when given;
    ``origin`` (repo, commit, how, files read) when the text was not a released wheel."""
    made = (f"source text of {origin.get('repo')} at commit {str(origin.get('commit'))[:12]}" if origin
            else f"the released {scope[0]} {release} wheel")
    head = (f"# GENERATED by tools/engine_check_sites.py from {made}; do not edit by hand\n"
            f"# (hand classification: catalog/engines/checks/classify/{engine}.yaml). Every raise / assert site of the\n"
            "# scanned folders, its stable id (path::function::hash of the condition) and its class: rule (an optkg rule\n"
            "# covers it), table (the generated check row `expr` is evaluated by the generic engine-check rule),\n"
            "# unknowable (kind: what it needs that exists only at run time) or uncovered (why: the fact optkg lacks).\n")
    counts = {c: sum(r["class"] == c for r in rows) for c in CLASSES}
    doc = {"engine": engine, "release": release, "package": scope[0], "scanned": scope[1], "counts": counts}
    if origin:
        doc["origin"] = origin
    if GENERATED.get("inputs") == engine:
        head += (f"# Rows read {engine}'s own inputs (inputs: {engine}; kg.engines.{engine}.ENGINE.check_inputs) and the\n"
                 "# lets below: named sub-expressions the rows share, evaluated on first use.\n")
        doc["inputs"] = engine
    body = yaml.safe_dump(doc, sort_keys=False, width=120)
    if GENERATED.get("inputs") == engine:
        lets = [{"name": n, "expr": e} for n, e in GENERATED["lets"].items()]
    if lets:
        body += "lets:\n" + "".join("  - " + yaml.safe_dump(x, default_flow_style=True, sort_keys=False,
                                                            width=100_000).strip() + "\n" for x in lets)
    out = [head + body + "sites:"]
    for r in rows:
        out.append("  - " + yaml.safe_dump(r, default_flow_style=True, sort_keys=False, width=100_000).strip())
    return "\n".join(out) + "\n"
