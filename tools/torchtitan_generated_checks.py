"""Generate torchtitan's mechanical startup checks as rows over its config sections (used by
tools/training_check_sites.py).

torchtitan 0.3.0 builds ``Trainer.Config`` (trainer.py:95-175), whose sections are dataclasses (config/configs.py:
``TrainingConfig``, ``ParallelismConfig``, ``CompileConfig``, ``CommConfig``, ``DebugConfig``); each section's
``__post_init__`` runs when it is built, then ``Trainer.Config.__post_init__``; ``Trainer.__init__`` then builds
``ParallelDims.from_config(parallelism, world_size)`` (distributed/parallel_dims.py:153-176), whose ``_validate``
checks the degrees against the world size. The walk (tools/checkgen.py) builds each section with every field an
input ``tt__<section>__<field>`` (a job's TOML / ``--section.field`` overrides, else the field's default: the field
table written beside the rows), ``world_size`` from the launcher.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import checkgen as cg  # noqa: E402
import dataclass_generated_checks as dg  # noqa: E402

TRAINER = "torchtitan/trainer.py"
DIMS = "torchtitan/distributed/parallel_dims.py"


def _trainer_config(w: cg.Walker) -> ast.ClassDef:
    trainer = w.modules[TRAINER].classes["Trainer"]
    return next(s for s in trainer.body if isinstance(s, ast.ClassDef) and s.name == "Config")


def sections(w: cg.Walker) -> dict[str, tuple[str, str]]:
    """Trainer.Config field -> (section dataclass, its path) for the sections that are plain dataclasses."""
    out = {}
    for s in _trainer_config(w).body:
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and isinstance(s.annotation, ast.Name):
            hit = w.find_class(s.annotation.id, TRAINER)
            if hit is not None and w.dataclass_fields(hit[0].name, hit[1]) is not None:
                out[s.target.id] = (hit[0].name, hit[1])
    return out


def generate(sources: dict[str, str]) -> tuple[dict, list, dict, dict]:
    """Rows, lets, the field table {section: {field: {type, default}}}, the calls the walk did not model."""
    w = cg.Walker([cg.read_module(p, t) for p, t in sources.items()])
    w.modules[TRAINER].classes["Config"] = _trainer_config(w)  # the nested Trainer.Config, by its own name
    table: dict[str, dict[str, Any]] = {}
    built: dict[str, cg.Obj] = {}
    for sec, (cls, path) in sections(w).items():
        table[sec] = dg.field_table(w, cls, path)
        given = {f: cg.Expr(f"tt__{sec}__{f}") for f in table[sec]}
        built[sec] = w.new_dataclass(cls, given, [], [], path)
    cfg = cg.Obj("Trainer.Config", lambda a: built.get(a), "Config", path=TRAINER)
    post = next(s for s in _trainer_config(w).body if isinstance(s, ast.FunctionDef) and s.name == "__post_init__")
    w.invoke(post, TRAINER, cfg, [], {}, [], "Config")
    # Trainer.__init__: ParallelDims.from_config(job_config.parallelism, world_size)
    frm = w.find_method("ParallelDims", "from_config", DIMS)
    w.invoke(frm[0], frm[1], None, [cg.Expr("'ParallelDims'"), built["parallelism"], cg.Expr("world_size")], {}, [])
    reg = registry(sources, {sec: cls for sec, (cls, _) in sections(w).items()})
    return cg.rows(w), w.lets, {"fields": table, "registry": reg}, dict(sorted(w.opaque.items(), key=lambda x: -x[1]))


def registry(sources: dict[str, str], section_classes: dict[str, str]) -> dict[str, dict[str, dict]]:
    """torchtitan 0.3.0's config registry (``--module M --config C``: config/manager.py:47-90 imports
    ``torchtitan.models.M.config_registry`` and calls ``C()``): module -> config -> section -> {field: value} for the
    plain-dataclass sections each registry function passes to ``Trainer.Config(...)`` (directly or through a local);
    a value that is not a literal is ``__unknown__`` (a check reading it is not evaluated)."""
    out: dict[str, dict[str, dict]] = {}
    by_class = {c: s for s, c in section_classes.items()}
    for path, text in sorted(sources.items()):
        parts = path.split("/")
        if len(parts) != 4 or parts[:2] != ["torchtitan", "models"] or parts[3] != "config_registry.py":
            continue
        for fn in ast.parse(text).body:
            if not isinstance(fn, ast.FunctionDef):
                continue
            local_calls = {}
            for st in ast.walk(fn):
                if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) \
                        and isinstance(st.value, ast.Call):
                    local_calls[st.targets[0].id] = st.value
            call = next((n for n in ast.walk(fn) if isinstance(n, ast.Call)
                         and ast.unparse(n.func) in ("Trainer.Config", "Config")), None)
            if call is None:
                continue
            sections: dict[str, dict[str, Any]] = {}
            for k in call.keywords:
                v = local_calls.get(k.value.id) if isinstance(k.value, ast.Name) else k.value
                if k.arg == "activation_checkpoint":
                    sections["activation_checkpoint"] = {"mode": _ac_mode(v)}
                    continue
                if not isinstance(v, ast.Call) or ast.unparse(v.func) not in by_class:
                    continue
                sec = by_class[ast.unparse(v.func)]
                vals = {}
                for kw in v.keywords:
                    try:
                        vals[kw.arg] = ast.literal_eval(kw.value)
                    except (ValueError, SyntaxError):
                        vals[kw.arg] = cg.UNK
                sections[sec] = vals
            out.setdefault(parts[2], {})[fn.name] = sections
    return out


# torchtitan 0.3.0's activation-checkpointing classes (distributed/activation_checkpoint.py: FullAC :166,
# SelectiveAC :185 per-op, MemoryBudgetAC :290) as the 0.2.x TOML's activation_checkpoint.mode names them
AC_CLASSES = {"FullAC.Config": "full", "SelectiveAC.Config": "selective", "MemoryBudgetAC.Config": "memory_budget"}


def _ac_mode(v: ast.expr | None) -> str:
    """The mode a registry config's ``activation_checkpoint=`` gives: its class, ``none`` for None, else unknown."""
    if isinstance(v, ast.Constant) and v.value is None:
        return "none"
    if isinstance(v, ast.Call):
        return AC_CLASSES.get(ast.unparse(v.func), cg.UNK)
    return cg.UNK
