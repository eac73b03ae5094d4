"""Generate DeepSpeed's mechanical startup checks as rows over its JSON config (used by tools/training_check_sites.py).

DeepSpeed reads its config in two ways, both modelled from the released source (tools/checkgen.py walks it):

- ``get_scalar_param(param_dict, KEY, DEFAULT)`` and ``param_dict.get(KEY, DEFAULT)`` (runtime/config.py's getters):
  the value of ``KEY``, or ``DEFAULT`` when the key is absent;
- pydantic models (``DeepSpeedZeroConfig(**param_dict["zero_optimization"])`` ...): a field's value is its JSON key
  (its alias or its name: ``populate_by_name``), else its default; ``"auto"`` is what the HF integration fills in
  before DeepSpeed reads the config, so it is left unknown; a ``mode="before"`` field validator is walked on the
  value (its raises are rows too), a ``mode="after"`` model validator on the built model (``overlap_comm``'s
  stage-dependent default ...); a deprecated field that names the field as its ``new_param`` makes the field
  unknown when the deprecated key is given.

Inputs: each JSON key path is one name, ``ds__<key>__<key>`` (e.g. ``ds__zero_optimization__stage``); its value in a
job's namespace is the config's value there, ``'__absent__'`` when the config does not have the key, ``'__none__'``
for JSON null. ``dp_world_size`` is the data-parallel size DeepSpeedConfig computes (runtime/config.py:457-470:
the world size, over the mpu's model-parallel sizes when there is one).

Entries, in the order DeepSpeed runs them (deepspeed 0.19.8): ``DeepSpeedConfig.__init__`` (config.py:454-474:
``_reject_removed_config_keys``, ``_initialize_params``, ``_configure_train_batch_size``, ``_do_sanity_check``), then
the engine's own config checks (``DeepSpeedEngine`` methods over ``self._config``; ``ENGINE_ENTRIES`` with the line of
``__init__`` that calls each).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import checkgen as cg  # noqa: E402

PREFIX = "ds"
CONFIG = "deepspeed/runtime/config.py"
# DeepSpeedEngine.__init__ calls _do_sanity_check (engine.py:583); _configure_zero_optimizer builds the ZeRO optimizer
# from the config's accessors (engine.py:2633-2720; called from :685 / _configure_optimizer): its __init__ checks the
# reduce-scatter / communication dtype / bucket settings it is given
ENGINE_ENTRIES = ("_do_sanity_check", "_configure_zero_optimizer")
ENGINE = "deepspeed/runtime/engine.py"


def jname(path: tuple[str, ...]) -> str:
    for k in path:
        if not k.isidentifier():
            raise cg.Untranslatable(f"JSON key {k!r} is not a name")
    return "__".join((PREFIX,) + path)


# name -> the default DeepSpeed reads for that key when the config does not have it (filled during generation;
# written beside the rows so that a job's namespace holds value-or-default under one name)
DEFAULTS: dict[str, Any] = {}
CONFLICTS: set[str] = set()


def has(n: str) -> str:
    return f"has__{n}"


class Json(cg.Obj):
    """A JSON value at ``jpath`` of the config: a dict (``.get``, ``[...]``, ``in``) or a scalar (``scalar``). Its
    name holds the config's value or, when absent, the default DeepSpeed reads it with (``DEFAULTS``);
    ``has__<name>`` says whether the config has the key."""

    def __init__(self, jpath: tuple[str, ...], default: str | None = None):
        super().__init__("json:" + ".".join(jpath))
        self.jpath = jpath
        if not jpath:
            self.truth, self.scalar, self.present = "True", None, "True"
            return
        n = jname(jpath)
        self.present = has(n)
        self.scalar = n
        if default is not None:
            try:
                lit = ast.literal_eval(default)
            except (ValueError, SyntaxError):
                lit = cg.UNK
            if lit is cg.UNK or (n in DEFAULTS and DEFAULTS[n] != lit) or n in CONFLICTS:
                if n in DEFAULTS and lit is not cg.UNK and DEFAULTS[n] != lit:
                    CONFLICTS.add(n)
                self.scalar = f"({default} if (not {has(n)}) else {n})"
            else:
                DEFAULTS[n] = lit
        self.truth = f"truthy({self.scalar})"


class Empty(Json):
    """An empty dict standing in for an absent section (``param_dict.get(KEY, {})``): every key reads its default."""

    def __init__(self, default: str | None = None):
        cg.Obj.__init__(self, "json:{}")
        self.jpath = None
        d = default if default is not None else repr(cg.NONE)
        self.truth, self.scalar, self.present = f"truthy({d})", d, "False"


class DictView(Json):
    """A dict the code builds itself (``d = {}; d["stage"] = ...``) read as a config section."""

    def __init__(self, d: cg.Obj):
        cg.Obj.__init__(self, d.label)
        self.jpath, self.d = None, d
        self.truth, self.scalar, self.present = "True", None, "True"

    def key(self, key: str, default: str | None) -> Any:
        if key not in self.d.env:
            return Empty(default)
        v = self.d.env[key]
        if isinstance(v, cg.Obj):
            return as_json(v) or cg.UnknownObj()
        out = Empty()
        out.scalar = v.text if isinstance(v, cg.Expr) else cg.UNK
        out.truth, out.present = f"truthy({out.scalar})", "True"
        return out


def as_json(v: Any) -> Any:
    """``v`` as a JSON view: a Json, an empty dict literal (Empty), or a conditional of those; None otherwise."""
    if isinstance(v, Json):
        return v
    if isinstance(v, cg.ObjIf):
        a, b = as_json(v.a), as_json(v.b)
        return cg.ObjIf(v.cond, a, b) if a is not None and b is not None else None
    if isinstance(v, cg.Obj) and v.label.startswith("dict@") and v.free is None:
        return DictView(v) if v.env else Empty()
    if isinstance(v, cg.UnknownObj):
        return v
    return None


def child(base: Any, key: str, default: str | None) -> Any:
    if isinstance(base, cg.ObjIf):
        a, b = child(base.a, key, default), child(base.b, key, default)
        out = cg.ObjIf(base.cond, a, b)
        out.present = f"({a.present} if {base.cond} else {b.present})"
        return out
    if isinstance(base, cg.UnknownObj):
        return base
    if isinstance(base, DictView):
        return base.key(key, default)
    if isinstance(base, Empty) or base.jpath is None:
        return Empty(default)
    return Json(base.jpath + (key,), default)


class Generator:
    def __init__(self, sources: dict[str, str]):
        self.w = cg.Walker([cg.read_module(p, t) for p, t in sources.items()])
        self.w.hooks.append(self.hook)
        self.root = Json(())
        DEFAULTS.clear()
        CONFLICTS.clear()

    # ------------------------------------------------------------------ the config's object model
    def hook(self, w: cg.Walker, node: ast.AST, fr: cg.Frame, pc: list[str]) -> Any:
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr == "get" and node.args:
                base = as_json(w.value_or_taint(f.value, fr, pc))
                if base is not None:
                    key = w.value(node.args[0], fr, pc)
                    return self.child(base, key, node.args[1] if len(node.args) > 1 else None, fr, pc)
            if isinstance(f, ast.Name) and f.id == "get_zero_config" and len(node.args) == 1:
                # zero/config.py:71-78: the section, or {} when absent; the legacy `"zero_optimization": true`
                # form (read_zero_config_deprecated) is left unknown by the namespace (see kg/frameworks/deepspeed)
                base = as_json(w.value(node.args[0], fr, pc))
                if base is not None:
                    hit = w.find_class("DeepSpeedZeroConfig", "deepspeed/runtime/zero/config.py")
                    return self.build("DeepSpeedZeroConfig", hit[1], child(base, "zero_optimization", None), {}, pc)
            if isinstance(f, ast.Name) and f.id in ("pp_int", "pp_float") and node.args:
                return w.value(node.args[0], fr, pc)
            if isinstance(f, ast.Attribute) and f.attr == "keys" and not node.args:
                base = as_json(w.value_or_taint(f.value, fr, pc))
                if base is not None:
                    return base
            if ast.unparse(f) in ("copy.copy", "copy.deepcopy") and len(node.args) == 1:
                v = w.value(node.args[0], fr, pc)
                if isinstance(v, Json):
                    return v
            if isinstance(f, ast.Name):
                hit = w.find_class(f.id, fr.path)
                if hit is not None and self.is_model(hit[0].name, hit[1]):
                    return self.model(hit, node, fr, pc)
        if isinstance(node, ast.Subscript):
            base = as_json(w.value_or_taint(node.value, fr, pc))
            if base is not None:
                return self.child(base, w.value(node.slice, fr, pc), None, fr, pc)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            base = as_json(w.value_or_taint(node.comparators[0], fr, pc))
            if base is not None:
                key = w.value(node.left, fr, pc)
                present = self.child(base, key, None, fr, pc).present
                return cg.Expr(present if isinstance(node.ops[0], ast.In) else f"(not {present})")
        return None

    def child(self, base: Any, key: Any, default: ast.AST | None, fr: cg.Frame, pc: list[str]) -> Any:
        if not (isinstance(key, cg.Expr) and key.text.startswith("'")):
            raise cg.Untranslatable("a computed JSON key")
        k = ast.literal_eval(key.text)
        dtext = None
        if default is not None and not (isinstance(default, ast.Dict) and not default.keys):
            dtext = self.w.text(default, fr, pc)
        return child(base, k, dtext)

    def is_model(self, cls: str, path: str) -> bool:
        seen = set()
        while cls and cls not in seen:
            seen.add(cls)
            if cls in ("DeepSpeedConfigModel", "BaseModel"):
                return True
            hit = self.w.find_class(cls, path)
            if hit is None:
                return False
            c, path = hit
            cls = next((ast.unparse(b).split(".")[-1] for b in c.bases), None)
        return False

    def fields(self, cls: str, path: str) -> dict[str, dict[str, Any]]:
        """Pydantic fields of ``cls`` and its model bases: name -> {default (node), alias, model (class name of a
        nested model or None), validators [FunctionDef], deprecated_into (field name), path}."""
        hit = self.w.find_class(cls, path)
        if hit is None or cls in ("DeepSpeedConfigModel", "BaseModel"):
            return {}
        c, path = hit
        out: dict[str, dict[str, Any]] = {}
        for b in c.bases:
            out.update(self.fields(ast.unparse(b).split(".")[-1], path))
        validators: dict[str, list[ast.FunctionDef]] = {}
        for s in c.body:
            if isinstance(s, ast.FunctionDef):
                for d in s.decorator_list:
                    if isinstance(d, ast.Call) and ast.unparse(d.func) == "field_validator":
                        mode = next((ast.literal_eval(k.value) for k in d.keywords if k.arg == "mode"), "after")
                        for a in d.args:
                            if isinstance(a, ast.Constant):
                                validators.setdefault(a.value, []).append((s, mode))
        for s in c.body:
            if not (isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)):
                continue
            name, v = s.target.id, s.value
            info: dict[str, Any] = {"default": v, "alias": None, "model": None, "path": path, "deprecated_into": None,
                                    "factory": None}
            if isinstance(v, ast.Call) and ast.unparse(v.func) == "Field":
                kw = {k.arg: k.value for k in v.keywords}
                info["default"] = v.args[0] if v.args else kw.get("default")
                info["factory"] = kw.get("default_factory")
                if "alias" in kw and isinstance(kw["alias"], ast.Constant):
                    info["alias"] = kw["alias"].value
                extra = kw.get("json_schema_extra")
                if isinstance(extra, ast.Dict):
                    d = {ast.literal_eval(k): val for k, val in zip(extra.keys, extra.values) if isinstance(k, ast.Constant)}
                    if "new_param" in d and isinstance(d["new_param"], ast.Constant):
                        info["deprecated_into"] = d["new_param"].value
            for n in ast.walk(s.annotation):
                nm = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else None
                h = self.w.find_class(nm, path) if nm else None
                if h is not None and self.is_model(h[0].name, h[1]):
                    info["model"] = (h[0].name, h[1])
                    break
            info["validators"] = validators.get(name, [])
            out[name] = info
        return out

    def model(self, hit: tuple[ast.ClassDef, str], node: ast.Call, fr: cg.Frame, pc: list[str]) -> cg.Obj:
        cls, path = hit[0].name, hit[1]
        source: Json | None = None
        given: dict[str, Any] = {}
        for k in node.keywords:
            v = self.w.value_or_taint(k.value, fr, pc)
            if k.arg is None:
                source = as_json(v)
                if source is None:
                    raise cg.Untranslatable("** of something other than the config")
            else:
                given[k.arg] = v
        return self.build(cls, path, source, given, pc)

    def build(self, cls: str, path: str, source: Json | None, given: dict[str, Any], pc: list[str]) -> cg.Obj:
        fields = self.fields(cls, path)
        w = self.w
        deprecated = {i["deprecated_into"]: [] for i in fields.values() if i["deprecated_into"]}
        for n, i in fields.items():
            if i["deprecated_into"]:
                deprecated[i["deprecated_into"]].append(n)
        cache: dict[str, Any] = {}

        def free(attr: str) -> Any:
            if attr not in fields:
                return None
            if attr not in cache:
                cache[attr] = self.field_value(attr, fields, source, given, deprecated, pc)
            return cache[attr]
        hit = w.find_class(cls, path)
        obj = cg.Obj(f"{cls}()", free, cls, path=hit[1] if hit else path)
        for c in self.mro(cls, path):
            for s in c[0].body:
                if isinstance(s, ast.FunctionDef) and any(ast.unparse(d) in ('model_validator(mode="after")',
                                                                                  "model_validator(mode='after')")
                                                          for d in s.decorator_list):
                    w.invoke(s, c[1], obj, [], {}, pc, c[0].name)
        return obj

    def mro(self, cls: str, path: str) -> list[tuple[ast.ClassDef, str]]:
        out, seen = [], set()
        while cls and cls not in seen and cls not in ("DeepSpeedConfigModel", "BaseModel"):
            seen.add(cls)
            hit = self.w.find_class(cls, path)
            if hit is None:
                break
            out.append(hit)
            path = hit[1]
            cls = next((ast.unparse(b).split(".")[-1] for b in hit[0].bases), None)
        return list(reversed(out))

    def field_value(self, attr: str, fields: dict, source: Json | None, given: dict, deprecated: dict,
                    pc: list[str]) -> Any:
        info = fields[attr]
        w = self.w
        fr = cg.Frame(info["path"], {})
        if info["model"] is not None and attr not in given:
            sub_cls, sub_path = info["model"]
            key = info["alias"] or attr
            sub = child(source, key, None) if source is not None else Empty()
            optional = info["default"] is not None and ast.unparse(info["default"]) == "None"
            # an Optional section is built (and its validators run) only when the config has it
            obj = self.build(sub_cls, sub_path, sub, {}, pc + ([sub.present] if optional else []))
            obj.truth = sub.present if optional else "True"
            return obj
        if attr in given:
            raw = given[attr]
        else:
            default = cg.TAINT
            if info["default"] is not None:
                default = w.value_or_taint(info["default"], fr, pc)
            elif info["factory"] is not None and ast.unparse(info["factory"]) in ("list", "dict"):
                default = cg.Expr("()") if ast.unparse(info["factory"]) == "list" else cg.TAINT
            dt = default.text if isinstance(default, cg.Expr) else cg.UNK
            raw = cg.Expr(self.raw_text(source, attr, info["alias"], dt)) if source is not None else default
        for fn, mode in info["validators"]:
            if mode != "before" or raw is cg.TAINT:
                raw = cg.TAINT
                break
            params = [a.arg for a in fn.args.args]
            bound = {params[0]: cg.TAINT, params[1]: raw}
            for p in params[2:]:
                bound[p] = cg.TAINT
            f2 = cg.Frame(info["path"], bound, base=len(pc))
            w.run(fn.body, f2, list(pc))
            raw = w.result(f2)
        if deprecated.get(attr) and source is not None and isinstance(raw, cg.Expr):
            present = " or ".join(child(source, d, None).present for d in deprecated[attr])
            raw = cg.Expr(f"({cg.UNK} if ({present}) else {raw.text})")
        return raw

    def raw_text(self, source: Any, attr: str, alias: str | None, default: str) -> str:
        """The field's raw value read from ``source``: its alias key, else its name key, else ``default``."""
        if isinstance(source, cg.ObjIf):
            return (f"({self.raw_text(source.a, attr, alias, default)} if {source.cond} "
                    f"else {self.raw_text(source.b, attr, alias, default)})")
        if isinstance(source, cg.UnknownObj):
            return cg.UNK
        if isinstance(source, DictView):
            keys = [k for k in [attr, alias] if k and k in source.d.env]
            return child(source, keys[-1], default).scalar if keys else default
        if isinstance(source, Empty) or source.jpath is None:
            return default
        text = Json(source.jpath + (attr,), default).scalar
        if alias:
            a = jname(source.jpath + (alias,))
            text = f"({a} if {has(a)} else {text})"
        return text

    # ------------------------------------------------------------------ entries
    def run(self) -> tuple[dict, dict]:
        w = self.w
        cfg = cg.Obj("DeepSpeedConfig", lambda a: None, "DeepSpeedConfig", path=CONFIG)
        cfg.env["world_size"] = cg.Expr("dp_world_size")
        cfg.env["global_rank"] = cg.TAINT
        cfg.env["_param_dict"] = self.root
        m = w.modules[CONFIG]
        w.invoke(m.functions["_reject_removed_config_keys"], CONFIG, None, [self.root], {}, [])
        for name, args in (("_initialize_params", [self.root]), ("_configure_train_batch_size", []),
                           ("_do_sanity_check", [])):
            hit = w.find_method("DeepSpeedConfig", name, CONFIG)
            w.invoke(hit[0], hit[1], cfg, args, {}, [], "DeepSpeedConfig")
        self.cfg = cfg
        # the engine's own config checks: DeepSpeedEngine.__init__ calls _do_sanity_check (engine.py:583) on
        # self._config; a PipelineEngine sets pipeline_parallelism (pipe/engine.py), other engines do not
        eng = cg.Obj("DeepSpeedEngine", lambda a: None, "DeepSpeedEngine", path=ENGINE)
        eng.env["_config"] = cfg
        eng.env["pipeline_parallelism"] = cg.Expr("pipeline_engine")
        init = w.find_method("DeepSpeedEngine", "__init__", ENGINE)
        w.invoke(init[0], init[1], eng, [], {"config_class": cfg}, [], "DeepSpeedEngine")
        # the ZeRO optimizer the engine builds when ZeRO is on (engine.py _configure_optimizer -> :2633): the walk of
        # __init__ stops at the model / optimizer objects before it, so the builder is walked on its own, under
        # stage >= 1, with the client optimizer opaque (its constructor's config checks read only config accessors)
        zo = w.find_method("DeepSpeedEngine", "_configure_zero_optimizer", ENGINE)
        stage = jname(("zero_optimization", "stage"))
        try:
            w.invoke(zo[0], zo[1], eng, [cg.TAINT], {}, [f"({has(stage)} and {stage} >= 1)"], "DeepSpeedEngine")
        except cg.Untranslatable as e:
            w.opaque[f"_configure_zero_optimizer: {e}"] = w.opaque.get(f"_configure_zero_optimizer: {e}", 0) + 1
        return cg.rows(w), w.lets, dict(sorted(DEFAULTS.items())), dict(sorted(w.opaque.items(), key=lambda x: -x[1]))


# engine.py:2667-2668 picks the stage 1/2 optimizer class: DeepSpeedZeroOptimizer, or under ZenFlow a subclass made by
# ZenFlowZeroOptimizer.create (zenflow/zenflow_stage_1_and_2.py:53, its __init__ calls DeepSpeedZeroOptimizer's at :64).
# Both run DeepSpeedZeroOptimizer.__init__'s config checks, so the walk builds that class (same line count).
ZERO12_PICK = ("Stage1And2ZeroOptimizer = DeepSpeedZeroOptimizer if not self.zenflow else ZenFlowZeroOptimizer.create(\n"
               "                zenflow_config=self.zenflow_config())\n")
ZERO12_WALKED = "Stage1And2ZeroOptimizer = DeepSpeedZeroOptimizer\n            pass\n"


# ZeRO-3 (engine.py:2711-2795): the branch that builds the stage-3 optimizer runs unless the engine has no optimizer at
# all (DummyOptim: deepspeed.initialize with neither a config `optimizer` section nor a client optimizer, i.e. not a
# training job - every job optkg reads trains); its class pick reads SuperOffload, whose optimizer subclasses
# DeepSpeedZeroOptimizer_Stage3 (superoffload/superoffload_stage3.py:27) and runs its __init__ checks first
ZERO3_DUMMY = ("            if isinstance(optimizer, DummyOptim):\n"
               "                log_dist(\"Creating ZeRO Offload\", ranks=[0])\n")
ZERO3_DUMMY_WALKED = "            if False:  # a training job has an optimizer\n                pass\n"
ZERO3_PICK = ("                from deepspeed.runtime.zero.stage3 import DeepSpeedZeroOptimizer_Stage3\n"
              "                from deepspeed.runtime.superoffload.superoffload_stage3 import SuperOffloadOptimizer_Stage3\n"
              "                Stage3ZeroOptimizer = DeepSpeedZeroOptimizer_Stage3 if not self.super_offload(\n"
              "                ) else SuperOffloadOptimizer_Stage3\n")
ZERO3_WALKED = ("                pass\n                pass\n"
                "                Stage3ZeroOptimizer = DeepSpeedZeroOptimizer_Stage3\n                pass\n")
# quantized gradients: the engine takes the local all-to-all groups (engine.py:2161), a dict utils/groups.py:738-764
# fills and returns, never None; stage3.py:389-390 tests only that it is not None
A2A = "            self.local_all_to_all_group = groups._get_local_all_to_all_group()\n"
A2A_WALKED = "            self.local_all_to_all_group = 'local all-to-all groups'\n"
WALKED = ((ZERO12_PICK, ZERO12_WALKED), (ZERO3_DUMMY, ZERO3_DUMMY_WALKED), (ZERO3_PICK, ZERO3_WALKED), (A2A, A2A_WALKED))


def generate(sources: dict[str, str]) -> tuple[dict, list, dict, dict]:
    """Rows over the config's keys, the lets they read, the defaults of absent keys, the calls not modelled."""
    text = sources.get(ENGINE, "")
    for pick, walked in WALKED:
        text = text.replace(pick, walked)
    if ENGINE in sources:
        # the stage-3 class is imported inside _configure_zero_optimizer (engine.py:2747); the walk resolves
        # module-level imports only, so the same import is appended at the end (no line above it moves)
        sources = {**sources, ENGINE: text + "\nfrom deepspeed.runtime.zero.stage3 import DeepSpeedZeroOptimizer_Stage3\n"}
    return Generator(sources).run()
