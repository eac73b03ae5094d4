"""List every startup check site (``raise`` / ``assert``) of the training frameworks' pinned releases and say,
for each, what covers it: an optkg rule, nothing because it cannot be known before the job starts (and why), or
nothing yet (the facts it reads). Writes one table per release beside the framework's package
(``kg/frameworks/<name>/checks/<package>-<release>.yaml``) and the page ``docs/training-checks.md``.

Run (sources outside the repo: ``pip download <pkg>==X --no-deps -d /work/wheels``; Megatron-LM's
``megatron/training`` at its tag via ``git archive``)::

    python tools/training_check_sites.py --wheel-dir /work/wheels --megatron-lm-dir /work/dl/megatron-lm-core_v0.16.1

The files per release are the ones issue 28 counts (config construction, validation, parallel setup). Every
site is kept: a site is "not knowable before start" only when what it tests is run-time state, named by the
first matching entry of ``RUNTIME`` (the reason is written into the table); otherwise it is knowable, and it
is covered when a training rule's evidence points at it (same package, release and file, within its statement).
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# where each release's source is published: {path} and {line} are filled per site
SOURCE_URLS = {
    ("megatron-core", "0.16.1"): "https://github.com/NVIDIA/Megatron-LM/blob/core_v0.16.1/{path}#L{line}",
    ("megatron-lm", "core_v0.16.1"): "https://github.com/NVIDIA/Megatron-LM/blob/core_v0.16.1/{path}#L{line}",
    ("deepspeed", "0.19.8"): "https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/{path}#L{line}",
    ("torchtitan", "0.3.0"): "https://github.com/pytorch/torchtitan/blob/v0.3.0/{path}#L{line}",
    ("transformers", "5.24.0"): "https://github.com/huggingface/transformers/blob/v5.24.0/src/{path}#L{line}",
    ("accelerate", "1.15.0"): "https://github.com/huggingface/accelerate/blob/v1.15.0/src/{path}#L{line}",
    ("trl", "1.16.0"): "https://github.com/huggingface/trl/blob/v1.16.0/{path}#L{line}",
}
# (framework package, distribution, release, archive kind, archive name, files/folders scanned)
SCOPES = [
    ("megatron", "megatron-core", "0.16.1", "wheel", "megatron_core-0.16.1-*.whl",
     ["megatron/core/transformer/transformer_config.py", "megatron/core/model_parallel_config.py",
      "megatron/core/distributed/", "megatron/core/optimizer/"]),
    ("megatron", "megatron-lm", "core_v0.16.1", "dir", "megatron-lm", ["megatron/training/arguments.py"]),
    ("deepspeed", "deepspeed", "0.19.8", "sdist", "deepspeed-0.19.8.tar.gz",
     ["deepspeed/runtime/config.py", "deepspeed/runtime/zero/", "deepspeed/runtime/engine.py", "deepspeed/runtime/pipe/"]),
    ("torchtitan", "torchtitan", "0.3.0", "wheel", "torchtitan-0.3.0-*.whl",
     ["torchtitan/config/", "torchtitan/distributed/parallel_dims.py", "torchtitan/trainer.py",
      "torchtitan/components/quantization/float8.py"]),
    ("hf_trainer", "transformers", "5.24.0", "wheel", "transformers-5.24.0-*.whl", ["transformers/training_args.py"]),
    ("hf_trainer", "accelerate", "1.15.0", "wheel", "accelerate-1.15.0-*.whl", ["accelerate/utils/dataclasses.py"]),
    ("trl", "trl", "1.16.0", "wheel", "trl-1.16.0-*.whl", ["trl/trainer/grpo_config.py"]),
]

# Why a site cannot be known before the job starts: (regex over the enclosing function's name and the site's
# condition and message, reason). First match wins; a site matching none is knowable from the job's settings.
RUNTIME: list[tuple[str, str]] = [
    (r"\bdef:(forward|backward|step|_step|zero_grad|train_batch|eval_batch|_exec_\w+|_aggregate_total_loss|"
     r"allreduce\w*|_?reduce\w*|all_gather\w*|_?all_to_all\w*|start_grad_sync|finish_grad_sync|start_param_sync|"
     r"finish_param_sync|register_grad_ready|_make_\w*hook\w*|\w*_hook|get_main_grads\w*|clip_grad\w*|"
     r"scale_loss|update|_update_\w+|prefetch\w*|fetch_sub_module|release_sub_module|_unflatten\w*|"
     r"_?partition\w*|_?gather\w*|_?get_\w*partition\w*|copy_\w+|_copy\w+|_release\w*|independent_gradient_\w+|"
     r"average_tensor|_optimizer_step|_take_model_step|_param_\w+|_?reset\w*|fused_\w+|offload\w*|reload\w*|"
     r"_?swap\w*|pipe_\w+|_?send\w*|_?recv\w*|_?exec\w*|get_\w+_grad\w*|_?assert_\w+|"
     r"\w*_grad\w*|\w*buffer\w*|\w*bucket\w*|\w*_flat\w*)\b",
     "runs inside a training / communication step, on tensors and buffers that exist only at run time"),
    (r"\bdef:(save_checkpoint|load_checkpoint|_?load_\w+|_save_\w+|\w*state_dict\w*|\w*checkpoint\w*|"
     r"_get_\w*ckpt\w*|_?restore\w*|\w*parameter_state\w*|sharded_\w+)\b",
     "checkpoint save / load: depends on files and state written at run time"),
    (r"\bqual:\S*(ParamAndGradBuffer|ParamAndGradBucketGroup|DataParallelBuffer|\w*Allocator|\w*Bucket\w*)\.|"
     r"\bdef:(_build_model_\w+|_init_optimizer_named_parameters|make_fsdp_dtensor|_get_fsdp_tensor_spec|"
     r"get_mem_alloc_context|_dtype_size)\b",
     "the framework's gradient / parameter buffers, built at run time from the model's parameters"),
    (r"\.(shape|numel\(|dtype|device|is_cuda|data_ptr|grad\b|requires_grad|storage|stride|size\(|nelement|"
     r"element_size|ds_\w+)|\btorch\.is_tensor|\bisinstance\([^,]+,\s*(torch\.)?(nn\.)?(Parameter|Tensor|Module)",
     "tests a tensor, parameter or module object the model builds at run time"),
    (r"\b(dist\.|torch\.distributed|get_rank|get_world_size|process_group|parallel_state\.|mpu\.|_group\b|"
     r"\bgroup\b|ProcessGroup|device_mesh|mesh\b|rank\b)", "reads process-group state created at run time"),
    (r"\b(HAVE_\w+|is_te_min_version|is_torch_min_version|get_te_version|is_\w+_available|torch\.cuda|"
     r"get_device_capability|importlib|version\.parse|packaging|ImportError|__version__|accelerator\.|"
     r"get_accelerator|has_cuda_capability|has_rocm_capability)",
     "depends on the installed packages or the device, not on the launch"),
    (r"\b(os\.environ|os\.path|os\.getenv|Path\(|open\(|exists\(|isfile|isdir|listdir|glob)",
     "reads files or environment variables of the machine it runs on"),
    (r"\braise\s+NotImplementedError\b|\bNotImplementedError\b", "an unimplemented code path (NotImplementedError)"),
    (r"^assert False\b|\bunreachable\b|\bshould not happen\b|\bshould never\b|\binternal\b",
     "an internal invariant of the framework's own objects"),
    (r"\b(optimizer|param_groups?|params\b|parameters\(\)|model\.|module\.|self\.model\b|self\.module\b|"
     r"named_parameters|client_optimizer|lr_scheduler|dataloader|training_data|callable)",
     "tests the model / optimizer / data objects the script passes in at run time"),
]


@dataclass
class Site:
    id: str
    path: str
    line: int
    function: str
    kind: str
    message: str
    condition: str
    status: str = ""
    covered_by: list[str] = field(default_factory=list)
    reason: str = ""
    expr: str = ""  # a generated row: the condition under which the site raises, over the release's argument names

    def to_dict(self) -> dict:
        d = {"id": self.id, "path": self.path, "line": self.line, "function": self.function, "kind": self.kind,
             "message": self.message[:200], "condition": self.condition[:200], "status": self.status}
        if self.covered_by:
            d["covered_by"] = self.covered_by
        if self.reason:
            d["reason"] = self.reason
        if self.expr:
            d["expr"] = self.expr
        return d


def _literal(node: ast.AST | None) -> str:
    """The message text of a raise / assert: its string literals (f-strings with their fields as {..})."""
    if node is None:
        return ""
    if isinstance(node, ast.Call):
        return " ".join(_literal(a) for a in node.args[:1]) or (node.func.id if isinstance(node.func, ast.Name) else "")
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{..}" for v in node.values)
    if isinstance(node, ast.BinOp):
        return _literal(node.left) + _literal(node.right)
    return ""


def scan_source(text: str, path: str, package: str) -> list[Site]:
    """Every ``raise`` / ``assert`` of ``text`` with its function, message and guarding condition."""
    tree = ast.parse(text)
    out: list[Site] = []
    stem = re.sub(r"[^a-z0-9]+", "-", path.lower().removesuffix(".py")).strip("-")

    def visit(node: ast.AST, func: list[str], conds: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            visit_stmt(child, func, conds)

    def visit_stmt(s: ast.AST, func: list[str], conds: list[str]) -> None:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            visit(s, func + [s.name], [])
            return
        if isinstance(s, ast.If):
            test = ast.unparse(s.test)
            for x in s.body:
                visit_stmt(x, func, conds + [test])
            for x in s.orelse:
                visit_stmt(x, func, conds + [f"not ({test})"])
            return
        if isinstance(s, ast.Raise):
            exc = s.exc
            kind = (exc.func.id if isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name) else
                    exc.id if isinstance(exc, ast.Name) else "raise")
            out.append(Site(f"{package}-{stem}-{s.lineno}", path, s.lineno, ".".join(func) or "<module>",
                            f"raise {kind}", _literal(exc), " and ".join(conds[-2:])))
        elif isinstance(s, ast.Assert):
            out.append(Site(f"{package}-{stem}-{s.lineno}", path, s.lineno, ".".join(func) or "<module>", "assert",
                            _literal(s.msg), ast.unparse(s.test)))
        visit(s, func, conds)
    visit(tree, [], [])
    out.sort(key=lambda x: x.line)
    return out


def read_sources(kind: str, archive: Path, scanned: list[str]) -> dict[str, str]:
    """path -> text for every .py under ``scanned`` in the wheel / sdist / folder."""
    def wanted(p: str) -> bool:
        return p.endswith(".py") and any(p == s or (s.endswith("/") and p.startswith(s)) for s in scanned)
    out: dict[str, str] = {}
    if kind == "wheel":
        with zipfile.ZipFile(archive) as z:
            for n in z.namelist():
                if wanted(n):
                    out[n] = z.read(n).decode("utf-8")
    elif kind == "sdist":
        with tarfile.open(archive) as t:
            for m in t.getmembers():
                rel = m.name.split("/", 1)[1] if "/" in m.name else m.name
                if m.isfile() and wanted(rel):
                    out[rel] = t.extractfile(m).read().decode("utf-8")
    else:
        for f in sorted(archive.rglob("*.py")):
            rel = f.relative_to(archive).as_posix()
            if wanted(rel):
                out[rel] = f.read_text(encoding="utf-8")
    return dict(sorted(out.items()))


def rule_evidence() -> dict[tuple[str, str, str], list[tuple[int, str]]]:
    """(package, release, path) -> [(line, rule id)] from every training rule's evidence."""
    from kg.engine.rules import load_rules
    rs, problems = load_rules("training")
    if problems:
        raise SystemExit(f"training rules do not load: {problems[0]}")
    out: dict[tuple[str, str, str], list[tuple[int, str]]] = {}
    for r in rs.rules:
        for e in r.evidence or []:
            if e.get("role") == "changed":
                continue
            out.setdefault((e["package"], str(e["release"]), e["path"]), []).append((int(e["line"]), r.id))
    return out


CLASSES = ROOT / "tools" / "training_check_classes.yaml"


def read_classes() -> list[dict]:
    """Sites classified by reading their code (tools/training_check_classes.yaml)."""
    import yaml
    return yaml.safe_load(CLASSES.read_text(encoding="utf-8")) or []


def _class_of(s: Site, package: str, classes: list[dict]) -> dict | None:
    for c in classes:
        if c["package"] != package or not s.path.startswith(c["path"]):
            continue
        if "function" in c and not re.search(c["function"], s.function):
            continue
        if "lines" in c and s.line not in c["lines"]:
            continue
        return c
    return None


def classify(sites: list[Site], text: str, package: str, release: str, evidence, classes: list[dict] = ()) -> None:
    lines = text.splitlines()
    for s in sites:
        rules = sorted({rid for ln, rid in evidence.get((package, release, s.path), []) if abs(ln - s.line) <= 4})
        if rules:
            s.status, s.covered_by = "rule", rules
            continue
        c = _class_of(s, package, classes)
        if c is not None:
            s.status, s.reason = c["status"], c["reason"]
            continue
        src = lines[s.line - 1].strip() if s.line - 1 < len(lines) else ""
        # what the check tests: its function, guarding condition and statement; the message only for the
        # "internal invariant" wording (messages mention modules and paths that are not run-time objects)
        hay = f"def:{s.function.split('.')[-1]} qual:{s.function}. {s.condition} {src}"
        for pattern, reason in RUNTIME:
            if re.search(pattern, hay + (f" {s.message}" if "invariant" in reason else "")):
                s.status, s.reason = "not_knowable", reason
                break
        else:
            names = sorted(set(re.findall(r"(?:self|args|config|cfg)\.(\w+)", s.condition)))[:6]
            s.status = "not_covered"
            s.reason = ("no optkg rule reads " + ", ".join(names)) if names else "no optkg rule for this check"


@dataclass
class Generated:
    """A framework's generated rows: (path, line) -> row, the lets the rows read, the input names a job can give
    (a row covers its site only when every input it reads is one of them), data files to write beside the package."""

    rows: dict[tuple[str, int], dict]
    lets: list[tuple[str, str]]
    known: Callable[[str], bool]
    data: dict[Path, str] = field(default_factory=dict)


def _tools():
    if str(ROOT / "tools") not in sys.path:
        sys.path.insert(0, str(ROOT / "tools"))


def megatron_generated(wheel_dir: Path, lm_dir: Path) -> Generated:
    """Megatron's mechanical checks over Megatron-LM argument names, and the release's argument table
    (tools/megatron_generated_checks.py)."""
    _tools()
    import checkgen as cg
    import megatron_generated_checks as g
    import yaml
    core = next(iter(sorted(wheel_dir.glob("megatron_core-0.16.1-*.whl"))))
    sources: dict[str, str] = {}
    with zipfile.ZipFile(core) as z:
        for n in z.namelist():
            if n.startswith("megatron/core/") and n.endswith(".py"):
                sources[n] = z.read(n).decode("utf-8")
    for f in sorted((lm_dir / "megatron" / "training").glob("*.py")):
        sources[f.relative_to(lm_dir).as_posix()] = f.read_text(encoding="utf-8")
    table = g.argument_table(sources)
    rows, lets, _opaque = g.generate(sources, table)
    dests = {v["dest"] for v in table.values()} | {"world_size", cg.UNK}
    argfile = ROOT / "kg" / "frameworks" / "megatron" / "data" / "arguments-core_v0.16.1.yaml"
    text = ("# Generated by tools/training_check_sites.py (do not edit): Megatron-LM core_v0.16.1's arguments\n"
            "# (megatron/training/arguments.py add_argument + the ArgumentGroupFactory dataclass fields of\n"
            "# megatron-core 0.16.1 / Megatron-LM): flag -> dest, kind, type, default.\n"
            + yaml.safe_dump(table, sort_keys=True, width=120))
    return Generated(rows, lets, lambda n: n in dests, {argfile: text})


def deepspeed_generated(wheel_dir: Path, lm_dir: Path) -> Generated:
    """DeepSpeed's mechanical checks over its JSON config keys (tools/deepspeed_generated_checks.py) and the
    defaults DeepSpeed reads absent keys with."""
    _tools()
    import checkgen as cg
    import deepspeed_generated_checks as g
    import yaml
    sdist = next(iter(sorted(wheel_dir.glob("deepspeed-0.19.8.tar.gz"))))
    sources = read_sources("sdist", sdist, ["deepspeed/"])
    rows, lets, defaults, _opaque = g.generate(sources)
    keyfile = ROOT / "kg" / "frameworks" / "deepspeed" / "data" / "config-defaults-0.19.8.yaml"
    text = ("# Generated by tools/training_check_sites.py (do not edit): the default deepspeed 0.19.8 reads each\n"
            "# config key with when the config does not have it (get_scalar_param defaults, pydantic field defaults).\n"
            + yaml.safe_dump(defaults, sort_keys=True, width=120))
    inputs = {"dp_world_size", cg.UNK}
    return Generated(rows, lets, lambda n: n in inputs or n.startswith(("ds__", "has__ds__")), {keyfile: text})


def _dataclass_generated(wheels: list[tuple[str, str]], files: list[str], cls: str, path: str, prefix: str,
                         datafile: Path, what: str) -> Generated:
    """An argument dataclass's __post_init__ checks over its fields (tools/dataclass_generated_checks.py)."""
    _tools()
    import checkgen as cg
    import dataclass_generated_checks as g
    import yaml
    sources: dict[str, str] = {}
    for wheel, kind in wheels:
        sources.update(read_sources(kind, Path(wheel), files))
    rows, lets, table, _opaque = g.generate(sources, cls, path, prefix)
    text = (f"# Generated by tools/training_check_sites.py (do not edit): {what}: field -> the type HfArgumentParser\n"
            "# converts it to and its literal default.\n" + yaml.safe_dump(table, sort_keys=True, width=120))
    inputs = {f"{prefix}__{f}" for f in table} | set(g.BINDINGS.values()) | {cg.UNK}
    return Generated(rows, lets, lambda n: n in inputs, {datafile: text})


def transformers_generated(wheel_dir: Path, lm_dir: Path) -> Generated:
    wheel = next(iter(sorted(wheel_dir.glob("transformers-5.24.0-*.whl"))))
    return _dataclass_generated([(str(wheel), "wheel")], ["transformers/training_args.py", "transformers/trainer_utils.py",
                                                          "transformers/utils/generic.py"],
                                "TrainingArguments", "transformers/training_args.py", "hf",
                                ROOT / "kg/frameworks/hf_trainer/data/training-arguments-5.24.0.yaml",
                                "transformers 5.24.0 TrainingArguments (training_args.py)")


def trl_generated(wheel_dir: Path, lm_dir: Path) -> Generated:
    tf = next(iter(sorted(wheel_dir.glob("transformers-5.24.0-*.whl"))))
    trl = next(iter(sorted(wheel_dir.glob("trl-1.16.0-*.whl"))))
    return _dataclass_generated([(str(tf), "wheel"), (str(trl), "wheel")],
                                ["transformers/training_args.py", "transformers/trainer_utils.py",
                                 "transformers/utils/generic.py", "trl/trainer/grpo_config.py",
                                 "trl/trainer/base_config.py"],
                                "GRPOConfig", "trl/trainer/grpo_config.py", "hf",
                                ROOT / "kg/frameworks/trl/data/grpo-config-1.16.0.yaml",
                                "trl 1.16.0 GRPOConfig (trl/trainer/grpo_config.py, over transformers 5.24.0)")


def torchtitan_generated(wheel_dir: Path, lm_dir: Path) -> Generated:
    """torchtitan's config-section and ParallelDims checks (tools/torchtitan_generated_checks.py)."""
    _tools()
    import checkgen as cg
    import torchtitan_generated_checks as g
    import yaml
    wheel = next(iter(sorted(wheel_dir.glob("torchtitan-0.3.0-*.whl"))))
    rows, lets, data, _opaque = g.generate(read_sources("wheel", wheel, ["torchtitan/"]))
    table = data["fields"]
    datafile = ROOT / "kg/frameworks/torchtitan/data/config-fields-0.3.0.yaml"
    text = ("# Generated by tools/training_check_sites.py (do not edit): torchtitan 0.3.0's Trainer.Config sections\n"
            "# (config/configs.py): section -> field -> type, literal default.\n" + yaml.safe_dump(table, sort_keys=True, width=120))
    regfile = ROOT / "kg/frameworks/torchtitan/data/config-registry-0.3.0.yaml"
    reg = ("# Generated by tools/training_check_sites.py (do not edit): torchtitan 0.3.0's config registry\n"
           "# (torchtitan/models/<module>/config_registry.py, selected by --module / --config): module -> config ->\n"
           "# section -> the fields it sets (__unknown__: not a literal in the source).\n"
           + yaml.safe_dump(data["registry"], sort_keys=True, width=120))
    inputs = {f"tt__{s}__{f}" for s, fs in table.items() for f in fs} | {"world_size", cg.UNK}
    return Generated(rows, lets, lambda n: n in inputs, {datafile: text, regfile: reg})


GENERATORS: dict[str, Callable[[Path, Path], Generated]] = {"megatron": megatron_generated,
                                                             "torchtitan": torchtitan_generated,
                                                             "deepspeed": deepspeed_generated,
                                                             "hf_trainer": transformers_generated,
                                                             "trl": trl_generated}


def build(wheel_dir: Path, megatron_lm_dir: Path | None) -> dict[str, dict]:
    """table name -> the table (package, release, scanned files, lets, sites)."""
    _tools()
    import checkgen as cg
    evidence = rule_evidence()
    classes = read_classes()
    generated = {fw: gen(wheel_dir, megatron_lm_dir) for fw, gen in GENERATORS.items()}
    for g in generated.values():
        for p, text in g.data.items():
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
    tables = {}
    for fw, package, release, kind, name, scanned in SCOPES:
        archive = megatron_lm_dir if kind == "dir" else next(iter(sorted(wheel_dir.glob(name))), None)
        if archive is None or not Path(archive).exists():
            raise SystemExit(f"{package} {release}: {name} not found (pip download {package}=={release} --no-deps)")
        gen = generated.get(fw)
        sites: list[Site] = []
        for path, text in read_sources(kind, Path(archive), scanned).items():
            found = scan_source(text, path, package)
            classify(found, text, package, release, evidence, classes)
            for x in found:
                row = gen.rows.get((x.path, x.line)) if gen else None
                # a row covers its site only when optkg can give every input it reads
                if row and x.status != "rule" and all(gen.known(n) for n in row["inputs"]):
                    x.status, x.reason, x.expr = "table", "", row["expr"]
            sites += found
        t = {"framework": fw, "package": package, "release": release, "scanned": scanned,
             "source_url": SOURCE_URLS[(package, release)]}
        if gen:
            used = {"r": {"names": sorted({n for s in sites if s.expr for n in cg.free_names(s.expr)})}}
            lets = cg.used_lets(used, gen.lets)
            if lets:
                t["lets"] = [{"name": n, "expr": e} for n, e in lets]
        t["sites"] = [s.to_dict() for s in sites]
        tables[f"{fw}/{package}-{release}"] = t
    return tables


def write(tables: dict[str, dict]) -> list[Path]:
    import yaml
    written = []
    for key, t in tables.items():
        fw, stem = key.split("/")
        p = ROOT / "kg" / "frameworks" / fw / "checks" / f"{stem}.yaml"
        p.parent.mkdir(parents=True, exist_ok=True)
        head = (f"# Generated by tools/training_check_sites.py from {t['package']} {t['release']} (do not edit): every\n"
                "# raise / assert in the scanned files, with what covers it (status: rule, table, not_knowable, script,\n"
                "# not_covered).\n")
        p.write_text(head + yaml.safe_dump(t, sort_keys=False, width=120, allow_unicode=True), encoding="utf-8")
        written.append(p)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheel-dir", type=Path, default=Path("/work/wheels"))
    ap.add_argument("--megatron-lm-dir", type=Path, default=Path("/work/dl/megatron-lm-core_v0.16.1"))
    a = ap.parse_args(argv)
    tables = build(a.wheel_dir, a.megatron_lm_dir)
    for p in write(tables):
        print(f"wrote {p.relative_to(ROOT)}")
    from kg.output.training_checks_doc import render
    doc = ROOT / "docs" / "training-checks.md"
    doc.write_text(render(), encoding="utf-8")
    print(f"wrote {doc.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
