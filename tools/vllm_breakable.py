"""vLLM's breakable CUDA graphs by default, as a value the startup walk knows (tools/vllm_generated_checks.py).

Unless ``VLLM_USE_BREAKABLE_CUDAGRAPH`` is set, ``VllmConfig._maybe_enable_breakable_cudagraph`` turns breakable CUDA
graphs on (and compilation off) for the architectures of ``default_breakable_cudagraph_architectures()`` (0.34.0
config/vllm.py:810-833 and :137-158; 0.33.0 :842-857 and :112-129): ``_uses_breakable_cudagraph_by_default``
(0.34.0 :764-773, 0.33.0 :798-804) intersects that set with ``model_config.architectures`` (and, at 0.34.0, the text
config's ``architectures``). The walk cannot build those sets (``frozenset`` module constants, a function per
platform), so every CUDA-graph row read an unknown value unless the command set the variable. Here:

- the platform's set is read from the release's own source: the returns of ``default_breakable_cudagraph_architectures``
  under ``if current_platform.is_<x>():`` (taken on the walks' vendors as vllm_generated_checks.PLATFORM_IS has
  them), each a ``frozenset({...})`` literal, a module constant holding one, or a union ``a | b`` of those;
- ``model_config.architectures`` is config.json's ``architectures`` (``hf__architectures``): ModelConfig's property
  (model.py:1216-1217) reads the convertor's ``get_architectures`` (model_arch_config_convertor.py:73-77), which
  rewrites the list only for the architectures / model types that leave ``vllm_model__arch`` unset
  (kg/engines/vllm/registry.py), so the value is given only where that fact is;
- the text config's ``architectures`` is ``hf_text__architectures`` ('__none__' where its section leaves it out:
  transformers' PretrainedConfig default, kg.analyses.enginechecks.model_config_keys).

Names compare lower-cased (the rows' literals are, tools/vllm_generated_checks.py lower_literals).
"""
from __future__ import annotations

import ast
from typing import Any

import checkgen as cg
import vllm_loops

PATH = "vllm/config/vllm.py"
FUNCTION = "default_breakable_cudagraph_architectures"
METHOD = "_uses_breakable_cudagraph_by_default"


def _constant(m: cg.Module, name: str) -> ast.AST | None:
    for s in m.tree.body:
        if isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value is not None:
            tgt = s.targets[0] if isinstance(s, ast.Assign) else s.target
            if isinstance(tgt, ast.Name) and tgt.id == name:
                return s.value
    return None


def _names(m: cg.Module, node: ast.AST, depth: int = 0) -> frozenset[str]:
    """A frozenset of strings written as ``frozenset({...})``, a module constant holding one, or ``a | b``."""
    if depth > 4:
        raise ValueError("too deep")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _names(m, node.left, depth + 1) | _names(m, node.right, depth + 1)
    if isinstance(node, ast.Name):
        v = _constant(m, node.id)
        if v is None:
            raise ValueError(node.id)
        return _names(m, v, depth + 1)
    if isinstance(node, ast.Call) and ast.unparse(node.func) in ("frozenset", "set") and not node.keywords:
        if not node.args:
            return frozenset()
        v = ast.literal_eval(node.args[0])
        if isinstance(v, (set, list, tuple)) and all(isinstance(x, str) for x in v):
            return frozenset(v)
    raise ValueError(ast.unparse(node)[:60])


def platform_architectures(w: Any, platform_is: dict[str, tuple[str, ...]]) -> frozenset[str] | None:
    """The set ``default_breakable_cudagraph_architectures()`` returns on the walk's vendor; None when its body is
    not the form read here."""
    m = w.modules.get(PATH)
    f = m.functions.get(FUNCTION) if m else None
    if f is None:
        return None
    try:
        for s in f.body:
            if isinstance(s, (ast.ImportFrom, ast.Import)) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)):
                continue
            if isinstance(s, ast.Return) and s.value is not None:
                return _names(m, s.value)
            t = s.test if isinstance(s, ast.If) else None
            if not (isinstance(t, ast.Call) and not t.args and isinstance(t.func, ast.Attribute)
                    and ast.unparse(t.func.value) == "current_platform" and t.func.attr in platform_is
                    and not s.orelse):
                return None
            if w.vendor in platform_is[t.func.attr]:
                ret = [x for x in s.body if isinstance(x, ast.Return)]
                if len(ret) != 1 or ret[0] is not s.body[-1] or ret[0].value is None:
                    return None
                return _names(m, ret[0].value)
    except (ValueError, SyntaxError):
        return None
    return None


def call_hook(w: Any, name: str, node: ast.Call, fr: cg.Frame, pc: list[str],
              platform_is: dict[str, tuple[str, ...]]) -> cg.Expr | None:
    """``self._uses_breakable_cudagraph_by_default()`` of the served model's VllmConfig: whether config.json's
    architectures (or its text config's) meet the platform's set (see the module doc); None for other calls."""
    if name != METHOD or node.args or node.keywords or getattr(w, "in_draft_walk", False):
        return None
    m = w.modules.get(PATH)
    meth = w.find_method("VllmConfig", METHOD, PATH)
    archs = platform_architectures(w, platform_is)
    if m is None or meth is None or archs is None:
        return None
    body = ast.unparse(meth[0])
    if "set(model_config.architectures)" not in body:
        return None
    level = vllm_loops.depth(pc) + 1 + w.generator_depth
    if level > vllm_loops.MAX_LOOPS:
        return None
    e, names = f"_e{level}", tuple(sorted(a.lower() for a in archs))
    parts = [f"any(lower({e}) in {names!r} for {e} in hf__architectures)"]
    if "hf_text_config" in body:  # 0.34.0 :770-772: a multimodal wrapper may host a breakable text model
        parts.append(f"(any(lower({e}) in {names!r} for {e} in hf_text__architectures) "
                     f"if hf_text__architectures != {cg.NONE!r} else False)")
    return cg.Expr(f"(truthy(vllm_model__arch) and ({' or '.join(parts)}))")
