"""Generated capability tables of vLLM, per release, where the engine's own code is a table.

Usage: python tools/engine_capabilities.py vllm RELEASE [ROOT]   (ROOT: the unpacked wheel, default
$OPTKG_DL_DIR/vllm-RELEASE/vllm). ``make onboard`` calls ``onboard``. Everything is read with ``ast`` (nothing
imported or run); each value cites path:line at the release.

- **speculative methods** whose drafter reads the target's hidden states (catalog/support/vllm-speculative-methods.yaml,
  fact ``spec_target_hidden_state_methods``): 0.34.0 ``SpeculatorConfig`` subclasses with ``uses_target_hidden_states
  = True`` (inherited) and their ``base_method``; before, the tuple of ``SpeculativeConfig.use_eagle()``;
- **quantisation methods** (catalog/support/vllm-quantization-capability.yaml): per ``QuantizationConfig`` subclass
  its ``get_name()`` and the literal of ``get_min_capability()`` (facts ``quant_min_capability``: {name: 75, ...});
- **attention backends** (catalog/support/vllm-attention-backends.yaml): per backend class (``get_name()``) the
  declared ``supported_dtypes``, ``supported_kv_cache_dtypes``, ``is_mla``, ``is_sparse``, ``supports_sink``,
  ``get_supported_kernel_block_sizes`` literals and ``supports_compute_capability`` as a condition on the GPU's
  compute capability (``cc``, e.g. ``cc >= 8.0``), inherited through the class hierarchy; a method whose body is
  not a literal / a capability comparison is recorded as ``depends`` (the selector decides at run time);
- **pipeline parallelism / EAGLE-3 targets** (catalog/support/vllm-pipeline-parallel.yaml, vllm-eagle3-targets.yaml):
  tools/vllm_pp_support.py for the release, appended when the set differs from the newest listed entry.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SUPPORT = ROOT / "catalog" / "support"


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, OSError):
        return None


def _classes(folder: Path, base: Path) -> dict[str, tuple[ast.ClassDef, str]]:
    """{class name: (node, path relative to the wheel)} of every class under ``folder`` (first definition wins)."""
    out: dict[str, tuple[ast.ClassDef, str]] = {}
    files = sorted(folder.rglob("*.py")) if folder.is_dir() else ([folder] if folder.is_file() else [])
    for f in files:
        tree = _parse(f)
        if tree is None:
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, (node, str(f.relative_to(base))))
    return out


def _bases(node: ast.ClassDef) -> list[str]:
    sys.path.insert(0, str(ROOT / "tools"))
    from vllm_pp_support import base_names
    return base_names(node)


def _member(cls: str, name: str, classes: dict[str, tuple[ast.ClassDef, str]], seen: set[str] | None = None
            ) -> tuple[ast.AST, str, str] | None:
    """(the statement defining ``name`` in ``cls`` or its nearest base, the defining class, its path)."""
    seen = seen or set()
    if cls in seen or cls not in classes:
        return None
    seen.add(cls)
    node, path = classes[cls]
    for st in node.body:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and st.name == name:
            return st, cls, path
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.target.id == name and st.value:
            return st, cls, path
        if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in st.targets):
            return st, cls, path
    for b in _bases(node):
        got = _member(b, name, classes, seen)
        if got:
            return got
    return None


def _inherits(cls: str, base: str, classes: dict[str, tuple[ast.ClassDef, str]], seen: set[str] | None = None) -> bool:
    """``cls`` derives from ``base`` (through the classes read)."""
    seen = seen or set()
    if cls in seen or cls not in classes:
        return False
    seen.add(cls)
    return any(b == base or _inherits(b, base, classes, seen) for b in _bases(classes[cls][0]))


def _literal(node: ast.AST) -> Any:
    """A literal value; ``torch.float16`` -> 'float16'; ``MultipleOf(16)`` -> 'multiple of 16'; else raises."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return node.attr
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "MultipleOf" and node.args:
        return f"multiple of {ast.literal_eval(node.args[0])}"
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [_literal(e) for e in node.elts]
    return ast.literal_eval(node)


def _value(st: ast.AST) -> Any:
    """The literal a class attribute holds or a method returns on its only statement; ValueError otherwise."""
    if isinstance(st, (ast.AnnAssign, ast.Assign)):
        return _literal(st.value)
    body = [b for b in st.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
    if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
        return _literal(body[0].value)
    raise ValueError("not a literal")


_CC = re.compile(r"^DeviceCapability\((\d+),\s*(\d+)\)$")


def _cc_condition(fn: ast.FunctionDef) -> str:
    """``supports_compute_capability`` as a condition on ``cc`` (8.0, 9.0, 10.0 ...), or 'depends: <source>'."""
    body = [b for b in fn.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return "depends: " + " ".join(ast.unparse(fn).split())[:160]
    arg = fn.args.args[-1].arg if fn.args.args else "capability"

    def tr(n: ast.AST) -> str:
        if isinstance(n, ast.Constant) and isinstance(n.value, bool):
            return str(n.value)
        if isinstance(n, ast.BoolOp):
            return "(" + (" and " if isinstance(n.op, ast.And) else " or ").join(tr(v) for v in n.values) + ")"
        if isinstance(n, ast.Compare) and len(n.ops) == 1:
            left, right = ast.unparse(n.left), ast.unparse(n.comparators[0])
            op = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
                  ast.In: "in", ast.NotIn: "not in"}[type(n.ops[0])]
            m = _CC.match(right)
            if left == arg and m:
                return f"cc {op} {m.group(1)}.{m.group(2)}"
            if left == f"{arg}.major" and re.fullmatch(r"\d+", right):
                return f"cc_major {op} {right}"
            if left == f"{arg}.major" and isinstance(n.comparators[0], (ast.Tuple, ast.List, ast.Set)):
                return f"cc_major {op} {right.replace('{', '(').replace('}', ')')}"
            if left == f"({arg}.major, {arg}.minor)" and isinstance(n.comparators[0], (ast.Tuple, ast.List, ast.Set)):
                pairs = [ast.literal_eval(e) for e in n.comparators[0].elts]
                return f"cc {op} (" + ", ".join(f"{a}.{b}" for a, b in pairs) + ")"
            if left == f"{arg}.to_int()" and re.fullmatch(r"\d+", right):
                return f"cc {op} {int(right) // 10}.{int(right) % 10}"
        raise ValueError(ast.unparse(n))
    try:
        return tr(body[0].value)
    except (ValueError, KeyError):
        return "depends: " + " ".join(ast.unparse(body[0].value).split())[:160]


ATTN_FIELDS = {"supported_dtypes": "dtypes", "supported_kv_cache_dtypes": "kv_cache_dtypes", "is_mla": "mla",
               "is_sparse": "sparse", "supports_sink": "sinks", "get_supported_kernel_block_sizes": "block_sizes",
               "get_supported_head_sizes": "head_sizes"}


def attention_backends(root: Path) -> dict[str, Any]:
    """{backend name: {field: value, ..., source: path:line}} of the attention backend classes of one release."""
    base = root.parent
    folders = [root / "v1" / "attention", root / "attention", root / "model_executor" / "layers" / "attention"]
    classes: dict[str, tuple[ast.ClassDef, str]] = {}
    for f in folders:
        for k, v in _classes(f, base).items():
            classes.setdefault(k, v)
    out: dict[str, Any] = {}
    # CUDA classes first: ROCm / XPU / CPU variants may reuse a CUDA backend's name (rocm_aiter_fa: FLASH_ATTN)
    order = sorted(classes.items(), key=lambda kv: (bool(re.search(r"rocm|aiter|xpu|cpu|hpu|tpu", kv[1][1])), kv[0]))
    for cls, (node, path) in order:
        got = _member(cls, "get_name", classes)
        if not got or not cls.endswith("Backend") or "/prefill/" in path:
            continue  # prefill-only helpers (mla/prefill/) are not selectable attention backends
        if got[1] != cls and got[1].endswith("Backend"):
            continue  # a subclass of a selectable backend answers its name; a private base's name (0.34.0
            # _FlashInferMLASparseBackendBase -> FlashInferMLASparseTRTLLMBackend: FLASHINFER_MLA_SPARSE) is kept
        try:
            name = _value(got[0])
        except ValueError:
            continue
        if not isinstance(name, str):
            continue
        if name in out and not _inherits(cls, out[name]["class"], classes):
            continue  # the most derived class that answers a name describes it (TritonMLABackend, not MLACommon)
        row: dict[str, Any] = {"class": cls, "source": f"{path}:{node.lineno}"}
        for member, key in ATTN_FIELDS.items():
            m = _member(cls, member, classes)
            if m is None:
                continue
            try:
                row[key] = _value(m[0])
            except (ValueError, SyntaxError, TypeError):
                row[key] = "depends"
        m = _member(cls, "supports_compute_capability", classes)
        if m is not None and isinstance(m[0], ast.FunctionDef):
            row["compute_capability"] = _cc_condition(m[0])
        impl = _member(cls, "get_impl_cls", classes)
        if impl is not None:
            try:
                impl_name = ast.unparse(impl[0].body[-1].value)
                lse = _member(impl_name, "can_return_lse_for_decode", classes)
                row["dcp_lse"] = bool(_value(lse[0])) if lse else False
            except (AttributeError, IndexError, ValueError, SyntaxError, TypeError):
                row["dcp_lse"] = "depends"
        out[name] = row
    return dict(sorted(out.items()))


def quantization_capability(root: Path) -> dict[str, Any]:
    """{method name: {min_capability, source}} of every QuantizationConfig subclass with literal get_name() and
    get_min_capability()."""
    qdir = root / "model_executor" / "layers" / "quantization"
    classes = _classes(qdir, root.parent)
    out: dict[str, Any] = {}
    for cls, (node, path) in sorted(classes.items()):
        name_m, cap_m = _member(cls, "get_name", classes), _member(cls, "get_min_capability", classes)
        if not name_m or not cap_m or name_m[1] != cls:
            continue
        try:
            name, cap = _value(name_m[0]), _value(cap_m[0])
        except (ValueError, SyntaxError, TypeError):
            continue
        if isinstance(name, str) and isinstance(cap, int) and not isinstance(cap, bool):
            out.setdefault(name, {"min_capability": round(cap / 10, 1), "source": f"{cap_m[2]}:{cap_m[0].lineno}"})
    return out


_DTYPE_NAMES = {"half": "float16", "float": "float32"}


def quantization_methods(root: Path) -> tuple[dict[str, Any], str]:
    """({method name: {min_capability, act_dtypes}}, source) of every ``--quantization`` name
    ``get_quantization_config`` maps to a class of the quantisation folder (its ``method_to_config`` dict, and the
    online shorthands it adds with ``setdefault``), where the class's ``get_min_capability()`` and
    ``get_supported_act_dtypes()`` are literals: what ``VllmConfig._get_quantization_config`` compares with the GPU and
    the model dtype. A name mapped to a class outside the folder (0.34.0 ``deepseek_v4_fp8``) is left out."""
    qdir = root / "model_executor" / "layers" / "quantization"
    classes = _classes(qdir, root.parent)
    tree = _parse(qdir / "__init__.py")
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "get_quantization_config"),
              None) if tree else None
    if fn is None:
        return {}, ""
    mapping: dict[str, str] = {}
    src = ""
    for n in ast.walk(fn):
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and isinstance(n.value, ast.Dict):
            tgt = n.targets[0] if isinstance(n, ast.Assign) else n.target
            if getattr(tgt, "id", "") != "method_to_config":
                continue
            src = f"vllm/model_executor/layers/quantization/__init__.py:{n.lineno} method_to_config"
            for k, v in zip(n.value.keys, n.value.values):
                if isinstance(k, ast.Constant) and isinstance(v, ast.Name):
                    mapping[k.value] = v.id
        if (isinstance(n, ast.For) and getattr(n.iter, "id", "") == "_ONLINE_SHORTHANDS" and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Call)
                and getattr(n.body[0].value.func, "attr", "") == "setdefault"):
            online = getattr(n.body[0].value.args[1], "id", "")
            qtree = _parse(root / "config" / "quantization.py")
            for q in ast.walk(qtree) if qtree else []:
                if (isinstance(q, (ast.Assign, ast.AnnAssign)) and isinstance(q.value, ast.Dict)
                        and getattr(q.targets[0] if isinstance(q, ast.Assign) else q.target, "id", "")
                        == "_ONLINE_SHORTHANDS"):
                    for k in q.value.keys:
                        if isinstance(k, ast.Constant):
                            mapping.setdefault(k.value, online)
    out: dict[str, Any] = {}
    online_cls = mapping.get("online")
    for method, cls in sorted(mapping.items()):
        cap_m, dt_m = _member(cls, "get_min_capability", classes), _member(cls, "get_supported_act_dtypes", classes)
        if not cap_m or not dt_m:
            continue
        try:
            cap, dts = _value(cap_m[0]), _value(dt_m[0])
        except (ValueError, SyntaxError, TypeError):
            continue
        if isinstance(cap, int) and not isinstance(cap, bool) and isinstance(dts, list):
            out[method] = {"min_capability": round(cap / 10, 1), "online": cls == online_cls,
                           "act_dtypes": [_DTYPE_NAMES.get(d, d) for d in dts]}
    return out, src


def quant_method_facts(methods: dict[str, Any], src: list[str]) -> dict[str, Any]:
    """The per-method facts of the quantisation capability file (kg.analyses.quantclass reads them)."""
    return {"method_source": src,
            "quant_method_min_capability": {k: v["min_capability"] for k, v in methods.items()},
            "quant_method_act_dtypes": {k: v["act_dtypes"] for k, v in methods.items()},
            "quant_online_methods": sorted(k for k, v in methods.items() if v["online"])}


def ct_scheme_capability(root: Path) -> dict[str, Any]:
    """{scheme class: {min_capability, source}} of every compressed-tensors scheme class whose
    ``get_min_capability()`` returns a literal (compressed_tensors.py ``_check_scheme_supported`` refuses a GPU below
    it: "Quantization scheme is not supported for the current GPU"); a scheme whose minimum depends on code (0.10.1
    W4A4 NVFP4: an environment switch) is left out."""
    sdir = root / "model_executor" / "layers" / "quantization" / "compressed_tensors" / "schemes"
    classes = _classes(sdir, root.parent)
    out: dict[str, Any] = {}
    for cls, (node, path) in sorted(classes.items()):
        cap_m = _member(cls, "get_min_capability", classes)
        if not cls.startswith("CompressedTensors") or not cap_m or cap_m[1] != cls:
            continue
        try:
            cap = _value(cap_m[0])
        except (ValueError, SyntaxError, TypeError):
            continue
        if isinstance(cap, int) and not isinstance(cap, bool):
            out[cls] = {"min_capability": round(cap / 10, 1), "source": f"{cap_m[2]}:{cap_m[0].lineno}"}
    return out


def speculative_methods(root: Path) -> tuple[list[str], str]:
    """(the speculative methods whose drafter reads the target's hidden states, source)."""
    spec = root / "v1" / "worker" / "gpu" / "spec_decode"
    classes = _classes(spec, root.parent)
    methods, src = set(), ""
    for cls, (node, path) in sorted(classes.items()):
        uses, bm = _member(cls, "uses_target_hidden_states", classes), _member(cls, "base_method", classes)
        if not uses or not bm or bm[1] != cls:
            continue
        try:
            if _value(uses[0]) is True:
                methods.add(_value(bm[0]))
                src = src or f"{uses[2]}:{uses[0].lineno} uses_target_hidden_states"
        except (ValueError, SyntaxError, TypeError):
            continue
    if methods:
        return sorted(methods), src
    tree = _parse(root / "config" / "speculative.py")
    for n in ast.walk(tree) if tree else []:
        if isinstance(n, ast.FunctionDef) and n.name == "use_eagle":
            for r in ast.walk(n):
                if isinstance(r, ast.Compare) and isinstance(r.comparators[0], ast.Tuple):
                    return sorted(_literal(r.comparators[0])), f"vllm/config/speculative.py:{n.lineno} use_eagle()"
    return [], ""


def _append_release(path: Path, release: str, entry: dict[str, Any], compare: list[str]) -> bool:
    """Append ``release: entry`` to a support file unless its newest entry has the same ``compare`` keys."""
    from packaging.version import Version
    data = yaml.safe_load(path.read_text()) if path.exists() else None
    if data is None:
        return False
    rels = data.get("releases") or {}
    if release in rels:
        return False
    older = [r for r in rels if Version(str(r)) < Version(release)]
    if older:
        last = rels[max(older, key=Version)]
        if all(last.get(k) == entry.get(k) for k in compare):
            return False
    text = path.read_text().rstrip("\n") + "\n" + f'  "{release}":\n'
    for k, v in entry.items():
        text += f"    {k}: " + yaml.safe_dump(v, default_flow_style=True, width=100_000, sort_keys=False).strip() + "\n"
    path.write_text(text)
    return True


def _new_file(path: Path, head: str, doc: dict[str, Any]) -> None:
    if not path.exists():
        path.write_text(head + yaml.safe_dump(doc, sort_keys=False, width=120).replace("releases: {}\n", "releases:\n"))


def onboard(engine: str, release: str, wheel: Path) -> list[str]:
    """Regenerate the capability tables of ``engine`` for ``release`` (its wheel unpacked by tools/onboard.py)."""
    if engine != "vllm":
        return [f"-- capability tables: none generated for {engine} yet"]
    import os
    root = Path(os.environ.get("OPTKG_DL_DIR") or "/work/dl") / f"vllm-{release}" / "vllm"
    return write_all(release, root)


# generated support files: (file, fact, head comment, description, what it lists per release)
TABLES = [
    ("vllm-speculative-methods.yaml", "spec_target_hidden_state_methods",
     "the vLLM speculative methods whose drafter\n# reads the target model's hidden states (EAGLE-style), per release. "
     "A stack on a release between two\n# listed ones gets the older entry (kg.knowledge.support).",
     "Speculative methods that read the target's hidden states, per vLLM release."),
    ("vllm-quantization-capability.yaml", "quant_min_capability",
     "each vLLM quantisation method's\n# get_min_capability() (compute capability x 10 in the source; here as 7.5, "
     "8.0, ...), per release.",
     "Minimum compute capability of each quantisation method, per vLLM release."),
    ("vllm-compressed-tensors-schemes.yaml", "ct_scheme_min_capability",
     "each compressed-tensors scheme\n# class's get_min_capability() (compute capability x 10 in the source; here "
     "as 7.5, 8.0, ...), per release;\n# compressed_tensors.py _check_scheme_supported refuses a GPU below it. A "
     "stack on a release between two\n# listed ones gets the older entry (kg.knowledge.support).",
     "Minimum compute capability of each compressed-tensors scheme, per vLLM release."),
    ("vllm-attention-backends.yaml", "attention_backends",
     "what each vLLM attention backend class\n# declares (dtypes, KV-cache dtypes, MLA, sparse, sinks, kernel block "
     "sizes, compute capability as a\n# condition on cc, decode LSE for DCP), per release; 'depends' = decided by "
     "code at run time.",
     "Attention backends and their declared support, per vLLM release."),
]


def _tables(root: Path) -> dict[str, tuple[Any, list[str]]]:
    """{fact: (value for the release, source lines)} of the three generated tables."""
    methods, src = speculative_methods(root)
    quant = quantization_capability(root)
    methods_q, qsrc = quantization_methods(root)
    ct = ct_scheme_capability(root)
    return {"ct_scheme_min_capability": ({k: v["min_capability"] for k, v in ct.items()},
                                         [f"{k} {v['source']}" for k, v in ct.items()]),
            "spec_target_hidden_state_methods": (methods, [src]),
            "quant_min_capability": ({k: v["min_capability"] for k, v in sorted(quant.items())},
                                     sorted({v["source"] for v in quant.values()})[:3]),
            "quant_methods": (methods_q, [qsrc]),
            "attention_backends": (attention_backends(root), [_validate_configuration_site(root)])}


def _validate_configuration_site(root: Path) -> str:
    """path:line of AttentionBackend.validate_configuration in the release (where the declared support is tested)."""
    rel = "v1/attention/backend.py"
    for n, line in enumerate((root / rel).read_text().splitlines(), 1):
        if line.strip().startswith("def validate_configuration("):
            return f"vllm/{rel}:{n} AttentionBackend.validate_configuration"
    raise SystemExit(f"vllm/{rel}: no validate_configuration (the attention-backend table needs a new reader)")


def write_all(release: str, root: Path) -> list[str]:
    lines = []
    values = _tables(root)
    for fname, fact, head, desc in TABLES:
        f = SUPPORT / fname
        _new_file(f, f"# GENERATED by tools/engine_capabilities.py (make onboard): {head}\n",
                  {"engine": "vllm", "description": desc, "facts": {fact: {"kind": "value"}}, "releases": {}})
        value, src = values[fact]
        entry = {"source": src, fact: value}
        if fact == "quant_min_capability":  # the same file: what each --quantization name's class declares
            entry.update(quant_method_facts(*values["quant_methods"]))
        if value and _append_release(f, release, entry, list(entry)[1:]):
            lines.append(f"-- {f.relative_to(ROOT)}: {release}: {len(value)} entries")
    sys.path.insert(0, str(ROOT / "tools"))
    import vllm_pp_support as pp
    for fname, key, fn in (("vllm-pipeline-parallel.yaml", "pp_architectures", lambda: pp.supports_pp(root)),
                           ("vllm-eagle3-targets.yaml", "eagle3_architectures",
                            lambda: pp.supports_interface(root, "SupportsEagle3"))):
        archs, src = fn()
        f = SUPPORT / fname
        if archs and _append_release(f, release, {"source": [src], key: archs}, [key]):
            lines.append(f"-- {f.relative_to(ROOT)}: {release}: {len(archs)} architectures")
    return lines or [f"-- capability tables: unchanged at {release}"]


def write_ct_schemes(release: str, root: Path) -> list[str]:
    """Only the compressed-tensors scheme table: releases whose wheels predate the other tables' readers (0.7-0.11)."""
    fname, fact, head, desc = next(t for t in TABLES if t[1] == "ct_scheme_min_capability")
    f = SUPPORT / fname
    _new_file(f, f"# GENERATED by tools/engine_capabilities.py (make onboard): {head}\n",
              {"engine": "vllm", "description": desc, "facts": {fact: {"kind": "value"}}, "releases": {}})
    ct = ct_scheme_capability(root)
    value = {k: v["min_capability"] for k, v in ct.items()}
    if value and _append_release(f, release, {"source": [f"{k} {v['source']}" for k, v in ct.items()], fact: value},
                                 [fact]):
        return [f"-- {f.relative_to(ROOT)}: {release}: {len(value)} entries"]
    return [f"-- {f.relative_to(ROOT)}: unchanged at {release}"]


if __name__ == "__main__":
    if sys.argv[1] == "vllm-ct-schemes":  # python tools/engine_capabilities.py vllm-ct-schemes RELEASE ROOT
        for line in write_ct_schemes(sys.argv[2], Path(sys.argv[3])):
            print(line)
        raise SystemExit(0)
    rel = sys.argv[2]
    r = Path(sys.argv[3]) if len(sys.argv) > 3 else Path(f"/work/dl/vllm-{rel}/vllm")
    for line in write_all(rel, r):
        print(line)
