"""LMDeploy's engine-config checks as generated rows: which option reaches which config field, read from the wheel.

Usage: runs from ``tools/engine_check_sites.py lmdeploy RELEASE`` (GENERATORS); nothing is imported or run.

``lmdeploy serve api_server`` builds one engine config from its parsed options (lmdeploy/cli/serve.py
``SubCliServe.api_server``: ``PytorchEngineConfig(block_size=args.cache_block_seq_len, device_type=args.device,
...)`` or ``TurbomindEngineConfig(...)``), and the configs' ``__post_init__`` (lmdeploy/messages.py) assert on the
fields. This module reads, with ``ast``:

- the options ``add_parser_api_server`` adds (``ArgumentHelper.<name>(group, ...)`` in lmdeploy/cli/utils.py, or a
  direct ``add_argument``): option names, dest, argparse type, default (a helper's parameter default unless the call
  site passes one), choices;
- the keyword -> ``args.<dest>`` of each engine-config construction in ``api_server``.

It returns ``class_fields`` ({config class: {field: optkg fact}}: the flag table's setting for an option
catalog/engines/lmdeploy.yaml models, else ``lmdeploy_<dest>``), ``class_defaults`` ({config class: {field: the
option's default}}: the value the check reads when a command does not give the option; the builders always pass
``args.<dest>``, so the dataclass default never applies on this path; None as '__none__'), and ``options`` /
``option_defaults`` (the same by dest, for the CLI's own checks on ``args.<dest>``). tools/engine_check_classify.classify_all translates each config check through them.
``write_tables`` writes catalog/engines/options/lmdeploy-inputs.yaml (every such input: options, type, default;
the launch reader reads the options the flag table does not model through it, kg.inputs.launch.engineinputs) and
catalog/settings/lmdeploy-engine-options.yaml (so a stack file can give them).
"""
from __future__ import annotations

import ast
import sys
import zipfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SERVE = "lmdeploy/cli/serve.py"
UTILS = "lmdeploy/cli/utils.py"
MESSAGES = "lmdeploy/messages.py"
CONFIGS = ("PytorchEngineConfig", "TurbomindEngineConfig", "SpeculativeConfig")
# functions of the CLI that build an engine config from the parsed options (lmdeploy/cli/): the speculative config
# is built only when --speculative-algorithm is given (utils.py get_speculative_config)
BUILDERS = {SERVE: ["api_server"], UTILS: ["get_speculative_config"]}
TYPES = {"int": "integer", "float": "number", "str": "string"}
NONE = "__none__"


def _lit(n: ast.AST | None) -> tuple[bool, Any]:
    if n is None:
        return True, None
    try:
        return True, ast.literal_eval(n)
    except (ValueError, SyntaxError, TypeError):
        return False, None


def _kw(call: ast.Call) -> dict[str, ast.AST]:
    return {k.arg: k.value for k in call.keywords if k.arg}


def _add_arguments(fn: ast.FunctionDef) -> list[ast.Call]:
    return [n for n in ast.walk(fn)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument"]


def _option(call: ast.Call, params: dict[str, ast.AST | None]) -> dict[str, Any] | None:
    """{names, dest, type, default, choices, line} of one ``add_argument`` call; ``params``: the helper's parameters
    as the call site binds them (a Name default / choices reads them)."""
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if not names or not names[0].startswith("--"):
        return None
    kw = _kw(call)

    def value(node: ast.AST | None) -> tuple[bool, Any]:
        if isinstance(node, ast.Name) and node.id in params:
            node = params[node.id]
        return _lit(node)

    ok_d, default = value(kw.get("default"))
    ok_c, choices = value(kw.get("choices"))
    action = kw.get("action")
    t = kw.get("type")
    if isinstance(action, ast.Constant) and action.value in ("store_true", "store_false"):
        kind, default, ok_d = "flag", action.value == "store_false", True
    elif kw.get("nargs") is not None:
        kind = "list"
    elif isinstance(t, ast.Name) and t.id in TYPES:
        kind = TYPES[t.id]
    elif isinstance(t, ast.Attribute) and ast.unparse(t) == "json.loads":
        kind = "json"
    else:
        kind = "string" if t is None else None  # a parsing function of its own (_parse): not modelled here
    dest = kw["dest"].value if isinstance(kw.get("dest"), ast.Constant) else names[0][2:].replace("-", "_")
    return {"names": names, "dest": dest, "type": kind, "default": default if ok_d else NONE,
            "known_default": ok_d, "choices": choices if ok_c else None, "line": call.lineno}


def _helper_options(utils: ast.Module) -> dict[str, ast.FunctionDef]:
    helper = next(n for n in utils.body if isinstance(n, ast.ClassDef) and n.name == "ArgumentHelper")
    return {f.name: f for f in helper.body if isinstance(f, ast.FunctionDef)}


def _bind(fn: ast.FunctionDef, call: ast.Call) -> dict[str, ast.AST | None]:
    """The helper's parameters (after ``parser``) bound to the call site's arguments, else their defaults."""
    args = fn.args.args
    defaults = [None] * (len(args) - len(fn.args.defaults)) + list(fn.args.defaults)
    bound = {a.arg: d for a, d in zip(args, defaults)}
    for a, v in zip(args[1:], call.args[1:]):
        bound[a.arg] = v
    bound.update(_kw(call))
    return bound


def server_options(serve: ast.Module, utils: ast.Module) -> dict[str, dict[str, Any]]:
    """dest -> option of every option ``add_parser_api_server`` adds."""
    helpers = _helper_options(utils)
    fn = next(n for n in ast.walk(serve) if isinstance(n, ast.FunctionDef) and n.name == "add_parser_api_server")
    out: dict[str, dict[str, Any]] = {}
    for c in ast.walk(fn):
        if not isinstance(c, ast.Call) or not isinstance(c.func, ast.Attribute):
            continue
        found: list[tuple[dict[str, Any] | None, str]] = []
        if isinstance(c.func.value, ast.Name) and c.func.value.id == "ArgumentHelper" and c.func.attr in helpers:
            h = helpers[c.func.attr]
            found = [(_option(call, _bind(h, c)), f"{UTILS}:{call.lineno}") for call in _add_arguments(h)]
        elif c.func.attr == "add_argument":
            found = [(_option(c, {}), f"{SERVE}:{c.lineno}")]
        for o, where in found:
            if o:
                o["where"] = where
                out.setdefault(o["dest"], o)
    return out


def _args_dest(v: ast.AST, local: dict[str, str]) -> str | None:
    """The option a value reads: ``args.<dest>``, ``getattr(args, '<dest>', ...)`` or a local bound to one."""
    if isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and v.value.id == "args":
        return v.attr
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "getattr" and len(v.args) >= 2 \
            and isinstance(v.args[0], ast.Name) and v.args[0].id == "args" and isinstance(v.args[1], ast.Constant):
        return str(v.args[1].value)
    if isinstance(v, ast.Name):
        return local.get(v.id)
    return None


def config_fields(modules: dict[str, ast.Module]) -> dict[str, dict[str, str]]:
    """{config class: {field: dest}} of the engine configs the CLI builders (BUILDERS) construct from the options."""
    out: dict[str, dict[str, str]] = {}
    for path, names in BUILDERS.items():
        for fn in (n for n in ast.walk(modules[path]) if isinstance(n, ast.FunctionDef) and n.name in names):
            local = {t.id: d for st in ast.walk(fn) if isinstance(st, ast.Assign) and len(st.targets) == 1
                     for t in st.targets if isinstance(t, ast.Name) and (d := _args_dest(st.value, {}))}
            for c in ast.walk(fn):
                if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in CONFIGS:
                    for k in c.keywords:
                        dest = _args_dest(k.value, local)
                        if k.arg and dest:
                            out.setdefault(c.func.id, {})[k.arg] = dest
    return out


def flag_table() -> dict[str, str]:
    """option name -> optkg setting of the hand flag table (catalog/engines/lmdeploy.yaml)."""
    t = yaml.safe_load((ROOT / "catalog" / "engines" / "lmdeploy.yaml").read_text())
    return {str(n): str(f["set"]) for f in t.get("flags") or [] if f.get("set") for n in f.get("names") or []}


def generate_release(wheel: Path) -> dict[str, Any]:
    with zipfile.ZipFile(wheel) as z:
        serve = ast.parse(z.read(SERVE).decode())
        utils = ast.parse(z.read(UTILS).decode())
        messages = ast.parse(z.read(MESSAGES).decode())
    opts = server_options(serve, utils)
    by_class = config_fields({SERVE: serve, UTILS: utils})
    table = flag_table()
    fields: dict[str, dict[str, str]] = {}
    defaults: dict[str, dict[str, Any]] = {}
    inputs: dict[str, dict[str, Any]] = {}
    for cls, fmap in sorted(by_class.items()):
        for fld, dest in sorted(fmap.items()):
            o = opts.get(dest)
            if o is None or o["type"] is None and not any(n in table for n in o["names"]):
                continue  # an option parsed by a function of its own (json.loads, an enum name): not modelled
            fact = next((table[n] for n in o["names"] if n in table), "lmdeploy_" + dest.rstrip("_"))
            if o["type"] == "json":  # a JSON option the config turns into a dataclass: its keys are the inputs
                _json_keys(cls, fld, o, fact, messages, fields, defaults, inputs)
                continue
            fields.setdefault(cls, {})[fld] = fact
            if o["known_default"]:
                defaults.setdefault(cls, {})[fld] = NONE if o["default"] is None else o["default"]
            if not any(n in table for n in o["names"]):
                e = {"options": o["names"], "type": o["type"], "default": NONE if o["default"] is None else o["default"],
                     "where": o["where"]}
                if o["choices"]:
                    e["choices"] = list(o["choices"])
                inputs[fact] = e
    # the options themselves (``args.<dest>`` in the CLI's own checks), by the same facts
    options = {d: ("lmdeploy_" + d.rstrip("_")) if not any(n in table for n in o["names"]) else
               next(table[n] for n in o["names"] if n in table) for d, o in opts.items()}
    for d, o in opts.items():
        if o["type"] is not None and not any(n in table for n in o["names"]) and options[d] not in inputs:
            e = {"options": o["names"], "type": o["type"], "where": o["where"],
                 "default": NONE if o["default"] is None else o["default"]}
            if o["choices"]:
                e["choices"] = list(o["choices"])
            inputs[options[d]] = e
    return {"class_fields": fields, "class_defaults": defaults, "inputs": inputs, "options": options,
            "option_defaults": {d: (NONE if o["default"] is None else o["default"]) for d, o in opts.items()
                                if o["known_default"]},
            "rows": {}, "never": {}, "why": {}}


def _json_keys(cls: str, fld: str, o: dict[str, Any], fact: str, messages: ast.Module, fields: dict, defaults: dict,
               inputs: dict) -> None:
    """The keys of JSON option ``o``, when config ``cls``'s field ``fld`` is annotated with a dataclass of
    messages.py (``kv_transfer_config: KVTransferConfig | dict | None``, built with ``KVTransferConfig(**value)``):
    that dataclass's fields, each an input ``<fact>__<key>`` of the option, None defaults as '__none__'."""
    classes = {c.name: c for c in messages.body if isinstance(c, ast.ClassDef)}
    owner = classes.get(cls)
    ann = next((st.annotation for st in (owner.body if owner else []) if isinstance(st, ast.AnnAssign)
                and isinstance(st.target, ast.Name) and st.target.id == fld), None)
    names = {n.id for n in ast.walk(ann) if isinstance(n, ast.Name)} if ann is not None else set()
    target = next((classes[n] for n in sorted(names) if n in classes), None)
    if target is None:
        return
    for st in target.body:
        if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
            continue
        text = ast.unparse(st.annotation)
        kind = "string" if ("str" in text or "Literal" in text or "Role" in text) and "dict" not in text else None
        ok, val = _lit(st.value)
        if kind is None or not ok:
            continue
        key_fact = f"{fact}__{st.target.id}"
        fields.setdefault(target.name, {})[st.target.id] = key_fact
        defaults.setdefault(target.name, {})[st.target.id] = NONE if val is None else val
        inputs[key_fact] = {"options": list(o["names"]), "key": st.target.id, "type": kind,
                            "default": NONE if val is None else val, "where": o["where"]}


def write_tables(release: str, result: dict[str, Any]) -> None:
    out = ROOT / "catalog" / "engines" / "options" / "lmdeploy-inputs.yaml"
    old = yaml.safe_load(out.read_text()) if out.exists() else None
    rels = dict((old or {}).get("releases") or {})
    used = result.get("used_facts")  # the facts the release's table rows read (set by classify_all)
    rels[str(release)] = {k: result["inputs"][k] for k in sorted(result["inputs"]) if used is None or k in used}
    head = ("# GENERATED by tools/lmdeploy_generated_checks.py (tools/engine_check_sites.py lmdeploy RELEASE) from the\n"
            "# released lmdeploy wheels; do not edit by hand. Per release, every `lmdeploy serve api_server` option that\n"
            "# reaches an engine-config field the generated check rows read (lmdeploy/cli/serve.py api_server) and that the\n"
            "# flag table (catalog/engines/lmdeploy.yaml) does not model: its options, the kind of value argparse takes,\n"
            "# its default ('__none__' = None) and where the option is defined. Read by kg.inputs.launch.engineinputs.\n")
    body = {"engine": "lmdeploy", "releases": {r: rels[r] for r in sorted(rels, key=_vkey)}}
    out.write_text(head + yaml.safe_dump(body, sort_keys=False, width=120, default_flow_style=None))
    settings: dict[str, Any] = {}
    for r in rels.values():
        for fact, e in r.items():
            settings[fact] = {"type": {"flag": "boolean"}.get(e["type"], e["type"]),
                              "description": f"LMDeploy {e['options'][0]} (read by its generated startup checks)"}
    s = ROOT / "catalog" / "settings" / "lmdeploy-engine-options.yaml"
    s.write_text("# GENERATED by tools/lmdeploy_generated_checks.py; do not edit by hand. LMDeploy options the generated\n"
                 "# startup check rows read that optkg has no setting of its own for\n"
                 "# (catalog/engines/options/lmdeploy-inputs.yaml); a stack file may give them under `settings:`.\n"
                 + yaml.safe_dump({"settings": {k: settings[k] for k in sorted(settings)}}, sort_keys=False, width=120))


def _vkey(v: str) -> Any:
    from packaging.version import Version
    return Version(str(v))


if __name__ == "__main__":
    import json
    w = Path(sys.argv[1])
    print(json.dumps(generate_release(w), indent=1, default=str))
