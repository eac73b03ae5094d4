"""SGLang's full input table per release, read from the released wheel: every ServerArgs field and every environment
variable the engine declares, with the release default, so a generated check row over ``self.<field>`` or
``envs.<NAME>.get()`` resolves to the value the user gives and, when not given, to the release's own default.

Usage: python tools/sglang_inputs.py RELEASE [--wheel PATH]   (writes catalog/engines/checks/inputs/sglang-RELEASE.yaml)

Read with ``ast`` (nothing imported), from ``sglang/srt/arg_groups/fields/*.py`` (the ``msgspec.Struct`` namespaces
``ServerArgs`` collects, sglang/srt/server_args.py ``_INPUT_NAMESPACES``) and ``sglang/srt/environ.py`` (``class
Envs``: ``NAME = EnvBool(False)`` ...):

- a field: its python type (``int``, ``Optional[str]``, ``Literal[...]``, ``List[int]`` ...), its kind for the
  command line (``bool`` store_true, ``bool_optional`` BooleanOptionalAction, ``int`` / ``float`` / ``str``,
  ``list``, ``json``, ``other``: a parser optkg does not model), its literal default (``msgspec.field(
  default_factory=list)`` -> ``[]``; no default: ``required``), its option names (``--field-name``, ``cli_name``,
  ``aliases``; ``no_cli`` fields have none), choices when literal, and the line that declares it;
- an environment variable: its kind (bool, int, float, str) and literal default (a callable default is left out:
  the engine computes it).

Options registered by hand in ``ServerArgs.add_cli_args`` with a dest of their own (``--enable-dp-attention``,
``--disable-cuda-graph`` ...) are listed under ``extra_options`` with the field they set (argparse ``dest``).
"""
from __future__ import annotations

import argparse
import ast
import sys
import zipfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
FIELDS_DIR = "sglang/srt/arg_groups/fields/"
CHOICES = "sglang/srt/arg_groups/choices.py"
ENVIRON = "sglang/srt/environ.py"
SERVER_ARGS = "sglang/srt/server_args.py"
ENV_KINDS = {"EnvBool": "bool", "EnvInt": "int", "EnvFloat": "float", "EnvStr": "str", "EnvBoolWithAlias": "bool",
             "EnvIntWithAlias": "int", "EnvStrWithAlias": "str", "EnvTuple": "tuple", "EnvJSON": "json"}
# argparse type parsers the namespace builder applies (kg.engines.sglang.checkns); others leave the value unknown
PARSERS = {"human_readable_int", "json.loads", "json_list_type", "nullable_str"}


def _literal(node: ast.AST | None, consts: dict[str, Any]) -> tuple[bool, Any]:
    if node is None:
        return False, None
    if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("field"):
        kw = {k.arg: k.value for k in node.keywords}
        if "default_factory" in kw and ast.unparse(kw["default_factory"]) in ("list", "dict"):
            return True, [] if ast.unparse(kw["default_factory"]) == "list" else {}
        if "default" in kw:
            return _literal(kw["default"], consts)
        return False, None
    try:
        return True, _const(node, consts)
    except (ValueError, TypeError, KeyError, SyntaxError):
        return False, None


def _const(node: ast.AST, consts: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name) and node.id in consts:
        return consts[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add)):
        a, b = _const(node.left, consts), _const(node.right, consts)
        return a * b if isinstance(node.op, ast.Mult) else a + b
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_const(e, consts) for e in node.elts]
    return ast.literal_eval(node)


def module_constants(tree: ast.Module) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for s in tree.body:
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            tgt = s.targets[0] if isinstance(s, ast.Assign) else s.target
            if isinstance(tgt, ast.Name) and s.value is not None:
                ok, v = _literal(s.value, out)
                if ok:
                    out[tgt.id] = v
    return out


def _strip_optional(t: ast.AST) -> tuple[ast.AST, bool]:
    if isinstance(t, ast.Subscript) and ast.unparse(t.value) in ("Optional", "typing.Optional"):
        return t.slice, True
    if isinstance(t, ast.BinOp) and isinstance(t.op, ast.BitOr):
        parts = [t.left, t.right]
        rest = [p for p in parts if ast.unparse(p) != "None"]
        if len(rest) == 1:
            return rest[0], True
    return t, False


def field_row(st: ast.AnnAssign, consts: dict[str, Any], path: str) -> dict[str, Any] | None:
    ann = st.annotation
    kw: dict[str, ast.AST] = {}
    if isinstance(ann, ast.Subscript) and ast.unparse(ann.value) in ("A", "Annotated") \
            and isinstance(ann.slice, ast.Tuple) and len(ann.slice.elts) >= 2:
        typ, meta = ann.slice.elts[0], ann.slice.elts[1]
        if isinstance(meta, ast.Call) and ast.unparse(meta.func) == "Arg":
            kw = {k.arg: k.value for k in meta.keywords if k.arg}
    else:  # a plain field: no automatic option (ServerArgs.add_cli_args may register one by hand)
        typ, kw = ann, {"no_cli": ast.Constant(True)}
    inner, optional = _strip_optional(typ)
    inner_s = ast.unparse(inner)
    name = st.target.id
    row: dict[str, Any] = {"type": ast.unparse(typ), "line": st.lineno}
    ok, default = _literal(st.value, consts)
    if st.value is None:
        row["required"] = True
    elif ok:
        row["default"] = default
    else:
        row["default_expr"] = ast.unparse(st.value)[:120]
    no_cli = "no_cli" in kw and ast.unparse(kw["no_cli"]) == "True"
    if str(getattr(st.target, "id", "")).startswith("_") and ast.unparse(typ) == "ClassVar":
        return None
    action = ast.unparse(kw["action"]) if "action" in kw else None
    parser = ast.unparse(kw["type_parser"]) if "type_parser" in kw else None
    if no_cli:
        row["names"] = []
    else:
        cli = kw.get("cli_name")
        names = [cli.value if isinstance(cli, ast.Constant) else "--" + name.replace("_", "-")]
        if "aliases" in kw:
            ok_a, aliases = _literal(kw["aliases"], consts)
            if ok_a and isinstance(aliases, list):
                names += [str(a) for a in aliases]
        row["names"] = names
    if "fallback" in kw:  # resolution_result's value when neither a declaration nor the input gives one
        ok_f, fb = _literal(kw["fallback"], consts)
        if ok_f:
            row["fallback"] = fb
    if "choices" in kw:
        ok_c, ch = _literal(kw["choices"], consts)
        row["choices"] = ch if ok_c and isinstance(ch, list) else ast.unparse(kw["choices"])[:80]
    elif inner_s.startswith("Literal["):
        ok_c, ch = _literal(inner.slice if isinstance(inner, ast.Subscript) else None, consts)
        if ok_c:
            row["choices"] = ch if isinstance(ch, list) else [ch]
    if action == "argparse.BooleanOptionalAction":
        kind = "bool_optional"
    elif action is not None:
        kind = "other"
        row["action"] = action
    elif parser is not None:
        kind = "json" if parser in ("json.loads", "json_list_type") else "other"
        row["parser"] = parser
        if parser in ("human_readable_int", "nullable_str"):
            kind = "int" if parser == "human_readable_int" else "str"
    elif inner_s == "bool":
        kind = "bool"
    elif inner_s in ("int", "float", "str"):
        kind = inner_s
    elif inner_s.startswith("Literal["):
        ch = row.get("choices")
        kind = type(ch[0]).__name__ if isinstance(ch, list) and ch else "str"
    elif inner_s.startswith(("List[", "list[")):
        kind = "list"
        el = inner_s[5:-1]
        row["item"] = el if el in ("int", "float", "str") else "str"
        if "nargs" in kw:
            row["nargs"] = ast.unparse(kw["nargs"]).strip("'\"")
    else:
        kind = "other"
    row["kind"] = kind
    if optional:
        row["optional"] = True
    return {name: row}


def read_fields(z: zipfile.ZipFile) -> dict[str, dict[str, Any]]:
    consts = module_constants(ast.parse(z.read(CHOICES).decode()))
    out: dict[str, dict[str, Any]] = {}
    for n in sorted(z.namelist()):
        if not (n.startswith(FIELDS_DIR) and n.endswith(".py")):
            continue
        tree = ast.parse(z.read(n).decode())
        local = {**consts, **module_constants(tree)}
        for cls in (c for c in tree.body if isinstance(c, ast.ClassDef)):
            if not any(isinstance(s, ast.Assign) and ast.unparse(s.targets[0]) == "_NS_PATH" for s in cls.body):
                continue
            for st in cls.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    row = field_row(st, local, n)
                    if row:
                        for k, v in row.items():
                            v["path"] = n
                            v["namespace"] = cls.name
                        out.update(row)
    return out


def read_extra_options(z: zipfile.ZipFile, fields: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Options ServerArgs.add_cli_args registers by hand: option -> {dest, kind, line}."""
    tree = ast.parse(z.read(SERVER_ARGS).decode())
    out: dict[str, dict[str, Any]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")]
        if not names:
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        dest = kw["dest"].value if isinstance(kw.get("dest"), ast.Constant) else names[0][2:].replace("-", "_")
        action = ast.unparse(kw["action"]) if "action" in kw else None
        kind = "bool" if action in ("'store_true'", "DeprecatedStoreTrueAction") else \
            "const" if action == "DeprecatedStoreConstAction" else "str"
        row: dict[str, Any] = {"dest": dest, "kind": kind, "line": node.lineno, "field": dest in fields}
        if kind == "const" and "const_value" in kw:
            row["const"] = ast.literal_eval(kw["const_value"])
        for n in names:
            out[n] = row
    return out


def read_env(z: zipfile.ZipFile) -> dict[str, dict[str, Any]]:
    tree = ast.parse(z.read(ENVIRON).decode())
    out: dict[str, dict[str, Any]] = {}
    envs = next((c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "Envs"), None)
    for st in (envs.body if envs else []):
        if not (isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and isinstance(st.value, ast.Call)):
            continue
        cls = ast.unparse(st.value.func)
        if cls not in ENV_KINDS:
            continue
        row: dict[str, Any] = {"kind": ENV_KINDS[cls], "line": st.lineno}
        if st.value.args:
            ok, v = _literal(st.value.args[0], {})
            if ok and (v is None or isinstance(v, (bool, int, float, str))):
                row["default"] = v
            else:
                row["default_expr"] = ast.unparse(st.value.args[0])[:80]
        else:
            row["default"] = None
        out[st.targets[0].id] = row
    return out


MODEL_CONFIG = "sglang/srt/configs/model_config.py"


def _arch_tests(test: ast.AST) -> tuple[list[str], list[str]] | None:
    """``"A" in self.hf_config.architectures or ("B" in ... and <more>) ...``: (architectures the test accepts by
    themselves, architectures it accepts only under a further condition); None for any other shape."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) else [test]
    sure: list[str] = []
    cond: list[str] = []
    for p in parts:
        extra = False
        if isinstance(p, ast.BoolOp) and isinstance(p.op, ast.And):
            p, extra = p.values[0], True
        if not (isinstance(p, ast.Compare) and len(p.ops) == 1 and isinstance(p.ops[0], ast.In)
                and isinstance(p.left, ast.Constant) and isinstance(p.left.value, str)
                and ast.unparse(p.comparators[0]) == "self.hf_config.architectures"):
            return None
        (cond if extra else sure).append(p.left.value)
    return sure, cond


def _sets_arch(body: list[ast.stmt]) -> str | None:
    for st in body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and ast.unparse(st.targets[0]) == "self.attention_arch" \
                and isinstance(st.value, ast.Attribute) and ast.unparse(st.value.value) == "AttentionArch":
            return st.value.attr
    return None


def read_attention_arch(z: zipfile.ZipFile) -> dict[str, Any] | None:
    """ModelConfig.attention_arch (configs/model_config.py ``_derive_model_shapes``): the if / elif chain over
    ``hf_config.architectures``, in order, as branches {value, archs, conditional, line}; the final ``else`` gives SSM
    for PURE_SSM_ARCHITECTURES, else MHA. None when the chain has another shape (the fact is then not given)."""
    tree = ast.parse(z.read(MODEL_CONFIG).decode())
    consts = module_constants(tree)
    fn = next((f for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "ModelConfig" for f in c.body
               if isinstance(f, ast.FunctionDef) and f.name == "_derive_model_shapes"), None)
    if fn is None:
        return None
    head = next((st for st in fn.body if isinstance(st, ast.If) and _arch_tests(st.test) is not None
                 and _sets_arch(st.body)), None)
    if head is None:
        return None
    branches: list[dict[str, Any]] = []
    node: ast.stmt = head
    while True:
        tests, value = _arch_tests(node.test), _sets_arch(node.body)
        if tests is None or value is None:
            return None
        branches.append({"value": value, "archs": tests[0], "conditional": tests[1], "line": node.lineno})
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
            continue
        tail = ast.unparse(ast.Module(body=node.orelse, type_ignores=[]))
        ssm = consts.get("PURE_SSM_ARCHITECTURES")
        if "AttentionArch.SSM" not in tail or "AttentionArch.MHA" not in tail or not isinstance(ssm, (list, tuple)):
            return None
        return {"path": MODEL_CONFIG, "line": head.lineno, "branches": branches,
                "else": {"ssm_if_any": sorted(ssm), "otherwise": "MHA",
                         "line": node.orelse[0].lineno if node.orelse else node.lineno}}


def build(release: str, wheel: Path) -> dict[str, Any]:
    with zipfile.ZipFile(wheel) as z:
        fields = read_fields(z)
        extra = read_extra_options(z, fields)
        env = read_env(z)
        arch = read_attention_arch(z)
    return {"engine": "sglang", "release": release, "package": "sglang", "fields": fields,
            "extra_options": extra, "env": env, "model": {"attention_arch": arch} if arch else {}}


def render(doc: dict[str, Any]) -> str:
    head = (f"# GENERATED by tools/sglang_inputs.py from the released sglang {doc['release']} wheel; do not edit by hand.\n"
            "# Every ServerArgs field (sglang/srt/arg_groups/fields/*.py: type, kind on the command line, literal default,\n"
            "# option names, choices, path:line) and every environment variable of sglang/srt/environ.py (kind, literal\n"
            "# default). kg.engines.sglang.checkns builds a stack's SGLang inputs from it for the generated check rows.\n")
    out = [head + yaml.safe_dump({k: doc[k] for k in ("engine", "release", "package")}, sort_keys=False).rstrip()]
    for sec in ("fields", "extra_options", "env", "model"):
        if sec not in doc:
            continue
        out.append(f"{sec}:")
        for k, v in doc[sec].items():
            out.append(f"  {yaml.safe_dump({k: v}, default_flow_style=True, width=100_000, sort_keys=False).strip()[1:-1]}")
    return "\n".join(out) + "\n"


def out_path(release: str) -> Path:
    return ROOT / "catalog" / "engines" / "checks" / "inputs" / f"sglang-{release}.yaml"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("release")
    ap.add_argument("--wheel", type=Path)
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tools"))
    from engine_check_sites import find_wheel
    wheel = a.wheel or find_wheel("sglang", a.release)
    doc = build(a.release, wheel)
    p = out_path(a.release)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(render(doc))
    print(f"{p.relative_to(ROOT)}: {len(doc['fields'])} fields, {len(doc['extra_options'])} hand-registered options, "
          f"{len(doc['env'])} environment variables")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
