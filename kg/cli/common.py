"""Helpers shared by commands: catalog/rules loading, stack input options, output writing."""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from kg.core.errors import OptkgError
from kg.core.lazyre import lazy_re

FORMATS_BASIC = ("text", "json")


def add_catalog_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--catalog", type=Path, default=None, help="catalog folder (default: the shipped catalog)")
    p.add_argument("--rules", type=Path, default=None, help="rules folder (default: the shipped rules/)")


def load_clean_catalog(args: argparse.Namespace):
    """Load the catalog; refuse to run a command on an invalid one (exit 2 with the first problems).

    A technique file still holding the TODO placeholders of ``optkg new`` is an entry being written:
    it is left out, with one warning line per file on stderr (``optkg validate`` still refuses it)."""
    import kg
    from kg.core.paths import display_path
    cat = kg.load_catalog(getattr(args, "catalog", None), skip_drafts=True)
    for f in cat.drafts:
        print(f"optkg: warning: {display_path(f)}: unfinished technique template (TODO placeholders left), "
              f"left out of the catalog; fill it in, then `optkg validate {display_path(f)}`", file=sys.stderr)
    return cat


MAX_GPUS = 1_048_576  # GPUs in one deployment (parallel sizes stop at 65,536 each)


def add_gpu_args(p: argparse.ArgumentParser, compute_capability: bool = True) -> None:
    """``--gpu-memory-gib`` (and ``--gpu-compute-capability``): describe a GPU catalog/hardware/ lacks."""
    p.add_argument("--gpu-memory-gib", type=float, metavar="GIB",
                   help="with --gpu NAME of a GPU not in catalog/hardware/: its memory; rules needing its other facts "
                        "are listed as not evaluable")
    if compute_capability:
        p.add_argument("--gpu-compute-capability", type=float, metavar="X.Y",
                       help="with --gpu NAME of a GPU not in catalog/hardware/: its CUDA compute capability (8.0, 9.0)")


def resolve_gpu_arg(args: argparse.Namespace, catalog) -> Any:
    """The hardware entry ``--gpu`` names (kg.knowledge.gpus: ids, aliases, nvidia-smi names, or a GPU described by
    ``--gpu-memory-gib``), or None without ``--gpu``. OptkgError for an unknown GPU (closest names)."""
    mem, cc = getattr(args, "gpu_memory_gib", None), getattr(args, "gpu_compute_capability", None)
    if args.gpu is None:
        if mem is not None:
            raise OptkgError("--gpu-memory-gib describes the GPU --gpu names; give --gpu NAME too")
        return None
    if not args.gpu.strip():
        raise OptkgError("--gpu: empty GPU name (give one such as H200, or drop --gpu to keep the stack's)")
    hw = catalog.resolve_hardware(args.gpu, mem, None if cc is None else f"{cc:.1f}")
    if mem is not None and not hw.get("custom"):  # a catalog GPU keeps its own memory: the flag would be ignored
        vis = f", {hw['memory_visible_mib'] / 1024:.2f} GiB visible" if hw.get("memory_visible_mib") else ""
        raise OptkgError(f"--gpu-memory-gib {mem:g}: {args.gpu.strip()} is the catalog's {hw['id']} "
                         f"({hw.get('memory_gib', '?')} GB{vis}), which keeps its own memory; drop --gpu-memory-gib, "
                         "or give a GPU the catalog lacks a name of its own (e.g. --gpu H100-NVL --gpu-memory-gib 94)")
    from kg.knowledge.gpus import variant_note
    note = variant_note(catalog.hardware, args.gpu, hw)
    if note:
        from kg.core.textsafe import say
        say(f"optkg: note: {note}")
    return hw


def add_stack_args(p: argparse.ArgumentParser, positional: bool = True) -> None:
    if positional:
        p.add_argument("stack", nargs="?", type=Path, help="stack YAML file")
    p.add_argument("--cmd", metavar="CMD", help="a launch command, quoted: vllm serve, python -m sglang.launch_server, "
                   "trtllm-serve, lmdeploy serve api_server, or docker run IMAGE ... of one of them "
                   "(files it names are read relative to the working directory)")
    p.add_argument("--vllm", metavar="CMD", help="a `vllm serve ...` command (or bare vLLM flags), quoted")
    p.add_argument("--sglang", metavar="CMD", help="a `python -m sglang.launch_server ...` command (or bare flags), quoted")
    p.add_argument("--config", type=Path, help="a Hugging Face config.json (overrides the model in the stack/command)")
    p.add_argument("--gpu", help="GPU name (H100-SXM, H200, B200, A100-80GB, L40S, MI300X, ...; nvidia-smi's names too)")
    add_gpu_args(p)
    p.add_argument("--count", type=int, help="number of GPUs")
    p.add_argument("--engine-version", help="engine version, e.g. 0.11.0 (rules with version ranges use it)")
    p.add_argument("--kv-budget-gib", type=float, help="KV-cache memory per GPU in GiB (as the engine logs it)")
    p.add_argument("--max-model-len", type=int, help="max_model_len in tokens")
    p.add_argument("--request-len", type=int, metavar="TOKENS",
                   help="the request length you serve (prompt + output tokens): max concurrency at it, beside the "
                        "max_model_len figure")
    p.add_argument("--isl", type=int, metavar="TOKENS", help="input sequence length (with --osl: --request-len ISL+OSL)")
    p.add_argument("--osl", type=int, metavar="TOKENS", help="output sequence length (with --isl)")


def stack_from_args(args: argparse.Namespace, catalog, resolver=None) -> Any:
    """Build the Stack the user asked for. Exactly one of: stack file, --cmd, --vllm, --sglang, --config.

    ``resolver``: how a model name becomes ModelFacts (default kg.inputs.modelcfg.resolve_model).
    A file that describes several serving containers is refused here (``check`` reads them all).
    """
    stacks = stacks_from_args(args, catalog, resolver)
    if len(stacks) > 1:
        names = ", ".join(s.name for s in stacks)
        raise OptkgError(f"{args.stack}: the file describes {len(stacks)} serving containers ({names}); "
                         "`optkg check` reports each, this command needs one")
    return stacks[0]


def stacks_from_args(args: argparse.Namespace, catalog, resolver=None) -> list[Any]:
    """The Stacks the user asked for: one, or one per serving container of a manifest / compose file.
    A GPU the catalog does not know is an error naming the closest ones (``--gpu-memory-gib`` describes it)."""
    from kg.engines.launch import parse_command
    from kg.inputs.stack import Stack
    from kg.inputs.modelcfg import load_config_file, resolve_model
    resolver = resolver or resolve_model
    if getattr(args, "engine_version", None) is not None:  # checked before the launch parser compares releases
        from kg.inputs.stack import check_engine_version
        args.engine_version = check_engine_version(args.engine_version, "--engine-version")
    cmd = getattr(args, "cmd", None)
    sources = [x for x in (getattr(args, "stack", None), cmd, args.vllm, args.sglang) if x]
    if len(sources) > 1:
        raise OptkgError("give one of: a stack file, --cmd, --vllm or --sglang")
    override = str(args.config) if args.config else None
    stacks = None
    if cmd:
        from kg.engines.launch import parse_launch
        st = parse_launch(cmd, catalog, label="--cmd", model_override=override, resolver=resolver,
                          engine_version=args.engine_version)
        from kg.inputs.stack import Stack as _Stack
        if not isinstance(st, _Stack):  # a training launch (kg/inputs/launch/training.py): only `optkg check` reads it
            raise OptkgError("--cmd: this is a training launch; `optkg check --cmd ...` prints its training report")
    elif args.vllm or args.sglang:
        from kg.engines.launch import detect
        engine, text = ("vllm", args.vllm) if args.vllm else ("sglang", args.sglang)
        label = f"--{engine}"
        try:
            # --engine-version reaches the parser, so the release's option list decides which flags it has
            lz, launch = detect(text, catalog, label=label, model_override=override, resolver=resolver,
                                engine_version=getattr(args, "engine_version", None))
        except OptkgError:
            lz = None  # a bare list of flags (or not a command at all): the engine's own parser decides
        if lz is not None and (lz.name == engine or lz.kind == "container"):
            st = lz.parse(launch)
            if st.engine != engine:
                raise OptkgError(f"{label}: the command runs {st.engine}, not {engine}; use --cmd")
        else:
            st = parse_command(text, catalog, engine, override, label, resolver)
    elif getattr(args, "stack", None):
        from kg.engines.launch import stacks_from_file
        stacks, skipped, _kind = stacks_from_file(args.stack, catalog, model_override=override, resolver=resolver)
        for s in stacks:
            s.notes.extend(skipped)
    elif args.config:
        m = load_config_file(args.config)
        st = Stack(name=m.name if m.name != str(args.config) else args.config.name, model=m, source=str(args.config))
    else:
        raise OptkgError("nothing to check: give a stack file, --cmd \"vllm serve ...\", --vllm, --sglang or --config")
    if stacks is None:
        stacks = [st]
    return [_apply_stack_options(s, args, catalog) for s in stacks]


def _apply_stack_options(st: Any, args: argparse.Namespace, catalog) -> Any:
    """--gpu, --count, --engine-version, --kv-budget-gib, --max-model-len over a parsed stack."""
    from kg.inputs.stack import set_setting
    if args.gpu is not None or getattr(args, "gpu_memory_gib", None) is not None:
        try:
            st.hardware = resolve_gpu_arg(args, catalog)
        except OptkgError as e:
            raise OptkgError(f"--gpu: {e}") from None
    if args.count is not None:
        if args.count < 1:
            raise OptkgError(f"--count: expected a positive integer, found {args.count}")
        if args.count > MAX_GPUS:
            raise OptkgError(f"--count: {args.count} GPUs is past what optkg models (at most {MAX_GPUS:,})")
        st.gpu_count = args.count
    if args.engine_version is not None:  # '' too: an empty version is no version, not "none given"
        from kg.inputs.stack import check_engine_version
        st.engine_version = check_engine_version(args.engine_version, "--engine-version")
    if args.kv_budget_gib is not None:
        from kg.derive.kv import checked_kv_budget_gib  # at most the GPU's memory (the --gpu one, or the file's)
        set_setting(st, "kv_budget_gib", checked_kv_budget_gib(args.kv_budget_gib, "--kv-budget-gib", st.hardware),
                    "--kv-budget-gib")
    if args.max_model_len is not None:
        set_setting(st, "max_model_len", args.max_model_len, "--max-model-len")
    req = _request_len(args)
    if req is not None:
        set_setting(st, "request_len", req[0], req[1])
    if st.model is None:
        raise OptkgError(f"{st.source}: the stack names no model (add `model:` or pass --config)")
    return st


def _request_len(args: argparse.Namespace) -> tuple[int, str] | None:
    """(tokens, the flags that gave it) from --request-len, or --isl + --osl (both, or neither)."""
    req, isl, osl = (getattr(args, k, None) for k in ("request_len", "isl", "osl"))
    if (isl is None) != (osl is None):
        raise OptkgError("--isl and --osl go together (the request holds ISL + OSL tokens at its end); "
                         "or give --request-len")
    if isl is not None:
        if req is not None:
            raise OptkgError("give --request-len or --isl/--osl, not both")
        if isl < 1 or osl < 0:
            raise OptkgError(f"--isl/--osl: expected ISL >= 1 and OSL >= 0 tokens, found {isl} and {osl}")
        return isl + osl, "--isl + --osl"
    return (req, "--request-len") if req is not None else None


# argument destinations that name files a command writes; every other path argument is an input
OUTPUT_DESTS = frozenset({"output", "output_dir", "write_baseline", "diagram", "plot"})


def input_paths(args: argparse.Namespace) -> list[Path]:
    """The paths a command reads: every Path-valued argument (or list of Paths) except ``OUTPUT_DESTS``."""
    out: list[Path] = []
    for dest, value in vars(args).items():
        if dest in OUTPUT_DESTS or dest.startswith("_"):
            continue
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, Path):
                out.append(v)
    return out


def register_inputs(args: argparse.Namespace) -> None:
    """Protect the command's input files: ``atomic_write`` refuses to replace them, even with --force."""
    from kg.core.yamlio import protect_inputs
    protect_inputs(input_paths(args))


def write_output(text: str, out: Path | None, force: bool = False, inputs: list[Path] | None = None) -> None:
    """Print ``text`` or write it atomically to ``out`` (never overwriting without --force).

    Refuses (OptkgError, even with --force) when ``out`` is one of ``inputs`` or of the inputs the
    CLI registered for this command (``register_inputs``): the report must not replace what it read.
    """
    if out is None or str(out) == "-":
        sys.stdout.write(text)
        return
    from kg.core.yamlio import atomic_write, refuse_if_input
    refuse_if_input(out, inputs or [])
    atomic_write(out, text, force=force)


def check_output_paths(outputs: list[tuple[str, Path | None]], force: bool) -> None:
    """Refuse bad output paths before anything is computed or written (OptkgError naming the flag).

    ``outputs``: (flag, path) pairs; None and '-' (stdout) are skipped. Each folder must exist, a path
    must not be a folder or a symbolic link, an existing file needs ``force``, and no two flags may
    name the same file (one would silently overwrite the other). So a refused run writes nothing.
    """
    import os
    outs = [(flag, Path(p)) for flag, p in outputs if p is not None and str(p) != "-"]
    seen: dict[str, str] = {}
    for flag, p in outs:
        parent = p.parent if str(p.parent) else Path(".")
        if not parent.is_dir():
            raise OptkgError(f"{p}: folder {parent} does not exist")
        if p.is_symlink():
            raise OptkgError(f"{p}: is a symbolic link to {os.path.realpath(p)}; refusing to write through it "
                             "(remove the link or write to the target path)")
        if p.is_dir():
            raise OptkgError(f"{flag} {p}: is a folder, expected a file name")
        if p.exists() and not force:
            raise OptkgError(f"{p}: exists; refusing to overwrite (pass --force to replace it)")
        real = os.path.realpath(p)
        if real in seen:
            raise OptkgError(f"{seen[real]} and {flag} name the same file ({p}); give them different names")
        seen[real] = flag


_ASCII_FLOAT = lazy_re(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def ascii_int(text: str) -> int:
    """argparse type for every integer option: ASCII digits only (Python's int() reads '١٢' as 12, issue 26 #23),
    at most 30 of them."""
    s = str(text).strip()
    if not re.fullmatch(r"[+-]?[0-9]+", s):
        raise argparse.ArgumentTypeError(f"expected an integer in ASCII digits, found {s[:40]!r}")
    if len(s.lstrip("+-")) > 30:
        raise argparse.ArgumentTypeError(f"expected an integer of at most 30 digits, found {len(s.lstrip('+-'))} digits")
    return int(s)


def finite_float(text: str) -> float:
    """argparse type for every float option: a finite number in ASCII digits (nan, inf, 1e400 and '١٢' are
    refused: float() reads Arabic-Indic digits too)."""
    import math
    shown = str(text)[:40]
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, found {shown!r}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"expected a finite number, found {shown!r}")
    if not _ASCII_FLOAT.fullmatch(str(text).strip()):
        raise argparse.ArgumentTypeError(f"expected a number in ASCII digits, found {shown!r}")
    return v


def parse_thresholds(items: list[str]) -> dict[str, float]:
    """``--threshold NAME=NUMBER`` (repeatable) -> {name: value}; a finite number in ASCII digits (``1e400``,
    ``nan`` and Arabic-Indic digits are refused). Raises OptkgError."""
    out: dict[str, float] = {}
    for it in items:
        name, sep, num = it.partition("=")
        if not sep or not name.strip():
            raise OptkgError(f"--threshold: expected NAME=NUMBER, found {it!r}")
        try:
            out[name.strip()] = finite_float(num)
        except argparse.ArgumentTypeError as e:
            raise OptkgError(f"--threshold {name.strip()}: {e}") from None
    return out
