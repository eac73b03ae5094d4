"""``--device-ids`` against the device-control variable (CUDA_VISIBLE_DEVICES) in vLLM's generated rows.

``EngineArgs._resolve_device_ids`` (0.34.0 engine/arg_utils.py:2174-2214, 0.33.0 :2141-2181) composes integer
``--device-ids`` with the platform's device-control variable: where it is set, each id indexes its comma-separated
entries and an id outside them is refused (:2207 [:2174])::

    cvd = getattr(envs, current_platform.device_control_env_var,
                  os.environ.get(current_platform.device_control_env_var))
    if cvd:
        cvd_ids = [current_platform.device_control_id_to_physical_device_id(x) for x in cvd.split(",")]
        for i in int_ids:
            if not 0 <= i < len(cvd_ids):
                raise ValueError(...)

The walk leaves both locals unknown. Here ``cvd`` is the variable as the command sets it (an input named after it,
``'__none__'`` when the command does not set it: the row then does not fire), the platform class's own
``device_control_env_var`` (cuda.py:268 / rocm.py:666 CUDA_VISIBLE_DEVICES, xpu.py:112 ZE_AFFINITY_MASK at 0.34.0),
and ``cvd_ids`` the entries ``split(cvd, ',')``: the check reads only how many there are (an entry the platform
cannot map, a UUID NVML does not know, is refused on the way by the platform's own method). ``--device-ids``
items are vLLM's parser's: digits are integers (arg_utils.py:1209-1215 [:1195-1200]; kg.inputs.launch.engineinputs
``items: comma``).

On ROCm, rocm.py refuses at import (so at every start there) HIP_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES both set,
non-empty and different (``sync_walk``: 0.34.0 and 0.33.0 rocm.py:138-157).
"""
from __future__ import annotations

import ast
from typing import Any

import checkgen as cg

CVD = ("getattr(envs, current_platform.device_control_env_var, "
       "os.environ.get(current_platform.device_control_env_var))")
MAP = "current_platform.device_control_id_to_physical_device_id"


def _env_var(w: Any) -> str | None:
    """The walk's platform class's ``device_control_env_var`` (a string class attribute of it or a base)."""
    cls, path, seen = w.platform.cls, w.platform.path, set()
    while cls and cls not in seen:
        seen.add(cls)
        hit = w.find_class(cls, path)
        if hit is None:
            return None
        c, path = hit
        for s in c.body:
            t = s.target if isinstance(s, ast.AnnAssign) else s.targets[0] if isinstance(s, ast.Assign) else None
            if isinstance(t, ast.Name) and t.id == "device_control_env_var":
                v = s.value
                return v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else None
        cls = next((b.id for b in c.bases if isinstance(b, ast.Name) and w.find_class(b.id, path)), None)
    return None


def value_hook(w: Any, node: ast.AST, fr: cg.Frame, pc: list[str]) -> Any:
    """``current_platform.device_control_env_var``: the walk's platform's own (a literal; None for other nodes)."""
    if isinstance(node, ast.Attribute) and node.attr == "device_control_env_var" \
            and isinstance(node.value, ast.Name) and node.value.id == "current_platform" \
            and "current_platform" not in fr.locals:
        env = _env_var(w)
        return w.literal(env) if env is not None else None
    return None


def assign_hook(w: Any, s: ast.Assign, fr: cg.Frame, pc: list[str]) -> bool:
    """Give ``cvd`` / ``cvd_ids`` their values (module doc); False for any other assignment."""
    if not (len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)) or fr.cls != "EngineArgs":
        return False
    name, v = s.targets[0].id, s.value
    if ast.unparse(v).replace('"', "'") == CVD:
        env = _env_var(w)
        if env is None:
            return False
        w.inputs.add(env)
        w.input_info.setdefault(env, {"kind": "env", "default": cg.NONE})
        fr.locals[name] = cg.Expr(env)
        return True
    gen = v.generators[0] if isinstance(v, ast.ListComp) and len(v.generators) == 1 else None
    it = gen.iter if gen is not None and not gen.ifs and isinstance(gen.target, ast.Name) else None
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "split"
            and isinstance(it.func.value, ast.Name) and len(it.args) == 1 and not it.keywords
            and isinstance(it.args[0], ast.Constant) and it.args[0].value == ","
            and ast.unparse(v.elt) == f"{MAP}({gen.target.id})"):
        return False
    cvd = fr.locals.get(it.func.value.id)
    if not (isinstance(cvd, cg.Expr) and cvd.text in w.inputs):  # the variable this module gave cvd
        return False
    fr.locals[name] = cg.Expr(f"split({cvd.text}, ',')")
    return True


def comma_list_options(tree: ast.Module | None) -> set[str]:
    """Options whose ``add_argument`` parses one word as vLLM's --device-ids does (arg_utils.py:1209-1215 at 0.34.0):
    ``type=lambda s: [int(p) if p.isdigit() else p for p in (part.strip() for part in s.split(","))]``."""
    out: set[str] = set()
    for n in ast.walk(tree) if tree is not None else ():
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument"
                and n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)):
            continue
        t = next((k.value for k in n.keywords if k.arg == "type"), None)
        if not (isinstance(t, ast.Lambda) and len(t.args.args) == 1 and isinstance(t.body, ast.ListComp)):
            continue
        s, comp = t.args.args[0].arg, t.body
        if len(comp.generators) != 1 or comp.generators[0].ifs or not isinstance(comp.generators[0].target, ast.Name):
            continue
        x = comp.generators[0].target.id
        inner = comp.generators[0].iter
        if (ast.unparse(comp.elt) == f"int({x}) if {x}.isdigit() else {x}" and isinstance(inner, ast.GeneratorExp)
                and len(inner.generators) == 1 and isinstance(inner.generators[0].target, ast.Name)
                and ast.unparse(inner.elt) == f"{inner.generators[0].target.id}.strip()"
                and ast.unparse(inner.generators[0].iter) == f"{s}.split(',')"):
            out.add(n.args[0].value)
    return out


# --------------------------------------------------------------------------------------------- HIP vs CUDA visibility
ROCM = "vllm/platforms/rocm.py"
SYNC = "_sync_hip_cuda_env_vars"


def sync_shape(tree: ast.Module | None) -> tuple[str, str, int] | None:
    """(first variable, second variable, the raise's line) where rocm.py calls ``_sync_hip_cuda_env_vars()`` at import
    (0.34.0 and 0.33.0 rocm.py:157) and the function reads ``a = os.environ.get(A) or None``, ``b = ... or None``,
    then ``if a is not None and b is not None: if a != b: raise ...`` (:138-153); None for any other shape."""
    body = tree.body if tree is not None else []
    if not any(isinstance(s, ast.Expr) and ast.unparse(s.value) == f"{SYNC}()" for s in body):
        return None
    f = next((s for s in body if isinstance(s, ast.FunctionDef) and s.name == SYNC), None)
    stmts = [s for s in (f.body if f else []) if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(stmts) < 3 or not all(isinstance(s, ast.Assign) and len(s.targets) == 1 for s in stmts[:2]):
        return None
    env: dict[str, str] = {}
    for s in stmts[:2]:
        v = s.value
        if not (isinstance(v, ast.BoolOp) and isinstance(v.op, ast.Or) and len(v.values) == 2
                and ast.unparse(v.values[1]) == "None" and isinstance(v.values[0], ast.Call)
                and ast.unparse(v.values[0].func) == "os.environ.get" and len(v.values[0].args) == 1
                and isinstance(v.values[0].args[0], ast.Constant) and isinstance(s.targets[0], ast.Name)):
            return None
        env[s.targets[0].id] = v.values[0].args[0].value
    a, b = list(env)
    top = stmts[2]
    if not (isinstance(top, ast.If) and ast.unparse(top.test) == f"{a} is not None and {b} is not None"
            and len(top.body) == 1 and isinstance(top.body[0], ast.If)
            and ast.unparse(top.body[0].test) == f"{a} != {b}" and isinstance(top.body[0].body[0], ast.Raise)):
        return None
    return env[a], env[b], top.body[0].body[0].lineno


def sync_walk(w: Any) -> None:
    """Record rocm.py's import-time check on the ROCm walk: both variables set (non-empty) and different."""
    m = w.modules.get(ROCM)
    got = sync_shape(m.tree if m is not None else None) if w.vendor == "amd" else None
    if got is None:
        return
    a, b, line = got
    for env in (a, b):
        w.inputs.add(env)
        w.input_info.setdefault(env, {"kind": "env", "default": cg.NONE})
    w.site(ROCM, line, [f"truthy({a})", f"truthy({b})", f"({a} != {b})"])
