"""Generate Megatron's mechanical startup checks as table rows optkg evaluates (used by tools/training_check_sites.py).

The walk (tools/checkgen.py) follows Megatron-LM in the order it runs (core_v0.16.1):

1. ``validate_args(args)`` (megatron/training/arguments.py:293), over the arguments ``parse_args`` returns: every
   ``add_argument`` of arguments.py and the TransformerConfig / ModelParallelConfig fields ArgumentGroupFactory adds,
   plus ``world_size`` (parse_args sets it from WORLD_SIZE, arguments.py:114). Every rewrite validate_args makes
   (``args.data_parallel_size = args.world_size // total_model_size``, ``args.global_batch_size`` when not given,
   ``args.params_dtype`` ...) is modelled, so a later check reads the rewritten value.
2. ``core_transformer_config_from_args(args)`` (arguments.py:1306) builds the config's keyword arguments from the
   rewritten args (its fields-copy loop, then its own ``kw_args[...] = ...`` lines); then
   ``TransformerConfig(**kw_args)`` runs ``TransformerConfig.__post_init__`` and, through ``super()``,
   ``ModelParallelConfig.__post_init__`` (megatron-core 0.16.1). ``MLATransformerConfig`` is built instead under
   ``--multi-latent-attention`` (arguments.py:1311-1312): its checks are walked under that condition.
3. ``DistributedDataParallelConfig(**kwargs)`` as megatron/training/training.py:1290-1309 builds it (not under
   ``--use-torch-fsdp2``), and ``get_megatron_optimizer_config(args)`` (training.py:1410) for the optimizer config.

The pretrain scripts' ``args_defaults`` (validate_args' loop at arguments.py:457-466) are not modelled: pretrain_gpt.py
passes only ``tokenizer_type``, which no check reads.

Defaults per release: every ``add_argument`` of arguments.py (dest, default, store_true / store_false, lists) and the
dataclass fields ArgumentGroupFactory turns into arguments (field name, literal default).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import checkgen as cg  # noqa: E402

NONE = cg.NONE
UNKNOWN = object()


def generate(sources: dict[str, str], argtable: dict[str, dict[str, Any]]) -> tuple[dict, list, dict[str, int]]:
    """Rows (path, line) -> {expr, names, inputs ...} over Megatron-LM argument names, the lets they read
    (checkgen.Walker.bind) and the calls the walk did not model.

    ``sources``: path -> text for megatron/training/{arguments,training}.py and megatron/core/** of the release."""
    sources = {p: _walked(p, t) for p, t in sources.items()}
    modules = [cg.read_module(p, t) for p, t in sources.items()]
    w = cg.Walker(modules)
    # a CudaGraphScope member is its name: Megatron-LM's --cuda-graph-scope converts each command-line name to the
    # member of that name (arguments.py:1430, CudaGraphScope[scope]), so the list optkg reads holds names
    for k in [k for k in w.enums if k.startswith("CudaGraphScope.")]:
        w.enums[k] = k.split(".", 1)[1]
    dests = {v["dest"] for v in argtable.values()} | {"world_size"}
    args = cg.Obj("args", lambda a: cg.Expr(a) if a in dests else None)
    A = "megatron/training/arguments.py"
    T = "megatron/training/training.py"
    va = w.modules[A].functions["validate_args"]
    w.invoke(va, A, None, [args], {}, [])
    # 2. the transformer config, built from the rewritten args
    ctc = w.modules[A].functions["core_transformer_config_from_args"]
    before = len(w.dicts)
    w.invoke(ctc, A, None, [args], {}, [])
    kw = w.dicts[before] if len(w.dicts) > before else None
    if kw is not None:
        TC = "megatron/core/transformer/transformer_config.py"
        w.new_dataclass("TransformerConfig", {}, [kw], [], TC)
        w.new_dataclass("MLATransformerConfig", {}, [kw], ["truthy(multi_latent_attention)"], TC)
    # 3. DDP config (training.py: the else-branch that builds it) and the optimizer config
    block = _block_building(w.modules[T].tree, "DistributedDataParallelConfig")
    if block is not None:
        fr = cg.Frame(T, {"args": args, "num_parameters": cg.TAINT})
        w.run(block, fr, ["(not truthy(use_torch_fsdp2))"])
    goc = w.modules[T].functions.get("get_megatron_optimizer_config")
    if goc is not None:
        w.invoke(goc, T, None, [args], {}, [])
    # the grad scaler megatron-core builds from that config (optimizer/__init__.py:419-446: a constant scaler for
    # --loss-scale, else a dynamic one under --fp16), its constructor's asserts over the loss-scale arguments
    O = "megatron/core/optimizer/__init__.py"
    block = _if_calling(w.modules[O].tree, "DynamicGradScaler") if O in w.modules else None
    if block is not None:
        kw = cg.Obj("optimizer kwargs", lambda a: _arg_or_none(w, args, a))
        opt = w.new_dataclass("AdamOptimizerConfig", {}, [kw], ["(optimizer == 'adam')"],
                              "megatron/core/optimizer/optimizer_config.py")
        w.run([block], cg.Frame(O, {"config": opt}), ["(optimizer == 'adam')"])
    return cg.rows(w), w.lets, dict(sorted(w.opaque.items(), key=lambda x: -x[1]))


TC = "megatron/core/transformer/transformer_config.py"
# TransformerConfig.__post_init__'s cuda_graph_scope normalisation (0.16.1 transformer_config.py:1700-1714), as it runs
# on what Megatron-LM passes: a list of CudaGraphScope members with "full" already removed (arguments.py:1255-1260), so
# the branch converting strings does nothing (an empty list converts to itself); the local implementation's appends
# (:1731-1734) become assignments the walk models. Same line count, so every row keeps its line.
CGS_WALKED = [
    ("        if all(isinstance(scope, str) for scope in self.cuda_graph_scope):\n",
     "        if False:  # from Megatron-LM: members, never strings\n"),
    ("                        self.cuda_graph_scope.append(CudaGraphScope.moe_router)\n",
     "                        self.cuda_graph_scope = self.cuda_graph_scope + [CudaGraphScope.moe_router]\n"),
    ("                        self.cuda_graph_scope.append(CudaGraphScope.moe_preprocess)\n",
     "                        self.cuda_graph_scope = self.cuda_graph_scope + [CudaGraphScope.moe_preprocess]\n"),
    # --moe-layer-recompute adds "moe" to recompute_modules (:1265-1266), as an assignment the walk models
    ('                self.recompute_modules.append("moe")\n',
     '                self.recompute_modules = self.recompute_modules + ["moe"]\n'),
]


def _walked(path: str, text: str) -> str:
    if path == TC:
        for a, b in CGS_WALKED:
            text = text.replace(a, b)
    return text


def _arg_or_none(w: cg.Walker, args: cg.Obj, attr: str):
    try:
        return w.get_attr(args, attr)
    except cg.Untranslatable:
        return None


def _if_calling(tree: ast.Module, cls: str) -> ast.If | None:
    """The outermost ``if`` statement of a function body that (somewhere inside) calls ``cls(...)``."""
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            for st in fn.body:
                if isinstance(st, ast.If) and any(isinstance(n, ast.Call) and ast.unparse(n.func) == cls
                                                  for n in ast.walk(st)):
                    return st
    return None


def _block_building(tree: ast.Module, cls: str) -> list[ast.stmt] | None:
    """The statement block (an if/else branch) that ends by building ``cls(**kwargs)``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            for block in (node.body, node.orelse):
                if any(isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
                       and ast.unparse(s.value.func) == cls for s in block):
                    return block
    return None


def literal(node: ast.AST | None) -> Any:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return UNKNOWN


def _annotation_type(ann: ast.AST) -> str:
    text = ast.unparse(ann)
    for t in ("bool", "int", "float", "str"):
        if t in text.replace("Optional[", "").split("[")[0].replace("|", " ").split() or text in (t, f"Optional[{t}]"):
            return t
    return "str"


def dataclass_defaults(src: str, cls: str) -> dict[str, tuple[Any, str]]:
    """field -> (literal default, annotated type) of ``cls`` (fields without a literal default are left out)."""
    out = {}
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for s in node.body:
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
                    v = s.value
                    if isinstance(v, ast.Call) and getattr(v.func, "id", getattr(v.func, "attr", "")) == "field":
                        v = next((k.value for k in v.keywords if k.arg == "default"), None)
                        if v is None:
                            continue
                    val = literal(v) if v is not None else UNKNOWN
                    if val is not UNKNOWN:
                        out[s.target.id] = (val, _annotation_type(s.annotation))
    return out


def argparse_args(arguments_src: str) -> dict[str, dict[str, Any]]:
    """``--flag`` -> {dest, kind (value / true / false), type, default} for every add_argument of arguments.py."""
    out: dict[str, dict[str, Any]] = {}
    for n in ast.walk(ast.parse(arguments_src)):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument"):
            continue
        flags = [a.value for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        longs = [f for f in flags if f.startswith("--")]
        if not longs:
            continue
        kw = {k.arg: k.value for k in n.keywords if k.arg}
        dest = literal(kw.get("dest")) if "dest" in kw else longs[0][2:].replace("-", "_")
        if "action" in kw and ast.unparse(kw["action"]).split(".")[-1] == "BooleanOptionalAction":
            # argparse.BooleanOptionalAction: --flag sets True, --no-flag sets False (Python 3.9+ argparse)
            default = literal(kw.get("default")) if "default" in kw else None
            if default is UNKNOWN or not isinstance(dest, str):
                continue
            for f in longs:
                out[f] = {"dest": dest, "kind": "true", "type": "bool", "default": default}
                out["--no-" + f[2:]] = {"dest": dest, "kind": "false", "type": "bool", "default": default}
            continue
        action = literal(kw.get("action")) if "action" in kw else None
        if action not in (None, "store_true", "store_false"):
            continue  # custom actions: not modelled (their checks stay untranslated or unknown)
        kind = {"store_true": "true", "store_false": "false"}.get(action, "value")
        if "nargs" in kw and kind == "value":
            nargs = literal(kw["nargs"])
            kind = "value" if nargs == "?" else "list"
        default = literal(kw.get("default")) if "default" in kw else ({"true": False, "false": True}.get(kind))
        typ = kw.get("type")
        typ = typ.id if isinstance(typ, ast.Name) and typ.id in ("int", "float", "str") else "str"
        if default is UNKNOWN or not isinstance(dest, str):
            continue
        for f in longs:
            out[f] = {"dest": dest, "kind": kind, "type": typ, "default": default}
    return out


def argument_table(sources: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The release's command-line arguments: every ``ArgumentGroupFactory(Config, exclude=[...])`` of arguments.py
    (the dataclass fields of Config and its bases, minus ``exclude``: argument_utils.py builds ``--field-name``), then
    every ``add_argument`` of arguments.py (which wins where both define a flag, as argparse's later definition)."""
    args_src = sources["megatron/training/arguments.py"]
    modules = [cg.read_module(p, t) for p, t in sources.items()]
    w = cg.Walker(modules)
    fields: dict[str, tuple[Any, str]] = {}
    tree = ast.parse(args_src)
    for func in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        local_lists = {s.targets[0].id: literal(s.value) for s in ast.walk(func)
                       if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)}
        for n in ast.walk(func):
            if not (isinstance(n, ast.Call) and ast.unparse(n.func) == "ArgumentGroupFactory" and n.args):
                continue
            cls = ast.unparse(n.args[0]).split(".")[-1]
            ex = next((k.value for k in n.keywords if k.arg == "exclude"), None)
            exclude = local_lists.get(ex.id) if isinstance(ex, ast.Name) else literal(ex)
            exclude = set(exclude) if isinstance(exclude, list) else set()
            for name, (node, path) in (w.dataclass_fields(cls, "megatron/training/arguments.py") or {}).items():
                if name in exclude:
                    continue
                ann = _field_annotation(w, cls, name)
                val = literal(node) if node is not None else UNKNOWN
                if val is UNKNOWN and node is not None:
                    v = w.value_or_taint(node, cg.Frame(path, {}), [])
                    val = ast.literal_eval(v.text) if isinstance(v, cg.Expr) and not cg.free_names(v.text) else UNKNOWN
                if val is UNKNOWN:
                    continue
                fields[name] = (None if val == NONE else val, ann)
    return dict(sorted({**factory_args(fields), **argparse_args(args_src)}.items()))


def _field_annotation(w: cg.Walker, cls: str, name: str) -> str:
    seen = set()
    while cls and cls not in seen:
        seen.add(cls)
        hit = w.find_class(cls, "megatron/training/arguments.py")
        if hit is None:
            break
        for s in hit[0].body:
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.target.id == name:
                text = ast.unparse(s.annotation)
                low = text.lower()
                if low.startswith("optional[") and low.endswith("]"):
                    low = low[len("optional["):-1]  # argument_utils.py:112-115 builds the type inside Optional[]
                if low.startswith(("list[", "tuple[")) or "| list[" in low:
                    inner = low.split("[", 1)[1]
                    return "list:" + next((t for t in ("int", "float", "str") if inner.startswith(t)), "str")
                return _annotation_type(s.annotation)
        cls = next((ast.unparse(b).split(".")[-1] for b in hit[0].bases), None)
    return "str"


def factory_args(fields_defaults: dict[str, tuple[Any, str]]) -> dict[str, dict[str, Any]]:
    """Arguments ArgumentGroupFactory builds from dataclass fields (argument_utils.py:82, :165-171 at core_v0.16.1):
    ``--field-name``; a bool field defaulting to False is a store_true switch, one defaulting to True ``--no-...``."""
    out = {}
    for name, (default, typ) in fields_defaults.items():
        flag = "--" + name.replace("_", "-")
        if typ.startswith("list"):
            out[flag] = {"dest": name, "kind": "list", "type": typ.partition(":")[2] or "str", "default": default}
        elif isinstance(default, bool) or typ == "bool":
            default = bool(default)
            if default:
                out["--no-" + name.replace("_", "-")] = {"dest": name, "kind": "false", "type": "bool", "default": True}
                out["--disable-" + name.replace("_", "-")] = {"dest": name, "kind": "false", "type": "bool", "default": True}
            else:
                out[flag] = {"dest": name, "kind": "true", "type": "bool", "default": False}
        else:
            out[flag] = {"dest": name, "kind": "value", "type": typ, "default": default}
    return out
