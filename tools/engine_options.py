"""Generate catalog/engines/options/<engine>.yaml: every option string each released engine's CLI parser accepts.

Usage: python tools/engine_options.py vllm|sglang|lmdeploy [DL_DIR]   (DL_DIR default /work/dl, holding unzipped wheels
as <engine>-<release>/<package>/...). Reads the released source with ``ast`` (nothing is imported or run):

- every string literal starting with ``-`` passed positionally to an ``add_argument(...)`` call;
- dataclass-driven flags: fields annotated ``Annotated[T, "help"]`` / ``Annotated[T, Arg(...)]`` (SGLang >= 0.5.14,
  ``--field-name`` plus ``Arg(aliases=[...])``, ``cli_name=``; ``no_cli=True`` skipped) and the fields of vLLM's
  ``*FrontendArgs`` classes (``--field-name``).

Not seen (documented in the output header): ``--no-X`` inverses that argparse.BooleanOptionalAction adds for boolean
fields, and options built from runtime values. Each option gets ``since`` (first scanned release that has it),
``until`` (first scanned release after the last one that has it) and ``evidence`` (path:line at the newest release
that has it).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

from packaging.version import Version

ENGINES = {
    "vllm": {"env_files": ["vllm/envs.py"], "package": "vllm", "globs": ["vllm/engine/arg_utils.py", "vllm/entrypoints/openai/cli_args.py",
                                          "vllm/entrypoints/common/cli_args.py", "vllm/entrypoints/launchers/cli_args.py",
                                          "vllm/entrypoints/cli/serve.py",
                                          "vllm/entrypoints/openai/api_server.py"],
             "dataclass_classes": ("FrontendArgs",)},
    "lmdeploy": {"package": "lmdeploy", "globs": ["lmdeploy/cli/serve.py", "lmdeploy/cli/utils.py"],
                 "dataclass_classes": ("NoDataclassCLI",)},
    "sglang": {"env_files": ["sglang/srt/environ.py"], "package": "sglang", "globs": ["sglang/srt/server_args.py", "sglang/srt/arg_groups/*.py",
                                              "sglang/srt/arg_groups/fields/*.py"],
               "dataclass_classes": ("",)},
}


def _str(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _annotated_arg(ann: ast.AST) -> ast.AST | None:
    """The metadata element of ``A[T, meta]`` / ``Annotated[T, meta]``, else None."""
    if isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and ann.value.id in ("A", "Annotated"):
        sl = ann.slice
        if isinstance(sl, ast.Tuple) and len(sl.elts) >= 2:
            return sl.elts[1]
    return None


def _nodes(path: Path) -> list[ast.AST]:
    """Every node of one source file's syntax tree (``ast.walk`` order); none for a file that does not parse."""
    try:
        return list(ast.walk(ast.parse(path.read_text(encoding="utf-8"))))
    except (SyntaxError, UnicodeDecodeError):
        return []


def options_in(path: Path, rel: str, classes: tuple[str, ...]) -> dict[str, int]:
    """Option string -> first line in one source file."""
    out: dict[str, int] = {}
    for node in _nodes(path):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            for a in node.args:
                s = _str(a)
                if s and s.startswith("-") and len(s) > 1:
                    out.setdefault(s, node.lineno)
        if isinstance(node, ast.ClassDef) and any(c in node.name for c in classes):
            for st in node.body:
                if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
                    continue
                name = st.target.id
                if name.startswith("_"):
                    continue
                meta = _annotated_arg(st.annotation)
                if classes == ("",):  # SGLang: only Annotated fields are CLI arguments
                    if meta is None:
                        continue
                    if isinstance(meta, ast.Call):
                        kw = {k.arg: k.value for k in meta.keywords}
                        if isinstance(kw.get("no_cli"), ast.Constant) and kw["no_cli"].value is True:
                            continue
                        cli = _str(kw["cli_name"]) if "cli_name" in kw else None
                        out.setdefault(cli or "--" + name.replace("_", "-"), st.lineno)
                        if isinstance(kw.get("aliases"), ast.List):
                            for e in kw["aliases"].elts:
                                if _str(e):
                                    out.setdefault(_str(e), st.lineno)
                        continue
                    if _str(meta) is None:
                        continue
                out.setdefault("--" + name.replace("_", "-"), st.lineno)
    return out


# vLLM 0.34.0 envs.py:654-660: variables vLLM no longer reads, each with a hint; Platform.validate_environ refuses
# them (platforms/interface.py:1492-1493). Their keys are not variables the release reads.
REMOVED_ENV = "removed_environment_variables"


def _removed_dicts(nodes: list[ast.AST]) -> list[ast.Dict]:
    out = []
    for n in nodes:
        t = n.targets[0] if isinstance(n, ast.Assign) and len(n.targets) == 1 else \
            n.target if isinstance(n, ast.AnnAssign) else None
        if isinstance(t, ast.Name) and t.id == REMOVED_ENV and isinstance(n.value, ast.Dict):
            out.append(n.value)
    return out


def removed_env_in(path: Path) -> dict[str, dict]:
    """{name: {line, hint}} of vLLM's ``removed_environment_variables`` (a literal string hint, else its source)."""
    out: dict[str, dict] = {}
    for d in _removed_dicts(_nodes(path)):
        for k, v in zip(d.keys, d.values):
            s = _str(k) if k is not None else None
            if s:
                hint = v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else ast.unparse(v)
                out[s] = {"line": k.lineno, "hint": " ".join(hint.split())}
    return out


def env_in(path: Path, prefixes: tuple[str, ...]) -> dict[str, int]:
    """Environment variable name -> line: string keys of dict literals (vLLM ``environment_variables``; not
    ``removed_environment_variables``) and class attributes (SGLang ``class Envs``) named with the engine's prefix."""
    out: dict[str, int] = {}
    nodes = _nodes(path)
    removed = {id(d) for d in _removed_dicts(nodes)}
    for node in nodes:
        if isinstance(node, ast.Dict) and id(node) not in removed:
            for k in node.keys:
                s = _str(k) if k is not None else None
                if s and s.startswith(prefixes):
                    out.setdefault(s, k.lineno)
        elif isinstance(node, ast.ClassDef) and node.name == "Envs":
            for st in node.body:
                tgt = st.target if isinstance(st, ast.AnnAssign) else (st.targets[0] if isinstance(st, ast.Assign) else None)
                if isinstance(tgt, ast.Name) and tgt.id.startswith(prefixes):
                    out.setdefault(tgt.id, st.lineno)
    return out


def _ranges(releases: dict[str, dict[str, tuple[str, int]]], package: str) -> dict[str, dict]:
    order = sorted(releases, key=Version)
    out: dict[str, dict] = {}
    for opt in sorted({o for r in releases.values() for o in r}):
        present = [r for r in order if opt in releases[r]]
        last = present[-1]
        entry: dict = {"since": present[0], "last_seen": last}
        after = [r for r in order if Version(r) > Version(last)]
        if after:
            entry["until"] = after[0]
        gaps = [r for r in order if Version(present[0]) < Version(r) < Version(last) and r not in present]
        if gaps:
            entry["absent_in"] = gaps
        path, line = releases[last][opt]
        entry["evidence"] = {"package": package, "release": last, "path": path, "line": line}
        out[opt] = entry
    return out


def scan(engine: str, dl: Path) -> dict:
    cfg = ENGINES[engine]
    releases: dict[str, dict[str, tuple[str, int]]] = {}
    env_releases: dict[str, dict[str, tuple[str, int]]] = {}
    removed_env: dict[str, dict[str, dict]] = {}
    for d in sorted(dl.glob(f"{engine}-*")):
        if not d.is_dir():
            continue
        rel = d.name[len(engine) + 1:]
        try:
            Version(rel)
        except Exception:
            continue
        found: dict[str, tuple[str, int]] = {}
        for g in cfg["globs"]:
            for f in sorted(d.glob(g)):
                relpath = str(f.relative_to(d))
                for opt, line in options_in(f, relpath, cfg["dataclass_classes"]).items():
                    found.setdefault(opt, (relpath, line))
        if found:
            releases[rel] = found
            envs: dict[str, tuple[str, int]] = {}
            for g in cfg.get("env_files", []):
                for f in sorted(d.glob(g)):
                    for name, line in env_in(f, (engine.upper() + "_", "SGL_")).items():
                        envs.setdefault(name, (str(f.relative_to(d)), line))
            env_releases[rel] = envs
            gone = {}
            for g in cfg.get("env_files", []):
                for f in sorted(d.glob(g)):
                    gone.update({k: {"path": str(f.relative_to(d)), **v} for k, v in removed_env_in(f).items()})
            if gone:
                removed_env[rel] = gone
    order = sorted(releases, key=Version)
    return {"engine": engine, "scanned": order, "options": _ranges(releases, cfg["package"]),
            "env": _ranges({r: e for r, e in env_releases.items() if e}, cfg["package"]),
            "removed_env": removed_env}


def render(data: dict) -> str:
    import yaml
    head = (f"# GENERATED by tools/engine_options.py from the released {data['engine']} wheels (pip download "
            f"{data['engine']}==X --no-deps); do not edit by hand.\n"
            "# Every option string the CLI parser of each scanned release accepts (add_argument literals and\n"
            "# dataclass-driven fields). since = first scanned release with it; until = first scanned release after\n"
            "# the last one with it; absent_in = scanned releases in between without it. Not seen: --no-X inverses\n"
            "# of boolean fields and options built from runtime values.\n")
    lines = [f"engine: {data['engine']}", "scanned: [" + ", ".join(data["scanned"]) + "]", "options:"]
    for opt, e in data["options"].items():
        lines.append(f"  {yaml.safe_dump({opt: e}, default_flow_style=True, width=10_000).strip()[1:-1]}")
    lines.append("# environment variables the engine reads (vllm/envs.py environment_variables; sglang/srt/environ.py Envs)")
    lines.append("env:")
    for name, e in data["env"].items():
        lines.append(f"  {yaml.safe_dump({name: e}, default_flow_style=True, width=10_000).strip()[1:-1]}")
    if data.get("removed_env"):
        lines.append("# per release, variables the engine refuses as removed, with its hint (vLLM envs.py "
                     "removed_environment_variables, read by platforms/interface.py validate_environ)")
        lines.append("removed_env:")
        for rel in sorted(data["removed_env"], key=Version):
            lines.append(f"  {yaml.safe_dump(str(rel)).splitlines()[0]}:")
            for name, e in sorted(data["removed_env"][rel].items()):
                lines.append(f"    {yaml.safe_dump({name: e}, default_flow_style=True, width=10_000).strip()[1:-1]}")
    return head + "\n".join(lines) + "\n"


if __name__ == "__main__":
    eng = sys.argv[1]
    dl = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("/work/dl")
    out = Path(__file__).resolve().parents[1] / "catalog" / "engines" / "options" / f"{eng}.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    data = scan(eng, dl)
    out.write_text(render(data))
    print(f"{out}: {len(data['options'])} options over {len(data['scanned'])} releases")
