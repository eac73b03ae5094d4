"""The import graph of the kg package, read with ``ast`` (no module is imported), and its layering rules.

Edges: every ``import`` / ``from ... import`` anywhere in a module (function-level ones included),
``from kg.x import y`` counting as an import of ``kg.x.y`` when that is a module; plus modules named
by a whole string constant (``"kg.analyses.check"`` or ``"kg.analyses.check:run_fixture"``, as
``importlib.import_module`` tables use them). Importing ``kg.a.b`` runs ``kg/__init__.py`` and
``kg/a/__init__.py`` too, but those implicit parent edges are not counted: the package ``__init__``
files must stay cheap (kg/__init__.py imports nothing heavy at import time), and the test checks
their own imports like any module's.

Layers (docs/architecture.md, /work/coord/LAYOUT.md): core 0 < engine 1 < knowledge 2 < inputs 3 = frameworks 3 <
derive 4 < analyses 5 < output 6 < kg/__init__ 7 < cli 8; a module may import its own layer or lower
ones, and nothing outside kg.cli imports kg.cli.

Run ``python tests/archcheck.py [kg-folder]`` to print every problem.
"""
from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

import networkx as nx

# kg.frameworks (one package per training framework) reads inputs and declares memory terms: the inputs rank
RANKS = {"core": 0, "engine": 1, "knowledge": 2, "inputs": 3, "frameworks": 3, "derive": 4, "analyses": 5,
         "output": 6, "cli": 8}
API_RANK = 7  # kg/__init__.py
MAX_LINES = 800
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


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "kg"
    found = problems(root)
    for p in found:
        print(p)
    sys.exit(1 if found else 0)
