"""Shared pieces of the training command readers: splitting a pasted shell command into the
launcher part (torchrun / deepspeed / accelerate launch / python -m torch.distributed.run), the
script and the script's own arguments, and a flag-table walker.

A pasted command may carry ``\\``-continued lines, ``KEY=value`` environment prefixes, comments
and several commands joined by ``&&``; only the one that runs a training script is read.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

from kg.core.errors import OptkgError

MAX_COMMAND_CHARS = 200_000
# launchers no training framework's package owns -> the subcommand before their own flags (None: none); a
# framework's own (`deepspeed`, `accelerate launch`) come from its package (TrainingFramework.launchers)
GENERIC_LAUNCHERS: dict[str, str | None] = {"torchrun": None, "python": None, "python3": None, "srun": None,
                                            "mpirun": None, "tune": None}
# `python -m <module>` that is a launcher: module -> the launcher it is (plus TrainingFramework.launcher_modules)
GENERIC_LAUNCHER_MODULES = {"torch.distributed.run": "torchrun", "torch.distributed.launch": "torchrun"}
# launcher flags that size the job: name -> canonical setting (torchrun, deepspeed, accelerate launch)
LAUNCHER_FLAGS = {
    "--nproc_per_node": "gpus_per_node", "--nproc-per-node": "gpus_per_node",
    "--num_gpus": "gpus_per_node", "--num-gpus": "gpus_per_node", "--num_accelerators": "gpus_per_node",
    "--nnodes": "num_nodes", "--num_nodes": "num_nodes", "--num-nodes": "num_nodes",
    "--num_processes": "world_size", "--num-processes": "world_size",
    "--num_machines": "num_nodes", "--num-machines": "num_nodes",
    "--config_file": "config_file", "--config-file": "config_file",
}
# accelerate launch switches (store_true in accelerate 1.15.0 commands/launch.py, e.g. --multi_gpu :177,
# --use_deepspeed :254, --use_fsdp :260): never take a value
LAUNCHER_SWITCHES = {"--quiet", "-q", "--cpu", "--multi_gpu", "--tpu", "--enable_cpu_affinity", "--dynamo_use_fullgraph",
                     "--dynamo_use_dynamic", "--dynamo_use_regional_compilation", "--use_deepspeed", "--use_fsdp",
                     "--use_parallelism_config", "--use_megatron_lm", "--same_network", "--no_python", "--tpu_cluster",
                     "--tpu_use_sudo", "--debug"}


@dataclass
class Command:
    """A split training command. ``launcher`` values are raw strings keyed by canonical name."""

    launcher: str | None
    launcher_args: dict[str, str] = field(default_factory=dict)
    script: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    # every launcher flag as written before the script: name -> value ("" for a switch), e.g. accelerate's --use_fsdp
    launcher_raw: dict[str, str] = field(default_factory=dict)
    # why the launcher starts one process per GPU of the node without a number (torchrun --nproc-per-node gpu,
    # deepspeed without --num_gpus/--include), "" otherwise; the node's GPU count then sizes the job
    node_gpus: str = ""
    # why the launcher's GPU count is not in the command (deepspeed --hostfile), "" otherwise
    gpus_unknown: str = ""


@lru_cache(maxsize=1)
def launchers() -> tuple[dict[str, str | None], dict[str, str]]:
    """(launcher program -> the subcommand before its flags, ``python -m`` module -> launcher): the generic ones
    and every training framework's own (kg.frameworks.registry; imported on first use)."""
    from kg.frameworks.registry import all_frameworks
    programs, modules = dict(GENERIC_LAUNCHERS), dict(GENERIC_LAUNCHER_MODULES)
    for fw in all_frameworks().values():
        programs.update(fw.launchers)
        modules.update(fw.launcher_modules)
    return programs, modules


def split_command(text: str, where: str) -> Command:
    """Split ``text`` into launcher, script and script arguments. OptkgError on unbalanced quotes."""
    if len(text) > MAX_COMMAND_CHARS:
        raise OptkgError(f"{where}: command is longer than {MAX_COMMAND_CHARS:,} characters")
    text = re.sub(r"\\\r?\n", " ", text)
    text = "\n".join(line.split(" #")[0] if not line.lstrip().startswith("#") else "" for line in text.splitlines())
    try:
        toks = shlex.split(text, comments=False)
    except ValueError as e:
        raise OptkgError(f"{where}: cannot split the command ({e})") from None
    # several commands: keep the segment holding a .py script or a known launcher
    segs: list[list[str]] = [[]]
    for t in toks:
        if t in ("&&", ";", "||", "|"):
            segs.append([])
        else:
            segs[-1].append(t)
    seg = next((s for s in segs if any(x.endswith(".py") for x in s)), None) or max(segs, key=len)
    cmd = Command(None)
    i = 0
    while i < len(seg) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", seg[i]):
        k, v = seg[i].split("=", 1)
        cmd.env[k] = v
        i += 1
    if i < len(seg) and seg[i] in ("env",):
        i += 1
    if i < len(seg):
        head = seg[i].rsplit("/", 1)[-1]
        programs, modules = launchers()
        if head in programs or head.startswith("python"):
            cmd.launcher = head
            i += 1
            if i < len(seg) and programs.get(head) and seg[i] == programs[head]:
                i += 1
            while head.startswith("python") and i < len(seg) and seg[i] in ("-u", "-O", "-OO", "-B", "-E", "-s", "-I"):
                i += 1  # interpreter switches before -m
            if head.startswith("python") and i + 1 < len(seg) and seg[i] == "-m":
                mod = seg[i + 1]
                i += 2
                if mod in modules:
                    cmd.launcher = modules[mod]
                else:
                    cmd.script = mod
    while i < len(seg) and cmd.script is None:
        t = seg[i]
        if t.endswith(".py") or (not t.startswith("-") and cmd.launcher in (None,)):
            cmd.script = t
            i += 1
            break
        if t in ("-m", "--module") and i + 1 < len(seg):
            cmd.script = seg[i + 1]  # torchrun -m torchtitan.train / deepspeed --module pkg.mod
            i += 2
            break
        if t.startswith("-"):
            name, eq, val = t.partition("=")
            takes = not eq and i + 1 < len(seg) and not seg[i + 1].startswith("-") and not seg[i + 1].endswith(".py") \
                and name not in LAUNCHER_SWITCHES
            if takes:
                val = seg[i + 1]
            cmd.launcher_raw[name] = val
            if name in LAUNCHER_FLAGS:
                cmd.launcher_args[LAUNCHER_FLAGS[name]] = val
            else:
                cmd.ignored.append(name)
            i += 2 if takes else 1
            continue
        cmd.script = t
        i += 1
        break
    cmd.args = seg[i:]
    _every_local_gpu(cmd)
    return cmd


def _every_local_gpu(cmd: Command) -> None:
    """Launchers that size the job from the node itself: torchrun ``--nproc-per-node gpu|auto`` (torch
    distributed/run.py ``determine_local_world_size``: torch.cuda.device_count()); a framework's own launcher
    through its package (TrainingFramework.launcher_gpus, e.g. DeepSpeed's runner)."""
    per_node = cmd.launcher_args.get("gpus_per_node", "")
    if cmd.launcher in ("torchrun", "python", "python3") and per_node.lower() in ("gpu", "auto"):
        del cmd.launcher_args["gpus_per_node"]
        cmd.node_gpus = (f"torchrun --nproc-per-node {per_node} starts one process per GPU of the node "
                         "(torch distributed/run.py determine_local_world_size: torch.cuda.device_count())")
    from kg.frameworks.registry import all_frameworks
    for fw in all_frameworks().values():
        if any(cmd.launcher == prog for prog, _ in fw.launchers):
            fw.launcher_gpus(cmd)


FlagHandler = Callable[[Any, str | None, str], None]


# an OmegaConf / Hydra dotted override (``model.tensor_model_parallel_size=2``, ``+train.x=1``): recipe scripts of
# Megatron-Bridge, NeMo and verl take these, argparse-based trainers refuse them as positional arguments
CONFIG_OVERRIDE = re.compile(r"^\+{0,2}[A-Za-z_]\w*(\.\w+)+=")


def config_overrides(args: list[str]) -> list[str]:
    """The tokens of ``args`` that are dotted config overrides (``CONFIG_OVERRIDE``)."""
    return [t for t in args if CONFIG_OVERRIDE.match(t)]


def walk_flags(args: list[str], table: dict[str, tuple[str, Any]], apply: Callable[[str, Any, str], None],
               ignored: list[str], where: str, prefix: str = "--") -> None:
    """Walk ``args`` against ``table`` (flag -> (kind, target)); kinds:

    - ``value``: takes the next token (or ``=value``) and calls ``apply(target, value, flag)``;
    - ``true`` / ``false``: a switch setting ``target`` to True / False;
    - ``const:<v>``: a switch setting ``target`` to ``<v>``;
    - ``maybe``: takes the next token as a value unless it is another flag or the end, else calls
      ``apply(target, None, flag)`` (DeepSpeed's ``--deepspeed`` switch vs HF's ``--deepspeed ds.json``).

    Unknown flags go to ``ignored`` (users paste whole commands). A value flag at the end of the
    command is an OptkgError naming the flag.
    """
    i = 0
    while i < len(args):
        t = args[i]
        if not t.startswith("-"):
            i += 1
            continue
        name, eq, val = t.partition("=")
        spec = table.get(name) or table.get(name.replace("_", "-")) or table.get(name.replace("-", "_"))
        if spec is None:
            ignored.append(name)
            i += 1
            continue
        kind, target = spec
        if kind == "maybe":
            if not eq and (i + 1 >= len(args) or args[i + 1].startswith("-")):
                apply(target, None, name)
                i += 1
                continue
            kind = "value"
        if kind == "value":
            if not eq:
                if i + 1 >= len(args):
                    raise OptkgError(f"{where}: {name} needs a value")
                val = args[i + 1]
                i += 1
            apply(target, val, name)
        elif kind == "true" or kind.startswith("const:"):
            # HF-style switches may carry an explicit value: `--bf16 True`, `--gradient_checkpointing false`
            if not eq and i + 1 < len(args) and args[i + 1].lower() in ("true", "false", "1", "0"):
                val, eq = args[i + 1], "="
                i += 1
            off = bool(eq) and val.lower() in ("false", "0")
            if kind == "true":
                apply(target, not off, name)
            elif not off:
                apply(target, kind.split(":", 1)[1], name)
        elif kind == "false":
            apply(target, False, name)
        i += 1


def raw_flags(args: list[str]) -> dict[str, Any]:
    """``--flag value`` / ``--flag=value`` / bare ``--switch`` (True) as argparse would see them; the last wins.
    A flag followed by several values (``--cuda-graph-scope attn mlp``, an ``nargs`` argument) keeps them all as
    a list."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(args):
        t = args[i]
        if t.startswith("--") and len(t) > 2:
            name, eq, val = t.partition("=")
            if eq:
                out[name] = val
            else:
                vals = []
                while i + 1 < len(args) and not args[i + 1].startswith("--"):
                    vals.append(args[i + 1])
                    i += 1
                out[name] = True if not vals else vals[0] if len(vals) == 1 else vals
        i += 1
    return out

