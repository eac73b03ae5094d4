"""SGLang's startup checks as generated rows: a symbolic walk of the released resolution pipeline (tools/checkgen.py).

Usage: python tools/sglang_generated_checks.py RELEASE [--wheel PATH] [--why]   (prints what the walk reached)
Used by tools/engine_check_classify.py for the sites of ``sglang`` (``rows_for(release, wheel)``).

SGLang (0.5.23) resolves its arguments in ``ServerArgs.resolve_once`` (server_args.py): ``run_resolution_pipeline``
(arg_groups/pipeline.py) calls ~90 named steps through ``run_hook``; a step never writes the record, it *declares*
decisions (``declare_resolution(server_args, source, field=value)``, a post-process pass returning ``{field:
value}``, the per-architecture model overrides); ``resolving_view(server_args)`` reads the last declaration over the
raw input, ``resolved_view`` a snapshot of it. The launcher then calls ``check_server_args`` (entrypoints/engine.py
``_launch_subprocesses``). The walk follows that order from the raw inputs and models:

- a declaration under the path condition ``pc`` as ``(value if pc else previous)`` of that field in the overlay the
  views read; a dict a step returns keeps, per key, the condition under which it is present;
- ``envs.NAME.get()`` as the input ``NAME`` (the environment variable, default from environ.py);
  ``envs.NAME.is_set()`` as ``NAME__set``;
- ``get_platform().fact`` and the probes of utils/common.py (is_cuda, is_sm100_supported, ...) as ``platform__fact``;
- ``model_config_of(server_args)``: ``hf_config.X`` as ``hf__X`` (config.json), ``hf_config.architectures[0]`` as
  ``hf__architecture``, ``hf_text_config.X`` as ``hf_text__X``, the ModelConfig properties listed in ``MODEL_FACTS``
  as ``mc__X``; ``parse_connector_type(model_path)`` as ``model_path__scheme``;
- any call the walk cannot follow that is handed the record or a view (a plugin, a helper outside the package)
  leaves every field it may declare unknown from there on (all fields, when its source is not in the wheel).

The names are evaluated by kg.engines.sglang.checkns over a stack (given value, else the release default of
catalog/engines/checks/inputs/sglang-RELEASE.yaml). A row is written only where every condition on a path
translates (an under-approximation: it fires only where SGLang's own code raises on the same inputs).
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import checkgen as cg  # noqa: E402
from checkgen import TAINT, Expr, Frame, Obj, Untranslatable  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ABSENT = "__absent__"   # a dict key a step did not return (its declaration leaves the field as it was)
LET_AT = 48           # a merged value longer than this gets a name of its own (``lets``)
FIT_ROUNDS = 64
FIT_PART = 300        # a path condition longer than this, in a path over the limits, is named whole
NEVER_FIRES = ("its row can never be true: every way to a refusal reads a value the walk could not model (__unknown__, "
               "directly or through a let)")
FIT_MAX_CHARS = 400_000  # a value longer than this is left unknown rather than cut into lets (kv_cache_dtype: 42,017)
COST_ERRORS = ("expression is ", "expression nests deeper")  # kg/engine/expr.py's wording of its cost limits

# platform facts (runtime_context._PLATFORM_PROBES / _PLATFORM_VALUES) and the utils/common.py probes behind them
PLATFORM_FACTS = {"is_cuda", "is_hip", "is_npu", "is_xpu", "is_musa", "is_mps", "is_sm90", "is_sm100",
                  "is_sm100_or_sm110", "is_sm110", "is_sm120", "is_blackwell", "is_hopper_with_cuda_12_3", "has_amx",
                  "has_flashinfer", "device_sm", "device_capability"}
PROBES = {"is_cuda": "is_cuda", "is_hip": "is_hip", "is_npu": "is_npu", "is_xpu": "is_xpu", "is_musa": "is_musa",
          "is_mps": "is_mps", "is_cpu": "is_cpu", "is_sm90_supported": "is_sm90", "is_sm100_supported": "is_sm100",
          "is_sm100_or_sm110_supported": "is_sm100_or_sm110", "is_sm110_supported": "is_sm110",
          "is_sm120_supported": "is_sm120", "is_blackwell_supported": "is_blackwell", "is_blackwell": "is_blackwell",
          "is_hopper_with_cuda_12_3": "is_hopper_with_cuda_12_3", "is_flashinfer_available": "has_flashinfer",
          "get_device_sm": "device_sm", "cpu_has_amx_support": "has_amx", "is_gfx95_supported": "is_gfx95",
          "is_sm120": "is_sm120_exact", "is_sm121": "is_sm121", "is_sail": "is_sail", "is_hpu": "is_hpu",
          "use_mlx": "use_mlx"}
# ModelConfig attributes read as facts of the model (kg.engines.sglang.checkns derives each from config.json) and the
# hf_config attributes it gives (checkns.HF_KEYS and the architectures)
MODEL_FACTS: set[str] = {"attention_arch", "attention_chunk_size", "num_nextn_predict_layers", "nvfp4_moe_meta"}
# auto() enums whose members stand for their names: the model facts that hold them are given as names
# (mc__attention_arch 'MLA' / 'MHA' / 'SSM', checkns.attention_arch)
NAMED_ENUMS = {"AttentionArch"}
# ModelConfig attributes computed from hf_config.architectures alone (configs/model_config.py:871): walked
ARCH_DERIVED = {"is_encoder_decoder": ("sglang/srt/configs/model_config.py", "is_encoder_decoder_model")}
HF_ATTRS = {"architectures", "model_type", "index_topk"}
BOOKKEEPING = {"_resolution_finished": False, "_resolution_failed": False, "_input_frozen": False}
BUILTINS = {"getattr", "hasattr", "isinstance", "len", "min", "max", "bool", "int", "str", "float", "any", "all",
            "sorted", "list", "tuple", "set", "dict", "print", "type", "repr", "abs", "round", "zip", "enumerate",
            "range", "sum", "id", "iter", "next", "vars", "callable"}
SCANNED = ("sglang/srt/server_args.py", "sglang/srt/arg_groups/")


class Modules(dict):
    """path -> checkgen.Module, parsed from the wheel on first use."""

    def __init__(self, z: zipfile.ZipFile):
        super().__init__()
        self.z = z
        self.names = {n for n in z.namelist() if n.endswith(".py") and n.startswith("sglang/")}
        self._mutated: set[str] | None = None

    def get(self, path: str, default: Any = None) -> Any:  # noqa: D401 - dict.get that loads
        if path in self:
            return self[path]
        if path not in self.names:
            return default
        try:
            m = cg.read_module(path, self.z.read(path).decode("utf-8", errors="replace"))
        except SyntaxError:
            return default
        for st in m.tree.body:  # annotated constants, frozenset({...}) and unions of sets: checkgen reads neither
            target = st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 else \
                st.target if isinstance(st, ast.AnnAssign) and st.value is not None else None
            if not isinstance(target, ast.Name) or target.id in m.constants or target.id in self.mutated():
                continue
            for read in (cg._const_eval, _set_const):
                try:
                    m.constants[target.id] = read(st.value, m.constants)
                    break
                except (ValueError, TypeError, KeyError, SyntaxError, MemoryError, RecursionError, ZeroDivisionError):
                    pass
        self[path] = m
        return m

    def mutated(self) -> set[str]:
        """Names some module of the wheel mutates in place (``NAME.add(..)``, ``NAME[k] = ..``, ``NAME |= ..``,
        ``x = NAME.extend``): a registry filled at import is not the constant its literal says."""
        if self._mutated is None:
            rx = re.compile(r"\b([A-Za-z_]\w*)\s*(?:\.(?:append|add|extend|update|insert|setdefault|discard|remove|pop|"
                            r"clear)\b|\[[^\]\n]*\]\s*=[^=]|[|&+-]=)")
            self._mutated = {mm.group(1) for n in self.names
                             for mm in rx.finditer(self.z.read(n).decode("utf-8", errors="replace"))}
        return self._mutated

    def dotted(self, dotted: str) -> str | None:
        base = dotted.replace(".", "/")
        for cand in (f"{base}.py", f"{base}/__init__.py"):
            if cand in self.names:
                return cand
        return None


def _set_const(node: ast.AST, consts: dict[str, Any]) -> frozenset:
    """``frozenset({...})`` / ``set((...))`` of literals, and ``|`` / ``&`` / ``-`` of such sets or of earlier
    constants (sglang layers/layernorm_sp.py SP_SUPPORTED_ARCHITECTURES = MUSE_SP_ARCHITECTURES | frozenset(...))."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set") \
            and len(node.args) == 1 and not node.keywords:
        v = ast.literal_eval(node.args[0])
        if not isinstance(v, (set, tuple, list, frozenset)) or not all(isinstance(x, str) for x in v):
            raise ValueError("not a set of strings")
        return frozenset(v)
    if isinstance(node, ast.Name):
        v = consts[node.id]
        if not isinstance(v, (set, frozenset)):
            raise ValueError("not a set")
        return frozenset(v)
    if isinstance(node, ast.BinOp) and type(node.op) in (ast.BitOr, ast.BitAnd, ast.Sub):
        a, b = _set_const(node.left, consts), _set_const(node.right, consts)
        return a | b if isinstance(node.op, ast.BitOr) else a & b if isinstance(node.op, ast.BitAnd) else a - b
    raise ValueError("not a set constant")


class SetVal(Expr):
    """A Python set (``set(x)``, ``{a, b}``, a frozenset constant): a list-valued expression whose comparisons and
    operators are the set ones (``subset`` / ``set_eq`` / ``set_minus`` / ``set_union`` of checkns), never the
    list ones (``(a, b) <= ('x', 'y')`` would compare lexicographically)."""


class Dict_(Obj):
    """A dict a step builds: key -> value (``__absent__`` where the key is not set)."""

    def __init__(self, label: str):
        super().__init__(label, lambda a: Expr(ABSENT))
        self.truth = None


class SpecAlgo(Obj):
    """A SpeculativeAlgorithm member whose name is the expression ``scalar``; its methods are walked with it."""

    def __init__(self, scalar: str, members: tuple[str, ...]):
        super().__init__("SpeculativeAlgorithm", None, cls="SpeculativeAlgorithm",
                         path="sglang/srt/speculative/spec_info.py")
        self.scalar = scalar
        self.truth = None


class View(Obj):
    """A read view of the record: the declarations so far (live: ``resolving_view``; a snapshot: ``resolved_view``)
    over the raw input."""

    def __init__(self, walker: "SglWalker", snapshot: dict[str, Any] | None):
        super().__init__("view" if snapshot is None else "snapshot", self.read)
        self.walker, self.snapshot = walker, snapshot

    def read(self, attr: str) -> Any:
        w = self.walker
        over = w.decl if self.snapshot is None else self.snapshot
        if attr in over:
            return over[attr]
        if w.poisoned and attr in w.fields:
            return TAINT
        return w.raw(attr)


class SglWalker(cg.Walker):
    let_at = 10 ** 9  # checkgen's merge keeps every value inline: this walk names long ones itself (sg_bind, _s<n>)

    def __init__(self, modules: Modules, inputs: dict[str, Any]):
        super().__init__([], enums={})
        self.modules = modules
        self.fields: set[str] = set(inputs["fields"])
        self.env: set[str] = set(inputs["env"])
        self.fallback = {k: v["fallback"] for k, v in inputs["fields"].items() if "fallback" in v}
        self.decl: dict[str, Any] = {}
        self.poisoned = ""          # why every field not declared again since is unknown
        self.lost: dict[str, int] = {}   # opaque calls handed the record or a view
        self.sg_lets: list[tuple[str, str]] = []
        self.record = Obj("server_args", self.raw)
        self.hooks.append(SglWalker.hook)
        self.class_index: dict[str, list[str]] | None = None
        self.registry: dict[str, list[tuple[str, str]]] | None = None
        self.current: list[ast.FunctionDef] = []
        self.trace: set[str] = set()     # fields whose first turn to unknown is logged (--trace)
        self.trace_log: list[tuple[str, str, str]] = []
        self.over_limit = ""            # why sg_bind last turned a value unknown (the expression language's limits)
        self.unk_lets: set[str] = set()  # lets whose value may be unknown
        self.let_names: dict[str, str] = {}  # let text -> its name (a sub-expression named twice is one let)
        self.sa_consts: dict[str, tuple] | None = None
        self.losing_why = ""
        self.fitted: dict[str, str | None] = {}  # fit's answers by text (a site is reached with the same path often)
        self.losing = ""

    # ------------------------------------------------------------------ inputs
    def literal(self, v: Any) -> Expr:
        if isinstance(v, (set, frozenset)):  # in a fixed order: the sites file is the same on every run
            return SetVal(super().literal(tuple(sorted(v, key=repr))).text)
        return super().literal(v)

    def raw(self, attr: str) -> Any:
        if attr in self.fields:
            return Expr(attr)
        if attr in BOOKKEEPING:
            return self.literal(BOOKKEEPING[attr])
        const = self.class_constants().get(attr)
        return None if const is None else self.literal(const)

    def class_constants(self) -> dict[str, tuple]:
        """Tuples of constants written in ServerArgs' class body (``LANGUAGE_MODEL_ONLY_ARCHITECTURES``,
        server_args.py:335): read through the record or a view as Python reads a class attribute."""
        if self.sa_consts is None:
            self.sa_consts = {}
            m = self.modules.get("sglang/srt/server_args.py")
            cls = m.classes.get("ServerArgs") if m else None
            for st in cls.body if cls is not None else []:
                if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) \
                        and isinstance(st.value, ast.Tuple) and st.targets[0].id not in self.fields:
                    try:
                        v = ast.literal_eval(st.value)
                    except ValueError:
                        continue
                    name = st.targets[0].id
                    rebound = re.compile(rf"\.{name}\s*(?:=[^=]|\+=)")  # ``record.NAME = ..`` anywhere in the wheel
                    if all(isinstance(x, (str, int, float, bool)) for x in v) and not any(
                            rebound.search(self.modules.z.read(n).decode("utf-8", errors="replace"))
                            for n in self.modules.names):
                        self.sa_consts[name] = v
        return self.sa_consts

    # ------------------------------------------------------------------ lookup across the wheel
    def find_function(self, name: str, path: str) -> tuple[ast.FunctionDef, str] | None:
        m = self.modules.get(path)
        if m is None:
            return None
        if name in m.functions:
            return m.functions[name], path
        origin = m.imports.get(name)
        for _ in range(4):
            if not origin:
                return None
            mod, _, short = origin.rpartition(".")
            p = self.modules.dotted(mod)
            mm = self.modules.get(p) if p else None
            if mm is None:
                return None
            if short in mm.functions:
                return mm.functions[short], p
            origin = mm.imports.get(short)  # a re-export
        return None

    def find_class(self, name: str, path: str | None = None) -> tuple[ast.ClassDef, str] | None:
        m = self.modules.get(path or "")
        if m is not None:
            if name in m.classes:
                return m.classes[name], m.path
            origin = m.imports.get(name)
            for _ in range(4):
                if not origin:
                    break
                mod, _, short = origin.rpartition(".")
                p = self.modules.dotted(mod)
                mm = self.modules.get(p) if p else None
                if mm is None:
                    break
                if short in mm.classes:
                    return mm.classes[short], p
                origin = mm.imports.get(short)
        return None

    def constant(self, name: str, path: str) -> Any:
        m = self.modules.get(path)
        if m and name in m.constants:
            return m.constants[name]
        origin = m.imports.get(name) if m else None
        for _ in range(4):  # follow re-exports (server_args re-exports arg_groups.choices)
            if not origin:
                break
            mod, _, short = origin.rpartition(".")
            p = self.modules.dotted(mod)
            mm = self.modules.get(p) if p else None
            if mm is None:
                break
            if short in mm.constants:
                return mm.constants[short]
            origin = mm.imports.get(short)
        raise KeyError(name)

    def name(self, n: str, fr: Frame) -> Any:
        """checkgen's name, except that an imported name stands for its dotted path only when it is a class or a
        function of the wheel (identity tests between them); a list or table imported from elsewhere whose value the
        walk cannot read is untranslatable (as a string, ``x in NAME`` would test substrings)."""
        if n in fr.locals or n in ("True", "False", "None"):
            return super().name(n, fr)
        try:
            return self.literal(self.constant(n, fr.path))
        except (KeyError, Untranslatable):
            pass
        m = self.modules.get(fr.path)
        if m and n in m.imports and (self.find_function(n, fr.path) or self.find_class(n, fr.path)):
            return Expr(repr(m.imports[n]))
        raise Untranslatable(f"name {n}")

    def attribute(self, node: ast.Attribute, fr: Frame, pc: list[str]) -> Any:
        if isinstance(node.value, ast.Name) and node.value.id not in fr.locals:
            m = self.modules.get(fr.path)
            head = node.value.id
            if m and head in m.imports:  # module.CONSTANT or Class.member of an imported module / class
                origin = m.imports[head]
                p = self.modules.dotted(origin)
                mm = self.modules.get(p) if p else None
                if mm is not None and node.attr in mm.constants:
                    return self.literal(mm.constants[node.attr])
                raise Untranslatable(f"{head}.{node.attr}")
        return super().attribute(node, fr, pc)

    def enum_value(self, cls_name: str, member: str, path: str) -> tuple[bool, Any]:
        hit = self.find_class(cls_name, path)
        if hit is None:
            return False, None
        for s in hit[0].body:
            if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
                    and s.targets[0].id == member:
                try:
                    v = ast.literal_eval(s.value)
                except (ValueError, SyntaxError, TypeError):
                    return False, None
                return isinstance(v, (str, int, float, bool)), v
        return False, None

    # ------------------------------------------------------------------ declarations
    def declare(self, fields: dict[str, Any], conds: list[str]) -> None:
        for f, v in fields.items():
            old = self.decl.get(f)
            if old is None:
                old = TAINT if self.poisoned and f in self.fields else (self.raw(f) or TAINT)
            if isinstance(v, Expr) and ABSENT in cg.free_names(v.text):
                if not isinstance(old, Expr):
                    v = TAINT
                else:
                    v = Expr(cg.substitute(v.text, {ABSENT: old.text}))
            if isinstance(v, Expr) and v.text == ABSENT:
                continue
            self.over_limit = ""
            self.decl[f] = self.sg_bind(self.merge(old, v, conds, first=False))
            if f in self.trace and ((self.unknownish(self.decl[f]) and not self.unknownish(old))
                                    or (self.bare_unknown(self.decl[f]) and not self.bare_unknown(old))):
                why = self.losing or self.over_limit
                where = " > ".join(fn.name for fn in self.current[-3:]) + (f": {why}" if why else "")
                self.trace_log.append((f, where, cg.conj(conds)[:160]))

    @staticmethod
    def bare_unknown(v: Any) -> bool:
        """Unknown on every path (not only under a condition): what makes a row reading it never fire."""
        return v is TAINT or v is None or (isinstance(v, Expr) and v.text == cg.UNK)

    def unknownish(self, v: Any) -> bool:
        if v is TAINT or v is None:
            return True
        if not isinstance(v, Expr):
            return False
        return cg.UNK in v.text or any(n in self.unk_lets for n in re.findall(r"\b_s\d+\b", v.text))

    def sg_bind(self, v: Any) -> Any:
        """A long value becomes a named let (``_s<n>``, evaluated before the rows); a dict value that still holds
        ``__absent__`` stays inline until its declaration substitutes the field's previous value."""
        if isinstance(v, Expr) and len(v.text) > LET_AT and cg.free_names(v.text) \
                and ABSENT not in cg.free_names(v.text):
            from kg.engine.expr import ExprError, compile_expr
            from kg.engines.sglang.checkns import FUNCTIONS
            try:
                compile_expr(v.text, tuple(FUNCTIONS))
            except ExprError as e:  # over the expression language's cost limit: split into lets, else unknown
                fitted = self.fit(v.text)
                if fitted is None:
                    self.over_limit = f"{e} ({len(v.text):,} characters)"
                    return Expr(cg.UNK)
                v = Expr(fitted)
            return Expr(self.new_let(v.text))
        return v

    def new_let(self, text: str) -> str:
        name = self.let_names.get(text)
        if name is None:
            name = self.let_names[text] = f"_s{len(self.sg_lets)}"
            self.sg_lets.append((name, text))
            if self.unknownish(Expr(text)):
                self.unk_lets.add(name)
        return name

    def fit(self, text: str) -> str | None:
        """``text`` within the expression language's cost limits (kg/engine/expr.py: 2,000 characters, 400 syntax
        nodes, 40 levels), its largest sub-expressions of at most ``checkgen.FIT_NODES`` nodes named as lets, as often as
        needed; None when it cannot be (a sub-expression over the limits that has no smaller part to name). A let is
        evaluated where the row first reads it (kg.analyses.enginechecks._LetFacts), so ``and`` / ``or`` / ``if``
        still short-circuit as written: the row means the same. Long architecture tuples of a membership test
        (``hf__architecture in (...)``, sglang overrides.py:491 _dsa_kv_cache_dtype_default) are what overflows."""
        if len(text) > FIT_MAX_CHARS:
            return None
        if text in self.fitted:
            return self.fitted[text]
        self.fitted[text] = out = self.fit_rounds(text)
        return out

    def fit_rounds(self, text: str) -> str | None:
        from kg.engine.expr import ExprError, compile_expr
        from kg.engines.sglang.checkns import FUNCTIONS
        for _ in range(FIT_ROUNDS):
            try:
                compile_expr(text, tuple(FUNCTIONS))
                return text
            except ExprError as e:
                if not str(e).startswith(COST_ERRORS):
                    return None
            text = cg.name_largest_part(text, self.new_let, ABSENT)
            if text is None:
                return None  # nothing to name: a constant, or a dict value not yet substituted
        return None

    def lose(self, what: str, fields: set[str] | None, conds: list[str]) -> None:
        """A call the walk cannot follow may declare ``fields`` (None: any field): they become unknown."""
        self.lost[what] = self.lost.get(what, 0) + 1
        self.losing = what
        try:
            self.lose_fields(fields, conds)
        finally:
            self.losing = ""

    def lose_fields(self, fields: set[str] | None, conds: list[str]) -> None:
        if fields is None:
            if not conds:
                self.trace_log += [(f, self.losing, "every field") for f in self.trace
                                   if not self.unknownish(self.decl.get(f, Expr(f)))]
                self.decl = {}
                self.poisoned = self.losing
            else:  # only where the call ran: keep the old value elsewhere (merge with an unknown new value)
                for f in sorted(self.fields):  # sorted: the lets it makes are numbered in this order (one file
                    self.declare({f: TAINT}, conds)  # whatever PYTHONHASHSEED is)
            return
        for f in sorted(fields):
            self.declare({f: TAINT}, conds)

    # ------------------------------------------------------------------ hooks
    def hook(self, node: ast.AST, fr: Frame, pc: list[str]) -> Any:
        if isinstance(node, ast.Dict):
            return self.dict_literal(node, fr, pc)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            keys = self.built_dict_keys(self.value_or_taint(node.comparators[0], fr, pc))
            if keys is not None:  # ``old in aliases`` over a dict the walk built (serving_hook.py:304-312)
                op = "in" if isinstance(node.ops[0], ast.In) else "not in"
                return Expr(f"({self.text(node.left, fr, pc)} {op} {self.literal(tuple(keys)).text})")
            return None
        if isinstance(node, ast.Subscript):
            return self.subscript(node, fr, pc)
        if isinstance(node, ast.Attribute):
            return self.attr_hook(node, fr, pc)
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and len(node.values) == 2 \
                and isinstance(node.values[0], ast.Name) and node.values[0].id in fr.locals:
            # ``cfg = cfg or resolving_view(server_args)`` (kv_shard_hook.py:31): an optional view parameter
            first = fr.locals[node.values[0].id]
            if isinstance(first, Obj) and not isinstance(first, (cg.ObjIf, cg.UnknownObj)) \
                    and getattr(first, "truth", None) is None and not getattr(first, "scalar", None):
                return first
            if first == Expr(repr(cg.NONE)):
                return self.value(node.values[1], fr, pc)
        if isinstance(node, (ast.Set, ast.Compare, ast.BinOp, ast.IfExp)) or (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("set", "frozenset") and len(node.args) == 1):
            got = self.set_value(node, fr, pc)
            if got is not None:
                return got
        if not isinstance(node, ast.Call):
            return None
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        conds = self.eff(fr, pc)
        if isinstance(f, ast.Attribute) and name in ("get", "is_set") and isinstance(f.value, ast.Attribute) \
                and isinstance(f.value.value, ast.Name) and f.value.value.id == "envs":
            var = f.value.attr
            if var not in self.env:
                raise Untranslatable(f"envs.{var}")
            return Expr(var if name == "get" else f"{var}__set")
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute) and isinstance(f.value.value, ast.Name) \
                and f.value.value.id == "envs" and name in ("set", "clear", "override"):
            raise Untranslatable(f"envs.{f.value.attr}.{name}")  # the process writes its own environment
        if name in ("resolving_view", "ResolvingConfig") and len(node.args) == 1:
            return View(self, None)
        if name in ("resolved_view", "ResolvedView") and node.args:
            return View(self, dict(self.decl))
        if name == "record_of":
            return self.record
        if name in ("any", "all") and isinstance(f, ast.Name) and len(node.args) == 1:
            got = self.membership_over_list(node.args[0], name, fr, pc)
            if got is not None:
                return got
        if isinstance(f, ast.Attribute) and ast.unparse(f) == "torch.cuda.get_device_capability" and not node.args:
            return Expr("platform__device_capability")  # (major, minor) of the GPU (checkns: a CUDA GPU's)
        if name == "get_platform" and not node.args:
            return Obj("platform", lambda a: Expr(f"platform__{a}") if a in PLATFORM_FACTS else None)
        if name in PROBES and not node.args and isinstance(f, ast.Name):
            return Expr(f"platform__{PROBES[name]}")
        if name == "declare_resolution":
            return self.declare_call(node, fr, pc, conds)
        if name == "run_hook" and len(node.args) == 2:
            return self.call_named(node.args[0], [node.args[1]], fr, pc)
        if name == "run_post_process_pass" and len(node.args) == 2:
            return self.post_process(node.args[1], node.args[0], fr, pc, conds)
        if name == "model_config_of":
            return self.model_config()
        if name == "parse_connector_type" and len(node.args) == 1:
            return Expr(f"url_scheme({self.text(node.args[0], fr, pc)})")
        if name == "check_gguf_file" and len(node.args) == 1:
            # utils/hf_transformers/common.py:396-405: a file whose suffix is .gguf or whose header is GGUF
            v = self.value(node.args[0], fr, pc)
            if isinstance(v, Expr) and v.text == "model_path":
                return Expr("model_path__is_gguf")
            raise Untranslatable("check_gguf_file of another path")
        if name == "is_mistral_native_format" and len(node.args) == 1:
            return Expr("model_path__mistral_native")  # model_path_hook.py:310-370: the checkpoint's file listing
        if name == "is_runai_obj_uri" and len(node.args) == 1:
            # utils/runai_utils.py:14, :48-50: str(x).lower() starts with s3:// gs:// az://
            return Expr(f"startswith(lower(str({self.text(node.args[0], fr, pc)})), ['s3://', 'gs://', 'az://'])")
        if name == "is_remote_url" and len(node.args) == 1:
            # utils/common.py:3729-3739: re.match(r"(.+)://(.*)", url) is not None (a str, as every caller passes)
            return Expr(f"(url_scheme({self.text(node.args[0], fr, pc)}) != '')")
        if name == "resolve_hf_gguf_reference" and node.args:
            # None for a checkpoint with a config.json (a local folder, or a hub repo holding config.json: the
            # model optkg read), sglang utils/hf_transformers/common.py:419-473
            v = self.value(node.args[0], fr, pc)
            if isinstance(v, Expr) and v.text == "model_path":
                return self.literal(None)
            raise Untranslatable("resolve_hf_gguf_reference of another path")
        if name in ("_hf_arch", "_hf_attr") and isinstance(f, ast.Name) and node.args:
            # configs/model_config.py:174-188: the first architecture / getattr(config, name, None) of the HF config
            v = self.value_or_taint(node.args[0], fr, pc)
            if not (isinstance(v, Obj) and v.label == "hf_config"):
                raise Untranslatable(f"{name} of another config")
            if name == "_hf_arch" and len(node.args) == 1:
                return Expr("hf__architecture")
            key = node.args[1] if len(node.args) == 2 else None
            if isinstance(key, ast.Constant) and key.value in HF_ATTRS:
                return Expr(f"hf__{key.value}")
            raise Untranslatable(f"_hf_attr {ast.unparse(key) if key is not None else ''}")
        if name == "str" and len(node.args) == 1 and isinstance(f, ast.Name):
            return Expr(f"str({self.text(node.args[0], fr, pc)})")
        if name == "collect_model_override_declarations":
            return self.model_overrides(node, fr, pc, conds)
        if name == "resolution_result" and len(node.args) == 2 and isinstance(node.args[1], ast.Constant):
            fld = str(node.args[1].value)
            v = View(self, None).read(fld)
            fb = self.fallback.get(fld)
            if fb is not None and isinstance(v, Expr):
                return Expr(f"({cg.NONE!r} if False else ({fb!r} if {v.text} == {cg.NONE!r} else {v.text}))")
            return v
        if name == "is_record" and len(node.args) == 1:
            return self.literal(self.value_or_taint(node.args[0], fr, pc) is self.record)
        if name == "record_foreign_defaults" and len(node.args) == 3:
            if ast.unparse(node.args[2]) == "current_platform.apply_server_args_defaults":
                return self.literal(None)  # the in-tree platforms keep the base no-op (platforms/interface.py:96)
            self.lose("record_foreign_defaults(plugin)", None, conds)
            return TAINT
        if isinstance(f, ast.Attribute) and ast.unparse(f) == "current_platform.is_out_of_tree" and not node.args:
            return self.literal(False)  # no out-of-tree platform plugin (the standard install)
        if isinstance(f, ast.Attribute) and ast.unparse(f) == "SpeculativeAlgorithm.from_string" and len(node.args) == 1:
            return self.spec_algorithm(node.args[0], fr, pc)
        if name == "isinstance" and len(node.args) == 2 and ast.unparse(node.args[1]) == "CustomSpecAlgo":
            v = self.value_or_taint(node.args[0], fr, pc)
            if isinstance(v, SpecAlgo):
                return self.literal(False)  # a builtin algorithm (no plugin registers one in the standard install)
        if name == "get_config" and node.args:
            v = self.value_or_taint(node.args[0], fr, pc)
            if isinstance(v, Expr) and v.text == "speculative_draft_model_path":
                return Obj("draft_hf_config", lambda a: Expr("draft__architectures") if a == "architectures" else None)
            raise Untranslatable("get_config of another path")
        if name in ("validate_declarations",):
            return Expr(repr(cg.NONE))  # internal: every field a shipped step declares is resolvable
        if isinstance(f, ast.Attribute) and name == "update" and len(node.args) == 1:
            try:
                base = self.value(f.value, fr, pc)
            except Untranslatable:
                base = None
            if isinstance(base, Dict_):
                other = self.value_or_taint(node.args[0], fr, pc)
                if isinstance(other, Dict_):
                    for k, v in other.env.items():
                        self.set_attr(base, k, v, conds)
                else:
                    base.free = lambda a: TAINT  # unknown keys: every key unknown
                    base.env = {k: TAINT for k in base.env}
                return Expr(repr(cg.NONE))
        if isinstance(f, ast.Attribute) and name == "get" and 1 <= len(node.args) <= 2 and not node.keywords \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            try:
                base = self.value(f.value, fr, pc)
            except Untranslatable:
                base = None
            if isinstance(base, Dict_) and "*" not in base.env:  # ``renamed.get("k")`` (serving_hook.py:319)
                dflt = self.value(node.args[1], fr, pc) if len(node.args) == 2 else self.literal(None)
                v = base.env.get(node.args[0].value, Expr(ABSENT))
                if not isinstance(v, Expr) or not isinstance(dflt, Expr):
                    raise Untranslatable("get of an unknown value")
                return Expr(cg.substitute(v.text, {ABSENT: dflt.text}))
        if isinstance(f, ast.Attribute) and name in ("upper", "lower") and not node.args:
            return Expr(f"{name}({self.text(f.value, fr, pc)})")
        if isinstance(f, ast.Attribute) and name in ("startswith", "endswith") and len(node.args) == 1:
            return Expr(f"{name}({self.text(f.value, fr, pc)}, {self.text(node.args[0], fr, pc)})")
        return None

    def spec_algorithm(self, arg: ast.AST, fr: Frame, pc: list[str]) -> Any:
        """speculative/spec_info.py SpeculativeAlgorithm.from_string: the builtin member of ``upper(name)``, NEXTN ->
        EAGLE (spec_registry._RESERVED_ALIASES); another name raises there (no plugin registers one)."""
        t = self.text(arg, fr, pc)
        members = self.spec_members()
        name = (f"('NONE' if {t} == {cg.NONE!r} else ('EAGLE' if upper({t}) == 'NEXTN' else upper({t})))")
        return SpecAlgo(name, members)

    def spec_members(self) -> tuple[str, ...]:
        hit = self.find_class("SpeculativeAlgorithm", "sglang/srt/speculative/spec_info.py")
        if hit is None:
            raise Untranslatable("SpeculativeAlgorithm")
        return tuple(s.targets[0].id for s in hit[0].body if isinstance(s, ast.Assign)
                     and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Call)
                     and ast.unparse(s.value.func) == "auto")

    def as_text(self, v: Any, boolean: bool = False) -> str:
        if isinstance(v, SpecAlgo) and not boolean:
            return v.scalar
        return super().as_text(v, boolean)

    def attr_hook(self, node: ast.Attribute, fr: Frame, pc: list[str]) -> Any:
        if isinstance(node.value, ast.Name) and node.value.id == "SpeculativeAlgorithm" \
                and node.value.id not in fr.locals and node.attr in self.spec_members():
            return self.literal(node.attr)  # an auto() member compares by its name (see spec_algorithm)
        if isinstance(node.value, ast.Name) and node.value.id in NAMED_ENUMS and node.value.id not in fr.locals:
            return self.literal(node.attr)
        # enum members of classes anywhere in the wheel (ConnectorType.INSTANCE)
        if isinstance(node.value, ast.Name) and node.value.id not in fr.locals and node.value.id[:1].isupper():
            ok, v = self.enum_value(node.value.id, node.attr, fr.path)
            if ok:
                return self.literal(v)
        if isinstance(node.value, ast.Attribute) and isinstance(node.value.value, ast.Name) \
                and node.value.value.id not in fr.locals and node.value.attr[:1].isupper():
            ok, v = self.enum_value(node.value.attr, node.attr, fr.path)
            if ok:
                return self.literal(v)
        return None

    @staticmethod
    def built_dict_keys(d: Any) -> list[str] | None:
        """The keys of a dict the walk built whose every key is present on every path (a literal of constant keys);
        None otherwise."""
        if not isinstance(d, Dict_) or "*" in d.env or not d.env:
            return None
        if not all(isinstance(v, Expr) and ABSENT not in cg.free_names(v.text) for v in d.env.values()):
            return None
        return list(d.env)

    def subscript(self, node: ast.Subscript, fr: Frame, pc: list[str]) -> Any:
        base = self.value(node.value, fr, pc)
        keys = self.built_dict_keys(base)
        if keys is not None and not (isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
            # ``aliases[old]``: the value of the key ``old`` holds; another key raises KeyError (unknown, not a fact)
            k = self.text(node.slice, fr, pc)
            acc = cg.UNK
            for key in reversed(keys):
                acc = f"({base.env[key].text} if ({k} == {key!r}) else {acc})"
            return Expr(acc)
        if isinstance(base, Expr) and base.text == "hf__architectures" and isinstance(node.slice, ast.Constant) \
                and node.slice.value == 0:
            return Expr("hf__architecture")
        if isinstance(base, Expr) and not base.ref and isinstance(node.slice, ast.Constant) \
                and type(node.slice.value) is int and node.slice.value >= 0:
            # a list option's element (validation_hook.py:389 buckets_rule[0]): item() raises, as Python's index
            # does, on None or a short list, so the row is not evaluated there
            return Expr(f"item({base.text}, {node.slice.value})")
        return None

    def assign(self, target: ast.AST, v: Any, fr: Frame, pc: list[str]) -> None:
        """checkgen's assign, except that ``d[k] = v`` with ``k`` a local holding a string (an unrolled loop's
        variable, serving_hook.py:306-318) sets that key instead of making every key unknown, and that a tuple
        target takes the elements of a tuple value (``prefill, decode = attention_backends_of(view)``) or ``item(v,
        i)`` of another value (``major, _ = torch.cuda.get_device_capability()``)."""
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(v, Expr) and not v.ref \
                and not any(isinstance(t, ast.Starred) for t in target.elts):
            try:
                e = ast.parse(v.text, mode="eval").body
            except SyntaxError:
                e = None
            if isinstance(e, (ast.Tuple, ast.List)):
                if len(e.elts) == len(target.elts):
                    for t, x in zip(target.elts, e.elts):
                        # an element keeps its parentheses: ``(a if truthy(a) else b) == 'dsa'``, never
                        # ``a if truthy(a) else b == 'dsa'`` (attention_backends_of(view): 14 rows at d26b28c)
                        text = ast.unparse(x)
                        atom = isinstance(x, (ast.Name, ast.Constant, ast.Call, ast.Tuple, ast.List))
                        self.assign(t, Expr(text if atom else f"({text})"), fr, pc)
                    return
            elif e is not None and cg.free_names(v.text) and cg.UNK not in cg.free_names(v.text):
                for i, t in enumerate(target.elts):
                    self.assign(t, Expr(f"item({v.text}, {i})"), fr, pc)
                return
        if isinstance(target, ast.Subscript) and not isinstance(target.slice, ast.Constant):
            try:
                base, key = self.value(target.value, fr, pc), self.value(target.slice, fr, pc)
            except Untranslatable:
                base = key = None
            if isinstance(base, Obj) and isinstance(key, Expr) and key.text[:1] in "'\"" \
                    and not cg.free_names(key.text):
                k = ast.literal_eval(key.text)
                if isinstance(k, str):
                    self.set_attr(base, k, v, self.eff(fr, pc))
                    return
        super().assign(target, v, fr, pc)

    def dict_literal(self, node: ast.Dict, fr: Frame, pc: list[str]) -> Any:
        d = Dict_(f"dict@{fr.path}:{node.lineno}")
        for k, v in zip(node.keys, node.values):
            if k is None:
                other = self.value_or_taint(v, fr, pc)
                if not isinstance(other, Dict_):
                    raise Untranslatable("** of a dict the walk did not build")
                d.env.update(other.env)
            elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                d.env[k.value] = self.value_or_taint(v, fr, pc)
            else:
                kv = self.value_or_taint(k, fr, pc)  # a key held by a local (an unrolled loop's variable)
                if not (isinstance(kv, Expr) and kv.text[:1] in "'\"" and not cg.free_names(kv.text)):
                    raise Untranslatable("dict with a computed key")
                d.env[ast.literal_eval(kv.text)] = self.value_or_taint(v, fr, pc)
        self.dicts.append(d)
        return d

    def declare_call(self, node: ast.Call, fr: Frame, pc: list[str], conds: list[str]) -> Any:
        fields: dict[str, Any] = {}
        for k in node.keywords:
            if k.arg is None:
                d = self.value_or_taint(k.value, fr, pc)
                if isinstance(d, Dict_) and "*" not in d.env:
                    fields.update(d.env)
                else:
                    keys = self.possible_keys(k.value, fr)
                    if keys is None and isinstance(k.value, ast.Name):
                        keys = self.comprehension_keys(k.value.id)
                    self.lose(f"declare_resolution(**{ast.unparse(k.value)[:40]})", keys, conds)
            else:
                fields[k.arg] = self.value_or_taint(k.value, fr, pc)
        self.declare(fields, conds)
        return Expr(repr(cg.NONE))

    def possible_keys(self, node: ast.AST, fr: Frame) -> set[str] | None:
        """The keys a dict-returning call may return: string keys of dict literals and ``x["k"] =`` in the called
        function (None when a key is computed or the function is not in the wheel)."""
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            return None
        hit = self.find_function(node.func.id, fr.path)
        return None if hit is None else self.keys_of(hit[0])

    def comprehension_keys(self, local: str) -> set[str] | None:
        """Fields a dict comprehension ``local = {f"prefix_{x}": ... }`` of the current function may hold: every
        field with that constant prefix (SGLang's watermark config: ``watermark_<field>``)."""
        fn = self.current[-1] if self.current else None
        for n in ast.walk(fn) if fn is not None else []:
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                    and n.targets[0].id == local and isinstance(n.value, ast.DictComp):
                key = n.value.key
                if isinstance(key, ast.JoinedStr) and key.values and isinstance(key.values[0], ast.Constant):
                    prefix = str(key.values[0].value)
                    if prefix:
                        return {f for f in self.fields if f.startswith(prefix)}
        return None

    def invoke(self, func: ast.FunctionDef, path: str, self_obj: Obj | None, args: list, kwargs: dict,
               pc: list[str], cls: str | None = None) -> Any:
        self.current.append(func)
        try:
            return super().invoke(func, path, self_obj, args, kwargs, pc, cls)
        finally:
            self.current.pop()

    def call_named(self, fn: ast.AST, args: list[ast.AST], fr: Frame, pc: list[str]) -> Any:
        call = ast.Call(func=fn, args=args, keywords=[])
        ast.copy_location(call, fn)
        return self.call(call, fr, pc)

    def post_process(self, fn: ast.AST, sa: ast.AST, fr: Frame, pc: list[str], conds: list[str]) -> Any:
        snap = View(self, dict(self.decl))
        hit = self.find_function(fn.id, fr.path) if isinstance(fn, ast.Name) else None
        if hit is None:
            self.lose(f"post-process pass {ast.unparse(fn)}", None, conds)
            return Expr(repr(cg.NONE))
        try:
            out = self.invoke(hit[0], hit[1], None, [snap], {}, conds)
        except Untranslatable as e:
            out = TAINT
            self.losing_why = f"{fn.id}: {e}"
        if isinstance(out, Dict_):
            self.declare(dict(out.env), conds)
        else:
            keys = self.possible_keys(ast.Call(func=fn, args=[], keywords=[]), fr)
            self.lose(f"post-process pass {fn.id}" + (f" ({self.losing_why})" if self.losing_why else ""), keys,
                      conds)
            self.losing_why = ""
        return Expr(repr(cg.NONE))

    # ------------------------------------------------------------------ model
    def hf_config(self) -> Obj:
        return Obj("hf_config", lambda a: Expr(f"hf__{a}") if a in HF_ATTRS else None)

    def model_config(self) -> Obj:
        hf = self.hf_config()

        def free(a: str) -> Any:
            if a == "hf_config":
                return hf
            if a in MODEL_FACTS:
                return Expr(f"mc__{a}")
            if a in ARCH_DERIVED:  # ModelConfig.__init__ computes it from the architectures: walk that function
                path, name = ARCH_DERIVED[a]
                m = self.modules.get(path)
                fn = m.functions.get(name) if m else None
                if fn is None:
                    return None
                try:
                    return self.invoke(fn, path, None, [Expr("hf__architectures")], {}, [])
                except Untranslatable:
                    return None
            return None
        return Obj("model_config", free)

    def set_like(self, node: ast.AST, fr: Frame) -> bool:
        """``node`` is a set by its syntax alone (evaluating it is left to the caller)."""
        if isinstance(node, ast.Set):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("set", "frozenset"):
            return True
        if isinstance(node, ast.Name):
            return isinstance(fr.locals.get(node.id), SetVal)
        if isinstance(node, ast.IfExp):
            return self.set_like(node.body, fr) and self.set_like(node.orelse, fr)
        return False

    def set_value(self, node: ast.AST, fr: Frame, pc: list[str]) -> Any:
        """Sets (sglang kv_cache_hook.py:517-519 ``backends = set(attention_backends_of(..)); backends.discard(None);
        assert backends <= allowed``; attention_hook.py:55 ``set(..) != {"intel_xpu"}``); None: not a set."""
        if isinstance(node, ast.Set):
            return SetVal("(" + ", ".join(self.text(e, fr, pc) for e in node.elts) + ("," if len(node.elts) == 1
                                                                                      else "") + ")")
        if isinstance(node, ast.Call):
            v = self.value(node.args[0], fr, pc)
            if isinstance(v, SetVal):
                return v
            if isinstance(v, Expr) and not v.ref and self.listish(v.text):
                return SetVal(v.text)
            raise Untranslatable(f"{node.func.id}() of a value the walk cannot list")
        if isinstance(node, ast.IfExp):
            if not self.set_like(node, fr):
                return None
            t = self.text(node.test, fr, pc, True)
            return SetVal(f"({self.text(node.body, fr, pc)} if {t} else {self.text(node.orelse, fr, pc)})")
        if isinstance(node, ast.BinOp):
            if not isinstance(node.op, (ast.Sub, ast.BitOr, ast.BitAnd)) \
                    or not (self.set_like(node.left, fr) or self.set_like(node.right, fr)):
                return None
            a, b = self.value(node.left, fr, pc), self.value(node.right, fr, pc)
            if not all(isinstance(x, Expr) and not x.ref for x in (a, b)):
                raise Untranslatable("a set operation on an object")
            fn = {ast.Sub: "set_minus", ast.BitOr: "set_union", ast.BitAnd: "set_and"}[type(node.op)]
            return SetVal(f"{fn}({a.text}, {b.text})")
        if isinstance(node, ast.Compare):
            if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.Eq, ast.NotEq, ast.LtE, ast.Lt, ast.GtE, ast.Gt)):
                return None
            left, right = node.left, node.comparators[0]
            if not (self.set_like(left, fr) or self.set_like(right, fr)):
                return None
            a, b = self.value(left, fr, pc), self.value(right, fr, pc)
            if not (isinstance(a, SetVal) or isinstance(b, SetVal)):
                return None
            if not all(isinstance(x, Expr) and not x.ref for x in (a, b)):
                raise Untranslatable("a set compared with an object")
            op = node.ops[0]
            if isinstance(op, (ast.GtE, ast.Gt)):
                a, b, op = b, a, (ast.LtE() if isinstance(op, ast.GtE) else ast.Lt())
            if isinstance(op, (ast.Eq, ast.NotEq)):
                eq = f"set_eq({a.text}, {b.text})"
                return Expr(eq if isinstance(op, ast.Eq) else f"(not {eq})")
            sub = f"subset({a.text}, {b.text})"
            return Expr(sub if isinstance(op, ast.LtE) else f"({sub} and (not set_eq({a.text}, {b.text})))")
        return None

    @staticmethod
    def listish(text: str) -> bool:
        """``text`` is a tuple / list display (``attention_backends_of(view)``'s ``(prefill, decode)``)."""
        try:
            return isinstance(ast.parse(text, mode="eval").body, (ast.Tuple, ast.List))
        except SyntaxError:
            return False

    def set_mutation(self, node: ast.Call, fr: Frame, pc: list[str]) -> bool:
        """``s.discard(x)`` / ``s.add(x)`` / ``s.update(x)`` on a local set: the local becomes the changed set where
        the call runs (kv_cache_hook.py:518 ``backends.discard(None)``, :845 ``decode_allowed.update({..})``)."""
        f = node.func
        if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.attr in ("discard", "add",
                                                                                               "update", "remove")
                and len(node.args) == 1 and not node.keywords and isinstance(fr.locals.get(f.value.id), SetVal)):
            return False
        old = fr.locals[f.value.id]
        try:
            arg = self.value(node.args[0], fr, pc)
            if not isinstance(arg, Expr) or arg.ref:
                raise Untranslatable("a set changed by an object")
            if f.attr in ("discard", "remove"):
                new = SetVal(f"set_minus({old.text}, ({arg.text},))")
            elif f.attr == "add":
                new = SetVal(f"set_union({old.text}, ({arg.text},))")
            else:
                new = SetVal(f"set_union({old.text}, {arg.text})")
        except Untranslatable:
            new = TAINT
        self.assign(ast.Name(f.value.id, ast.Store()), new, fr, pc)
        return True

    def membership_over_list(self, gen: ast.AST, agg: str, fr: Frame, pc: list[str]) -> Expr | None:
        """``any(a in C for a in L)`` / ``all(a not in C for a in L)`` with ``C`` a constant and ``L`` a list the
        walk does not know element by element (``hf__architectures``): ``any_in(L, C)``, and its negations
        (model_hook.py:1106 LANGUAGE_MODEL_ONLY_ARCHITECTURES, moe_hook.py:258 validated architectures)."""
        if not isinstance(gen, (ast.GeneratorExp, ast.ListComp)) or len(gen.generators) != 1:
            return None
        g, e = gen.generators[0], gen.elt
        if g.ifs or g.is_async or not isinstance(g.target, ast.Name) or isinstance(g.iter, (ast.List, ast.Tuple)) \
                or not isinstance(e, ast.Compare) or len(e.ops) != 1 or not isinstance(e.ops[0], (ast.In, ast.NotIn)) \
                or not isinstance(e.left, ast.Name) or e.left.id != g.target.id:
            return None
        lst, const = self.value_or_taint(g.iter, fr, pc), self.value_or_taint(e.comparators[0], fr, pc)
        if not isinstance(lst, Expr) or lst.ref or not cg.free_names(lst.text) \
                or not isinstance(const, Expr) or const.ref or cg.free_names(const.text) \
                or not const.text.startswith("("):
            return None
        hit = f"any_in({lst.text}, {const.text})"
        if isinstance(e.ops[0], ast.In):
            return Expr(hit if agg == "any" else f"all_in({lst.text}, {const.text})")
        return Expr(f"(not all_in({lst.text}, {const.text}))" if agg == "any" else f"(not {hit})")

    def each(self, node: ast.AST, fr: Frame, pc: list[str]) -> list[str]:
        """checkgen's each, also over a constant or a local holding a literal (``any(m in archs for m in models)``,
        configs/model_config.py:2540-2546)."""
        if isinstance(node, (ast.GeneratorExp, ast.ListComp)) and len(node.generators) == 1:
            g = node.generators[0]
            if not g.ifs and not g.is_async and isinstance(g.target, ast.Name) \
                    and not isinstance(g.iter, (ast.List, ast.Tuple)):
                v = self.value(g.iter, fr, pc)
                items = None
                if isinstance(v, Expr) and not v.ref and not cg.free_names(v.text):
                    try:
                        items = ast.literal_eval(v.text)
                    except (ValueError, SyntaxError):
                        items = None
                if isinstance(items, tuple) and len(items) <= 64:
                    out = []
                    for x in items:
                        inner = Frame(fr.path, {**fr.locals, g.target.id: self.literal(x)}, fr.cls, fr.base)
                        out.append(self.text(node.elt, inner, pc, True))
                    return out
        return super().each(node, fr, pc)

    def model_overrides(self, node: ast.Call, fr: Frame, pc: list[str], conds: list[str]) -> Any:
        """The per-architecture providers (model_override_base.MODEL_OVERRIDES, register_model_override,
        _register_for, register_model_override_predicate) for the checkpoint's architecture, declared in order."""
        reg = self.override_registry()
        for arch, (path, fname) in reg["exact"]:
            m = self.modules.get(path)
            fn = m.functions.get(fname) if m else None
            cond = conds + [f"(hf__architecture == {arch!r})"]
            if fn is None:
                self.lose(f"override {fname}", None, cond)
                continue
            try:
                out = self.invoke(fn, path, None, [self.record, self.hf_config()], {}, cond)
            except Untranslatable:
                out = TAINT
            if isinstance(out, Dict_):
                self.declare(dict(out.env), cond)
            else:
                self.lose(f"override {fname}", self.keys_of(fn), cond)
        for arch, fields in reg["constant"]:
            self.declare({k: self.literal(v) for k, v in fields.items()}, conds + [f"(hf__architecture == {arch!r})"])
        if reg["predicate"]:
            self.lose("predicate model overrides", reg["predicate_keys"], conds)
        return TAINT

    def keys_of(self, fn: ast.FunctionDef) -> set[str] | None:
        keys: set[str] = set()
        for n in ast.walk(fn):
            if isinstance(n, ast.Dict):
                for k in n.keys:
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        keys.add(k.value)
                    elif k is not None:
                        return None
            elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store):
                if isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
                    keys.add(n.slice.value)
                else:
                    return None
        return keys & self.fields

    def override_registry(self) -> dict[str, Any]:
        if self.registry is not None:
            return self.registry
        exact: list[tuple[str, tuple[str, str]]] = []
        predicate_keys: set[str] | None = set()
        predicate = 0
        constant: list[tuple[str, dict[str, Any]]] = []
        paths = sorted(p for p in self.modules.names if p.startswith("sglang/srt/arg_groups/"))
        for p in paths:
            m = self.modules.get(p)
            if m is None:
                continue
            for fn in m.functions.values():
                for d in fn.decorator_list:
                    if not isinstance(d, ast.Call):
                        continue
                    dn = ast.unparse(d.func).split(".")[-1]
                    if dn in ("register_model_override", "_register_for"):
                        for a in d.args:
                            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                                exact.append((a.value, (p, fn.name)))
                    elif dn == "register_model_override_predicate":
                        predicate += 1
                        k = self.keys_of(fn)
                        predicate_keys = None if k is None or predicate_keys is None else predicate_keys | k
            if p.endswith("model_override_base.py"):
                for s in m.tree.body:
                    if isinstance(s, ast.AnnAssign) and ast.unparse(s.target) == "MODEL_OVERRIDES":
                        try:
                            constant = list(ast.literal_eval(s.value).items())
                        except ValueError:
                            pass
        self.registry = {"exact": exact, "constant": constant, "predicate": predicate,
                         "predicate_keys": predicate_keys}
        return self.registry

    # ------------------------------------------------------------------ overrides of checkgen
    def call(self, node: ast.Call, fr: Frame, pc: list[str]) -> Any:
        try:
            return super().call(node, fr, pc)
        except Untranslatable:
            self.note_lost(node, fr, pc)
            raise

    def note_lost(self, node: ast.Call, fr: Frame, pc: list[str]) -> None:
        """A call the walk could not follow: when it is handed the record or a view it may declare fields."""
        if isinstance(node.func, ast.Name) and node.func.id in BUILTINS:
            return
        handed = False
        for a in list(node.args) + [k.value for k in node.keywords]:
            try:
                v = self.value(a, fr, pc)
            except Untranslatable:
                continue
            if v is self.record or isinstance(v, View):
                handed = True
        if not handed:
            return
        fname = ast.unparse(node.func)[:60]
        keys = None
        if isinstance(node.func, ast.Name):
            hit = self.find_function(node.func.id, fr.path)
            if hit is not None:
                keys = self.declared_in(hit[0], hit[1], set())
        self.lose(fname, keys, self.eff(fr, pc))

    def declared_in(self, fn: ast.FunctionDef, path: str, seen: set[str]) -> set[str] | None:
        """Fields a function (and what it calls in the wheel) may declare: declare_resolution keywords, returned
        dict keys of its post-process passes; None when that cannot be bounded."""
        if fn.name in seen or len(seen) > 40:
            return set()
        seen.add(fn.name)
        out: set[str] = set()
        for n in ast.walk(fn):
            if isinstance(n, ast.Call):
                cn = ast.unparse(n.func).split(".")[-1]
                if cn == "declare_resolution":
                    for k in n.keywords:
                        if k.arg is None:
                            return None
                        out.add(k.arg)
                elif cn in ("run_post_process_pass", "record_foreign_defaults", "collect_model_override_declarations"):
                    return None
                elif isinstance(n.func, ast.Name):
                    hit = self.find_function(n.func.id, path)
                    if hit is not None:
                        sub = self.declared_in(hit[0], hit[1], seen)
                        if sub is None:
                            return None
                        out |= sub
            elif isinstance(n, ast.Attribute) and n.attr == "_resolved_overrides":
                return None
        return out & self.fields

    def result(self, fr: Frame) -> Any:
        dicts = [v for _, v in fr.returns if isinstance(v, Dict_)]
        if not dicts:
            return super().result(fr)
        out = Dict_(f"merged@{fr.path}")
        keys = {k for d in dicts for k in d.env}
        for k in keys:
            acc: Any = Expr(ABSENT)
            for conds, v in reversed(fr.returns):
                if not isinstance(v, Dict_):
                    if isinstance(v, Expr) and v.text == repr(cg.NONE):
                        val: Any = Expr(ABSENT)
                    else:
                        acc = TAINT
                        break
                else:
                    val = v.env.get(k, Expr(ABSENT))
                if cg.has_unknown(conds) or val is TAINT or not isinstance(acc, Expr) or not isinstance(val, Expr):
                    known = [c for c in conds if not cg.is_unknown(c)]
                    if known and isinstance(acc, Expr):
                        # a value the walk cannot model returned where the known conditions hold (the real
                        # condition implies them): unknown there, the later returns' value elsewhere
                        acc = Expr(f"({cg.UNK} if {cg.conj(known)} else {acc.text})")
                        continue
                    acc = TAINT if (cg.has_unknown(conds) or val is TAINT) else acc
                    if acc is TAINT:
                        break
                    continue
                acc = val if not conds else Expr(f"({val.text} if {cg.conj(conds)} else {acc.text})")
            out.env[k] = self.sg_bind(acc) if isinstance(acc, Expr) else TAINT
        return out

    def test(self, node: ast.AST, fr: Frame, pc: list[str]) -> str:
        t = super().test(node, fr, pc)
        return t if cg.is_unknown(t) else simplify(t)

    def value(self, node: ast.AST, fr: Frame, pc: list[str]) -> Any:
        v = super().value(node, fr, pc)
        if isinstance(v, Expr) and ("True" in v.text or "False" in v.text):
            return Expr(simplify(v.text))
        return v

    def merge(self, old: Any, new: Any, conds: list[str], first: bool) -> Any:
        conds = [c if cg.is_unknown(c) else simplify(c) for c in conds]
        if "False" in conds:
            return TAINT if old is None else old  # a dead branch: nothing assigned there
        conds = [c for c in conds if c != "True"]
        if first and cg.has_unknown(conds) and new is not TAINT:
            return new  # a local's first value: code after it runs only where it was assigned
        none = Expr(repr(cg.NONE))
        if isinstance(new, SpecAlgo) and old == none and conds and not cg.has_unknown(conds) and not first:
            # ``algo = None; if c: algo = SpeculativeAlgorithm.from_string(..)``: present where c holds
            present = cg.conj(conds) if new.truth is None else f"({cg.conj(conds)} and {new.truth})"
            out = SpecAlgo(f"({new.scalar} if {present} else {cg.NONE!r})", ())
            out.truth = present
            return out
        out = self.sg_bind(super().merge(old, new, conds, first))
        if not (isinstance(new, SetVal) or isinstance(old, SetVal)) or not isinstance(out, Expr) or out.ref:
            return out
        if not conds or first:
            return SetVal(out.text) if isinstance(new, SetVal) else out
        sides = [x for x in (old, new) if x is not TAINT and x is not None]
        if all(isinstance(x, SetVal) for x in sides):
            return SetVal(out.text)  # a set wherever known (``allowed = allowed - {..}`` in a branch)
        return TAINT  # a set on one side only: its comparisons would be neither the set nor the list ones

    def expr_stmt(self, node: ast.AST, fr: Frame, pc: list[str]) -> None:
        if isinstance(node, ast.Call) and self.set_mutation(node, fr, pc):
            return
        if isinstance(node, ast.Call):
            try:
                if self.hook(node, fr, pc) is not None:
                    return
            except Untranslatable:
                return
        super().expr_stmt(node, fr, pc)

    def unroll(self, s: ast.For, fr: Frame, pc: list[str], elts: list[ast.expr] | None = None) -> bool:
        """``for a, b in ((x1, y1), ...)`` over a tuple / list written out in the code (``elts``: the elements of the
        literal a local was assigned just before the loop; no break / continue / else): the body once per element, in
        order, each target bound to its element's value (untranslatable: unknown, that pass's sites untranslated)."""
        if s.orelse or any(isinstance(n, (ast.Break, ast.Continue)) for n in ast.walk(s)):
            return False
        if elts is None:
            if not isinstance(s.iter, (ast.Tuple, ast.List)):
                return False
            elts = s.iter.elts
        if len(elts) > 32 or any(isinstance(x, ast.Starred) for x in elts):
            return False
        width = len(s.target.elts) if isinstance(s.target, ast.Tuple) else None
        if width is not None and not all(isinstance(x, (ast.Tuple, ast.List)) and len(x.elts) == width
                                         and not any(isinstance(y, ast.Starred) for y in x.elts) for x in elts):
            return False
        for x in elts:
            pairs = list(zip(s.target.elts, x.elts)) if width is not None else [(s.target, x)]
            for t, v in pairs:
                self.assign(t, self.value_or_taint(v, fr, pc), fr, pc)
            self.run(s.body, fr, pc)
        return True

    def run(self, stmts: list[ast.stmt], fr: Frame, pc: list[str]) -> None:
        """checkgen's run, except that ``name = (..., ...)`` right before ``for x in name:`` unrolls that loop over
        the literal's elements (sglang deepseek_v4_hook.py:180-199, lora_hook.py:280-296)."""
        for i, st in enumerate(stmts):
            if fr.dead:
                return
            prev = stmts[i - 1] if i else None
            if isinstance(st, ast.For) and isinstance(st.iter, ast.Name) and isinstance(prev, ast.Assign) \
                    and len(prev.targets) == 1 and isinstance(prev.targets[0], ast.Name) \
                    and prev.targets[0].id == st.iter.id and isinstance(prev.value, (ast.Tuple, ast.List)) \
                    and self.unroll(st, fr, pc, prev.value.elts):
                continue
            self.stmt(st, fr, pc)

    def site(self, path: str, line: int, conds: list[str]) -> None:
        conds = [c if cg.is_unknown(c) else simplify(c) for c in conds]
        if "False" in conds:
            return  # not reached on this path
        conds = [c for c in conds if c != "True"]
        text = cg.conj(conds) if conds else "True"
        if len(text) > cg.MAX_TEXT and not cg.has_unknown(conds):  # checkgen would drop it: name parts as lets
            # a long condition of the path is named whole first (a conjunct is read only once the ones before it
            # held, like a let), then the conjunction is fitted if it is still over the limits
            parts = [self.new_let(c) if len(c) > FIT_PART and self.fit(c) == c else c for c in conds]
            self.sites.setdefault((path, line), []).append(self.fit(cg.conj(parts)))
            return
        super().site(path, line, conds)

    def stmt(self, s: ast.stmt, fr: Frame, pc: list[str]) -> None:
        if isinstance(s, ast.ImportFrom) and s.module and s.level == 0:
            # an import inside a function: the name resolves like a module-level import
            m = self.modules.get(fr.path)
            for a in s.names:
                local = a.asname or a.name
                fr.locals.pop(local, None)
                if m is not None and a.name != "*":
                    m.imports.setdefault(local, f"{s.module}.{a.name}")
            return
        if isinstance(s, ast.For) and self.unroll(s, fr, pc):
            return
        if isinstance(s, ast.Try) and s.handlers and all(_reraises(h) for h in s.handlers):
            # every handler ends by re-raising (bookkeeping, logging): what the body raises escapes as it is
            self.run(s.body, fr, pc)
            self.run(s.orelse, fr, pc)
            self.run(s.finalbody, fr, pc)
            return
        super().stmt(s, fr, pc)


def simplify(text: str) -> str:
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return text
    folded = cg.BoolFold().visit(tree)
    out = ast.unparse(folded)
    if out == ast.unparse(ast.parse(text, mode="eval")):
        return text
    # keep the term whole: the walk joins path conditions with " and ", so an ``or`` must keep its parentheses
    # (``(a != 'mooncake' or b)`` folded to ``a != 'mooncake' or b`` made kv_shard_hook.py:61 fire on any layer split)
    return out if isinstance(folded.body, (ast.Constant, ast.Name, ast.Call, ast.Compare)) else f"({out})"


def _reraises(h: ast.ExceptHandler) -> bool:
    return bool(h.body) and isinstance(h.body[-1], ast.Raise) and h.body[-1].exc is None and not any(
        isinstance(n, (ast.Return, ast.Break, ast.Continue)) for st in h.body for n in ast.walk(st))


def load_inputs(release: str) -> dict[str, Any]:
    import yaml
    p = ROOT / "catalog" / "engines" / "checks" / "inputs" / f"sglang-{release}.yaml"
    return yaml.safe_load(p.read_text())


def walk(release: str, wheel: Path, trace: set[str] = frozenset()) -> SglWalker:
    z = zipfile.ZipFile(wheel)
    mods = Modules(z)
    w = SglWalker(mods, load_inputs(release))
    w.trace = set(trace)
    sa = "sglang/srt/server_args.py"
    m = mods.get(sa)
    cls = m.classes["ServerArgs"]
    meth = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
    w.invoke(meth["resolve_once"], sa, w.record, [], {}, [], "ServerArgs")
    w.invoke(meth["check_server_args"], sa, w.record, [], {}, [], "ServerArgs")
    return w


def rows(w: SglWalker) -> dict[tuple[str, int], dict[str, Any]]:
    """(path, line) -> {expr, names, paths, translated}: checkgen.rows with the row functions of
    kg.engines.sglang.checkns."""
    from kg.engine.expr import ExprError, compile_expr
    from kg.engines.sglang.checkns import FUNCTIONS
    out = {}
    lets = dict(w.sg_lets)
    firing = cg.Firing(lets)
    for key, conds in w.sites.items():
        good = sorted({c for c in conds if c is not None})
        if not good:
            continue
        expr = good[0] if len(good) == 1 else "(" + " or ".join(cg._paren(c) for c in good) + ")"
        if expr in ("True", "(True)"):
            continue  # an unconditional raise on a path the walk reached: an internal branch, not a check
        try:
            compile_expr(expr, tuple(FUNCTIONS))
        except ExprError:
            fitted = w.fit(expr)
            if fitted is None:
                continue
            expr = fitted
            lets.update(w.sg_lets[len(lets):])
        if not firing.fires(expr):
            # every way to a refusal reads __unknown__ (directly or through a let): the row refuses nothing on any
            # stack, so the site is not covered (it would otherwise be counted as a table row that never evaluates)
            w.why[key] = NEVER_FIRES
            continue
        out[key] = {"expr": expr, "names": sorted(cg.free_names(expr)), "paths": len(conds),
                    "translated": len([c for c in conds if c])}
    return out


def rows_for(release: str, wheel: Path) -> tuple[dict[tuple[str, int], dict[str, Any]], list[tuple[str, str]], SglWalker]:
    """The rows, the lets and the walker; ``OPTKG_SGL_TRACE=field,...`` also logs (stderr) where each field turns
    unknown during the regeneration's own walk (``--trace`` without a second walk)."""
    import os
    trace = {f for f in os.environ.get("OPTKG_SGL_TRACE", "").split(",") if f}
    w = walk(release, wheel, trace)
    for f, where, conds in w.trace_log:
        print(f"trace: {f} unknown after {where} (where {conds})", file=sys.stderr)
    return rows(w), list(w.sg_lets), w


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("release")
    ap.add_argument("--wheel", type=Path)
    ap.add_argument("--why", action="store_true")
    ap.add_argument("--trace", nargs="+", default=[], metavar="FIELD",
                    help="print where each FIELD first turns unknown (the call the walk lost)")
    a = ap.parse_args(argv)
    from engine_check_sites import find_wheel
    wheel = a.wheel or find_wheel("sglang", a.release)
    w = walk(a.release, wheel, set(a.trace))
    for f, where, conds in w.trace_log:
        print(f"{f} unknown after {where} (where {conds})")
    found, lets = rows(w), list(w.sg_lets)
    scanned = {k: v for k, v in found.items() if k[0].startswith(SCANNED)}
    reached = {k for k in w.sites if k[0].startswith(SCANNED)}
    print(f"sites reached {len(reached)}, rows {len(scanned)} (all files {len(found)}), lets {len(lets)}")
    print("calls handed the record that the walk could not follow:")
    for k, v in sorted(w.lost.items(), key=lambda x: -x[1])[:40]:
        print(f"  {v:3d} {k}")
    if w.poisoned:
        print("every field unknown after:", w.poisoned)
    if a.why:
        whys: dict[str, int] = {}
        for k in reached - set(scanned):
            why = w.why.get(k, "?")
            why = re.sub(r"#\d+$", "", why)[:90]
            whys[why] = whys.get(why, 0) + 1
        for k, v in sorted(whys.items(), key=lambda x: -x[1])[:60]:
            print(f"  {v:3d} {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
