"""Values vLLM's config classes compute that the walk (tools/vllm_generated_checks.py) reads here: ``call_hook`` is
called for every call by name, ``value_hook`` for every expression.

- ``_get_and_verify_max_len(..., max_model_len=X)`` (config/model.py:2589-2728 at 0.34.0, :2545-2684 at 0.33.0): the
  model length vLLM settles on. Where the user gives a length (not None, not -1 = auto) and the function returns, it
  returns ``int(max_model_len)`` (:2701-2728: an over-long length raises unless VLLM_ALLOW_LONG_MAX_MODEL_LEN, and
  is returned as given when allowed; :2623-2626 returns it as given for a model without a length key). Else it is
  derived from config.json (unknown here). The function is still walked for its own checks.
- ``self.get_model_arch_config()`` of the served model (model.py:1049-1060 at 0.34.0, :1029-1040 at 0.33.0): its
  ``quantization_config`` is the checkpoint's (transformers_utils/model_arch_config_convertor.py:241-292: config.json's
  quantization_config, else compression_config, else the same in text_config; transformers_utils/config.py:998-1010
  puts hf_quant_config.json there when config.json has none): an object where the fact
  ``vllm_model__quantization_config`` (kg.engines.vllm.registry) is true, None where it is false. Every other field
  of the architecture config stays unknown.
- ``me_quant.NAME`` (model.py:65-75 ``me_quant = LazyLoader(..., "vllm.model_executor.layers.quantization")``): the
  literal module constant of that module (``DEPRECATED_QUANTIZATION_METHODS``, :54-56 at 0.34.0).
- ``cast(T, x)`` (typing.cast) is ``x``.
- ``{m.value for m in E}`` of an Enum class ``E`` the walk reads (attention.py:312 ``valid_kinds`` over
  v1/kv_cache_interface.py's KVCacheSpecKind at 0.34.0, :248 at 0.33.0): the tuple of its members' values.
"""
from __future__ import annotations

import ast
import sys
from typing import Any

import checkgen as cg


QUANT_FACT = "vllm_model__quantization_config"
LAZY = {"me_quant": "vllm/model_executor/layers/quantization/__init__.py"}


def literal_constants(text: str, path: str) -> dict[str, dict[str, Any]]:
    """{path: {NAME: value}} of a module's UPPER_CASE names assigned once, at module level, to a literal."""
    if not text:
        return {}
    tree = ast.parse(text)
    seen: dict[str, int] = {}
    out: dict[str, Any] = {}
    for n in tree.body:
        if isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    seen[t.id] = seen.get(t.id, 0) + 1
                    try:
                        out[t.id] = ast.literal_eval(n.value) if n.value is not None else None
                    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                        out.pop(t.id, None)
    mutated = {n.value.id for n in ast.walk(tree) if isinstance(n, (ast.Attribute, ast.Subscript))
               and isinstance(n.value, ast.Name) and (isinstance(n.ctx, (ast.Store, ast.Del))
                                                       or isinstance(n, ast.Attribute) and n.attr in MUTATING)}
    return {path: {k: v for k, v in out.items() if k.isupper() and seen[k] == 1 and k not in mutated
                   and isinstance(v, (str, int, list, tuple)) and not isinstance(v, bool)}}


MUTATING = ("append", "extend", "insert", "remove", "pop", "clear", "update", "add", "discard")


def call_hook(w: Any, name: str, node: ast.Call, fr: cg.Frame, pc: list[str]) -> Any:
    if (name == "cast" and isinstance(node.func, ast.Name) and len(node.args) == 2 and not node.keywords
            and "cast" not in fr.locals and getattr(w.modules.get(fr.path), "imports", {}).get("cast") == "typing.cast"):
        return w.value_or_taint(node.args[1], fr, pc)  # typing.cast returns its value (model.py:1406 at 0.34.0)
    if name == "get_model_arch_config" and isinstance(node.func, ast.Attribute) and not node.args:
        try:
            base = w.value(node.func.value, fr, pc)
        except cg.Untranslatable:
            return None
        gen = sys.modules[type(w).__module__]
        if not gen.served_model_config(w, base):
            return None
        quant = cg.ObjIf(f"truthy({QUANT_FACT})", cg.Obj("checkpoint quantization_config"),
                         gen.NoneObj(None, None))
        return cg.Obj("model_arch_config", lambda a: quant if a == "quantization_config" else cg.TAINT)
    if name == "_get_and_verify_max_len" and not node.args:
        hit = w.find_function(name, fr.path)
        if hit is None:
            return None
        kwargs = {k.arg: w.value_or_taint(k.value, fr, pc) for k in node.keywords if k.arg}
        if None in (k.arg for k in node.keywords):
            return None
        try:
            w.invoke(hit[0], hit[1], None, [], kwargs, pc)  # its own checks
        except cg.Untranslatable:
            pass
        given = kwargs.get("max_model_len")
        if not isinstance(given, cg.Expr):
            return cg.TAINT
        g = given.text
        return cg.Expr(f"({g} if is_a({g}, 'int') and {g} != -1 else {cg.UNK})")
    return None


def value_hook(w: Any, node: ast.AST, fr: cg.Frame, pc: list[str]) -> Any:
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in LAZY
            and node.value.id not in fr.locals and isinstance(node.ctx, ast.Load)):
        got = (getattr(w, "lazy_constants", None) or {}).get(LAZY[node.value.id], {})
        if node.attr in got and _binds(w, fr.path, node.value.id, LAZY[node.value.id]):
            return w.literal(got[node.attr])
        return None
    if (isinstance(node, ast.SetComp) and len(node.generators) == 1 and not node.generators[0].ifs
            and not node.generators[0].is_async and isinstance(node.generators[0].target, ast.Name)
            and isinstance(node.generators[0].iter, ast.Name) and node.generators[0].iter.id not in fr.locals
            and isinstance(node.elt, ast.Attribute) and node.elt.attr == "value"
            and isinstance(node.elt.value, ast.Name) and node.elt.value.id == node.generators[0].target.id):
        name = node.generators[0].iter.id
        hit = w.find_class(name, fr.path)
        if hit is None or not w.is_enum(hit):
            return None
        vals = [v for k, v in w.enums.items() if k.split(".", 1)[0] == hit[0].name]
        if not vals or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in vals):
            return None
        return cg.Expr(repr(tuple(sorted(set(vals), key=repr))))
    return None


def _binds(w: Any, path: str, name: str, target: str) -> bool:
    """Module ``path`` binds ``name`` to the module file ``target`` (``import a.b as name`` or ``name =
    LazyLoader(_, globals(), "a.b")``) and nothing else."""
    m = w.modules.get(path)
    dotted = target.removesuffix("/__init__.py").removesuffix(".py").replace("/", ".")
    if m is None:
        return False
    ok = False
    for n in ast.walk(m.tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                if a.asname == name:
                    ok = a.name == dotted
                    if not ok:
                        return False
        elif isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets):
            v = n.value
            if not (isinstance(v, ast.Call) and ast.unparse(v.func) == "LazyLoader" and len(v.args) == 3
                    and isinstance(v.args[2], ast.Constant) and v.args[2].value == dotted):
                return False
            ok = True
    return ok
