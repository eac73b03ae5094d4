"""Generate vLLM's startup checks as rows optkg evaluates: a symbolic walk (tools/checkgen.py) of vLLM's own code
from ``EngineArgs`` to the built ``VllmConfig``, per release, over the user's options, the model's config.json and
the GPU.

The walk follows ``vllm serve`` in the order it runs (read at 0.33.0 / 0.34.0):

1. ``EngineArgs.__post_init__`` (engine/arg_utils.py), then ``EngineArgs.create_engine_config``: every sub-config
   is built from the (rewritten) ``EngineArgs`` fields and its ``__post_init__`` and pydantic validators are walked
   (``@config`` is a pydantic dataclass: field validators with ``mode="before"`` get the given value, then
   ``__post_init__``, then ``@model_validator(mode="after")``); ``VllmConfig(...)`` runs its ``__post_init__``,
   which calls the platform's ``check_and_update_config`` and the ``verify_*`` methods.
2. ``current_platform`` is the GPU's platform: the walk runs once as CUDA (``gpu_vendor == 'nvidia'``) and once as
   ROCm (``gpu_vendor == 'amd'``); ``is_cuda()`` / ``is_rocm()`` / ``is_cuda_alike()`` are known on each walk and
   ``has_device_capability(n)`` / ``get_device_capability()`` read optkg's ``gpu_compute_capability``. A row whose
   condition is the same on both walks does not name the vendor.
3. The model: ``get_config(...)`` (the Hugging Face config.json) is the model's facts: an attribute optkg reads the
   same way (``MODEL_ATTRS``) is that fact, any other is not modelled (its checks are not generated).

Inputs: every ``EngineArgs`` field is an input named after the field; a JSON option (``--compilation-config``,
``--speculative-config`` ...) is a dict whose keys are inputs named ``<option>__<key>``. ``defaults`` gives each
input's value when the user does not give it (the field's default, ``'__none__'`` for None).

The rows are under-approximations (tools/checkgen.py): a row is written only where every condition on the path to
the check translates, so it fires only where vLLM's own code raises on the same inputs.
"""
from __future__ import annotations

import ast
import copy
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import checkgen as cg  # noqa: E402
import vllm_breakable  # noqa: E402
import vllm_encoder_attn  # noqa: E402
import vllm_device_ids  # noqa: E402
import vllm_enums  # noqa: E402
import vllm_fields_loop  # noqa: E402
import vllm_loops  # noqa: E402
import vllm_choices  # noqa: E402
import vllm_regex  # noqa: E402
import vllm_kwargs  # noqa: E402
import vllm_model_walk  # noqa: E402
import vllm_pairs  # noqa: E402
from row_firing import ValueFiring  # noqa: E402
import vllm_draft_setup  # noqa: E402
import vllm_hisparse  # noqa: E402
import vllm_moe_ep  # noqa: E402
import vllm_quant_spec  # noqa: E402
import vllm_removed_keys  # noqa: E402
import vllm_rocm_models  # noqa: E402
from vllm_draft_walk import call_hook as draft_call_hook, draft_walk, expr_hook as draft_expr_hook  # noqa: E402
from vllm_speculators import SPEC_CONFIG, SPEC_DIR, VARIES, filled_when_none, speculator_class_attrs, speculator_effects  # noqa: E402

NONE = cg.NONE
ARGS_PATH = "vllm/engine/arg_utils.py"
# modules the walk reads (the scanned folders of tools/engine_check_sites.py and what their checks call)
WALKED = ("vllm/config/", "vllm/engine/arg_utils.py", "vllm/platforms/", "vllm/envs.py")
# platform walks: (vendor fact value, platform class, module)
PLATFORMS = (("nvidia", "NvmlCudaPlatform", "vllm/platforms/cuda.py"),
             ("amd", "RocmPlatform", "vllm/platforms/rocm.py"),
             ("intel", "XPUPlatform", "vllm/platforms/xpu.py"))
PLATFORM_KINDS = {"nvidia": "cuda", "amd": "rocm", "intel": "xpu"}
# the fact that tells the Intel XPU walk's rows from the CUDA-alike ones (kg.engines.vllm release_facts: the GPU's
# vendor is intel; False without a GPU, so a stack without one reads the CUDA / ROCm rows it read before)
XPU_FACT = "gpu_is_xpu"
# JSON options (EngineArgs fields whose value is a dict turned into a config class); their keys are inputs
JSON_FIELD = "{field}__{key}"


# fit (VllmWalker.fit): a part named as a let has at most this many syntax nodes; at most this many rounds; a value
# longer than FIT_MAX_CHARS is left unknown (tools/sglang_generated_checks.py's limits)
FIT_ROUNDS = 64
FIT_MAX_CHARS = 400_000
COST_ERRORS = ("expression is ", "expression nests deeper")  # kg/engine/expr.py's wording of its cost limits

# the per-architecture hooks VllmConfig.try_verify_and_update_config runs (not walked: see model_hook_attrs)
MODEL_HOOKS = "vllm/model_executor/models/config.py"
# the histogram bucket families ObservabilityConfig checks --custom-histogram-buckets against (0.34.0
# observability.py:186, ``from vllm.v1.metrics.buckets import BUCKET_FAMILY_KEYS``)
BUCKETS = "vllm/v1/metrics/buckets.py"
KV_KINDS = "vllm/v1/kv_cache_interface.py"  # KVCacheSpecKind, the kinds --attention-config backend_per_kind names
# the module config/model.py reads as ``me_quant`` (LazyLoader): its literal constants only (vllm_model_walk)
QUANT_INIT = "vllm/model_executor/layers/quantization/__init__.py"


def read_sources(wheel: Path) -> dict[str, str]:
    out = {}
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            if (name in (MODEL_HOOKS, MLA_SOURCE, BUCKETS, KV_KINDS, QUANT_INIT, vllm_encoder_attn.ATTN_REGISTRY) or (name.startswith(SPEC_DIR) and name.endswith("config.py"))
                    or (name.endswith(".py") and any(name.startswith(p) for p in WALKED))):
                out[name] = z.read(name).decode("utf-8", errors="replace")
    return out


# sub-config fields of VllmConfig / ModelConfig a hook's assignment can name as its base (``attention_config.X = ``):
# such an X changes on that sub-config only; any other base (``config``, ``vllm_config``, a local the hook did not
# read from one of these) may be any config object
HOOK_SUBCONFIGS = {"attention_config", "cache_config", "compilation_config", "kernel_config", "pooler_config",
                   "structured_outputs_config", "scheduler_config", "parallel_config", "hf_config",
                   "hf_text_config", "model_arch_config", "mamba_config", "lora_config", "load_config",
                   "speculative_config", "multimodal_config", "model_config"}


def model_hook_fields(text: str) -> dict[str, set[str]]:
    """attribute -> the sub-configs (HOOK_SUBCONFIGS) the per-architecture hooks assign it on, or {"*"} when some
    assignment's base is not one of them (a local read from one counts as it: ``attn_config =
    vllm_config.attention_config``); model_hook_attrs is the key set."""
    return _assigned(ast.parse(text)) if text else {}


def _assigned(node: ast.AST) -> dict[str, set[str]]:
    """model_hook_fields over one class or function: attribute -> the sub-configs it is assigned on; a method called
    on a config object's field that changes it in place (``custom_ops.append``) counts as assigning that field."""
    out: dict[str, set[str]] = {}
    alias: dict[str, str] = {}
    for n in ast.walk(node):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            last = ast.unparse(n.value).split(".")[-1]
            alias[n.targets[0].id] = last if last in HOOK_SUBCONFIGS else "*"
    for n in ast.walk(node):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, (ast.AugAssign,
                                                                                             ast.AnnAssign)) else []
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Attribute)
                and n.func.attr in ("append", "extend", "insert", "remove", "pop", "update", "setdefault", "clear")):
            targets = [n.func.value]
        for t in targets:
            # ``compilation = vllm_config.compilation_config; compilation.cudagraph_mode = ...`` (config.py:466-476)
            if isinstance(t, ast.Attribute) and (re.search(r"config\b", ast.unparse(t.value)) or (
                    isinstance(t.value, ast.Name) and alias.get(t.value.id, "*") != "*")):
                base = ast.unparse(t.value).split(".")[-1]
                base = base if base in HOOK_SUBCONFIGS else alias.get(base, "*") if base.isidentifier() else "*"
                out.setdefault(t.attr, set()).add(base)
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr" and len(n.args) == 3
                and isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str)):
            out.setdefault(n.args[1].value, set()).add("*")
    return out


def model_hook_classes(text: str) -> tuple[dict[str, str], dict[str, set[str] | None]]:
    """(architecture -> its hook class in ``MODELS_CONFIG_MAP``, hook class -> the attributes it may assign, None for
    a class that calls a method of a config object the walk cannot read, which may change anything): a class's are
    its own (every method), its bases' in the module, and those of the module's classes and functions it names."""
    tree = ast.parse(text) if text else ast.Module([], [])
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    arch: dict[str, str] = {}
    for n in tree.body:
        target = n.target if isinstance(n, ast.AnnAssign) else n.targets[0] if isinstance(n, ast.Assign) else None
        if isinstance(target, ast.Name) and target.id == "MODELS_CONFIG_MAP" and isinstance(n.value, ast.Dict):
            for k, v in zip(n.value.keys, n.value.values):
                if isinstance(k, ast.Constant) and isinstance(v, ast.Name):
                    arch[k.value] = v.id
    own: dict[str, set[str] | None] = {}
    refs: dict[str, set[str]] = {}
    for name, d in defs.items():
        own[name] = set(_assigned(d))
        refs[name] = {n.id for n in ast.walk(d) if isinstance(n, ast.Name) and n.id in defs and n.id != name}
        for n in ast.walk(d):
            if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and re.search(r"config\b", ast.unparse(n.func.value))
                    and n.func.attr not in ("append", "extend", "insert", "remove", "pop", "update", "setdefault",
                                            "clear", "get", "values", "keys", "items", "get_text_config",
                                            "startswith", "endswith", "lower", "upper")):
                own[name] = None  # set_dcp_defaults, resolve_indexer_logits_dtype ...: not read here
                break
    out: dict[str, set[str] | None] = {}
    for name in defs:
        seen, todo, acc = set(), [name], set()
        while todo:
            c = todo.pop()
            if c in seen:
                continue
            seen.add(c)
            if own[c] is None:
                acc = None
                break
            acc |= own[c]
            todo += sorted(refs[c])
        out[name] = acc
    return arch, out


def hook_condition(w: "VllmWalker", root: cg.Obj, hybrid: bool, pc: list[str]) -> Any:
    """name -> the condition under which the architecture hooks (try_verify_and_update_config, vllm.py:2816-2852 at
    0.34.0; ModelConfig._try_verify_and_update_model_config, model.py:1525-1540) may assign it: the served
    architecture (``vllm_model__arch``, given only for a registered one, which _normalize_arch keeps) is one whose
    MODELS_CONFIG_MAP class assigns it, or (VllmConfig's) the model is hybrid and HybridAttentionMambaModelConfig does;
    None (unknown everywhere) where that cannot be told."""
    mc = root if root.cls == "ModelConfig" else None
    if mc is None:
        try:
            got = w.get_attr(root, "model_config", pc)
        except cg.Untranslatable:
            got = None
        mc = got if isinstance(got, cg.Obj) and got.cls == "ModelConfig" else None
    if mc is None or not served_model_config(w, mc) or w.hook_classes is None:
        return None
    arch_map, fields = w.hook_classes
    try:
        arch = w.as_text(w.get_attr(mc, "_architecture", pc))
    except cg.Untranslatable:
        return None
    is_hybrid = None
    if hybrid:
        try:
            is_hybrid = w.as_text(w.get_attr(mc, "is_hybrid", pc), True)
        except cg.Untranslatable:
            is_hybrid = None

    def cond(name: str) -> str | None:
        if any(fields.get(c) is None for c in set(arch_map.values())):
            opaque = sorted(a for a, c in arch_map.items() if fields.get(c) is None)
        else:
            opaque = []
        archs = sorted(set(opaque) | {a for a, c in arch_map.items() if fields.get(c) and name in fields[c]})
        parts = [f"{arch} in {tuple(archs)!r}"] if archs else []
        hy = fields.get("HybridAttentionMambaModelConfig")
        if hybrid and (hy is None or name in hy):
            if is_hybrid is None or cg.is_unknown(is_hybrid):
                return None
            parts.append(is_hybrid)
        return "(" + " or ".join(parts) + ")" if parts else "False"
    return cond


def model_hook_attrs(text: str) -> set[str]:
    """Every attribute name the per-architecture config hooks assign on a config object (``cache_config.X = ``,
    ``vllm_config.attention_config.X = ``, ``setattr(..., 'X', ...)``, ``X.append(...)``): the walk does not follow
    those hooks (they are chosen by the architecture at run time), so each such field is unknown after them where
    the served architecture's hook may assign it (hook_condition)."""
    return set(model_hook_fields(text))


# calls the walk does not follow that read the config objects they are handed and change none of them (read at
# 0.34.0; the same at 0.33.0): they keep what the walk knows of those objects (checkgen pure_calls)
READ_ONLY_CALLS = {
    "Executor.get_class": "v1/executor/abstract.py:65-104: a class picked by parallel_config's executor backend",
    "bi._get_tuned_matmul_arch_family": "model_executor/determinism/batch_invariant_configs.py:1227: capability -> name",
    "registry.is_text_generation_model": "model_executor/models/registry.py: looks the architectures up",
    "registry.is_pooling_model": "model_executor/models/registry.py: looks the architectures up",
    "registry.inspect_model_cls": "model_executor/models/registry.py: looks the architectures up",
    "self.registry.is_pp_supported_model": "model_executor/models/registry.py: looks the architectures up",
    "ModelRegistry._normalize_arch": "model_executor/models/registry.py: looks the architectures up",
    "resolve_kv_cache_dtype_string": "utils/torch_utils.py:518-536: reads hf_config.quantization_config",
    "MULTIMODAL_REGISTRY.get_processing_info": ("multimodal/registry.py:137-148: builds the model's processing info; "
                                                "nothing in vllm/multimodal/ or the models assigns through it"),
    "TurboQuantConfig.get_boundary_skip_layers": ("model_executor/layers/quantization/turboquant/config.py:178-: "
                                                  "layer indices read from the model config"),
    "ModelArchConfigConvertorBase.get_torch_dtype": "transformers_utils/model_arch_config_convertor.py: reads the dtype",
    "self.registry.is_hc_sp_supported_model": "model_executor/models/registry.py: looks the architectures up",
    "VllmConfig._get_quantization_config": ("config/vllm.py:880-913 and model_loader/weight_utils.py get_quant_config: "
                                            "no assignment to the model or load config"),
    "get_sparse_attention_config": "no assignment to the configs it reads (grep at 0.34.0)",
    "current_platform.get_default_ir_op_priority": "platforms/*.py: returns op priorities; assigns nothing on vllm_config",
    "KVConnectorFactory.get_connector_class": "distributed/kv_transfer/kv_connector/factory.py: a class lookup",
    "cached_tokenizer_from_config": "tokenizers: loads the tokenizer the model config names; assigns nothing on it",
    "mm_config.validate_mm_processor_device": "config/multimodal.py: a check; assigns nothing on the configs it reads",
    "KVConnectorFactory.kv_cache_access": "distributed/kv_transfer/kv_connector/factory.py: a lookup",
    # the per-architecture hooks of model_executor/models/config.py: the fields they assign (model_hook_attrs) are
    # made unknown where the walk meets try_verify_and_update_config / _try_verify_and_update_model_config
    "cls.verify_and_update_config": "model_executor/models/config.py (model_hook_attrs)",
    "cls.verify_and_update_model_config": "model_executor/models/config.py (model_hook_attrs)",
    "HybridAttentionMambaModelConfig.verify_and_update_config": "model_executor/models/config.py (model_hook_attrs)",
    "SequenceClassificationConfig.verify_and_update_config": "model_executor/models/config.py (model_hook_attrs)",
}
# SpeculativeConfig.__post_init__ (config/speculative.py:1349-1416 at 0.34.0) hands itself to the speculator config
# class it picks (v1/worker/gpu/spec_decode/**/config.py): these change only the fields tools/vllm_speculators.py
# reads from those modules (VllmWalker.speculator_fields)
# (the ``speculator_config`` property, :1418-1422, builds ``get_speculator_config_class(self)(self)``, whose only
# __init__, v1/worker/gpu/spec_decode/speculator_config.py:96, stores the spec on the new object)
SPECULATOR_CALLS = {"config_cls.configure", "config_cls.apply_options", "config_cls.default_model",
                    "get_method_config_class", "get_speculator_config_class", "get_speculator_config_class(self)"}
# calls not followed that change only the named fields of the objects handed to them (VllmWalker.forget_all)
PARTIAL_EFFECTS = {
    # config/kernel.py:488-520 KernelConfig.set_platform_defaults: only self.ir_op_priority (setattr / extend)
    "self.kernel_config.set_platform_defaults": {"ir_op_priority"},
    # transformers_utils/model_arch_config_convertor.py:581-674: a convertor rewrites architectures and adds the
    # joint / decision head configs of a few models
    "convertor_cls": {"architectures", "joint_head_config", "decision_config"},
}


def _deco_names(node: ast.AST) -> list[str]:
    return [ast.unparse(d.func if isinstance(d, ast.Call) else d).split(".")[-1] for d in node.decorator_list]


class VllmWalker(cg.Walker):
    """checkgen's walker with vLLM's config classes (pydantic dataclasses under ``@config``), validators and the
    platform object."""
    def __init__(self, modules: list[cg.Module], platform: tuple[str, str, str],
                 lets: list[tuple[str, str]] | None = None):
        super().__init__(modules)
        if lets is not None:  # the CUDA and ROCm walks share one list of named long values (see bind)
            self.lets = lets
        self.vendor, pcls, ppath = platform
        self.platform = cg.Obj(f"current_platform[{self.vendor}]", None, pcls, path=ppath)
        self.hooks.append(_hook)
        self.hooks.append(vllm_pairs.order_hook)  # ordered-list checks as pairs (tools/vllm_pairs.py)
        self.hooks.append(vllm_loops.element_hook)  # any()/all() over a list, x[i], isfinite (tools/vllm_loops.py)
        self.hooks.append(vllm_regex.value_hook)  # PATTERN.fullmatch(x) of the release's own pattern (vllm_regex.py)
        self.hooks.append(vllm_choices.value_hook)  # TABLE.get(k), getattr(o, <its value>) (tools/vllm_choices.py)
        self.hooks.append(vllm_kwargs.hook)  # dict(k=v, ...) and its None-dropping copy (tools/vllm_kwargs.py)
        self.hooks.append(vllm_model_walk.value_hook)  # {m.value for m in Enum} (tools/vllm_model_walk.py)
        self.hooks.append(vllm_device_ids.value_hook)  # the platform's device-control variable (tools/vllm_device_ids.py)
        self.loops: list[tuple[str, str]] = []  # the loops walked per element: (target, list)
        self.generator_depth = 0
        self.input_info: dict[str, dict[str, Any]] = {}
        envs = self.modules.get("vllm/envs.py")
        self.env = env_defaults(ast.unparse(envs.tree)) if envs else {}
        self.fitted = {}

    fitted: dict[str, str | None]
    opaque_calls_forget_args = True  # checkgen: a call not followed that is handed a config forgets its fields
    pure_calls = frozenset(READ_ONLY_CALLS)
    branch_conditions = True
    unknown_returns = True
    record_fills = True
    post_init_initvars = True  # checkgen: ModelConfig's multimodal InitVars, SchedulerConfig's max_model_len
    model_hook_attrs: set[str] = set()
    model_hook_fields: dict[str, set[str]] | None = None  # attribute -> sub-configs it is assigned on ("*": any)
    speculator_fields: list[str] | None = None  # fields a speculator config class may assign (None: any)
    speculator_fills: frozenset[str] = frozenset()  # of those, the ones only ever filled in where None
    speculator_attrs: dict[str, dict[str, Any]] | None = None  # method -> class attributes (speculator_class_attrs)
    deepseek_mla_types: list[str] = []
    named_enums: dict[str, Any] = {}  # class -> vllm_enums.NamedEnum
    hook_classes: tuple[dict[str, str], dict[str, set[str] | None]] | None = None  # model_hook_classes
    presence_envs: frozenset[str] = frozenset()  # env_presence
    in_create_model_config = 0
    in_draft_walk = False

    def get_attr(self, obj: cg.Obj, attr: str, pc: list[str] | None = None) -> Any:
        if attr in ("_model_info", "_architecture") and obj.cls == "ModelConfig" and served_model_config(self, obj):
            # the registry's _ModelInfo of the served architecture and the architecture it resolved (model_info_obj)
            return model_info_obj() if attr == "_model_info" else cg.Expr("vllm_model__arch")
        # a property of the served model's ModelConfig that optkg reads from the same config.json (model_props)
        if attr not in obj.env and obj.cls == "ModelConfig" and attr in self.props and served_model_config(self, obj):
            text = self.props[attr]
            for env in sorted(cg.free_names(text) & set(self.env)):
                self.inputs.add(env)
                self.input_info.setdefault(env, {"kind": "env", "default": self.env[env]})
            return cg.Expr(text)
        return super().get_attr(obj, attr, pc)

    @property
    def props(self) -> dict[str, str]:
        if not hasattr(self, "_props"):
            self._props = model_props(self)
        return self._props

    def expr_stmt(self, node: ast.AST, fr: cg.Frame, pc: list[str]) -> None:
        if isinstance(node, ast.Call) and draft_expr_hook(self, node, fr, pc):
            return
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("try_verify_and_update_config", "_try_verify_and_update_model_config")):
            # the architecture's hooks (MODEL_HOOKS: VllmConfig's and ModelConfig's) may set any field they assign
            # somewhere: unknown from here on
            try:
                root = self.value(node.func.value, fr, pc)
            except cg.Untranslatable:
                root = None
            if isinstance(root, cg.Obj):
                hybrid = node.func.attr == "try_verify_and_update_config"  # vllm.py:2846-2847 at 0.34.0
                self.forget_fields(root, self.model_hook_attrs, hook_condition(self, root, hybrid, pc),
                                   self.eff(fr, pc))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
                and len(node.args) == 3 and self.const_str(node.args[1], fr, pc) is None):
            # setattr with a name the walk cannot tell (checkgen only counts it): any field of the object may
            # change, so every field is unknown from here on
            try:
                base = self.value(node.args[0], fr, pc)
            except cg.Untranslatable:
                base = None
            if isinstance(base, cg.Obj):
                fields = (self.dataclass_fields(base.cls, base.path) or {}) if base.cls else {}
                for f in sorted(set(fields) | set(base.env)):
                    base.env[f] = cg.TAINT
                self.opaque["setattr(<computed name>)"] = self.opaque.get("setattr(<computed name>)", 0) + 1
                return
        if vllm_loops.list_append(self, node, fr, pc) or vllm_loops.sort_in_place(self, node, fr, pc):
            return
        if isinstance(node, ast.Call):
            vllm_draft_setup.configure_hook(self, node, fr, pc)  # the draft setup's checks (tools/vllm_draft_setup.py)
        # a call made for its effect goes to checkgen's call(), not the value hooks: the optimization-level
        # defaults are applied here (see _call_hook)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "_apply_optimization_level_defaults"
                and _call_hook(self, node.func.attr, node, fr, pc) is not None):
            return
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and vllm_moe_ep.call_hook(self, node.func.id, node, fr, pc, served_model_config) is not None):
            return  # the MoE-EP backend's architectures (tools/vllm_moe_ep.py), a call made for its refusal
        super().expr_stmt(node, fr, pc)

    def forget_all(self, obj: cg.Obj, why: str, conds: list[str], seen: dict[int, cg.Obj] | None = None) -> None:
        if isinstance(obj, DictLit):
            obj.mutated = True
            return
        if why in SPECULATOR_CALLS and obj.cls == "SpeculativeConfig" and self.speculator_fields is not None:
            # a speculator config class's setup (tools/vllm_speculators.py): only the fields some class assigns
            for f in self.speculator_fields:
                if f in self.speculator_fills:  # filled in only where None (a given value stays)
                    try:
                        cur = self.get_attr(obj, f)
                    except cg.Untranslatable:
                        cur = cg.TAINT
                    if isinstance(cur, cg.Expr):
                        self.set_attr(obj, f, cg.TAINT, conds + [f"({cur.text} == {NONE!r})"])
                        continue
                self.set_attr(obj, f, cg.TAINT, conds)
            return
        if why in PARTIAL_EFFECTS:  # a call whose effects are read from the source: only those fields
            if why == "self.kernel_config.set_platform_defaults":
                try:
                    obj = self.get_attr(obj, "kernel_config")
                except cg.Untranslatable:
                    obj = None
            if isinstance(obj, cg.Obj):
                for f in sorted(PARTIAL_EFFECTS[why]):
                    self.set_attr(obj, f, cg.TAINT, conds)
            return
        super().forget_all(obj, why, conds, seen)

    def forget_fields(self, root: cg.Obj, names: set[str], cond_of: Any = None, conds: list[str] | None = None
                      ) -> None:
        """Fields ``names`` of ``root`` and of every config object it holds (two levels: vllm_config.X_config,
        model_config.hf_config) become unknown: where ``cond_of(name)`` (hook_condition) holds when it gives one,
        everywhere else."""
        seen: dict[tuple[int, str], cg.Obj] = {}  # held, so that no id is reused while the walk lasts
        todo: list[tuple[cg.Obj, int, str]] = [(root, 0, "")]
        where = self.model_hook_fields or {}
        while todo:
            obj, depth, via = todo.pop()
            if (id(obj), via) in seen:  # an object held under two names is forgotten under each
                continue
            seen[(id(obj), via)] = obj
            for n in sorted(names):
                bases = where.get(n, {"*"})
                # a field a hook assigns only on named sub-configs changes on those only (model_hook_fields)
                if "*" in bases or via in bases or (via == "" and obj.cls == "ModelConfig" and "model_config" in bases):
                    cond = cond_of(n) if cond_of is not None else None
                    known = n in obj.env or n in ((self.dataclass_fields(obj.cls, obj.path) or {}) if obj.cls else {})
                    if cond is None or not known:  # a name no field of this object has: as before
                        obj.env[n] = cg.TAINT
                    elif cond != "False":
                        self.set_attr(obj, n, cg.Expr(cg.UNK), (conds or []) + [cond])
            if depth >= 2:
                continue
            fields = (self.dataclass_fields(obj.cls, obj.path) or {}) if obj.cls else {}
            for f in sorted(set(fields) | set(obj.env)):
                if not f.endswith("config"):
                    continue
                try:
                    sub = self.get_attr(obj, f)
                except cg.Untranslatable:
                    continue
                if isinstance(sub, cg.Obj):
                    todo.append((sub, depth + 1, f))

    def bind(self, text: str) -> Any:
        """checkgen's bind, but a value already named (by this or the other platform's walk) keeps its name, so
        rows the two walks both reach compare equal by text; a value over the expression limits is fitted (its
        largest parts named as lets, ``fit``) instead of becoming unknown."""
        for name, t in self.lets:
            if t == text:
                return cg.Expr(name)
        if len(text) > cg.MAX_TEXT:
            fitted = self.fit(text)
            if fitted is None:
                return cg.TAINT
            for name, t in self.lets:
                if t == fitted:
                    return cg.Expr(name)
            text = fitted
        return super().bind(text)

    def site(self, path: str, line: int, conds: list[str]) -> None:
        """checkgen's site, but a path condition over the expression limits is fitted into lets (``fit``) instead of
        being left untranslated as too long, and a check inside a loop walked per element is ``any(...)`` over its
        elements (tools/vllm_loops.py)."""
        conds = vllm_loops.fold(self, conds)
        if conds and not cg.has_unknown(conds):
            text = cg.conj(conds)
            if len(text) > cg.MAX_TEXT:
                fitted = self.fit(text)
                if fitted is not None:
                    self.sites.setdefault((path, line), []).append(fitted)
                    return
        super().site(path, line, conds)

    def as_text(self, v: Any, boolean: bool = False) -> str:
        if isinstance(v, cg.Expr) and len(v.text) > cg.MAX_TEXT:  # fitted rather than "too long"
            fitted = self.fit(v.text)
            if fitted is not None:
                v = cg.Expr(fitted)
        if boolean and isinstance(v, cg.Expr) and v.text.startswith(("(", "[")) and not v.ref:
            try:  # the truth of a literal list (Platform.supported_quantization = [] on CUDA, interface.py:1170)
                lit = ast.literal_eval(v.text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                lit = None
            if isinstance(lit, (tuple, list)):
                return "True" if lit else "False"
        return super().as_text(v, boolean)

    def new_let(self, text: str) -> str:
        for name, t in self.lets:
            if t == text:
                return name
        name = f"_v{len(self.lets)}"
        self.lets.append((name, text))
        return name

    def fit(self, text: str) -> str | None:
        """``text`` within the expression language's cost limits (kg/engine/expr.py: 2,000 characters, 400 syntax
        nodes, 40 levels; checkgen's MAX_TEXT), its largest sub-expressions of at most ``checkgen.FIT_NODES`` nodes named as
        lets, as often as needed; None when it cannot be. tools/sglang_generated_checks.py fit, for vLLM's lets: a
        let is evaluated before the row (kg.analyses.enginerows.row_outcome) and one that cannot be (a missing
        input, ``__unknown__``) leaves every row reading it not evaluable, so a named part never changes what a
        row refuses, only whether it is evaluated."""
        if len(text) > FIT_MAX_CHARS:
            return None
        if text not in self.fitted:
            self.fitted[text] = self._fit_rounds(text)
        return self.fitted[text]

    def _fit_rounds(self, text: str) -> str | None:
        from kg.engine.expr import ExprError, compile_expr
        from kg.frameworks.checkrows import FUNCTIONS
        for _ in range(FIT_ROUNDS):
            try:
                compile_expr(text, tuple(FUNCTIONS))
                if len(text) <= cg.MAX_TEXT:
                    return text
            except ExprError as e:
                if not str(e).startswith(COST_ERRORS):
                    return None
            text = cg.name_largest_part(text, self.new_let)
            if text is None:
                return None
        return None

    # ---- classes
    def dataclass_fields(self, cls: str, path: str | None = None) -> dict[str, tuple[ast.AST | None, str]] | None:
        hit = self.find_class(cls, path)
        if hit is None:
            return None
        c, path = hit
        if not any(n in ("dataclass", "config") for n in _deco_names(c)):
            return None
        out: dict[str, tuple[ast.AST | None, str]] = {}
        for b in c.bases:
            bname = b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else None
            inherited = self.dataclass_fields(bname, path) if bname else None
            out.update(inherited or {})
        for s in c.body:
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
                if "ClassVar" in ast.unparse(s.annotation):
                    continue
                out[s.target.id] = (field_default_node(s.value), path)
        return out

    def named_enum_field(self, cls: str, field: str, path: str | None) -> bool:
        """``cls.field`` is annotated with an enum vllm_enums holds by name (CUDAGraphMode)."""
        ann = field_annotations(self, cls, path).get(field)
        return ann is not None and any(isinstance(n, ast.Name) and n.id in self.named_enums for n in ast.walk(ann))

    def new_dataclass(self, cls: str, given: dict[str, Any], spread: list[cg.Obj], pc: list[str],
                      path: str | None = None) -> cg.Obj:
        fields = self.dataclass_fields(cls, path) or {}
        spread = vllm_kwargs.given_from_spread(self, given, spread, fields, pc)
        hit = self.find_class(cls, path)
        # pydantic runs the before-validators on the given values first
        if hit is not None:
            # ``@field_validator("*")`` validates every field (kernel.py:66-73 at 0.34.0, IrOpPriorityConfig)
            for name, f, mode in [(n, f, md) for n, (vf, md) in validators(hit[0]).items()
                                  for f in (list(fields) if vf == ["*"] else vf[:1] if len(vf) == 1 else [])]:
                if mode not in ("before", "plain", "wrap") or f not in fields:
                    continue
                m = self.find_method(cls, name, hit[1])
                if m is None:
                    continue
                cur = given.get(f)
                json_key = None
                if cur is None:  # a key of the user's JSON (the CLI validates it: arg_utils.py:371 validate_json)
                    json_key = next((o for o in spread if o.label.startswith("json:")), None)
                    try:
                        cur = self.get_attr(json_key, f) if json_key is not None else None
                    except cg.Untranslatable:
                        cur = None
                    if not isinstance(cur, cg.Expr):
                        continue  # a default is not validated (validate_default is off)
                try:
                    got = self.invoke(m[0], m[1], None, [cur] if _first_param(m[0]) != "cls" else [cur], {}, pc, m[2],
                                      static=True)
                except cg.Untranslatable:
                    got = cg.TAINT
                if json_key is None:
                    given[f] = got if isinstance(got, (cg.Expr, cg.Obj)) else cg.TAINT
                elif isinstance(got, cg.Expr) and self.named_enum_field(cls, f, hit[1]):
                    # a member name of an enum held by name (tools/vllm_enums.py: -cc cudagraph_mode, whose input stays
                    # the string optkg reads): the member the validator gives (CUDAGraphMode[value.upper()],
                    # compilation.py:1023-1029 at 0.34.0)
                    json_key.env[f] = got
            # removed JSON keys a whole-object before-validator refuses (tools/vllm_removed_keys.py)
            vllm_removed_keys.removed_keys_walk(self, cls, hit, spread, pc, validators(hit[0]))
        served = cls == "ModelConfig" and self.in_create_model_config > 0
        obj = super().new_dataclass(cls, given, spread, pc, path, env={SERVED: True} if served else None)
        if hit is not None:
            for name, (vfields, mode) in validators(hit[0]).items():
                if mode == "after" and not vfields:  # @model_validator(mode="after")
                    m = self.find_method(cls, name, hit[1])
                    if m is not None:
                        try:
                            self.invoke(m[0], m[1], obj, [], {}, pc, m[2])
                        except cg.Untranslatable:
                            pass
                elif mode == "after" and len(vfields) == 1 and vfields[0] in fields:
                    m = self.find_method(cls, name, hit[1])
                    if m is not None:
                        try:
                            cur = self.get_attr(obj, vfields[0])
                        except cg.Untranslatable:
                            cur = cg.TAINT
                        try:
                            got = self.invoke(m[0], m[1], None, [cur], {}, pc, m[2], static=True)
                        except cg.Untranslatable:
                            got = cg.TAINT
                        obj.env[vfields[0]] = got if isinstance(got, (cg.Expr, cg.Obj)) else cg.TAINT
        return obj

    def test(self, node: ast.AST, fr: cg.Frame, pc: list[str]) -> str:
        t = super().test(node, fr, pc)
        return t if cg.is_unknown(t) else simplify(t)

    def eff(self, fr: cg.Frame, pc: list[str]) -> list[str]:
        """checkgen's eff, but inside a loop walked per element the conditions a ``continue`` left (fr.exits, reset
        at the loop's start) come right after the loop's token: what follows a ``continue`` is evaluated only where
        it did not apply (``if "-" not in part: continue`` before ``int(part.split("-")[1])``, parallel.py:549-554)."""
        if fr.exits and vllm_loops.in_loop(pc):
            at = max(i for i, c in enumerate(pc) if vllm_loops.is_token(c))
            if at >= fr.base:
                return pc[:at + 1] + [e if cg.is_unknown(e) else f"(not {e})" for e in fr.exits] + pc[at + 1:]
        return super().eff(fr, pc)

    def merge(self, old: Any, new: Any, conds: list[str], first: bool) -> Any:
        if not first and isinstance(new, cg.Obj) and new is old:
            # ``x = y`` where y is the very object x holds, under any condition (known or not): x is unchanged
            # (vllm.py:1406-1411 at 0.34.0: the served ModelConfig is also the speculative target_model_config)
            return new
        if not first and vllm_loops.in_loop(conds):
            # assigned inside a loop walked per element: which element's value is not modelled, so the value is
            # unknown where the loop runs (as checkgen's walk of a loop body under an unknown condition has it)
            at = next(i for i, c in enumerate(conds) if vllm_loops.is_token(c))
            conds = conds[:at] + [cg.unknown("inside a loop")]
        if conds and not first and not cg.has_unknown(conds):
            # a config built on one branch of a field that is None on the other (model.py:901 at 0.34.0
            # ``self.multimodal_config = MultiModalConfig(...)`` under supports_multimodal): the object or None
            none = cg.Expr(repr(NONE))
            if type(new) is cg.Obj and new.cls and old == none:
                return cg.ObjIf(cg.conj(conds), new, NoneObj(new.cls, new.path))
            if type(old) is cg.Obj and old.cls and new == none:
                return cg.ObjIf(cg.conj(conds), NoneObj(old.cls, old.path), old)
        return super().merge(old, new, conds, first)

    def record_fill(self, path: str, line: int, msg: ast.AST, fr: cg.Frame, pc: list[str]) -> None:
        super().record_fill(path, line, msg, fr, pc)
        got = self.fills.get((path, line)) or {}
        for k, t in got.items():  # a message field of a loop's element: not a fact outside the row's any()
            if t is not None and vllm_loops.LOOP_NAME.search(t):
                got[k] = None

    def stmt(self, s: ast.stmt, fr: cg.Frame, pc: list[str]) -> None:
        if isinstance(s, ast.For):  # checkgen's copy of fields and loop over constants first, else per element
            self.lineno = s.lineno
            if (self.fields_copy(s, fr, pc) or self.unrolled(s, fr, pc) or vllm_pairs.local_dict_loop(self, s, fr, pc)
                    or vllm_fields_loop.fields_loop(self, s, fr, pc) or vllm_loops.walk_loop(self, s, fr, pc)):
                return
        if isinstance(s, ast.Continue) and vllm_loops.continue_stmt(self, fr, pc):
            return
        if isinstance(s, ast.Try) and vllm_regex.try_compile(self, s, fr, pc):  # re.compile(X) except re.error
            return
        if isinstance(s, ast.FunctionDef) and not s.decorator_list:
            fr.locals[s.name] = LocalFunction(s)
            return
        if isinstance(s, ast.Assign) and vllm_device_ids.assign_hook(self, s, fr, pc):
            self.lineno = s.lineno  # --device-ids vs CUDA_VISIBLE_DEVICES (tools/vllm_device_ids.py)
            return
        if isinstance(s, ast.Assign) and vllm_loops.unpack_split(self, s, fr, pc):
            self.lineno = s.lineno
            return
        if isinstance(s, ast.ImportFrom) and s.module and s.level == 0 and s.module.startswith("vllm"):
            # an import inside a function (``from vllm.platforms import current_platform``, mamba.py:86 at 0.34.0):
            # the name resolves like a module-level import of the same module (checkgen leaves it unknown)
            m = self.modules.get(fr.path)
            for a in s.names:
                local = a.asname or a.name
                fr.locals.pop(local, None)
                if m is not None and a.name != "*":
                    m.imports.setdefault(local, f"{s.module}.{a.name}")
            return
        if (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Tuple)
                and isinstance(s.value, ast.Call) and ast.unparse(s.value.func) == "maybe_override_with_speculators"):
            self.lineno = s.lineno
            speculators_override(self, s.targets[0], s.value, fr, pc)
            return
        if isinstance(s, ast.If):  # a test known to hold (or not) on this walk adds nothing to the path
            t = self.test(s.test, fr, pc)
            if t in ("True", "False"):
                self.lineno = s.lineno
                if "current_platform" in ast.unparse(s.test):
                    # the branch this platform never takes: its checks are reached, false here (generate_release
                    # calls a check false on every platform walk "holds on no GPU optkg knows"; parallel.py:603)
                    for n in ast.walk(ast.Module(body=s.orelse if t == "True" else s.body, type_ignores=[])):
                        if isinstance(n, (ast.Raise, ast.Assert)):
                            self.sites.setdefault((fr.path, n.lineno), []).append("False")
                self.run(s.body if t == "True" else s.orelse, fr, pc)
                return
        super().stmt(s, fr, pc)

    def result(self, fr: cg.Frame) -> Any:
        """checkgen's result, but a function that returns None on one known branch and a config object on the other
        (arg_utils.py:2223-2229 at 0.34.0, ``if self.watermark_config is None: return None`` ... ``return
        WatermarkConfig(**cfg)``) returns that object or None, as the ``X(...) if c else None`` hook does, instead of
        an unknown value."""
        r = fr.returns
        # the second return is the only other way out: the function ends there, or it is guarded by the negation of
        # the first return's one condition
        complement = len(r) == 2 and len(r[0][0]) == 1 and r[1][0] == [f"(not {r[0][0][0]})"]
        if (fr.dead or complement) and len(r) == 2 and not any(cg.has_unknown(c) for c, _ in r):
            vals = [v for _, v in r]
            none = [isinstance(v, cg.Expr) and v.text == repr(NONE) for v in vals]
            objs = [type(v) is cg.Obj and bool(v.cls) for v in vals]
            if none[0] and objs[1] or objs[0] and none[1]:
                o = vals[1] if objs[1] else vals[0]
                first = NoneObj(o.cls, o.path) if none[0] else o
                other = o if none[0] else NoneObj(o.cls, o.path)
                return cg.ObjIf(cg.conj(r[0][0]) if r[0][0] else "True", first, other)
        return super().result(fr)

    def call(self, node: ast.Call, fr: cg.Frame, pc: list[str]) -> Any:
        f = node.func
        if isinstance(f, ast.Name) and isinstance(fr.locals.get(f.id), LocalFunction):
            return self.call_local(fr.locals[f.id], node, fr, pc)
        return super().call(node, fr, pc)

    def call_local(self, lf: "LocalFunction", node: ast.Call, fr: cg.Frame, pc: list[str]) -> Any:
        """A function defined inside the walked one (0.34.0 vllm.py:2612-2626 ``explicit``, called for the prefill
        and the decode sizes): walked like an inlined call, its parameters bound to the arguments (else their
        defaults) over the enclosing function's locals as they are at the call (what a closure reads)."""
        func = lf.node
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords) \
                or func.args.vararg or func.args.kwarg or self.depth >= cg.MAX_DEPTH:
            raise cg.Untranslatable("call of a local function")
        pc = self.eff(fr, pc)
        params = [a.arg for a in func.args.posonlyargs + func.args.args]
        bound = {k: v for k, v in fr.locals.items() if k != func.name}
        given = dict(zip(params, [self.value_or_taint(a, fr, pc) for a in node.args]))
        given.update({k.arg: self.value_or_taint(k.value, fr, pc) for k in node.keywords})
        for p, d in zip(params[len(params) - len(func.args.defaults):], func.args.defaults):
            given.setdefault(p, self.value_or_taint(d, fr, pc))
        for a, d in zip(func.args.kwonlyargs, func.args.kw_defaults):
            if d is not None:
                given.setdefault(a.arg, self.value_or_taint(d, fr, pc))
        for p in params + [a.arg for a in func.args.kwonlyargs]:
            bound[p] = given.get(p, cg.TAINT)
        inner = cg.Frame(fr.path, bound, fr.cls, base=len(pc))
        self.depth += 1
        try:
            self.run(func.body, inner, list(pc))
        finally:
            self.depth -= 1
        return self.result(inner)

    def invoke(self, func: ast.FunctionDef, path: str, self_obj: cg.Obj | None, args: list, kwargs: dict,
               pc: list[str], cls: str | None = None, static: bool = False) -> Any:
        if func.name == "create_model_config" and cls == "EngineArgs":
            self.in_create_model_config += 1
            try:
                return super().invoke(func, path, self_obj, args, kwargs, pc, cls)
            finally:
                self.in_create_model_config -= 1
        if static:  # a classmethod validator: drop its ``cls`` parameter
            params = [a.arg for a in func.args.posonlyargs + func.args.args]
            if params and params[0] in ("cls", "self"):
                self_obj = cg.Obj(f"{cls}(class)", None, cls, path=path)
        return super().invoke(func, path, self_obj, args, kwargs, pc, cls)


def _first_param(f: ast.FunctionDef) -> str:
    a = f.args.posonlyargs + f.args.args
    return a[0].arg if a else ""


def validators(c: ast.ClassDef) -> dict[str, tuple[list[str], str]]:
    """method -> (fields, mode) of the pydantic validators a class declares (``@field_validator("f", mode=...)``:
    its fields; ``@model_validator(mode=...)``: no fields)."""
    out = {}
    for s in c.body:
        if not isinstance(s, ast.FunctionDef):
            continue
        for d in s.decorator_list:
            if not isinstance(d, ast.Call):
                continue
            name = ast.unparse(d.func).split(".")[-1]
            if name not in ("field_validator", "model_validator"):
                continue
            kw = {k.arg: k.value for k in d.keywords}
            mode = kw["mode"].value if isinstance(kw.get("mode"), ast.Constant) else ("after" if name == "field_validator" else "")
            fields = [a.value for a in d.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            out[s.name] = (fields if name == "field_validator" else [], mode)
    return out


def field_default_node(v: ast.AST | None) -> ast.AST | None:
    """The default expression of a dataclass / pydantic field (``= x``, ``field(default=x)``, ``Field(default=x)``;
    ``default_factory=list`` / ``dict`` -> an empty literal); None without one."""
    if v is None:
        return None
    if isinstance(v, ast.Call) and ast.unparse(v.func).split(".")[-1] in ("field", "Field"):
        kw = {k.arg: k.value for k in v.keywords}
        if "default" in kw:
            return kw["default"]
        if v.args and not isinstance(v.args[0], ast.Starred) and ast.unparse(v.func).split(".")[-1] == "Field":
            return v.args[0]
        if "default_factory" in kw:
            f = ast.unparse(kw["default_factory"])
            if f == "list":
                return ast.List(elts=[], ctx=ast.Load())
            if f == "dict":
                return ast.Dict(keys=[], values=[])
            return ast.Call(func=kw["default_factory"], args=[], keywords=[]) if isinstance(kw["default_factory"], ast.Name) else None
        return None
    return v


# --------------------------------------------------------------------------------------------- hooks
# Platform methods of the walks' vendors (interface.py:196-241 at 0.34.0, the same at 0.33.0): is_sleep_mode_available
# is CUDA, ROCm and XPU (:241)
PLATFORM_IS = {"is_cuda": ("nvidia",), "is_rocm": ("amd",), "is_cuda_alike": ("nvidia", "amd"), "is_xpu": ("intel",),
               "is_cpu": (), "is_tpu": (), "is_out_of_tree": (), "is_unspecified": (), "is_zen_cpu": (),
               "is_sleep_mode_available": ("nvidia", "amd", "intel"), "uses_host_device_handling": ()}
# vendors whose get_device_capability() is None: XPUPlatform's (xpu.py:319-325 at 0.34.0 and 0.33.0, "capacity
# format differs from cuda's"), so has_device_capability / is_device_capability(_family) are False (interface.py
# :541-598)
NO_CAPABILITY = ("intel",)
CC = "gpu_compute_capability"
CC_INT = f"round({CC} * 10)"


class LocalFunction(cg.Obj):
    """A ``def`` inside a walked function (VllmWalker.call_local calls it)."""

    def __init__(self, node: ast.FunctionDef):
        super().__init__(f"def {node.name}")
        self.node = node


class NoneObj(cg.UnknownObj):
    """``None`` on one side of a conditional config object (``LoRAConfig(...) if self.enable_lora else None``): false,
    ``is None``; its fields are never read where the other side is not chosen (an unknown value if they are)."""

    def __init__(self, cls: str | None, path: str | None):
        super().__init__()
        self.label, self.cls, self.path = "None", cls, path
        self.truth = "False"
        self.scalar = None
        self.present = "False"


class DictLit(cg.Obj):
    """A dict literal whose keys are literals (``msa_aliases = {AttentionBackendEnum.CUTLASS_MSA: "cutlass", ...}``):
    ``x in d`` is ``x in (keys)``, ``d[x]`` is the value of the key ``x`` equals (unknown for none), ``bool(d)``
    is whether it has keys."""

    MUTATORS = ("update", "pop", "popitem", "setdefault", "clear", "__setitem__", "__delitem__")

    def __init__(self, pairs: list[tuple[str, str]]):
        super().__init__("dict-literal")
        self.pairs = pairs
        self.mutated = False  # changed after it was built (an item stored, a mutating method, an opaque call)

    @property
    def truth(self) -> str:  # bool(d); unknown once changed
        return f"truthy({cg.UNK})" if self.mutated or self.env else "True" if self.pairs else "False"

    @truth.setter
    def truth(self, v: Any) -> None:
        pass

    @property
    def scalar(self) -> str | None:  # the keys, as ``in`` compares them; None (not a value) once changed
        if self.mutated or self.env:
            return None
        return "(" + ", ".join(k for k, _ in self.pairs) + ("," if len(self.pairs) == 1 else "") + ")"

    @scalar.setter
    def scalar(self, v: Any) -> None:
        pass

    def lookup(self, key: str) -> cg.Expr:
        if self.mutated or self.env:
            raise cg.Untranslatable("a dict changed after it was built")
        for k, v in self.pairs:  # a literal key (an unrolled loop's): its value, exactly
            if key == k and key[:1] in ("'", '"'):
                return cg.Expr(v)
        text = cg.UNK
        for k, v in reversed(self.pairs):
            text = f"({v} if {key} == {k} else {text})"
        return cg.Expr(text)


def _dict_literal(w: "VllmWalker", node: ast.Dict, fr: cg.Frame, pc: list[str]) -> DictLit | None:
    if not node.keys or any(k is None for k in node.keys):
        return None
    pairs = []
    for k, v in zip(node.keys, node.values):
        try:
            kt = w.as_text(w.value(k, fr, pc))
            # a value built by a call (quantization.py:272 ``"fp8_per_tensor": QuantizationConfigArgs(...)``) is not
            # walked here (its checks would be recorded under this path): unknown, while ``in`` still reads the keys
            # (the Qwen3-Omni DSpark walk reads its attention-shape dicts' getattr / helper values: vllm_pairs)
            vt = cg.UNK if isinstance(v, ast.Call) and not getattr(w, "in_draft_walk", False) else \
                w.as_text(w.value(v, fr, pc))
        except cg.Untranslatable:
            return None
        if not (kt.startswith(("'", '"')) or kt.lstrip("-").isdigit()):
            return None  # a literal key only: the dict's lookup compares by it
        pairs.append((kt, vt))
    return DictLit(pairs)


def enum_by_name(w: "VllmWalker", name: str, path: str) -> dict[str, Any]:
    """{member name: value} of the Enum class ``name`` as module ``path`` sees it, {} for anything else."""
    hit = w.find_class(name, path)
    if hit is None or not w.is_enum(hit):
        return {}
    return {k.split(".", 1)[1]: v for k, v in w.enums.items() if k.split(".", 1)[0] == hit[0].name
            and isinstance(v, (str, int)) and not isinstance(v, bool)}


# torch dtypes as the names optkg's dtype facts use (vllm --dtype values lower-cased): torch.float16 is 'float16'.
# Only dtypes whose name is a key of model.py's _STR_DTYPE_TO_TORCH_DTYPE (:2428 at 0.34.0): a dtype vLLM holds as a
# torch.dtype and the walk as its name then passes the string branch of _get_and_verify_dtype as the torch.dtype
# branch does (a draft model's dtype is the target's)
TORCH_DTYPES = {"float16": "float16", "half": "float16", "bfloat16": "bfloat16", "float32": "float32",
                "float": "float32"}


def module_dict(w: VllmWalker, name: str, path: str) -> ast.Dict | None:
    """The dict literal a module-level name is assigned once (config/model.py:2428 ``_STR_DTYPE_TO_TORCH_DTYPE``,
    :2442 ``_FLOAT16_NOT_SUPPORTED_MODELS`` at 0.34.0), None when the module rebinds or changes it anywhere."""
    m = w.modules.get(path)
    if m is None:
        return None
    hits = [n for n in m.tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
            and any(isinstance(t, ast.Name) and t.id == name for t in (n.targets if isinstance(n, ast.Assign)
                                                                        else [n.target]))]
    if len(hits) != 1 or not isinstance(hits[0].value, ast.Dict):
        return None
    for n in ast.walk(m.tree):
        if isinstance(n, ast.Global) and name in n.names:
            return None
        if (isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.value, ast.Name) and n.value.id == name
                and (isinstance(n.ctx, (ast.Store, ast.Del)) or isinstance(n, ast.Attribute)
                     and n.attr in DictLit.MUTATORS)):
            return None
    return hits[0].value


def _hook(w: VllmWalker, node: ast.AST, fr: cg.Frame, pc: list[str]) -> Any:
    if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
        # ``(x := value)``: bind the local, the value is the expression's (config/speculative.py:1350 at 0.34.0)
        v = w.value_or_taint(node.value, fr, pc)
        w.assign(node.target, v, fr, pc)
        return v
    if isinstance(node, ast.Name) and node.id == "current_platform" and node.id not in fr.locals:
        return w.platform
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch"
            and node.value.id not in fr.locals and node.attr in TORCH_DTYPES):
        return cg.Expr(repr(TORCH_DTYPES[node.attr]))
    if isinstance(node, ast.Name) and node.id not in fr.locals and isinstance(node.ctx, ast.Load):
        d = module_dict(w, node.id, fr.path) if node.id.lstrip("_")[:1].isupper() else None
        if d is not None:
            return _dict_literal(w, d, fr, pc)
    if isinstance(node, ast.Dict):
        return _dict_literal(w, node, fr, pc)
    if (isinstance(node, ast.Attribute) and node.attr == "__members__" and isinstance(node.value, ast.Name)
            and node.value.id not in fr.locals):
        # ``Enum.__members__`` compared with ``in`` (compilation.py:1014 at 0.34.0): the member names
        hit = w.find_class(node.value.id, fr.path)
        if hit is not None and w.is_enum(hit):
            names = [st.targets[0].id for st in hit[0].body if isinstance(st, ast.Assign) and len(st.targets) == 1
                     and isinstance(st.targets[0], ast.Name) and not st.targets[0].id.startswith("_")]
            return cg.Expr(repr(tuple(names)))
    if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and isinstance(node.left, ast.Constant)
            and isinstance(node.right, ast.Constant) and type(node.left.value) is int and type(node.right.value) is int
            and 0 <= node.right.value <= 64):
        # a power of two integer literals (watermarking.py:72 at 0.34.0, ``2**64 - 1``): its value
        return cg.Expr(repr(node.left.value ** node.right.value))
    if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
        try:
            base = w.value(node.value, fr, pc) if isinstance(node.value, ast.Name) else None
        except cg.Untranslatable:
            base = None
        if isinstance(base, DictLit):
            return base.lookup(w.text(node.slice, fr, pc))
        if isinstance(node.value, ast.Name) and node.value.id not in fr.locals:
            members = enum_by_name(w, node.value.id, fr.path)
            if members:  # Enum[name]: the member of that name (an unknown name raises KeyError / ValueError)
                return DictLit([(repr(k), repr(v)) for k, v in members.items()]).lookup(w.text(node.slice, fr, pc))
    if isinstance(node, ast.IfExp):
        # a config object or None: both sides as one conditional object (a value expression cannot hold an object)
        if not any(isinstance(n, ast.Constant) and n.value is None for n in (node.body, node.orelse)):
            return None
        t = w.test(node.test, fr, pc)
        if cg.is_unknown(t):
            return None
        sides = []
        for n, branch in ((node.body, t), (node.orelse, f"(not {t})")):
            if isinstance(n, ast.Constant) and n.value is None:
                sides.append(None)
                continue
            v = w.value_or_taint(n, fr, pc + [branch])  # built (its checks walked) only where its branch is taken
            # a config, or a config-or-None of one class (merge: a field built on one branch)
            sides.append(v if (type(v) is cg.Obj or type(v) is cg.ObjIf) and v.cls else cg.TAINT)
        objs = [x for x in sides if x is not None]
        if len(objs) == 1 and objs[0] is not cg.TAINT:
            o = objs[0]
            if sides[0] is None:
                return cg.ObjIf(f"(not {t})", o, NoneObj(o.cls, o.path))
            return cg.ObjIf(t, o, NoneObj(o.cls, o.path))
        return None
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id not in fr.locals
            and w.modules.get(fr.path) is not None and w.modules[fr.path].imports.get(node.value.id) == "vllm.envs"):
        # an environment variable: an input of its own name when vllm/envs.py gives its default, else not modelled
        eq = env_equals(w, node.attr) if node.attr in w.presence_envs and node.attr not in w.env else None
        if eq is not None:  # ``os.environ.get(X, "0") == "1"`` (envs.py:821-823 at 0.34.0): the raw string, unset None
            w.inputs.add(node.attr)
            w.input_info[node.attr] = {"kind": "env", "default": NONE}
            return cg.Expr(f"({node.attr} == {eq[1]!r})" if eq[0] != eq[1] else f"({node.attr} in ({eq[1]!r}, {NONE!r}))")
        if node.attr in w.env and node.attr.startswith("VLLM_"):  # CUDA_VISIBLE_DEVICES, LOCAL_RANK: the process's
            w.inputs.add(node.attr)
            if node.attr in w.presence_envs:  # unset is its own value (env_presence): envs.py's default there
                w.input_info[node.attr] = {"kind": "env", "default": NONE, "like": w.env[node.attr]}
                return cg.Expr(f"({node.attr} if {node.attr} != {NONE!r} else {w.env[node.attr]!r})")
            w.input_info.setdefault(node.attr, {"kind": "env", "default": w.env[node.attr]})
            return cg.Expr(node.attr)
        return cg.TAINT
    if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn))
            and isinstance(node.left, ast.Constant) and node.left.value in w.presence_envs
            and ast.unparse(node.comparators[0]) == "os.environ"):
        # ``"VLLM_USE_BREAKABLE_CUDAGRAPH" in os.environ`` (vllm.py:811 at 0.34.0): whether the command sets it
        env = str(node.left.value)
        w.inputs.add(env)
        w.input_info[env] = {"kind": "env", "default": NONE, **({"like": w.env[env]} if env in w.env else {})}
        return cg.Expr(f"({env} {'!=' if isinstance(node.ops[0], ast.In) else '=='} {NONE!r})")
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return _call_hook(w, node.func.id, node, fr, pc)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Call) and isinstance(node.func.func, ast.Name)
                and node.func.func.id == "get_speculator_config_class"):
            # the ``speculator_config`` property (config/speculative.py:1418-1422 at 0.34.0): an instance of the
            # class; its class attributes are the class's
            return _call_hook(w, node.func.func.id, node.func, fr, pc)
        return None
    attr = node.func.attr
    base_node = node.func.value
    is_platform = (isinstance(base_node, ast.Name) and base_node.id == "current_platform"
                   and "current_platform" not in fr.locals)
    if not is_platform:
        try:
            base = w.value(base_node, fr, pc) if isinstance(base_node, (ast.Name, ast.Attribute)) else None
        except cg.Untranslatable:
            base = None
        is_platform = base is w.platform
    if is_platform:
        if attr in PLATFORM_IS:
            return cg.Expr("True" if w.vendor in PLATFORM_IS[attr] else "False")
        if w.vendor in NO_CAPABILITY and attr in ("has_device_capability", "is_device_capability",
                                                   "is_device_capability_family"):
            return cg.Expr("False")
        if w.vendor in NO_CAPABILITY and attr == "get_device_capability":
            return NoneObj(None, None)
        if attr == "has_device_capability" and node.args:
            return cg.Expr(f"({CC_INT} >= {_capability_int(w, node.args[0], fr, pc)})")
        if attr == "is_device_capability" and node.args:
            return cg.Expr(f"({CC_INT} == {_capability_int(w, node.args[0], fr, pc)})")
        if attr == "is_device_capability_family" and node.args:
            return cg.Expr(f"(round({CC} * 10) // 10 == {_capability_int(w, node.args[0], fr, pc)} // 10)")
        if attr == "get_device_capability":
            return _capability_obj()
        return None
    got = vllm_enums.method_call(w, attr, node, fr, pc)  # CUDAGraphMode.has_full_cudagraphs() ... (tools/vllm_enums.py)
    if got is not None:
        return got
    return _call_hook(w, attr, node, fr, pc)


def _capability_int(w: VllmWalker, n: ast.AST, fr: cg.Frame, pc: list[str]) -> str:
    if isinstance(n, ast.Tuple) and len(n.elts) == 2:
        return f"({w.text(n.elts[0], fr, pc)} * 10 + {w.text(n.elts[1], fr, pc)})"
    return w.text(n, fr, pc)


def _capability_obj() -> cg.Obj:
    env = {"major": cg.Expr(f"(round({CC} * 10) // 10)"), "minor": cg.Expr(f"(round({CC} * 10) % 10)")}
    o = cg.Obj("device_capability", lambda a: env.get(a), None)
    o.truth = f"({CC} == {CC})"
    return o


def _call_hook(w: VllmWalker, name: str, node: ast.Call, fr: cg.Frame, pc: list[str]) -> Any:
    got = draft_call_hook(w, name, node, fr, pc)  # the draft's config.json (tools/vllm_draft_walk.py)
    if got is None:
        got = vllm_model_walk.call_hook(w, name, node, fr, pc)  # the served model's length (tools/vllm_model_walk.py)
    if got is None:  # breakable CUDA graphs by default (tools/vllm_breakable.py)
        got = vllm_breakable.call_hook(w, name, node, fr, pc, PLATFORM_IS)
    if got is None:
        got = vllm_hisparse.call_hook(w, name, node, fr, pc)  # HiSparse's host pool (tools/vllm_hisparse.py)
    if got is not None:
        return got
    if (name == "is_runai_obj_uri" and len(node.args) == 1 and isinstance(node.args[0], ast.Attribute)
            and node.args[0].attr == "model_weights"):
        # the served model's model_weights is its path where that is an s3:// / gs:// / az:// URI, else ""
        # (0.34.0 config/model.py:647 and :1224-1245, runai_utils.py:16 / :40-41; 0.33.0 the same): is_runai_obj_uri of
        # it is the model source fact kg.engines.vllm.registry gives
        try:
            base = w.value(node.args[0].value, fr, pc)
        except cg.Untranslatable:
            return None
        if type(base) is cg.Obj and base.cls == "ModelConfig" and served_model_config(w, base):
            return cg.Expr("vllm_model_cloud_storage")
    if name == "get_custom_speculator_config_class" and len(node.args) == 1 and w.speculator_attrs:
        # a custom method's config (v1/worker/gpu/spec_decode/speculator_config.py:338-355 at 0.34.0): registered by
        # plugins (unknown here), but never under a built-in name (register_speculative_method refuses one, :325-326)
        # nor None: None there
        try:
            m = w.as_text(w.value(node.args[0], fr, pc))
        except cg.Untranslatable:
            return None
        builtin = tuple(sorted(set(w.speculator_attrs) | set(
            literal_alias(w, ast.Name("SpeculativeMethod"), SPEC_CONFIG) or ())))
        return cg.Expr(f"({NONE!r} if {m} == {NONE!r} or {m} in {builtin!r} else {cg.UNK})")
    if name in ("get_method_config_class", "get_speculator_config_class") and len(node.args) == 1 \
            and w.speculator_attrs:
        try:
            spec = w.value(node.args[0], fr, pc)
        except cg.Untranslatable:
            return None
        if isinstance(spec, cg.Obj) and spec.cls == "SpeculativeConfig":
            return speculator_class_obj(w, spec, pc)
    if name == "isinstance" and len(node.args) == 2 and isinstance(node.func, ast.Name):
        try:
            v = w.value(node.args[0], fr, pc)
        except cg.Untranslatable:
            return None
        if isinstance(v, cg.Expr) and ast.unparse(node.args[1]) == "torch.dtype":
            # a value the walk knows is plain data (an option, a config.json key, a dtype name): never a torch.dtype
            return cg.Expr("False")
        if isinstance(v, cg.Expr) and not v.ref and isinstance(node.args[1], ast.Name) \
                and w.find_class(node.args[1].id, fr.path) is not None:
            # nor an instance of a class of the scanned sources (quantization.py:241 ``isinstance(target, QuantSpec)``
            # on a JSON value); an object the walk builds is an Obj, decided below
            return cg.Expr("False")
        if isinstance(v, cg.Obj):
            types = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            names = {ast.unparse(t).split(".")[-1] for t in types}
            if v.label.startswith("json:"):  # the option's JSON object (a dict) until __post_init__ builds the class
                return cg.Expr("True" if names & {"dict", "Mapping"} else "False")
            if v.cls:
                return cg.Expr("True" if v.cls in names or _subclass_of(w, v.cls, names, v.path) else "False")
        return None
    if (isinstance(node.func, ast.Name) and not node.args and len(node.keywords) == 1 and node.keywords[0].arg is None
            and w.find_class(name, fr.path) is not None):
        # C(**cfg) where cfg is already the C the option's JSON was built into (built_options): that object
        try:
            v = w.value(node.keywords[0].value, fr, pc)
        except cg.Untranslatable:
            return None
        if type(v) is cg.Obj and v.cls == name:
            return v
        return None
    if name == "_apply_optimization_level_defaults" and isinstance(node.func, ast.Attribute):
        # VllmConfig.__post_init__ fills every field the optimization-level tables (OPTIMIZATION_LEVEL_0n in
        # config/vllm.py) name, where still None (_set_config_default, vllm.py:985-999 at 0.34.0), with the level's
        # value: a literal or constant there (optimization_level_values), unknown where the table gives a function
        # of the config; a field whose current value the walk does not know is unknown from here on
        try:
            root = w.value(node.func.value, fr, pc)
        except cg.Untranslatable:
            return None
        if isinstance(root, cg.Obj):
            try:
                level = w.as_text(w.get_attr(root, "optimization_level", pc))
            except cg.Untranslatable:
                level = None
            for keys, by_level in optimization_level_values(w, pc).items():
                obj: Any = root
                for k in keys[:-1]:
                    try:
                        obj = w.get_attr(obj, k, pc)
                    except cg.Untranslatable:
                        obj = None
                    if not isinstance(obj, cg.Obj):
                        break
                if isinstance(obj, cg.Obj):
                    _set_level_default(w, obj, keys[-1], level, by_level, w.eff(fr, pc))
            return cg.Expr(repr(NONE))
        return None
    if name == "deepcopy" and len(node.args) == 1 and ast.unparse(node.func) in ("copy.deepcopy", "deepcopy"):
        # create_engine_config copies a config object before overriding fields (attention / mamba / kernel
        # config): the copy carries what was assigned so far, later assignments stay on the copy
        try:
            v = w.value(node.args[0], fr, pc)
        except cg.Untranslatable:
            return None
        if type(v) is cg.Obj:
            c = copy.copy(v)
            c.env = dict(v.env)
            return c
        return None
    if name in DictLit.MUTATORS and isinstance(node.func, ast.Attribute):
        try:
            base = w.value(node.func.value, fr, pc)
        except cg.Untranslatable:
            base = None
        if isinstance(base, DictLit):
            base.mutated = True
        return None
    if name == "has_connector" and isinstance(node.func, ast.Attribute) and len(node.args) == 1:
        # config/kv_transfer.py KVTransferConfig.has_connector (0.34.0 :208-215, 0.33.0 :141-148): the connector itself,
        # or MultiConnector with it among its children (a list in kv_connector_extra_config: not modelled)
        try:
            base = w.value(node.func.value, fr, pc)
        except cg.Untranslatable:
            return None
        wanted = w.const_str(node.args[0], fr, pc)
        if wanted is None or not isinstance(base, cg.Obj) or base.cls != "KVTransferConfig":
            return None
        try:
            kv = w.as_text(w.get_attr(base, "kv_connector", pc))
        except cg.Untranslatable:
            return None
        return cg.Expr(f"({kv} == {wanted!r} or ({kv} == 'MultiConnector' and truthy({cg.UNK})))")
    if name == "any" and isinstance(node.func, ast.Name):
        got = vllm_moe_ep.any_substring(w, node, fr, pc)  # a name in config.json's architectures (lora.py:156)
        if got is not None:
            return got
    if name in ("any", "all") and isinstance(node.func, ast.Name) and len(node.args) == 1 and not node.keywords:
        got = any_all_bound(w, name, node.args[0], fr, pc)
        if got is not None:
            return cg.Expr(got)
    if name == "resolve_kv_cache_dtype_string" and len(node.args) == 2 and not node.keywords:
        # utils/torch_utils.py:518-536 (0.34.0): a --kv-cache-dtype other than 'auto' is returned as given; 'auto' is
        # resolved from the checkpoint's quantization_config (kv cache scheme), which is not modelled here
        try:
            kv = w.as_text(w.value(node.args[0], fr, pc))
        except cg.Untranslatable:
            return None
        return cg.Expr(f"({kv} if {kv} != 'auto' else {cg.UNK})")
    if (name == "get" and ast.unparse(node.func) == "os.environ.get" and 1 <= len(node.args) <= 2 and not node.keywords
            and all(isinstance(a, ast.Constant) and isinstance(a.value, (str, type(None))) for a in node.args)
            and node.args[0].value in w.env and node.args[0].value in w.presence_envs):
        # a raw read of a variable vllm/envs.py also defines (``os.environ.get("VLLM_WORKER_MULTIPROC_METHOD")``,
        # vllm.py:1678 at 0.34.0): its input is '__none__' when unset (env_presence), the call's default there
        env = str(node.args[0].value)
        dflt = node.args[1].value if len(node.args) == 2 else None
        w.inputs.add(env)
        w.input_info[env] = {"kind": "env", "default": NONE, "like": w.env[env]}
        return cg.Expr(env if dflt is None else f"({env} if {env} != {NONE!r} else {dflt!r})")
    if (name == "get" and ast.unparse(node.func) == "os.environ.get" and 1 <= len(node.args) <= 2 and not node.keywords
            and all(isinstance(a, ast.Constant) and isinstance(a.value, (str, type(None))) for a in node.args)
            and node.args[0].value not in w.env):
        # a process environment variable vllm/envs.py does not define (``os.environ.get("TORCH_COMPILE_DISABLE")``,
        # vllm.py:1717 at 0.34.0): an input of its own name, the call's default (None) when unset; one envs.py
        # defines is read there with envs.py's default, which a raw read does not share
        env = str(node.args[0].value)
        dflt = node.args[1].value if len(node.args) == 2 else None
        w.inputs.add(env)
        w.input_info.setdefault(env, {"kind": "env", "default": NONE if dflt is None else dflt})
        return cg.Expr(env)
    if name == "get_args" and isinstance(node.func, ast.Name) and len(node.args) == 1 and not node.keywords:
        # typing.get_args of a module-level Literal alias (config/kv_transfer.py:13 ``KVRole = Literal[KVProducer,
        # KVConsumer]``): its values, nested aliases flattened as typing does
        got = literal_alias(w, node.args[0], fr.path)
        return cg.Expr(repr(got)) if got is not None else None
    if name == "is_cloud_storage" and len(node.args) == 1 and ast.unparse(node.args[0]) == "self.model":
        # transformers_utils/utils.py:18-31 (0.34.0): an s3:// / gs:// / az:// model path (kg.engines.vllm.registry)
        return cg.Expr("truthy(vllm_model_cloud_storage)")
    if name == "create_speculative_config" and isinstance(node.func, ast.Attribute):
        return speculative_obj(w, node, fr, pc)
    if name == "get_config":
        # the served model's config.json (ModelConfig.__post_init__ of the ModelConfig EngineArgs.create_model_config
        # builds); any other model's (a draft's) is not what optkg loaded
        return model_obj("hf__") if served_model_config(w, fr.locals.get("self")) else cg.TAINT
    if name == "get_hf_text_config" and node.args:
        try:
            v = w.value(node.args[0], fr, pc)
        except cg.Untranslatable:
            return None
        return model_obj("hf_text__") if isinstance(v, cg.Obj) and v.label == "hf__" else None
    if name in ("getattr", "hasattr") and isinstance(node.func, ast.Name) and len(node.args) >= 2:
        # a config.json key: present -> its value; absent -> not given (the transformers config class may have a
        # default of its own), so getattr's default is never assumed
        try:
            v = w.value(node.args[0], fr, pc)
        except cg.Untranslatable:
            return None
        key = w.const_str(node.args[1], fr, pc)
        if isinstance(v, cg.Obj) and v.label in ("hf__", "hf_text__") and key is not None:
            got = v.free(key) if key not in v.env else v.env[key]
            if not isinstance(got, cg.Expr):
                raise cg.Untranslatable(f"config.json key {key}")
            return cg.Expr(f"({got.text} == {got.text})") if name == "hasattr" else got
        if name == "getattr" and key == "architectures" and served_model_config(w, v):
            # the served ModelConfig's architectures property (lora.py:155 at 0.34.0): config.json's list where
            # optkg gives vllm_model__arch (the convertor rewrites it elsewhere: tools/vllm_breakable.py)
            return cg.Expr(f"(hf__architectures if truthy(vllm_model__arch) else {cg.UNK})")
        if (name == "getattr" and type(v) is cg.Obj and v.cls and key is not None
                and key in (w.dataclass_fields(v.cls, v.path) or {})):
            # getattr(config, "field", default) of a field the config class declares: the field itself (vllm.py:1302
            # at 0.34.0, ``getattr(self, "watermark_config", None)``); the default is never read
            return w.get_attr(v, key, pc)
        return None
    if name in REGISTRY_METHODS and isinstance(node.func, ast.Attribute) and len(node.args) == 2:
        # ModelRegistry.<is_x>(architectures, model_config) of the served model: its _ModelInfo field
        try:
            v = w.value(node.args[1], fr, pc)
        except cg.Untranslatable:
            return None
        if served_model_config(w, v) and ast.unparse(node.args[0]).split(".")[-1] == "architectures":
            return model_info_obj().free(REGISTRY_METHODS[name])
        return None
    if name in MODEL_METHODS and isinstance(node.func, ast.Attribute):
        try:
            v = w.value(node.func.value, fr, pc)
        except cg.Untranslatable:
            return None
        if served_model_config(w, v):
            return cg.Expr(MODEL_METHODS[name])
    return None


_FLIP = {ast.Lt: ">", ast.LtE: ">=", ast.Gt: "<", ast.GtE: "<="}
_OPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def any_all_bound(w: "VllmWalker", fn: str, gen: ast.AST, fr: cg.Frame, pc: list[str]) -> str | None:
    """``any(x OP c for x in L)`` / ``all(...)`` (and ``all(a <= x <= b for x in L)``) over a list value ``L`` the walk
    knows, with constants ``c`` that do not depend on ``x``, as bounds of ``min(L)`` / ``max(L)``: any(x <= c) is
    ``is_a(L, 'list') and len(L) > 0 and min(L) <= c``, all(x <= c) is ``not is_a(L, 'list') or len(L) == 0 or
    max(L) <= c`` (compilation.py:1198, parallel.py:529,
    speculative.py:666 at 0.34.0). A value that is not a list of numbers makes the row not evaluable (min of a
    string compares a string with a number: kg.engine.expr refuses the comparison); None otherwise."""
    if not (isinstance(gen, ast.GeneratorExp) and len(gen.generators) == 1):
        return None
    g = gen.generators[0]
    if g.ifs or g.is_async or not isinstance(g.target, ast.Name):
        return None
    x = g.target.id
    cmp = gen.elt
    if not (isinstance(cmp, ast.Compare) and all(type(o) in _OPS for o in cmp.ops)):
        return None
    try:
        lst = w.as_text(w.value(g.iter, fr, pc))
    except cg.Untranslatable:
        return None
    terms = [cmp.left] + list(cmp.comparators)
    if sum(isinstance(t, ast.Name) and t.id == x for t in terms) != 1:
        return None
    if any(x in {n.id for n in ast.walk(t) if isinstance(n, ast.Name)} for t in terms
           if not (isinstance(t, ast.Name) and t.id == x)):
        return None
    parts = []  # each comparison as "x OP c"
    for i, op in enumerate(cmp.ops):
        a, b = terms[i], terms[i + 1]
        try:
            if isinstance(a, ast.Name) and a.id == x:
                parts.append((_OPS[type(op)], w.as_text(w.value(b, fr, pc))))
            elif isinstance(b, ast.Name) and b.id == x:
                parts.append((_FLIP[type(op)], w.as_text(w.value(a, fr, pc))))
            else:
                return None
        except cg.Untranslatable:
            return None
    if fn == "any" and len(parts) != 1:
        return None  # any(a <= x <= b) needs one element inside both bounds: not a bound of min / max
    bounds = []
    for op, c in parts:
        low = op in ("<", "<=")  # x below c
        if fn == "any":
            bounds.append(f"{'min' if low else 'max'}({lst}) {op} {cg._paren(c)}")
        else:
            bounds.append(f"{'max' if low else 'min'}({lst}) {op} {cg._paren(c)}")
    # a value that is not a list (None where the option is not given, read after its own None test) makes any()
    # false and all() true: no refusal, and no comparison of a string with a number
    if fn == "any":
        return f"(is_a({lst}, 'list') and len({lst}) > 0 and {bounds[0]})"
    return f"(not is_a({lst}, 'list') or len({lst}) == 0 or ({' and '.join(bounds)}))"


def literal_alias(w: "VllmWalker", n: ast.AST, path: str, depth: int = 0) -> tuple | None:
    """The values of ``Literal[...]`` that name ``n`` is assigned at module level (in ``path`` or the scanned module it
    is imported from), a nested alias's values in place and duplicates dropped (typing's get_args); None for anything
    else (a Union, a name outside the scanned modules, a non-literal element)."""
    if depth > 6 or not isinstance(n, ast.Name):
        return None
    m = w.modules.get(path)
    if m is None:
        return None
    for st in m.tree.body:
        target = (st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 else
                  st.target if isinstance(st, ast.AnnAssign) else None)
        if isinstance(target, ast.Name) and target.id == n.id and st.value is not None:
            v = st.value
            if not (isinstance(v, ast.Subscript) and ast.unparse(v.value).split(".")[-1] == "Literal"):
                return None
            out: list = []
            for e in (v.slice.elts if isinstance(v.slice, ast.Tuple) else [v.slice]):
                if isinstance(e, ast.Constant) and isinstance(e.value, (str, int)) and not isinstance(e.value, bool):
                    vals: tuple | None = (e.value,)
                else:
                    vals = literal_alias(w, e, path, depth + 1)
                if vals is None:
                    return None
                out += [x for x in vals if x not in out]
            return tuple(out)
    origin = m.imports.get(n.id)
    if origin and "." in origin:
        mod = w.module_of(origin.rsplit(".", 1)[0], path)
        if mod is not None:
            return literal_alias(w, ast.Name(origin.rsplit(".", 1)[1]), mod.path, depth + 1)
    return None


# transformers_utils/config.py maybe_override_with_speculators (0.34.0 :833-874): returns model, tokenizer and the
# --speculative-config dict unchanged unless the served config.json has a ``speculators_config`` (a speculators-format
# checkpoint, whose target model and speculative config then replace them)
SPECULATORS_RETURNS = ("model", "tokenizer", "vllm_speculative_config")
SPECULATORS_FACT = "truthy(vllm_model__speculators_checkpoint)"


def speculators_override(w: "VllmWalker", target: ast.Tuple, call: ast.Call, fr: cg.Frame, pc: list[str]) -> None:
    """``(a, b, c) = maybe_override_with_speculators(model=.., tokenizer=.., vllm_speculative_config=..)``: each target
    keeps the value it is handed where the checkpoint is not a speculators one (kg.engines.vllm.registry gives the
    fact), and is unknown where it is; anything else (other arguments, positional ones) is not modelled."""
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    if call.args or len(target.elts) != 3 or any(k not in kw for k in SPECULATORS_RETURNS):
        for t in target.elts:
            w.assign(t, cg.TAINT, fr, pc)
        return
    for t, k in zip(target.elts, SPECULATORS_RETURNS):
        given = w.value_or_taint(kw[k], fr, pc)
        w.assign(t, given, fr, pc)  # unchanged ...
        cur = w.value_or_taint(t, fr, pc)
        if type(cur) is cg.Obj:  # ... except on a speculators checkpoint (a JSON option: every key of it)
            w.forget_all(cur, "maybe_override_with_speculators", w.eff(fr, pc + [SPECULATORS_FACT]))
        else:
            w.assign(t, cg.TAINT, fr, pc + [SPECULATORS_FACT])


# EngineArgs.create_speculative_config (engine/arg_utils.py): --spec-method / --spec-model / --spec-tokens fill the
# speculative config's method / model / num_speculative_tokens (refused when the JSON also gives the key); the
# config exists when any of them or --speculative-config is given
SPEC_SHORTCUTS = {"method": "spec_method", "model": "spec_model", "num_speculative_tokens": "spec_tokens"}


def speculative_obj(w: "VllmWalker", node: ast.Call, fr: cg.Frame, pc: list[str]) -> Any:
    """The SpeculativeConfig ``create_speculative_config(target_model_config, target_parallel_config)`` returns:
    built from the ``--speculative-config`` keys (inputs ``speculative_config__<key>``) with the shortcut options
    in front, its validators and ``__post_init__`` walked under its presence; None (falsy) when it is absent."""
    passed = dict(zip(("target_model_config", "target_parallel_config"), node.args))
    passed.update({k.arg: k.value for k in node.keywords if k.arg})
    if w.find_class("SpeculativeConfig", None) is None or set(passed) != {"target_model_config",
                                                                          "target_parallel_config"}:
        return None
    try:
        args = w.value(node.func.value, fr, pc)
    except cg.Untranslatable:
        return None
    if not isinstance(args, cg.Obj) or args.cls != "EngineArgs":
        return None
    shortcuts = {}
    for key, field in SPEC_SHORTCUTS.items():
        v = args.free(field) if args.free else None
        if not isinstance(v, cg.Expr):
            return None
        shortcuts[key] = v.text
    raw = args.free("speculative_config")
    if not isinstance(raw, cg.Obj):
        return None
    presence = "(" + " or ".join([raw.truth or "True"] + [f"({t} != {NONE!r})" for t in shortcuts.values()]) + ")"
    raw_free = raw.free
    no_init = init_false_fields(w, "SpeculativeConfig")
    spec_fields = w.dataclass_fields("SpeculativeConfig", None) or {}

    def free(k: str) -> Any:
        if k in no_init:
            return None  # not an argument the JSON can give: the field's default stands
        v = raw_free(k) if raw_free else None
        info = w.input_info.get(JSON_FIELD.format(field="speculative_config", key=k))
        if info is not None and not info.get("cls") and k in spec_fields:
            info["cls"] = "SpeculativeConfig"  # a key not given is the field's default (input_default)
        if k in shortcuts and isinstance(v, cg.Expr):
            return cg.Expr(f"({shortcuts[k]} if {shortcuts[k]} != {NONE!r} else {v.text})")
        return v
    spread = cg.Obj(f"json:speculative_config", free, None)
    given = {k: w.value_or_taint(v, fr, pc) for k, v in passed.items()}
    obj = w.new_dataclass("SpeculativeConfig", given, [spread], pc + [presence], None)
    obj.truth = presence
    return obj


def speculator_class_obj(w: VllmWalker, spec: cg.Obj, pc: list[str]) -> cg.Obj:
    """The speculator config class ``get_method_config_class(spec)`` / ``get_speculator_config_class(spec)`` return
    (v1/worker/gpu/spec_decode/speculator_config.py:359-385 at 0.34.0): by ``spec.method`` (None: draft_model), a
    class attribute every class the method may end with binds alike (tools/vllm_speculators.speculator_class_attrs);
    a custom method (plugins) or an attribute that differs is not modelled. Its methods are not followed."""
    attrs = w.speculator_attrs or {}
    try:
        method = w.as_text(w.get_attr(spec, "method", pc))
        custom = w.as_text(w.get_attr(spec, "custom_method", pc))
    except cg.Untranslatable:
        return cg.Obj("speculator_class", lambda a: cg.TAINT, None)

    def free(a: str) -> Any:
        parts, known = [], False
        for m, vals in sorted(attrs.items()):
            v = vals.get(a, VARIES)
            text = cg.UNK if v is VARIES else repr(v)
            known |= v is not VARIES
            test = f"({method} == {NONE!r} or {method} == {m!r})" if m == "draft_model" else f"{method} == {m!r}"
            parts.append(f"{text} if {test}")
        if not known:
            return cg.TAINT
        text = f"({cg.UNK} if {custom} != {NONE!r} else " + " else ".join(parts) + f" else {cg.UNK})"
        fitted = w.fit(text)  # named as a let: the five options of speculative.py:1394-1403 read it each
        return cg.Expr(w.new_let(fitted)) if fitted is not None else cg.TAINT
    return cg.Obj("speculator_class", free, None)


def init_false_fields(w: VllmWalker, cls: str) -> set[str]:
    """Fields of dataclass ``cls`` declared ``field(..., init=False)`` (config/speculative.py:479 at 0.34.0,
    ``custom_method``): set by the class itself, never from the user's JSON."""
    hit = w.find_class(cls, None)
    out = set()
    for st in hit[0].body if hit else []:
        if (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and isinstance(st.value, ast.Call)
                and ast.unparse(st.value.func).split(".")[-1] == "field"
                and any(k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
                        for k in st.value.keywords)):
            out.add(st.target.id)
    return out


def _set_level_default(w: VllmWalker, obj: cg.Obj, attr: str, level: str | None, by_level: dict[int, str],
                       conds: list[str]) -> None:
    """``obj.attr``, where still None, becomes the value the table of optimization level ``level`` gives
    (``by_level``: level -> value text, ``__unknown__`` for a function of the config)."""
    try:
        cur = w.get_attr(obj, attr)
    except cg.Untranslatable:
        cur = cg.TAINT
    if level is None or not isinstance(cur, cg.Expr) or cur.ref:
        obj.env[attr] = cg.TAINT
        return
    if cur.text != repr(NONE) and not cg.free_names(cur.text) and cur.text != cg.UNK:
        return  # a literal other than None: kept
    texts = set(by_level.values())
    new = next(iter(texts)) if len(texts) == 1 else cg.UNK
    if len(texts) > 1:
        for lv, t in sorted(by_level.items(), reverse=True):
            new = f"({t} if {level} == {lv} else {new})"
    cond = [] if cur.text == repr(NONE) else [f"({cur.text} == {NONE!r})"]
    w.set_attr(obj, attr, w.bind(new), conds + cond)


def optimization_level_values(w: VllmWalker, pc: list[str]) -> dict[tuple[str, ...], dict[int, str]]:
    """attribute path -> {optimization level: the value text its table gives}, from ``OPTIMIZATION_LEVEL_TO_CONFIG``
    (config/vllm.py:373-378 at 0.34.0: OptimizationLevel.On -> OPTIMIZATION_LEVEL_0n); a value that is a function of
    the config (``enable_norm_fusion``, called by _set_config_default) or not a literal is ``__unknown__``; a path some
    level's table does not give is unknown on that level."""
    path = "vllm/config/vllm.py"
    m = w.modules.get(path)
    tables: dict[str, ast.Dict] = {}
    levels: dict[int, str] = {}
    for n in (m.tree.body if m else []):
        if not (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                and isinstance(n.value, ast.Dict)):
            continue
        if re.fullmatch(r"OPTIMIZATION_LEVEL_\d+", n.targets[0].id):
            tables[n.targets[0].id] = n.value
        elif n.targets[0].id == "OPTIMIZATION_LEVEL_TO_CONFIG":
            for k, v in zip(n.value.keys, n.value.values):
                lv = w.enums.get(ast.unparse(k)) if k is not None else None
                if isinstance(lv, int) and isinstance(v, ast.Name):
                    levels[lv] = v.id
    out: dict[tuple[str, ...], dict[int, str]] = {}

    def leaves(d: ast.Dict, prefix: tuple[str, ...], lv: int) -> None:
        for k, v in zip(d.keys, d.values):
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                continue
            if isinstance(v, ast.Dict):
                leaves(v, prefix + (k.value,), lv)
                continue
            text = cg.UNK
            if not (isinstance(v, ast.Name) and m is not None and v.id in m.functions):
                try:
                    got = w.value(v, cg.Frame(path, {}), pc)
                    text = got.text if isinstance(got, cg.Expr) and not got.ref else cg.UNK
                except cg.Untranslatable:
                    pass
            out.setdefault(prefix + (k.value,), {})[lv] = text
    for lv, name in levels.items():
        if name in tables:
            leaves(tables[name], (), lv)
    for keys in optimization_level_fields(w):  # a path no level's table gives a known value for stays unknown
        by = out.setdefault(keys, {})
        for lv in levels:
            by.setdefault(lv, cg.UNK)
    return out


def optimization_level_fields(w: VllmWalker) -> list[tuple[str, ...]]:
    """The attribute paths (``('kernel_config', 'enable_flashinfer_autotune')`` ...) the dict literals
    ``OPTIMIZATION_LEVEL_0n`` of config/vllm.py give defaults for, over every level."""
    m = w.modules.get("vllm/config/vllm.py")
    out: set[tuple[str, ...]] = set()

    def leaves(d: ast.Dict, prefix: tuple[str, ...]) -> None:
        for k, v in zip(d.keys, d.values):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                if isinstance(v, ast.Dict):
                    leaves(v, prefix + (k.value,))
                else:
                    out.add(prefix + (k.value,))
    for n in (m.tree.body if m else []):
        if (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                and re.fullmatch(r"OPTIMIZATION_LEVEL_\d+", n.targets[0].id) and isinstance(n.value, ast.Dict)):
            leaves(n.value, ())
    return sorted(out)


def _subclass_of(w: VllmWalker, cls: str, names: set[str], path: str | None) -> bool:
    seen = set()
    todo = [cls]
    while todo:
        c = todo.pop()
        if c in seen:
            continue
        seen.add(c)
        if c in names:
            return True
        hit = w.find_class(c, path)
        if hit:
            todo += [b.id if isinstance(b, ast.Name) else b.attr for b in hit[0].bases if isinstance(b, (ast.Name, ast.Attribute))]
    return False


def env_defaults(text: str) -> dict[str, Any]:
    """vllm/envs.py ``environment_variables``: name -> the value when unset, for the shapes read here:
    ``os.getenv("X", "d")`` (a string), ``env_with_choices("X", "d", [...])``, ``int(...)`` / ``float(...)`` of it,
    ``bool(int(...))``, and
    ``... .lower() in ("1", "true")`` (a boolean); other variables are not modelled."""
    tree = ast.parse(text)
    out: dict[str, Any] = {}
    for n in ast.walk(tree):
        if not (isinstance(n, ast.AnnAssign) or isinstance(n, ast.Assign)):
            continue
        target = n.target if isinstance(n, ast.AnnAssign) else (n.targets[0] if len(n.targets) == 1 else None)
        if not (isinstance(target, ast.Name) and target.id == "environment_variables" and isinstance(n.value, ast.Dict)):
            continue
        for k, v in zip(n.value.keys, n.value.values):
            if isinstance(k, ast.Constant) and isinstance(v, (ast.Lambda, ast.Call)):
                got = _env_shape(v.body if isinstance(v, ast.Lambda) else v, k.value)
                if got is not None:
                    out[k.value] = got[0]
    return out


def _env_shape(b: ast.AST, name: str) -> tuple[Any] | None:
    def getenv(n: ast.AST) -> Any:
        if (isinstance(n, ast.Call) and ast.unparse(n.func) in ("os.getenv", "os.environ.get") and n.args
                and isinstance(n.args[0], ast.Constant) and n.args[0].value == name):
            if len(n.args) == 2 and isinstance(n.args[1], ast.Constant):
                return n.args[1].value
            if len(n.args) == 1:
                return None
        raise ValueError
    try:
        if (isinstance(b, ast.Call) and ast.unparse(b.func) == "env_with_choices" and len(b.args) >= 2
                and isinstance(b.args[0], ast.Constant) and b.args[0].value == name
                and isinstance(b.args[1], ast.Constant) and isinstance(b.args[1].value, (str, type(None)))):
            # env_with_choices(NAME, default, choices) (envs.py:434-476 at 0.34.0): the default when unset; a value
            # outside the choices is refused when read
            return (NONE if b.args[1].value is None else b.args[1].value,)
        if isinstance(b, ast.Call) and ast.unparse(b.func) in ("os.getenv", "os.environ.get"):
            d = getenv(b)
            return (NONE if d is None else d,)
        if isinstance(b, ast.Call) and isinstance(b.func, ast.Name) and b.func.id in ("int", "float") and len(b.args) == 1:
            d = getenv(b.args[0])
            return ({"int": int, "float": float}[b.func.id](d),) if d is not None else None
        if (isinstance(b, ast.Call) and isinstance(b.func, ast.Name) and b.func.id == "bool" and len(b.args) == 1
                and isinstance(b.args[0], ast.Call) and ast.unparse(b.args[0].func) == "int"):
            d = getenv(b.args[0].args[0])
            return (bool(int(d)),) if d is not None else None
        if isinstance(b, ast.Compare) and len(b.ops) == 1 and isinstance(b.ops[0], ast.In):
            inner = b.left
            while isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr in ("lower", "strip"):
                inner = inner.func.value
            d = getenv(inner)
            vals = ast.literal_eval(b.comparators[0])
            return (str(d).strip().lower() in vals,) if d is not None else None
    except (ValueError, TypeError, SyntaxError):
        return None
    return None


# config.json attributes optkg reads as vLLM does (kg.inputs.modelcfg.ModelFacts of the same meaning: the text
# model's, read from the language section of a multimodal config as vLLM's hf_text_config is)
MODEL_ATTRS = {"num_attention_heads": "num_attention_heads", "hidden_size": "hidden_size",
               "num_hidden_layers": "num_hidden_layers", "vocab_size": "vocab_size", "model_type": "model_type"}
# ModelConfig methods of the served model read as optkg's model facts of the same meaning (vllm/config/model.py:
# get_num_experts -> model_arch_config.num_experts (the config's expert-count aliases, optkg's num_experts);
# get_total_num_kv_heads -> the KV-head aliases in vLLM's order (optkg's num_key_value_heads);
# get_total_num_attention_heads -> num_attention_heads)
MODEL_METHODS = {"get_num_experts": "num_experts", "get_total_num_kv_heads": "num_key_value_heads",
                 "get_total_num_attention_heads": "num_attention_heads"}


def model_props(w: "VllmWalker") -> dict[str, str]:
    """ModelConfig properties of the served model as optkg expressions (read at the walked release):

    - ``is_moe`` (``get_num_experts() > 0``): optkg's ``is_moe`` (num_experts > 1; a one-expert MoE config is the
      one disagreement, and none is published);
    - ``use_mla`` (model.py ``use_mla``: False under VLLM_MLA_DISABLE; else, for the model types of
      model_arch_config_convertor.py ``is_deepseek_mla``, ``kv_lora_rank`` is set): optkg's ``is_mla`` (kv_lora_rank
      set, for the types both lists name); unknown for a type only vLLM's list names, for ``eagle`` and where optkg
      says MLA of a type vLLM's list lacks (the Transformers backend); False otherwise;
    - ``is_encoder_decoder``: config.json's ``is_encoder_decoder`` (top level or the text section)."""
    vllm_types = w.deepseek_mla_types
    both = sorted(set(vllm_types) & MLA_TYPES_OPTKG)
    only = sorted(set(vllm_types) - MLA_TYPES_OPTKG)
    use_mla = (f"(False if truthy(VLLM_MLA_DISABLE) else (truthy(is_mla) if model_type in {tuple(both)!r} else "
               f"({cg.UNK} if model_type in {tuple(only) + ('eagle',)!r} or truthy(is_mla) else False)))") \
        if vllm_types else None
    out = {"is_moe": "truthy(is_moe)",
           "is_encoder_decoder": "(truthy(hf__is_encoder_decoder) or truthy(hf_text__is_encoder_decoder))"}
    if use_mla:
        out["use_mla"] = use_mla
    return out


def _optkg_mla_types() -> set[str]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from kg.inputs.modelcfg import MLA_MODEL_TYPES
    return set(MLA_MODEL_TYPES)


MLA_TYPES_OPTKG = _optkg_mla_types()
MLA_SOURCE = "vllm/transformers_utils/model_arch_config_convertor.py"


def deepseek_mla_types(text: str) -> list[str]:
    """The model types ``ModelArchConfigConvertorBase.is_deepseek_mla`` lists (the first tuple it tests
    ``hf_text_config.model_type`` against), [] when the release has no such method."""
    for n in ast.walk(ast.parse(text)) if text else ():
        if isinstance(n, ast.FunctionDef) and n.name == "is_deepseek_mla":
            for c in ast.walk(n):
                if (isinstance(c, ast.Compare) and len(c.ops) == 1 and isinstance(c.ops[0], ast.In)
                        and ast.unparse(c.left).endswith("model_type") and isinstance(c.comparators[0], ast.Tuple)):
                    return [e.value for e in c.comparators[0].elts if isinstance(e, ast.Constant)]
    return []


# ModelRegistry methods (model_executor/models/registry.py, 0.34.0 :1553-1648) -> the _ModelInfo field they return
REGISTRY_METHODS = {"is_multimodal_model": "supports_multimodal", "is_hc_sp_supported_model": "supports_hc_sp",
                    "model_has_inner_state": "has_inner_state", "is_attention_free_model": "is_attention_free",
                    "is_hybrid_model": "is_hybrid", "is_noops_model": "has_noops",
                    "is_transcription_model": "supports_transcription",
                    "is_multimodal_raw_input_only_model": "supports_multimodal_raw_input_only",
                    "is_text_generation_model": "is_text_generation_model", "is_pooling_model": "is_pooling_model"}


def model_info_obj() -> cg.Obj:
    """The ``_ModelInfo`` vLLM's registry gives the served model (ModelConfig.__post_init__: ``model_info, arch =
    registry.inspect_model_cls(architectures, self)``): a field tools/vllm_model_registry.py reads per release
    (FLAGS) is the fact ``vllm_model__<field>`` (kg.engines.vllm.registry gives it for the served architecture,
    only where the lookup is the plain one); any other field is not modelled."""
    from vllm_model_registry import DERIVED, FLAGS, TUPLES

    def free(a: str) -> Any:
        return cg.Expr(f"vllm_model__{a}") if a in FLAGS or a in DERIVED or a in TUPLES else cg.TAINT
    return cg.Obj("model_info", free, None)


SERVED = "__served_model__"  # marks the served model's ModelConfig (VllmWalker.new_dataclass)


def served_model_config(w: "VllmWalker", v: Any) -> bool:
    """``v`` is the served model's ModelConfig (the one EngineArgs.create_model_config builds), not a draft's."""
    return isinstance(v, cg.Obj) and v.cls == "ModelConfig" and v.env.get(SERVED) is True


def model_obj(prefix: str) -> cg.Obj:
    """The Hugging Face config vLLM loads for the served model: ``hf__`` the whole config.json, ``hf_text__`` its
    text model (vLLM's hf_text_config). A key is the input ``<prefix><key>`` (given when config.json has it; the
    evaluator leaves an absent key missing, see kg.analyses.enginechecks.model_config_keys); the text model's
    MODEL_ATTRS are optkg's facts; ``architectures`` is config.json's list."""
    def free(a: str) -> Any:
        if a.startswith("_"):
            return cg.TAINT
        if prefix == "hf_text__" and a in MODEL_ATTRS:
            return cg.Expr(MODEL_ATTRS[a])
        if a.isidentifier():
            return cg.Expr(f"{prefix}{a}")
        return cg.TAINT
    return cg.Obj(prefix, free, None)


# --------------------------------------------------------------------------------------------- entry
def engine_args_fields(w: VllmWalker) -> dict[str, tuple[ast.AST | None, str]]:
    return w.dataclass_fields("EngineArgs", ARGS_PATH) or {}


JSON_TYPES = {}


# optional JSON options (default None) whose presence optkg reads from a technique rather than the option itself
JSON_PRESENCE = {"speculative_config": "('speculative-decoding' in techniques)"}


def annotation_class(w: VllmWalker, ann: ast.AST | None, path: str) -> tuple[str | None, bool]:
    """(the vLLM config class an annotation names, whether it allows None): ``FooConfig``, ``FooConfig | None``,
    ``FooConfig | dict | None``; (None, ...) for anything else."""
    if ann is None:
        return None, False
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):  # a quoted annotation (arg_utils.py:642)
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return None, False
    parts = []

    def flat(n: ast.AST) -> None:
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr):
            flat(n.left)
            flat(n.right)
        else:
            parts.append(ast.unparse(n))
    flat(ann)
    optional = "None" in parts
    names = [p.split(".")[-1] for p in parts if p not in ("None",) and not p.startswith(("dict", "Mapping", "str"))]
    if len(names) == 1 and w.dataclass_fields(names[0], path) is not None:
        return names[0], optional
    return None, optional


def field_annotations(w: VllmWalker, cls: str, path: str) -> dict[str, ast.AST]:
    hit = w.find_class(cls, path)
    out: dict[str, ast.AST] = {}
    if hit is None:
        return out
    for b in hit[0].bases:
        if isinstance(b, ast.Name):
            out.update(field_annotations(w, b.id, hit[1]))
    for st in hit[0].body:
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
            out[st.target.id] = st.annotation
    return out


def args_obj(w: VllmWalker, fields: dict[str, Any]) -> cg.Obj:
    """The ``EngineArgs`` object: a field is an input of its name; a field that holds a config class (the CLI parses
    its JSON into the class: engine/arg_utils.py parse_dataclass) is that class built from the JSON keys, walked
    when first read (under the option's presence when it may be None); ``_private`` fields are vLLM's own."""
    anns = field_annotations(w, "EngineArgs", ARGS_PATH)
    json_fields = json_options(w) | set(JSON_PRESENCE)
    built = built_options(w)
    objs: dict[str, Any] = {}

    def free(a: str) -> Any:
        if a.startswith("_"):
            return cg.TAINT  # set by vLLM's own launcher (_api_process_count ...), not an option
        if a in objs:
            return objs[a]
        cls, optional = annotation_class(w, anns.get(a), ARGS_PATH)
        if cls is None and a in built:
            cls, optional = built[a], True
        dflt = fields.get(a, (None,))[0]
        if isinstance(dflt, ast.Attribute) and isinstance(dflt.value, ast.Name) and dflt.value.id == "VllmConfig":
            # ``engram_config: EngramConfig | None = VllmConfig.engram_config`` (arg_utils.py:778 at 0.34.0): the
            # default of the class field it names (config/vllm.py:404, None). ``pooler_config = ModelConfig.
            # pooler_config`` (:775) stays an object: None there, ModelConfig fills it for a pooling runner
            # (model.py:797-799), which `--runner auto` leaves unknown (a Sentence Transformers modules.json,
            # model.py:1310), and the CUDA-graph mode (vllm.py:1862-1873) with it on every stack
            dflt = ((w.dataclass_fields(dflt.value.id, ARGS_PATH) or {}).get(dflt.attr) or (dflt,))[0]
        default_none = isinstance(dflt, ast.Constant) and dflt.value is None
        if cls is not None or a in json_fields:
            presence = JSON_PRESENCE.get(a) or (f"truthy({a})" if (optional and default_none) else None)
            if presence and presence.startswith("truthy("):
                w.input_info.setdefault(a, {"kind": "field", "field": a})
            objs[a] = config_obj(w, a, cls, presence)
            return objs[a]
        if a in fields:
            w.inputs.add(a)
            w.input_info.setdefault(a, {"kind": "field", "field": a})
            return cg.Expr(a)
        return None
    return cg.Obj("EngineArgs", free, "EngineArgs", path=ARGS_PATH)


def config_obj(w: VllmWalker, name: str, cls: str | None, presence: str | None) -> cg.Obj:
    """The JSON object the user gives for option ``name`` (its keys are inputs ``name__key``), built into ``cls``
    when known (its validators and ``__post_init__`` walked under ``presence``); a nested config-class key is a
    nested object."""
    anns = field_annotations(w, cls, None) if cls else {}
    nested: dict[str, Any] = {}

    def free(k: str) -> Any:
        if k in nested:
            return nested[k]
        if cls and k.startswith("_") and (w.find_method(cls, k, None) is not None
                                          or "ClassVar" in ast.unparse(anns.get(k) or ast.Constant(""))):
            return None  # a private method or class constant (kv_transfer.py:159, compilation.py:925): not a JSON key
        sub, optional = annotation_class(w, anns.get(k), None) if cls else (None, False)
        key = JSON_FIELD.format(field=name, key=k)
        if sub is not None:
            # a sub-config that defaults to None (``hisparse_config: HiSparseConfig | None = None``) exists only where
            # the user gives its key (the key's JSON value is then its input)
            fields = w.dataclass_fields(cls, None) or {}
            dflt = fields.get(k, (None, None))[0]
            absent = optional and isinstance(dflt, ast.Constant) and dflt.value is None
            if absent:
                w.inputs.add(key)
                w.input_info.setdefault(key, {"kind": "json", "option": name, "key": k, "cls": cls})
            nested[k] = config_obj(w, key, sub, f"({key} != {NONE!r})" if absent else None)
            return nested[k]
        w.inputs.add(key)
        w.input_info.setdefault(key, {"kind": "json", "option": name, "key": k, "cls": cls})
        return cg.Expr(key)
    raw = cg.Obj(f"json:{name}", free, None)
    raw.truth = presence or "True"
    if cls is None:
        return raw
    obj = w.new_dataclass(cls, {}, [raw], [presence] if presence else [], None)
    obj.truth = presence or "True"
    return obj


def built_options(w: VllmWalker) -> dict[str, str]:
    """EngineArgs fields annotated as a plain dict that a ``create_*`` method turns into a config class: ``if
    self.f is None: return None`` then ``return C(**cfg)`` of ``cfg = self.f`` (engine/arg_utils.py:2223-2229 at 0.34.0,
    create_watermark_config) -> {f: C}; the option is then that class built from its JSON keys (args_obj)."""
    out: dict[str, str] = {}
    hit = w.find_class("EngineArgs", ARGS_PATH)
    for fn in (hit[0].body if hit else []):
        if not (isinstance(fn, ast.FunctionDef) and fn.name.startswith("create_")):
            continue
        src: dict[str, str] = {}
        for n in ast.walk(fn):
            if (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                    and re.fullmatch(r"self\.\w+", ast.unparse(n.value))):
                src[n.targets[0].id] = ast.unparse(n.value)[5:]
        for n in ast.walk(fn):
            if (isinstance(n, ast.Return) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)
                    and not n.value.args and len(n.value.keywords) == 1 and n.value.keywords[0].arg is None
                    and isinstance(n.value.keywords[0].value, ast.Name)):
                f = src.get(n.value.keywords[0].value.id)
                if f and w.dataclass_fields(n.value.func.id, ARGS_PATH) is not None:
                    out[f] = n.value.func.id
    return out


def json_options(w: VllmWalker) -> set[str]:
    """EngineArgs fields the CLI takes as JSON and ``__post_init__`` / ``create_engine_config`` turns into a config
    class (``if isinstance(self.f, dict): self.f = C(**self.f)``)."""
    out = set()
    src = w.modules[ARGS_PATH].tree
    for n in ast.walk(src):
        if (isinstance(n, ast.If) and isinstance(n.test, ast.Call) and ast.unparse(n.test.func) == "isinstance"
                and len(n.test.args) == 2 and ast.unparse(n.test.args[1]) == "dict"):
            m = re.fullmatch(r"self\.(\w+)", ast.unparse(n.test.args[0]))
            if m:
                out.add(m.group(1))
    return out


def walk(sources: dict[str, str], platform: tuple[str, str, str],
         lets: list[tuple[str, str]] | None = None) -> VllmWalker:
    modules = []
    for p, t in sources.items():
        if p in (MODEL_HOOKS, MLA_SOURCE, QUANT_INIT, vllm_encoder_attn.ATTN_REGISTRY) or p.startswith(SPEC_DIR):
            continue
        try:
            modules.append(cg.read_module(p, t))
        except SyntaxError:
            continue
    for m in modules:
        m.constants.update(set_constants(m))
        m.constants.update(annotated_constants(m))
    w = VllmWalker(modules, platform, lets)
    w.named_enums = vllm_enums.named_enums(modules)  # CUDAGraphMode's tuple members by name (tools/vllm_enums.py)
    for e in w.named_enums.values():
        w.enums.update({f"{e.name}.{k}": v for k, v in e.values.items()})
    for m in modules:
        m.constants.update(literal_list_constants(w, m))
    w.model_hook_attrs = model_hook_attrs(sources.get(MODEL_HOOKS, ""))
    w.model_hook_fields = model_hook_fields(sources.get(MODEL_HOOKS, ""))
    w.hook_classes = model_hook_classes(sources.get(MODEL_HOOKS, ""))
    w.presence_envs = env_presence(modules, w.env)
    w.deepseek_mla_types = deepseek_mla_types(sources.get(MLA_SOURCE, ""))
    w.lazy_constants = vllm_model_walk.literal_constants(sources.get(QUANT_INIT, ""), QUANT_INIT)
    got = speculator_effects(sources)
    w.speculator_fields = got[0] if got else None
    w.speculator_fills = frozenset(filled_when_none(sources, got[0])) if got else frozenset()
    w.speculator_attrs = speculator_class_attrs(sources)
    fields = engine_args_fields(w)
    args = args_obj(w, fields)
    post = w.find_method("EngineArgs", "__post_init__", ARGS_PATH)
    base: list[str] = []  # the vendor is added to the rows (generate), not to the path: merges stay clean
    if post:
        w.invoke(post[0], post[1], args, [], {}, base, post[2])
    cec = w.find_method("EngineArgs", "create_engine_config", ARGS_PATH)
    w.invoke(cec[0], cec[1], args, [], {}, base, cec[2])
    draft_walk(w, args)  # the Qwen3-Omni DSpark checks over the draft's config.json (tools/vllm_draft_walk.py)
    vllm_quant_spec.quant_spec_walk(w, args)  # --quantization-config linear / moe names (tools/vllm_quant_spec.py)
    vllm_quant_spec.merge_walk(w, args)  # ... and onto a Hadamard shorthand's weight (tools/vllm_quant_spec.py)
    # --mm-encoder-attn-backend vs the platform's ViT list, where the model builds one (tools/vllm_encoder_attn.py)
    vllm_encoder_attn.vit_walk(w, args, sources.get(vllm_encoder_attn.ATTN_REGISTRY), platform)
    vllm_device_ids.sync_walk(w)  # ROCm's import-time HIP / CUDA_VISIBLE_DEVICES check (tools/vllm_device_ids.py)
    vllm_rocm_models.unsupported_walk(w)  # ROCm's unsupported architectures (tools/vllm_rocm_models.py)
    return w


def env_equals(w: "VllmWalker", name: str) -> tuple[str, str] | None:
    """(default, wanted) where vllm/envs.py reads ``name`` as ``os.environ.get(name, default) == wanted``."""
    m = w.modules.get("vllm/envs.py")
    for n in ast.walk(m.tree) if m else ():
        if (isinstance(n, ast.Dict)):
            for k, v in zip(n.keys, n.values):
                b = v.body if isinstance(v, ast.Lambda) else None
                if (isinstance(k, ast.Constant) and k.value == name and isinstance(b, ast.Compare) and len(b.ops) == 1
                        and isinstance(b.ops[0], ast.Eq) and isinstance(b.comparators[0], ast.Constant)
                        and isinstance(b.left, ast.Call) and ast.unparse(b.left.func) in ("os.getenv", "os.environ.get")
                        and len(b.left.args) == 2 and all(isinstance(a, ast.Constant) for a in b.left.args)
                        and b.left.args[0].value == name and isinstance(b.left.args[1].value, str)
                        and isinstance(b.comparators[0].value, str)):
                    return b.left.args[1].value, b.comparators[0].value
    return None


def env_presence(modules: list[cg.Module], env: dict[str, Any]) -> frozenset[str]:
    """Environment variables the walked code tests for being set (``"X" in os.environ``): their input is
    ``'__none__'`` when the command does not set them, and a read through vllm.envs is envs.py's default there."""
    tested = {str(n.left.value) for m in modules for n in ast.walk(m.tree)
              if isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], (ast.In, ast.NotIn))
              and isinstance(n.left, ast.Constant) and isinstance(n.left.value, str)
              and ast.unparse(n.comparators[0]) == "os.environ"}
    # a raw ``os.environ.get("X")`` outside vllm/envs.py of a string variable envs.py defines: None when unset, which
    # envs.py's default hides (a boolean one is compared as the raw string: not read)
    raw = {str(n.args[0].value) for m in modules if m.path != "vllm/envs.py" for n in ast.walk(m.tree)
           if isinstance(n, ast.Call) and ast.unparse(n.func) == "os.environ.get" and n.args
           and isinstance(n.args[0], ast.Constant) and isinstance(env.get(n.args[0].value), str)}
    return frozenset(tested | raw)


def literal_list_constants(w: "VllmWalker", m: cg.Module) -> dict[str, tuple]:
    """Module-level ``KV_CACHE_DTYPES: list[str] = list(get_args(CacheDType))`` (config/cache.py:73 at 0.34.0): the
    Literal alias's values (literal_alias), for an UPPER_CASE name no function rebinds."""
    rebound = {n for f in ast.walk(m.tree) if isinstance(f, ast.Global) for n in f.names}
    out: dict[str, tuple] = {}
    for n in m.tree.body:
        target = (n.targets[0] if isinstance(n, ast.Assign) and len(n.targets) == 1 else
                  n.target if isinstance(n, ast.AnnAssign) else None)
        if not (isinstance(target, ast.Name) and target.id.isupper() and target.id not in rebound
                and n.value is not None):
            continue
        v = n.value
        while isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in ("list", "tuple") \
                and len(v.args) == 1:
            v = v.args[0]
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in ("frozenset", "set") \
                and len(v.args) == 1:  # BUCKET_FAMILY_KEYS = frozenset(get_args(...)) (v1/metrics/buckets.py:27)
            v = v.args[0]
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "get_args" and len(v.args) == 1:
            got = literal_alias(w, v.args[0], m.path)
            if got is not None:
                out[target.id] = got
    return out


def annotated_constants(m: cg.Module) -> dict[str, Any]:
    """Module-level ``X: Final = "passthrough"`` (config/kernel.py:161 at 0.34.0) and ``UPPER_CASE: T = literal``
    that no function of the module rebinds (``global X``): their values, which checkgen's read_module (plain
    assignments only) leaves out."""
    rebound = {n for f in ast.walk(m.tree) if isinstance(f, ast.Global) for n in f.names}
    out: dict[str, Any] = {}
    for n in m.tree.body:
        if not (isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None):
            continue
        name = n.target.id
        if name in rebound or not ("Final" in ast.unparse(n.annotation) or name.isupper()):
            continue
        try:
            out[name] = cg._const_eval(n.value, m.constants)
        except (ValueError, TypeError, KeyError, SyntaxError, MemoryError, RecursionError, ZeroDivisionError):
            continue
    return out


def set_constants(m: cg.Module) -> dict[str, tuple]:
    """Module-level ``X = frozenset({A, B})`` / ``set(...)`` / ``{A, B}`` of literals or the module's own literal
    constants (config/kernel.py FLASHINFER_MOE_EP_BACKENDS): X as the tuple of its values (sorted), which ``in``
    reads the same way."""
    out = {}
    for n in m.tree.body:
        if not (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)):
            continue
        v = n.value
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in ("frozenset", "set") \
                and len(v.args) == 1 and not v.keywords:
            v = v.args[0]
        if not isinstance(v, (ast.Set, ast.Tuple, ast.List)) or n.value is v and not isinstance(v, ast.Set):
            continue
        vals = []
        for e in v.elts:
            if isinstance(e, ast.Constant) and isinstance(e.value, str):
                vals.append(e.value)
            elif isinstance(e, ast.Name) and isinstance(m.constants.get(e.id), str):
                vals.append(m.constants[e.id])
            else:
                break
        else:
            out[n.targets[0].id] = tuple(sorted(vals))
    return out


def generate(sources: dict[str, str]) -> tuple[dict[tuple[str, int], dict[str, Any]], list[VllmWalker]]:
    """(path, line) -> {expr} for every site some platform walk translated (a condition that is False on every
    platform optkg has hardware for is left out: the site is listed with ``never``), and the walkers."""
    per: dict[tuple[str, int], dict[str, str]] = {}
    walkers = []
    for plat in PLATFORMS:
        w = walk(sources, plat)
        walkers.append(w)
        for key, r in cg.rows(w).items():
            e = simplify(r["expr"])
            if e != "False":
                per.setdefault(key, {})[plat[0]] = e
    return {key: {"expr": combine(by)} for key, by in per.items()}, walkers


def combine(by: dict[str, str]) -> str:
    """One row from the platform walks' conditions (vendor -> condition; a walk that wrote none never refuses): the
    same on every platform names no vendor; the CUDA and ROCm conditions, the same on both or split by
    ``gpu_vendor``, are read where ``gpu_is_xpu`` is false (a stack without a GPU included, as before the XPU walk),
    the XPU walk's where it is true."""
    if len(by) == len(PLATFORMS) and len(set(by.values())) == 1:
        return next(iter(by.values()))  # the same on every platform: the vendor does not matter
    alike = {v: e for v, e in by.items() if v != "intel"}
    if len(alike) == 2 and len(set(alike.values())) == 1:
        c = next(iter(alike.values()))
    elif alike:
        parts = [f"((gpu_vendor == {v!r}) and {_paren(e)})" for v, e in alike.items()]
        c = parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")"
    else:
        c = None
    x = by.get("intel")
    if x is None:
        return f"((not {XPU_FACT}) and {_paren(c)})"
    if c is None:
        return f"({XPU_FACT} and {_paren(x)})"
    return f"({_paren(x)} if {XPU_FACT} else {_paren(c)})"


def message_fills(per_walk: list[dict[str, str | None] | None], names: dict[str, str]) -> dict[str, str]:
    """{"{field}": optkg expression} for every f-string field of the site's message: the expression every platform
    walk that reached the site read it as (over optkg's fact names; a let stays a let), None where they differ or
    it did not translate."""
    got = [d for d in per_walk if d is not None]
    if not got:
        return {}
    out: dict[str, Any] = {}
    for k, v in got[0].items():
        same = v is not None and all(d.get(k) == v for d in got[1:])
        out[k] = cg.substitute(v, names) if same else None
    return out


def _paren(t: str) -> str:
    return cg._paren(t)


def simplify(expr: str) -> str:
    """``expr`` with constant sub-terms folded (``x and False`` -> False, ``not True`` -> False, ``x or True`` ->
    True, ``(a if True else b)`` -> a); the text is re-rendered by ast.unparse."""
    tree = ast.parse(expr, mode="eval")

    class F(cg.BoolFold):  # checkgen's boolean folding, and truthy(True) -> True
        def visit_Call(self, n: ast.Call) -> ast.AST:
            self.generic_visit(n)
            if isinstance(n.func, ast.Name) and n.func.id == "truthy" and len(n.args) == 1 \
                    and self.const(n.args[0]) is not None:
                return n.args[0]
            return n
    out = F().visit(tree)
    text = ast.unparse(out)
    # keep the term whole: the walk joins path conditions with " and " (an `or` must not lose its parentheses)
    return text if isinstance(out.body, (ast.Constant, ast.Name, ast.Call, ast.Compare)) else f"({text})"


if __name__ == "__main__":
    import collections
    wheel = Path(sys.argv[1])
    src = read_sources(wheel)
    rows, walkers = generate(src)
    print(len(rows), "rows")
    for w in walkers:
        print(w.vendor, "sites reached", len(w.sites), "opaque top:",
              sorted(w.opaque.items(), key=lambda x: -x[1])[:40])


# --------------------------------------------------------------------------------------------- release tables
def cli_options(w: VllmWalker) -> dict[str, list[str]]:
    """EngineArgs field (argparse dest) -> the option strings ``EngineArgs.add_cli_args`` gives it."""
    out: dict[str, list[str]] = {}
    fn = w.find_method("EngineArgs", "add_cli_args", ARGS_PATH)
    if fn is None:
        return out
    for n in ast.walk(fn[0]):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument":
            names = [a.value for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            longs = [x for x in names if x.startswith("--")]
            if not longs:
                continue
            dest = next((k.value.value for k in n.keywords if k.arg == "dest" and isinstance(k.value, ast.Constant)),
                        longs[0][2:].replace("-", "_"))
            out.setdefault(dest, [])
            out[dest] += [x for x in names if x not in out[dest]]
    return out


def literal_value(w: VllmWalker, node: ast.AST | None, path: str, depth: int = 0) -> tuple[bool, Any]:
    """(True, value) when a default expression is a literal (None -> '__none__', empty list / dict), or names a
    config class field whose default is one (``ParallelConfig.tensor_parallel_size``); (False, None) otherwise."""
    if node is None or depth > 4:
        return False, None
    if isinstance(node, (ast.List, ast.Tuple)) and not node.elts:
        return True, []
    if isinstance(node, ast.Dict) and not node.keys:
        return True, {}
    if (isinstance(node, ast.Call) and ast.unparse(node.func) == "get_field" and len(node.args) == 2
            and isinstance(node.args[0], ast.Name) and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)):
        # EngineArgs' ``get_field(CompilationConfig, "max_cudagraph_capture_size")`` (arg_utils.py:523 at 0.34.0): the
        # config field's own default (config/utils.py:86-120 copies it)
        return literal_value(w, ast.Attribute(value=node.args[0], attr=node.args[1].value, ctx=ast.Load()), path,
                             depth + 1)
    try:
        v = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        v = ...
    if v is not ...:
        if v is None:
            return True, NONE
        if isinstance(v, (bool, int, float, str)):
            return True, v
        if isinstance(v, (list, tuple)) and all(isinstance(x, (bool, int, float, str)) for x in v):
            return True, list(v)
        return False, None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        f = w.dataclass_fields(node.value.id, path)
        if f and node.attr in f:
            return literal_value(w, f[node.attr][0], f[node.attr][1], depth + 1)
        if f"{node.value.id}.{node.attr}" in w.enums:
            return True, w.enums[f"{node.value.id}.{node.attr}"]
    return False, None


def input_default(w: VllmWalker, name: str, info: dict[str, Any], ef: dict[str, Any]) -> tuple[bool, Any]:
    if info["kind"] == "env":
        return True, info["default"]
    if info["kind"] == "field":
        node, path = ef.get(info["field"], (None, ARGS_PATH))
        return literal_value(w, node, path)
    if "default" in info:  # a removed key (tools/vllm_removed_keys.py): not given unless the user gives it
        return True, info["default"]
    cls = info.get("cls")
    f = w.dataclass_fields(cls, None) if cls else None
    if not f or info["key"] not in f:
        return False, None
    return literal_value(w, f[info["key"]][0], f[info["key"]][1])


def enum_names(w: VllmWalker, ann: ast.AST | None) -> dict[str, Any]:
    """{member: value} of the enum class an annotation names (``CompilationMode | None``), {} otherwise."""
    if ann is None:
        return {}
    for n in ast.walk(ann):
        if isinstance(n, ast.Name):
            got = {k.split(".", 1)[1]: v for k, v in w.enums.items() if k.split(".", 1)[0] == n.id}
            hit = w.find_class(n.id, None)
            if n.id in w.named_enums:  # a member held by its name (tools/vllm_enums.py): the option stays a string
                return {}
            if got and hit and any("Enum" in ast.unparse(b) for b in hit[0].bases):
                members = {st.targets[0].id for st in hit[0].body if isinstance(st, ast.Assign)
                           and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
                           and not st.targets[0].id.startswith("_")}
                # every member or none: CUDAGraphMode's FULL_AND_PIECEWISE = (FULL, PIECEWISE) has no scalar value
                # (compilation.py:129-137 at 0.34.0), and a partial map would leave its name a string
                return got if members <= set(got) else {}
    return {}


def option_type(w: VllmWalker, ann: ast.AST | None) -> str:
    """The kind of value the option takes, as vLLM's parser reads it (engine/arg_utils.py _compute_kwargs):
    flag (bool, --x / --no-x), integer, number, string (str, Literal), list (nargs '+'), json (dict / config);
    an enum of integers (CompilationMode) is an integer its member names also give."""
    if ann is None:
        return "string"
    names = enum_names(w, ann)
    if names:
        return "integer" if all(isinstance(v, int) and not isinstance(v, bool) for v in names.values()) else "string"
    t = ast.unparse(ann)
    if re.search(r"\bbool\b", t):
        return "flag"
    if re.search(r"\bLiteral\b", t) or re.search(r"\b[A-Z]\w*(Option|Mode|Type|Backend|Method|DType|Dtype|Format|Policy)s?\b", t):
        return "string"
    outer = _outer_types(ann)
    if "dict" in outer and not outer & {"list", "tuple", "set"}:
        return "json"  # dict[str, list[float]] (--custom-histogram-buckets): JSON (arg_utils.py:418 parse_type(json.loads))
    if re.search(r"\b(list|tuple|set)\[", t):
        return "list"
    if re.search(r"\bdict\b|Config\b", t):
        return "json"
    if re.search(r"\bint\b", t) and not re.search(r"\bstr\b|\bfloat\b", t):
        return "integer"
    if re.search(r"\bfloat\b", t) and not re.search(r"\bstr\b", t):
        return "number"
    return "string"


def list_items_are_strings(ann: ast.AST | None) -> bool:
    """A list option whose words argparse keeps as strings: its element type is ``str`` or a union with ``str``
    (``list[int | str]``: vLLM's collection_to_kwargs, engine/arg_utils.py:248-254 at 0.34.0, parses each as str)."""
    for n in ast.walk(ann) if ann is not None else ():
        if isinstance(n, ast.Subscript) and ast.unparse(n.value).split(".")[-1] in ("list", "tuple", "set"):
            elt = n.slice.elts[0] if isinstance(n.slice, ast.Tuple) and n.slice.elts else n.slice
            return "str" in _outer_types(elt)
    return False


def _outer_types(ann: ast.AST) -> set[str]:
    """The names of an annotation's top-level union members (``dict[str, list[float]] | None`` -> {dict, None}), as
    vLLM's get_type_hints splits them (engine/arg_utils.py:267) before it picks the parser by their origins."""
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        return _outer_types(ann.left) | _outer_types(ann.right)
    if isinstance(ann, ast.Subscript):
        base = ast.unparse(ann.value).split(".")[-1]
        if base in ("Optional", "Union"):
            elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            return set().union(*(_outer_types(e) for e in elts))
        if base == "Annotated":
            return _outer_types(ann.slice.elts[0] if isinstance(ann.slice, ast.Tuple) else ann.slice)
        return {base}
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            return _outer_types(ast.parse(ann.value, mode="eval").body)
        except SyntaxError:
            return set()
    return {ast.unparse(ann).split(".")[-1]}


def hand_table() -> dict[str, Any]:
    import yaml
    return yaml.safe_load((Path(__file__).resolve().parents[1] / "catalog" / "engines" / "vllm.yaml").read_text())


COMPATIBLE = {"flag": "boolean", "integer": "integer", "number": "number", "string": "string"}
GENERATED_SETTINGS = "vllm-engine-options.yaml"  # catalog/settings/<this>: written by this generator


def known_setting_types() -> dict[str, str]:
    """Names optkg already gives a meaning -> their kind of value (base settings, parallel sizes, declared
    settings; model facts as 'model', never shared with an option)."""
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    from kg.knowledge.vocabulary import BASE_SETTINGS, MODEL_FACT_NAMES, PARALLEL_DEFAULTS
    import yaml
    out = {k: v[0] for k, v in BASE_SETTINGS.items()}
    out.update({k: "integer" for k in PARALLEL_DEFAULTS})
    for f in sorted((root / "catalog" / "settings").glob("*.yaml")):
        if f.name == GENERATED_SETTINGS:
            continue
        for k, v in ((yaml.safe_load(f.read_text()) or {}).get("settings") or {}).items():
            out.setdefault(k, str((v or {}).get("type")))
    out.update({k: "model" for k in MODEL_FACT_NAMES})
    return out


def fact_names(w: VllmWalker, opts: dict[str, list[str]]) -> tuple[dict[str, str], dict[str, str]]:
    """(walker input -> optkg fact, fact -> technique that sets it true). An option the flag table
    (catalog/engines/vllm.yaml) maps keeps the table's setting; a JSON key the table's ``fields`` map keeps
    that name; the rest are named after the EngineArgs field (``<option>__<key>`` for JSON keys, the variable's
    own name for environment variables), prefixed ``vllm_`` where optkg already uses the name otherwise."""
    table = hand_table()
    by_name: dict[str, dict[str, Any]] = {}
    for spec in table.get("flags") or []:
        for n in spec.get("names") or []:
            by_name[str(n)] = spec
    known = known_setting_types()
    taken = set(known) | {str(s.get("set")) for s in table.get("flags") or [] if s.get("set")}
    out: dict[str, str] = {}
    techs: dict[str, str] = {}

    def own(name: str, kind: str | None = None) -> str:
        # a name optkg already declares with the same kind of value is the same setting (the vocabulary's
        # "vLLM --disable-cascade-attn", SGLang's --cpu-offload-gb: one concept per name); another kind is not
        if name not in taken or (kind is not None and COMPATIBLE.get(kind, kind) == known.get(name)):
            return name
        return f"vllm_{name}"

    def option_fact(field: str) -> tuple[str, dict[str, Any] | None]:
        spec = next((by_name[n] for n in opts.get(field, []) if n in by_name and by_name[n].get("set")), None)
        kind = option_type(w, anns.get(field))
        if (spec is not None and not spec.get("value_map") and not spec.get("technique_by_value")
                and (spec.get("type") == kind or {"integer": "number"}.get(kind) == spec.get("type"))):
            return str(spec["set"]), spec
        return own(field, kind), spec if spec is not None and spec.get("type") == "json" else None

    anns = field_annotations(w, "EngineArgs", ARGS_PATH)
    for name, info in sorted(w.input_info.items()):
        if info["kind"] == "field":
            fact, spec = option_fact(info["field"])
            out[name] = fact
            if spec is not None and spec.get("type") == "flag" and spec.get("technique"):
                techs[fact] = str(spec["technique"])
        elif info["kind"] == "env":
            e = (table.get("env") or {}).get(name) or {}
            out[name] = str(e["set"]) if e.get("set") and e.get("type") != "device_list" else own(name)
        else:
            top, _, rest = name.partition("__")
            base_fact, spec = option_fact(top)
            key_path = rest.replace("__", ".")
            mapped = ((spec or {}).get("fields") or {}).get(key_path)
            # the flag table's name for the key when it reads the value as the engine does (same kind of value)
            cls_anns = field_annotations(w, info["cls"], None) if info.get("cls") else {}
            kind = option_type(w, cls_anns.get(info["key"]))
            same = mapped and COMPATIBLE.get(kind) == known.get(str(mapped), "string")
            out[name] = str(mapped) if same else f"{base_fact}__{rest}"
    return out, techs


def generate_release(wheel: Path) -> dict[str, Any]:
    """Everything the sites classification and the launch reader need from one release's wheel:

    ``rows``: (path, line) -> {expr, defaults, set_by_technique} over optkg's fact names;
    ``never``: (path, line) -> why (reached, but its condition is False on every platform optkg has GPUs for);
    ``why``: (path, line) -> why a reached site's condition did not translate;
    ``inputs``: fact -> {options | env | json, key, type, default} (how a user gives it and the release default)."""
    sources = read_sources(wheel)
    per: dict[tuple[str, int], dict[str, str]] = {}
    reached: set[tuple[str, int]] = set()
    why: dict[tuple[str, int], str] = {}
    walkers = []
    shared: list[tuple[str, str]] = []
    for plat in PLATFORMS:
        w = walk(sources, plat, shared)
        walkers.append(w)
        reached |= set(w.sites)
        for k, v in w.why.items():
            why.setdefault(k, v)
        for key, r in cg.rows(w).items():
            e = simplify(r["expr"])
            if e != "False":
                per.setdefault(key, {})[plat[0]] = e
    w0 = walkers[0]
    info: dict[str, dict[str, Any]] = {}
    for w in walkers:
        for k, v in w.input_info.items():
            info.setdefault(k, v)
    w0.input_info = info
    opts = cli_options(w0)
    names, techs = fact_names(w0, opts)
    ef = engine_args_fields(w0)
    anns = field_annotations(w0, "EngineArgs", ARGS_PATH)
    comma = vllm_device_ids.comma_list_options(w0.modules[ARGS_PATH].tree if ARGS_PATH in w0.modules else None)
    inputs: dict[str, dict[str, Any]] = {}
    for raw, fact in names.items():
        i = info[raw]
        ok, dflt = input_default(w0, raw, i, ef)
        entry: dict[str, Any] = {}
        if i["kind"] == "field":
            entry["options"] = opts.get(i["field"], [])
            entry["type"] = option_type(w0, anns.get(i["field"]))
            if entry["type"] == "list" and list_items_are_strings(anns.get(i["field"])):
                entry["items"] = "string"
            if entry["type"] == "list" and set(entry["options"]) & comma:
                entry["items"] = "comma"  # one word, split on commas, digits integers (tools/vllm_device_ids.py)
            names_ = enum_names(w0, anns.get(i["field"]))
            if names_ and entry["type"] == "integer":
                entry["names"] = names_
        elif i["kind"] == "env":
            entry["env"] = raw
            entry["type"] = {bool: "boolean", int: "integer", float: "number"}.get(type(i.get("like", dflt)), "string")
        else:
            top, _, rest = raw.partition("__")
            entry["options"] = opts.get(top, [])
            entry["key"] = rest.replace("__", ".")
            cls_anns = field_annotations(w0, i["cls"], None) if i.get("cls") else {}
            entry["type"] = option_type(w0, cls_anns.get(i["key"]))
            names_ = enum_names(w0, cls_anns.get(i["key"]))
            if names_ and entry["type"] == "integer":
                entry["names"] = names_  # the engine's before-validator maps a member name to its value
        if ok:
            entry["default"] = dflt
        inputs[fact] = entry
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    never: dict[tuple[str, int], str] = {}
    # the platforms' conditions joined (combine) may be over the cost limits each was fitted to: fitted again (its
    # largest parts named as lets), None where that cannot be done
    joined = {key: w0.fit(combine(by)) for key, by in per.items() if by}
    # named long values over optkg's fact names
    let_table = {n: lower_literals(cg.substitute(e, names)) for n, e in shared}
    firing = ValueFiring(let_table)  # by the values a row's parts can take (tools/row_firing.py)
    for key in reached:
        by = per.get(key)
        if not by:
            if key not in why and all(key in w.sites for w in walkers):
                never[key] = ("holds on no GPU optkg knows: its condition is false on CUDA, ROCm and Intel XPU "
                              "(a CPU / TPU / out-of-tree platform check)")
            continue
        expr = lower_literals(cg.substitute(joined[key] or combine(by), names))
        if len(expr) > EXPR_LIMIT or joined[key] is None:  # the platforms' conditions together are over the limits
            why[key] = f"its condition is {len(expr):,} characters, over optkg's expression limit"
            continue
        if not firing.fires(expr):
            # every way to a refusal reads __unknown__ (directly or through a let): the row refuses nothing on any
            # stack, so its site is not covered (checkgen.Firing)
            why[key] = NEVER_FIRES
            continue
        used = cg.inputs_of(cg.free_names(expr), let_table)  # the inputs it reads, through the lets it uses
        row: dict[str, Any] = {"expr": expr}
        d = {f: inputs[f]["default"] for f in sorted(used) if f in inputs and "default" in inputs[f]}
        if d:
            row["defaults"] = d
        t = {f: techs[f] for f in sorted(used) if f in techs}
        if t:
            row["set_by_technique"] = t
        fills = message_fills([w.fills.get(key) for w in walkers if key in w.sites], names)
        if fills:
            row["fills"] = fills
        rows[key] = row
    lets = cg.used_lets({k: {"names": sorted(cg.free_names(r["expr"]))} for k, r in rows.items()},
                        list(let_table.items()))
    return {"rows": rows, "never": never, "why": why, "inputs": inputs, "reached": reached,
            "lets": [{"name": n, "expr": e} for n, e in lets]}


def lower_literals(expr: str) -> str:
    """``expr`` with its string literals lower-cased: the evaluator gives the rows every string fact lower-cased
    (kg.analyses.enginechecks.generated_refusals), so ``kv_connector == 'NixlConnector'`` must read 'nixlconnector'."""
    if not re.search(r"'[^']*[A-Z][^']*'|\"[^\"]*[A-Z][^\"]*\"|\bupper\(", expr):
        return expr

    class Low(ast.NodeTransformer):
        def visit_Constant(self, n: ast.Constant) -> ast.AST:
            return ast.Constant(n.value.lower()) if isinstance(n.value, str) else n

        def visit_Call(self, n: ast.Call) -> ast.AST:  # upper(x) of a lower-cased fact compares as lower(x)
            self.generic_visit(n)
            if isinstance(n.func, ast.Name) and n.func.id == "upper":
                n.func = ast.Name("lower", ast.Load())
            return n
    return ast.unparse(Low().visit(ast.parse(expr, mode="eval")))


NEVER_FIRES = ("its row can never be true: every way to a refusal reads a value the walk could not model (__unknown__, "
               "directly or through a let)")  # the wording of tools/sglang_generated_checks.py
EXPR_LIMIT = 2000  # kg/engine/expr.py MAX_CHARS
INPUTS_FILE = "vllm-inputs.yaml"  # catalog/engines/options/<this>


def write_tables(release: str, result: dict[str, Any]) -> None:
    """Write the release's inputs into catalog/engines/options/vllm-inputs.yaml (other releases kept) and declare the
    new setting names in catalog/settings/vllm-engine-options.yaml (the union over the releases in the inputs file)."""
    import yaml
    from packaging.version import Version
    root = Path(__file__).resolve().parents[1]
    f = root / "catalog" / "engines" / "options" / INPUTS_FILE
    data = (yaml.safe_load(f.read_text()) if f.exists() else None) or {}
    rels = data.get("releases") or {}
    rels[str(release)] = {k: result["inputs"][k] for k in sorted(result["inputs"])}
    rels = {r: rels[r] for r in sorted(rels, key=Version)}
    head = ("# GENERATED by tools/vllm_generated_checks.py (tools/engine_check_sites.py vllm RELEASE) from the released\n"
            "# vllm wheels; do not edit by hand. Per release, every input the generated check rows read\n"
            "# (catalog/engines/checks/sites/vllm-RELEASE.yaml): the options (or JSON key of an option, or environment\n"
            "# variable) a user gives it by, the kind of value vLLM's parser takes, and vLLM's default when it is not\n"
            "# given ('__none__' = None). The launch reader sets these facts from a command (kg.inputs.launch.engineinputs).\n")
    class NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True
    lines = [head + "engine: vllm", "releases:"]
    for r, inputs in rels.items():
        lines.append(f"  {yaml.safe_dump(str(r)).splitlines()[0]}:")
        for fact, e in inputs.items():
            lines.append(f"    {fact}: " + yaml.dump(e, Dumper=NoAliases, default_flow_style=True, sort_keys=False,
                                                     width=100_000).strip())
    f.write_text("\n".join(lines) + "\n")
    known = known_setting_types()
    decl: dict[str, dict[str, Any]] = {}
    for r, inputs in rels.items():
        for fact, e in inputs.items():
            kind = COMPATIBLE.get(e.get("type", ""))
            if fact in known or kind is None or fact in decl:
                continue
            how = (e["env"] if e.get("env") else
                   f"{e['options'][0]} key {e['key']}" if e.get("key") and e.get("options") else
                   (e.get("options") or ["(no option)"])[0])
            decl[fact] = {"type": kind, "description": f"vLLM {how} (read by its generated startup checks)"}
    s = root / "catalog" / "settings" / GENERATED_SETTINGS
    s.write_text("# GENERATED by tools/vllm_generated_checks.py; do not edit by hand. vLLM options the generated startup\n"
                 "# check rows read that optkg has no setting of its own for (catalog/engines/options/vllm-inputs.yaml);\n"
                 "# a stack file may give them under `settings:`.\n"
                 + yaml.safe_dump({"settings": {k: decl[k] for k in sorted(decl)}}, sort_keys=False, width=200))
