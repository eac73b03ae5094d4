"""List every startup check site of a released engine wheel and classify it.

Usage: python tools/engine_check_sites.py ENGINE RELEASE [--wheel PATH]   (ENGINE: vllm, sglang, trtllm, lmdeploy)
       python tools/engine_check_sites.py ENGINE RELEASE --source DIR --origin ORIGIN.yaml   (no wheel: source text)

Reads the wheel (a zip; nothing is installed, imported or run) and parses every ``.py`` file under the engine's
scanned folders (``SCOPES``) with ``ast``. A *site* is a ``raise`` or ``assert`` statement. For each it records the
enclosing function (``Class.method``), the condition under which it is reached inside that function (an assert's
test; for a raise the tests of the ``if`` blocks around it, ``not (...)`` for an ``else`` branch), the exception and
its message. Its stable id is ``path::function::<hash of the condition>`` (a second site with the same condition in
the same function adds a hash of its message), so an id survives lines moving.

Each site is then classified (kg.analyses.enginechecks.CLASSES) by ``classify``:

1. **rule** — an optkg rule's evidence snippet lies in the site's statement or guard lines (same path), or the
   hand classification (catalog/engines/checks/classify/<engine>.yaml) names the rule;
2. **table** — its condition translates into optkg's expression language over facts a stack carries
   (``translate``: config fields mapped to optkg settings through the engine's flag table,
   catalog/engines/<engine>.yaml, and defaults read from the config dataclass); the generated row is evaluated
   by the generic engine-check rule (kg.analyses.enginechecks.generated_findings);
3. **unknowable** — it needs something that exists only once the engine runs (tensor values, the network, the
   file system, a running distributed group, the installed packages, the engine's own internal state);
4. **uncovered** — knowable before start, but optkg lacks a fact it reads (``why`` names them).

Writes catalog/engines/checks/sites/<engine>-<release>.yaml (generated; ``optkg docs`` renders
docs/engine-checks.md from it and the staleness test compares the committed copy with the rules it joins).
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import re
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# engine -> (PyPI distribution, scanned path prefixes inside the wheel). The denominators of
# ../shared/reference/startup_check_denominators.md: vLLM config/ + engine/arg_utils.py + platforms/;
# SGLang server_args.py + arg_groups/; TRT-LLM's llmapi argument validators; LMDeploy's engine configs and CLI.
SCOPES: dict[str, tuple[str, list[str]]] = {
    "vllm": ("vllm", ["vllm/config/", "vllm/engine/arg_utils.py", "vllm/platforms/"]),
    "sglang": ("sglang", ["sglang/srt/server_args.py", "sglang/srt/arg_groups/"]),
    "trtllm": ("tensorrt-llm", ["tensorrt_llm/llmapi/llm_args.py", "tensorrt_llm/llmapi/llm_utils.py",
                                "tensorrt_llm/commands/serve.py"]),
    "lmdeploy": ("lmdeploy", ["lmdeploy/messages.py", "lmdeploy/cli/", "lmdeploy/api.py", "lmdeploy/archs.py"]),
}
WHEEL_DIRS = [Path("/work/wheels")]
# engine -> module under tools/ whose ``generate_release(wheel)`` walks the engine's startup code symbolically
# (tools/checkgen.py) and returns generated check rows by (path, line) (see classify_all); ``write_tables(release,
# result)`` writes what else the rows need (the option -> fact table the launch reader uses), after classify_all, which
# records the facts the table rows read in ``result["used_facts"]``. LMDeploy's generator returns no rows but the
# ``fields`` / ``defaults`` its command line gives each engine-config field (tools/lmdeploy_generated_checks.py)
GENERATORS = {"vllm": "vllm_generated_checks", "lmdeploy": "lmdeploy_generated_checks"}
MAX_TEXT = 240


@dataclass
class Site:
    path: str
    line: int
    end_line: int
    function: str
    kind: str  # raise | assert
    exc: str
    condition: str
    message: str
    guards: list[tuple[ast.AST, bool]] = field(default_factory=list)
    test: ast.AST | None = None  # an assert's test
    straight: bool = True  # no loop / try-handler / earlier exit between the function start and the site
    context: list[tuple[ast.AST, bool, str]] | None = None  # guards of the call chain from a startup root
    context_why: str = ""  # why the call chain could not be followed (context None)
    cls: str = ""
    id: str = ""


def _unparse(n: ast.AST | None) -> str:
    if n is None:
        return ""
    try:
        return " ".join(ast.unparse(n).split())
    except Exception:  # noqa: BLE001 - an exotic node: keep its type name
        return type(n).__name__


def _message(exc: ast.AST | None) -> str:
    """The text of an exception's first argument: string literals joined, f-string fields kept as {expr}."""
    if isinstance(exc, ast.Call) and exc.args:
        a = exc.args[0]
    elif exc is not None and not isinstance(exc, ast.Call):
        return ""
    else:
        return ""

    def text(n: ast.AST) -> str:
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            return n.value
        if isinstance(n, ast.JoinedStr):
            return "".join(v.value if isinstance(v, ast.Constant) else "{" + _unparse(v.value) + "}" for v in n.values)
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Mod)):
            return text(n.left) + (text(n.right) if isinstance(n.op, ast.Add) else "")
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "format":
            return text(n.func.value)
        return "{" + _unparse(n) + "}"
    return " ".join(text(a).split())[:MAX_TEXT]


def _exc_name(exc: ast.AST | None) -> str:
    if exc is None:
        return "re-raise"
    f = exc.func if isinstance(exc, ast.Call) else exc
    return _unparse(f).split("(")[0][:60]


class _Walker(ast.NodeVisitor):
    """Visits statements block by block. ``guards``: the (test, branch taken) pairs a site is reached under: the
    enclosing ``if`` tests and, for an earlier ``if T: return`` in an enclosing block, ``(T, False)``.
    ``crooked`` counts what a guard list cannot express: a loop, an except handler, an earlier exit that is
    not a plain ``if T: return/continue``."""

    def __init__(self, path: str):
        self.path = path
        self.names: list[str] = []
        self.guards: list[tuple[ast.AST, bool]] = []
        self.crooked = 0
        self.sites: list[Site] = []
        self.calls: list[tuple[str, str, list[tuple[ast.AST, bool]], bool]] = []  # callee, caller, guards, straight
        self.defs: list[tuple[str, bool]] = []  # (qualname, is a pydantic/dataclass validator)
        self.strings: set[str] = set()

    def _block(self, stmts: list[ast.stmt]) -> None:
        mark, crook = len(self.guards), self.crooked
        for st in stmts:
            self.visit(st)
            if isinstance(st, ast.If) and _exits(st.body) and not st.orelse:
                self.guards.append((st.test, False))  # `if T: return` -> the rest of the block runs under not T
            elif isinstance(st, ast.If) and _exits(st.orelse) and not _exits(st.body) and not _has_exit(st.body):
                self.guards.append((st.test, True))
            elif _has_exit([st]) and not isinstance(st, (ast.Raise, ast.FunctionDef, ast.AsyncFunctionDef,
                                                         ast.ClassDef)):
                self.crooked += 1  # a return somewhere inside: the rest of the block is reached on a path we skip
        del self.guards[mark:]
        self.crooked = crook

    def _scope(self, node: ast.AST, name: str, body: list[ast.stmt]) -> None:
        saved = (self.guards, self.crooked)
        self.guards, self.crooked = [], 0
        self.names.append(name)
        for d in getattr(node, "decorator_list", []):
            self.visit(d)
        self._block(body)
        self.names.pop()
        self.guards, self.crooked = saved

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scope(node, node.name, node.body)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        deco = " ".join(_unparse(d) for d in node.decorator_list)
        self.defs.append((".".join(self.names + [node.name]), "validator" in deco))
        self._scope(node, node.name, node.body)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        callee = f.id if isinstance(f, ast.Name) else (f.attr if isinstance(f, ast.Attribute) else "")
        if callee:
            self.calls.append((callee, ".".join(self.names), list(self.guards), self.crooked == 0))
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and node.value.isidentifier():
            self.strings.add(node.value)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        self.guards.append((node.test, True))
        self._block(node.body)
        self.guards.pop()
        self.guards.append((node.test, False))
        self._block(node.orelse)
        self.guards.pop()

    def _crooked(self, node: ast.AST) -> None:
        self.crooked += 1
        for f in ("body", "orelse", "handlers", "finalbody", "cases"):
            sub = getattr(node, f, None) or []
            if f in ("handlers", "cases"):
                for h in sub:
                    self._block(h.body)
            else:
                self._block(sub)
        self.crooked -= 1

    visit_For = visit_While = visit_AsyncFor = visit_Match = _crooked  # type: ignore[assignment]

    def visit_Try(self, node: ast.Try) -> None:
        self._block(node.body)
        self._block(node.orelse)
        self._block(node.finalbody)
        self.crooked += 1
        for h in node.handlers:
            self._block(h.body)
        self.crooked -= 1

    visit_TryStar = visit_Try  # type: ignore[assignment]

    def visit_With(self, node: ast.With) -> None:
        self._block(node.body)

    visit_AsyncWith = visit_With  # type: ignore[assignment]

    def _site(self, node: ast.AST, kind: str, exc: ast.AST | None, test: ast.AST | None) -> None:
        parts = [_unparse(t) if pos else f"not ({_unparse(t)})" for t, pos in self.guards]
        if test is not None:
            parts.append(_unparse(test))
        msg = _message(exc) if kind == "raise" else (
            _message(ast.Call(func=ast.Name("AssertionError"), args=[node.msg], keywords=[]))
            if getattr(node, "msg", None) is not None else "")
        self.sites.append(Site(self.path, node.lineno, getattr(node, "end_lineno", node.lineno) or node.lineno,
                               ".".join(self.names) or "<module>", kind,
                               _exc_name(exc) if kind == "raise" else "AssertionError",
                               " and ".join(parts)[:600], msg, list(self.guards), test, self.crooked == 0))

    def visit_Raise(self, node: ast.Raise) -> None:
        self._site(node, "raise", node.exc, None)

    def visit_Assert(self, node: ast.Assert) -> None:
        self._site(node, "assert", None, node.test)


def _exits(stmts: list[ast.stmt]) -> bool:
    """The block ends in a plain return / continue / break (its last statement)."""
    return bool(stmts) and isinstance(stmts[-1], (ast.Return, ast.Continue, ast.Break))


def _has_exit(stmts: list[ast.stmt]) -> bool:
    """A return / continue / break anywhere in ``stmts`` outside nested functions."""
    todo = list(stmts)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.Return, ast.Continue, ast.Break)):
            return True
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        todo.extend(ast.iter_child_nodes(n))
    return False


def _h(text: str, n: int = 8) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:n]


def sites_in(path: str, source: str, walkers: list | None = None) -> list[Site]:
    """Every raise/assert site of one source file, with stable ids (``walkers`` collects the file's walker)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    w = _Walker(path)
    if walkers is not None:
        walkers.append(w)
    w.visit(tree)
    seen: dict[str, int] = {}
    for s in w.sites:
        base = f"{path}::{s.function}::{_h(s.kind + '|' + s.exc + '|' + s.condition)}"
        seen[base] = seen.get(base, 0) + 1
    used: set[str] = set()
    for s in w.sites:
        base = f"{path}::{s.function}::{_h(s.kind + '|' + s.exc + '|' + s.condition)}"
        sid = base if seen[base] == 1 else f"{base}-{_h(s.message or str(s.line), 4)}"
        n = 2
        while sid in used:  # the same condition and message twice in one function: keep order
            sid = f"{base}-{_h(s.message, 4)}-{n}"
            n += 1
        used.add(sid)
        s.id = sid
    return w.sites


def find_wheel(engine: str, release: str) -> Path:
    from kg.analyses.evidence import default_cache_dir, fetch_wheel
    package = SCOPES[engine][0]
    return fetch_wheel(package, release, default_cache_dir(), WHEEL_DIRS)


def scan(engine: str, release: str, wheel: Path) -> tuple[list[Site], dict[str, list[str]]]:
    """(sites in path order, {path: source lines}) of the scanned folders of ``wheel``."""
    roots = SCOPES[engine][1]
    walkers: list = []
    sites: list[Site] = []
    sources: dict[str, list[str]] = {}
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            if name.endswith(".py") and any(name == r or name.startswith(r) for r in roots):
                text = z.read(name).decode("utf-8", errors="replace")
                sources[name] = text.splitlines()
                sites.extend(sites_in(name, text, walkers))
    resolve_contexts(sites, walkers)
    return sites, sources


def scan_source(engine: str, folder: Path) -> tuple[list[Site], dict[str, list[str]], list[dict[str, Any]]]:
    """As ``scan``, from a folder holding the engine's files at their package paths (no wheel could be had: the text
    of one file at one commit, copied from a public index): (sites, sources, [{path, chars, sha256}] of the files
    read). A scanned path absent from ``folder`` is not read; the caller says why in the origin."""
    roots = SCOPES[engine][1]
    walkers: list = []
    sites: list[Site] = []
    sources: dict[str, list[str]] = {}
    files: list[dict[str, Any]] = []
    for f in sorted(folder.rglob("*.py")):
        name = f.relative_to(folder).as_posix()
        if any(name == r or name.startswith(r) for r in roots):
            text = f.read_text(encoding="utf-8")
            sources[name] = text.splitlines()
            files.append({"path": name, "chars": len(text), "sha256": hashlib.sha256(text.encode()).hexdigest()})
            sites.extend(sites_in(name, text, walkers))
    resolve_contexts(sites, walkers)
    return sites, sources, files


# files that register startup hooks by name (a string naming the function): SGLang's resolution pipeline
HOOK_REGISTRIES = {"sglang/srt/arg_groups/resolution_hooks.py"}
# methods the engine's launch path calls unconditionally from outside the scanned folders (where)
EXTRA_ROOTS = {
    "ServerArgs.resolve_once": "sglang 0.5.23 srt/entrypoints/engine.py:1153 (server_args.resolve_once())",
    "ServerArgs.check_server_args": "sglang 0.5.23 srt/entrypoints/engine.py:1165 (server_args.check_server_args())",
}
ROOT_FUNCTION = re.compile(r"(^|\.)(__post_init__|model_post_init|create_engine_config|from_cli_args)$")
ROOT_INIT = re.compile(r"(Config|Args|ServerArgs)\.__init__$")


def resolve_contexts(sites: list[Site], walkers: list) -> None:
    """Set each site's ``context``: the guards of the call chain that reaches its function from a startup root (a
    config post-init, a validator, a hook the engine registers by name), or ``context_why`` when the chain cannot be
    followed (no caller in the scanned files, several callers under different conditions, a loop on the way)."""
    calls: dict[str, list[tuple[str, list, bool]]] = {}
    defs: dict[str, list[str]] = {}
    validators: set[str] = set()
    hooks: set[str] = set()
    for w in walkers:
        for callee, caller, guards, straight in w.calls:
            calls.setdefault(callee, []).append((caller, guards, straight))
        for q, is_validator in w.defs:
            defs.setdefault(q.split(".")[-1], []).append(q)
            if is_validator:
                validators.add(q)
        if w.path in HOOK_REGISTRIES:
            hooks |= w.strings
    memo: dict[str, tuple[list | None, str]] = {}

    def resolve(q: str, depth: int) -> tuple[list | None, str]:
        if q in memo:
            return memo[q]
        short = q.split(".")[-1]
        if ROOT_FUNCTION.search(q) or ROOT_INIT.search(q) or q in validators or q in EXTRA_ROOTS \
                or (short in hooks and "." not in q):
            return [], ""
        if depth > 6:
            return None, "call chain deeper than 6"
        memo[q] = (None, "recursive call chain")
        sites_of = [c for c in calls.get(short, []) if c[0] != q]
        if not sites_of:
            out: tuple[list | None, str] = (None, f"{short} has no caller in the scanned files")
        elif len(defs.get(short, [])) > 1 and any(g for _, g, _ in sites_of):
            out = (None, f"{short} is defined {len(defs[short])} times")
        elif len(sites_of) > 1:
            got = [resolve(c, depth + 1) for c, g, st in sites_of if st and not g]
            ok = len(got) == len(sites_of) and all(x[0] == [] for x in got)
            out = ([], "") if ok else (None, f"{short} is called from {len(sites_of)} places under different conditions")
        else:
            caller, guards, straight = sites_of[0]
            if not straight:
                out = (None, f"{short} is called inside a loop or handler of {caller}")
            else:
                up, why = resolve(caller, depth + 1)
                cls = caller.split(".")[0]
                out = (None, why) if up is None else (up + [(t, p, cls) for t, p in guards], "")
        memo[q] = out
        return out

    for s in sites:
        s.context, s.context_why = resolve(s.function, 0)


def unreleased_row(row: dict[str, Any]) -> dict[str, Any]:
    """A site read from source text of no pinned release is never a table row: a row would be evaluated against every
    stack of the engine, from a commit nobody can tie to the release the stack runs. The translation is kept in the
    reason (it names the facts such a row would read), and the site counts as not covered."""
    if row.get("class") != "table":
        return row
    out = {k: v for k, v in row.items() if k not in ("class", "expr", "defaults", "set_by_technique")}
    out.update({"class": "uncovered", "why": "translatable (" + str(row.get("expr", ""))[:160] + "), but no table row "
                "is written from source of no pinned release"})
    return out


def shrinkage(path: Path, counts: dict[str, int]) -> str:
    """Why the new classification of a release must not replace ``path`` (its sites file, written before): it covers
    fewer sites by rule or table (a regeneration in a worktree without the wheel, or a tool regression, once wrote 25
    SGLang table rows over the 409 committed); '' when it covers as many or more."""
    if not path.exists():
        return ""
    import yaml
    old = (yaml.safe_load(path.read_text()) or {}).get("counts") or {}
    was = {k: int(old.get(k) or 0) for k in ("rule", "table")}
    now = {k: counts.get(k, 0) for k in ("rule", "table")}
    if sum(now.values()) >= sum(was.values()):
        return ""
    return "covered sites fall from " + ", ".join(f"{k} {was[k]} -> {now[k]}" for k in was)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("engine", choices=sorted(SCOPES))
    ap.add_argument("release")
    ap.add_argument("--wheel", type=Path)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--force", action="store_true",
                    help="write the sites file even when it covers fewer sites than the one it replaces")
    ap.add_argument("--source", type=Path, help="a folder with the engine's files at their package paths, instead "
                    "of a wheel (needs --origin: where the text came from)")
    ap.add_argument("--origin", type=Path, help="YAML: repo, commit, how (obtained), release_pinned, why (not), "
                    "not_read: {path: why}; written into the sites file with each read file's chars and sha256")
    a = ap.parse_args(argv)
    from engine_check_classify import classify_all, render  # noqa: E402 (tools/ sibling)
    origin = None
    if a.source is not None:
        if a.origin is None or not a.origin.is_file():
            print("engine_check_sites: --source needs --origin FILE (where the text came from); try --origin "
                  "origin.yaml", file=sys.stderr)
            return 2
        origin = yaml.safe_load(a.origin.read_text()) or {}
        sites, sources, files = scan_source(a.engine, a.source)
        origin["files"] = files
        wheel = None
    else:
        wheel = a.wheel or find_wheel(a.engine, a.release)
        sites, sources = scan(a.engine, a.release, wheel)
    generated = None
    if a.engine in GENERATORS and wheel is not None:
        import importlib
        gen = importlib.import_module(GENERATORS[a.engine])
        generated = gen.generate_release(wheel)
    rows = classify_all(a.engine, a.release, sites, sources, generated, wheel=wheel)
    if origin is not None:
        rows = [unreleased_row(r) for r in rows]
    if generated is not None:
        gen.write_tables(a.release, generated)
    out = a.out or ROOT / "catalog" / "engines" / "checks" / "sites" / f"{a.engine}-{a.release}.yaml"
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["class"]] = counts.get(r["class"], 0) + 1
    lost = shrinkage(out, counts)
    if lost and not a.force:
        print(f"{out}: not written: {lost}. A regeneration of the same release covering less means a missing wheel,"
              " environment or tool change (rerun with --force to write it anyway)", file=sys.stderr)
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    scope = SCOPES[a.engine] if origin is None else (SCOPES[a.engine][0], [f["path"] for f in origin["files"]])
    out.write_text(render(a.engine, a.release, scope, rows, (generated or {}).get("lets"), origin=origin))
    print(f"{out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}: {len(rows)} sites "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    import os
    if os.environ.get("PYTHONHASHSEED") != "0":  # the SGLang walk still numbers some lets in set order: one seed,
        os.execve(sys.executable, [sys.executable, *sys.argv],  # one file on every run and machine
                  {**os.environ, "PYTHONHASHSEED": "0"})
    sys.exit(main(sys.argv[1:]))
