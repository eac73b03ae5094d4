"""The import graph of the kg package, read with ``ast`` (no module is imported), and its layering rules.

Edges: every ``import`` / ``from ... import`` anywhere in a module (function-level ones included),
``from kg.x import y`` counting as an import of ``kg.x.y`` when that is a module; plus modules named
by a whole string constant (``"kg.analyses.check"`` or ``"kg.analyses.check:run_fixture"``, as
``importlib.import_module`` tables use them). Importing ``kg.a.b`` runs ``kg/__init__.py`` and
``kg/a/__init__.py`` too, but those implicit parent edges are not counted: the package ``__init__``
files must stay cheap (kg/__init__.py imports nothing heavy at import time), and the test checks
their own imports like any module's.

Layers (docs/architecture.md): core 0 < engine 1 < knowledge 2 < inputs 3 = frameworks 3 (one package per
training framework: it reads their inputs) < derive 4 < engines 5 (one package per serving engine) < analyses 6 = speed 6 (serving speed) <
output 7 < kg/__init__ 8 < cli 9; a module may import its own layer or lower ones, and nothing outside kg.cli
imports kg.cli.

Engine names: outside ``kg/engines/`` and ``kg/frameworks/`` no module compares a value with an engine or
framework name (``engine == "vllm"``, ``stack.engine in ("sglang", "trtllm")``, a ``match`` case, a
``.startswith("vllm")``, or a module-level collection of such names used in a comparison): what an engine
does lives in its package and generic code calls the protocol (``kg.engines.base``). ``engine_branches``
lists every such comparison; ``ENGINE_BRANCH_ALLOWED`` holds the files still being moved.

Function length: no function in ``kg/analyses/`` is over ``MAX_FUNCTION_LINES`` lines.

Run ``python tests/archcheck.py [kg-folder]`` to print every problem.
"""
from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

import networkx as nx

# kg.frameworks (one package per training framework) reads inputs and declares memory terms: the inputs rank;
# kg.engines (one package per serving engine) sizes budgets and KV plans: above kg.derive, below the analyses
RANKS = {"core": 0, "engine": 1, "knowledge": 2, "inputs": 3, "frameworks": 3, "derive": 4, "engines": 5,
         "analyses": 6, "speed": 6, "output": 7, "cli": 9}
API_RANK = 8  # kg/__init__.py
MAX_LINES = 800
MAX_FUNCTION_LINES = 120  # kg/analyses/: an analysis is a short pipeline over smaller steps
# the packages that may name engines and frameworks: one package per serving engine / training framework
ENGINE_PACKAGES = ("engines", "frameworks")
# names no generic module may compare with; engine_branches adds every package under kg/engines/ and kg/frameworks/
ENGINE_NAMES = frozenset({"vllm", "sglang", "trtllm", "lmdeploy", "megatron", "deepspeed", "torchtitan", "fsdp",
                          "accelerate", "verl", "nemo"})
# module -> why it may be longer than MAX_LINES (keep empty unless truly necessary)
LONG_MODULES: dict[str, str] = {}

_NAME = re.compile(r"^kg(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*)?$")


def module_name(pkg_root: Path, f: Path) -> str:
    parts = list(f.relative_to(pkg_root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules(pkg_root: Path) -> dict[str, Path]:
    """Module name -> file, for every ``*.py`` under ``pkg_root`` (the ``kg`` folder)."""
    return {module_name(pkg_root, f): f for f in sorted(pkg_root.rglob("*.py"))
            if "__pycache__" not in f.parts and "_data" not in f.relative_to(pkg_root).parts}


def rank(mod: str) -> int | None:
    parts = mod.split(".")
    if parts == ["kg"]:
        return API_RANK
    if len(parts) > 1:
        return RANKS.get(parts[1])
    return None


def _resolve(base: str, known: dict[str, Path]) -> str | None:
    """The longest known module that ``base`` is or lies inside (``kg.a.b.attr`` -> ``kg.a.b``)."""
    parts = base.split(".")
    while parts:
        name = ".".join(parts)
        if name in known:
            return name
        parts.pop()
    return None


def imports_of(mod: str, f: Path, known: dict[str, Path]) -> list[tuple[str, int]]:
    """(imported kg module, line) for every import in ``f``."""
    out: list[tuple[str, int]] = []
    for exact, base, line in _raw_imports(mod, f.read_text(encoding="utf-8"), f.name == "__init__.py"):
        r = exact if exact in known else _resolve(base, known)
        if r is not None and r != mod:
            out.append((r, line))
    return out


@functools.lru_cache(maxsize=4096)
def _raw_imports(mod: str, text: str, is_pkg: bool) -> tuple[tuple[str, str, int], ...]:
    """(``kg.x.y`` if it names a module, else the module ``kg.x`` it comes from, line) per imported name."""
    out: list[tuple[str, str, int]] = []
    for n in ast.walk(ast.parse(text, mod)):
        if isinstance(n, ast.Import):
            out += [(a.name, a.name, n.lineno) for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            if n.level:
                pkg = mod.split(".") if is_pkg else mod.split(".")[:-1]
                pkg = pkg[: len(pkg) - (n.level - 1)]
                base = ".".join(pkg + ([n.module] if n.module else []))
            else:
                base = n.module or ""
            out += [(f"{base}.{a.name}", base, n.lineno) for a in n.names]
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and _NAME.match(n.value):
            name = n.value.split(":")[0]
            out.append((name, name, n.lineno))
    return tuple(x for x in out if x[1] == "kg" or x[1].startswith("kg."))


def import_graph(pkg_root: Path) -> nx.DiGraph:
    """Directed graph module -> imported module; edge attribute ``lines``: where (first line of each import)."""
    known = modules(pkg_root)
    g = nx.DiGraph()
    for mod, f in known.items():
        g.add_node(mod, file=f)
        for target, line in imports_of(mod, f, known):
            if g.has_edge(mod, target):
                g[mod][target]["lines"].append(line)
            else:
                g.add_edge(mod, target, lines=[line])
    return g


def problems(pkg_root: Path) -> list[str]:
    """Every layering problem under ``pkg_root``, one line each (empty: the layout holds)."""
    pkg_root = Path(pkg_root)
    g = import_graph(pkg_root)
    out: list[str] = []

    def where(a: str, b: str) -> str:
        f = g.nodes[a]["file"].relative_to(pkg_root.parent)
        return f"{f}:{g[a][b]['lines'][0]}"

    for a, b in sorted(g.edges):
        ra, rb = rank(a), rank(b)
        if b == "kg.cli" or b.startswith("kg.cli."):
            if not (a == "kg.cli" or a.startswith("kg.cli.")):
                out.append(f"{where(a, b)}: {a} imports {b}: nothing outside kg.cli imports kg.cli")
            continue
        if ra is None or rb is None:
            out.append(f"{where(a, b)}: {a} imports {b}: a module outside the layers (put it in a layer package)")
        elif rb > ra:
            out.append(f"{where(a, b)}: {a} (layer {ra}) imports {b} (layer {rb}): a lower layer imports a higher one")
    for m in sorted(g.nodes):
        if rank(m) is None:
            out.append(f"{g.nodes[m]['file'].relative_to(pkg_root.parent)}: {m} is in no layer "
                       f"(kg/<{'|'.join(RANKS)}>/ or kg/__init__.py)")
    for scc in sorted(sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1):
        ring = nx.find_cycle(g.subgraph(scc), source=scc[0])  # one cycle per tangle, named by its members
        path = " -> ".join([ring[0][0]] + [b for _, b in ring])
        out.append(f"import cycle: {path} ({', '.join(where(a, b) for a, b in ring)})")
    for m in sorted(g.nodes):
        f = g.nodes[m]["file"]
        n = len(f.read_text(encoding="utf-8").splitlines())
        if n > MAX_LINES and m not in LONG_MODULES:
            out.append(f"{f.relative_to(pkg_root.parent)}: {n} lines (over {MAX_LINES}): split it by job")
    return out


def _package_names(pkg_root: Path) -> frozenset[str]:
    """ENGINE_NAMES and the name of every package under kg/engines/ and kg/frameworks/."""
    found = {d.name for p in ENGINE_PACKAGES for d in (Path(pkg_root) / p).glob("*") if (d / "__init__.py").is_file()}
    return ENGINE_NAMES | found


def _engine_name_sets(tree: ast.Module, names: frozenset[str]) -> set[str]:
    """Module-level names bound to a literal tuple / list / set / frozenset holding an engine name."""
    out: set[str] = set()
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if isinstance(value, ast.Call) and getattr(value.func, "id", None) in ("frozenset", "set", "tuple") and value.args:
            value = value.args[0]
        if isinstance(value, (ast.Tuple, ast.List, ast.Set)) and any(_is_engine_name(e, names) for e in value.elts):
            out |= {t.id for t in targets if isinstance(t, ast.Name)}
    return out


def _is_engine_name(node: ast.AST, names: frozenset[str]) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in names


def engine_branches(pkg_root: Path) -> list[str]:
    """``file:line: source`` of every comparison with an engine or framework name outside the engine and framework
    packages (module doc): ``x == "vllm"``, ``x in ("vllm", ...)``, ``x in NAMES`` where ``NAMES`` is a module-level
    literal collection holding one, ``match x: case "vllm"``, ``x.startswith("vllm")``."""
    pkg_root = Path(pkg_root)
    names = _package_names(pkg_root)
    out: list[str] = []
    for f in sorted(pkg_root.rglob("*.py")):
        rel = f.relative_to(pkg_root)
        if rel.parts[0] in ENGINE_PACKAGES or "_data" in rel.parts or "__pycache__" in rel.parts:
            continue
        text = f.read_text(encoding="utf-8")
        tree = ast.parse(text, str(f))
        sets = _engine_name_sets(tree, names)
        lines = text.splitlines()
        for node in ast.walk(tree):
            hit = False
            if isinstance(node, ast.Compare):
                vals = [node.left, *node.comparators]
                vals += [e for c in node.comparators if isinstance(c, (ast.Tuple, ast.List, ast.Set)) for e in c.elts]
                hit = any(_is_engine_name(v, names) for v in vals) or any(
                    isinstance(v, ast.Name) and v.id in sets for v in node.comparators)
            elif isinstance(node, (ast.Subscript, ast.Call)):
                # a table of engines written inline and indexed at once: {"vllm": a, "sglang": b}.get(engine)
                d = node.value if isinstance(node, ast.Subscript) else getattr(node.func, "value", None)
                hit = isinstance(d, ast.Dict) and any(k is not None and _is_engine_name(k, names) for k in d.keys) and (
                    isinstance(node, ast.Subscript) or node.func.attr == "get")
            if isinstance(node, ast.match_case):
                hit = any(isinstance(p, ast.MatchValue) and _is_engine_name(p.value, names) for p in ast.walk(node.pattern))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("startswith", "endswith"):
                hit = any(_is_engine_name(a, names) or (isinstance(a, ast.Tuple) and any(_is_engine_name(e, names) for e in a.elts))
                          for a in node.args)
            if hit:
                line = getattr(node, "lineno", None) or node.pattern.lineno
                out.append(f"{pkg_root.name}/{rel}:{line}: {lines[line - 1].strip()}")
    return sorted(set(out), key=lambda s: (s.split(":")[0], int(s.split(":")[1])))


def long_functions(pkg_root: Path, package: str = "analyses", limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``file:line: name (N lines)`` for every function in ``kg/<package>/`` longer than ``limit`` lines."""
    out: list[str] = []
    for f in sorted((Path(pkg_root) / package).rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"), str(f))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                n = node.end_lineno - start + 1
                if n > limit:
                    out.append(f"{f.relative_to(Path(pkg_root).parent)}:{node.lineno}: {node.name} ({n} lines)")
    return out


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "kg"
    found = problems(root)
    for p in found:
        print(p)
    for p in engine_branches(root):
        print(f"engine branch: {p}")
    for p in long_functions(root):
        print(f"long function: {p}")
    sys.exit(1 if found else 0)
