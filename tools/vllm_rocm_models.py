"""ROCm's model-architecture refusal in vLLM's generated rows.

The model registry loads the served model's class through ``_try_load_model_cls(model_arch, ...)``, which first
calls ``current_platform.verify_model_arch(model_arch)`` (0.34.0 model_executor/models/registry.py:1198-1205,
0.33.0 :1148); on ROCm that refuses an architecture in the module's ``_ROCM_UNSUPPORTED_MODELS`` list (0.34.0
platforms/rocm.py:1245-1249 [:1208-1212], the list at :72 in both). The row is read from the release's list, so a
release that adds a model to it refuses that model; at 0.33.0 and 0.34.0 the list is empty and the row never
fires. ``model_arch`` is the architecture the registry resolved (``vllm_model__arch``, lower-cased as the rows'
literals are); elsewhere the row does not fire. Nothing is written when the method or the list has another shape.
"""
from __future__ import annotations

import ast
from typing import Any

PATH = "vllm/platforms/rocm.py"
LIST = "_ROCM_UNSUPPORTED_MODELS"


def shape(tree: ast.Module | None) -> tuple[tuple[str, ...], int] | None:
    """(the listed architectures, the raise's line): ``RocmPlatform.verify_model_arch`` starts with ``if model_arch
    in _ROCM_UNSUPPORTED_MODELS: raise ...`` and the list is a module-level literal of strings."""
    body = tree.body if tree is not None else []
    names = None
    for s in body:
        t = s.target if isinstance(s, ast.AnnAssign) else s.targets[0] if isinstance(s, ast.Assign) else None
        if isinstance(t, ast.Name) and t.id == LIST:
            v = s.value
            if not (isinstance(v, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                                                 for e in v.elts)):
                return None
            names = tuple(sorted(e.value.lower() for e in v.elts))
    c = next((s for s in body if isinstance(s, ast.ClassDef) and s.name == "RocmPlatform"), None)
    f = next((s for s in (c.body if c else []) if isinstance(s, ast.FunctionDef) and s.name == "verify_model_arch"),
             None)
    first = next((s for s in (f.body if f else []) if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))),
                 None)
    if names is None or not (isinstance(first, ast.If) and ast.unparse(first.test) == f"model_arch in {LIST}"
                             and first.body and isinstance(first.body[0], ast.Raise)):
        return None
    return names, first.body[0].lineno


def unsupported_walk(w: Any) -> None:
    """Record the refusal (module doc) on the ROCm walk."""
    m = w.modules.get(PATH)
    got = shape(m.tree if m is not None else None) if w.vendor == "amd" else None
    if got is None:
        return
    names, line = got
    w.site(PATH, line, ["truthy(vllm_model__arch)", f"(vllm_model__arch in {names!r})"])
