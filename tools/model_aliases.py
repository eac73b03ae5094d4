"""Generate catalog/models/defaults/attribute_aliases.yaml: the config.json key each model type stores a field under.

Usage: python tools/model_aliases.py TRANSFORMERS_WHEEL VLLM_WHEEL [OUT]
(e.g. /work/wheels/transformers-5.24.0-py3-none-any.whl /work/wheels/vllm-0.34.0-cp38-abi3-manylinux_2_28_x86_64.whl).

Reads the wheels with ``zipfile`` + ``ast`` (nothing is imported or run):

- transformers: every class in ``transformers/models/*/configuration_*.py`` that sets ``model_type`` and has an
  ``attribute_map`` (its own, or inherited from a class of the same package). ``PreTrainedConfig.__getattribute__``
  answers ``config.num_attention_heads`` with ``config.n_head`` when ``attribute_map`` says so, which is how vLLM
  and SGLang read every config they load through transformers.
- vLLM: the classes vLLM registers over transformers' own for a ``model_type`` (``_CONFIG_REGISTRY`` in
  ``vllm/transformers_utils/config.py``, e.g. ``RefinedWeb`` -> ``RWConfig`` for tiiuae/falcon-40b's legacy
  config), and ``CONFIG_FIELD_ALIASES`` (the names vLLM tries in order for the KV heads, experts ...).

Each entry keeps ``path:line`` of the ``attribute_map`` (or the alias tuple) at that release.
"""
from __future__ import annotations

import ast
import re
import sys
import zipfile
from pathlib import Path

import yaml


def _release(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def _const_str(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _dict_of_str(node: ast.AST) -> dict[str, str] | None:
    if not isinstance(node, ast.Dict):
        return None
    out = {}
    for k, v in zip(node.keys, node.values):
        ks, vs = _const_str(k) if k else None, _const_str(v)
        if ks and vs:
            out[ks] = vs
    return out


def _classes(path: str, src: str) -> dict[str, dict]:
    """class name -> {bases, model_type, attribute_map, line} of one module."""
    out: dict[str, dict] = {}
    for node in ast.parse(src).body:
        if not isinstance(node, ast.ClassDef):
            continue
        info: dict = {"bases": [b.id for b in node.bases if isinstance(b, ast.Name)], "path": path}
        for st in node.body:
            target = value = None
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                target, value = st.targets[0].id, st.value
            elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
                target, value = st.target.id, st.value
            if target == "model_type" and _const_str(value):
                info["model_type"] = _const_str(value)
            elif target == "attribute_map":
                amap = _dict_of_str(value)
                if amap is not None:
                    info["attribute_map"], info["line"] = amap, st.lineno
        out[node.name] = info
    return out


def _resolve(name: str, classes: dict[str, dict], seen: frozenset = frozenset()) -> tuple[dict, str] | None:
    """(attribute_map, "path:line") of a class, following bases defined in the scanned modules."""
    info = classes.get(name)
    if info is None or name in seen:
        return None
    if "attribute_map" in info:
        return info["attribute_map"], f"{info['path']}:{info['line']}"
    for b in info["bases"]:
        got = _resolve(b, classes, seen | {name})
        if got:
            return got
    return None


def transformers_aliases(wheel: Path) -> dict[str, dict]:
    rel = _release(wheel)
    classes: dict[str, dict] = {}
    with zipfile.ZipFile(wheel) as z:
        for n in sorted(z.namelist()):
            if re.fullmatch(r"transformers/models/[^/]+/configuration_[^/]+\.py", n):
                for cname, info in _classes(n, z.read(n).decode("utf-8")).items():
                    classes.setdefault(cname, info)
    out: dict[str, dict] = {}
    for cname in sorted(classes):
        info = classes[cname]
        mt = info.get("model_type")
        got = _resolve(cname, classes)
        if mt and got and got[0] and mt not in out:
            out[mt] = {"map": dict(sorted(got[0].items())), "source": f"transformers {rel} {got[1]} ({cname})"}
    return out


def vllm_aliases(wheel: Path) -> tuple[dict[str, dict], dict[str, dict]]:
    rel = _release(wheel)
    cfg_py = "vllm/transformers_utils/config.py"
    with zipfile.ZipFile(wheel) as z:
        classes: dict[str, dict] = {}
        for n in sorted(z.namelist()):
            if re.fullmatch(r"vllm/transformers_utils/configs/[^/]+\.py", n):
                classes.update(_classes(n, z.read(n).decode("utf-8")))
        tree = ast.parse(z.read(cfg_py).decode("utf-8"))
    registry: dict[str, tuple[str, int]] = {}
    fields: dict[str, dict] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and any(isinstance(a, ast.keyword) for a in node.keywords) and \
                isinstance(node.func, ast.Name) and node.func.id == "LazyConfigDict":
            for kw in node.keywords:
                if kw.arg and _const_str(kw.value):
                    registry[kw.arg] = (_const_str(kw.value), kw.value.lineno)
        target = value = None
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            target, value = node.target.id, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        if target == "CONFIG_FIELD_ALIASES" and isinstance(value, ast.Dict):
            for k, v in zip(value.keys, value.values):
                if _const_str(k) and isinstance(v, ast.Tuple):
                    fields[_const_str(k)] = {"names": [_const_str(e) for e in v.elts if _const_str(e)],
                                             "source": f"vllm {rel} {cfg_py}:{k.lineno}"}
    out: dict[str, dict] = {}
    for mt, (cname, line) in sorted(registry.items()):
        got = _resolve(cname, classes)
        if got and got[0]:
            out[mt] = {"map": dict(sorted(got[0].items())),
                       "source": f"vllm {rel} {got[1]} ({cname}, registered for '{mt}' at {cfg_py}:{line})"}
    return out, fields


def build(tf_wheel: Path, vllm_wheel: Path) -> dict:
    tf = transformers_aliases(tf_wheel)
    vl, fields = vllm_aliases(vllm_wheel)
    merged = dict(tf)
    merged.update(vl)  # vLLM loads its own class for these model types (transformers_utils/config.py)
    return {"releases": {"transformers": _release(tf_wheel), "vllm": _release(vllm_wheel)},
            "model_types": dict(sorted(merged.items())),
            "engine_field_aliases": fields}


HEADER = """# Where each model type stores a field in config.json: attribute_map of the config class vLLM / SGLang load
# (transformers' class, or the class vLLM registers over it), and vLLM's CONFIG_FIELD_ALIASES (the names it tries in
# order). optkg reads a config.json key as these classes answer for it (kg.inputs.modelcfg.apply_aliases).
# Generated by tools/model_aliases.py from the released wheels; do not edit by hand.
"""


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    out = Path(argv[2]) if len(argv) > 2 else Path(__file__).resolve().parents[1] / "catalog/models/defaults/attribute_aliases.yaml"
    data = build(Path(argv[0]), Path(argv[1]))
    out.write_text(HEADER + yaml.safe_dump(data, sort_keys=False, width=120), encoding="utf-8")
    print(f"{out}: {len(data['model_types'])} model types, {len(data['engine_field_aliases'])} vLLM field alias lists")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
