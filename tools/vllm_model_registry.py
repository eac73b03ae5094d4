"""vLLM's model registry per release, read from the released wheel with ``ast`` (nothing imported or run).

Usage: python tools/vllm_model_registry.py [WHEEL ...]   (default: every vllm wheel in /work/wheels)
Writes the wheels' releases into catalog/engines/models/vllm.yaml (other releases kept; generated, do not edit).

What vLLM does at start (read at 0.33.0 / 0.34.0, vllm/config/model.py ``ModelConfig.__post_init__`` and
vllm/model_executor/models/registry.py ``_ModelRegistry.inspect_model_cls``): the model's config.json
``architectures`` are looked up in the registry (``_VLLM_MODELS``: architecture -> (module, class); before 0.6 the
``_MODELS`` dict of vllm/model_executor/models/__init__.py); the first registered one gives the ``_ModelInfo``
(``_ModelInfo.from_model_cls``), whose facts are class attributes of the model class read through its MRO
(``supports_multimodal(model) = getattr(model, "supports_multimodal", False)`` ... in models/interfaces.py).
An architecture in no registry entry is refused ("Model architectures [...] are not supported for now") unless
the Transformers backend takes it (releases whose registry has ``_try_resolve_transformers``), which depends on
the installed transformers and is not knowable here.

Per release this writes:

- ``models``: architecture -> the registry.py line that registers it (the citation);
- ``facts``: for the _ModelInfo fields read here (``FLAGS``), the architectures where the field is True, and
  ``unknown``: the architectures whose class (or a base) could not be read statically (facts left out);
- ``transformers_fallback``: whether an unregistered architecture may still run through the Transformers backend;
- ``previously_supported``: architecture -> the last release that had it (the registry's own table);
- ``rewritten``: architectures and model types vLLM rewrites before the lookup (its own config classes,
  transformers_utils/config.py special cases, model_arch_config_convertor.py): facts are not given for them.
"""
from __future__ import annotations

import ast
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vllm_encoder_attn  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "catalog" / "engines" / "models" / "vllm.yaml"
MODELS = "vllm/model_executor/models/"
REGISTRY = MODELS + "registry.py"
OLD_REGISTRY = MODELS + "__init__.py"
# _ModelInfo fields that are ``getattr(model_cls, <attr>, False)`` (models/interfaces.py, interfaces_base.py at
# 0.34.0): field -> class attribute
FLAGS = {"supports_multimodal": "supports_multimodal",
         "supports_multimodal_raw_input_only": "supports_multimodal_raw_input_only",
         "requires_raw_input_tokens": "requires_raw_input_tokens",
         "supports_multimodal_encoder_tp_data": "supports_encoder_tp_data",
         "supports_hc_sp": "supports_hc_sp", "has_inner_state": "has_inner_state",
         "is_attention_free": "is_attention_free", "is_hybrid": "is_hybrid", "has_noops": "has_noops",
         "supports_replayssm": "supports_replayssm", "supports_transcription": "supports_transcription",
         "supports_mm_device_do_normalize": "supports_mm_device_do_normalize",
         "supports_lora": "supports_lora"}  # supports_lora: a runtime protocol (lora_support)
# _ModelInfo fields that are ``getattr(model_cls, <attr>, ())``, a tuple of strings (registry.py:1012-1014 at 0.34.0,
# :964-966 at 0.33.0; ModelConfig.__post_init__ refuses a --video-pruning-method not in it, config/model.py:903-914):
# field -> class attribute. Written as ``values``: architecture -> the tuple where it is not empty.
TUPLES = {"supported_video_pruning_methods": "supported_video_pruning_methods"}
# _ModelInfo fields read by derived_fact (ModelConfig.__post_init__ reads both, config/model.py:722-751 at 0.34.0):
# field -> (the shape of its function in models/interfaces_base.py that derived_fact models, the attribute read)
# not a _ModelInfo field: whether building the model class reaches the platform's check of --mm-encoder-attn-backend
# (tools/vllm_encoder_attn.py), written like a FLAGS field
ENCODER_ATTN = "builds_mm_encoder_attention"
DERIVED = {"is_pooling_model": ('return getattr(model, "is_pooling_model", False)', "is_pooling_model"),
           "is_text_generation_model": ('return callable(getattr(model, "compute_logits", None))', "compute_logits")}
# bases that add none of the attributes read here
TERMINAL = {"Module", "nn.Module", "torch.nn.Module", "Protocol", "Generic", "object", "ABC"}
# transformers_utils files that may rewrite config.json's architectures / model_type before the registry lookup
REWRITERS = ("vllm/transformers_utils/config.py", "vllm/transformers_utils/model_arch_config_convertor.py")
CONFIGS = "vllm/transformers_utils/configs/"


def _str_tuple(v: ast.AST) -> tuple[str, str] | None:
    if isinstance(v, ast.Tuple) and len(v.elts) >= 2 and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                                             for e in v.elts[:2]):
        return v.elts[0].value, v.elts[1].value
    return None


def registry_dicts(tree: ast.Module) -> dict[str, ast.Dict]:
    out = {}
    for n in tree.body:
        t = n.targets[0] if isinstance(n, ast.Assign) and len(n.targets) == 1 else \
            n.target if isinstance(n, ast.AnnAssign) else None
        if isinstance(t, ast.Name) and isinstance(n.value, ast.Dict):
            out[t.id] = n.value
    return out


def registered(files: dict[str, str]) -> tuple[dict[str, tuple[str, str, int]], str] | None:
    """architecture -> (module, class, line) of the release's registry and the file it is in."""
    for path, top in ((REGISTRY, "_VLLM_MODELS"), (OLD_REGISTRY, "_MODELS")):
        if path not in files:
            continue
        dicts = registry_dicts(ast.parse(files[path]))
        if top not in dicts:
            continue
        out: dict[str, tuple[str, str, int]] = {}

        def take(d: ast.Dict, depth: int = 0) -> None:
            for k, v in zip(d.keys, d.values):
                if k is None and isinstance(v, ast.Name) and v.id in dicts and depth < 4:
                    take(dicts[v.id], depth + 1)  # **_TEXT_GENERATION_MODELS
                elif isinstance(k, ast.Constant) and isinstance(k.value, str) and _str_tuple(v):
                    out[k.value] = (*_str_tuple(v), k.lineno)
        take(dicts[top])
        return out, path
    return None


def previously_supported(files: dict[str, str]) -> dict[str, str]:
    d = registry_dicts(ast.parse(files.get(REGISTRY, ""))).get("_PREVIOUSLY_SUPPORTED_MODELS")
    if d is None:
        return {}
    return {k.value: v.value for k, v in zip(d.keys, d.values)
            if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)}


class Classes:
    """Model classes of the release's model modules, resolved through imports."""

    def __init__(self, files: dict[str, str]):
        self.files = files
        self.trees: dict[str, ast.Module | None] = {}

    def tree(self, path: str) -> ast.Module | None:
        if path not in self.trees:
            try:
                self.trees[path] = ast.parse(self.files[path]) if path in self.files else None
            except SyntaxError:
                self.trees[path] = None
        return self.trees[path]

    def module_path(self, dotted: str) -> str | None:
        base = dotted.replace(".", "/")
        for cand in (f"{base}.py", f"{base}/__init__.py"):
            if cand in self.files:
                return cand
        return None

    def find(self, name: str, path: str, depth: int = 0) -> tuple[ast.ClassDef, str] | None:
        """The class ``name`` as module ``path`` sees it (defined there or imported)."""
        t = self.tree(path)
        if t is None or depth > 6:
            return None
        for n in t.body:
            if isinstance(n, ast.ClassDef) and n.name == name:
                return n, path
        for n in ast.walk(t):
            if isinstance(n, ast.ImportFrom):
                for a in n.names:
                    if (a.asname or a.name) != name:
                        continue
                    mod = vllm_encoder_attn.imported_module(n, path)
                    p = self.module_path(mod)
                    if p is not None:
                        return self.find(a.name, p, depth + 1)
                    sub = self.module_path(f"{mod}.{a.name}")
                    return None if sub is None else None
        return None

    def mro(self, cls: ast.ClassDef, path: str, depth: int = 0) -> list[tuple[ast.ClassDef, str]] | None:
        """The class's linearization (C3) over the classes read; None when a base cannot be read."""
        if depth > 30:
            return None
        seqs = []
        for b in cls.bases:
            if isinstance(b, ast.Subscript):
                b = b.value
            text = ast.unparse(b)
            if text in TERMINAL or text.split(".")[-1] in ("Module", "Protocol", "Generic"):
                continue
            if not isinstance(b, (ast.Name, ast.Attribute)):
                return None
            hit = self.find(b.id if isinstance(b, ast.Name) else b.attr, path)
            if hit is None:
                return None
            m = self.mro(hit[0], hit[1], depth + 1)
            if m is None:
                return None
            seqs.append(m)
        seqs.append([s[0] for s in seqs])  # the bases in order
        seqs = [list(s) for s in seqs if s]
        out = [(cls, path)]
        while seqs:
            for s in seqs:
                head = s[0]
                if not any(head in t[1:] for t in seqs):
                    break
            else:
                return None  # no consistent order (Python would refuse the class)
            out.append(head)
            seqs = [[x for x in t if x != head] for t in seqs]
            seqs = [t for t in seqs if t]
        return out


def class_attr(mro: list[tuple[ast.ClassDef, str]], attr: str) -> tuple[bool, Any]:
    """(read, value) of class attribute ``attr`` (first class of the MRO that assigns it; False when none does)."""
    for c, _ in mro:
        for s in c.body:
            tgt = s.targets[0] if isinstance(s, ast.Assign) and len(s.targets) == 1 else \
                s.target if isinstance(s, ast.AnnAssign) else None
            if isinstance(tgt, ast.Name) and tgt.id == attr:
                if s.value is None:
                    continue  # a bare annotation declares, assigns nothing
                try:
                    return True, ast.literal_eval(s.value)
                except (ValueError, SyntaxError):
                    return False, None
            if isinstance(s, ast.FunctionDef) and s.name == attr:
                return False, None
    return True, False


def has_attr(mro: list[tuple[ast.ClassDef, str]], attr: str) -> bool:
    """Some class of the MRO binds ``attr`` (an assignment, an annotated assignment or a method)."""
    for c, _ in mro:
        for s in c.body:
            tgt = s.targets[0] if isinstance(s, ast.Assign) and len(s.targets) == 1 else \
                s.target if isinstance(s, ast.AnnAssign) and s.value is not None else None
            if (isinstance(tgt, ast.Name) and tgt.id == attr) or (isinstance(s, ast.FunctionDef) and s.name == attr):
                return True
    return False


def _method(mro: list[tuple[ast.ClassDef, str]], name: str) -> ast.FunctionDef | None:
    """The first ``def name`` of the MRO (None: none, or the name is bound otherwise first)."""
    for c, _ in mro:
        for s in c.body:
            if isinstance(s, ast.FunctionDef) and s.name == name:
                return s
            tgt = s.targets[0] if isinstance(s, ast.Assign) and len(s.targets) == 1 else \
                s.target if isinstance(s, ast.AnnAssign) and s.value is not None else None
            if isinstance(tgt, ast.Name) and tgt.id == name:
                return None
    return None


def _takes(f: ast.FunctionDef, names: tuple[str, ...]) -> bool:
    """``supports_kw`` (utils/func_utils.py:99-119 at 0.34.0, allow_var_kwargs): every name is a parameter, or **kw."""
    params = {a.arg for a in f.args.args + f.args.kwonlyargs}
    return f.args.kwarg is not None or all(n in params for n in names)


def vllm_model(mro: list[tuple[ast.ClassDef, str]]) -> bool:
    """``is_vllm_model(model)`` (models/interfaces_base.py:64-116 at 0.34.0) confirmed from the source: ``__init__``
    takes ``vllm_config``, ``embed_input_ids`` is a method, ``forward`` takes ``input_ids`` and ``positions``. False
    means not confirmed (class decorators such as support_torch_compile rewrite __init__ at import): the two facts
    that depend on it are then not read."""
    init, fwd, emb = (_method(mro, n) for n in ("__init__", "forward", "embed_input_ids"))
    return (init is not None and fwd is not None and emb is not None and _takes(init, ("vllm_config",))
            and _takes(fwd, ("input_ids", "positions")))


def derived_fact(mro: list[tuple[ast.ClassDef, str]], field: str) -> tuple[bool, Any]:
    """(read, value) of a DERIVED field: ``is_pooling_model`` is ``is_vllm_model(m) and getattr(m,
    "is_pooling_model", False)`` (interfaces_base.py:226-232 at 0.34.0), ``is_text_generation_model`` is
    ``is_vllm_model(m) and callable(getattr(m, "compute_logits", None))`` (:140-147)."""
    if not vllm_model(mro):
        return False, None
    if field == "is_pooling_model":
        return class_attr(mro, "is_pooling_model")
    if _method(mro, "compute_logits") is not None:
        return True, True
    return (True, False) if not has_attr(mro, "compute_logits") else (False, None)


def lora_support(mro: list[tuple[ast.ClassDef, str]]) -> tuple[bool, Any]:
    """``supports_lora(model)`` (models/interfaces.py:759-794 at 0.34.0): ``isinstance(model, _SupportsLoRAType)``, a
    runtime protocol whose members (supports_lora, packed_modules_mapping, embedding_modules) must all be attributes
    of the class. (read, value); a class with ``supports_lora`` bound to something other than True is not read."""
    members = [has_attr(mro, a) for a in ("supports_lora", "packed_modules_mapping", "embedding_modules")]
    if not members[0]:
        return True, False
    ok, v = class_attr(mro, "supports_lora")
    if not ok or v is not True:
        return False, None
    return True, all(members)


def decorators_set(files: dict[str, str], attrs: set[str]) -> set[str]:
    """Functions of models/interfaces*.py that assign one of ``attrs`` on the class they decorate."""
    out = set()
    for p in (MODELS + "interfaces.py", MODELS + "interfaces_base.py"):
        try:
            t = ast.parse(files.get(p, ""))
        except SyntaxError:
            continue
        for f in t.body:
            if not isinstance(f, ast.FunctionDef):
                continue
            for n in ast.walk(f):
                if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and n.attr in attrs:
                    out.add(f.name)
                if (isinstance(n, ast.Call) and ast.unparse(n.func) == "setattr" and len(n.args) >= 2
                        and (not isinstance(n.args[1], ast.Constant) or n.args[1].value in attrs)):
                    out.add(f.name)
    return out


def rewritten(files: dict[str, str]) -> tuple[list[str], list[str]]:
    """(architectures, model types) whose config.json ``architectures`` vLLM may rewrite before the registry lookup:
    every architecture-like string literal of model_arch_config_convertor.py (it compares and assigns them); the
    model types of vLLM's own config classes (transformers_utils/configs/) whose class assigns ``architectures``;
    the model types transformers_utils/config.py special-cases in a branch that touches ``architectures``."""
    archs: set[str] = set()
    types: set[str] = set()
    for p, text in files.items():
        if not p.endswith(".py") or not (p in REWRITERS or p.startswith(CONFIGS)):
            continue
        try:
            t = ast.parse(text)
        except SyntaxError:
            continue
        if p == REWRITERS[1]:
            archs |= {n.value for n in ast.walk(t) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                      and re.fullmatch(r"[A-Z]\w+", n.value)}
        elif p == REWRITERS[0]:
            for n in ast.walk(t):
                if (isinstance(n, ast.If) and "model_type" in ast.unparse(n.test)
                        and "architectures" in "".join(ast.unparse(b) for b in n.body)):
                    types |= {e.value for e in ast.walk(n.test) if isinstance(e, ast.Constant)
                              and isinstance(e.value, str)}
        else:
            for c in ast.walk(t):
                if isinstance(c, ast.ClassDef) and "architectures" in ast.unparse(c):
                    types |= {st.value.value for st in c.body if isinstance(st, ast.Assign)
                              and any(getattr(x, "id", "") == "model_type" for x in st.targets)
                              and isinstance(st.value, ast.Constant) and isinstance(st.value.value, str)}
    return sorted(archs), sorted(types)


def checked_fields(files: dict[str, str]) -> set[str]:
    """The FLAGS fields whose reading at this release is the one modelled here: the interface function is
    ``return getattr(model, "<attr>", False)`` (models/interfaces.py), ``supports_lora`` is the runtime protocol
    check of ``lora_support``, ``supports_mm_device_do_normalize`` is read by getattr in registry.py."""
    out = set()
    try:
        t = ast.parse(files.get(MODELS + "interfaces.py", ""))
    except SyntaxError:
        return out
    funcs = {f.name: f for f in t.body if isinstance(f, ast.FunctionDef)}
    classes = {c.name: c for c in t.body if isinstance(c, ast.ClassDef)}
    for field, attr in FLAGS.items():
        f = funcs.get(field)
        ret = [n for n in ast.walk(f) if isinstance(n, ast.Return)] if f else []
        if len(ret) == 1 and ast.unparse(ret[0].value) == f"getattr(model, {attr!r}, False)":
            out.add(field)
    lora = funcs.get("_supports_lora")
    proto = classes.get("_SupportsLoRAType")
    if (lora is not None and "isinstance(model, _SupportsLoRAType)" in ast.unparse(lora) and proto is not None
            and sorted(s.target.id for s in proto.body if isinstance(s, ast.AnnAssign))
            == ["embedding_modules", "packed_modules_mapping", "supports_lora"]):
        out.add("supports_lora")
    if re.search(r"getattr\(\s*model,\s*\"supports_mm_device_do_normalize\",\s*False", files.get(REGISTRY, "")):
        out.add("supports_mm_device_do_normalize")
    for field, attr in TUPLES.items():
        if re.search(rf"{field}=getattr\(\s*model,\s*\"{attr}\",\s*\(\)\s*\)", files.get(REGISTRY, "")):
            out.add(field)
    try:
        base = {f.name: f for f in ast.parse(files.get(MODELS + "interfaces_base.py", "")).body
                if isinstance(f, ast.FunctionDef)}
    except SyntaxError:
        base = {}
    for field, (ret, _) in DERIVED.items():
        body = [ast.unparse(s) for s in base[field].body if not isinstance(s, ast.Expr)] if field in base else []
        if body == ["if not is_vllm_model(model):\n    return False", ret.replace('"', "'")]:
            out.add(field)
    return out


def read_release(wheel: Path) -> dict[str, Any]:
    with zipfile.ZipFile(wheel) as z:
        files = {n: z.read(n).decode("utf-8", "replace") for n in z.namelist()
                 if n.endswith(".py") and (n.startswith("vllm/model_executor/models/") or n.startswith("vllm/models/")
                                           or n.startswith("vllm/transformers_utils/")
                                           or n.startswith(vllm_encoder_attn.EXTRA))}
    got = registered(files)
    if got is None:
        raise SystemExit(f"{wheel.name}: no model registry found")
    reg, path = got
    classes = Classes(files)
    deco = decorators_set(files, set(FLAGS.values()) | {a for _, a in DERIVED.values()})
    true: dict[str, list[str]] = {f: [] for f in [*FLAGS, *DERIVED]}
    unknown: dict[str, list[str]] = {f: [] for f in [*FLAGS, *DERIVED, *TUPLES]}
    values: dict[str, dict[str, list[str]]] = {f: {} for f in TUPLES}
    resolved: dict[str, list[tuple[ast.ClassDef, str]] | None] = {}
    for arch, (mod, cls, _line) in sorted(reg.items()):
        key = (mod, cls)
        if key not in resolved:
            mp = classes.module_path(mod if mod.startswith("vllm.") else f"vllm.model_executor.models.{mod}")
            hit = classes.find(cls, mp) if mp else None
            m = classes.mro(*hit) if hit else None
            if m is not None and any(ast.unparse(d.func if isinstance(d, ast.Call) else d).split(".")[-1] in deco
                                     for c, _ in m for d in c.decorator_list):
                m = None
            resolved[key] = m
        m = resolved[key]
        for field, attr in FLAGS.items():
            ok, v = class_attr(m, attr) if m is not None else (False, None)
            if field == "supports_lora" and m is not None:
                ok, v = lora_support(m)
            if not ok:
                unknown[field].append(arch)
            elif v is True:
                true[field].append(arch)
        for field, attr in TUPLES.items():
            ok, v = class_attr(m, attr) if m is not None else (False, None)
            if ok and v is False:
                v = ()  # no class of the MRO assigns it: getattr's default
            if not ok or not isinstance(v, tuple) or not all(isinstance(x, str) for x in v):
                unknown[field].append(arch)
            elif v:
                values[field][arch] = list(v)
        for field in DERIVED:
            ok, v = derived_fact(m, field) if m is not None else (False, None)
            if not ok:
                unknown[field].append(arch)
            elif v is True:
                true[field].append(arch)
    checked = checked_fields(files)
    builds = encoder_attention(files, reg, classes)
    archs_rw, types_rw = rewritten(files)
    return {"source": f"{path}:{min(v[2] for v in reg.values())}",
            "models": {a: reg[a][2] for a in sorted(reg)},
            # the Transformers backend (models/transformers.py from 0.7.x, a package later) takes an unregistered
            # architecture when transformers has a compatible class (0.7.2 registry.py:353-395)
            "transformers_fallback": any(p.startswith(MODELS + "transformers") for p in files),
            "previously_supported": previously_supported(files),
            "rewritten_architectures": [a for a in archs_rw if a in reg],
            "rewritten_model_types": types_rw,
            "facts": {**{f: {"true": true[f], "unknown": unknown[f]} for f in [*FLAGS, *DERIVED] if f in checked},
                      **{f: {"values": values[f], "unknown": unknown[f]} for f in TUPLES if f in checked},
                      **({ENCODER_ATTN: builds} if builds else {})}}


def encoder_attention(files: dict[str, str], reg: dict[str, tuple[str, str, int]], classes: Classes
                      ) -> dict[str, list[str]] | None:
    """The ENCODER_ATTN fact (tools/vllm_encoder_attn.py): the architectures whose class builds an encoder attention
    that reads --mm-encoder-attn-backend, and those whose class (or a base) could not be read; None for a release
    whose models/vision.py does not pass the option to the platform the way read there."""
    if not vllm_encoder_attn.seed_ok(classes.tree(vllm_encoder_attn.VISION)):
        return None
    b = vllm_encoder_attn.Builds(classes, classes.mro)
    true, unknown = [], []
    for arch, (mod, cls, _line) in sorted(reg.items()):
        mp = classes.module_path(mod if mod.startswith("vllm.") else f"vllm.model_executor.models.{mod}")
        hit = classes.find(cls, mp) if mp else None
        m = classes.mro(*hit) if hit else None
        if m is None:
            unknown.append(arch)
        elif b.init_from(m, 0):
            true.append(arch)
    return {"true": true, "unknown": unknown}


def release_of(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def write(data: dict[str, dict[str, Any]]) -> None:
    from packaging.version import Version
    lines = ["# GENERATED by tools/vllm_model_registry.py from the released vllm wheels; do not edit by hand.",
             "# Per release: the architectures vLLM's model registry registers (architecture -> the line of `source`",
             "# that registers it), whether an unregistered one may still run through the Transformers backend,",
             "# the registry's own 'supported until' table, the architectures / model types vLLM rewrites before",
             "# the lookup, and per _ModelInfo field (models/interfaces.py: a class attribute read through the",
             "# model class's MRO) the architectures where it is true and those whose class could not be read.",
             "engine: vllm", "releases:"]
    import json
    for rel in sorted(data, key=Version):
        e = data[rel]
        lines.append(f'  "{rel}":')
        for k in ("source", "transformers_fallback"):
            lines.append(f"    {k}: {json.dumps(e[k])}")
        for k in ("models", "previously_supported", "rewritten_architectures", "rewritten_model_types"):
            lines.append(f"    {k}: {json.dumps(e[k], sort_keys=True)}")
        lines.append("    facts:")
        for f, v in (e.get("facts") or {}).items():
            lines.append(f"      {f}: {json.dumps(v)}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")


def main(argv: list[str]) -> int:
    wheels = [Path(a) for a in argv] or sorted(Path("/work/wheels").glob("vllm-*.whl"))
    import yaml
    data = (yaml.safe_load(OUT.read_text()) or {}).get("releases") or {} if OUT.exists() else {}  # others kept
    for w in wheels:
        data[release_of(w)] = read_release(w)
        e = data[release_of(w)]
        unk = len(set().union(*[set(v["unknown"]) for v in e["facts"].values()]))
        print(f"{release_of(w)}: {len(e['models'])} architectures, {unk} with facts not read", file=sys.stderr)
    write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
