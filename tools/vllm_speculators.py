"""What vLLM's speculator config classes change on the ``SpeculativeConfig`` they set up, read with ``ast``.

``SpeculativeConfig.__post_init__`` (vllm/config/speculative.py, 0.33.0 / 0.34.0) picks a ``SpeculatorConfig``
subclass by method (and, for a draft checkpoint, by what the checkpoint declares) and calls its classmethods
``default_model(self)``, ``configure(self)`` and ``apply_options(self)``; the classes live in
vllm/v1/worker/gpu/spec_decode/**/config.py, outside the scanned folders, and which one runs depends on the draft
checkpoint. The walk (tools/vllm_generated_checks.py) does not follow them; instead of forgetting every field of the
speculative config (and of the target's configs it holds) after them, it forgets the fields some speculator class
may assign: every ``spec.<field> = ...`` (or a store / call through ``spec.<field>``) in any function of those
modules, over every class, since which class runs is not known before start.

``speculator_effects`` returns None (forget everything, as before) when the reading is not sound for the release:
a module does ``setattr`` on the spec, or hands the spec object itself to a function outside the speculator
modules, or stores into / hands the target's configs (``spec.target_model_config``, ``target_parallel_config``,
directly or through a local) to a function not read to leave them unchanged (``TARGET_READERS``).
"""
from __future__ import annotations

import ast
from typing import Any

SPEC_DIR = "vllm/v1/worker/gpu/spec_decode/"
TARGETS = ("target_model_config", "target_parallel_config")
# functions handed the target's configs (or values read from them) that assign nothing on them (read at 0.34.0:
# config/speculative.py:1318-1330 compose_draft_hf_overrides, :1530-1552 _verify_and_get_draft_tp, :1554-1582
# _verify_and_get_draft_dcp, :1584-1615 create_draft_parallel_config builds a new ParallelConfig; ModelConfig(...)
# builds the draft's config from values; copy.copy makes a shallow copy the speculator then changes)
TARGET_READERS = {"compose_draft_hf_overrides", "_verify_and_get_draft_tp", "_verify_and_get_draft_dcp",
                  "create_draft_parallel_config", "ModelConfig", "copy", "getattr", "isinstance", "len", "min",
                  "max", "_maybe_override_draft_max_model_len", "_is_qwen3_omni_target", "get_hidden_size",
                  "_validate_qwen3_omni_dspark", "_get_qwen3_omni_text_config",
                  "_get_minimax_m3_dspark_draft"}  # :137-155 reads the target's model path and revision


def _root(n: ast.AST) -> tuple[str | None, list[str]]:
    """(root name, attribute chain) of ``a.b.c`` / ``a.b[0].c``."""
    chain: list[str] = []
    while True:
        if isinstance(n, ast.Attribute):
            chain.append(n.attr)
            n = n.value
        elif isinstance(n, ast.Subscript):
            n = n.value
        elif isinstance(n, ast.Name):
            return n.id, chain[::-1]
        else:
            return None, []


SPEC_CONFIG = "vllm/config/speculative.py"
# ModelConfig / ParallelConfig methods named get_* / is_* / using_* / uses_* / has_* assign nothing on self (every one
# read at 0.33.0 and 0.34.0, config/model.py and config/parallel.py): a speculator may query the target's configs
QUERY_PREFIXES = ("get_", "is_", "using_", "uses_", "has_")


def self_stores(files: dict[str, str], method: str) -> set[str] | None:
    """The fields ``SpeculativeConfig.<method>`` assigns on ``self`` (None: not found, or it hands ``self`` on or
    uses setattr)."""
    tree = ast.parse(files.get(SPEC_CONFIG, ""))
    cls = next((c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "SpeculativeConfig"), None)
    f = next((m for m in (cls.body if cls else []) if isinstance(m, ast.FunctionDef) and m.name == method), None)
    if f is None:
        return None
    out = set()
    for n in ast.walk(f):
        stores = n.targets if isinstance(n, ast.Assign) else \
            [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else []
        for t in stores:
            r, chain = _root(t)
            if r == "self" and chain:
                out.add(chain[0])
        if isinstance(n, ast.Call) and (ast.unparse(n.func) == "setattr"
                                        or any(isinstance(a, ast.Name) and a.id == "self" for a in n.args)):
            return None
    return out


def speculator_effects(files: dict[str, str]) -> tuple[list[str], list[str]] | None:
    """(the SpeculativeConfig fields some speculator class may assign, the places read as path:line), or None."""
    fields: set[str] = set()
    where: list[str] = []
    mods = {p: t for p, t in files.items() if p.startswith(SPEC_DIR) and p.endswith("config.py")}
    if not mods:
        return None
    local_funcs: set[str] = set()
    trees = {}
    for p, t in sorted(mods.items()):
        trees[p] = ast.parse(t)
        local_funcs |= {f.name for f in ast.walk(trees[p]) if isinstance(f, ast.FunctionDef)}
    for p, tree in sorted(trees.items()):
        for f in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            params = {a.arg for a in f.args.args + f.args.kwonlyargs if a.arg in ("spec", "spec_config")
                      or "SpeculativeConfig" in ast.unparse(a.annotation or ast.Constant(""))}
            if not params:
                continue
            alias: dict[str, str] = {}  # local -> the spec field it was read from (target = spec.target_model_config)
            for n in ast.walk(f):
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                    r, chain = _root(n.value)
                    if r in params and chain:
                        alias[n.targets[0].id] = chain[0]

            def field_of(node: ast.AST) -> str | None:
                r, chain = _root(node)
                if r in params:
                    return chain[0] if chain else ""
                return alias.get(r) if r in alias else None
            for n in ast.walk(f):
                stores = (n.targets if isinstance(n, ast.Assign)
                          else [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For)) else [])
                for t in stores:
                    for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                        if isinstance(e, (ast.Attribute, ast.Subscript)):
                            fld = field_of(e)
                            if fld in TARGETS:
                                return None
                            if fld:
                                fields.add(fld)
                                where.append(f"{p}:{n.lineno}")
                if isinstance(n, ast.Call):
                    callee = ast.unparse(n.func).split(".")[-1]
                    if callee == "setattr" and n.args and field_of(n.args[0]) is not None:
                        return None
                    for a in list(n.args) + [k.value for k in n.keywords]:
                        fld = field_of(a)
                        if fld is None:
                            continue
                        if fld == "" and callee not in local_funcs:
                            return None  # the spec itself handed to code not read here
                        if fld in TARGETS and callee not in TARGET_READERS and callee not in local_funcs:
                            r, chain = _root(a)
                            if len(chain) <= (1 if r in params else 0) or isinstance(a, ast.Name):
                                return None  # the target's config object itself handed to code not read
                    if isinstance(n.func, ast.Attribute):  # a method called on something the spec holds
                        fld = field_of(n.func.value)
                        if fld == "":  # a SpeculativeConfig method (config/speculative.py): what it assigns on self
                            own = self_stores(files, n.func.attr)
                            if own is None:
                                return None
                            fields |= own
                            where.append(f"{p}:{n.lineno}")
                            continue
                        if fld in TARGETS and not callee.startswith(QUERY_PREFIXES):
                            return None
                        if fld and fld not in TARGETS:
                            fields.add(fld)
                            where.append(f"{p}:{n.lineno}")
    return sorted(fields), sorted(set(where))


def _is_none_test(test: ast.AST, params: set[str], fld: str) -> bool:
    """``spec.<fld> is None`` (alone or as a conjunct of an ``and``)."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    for p in parts:
        if (isinstance(p, ast.Compare) and len(p.ops) == 1 and isinstance(p.ops[0], ast.Is)
                and isinstance(p.comparators[0], ast.Constant) and p.comparators[0].value is None):
            r, chain = _root(p.left)
            if r in params and chain == [fld]:
                return True
    return False


def filled_when_none(files: dict[str, str], fields: list[str]) -> list[str]:
    """Of ``fields`` (speculator_effects), those every speculator module stores only as ``spec.<field> = ...`` inside
    ``if spec.<field> is None:`` (a default filled in, never a given value replaced: 0.34.0 suffix/config.py:26-28,
    dspark/config.py:80-85, speculator_config.py:280-282 for num_speculative_tokens), and nothing else touches
    (no store through a local, no call or method through it, no SpeculativeConfig method storing it)."""
    mods = {p: t for p, t in files.items() if p.startswith(SPEC_DIR) and p.endswith("config.py")}
    ok = set(fields)
    for p, t in sorted(mods.items()):
        tree = ast.parse(t)
        parent: dict[int, ast.AST] = {}
        for n in ast.walk(tree):
            for c in ast.iter_child_nodes(n):
                parent[id(c)] = n
        for f in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            params = {a.arg for a in f.args.args + f.args.kwonlyargs if a.arg in ("spec", "spec_config")
                      or "SpeculativeConfig" in ast.unparse(a.annotation or ast.Constant(""))}
            if not params:
                continue
            for n in ast.walk(f):
                for fld in sorted(ok):
                    mention = any(isinstance(x, ast.Attribute) and x.attr == fld and _root(x)[0] in params
                                  and _root(x)[1] == [fld] for x in ast.walk(n)) if isinstance(n, ast.stmt) else False
                    if not mention:
                        continue
                    stores = (n.targets if isinstance(n, ast.Assign)
                              else [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For)) else [])
                    hit = [e for s in stores for e in (s.elts if isinstance(s, ast.Tuple) else [s])
                           if _root(e)[0] in params and _root(e)[1][:1] == [fld]]
                    if not hit:
                        continue
                    if not isinstance(n, ast.Assign) or any(_root(e)[1] != [fld] for e in hit):
                        ok.discard(fld)  # an augmented / nested store, or a loop target
                        continue
                    up, guarded = parent.get(id(n)), False
                    child: ast.AST = n
                    while up is not None and up is not f:
                        if isinstance(up, ast.If) and child in up.body and _is_none_test(up.test, params, fld):
                            guarded = True
                            break
                        child, up = up, parent.get(id(up))
                    if not guarded:
                        ok.discard(fld)
            for n in ast.walk(f):
                if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
                    continue
                r, chain = _root(n.func.value)
                if r in params and chain:  # a method called through the field: not a plain fill
                    ok.discard(chain[0])
                elif r in params:  # a SpeculativeConfig method (spec.update_arch_()): what it stores on self
                    own = self_stores(files, n.func.attr)
                    ok -= own if own is not None else set(ok)
    return sorted(ok)


BASE_CONFIG = SPEC_DIR + "speculator_config.py"
VARIES = object()  # a class attribute that differs between the classes a method may end with, or is not a literal


def _literal(v: ast.AST) -> Any:
    """A class attribute's literal value (``frozenset({...})`` of strings as the sorted tuple ``in`` reads)."""
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in ("frozenset", "set") \
            and not v.keywords and len(v.args) <= 1:
        items = ast.literal_eval(v.args[0]) if v.args else ()
        if all(isinstance(x, str) for x in items):
            return tuple(sorted(items))
        raise ValueError("not strings")
    got = ast.literal_eval(v)
    if isinstance(got, (bool, int, str)) or got is None:
        return got
    raise ValueError("not a scalar")


def speculator_class_attrs(files: dict[str, str]) -> dict[str, dict[str, Any]] | None:
    """method -> {class attribute -> value} of the speculator config class a built-in method ends with: the class
    ``_CONFIG_BY_METHOD`` names (v1/worker/gpu/spec_decode/speculator_config.py:298-311 at 0.34.0), or the subclass
    the draft checkpoint declares (``get_speculator_config_class``: used only when a subclass of it, :375-385) or
    ``specialize`` returns (mtp/config.py:32-40). An attribute is given only where every class of the method's
    subclass tree (all classes of the speculator config modules, read with ``ast``) binds it to the same literal;
    VARIES otherwise. None when the release has no such table or a class name is defined twice."""
    mods = {p: t for p, t in files.items() if p.startswith(SPEC_DIR) and p.endswith("config.py")}
    if BASE_CONFIG not in mods:
        return None
    classes: dict[str, ast.ClassDef] = {}
    table: dict[str, str] = {}
    for p, t in sorted(mods.items()):
        tree = ast.parse(t)
        for c in tree.body:
            if isinstance(c, ast.ClassDef):
                if c.name in classes:
                    return None
                classes[c.name] = c
        if p == BASE_CONFIG:
            for n in tree.body:
                tgt = n.target if isinstance(n, ast.AnnAssign) else n.targets[0] if isinstance(n, ast.Assign) else None
                if isinstance(tgt, ast.Name) and tgt.id == "_CONFIG_BY_METHOD" and isinstance(n.value, ast.Dict):
                    for k, v in zip(n.value.keys, n.value.values):
                        if (isinstance(k, ast.Constant) and isinstance(v, ast.Call) and len(v.args) == 2
                                and isinstance(v.args[1], ast.Constant)):
                            table[k.value] = v.args[1].value
    if not table or "SpeculatorConfig" not in classes:
        return None
    bases = {n: [b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in c.bases] for n, c in classes.items()}

    def mro(name: str) -> list[str] | None:  # single inheritance chains only (every class here has one base)
        out = []
        while name in classes:
            out.append(name)
            if len(bases[name]) != 1:
                return out if not bases[name] else None
            name = bases[name][0]
        return out if name in ("object",) or not out or out[-1] == "SpeculatorConfig" else None

    def attr(name: str, a: str) -> Any:
        chain = mro(name)
        if chain is None:
            return VARIES
        for c in chain:
            for st in classes[c].body:
                tgt = st.targets[0] if isinstance(st, ast.Assign) and len(st.targets) == 1 else \
                    st.target if isinstance(st, ast.AnnAssign) and st.value is not None else None
                if isinstance(tgt, ast.Name) and tgt.id == a:
                    try:
                        return _literal(st.value)
                    except (ValueError, SyntaxError, TypeError):
                        return VARIES
                if isinstance(st, ast.FunctionDef) and st.name == a:
                    return VARIES
        return VARIES
    names = set()
    for st in classes["SpeculatorConfig"].body:
        tgt = st.target if isinstance(st, ast.AnnAssign) and st.value is not None else None
        if isinstance(tgt, ast.Name) and "ClassVar" in ast.unparse(st.annotation):
            names.add(tgt.id)
    out: dict[str, dict[str, Any]] = {}
    for method, root in table.items():
        if root not in classes:
            continue
        tree = {root}
        while True:  # every subclass, transitively
            more = {n for n, bs in bases.items() if n not in tree and any(b in tree for b in bs)}
            if not more:
                break
            tree |= more
        vals = {}
        for a in sorted(names):
            got = {repr(attr(c, a)) if attr(c, a) is not VARIES else "VARIES" for c in tree}
            vals[a] = attr(root, a) if len(got) == 1 and "VARIES" not in got else VARIES
        out[method] = vals
    return out


if __name__ == "__main__":
    import sys
    import zipfile
    with zipfile.ZipFile(sys.argv[1]) as z:
        fs = {n: z.read(n).decode() for n in z.namelist()
              if (n.startswith(SPEC_DIR) and n.endswith(".py")) or n == SPEC_CONFIG}
    got: Any = speculator_effects(fs)
    print(got if got is None else got[0])
