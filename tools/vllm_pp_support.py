"""Which model architectures support pipeline parallelism in an unpacked vLLM wheel (static reading only).

Usage: python tools/vllm_pp_support.py /work/dl/vllm-0.10.2/vllm [Interface]  -> YAML entry on stdout
(default: pipeline parallelism; with an interface name, e.g. SupportsEagle3, the architectures implementing it)

- vLLM <= 0.5.x lists them in ``vllm/config.py`` ``_PP_SUPPORTED_MODELS``;
- later releases register architectures in ``model_executor/models/registry.py`` (``_*_MODELS`` dicts:
  architecture -> (module, class)); an architecture supports PP when its class inherits ``SupportsPP``
  (directly or through other model classes), as ``ModelConfig.verify_with_parallel_config`` checks.
Nothing is imported or executed: the files are parsed with ``ast``. Used to write
catalog/support/vllm-pipeline-parallel.yaml; not part of the optkg package.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path


def _pp_list(config: Path) -> tuple[list[str], int] | None:
    tree = ast.parse(config.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_PP_SUPPORTED_MODELS" for t in node.targets):
            return sorted(ast.literal_eval(node.value)), node.lineno
    return None


def _registry(path: Path) -> tuple[dict[str, tuple[str, str]], dict[str, int]]:
    tree = ast.parse(path.read_text())
    out: dict[str, tuple[str, str]] = {}
    lines: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [getattr(t, "id", "") for t in targets]
            if not any(n.startswith("_") and n.endswith("_MODELS") for n in names) or not isinstance(node.value, ast.Dict):
                continue
            for k, v in zip(node.value.keys, node.value.values):
                if isinstance(k, ast.Constant) and isinstance(v, ast.Tuple) and len(v.elts) >= 2 \
                        and all(isinstance(e, ast.Constant) for e in v.elts[:2]):
                    out[k.value] = (v.elts[0].value, v.elts[1].value)
                    lines[k.value] = k.lineno
    return out, lines


def base_names(node: ast.ClassDef) -> list[str]:
    """The names of a class's bases (``Base``, ``mod.Base`` -> Base, ``Base[T]`` -> Base)."""
    names = []
    for b in node.bases:
        if isinstance(b, ast.Name):
            names.append(b.id)
        elif isinstance(b, ast.Attribute):
            names.append(b.attr)
        elif isinstance(b, ast.Subscript) and isinstance(b.value, ast.Name):
            names.append(b.value.id)
    return names


def _class_bases(folders: list[Path]) -> dict[tuple[str, str], list[str]]:
    bases: dict[tuple[str, str], list[str]] = {}
    for f in [f for d in folders if d.is_dir() for f in d.rglob("*.py")]:
        try:
            tree = ast.parse(f.read_text())
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                bases[(f.stem, node.name)] = base_names(node)
    return bases


def supports_pp(root: Path) -> tuple[list[str], str]:
    """(architectures supporting PP, source citation) for the vLLM package folder ``root``."""
    got = _pp_list(root / "config.py") if (root / "config.py").is_file() else None
    if got:
        return got[0], f"vllm/config.py:{got[1]} _PP_SUPPORTED_MODELS"
    return supports_interface(root, "SupportsPP")


def supports_interface(root: Path, interface: str) -> tuple[list[str], str]:
    """(registered architectures whose class inherits ``interface``, source citation)."""
    models = root / "model_executor" / "models"
    reg, _ = _registry(models / "registry.py")
    # model classes live in model_executor/models/ (packages included) and, in newer releases, vllm/models/;
    # registry entries name the module; classes are resolved by name across both trees
    bases = _class_bases([models, root / "models"])
    by_name: dict[str, list[tuple[str, str]]] = {}
    for key in bases:
        by_name.setdefault(key[1], []).append(key)

    def has_pp(key: tuple[str, str], seen: set) -> bool:
        if key in seen or key not in bases:
            return False
        seen.add(key)
        for b in bases[key]:
            if b == interface:
                return True
            cands = [k for k in by_name.get(b, []) if k[0] == key[0]] or by_name.get(b, [])
            if any(has_pp(c, seen) for c in cands):
                return True
        return False

    archs = sorted(a for a, (mod, cls) in reg.items() if any(has_pp(k, set()) for k in by_name.get(cls, [])))
    line = next((n for n, t in enumerate((models / "interfaces.py").read_text().splitlines(), 1)
                 if t.startswith(f"class {interface}")), None)
    if line is None:
        raise SystemExit(f"vllm/model_executor/models/interfaces.py: no class {interface} (the table needs a new reader)")
    return archs, (f"vllm/model_executor/models/interfaces.py:{line} class {interface} (registered in registry.py "
                   "_*_MODELS, classes inheriting it)")


if __name__ == "__main__":
    archs, src = supports_pp(Path(sys.argv[1])) if len(sys.argv) < 3 else supports_interface(Path(sys.argv[1]), sys.argv[2])
    print(f"    source: [\"{src}\"]")
    print(f"    pp_architectures: [{', '.join(archs)}]")
    print(f"# {len(archs)} architectures", file=sys.stderr)
