"""Generate the startup checks of a framework's argument dataclass (transformers ``TrainingArguments``, TRL's
``GRPOConfig`` ...) as rows over its fields (used by tools/training_check_sites.py).

HfArgumentParser builds the dataclass from the script's flags / config file, and its ``__post_init__`` validates
them (TRL's configs call ``super().__post_init__()``: TrainingArguments' checks run too). The walk
(tools/checkgen.py) constructs the class with every field an input named ``<prefix>__<field>`` and walks
``__post_init__`` with the rewrites it makes. A property the checks read that is not a field (``world_size``: the
number of processes, from the launcher) is an input named in ``BINDINGS``; other properties are inlined when their
body translates (most read the device or torch.distributed and do not, leaving their checks not generated).

The field table (type, literal default) is written beside the rows: a job's namespace is the fields the job gives,
converted as HfArgumentParser converts them, then the defaults.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import checkgen as cg  # noqa: E402

# property -> input name: what the launch says about it (the process count is the launcher's --nproc_per_node x nodes)
BINDINGS = {"world_size": "world_size", "n_gpu": "n_gpu"}


def field_table(w: cg.Walker, cls: str, path: str) -> dict[str, dict[str, Any]]:
    """field -> {type, default} of the dataclass ``cls`` (and its dataclass bases), literal defaults only."""
    out: dict[str, dict[str, Any]] = {}
    for name, (node, fpath) in (w.dataclass_fields(cls, path) or {}).items():
        ann = _annotation(w, cls, path, name)
        entry: dict[str, Any] = {"type": ann}
        if node is not None:
            v = w.value_or_taint(node, cg.Frame(fpath, {}), [])
            if isinstance(v, cg.Expr) and not cg.free_names(v.text):
                try:
                    lit = ast.literal_eval(v.text)
                    entry["default"] = None if lit == cg.NONE else list(lit) if isinstance(lit, tuple) else lit
                except (ValueError, SyntaxError):
                    pass
        out[name] = entry
    return out


def _annotation(w: cg.Walker, cls: str, path: str, name: str) -> str:
    """The field's type as HfArgumentParser converts it: bool, int, float, list, str (everything else)."""
    seen = set()
    while cls and cls not in seen:
        seen.add(cls)
        hit = w.find_class(cls, path)
        if hit is None:
            break
        for s in hit[0].body:
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.target.id == name:
                text = ast.unparse(s.annotation).replace("Optional[", "").replace(" | None", "").replace("None | ", "")
                low = text.lower()
                if low.startswith(("list[", "tuple[")):
                    return "list"
                for t in ("bool", "int", "float"):
                    if low.startswith(t):
                        return t
                if low.startswith("union[") and "str" in low:
                    return "str"
                return "str"
        path = hit[1]
        cls = next((ast.unparse(b).split(".")[-1] for b in hit[0].bases), None)
    return "str"


def generate(sources: dict[str, str], cls: str, path: str, prefix: str) -> tuple[dict, list, dict, dict]:
    """Rows of ``cls(...).__post_init__`` over ``<prefix>__<field>`` inputs, the lets, the field table, the calls
    the walk did not model."""
    w = cg.Walker([cg.read_module(p, t) for p, t in sources.items()])
    table = field_table(w, cls, path)
    given = {f: cg.Expr(f"{prefix}__{f}") for f in table}
    env = {p: cg.Expr(n) for p, n in BINDINGS.items()}
    w.new_dataclass(cls, given, [], [], path, env=env)
    return cg.rows(w), w.lets, table, dict(sorted(w.opaque.items(), key=lambda x: -x[1]))
