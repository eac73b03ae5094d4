"""Hostile command lines over every sub-command: nothing a user types loses a file, injects a command,
crashes, hangs or is silently misread (issue 26).

Each input is an ``optkg`` command line built from the sub-command's own argparse options (so a new option
is fuzzed the day it is added): its files, flags and values drawn from the attacks of
../shared/reference/hostile_inputs_turn3.md -- output folders with a planted ``manifest.json`` /
``.optkg-generated.json`` listing a user's file with its true SHA-256, symlinked output folders and files,
names and file names holding a newline and ``::error::``, a catalog whose technique names do the same, a
planted cache entry (body rewritten, checksum recomputed), ``--changed-since`` values that are git options,
FIFOs, ``/dev/zero``, files over the size caps, 100,000-deep JSON/TOML, 5,000-digit numbers,
Arabic-Indic digits, NaN, octal/hex spellings, unknown GPUs and engine versions, shell metacharacters.

The properties, checked after every input (run in-process through ``kg.cli.main`` in a scratch folder):
- exit 0, 1 or 2, never ``internal error`` or a traceback; on exit 2 stderr is one ``optkg: error:`` line;
- no output line starts with ``::error::INJECTED`` (a GitHub Actions workflow command);
- the canaries are untouched: the user's files beside planted manifests, the folder and file behind each
  symlink, the repository's own work tree (``git status``); no ``PWNED`` file appears;
- a value that cannot be what its option claims (Arabic-Indic digits, 5,000 digits, NaN, an unknown GPU,
  an engine version that is no release, a git option as ``--changed-since``) is refused with exit 2;
- the planted cache entry's technique name never reaches the output;
- bounded work: each input under ``CPU_LIMIT`` seconds of CPU time (CPU, not wall: the box is shared).

``make test`` runs a small fixed sample; ``make fuzz`` runs ``SHARDS`` x ``PER_SHARD`` = 10,000 inputs (the
``slow`` tests) and prints the counts per property and per sub-command.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import marshal
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import time
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from conftest import REPO, SHARED
from kg.cli import COMMANDS, build_parser, main

SAMPLE = 40          # inputs in `make test`
SHARDS = 40          # `make fuzz`: SHARDS x PER_SHARD inputs, spread over the xdist workers
PER_SHARD = 250
CPU_LIMIT = 10.0     # seconds of CPU per input (the report's limit)
HARD_LIMIT = 60.0    # CPU seconds after which an input is stopped and counted as a hang

MARK = "::error::INJECTED"
EVIL = f"evil\n{MARK}"
Q = "Qwen/Qwen3-235B-A22B"
EXAMPLE = REPO / "examples" / "qwen3-235b-tp8.yaml"
LOG = REPO / "tests" / "fixtures" / "logs" / "vllm-21348-qwen3-235b-fp8-tp4.log"
PROM = SHARED / "data" / "metrics" / "vllm_metrics_datadog_fixture_opt125m.prom"
SMI = SHARED / "data" / "metrics" / "nvidia_smi_query-gpu_load__nvidia-h100-80gb-hbm3__590.48.01.csv"
TRACE = SHARED / "data" / "traces" / "mooncake_fast25_conversation_trace.jsonl"
PLANTED_NAME = "tensor-parallelismZ"

# values an option cannot hold: each must be refused (exit 2) wherever the option reads it
BAD_INTS = ["١٢", "9" * 5000, "nan", "0x1f", "0o17", "1e3", "", "2**64", "8.5", "٨"]
BAD_FLOATS = ["nan", "inf", "-inf", "1e400", "٣٠", "9" * 5000, "", "1,5", "0x10"]
BAD_GPUS = ["H10", "H200x", "1:00:00", "<script>x</script>", "\x1b[31mH200", "H\u202e002"]
BAD_VERSIONS = ["", "1.2.3.4.5.6", "18446744073709551616", "9" * 5000, "0.11.0\n::error::x"]
GIT_OPTIONS = ["--fork-point", "--", "--help", "--output=PWNED", "-c", "--exec=touch PWNED"]

OK_INTS = ["1", "2", "4", "8", "0", "-1", "65536", "100000"]
OK_FLOATS = ["0.9", "1", "0", "-5", "1e308", "0.5", "80", "-0.0"]
GPUS = ["H200", "H100-SXM", "A100-80GB", "NVIDIA H200", "NVIDIA H100 80GB HBM3", "L40S"]
VERSIONS = ["0.11.0", "0.33.0", "0.34.0", "0.5.14", "99.0.0"]
NAMES = ["tensor-parallelism", "kv-cache-quantization", "prefix-caching", "speculative-decoding", EVIL,
         "\x1b]8;;http://x\x07link", "\u202egnp.exe", "<img src=x onerror=alert(1)>", "-", "--help", "x" * 5000,
         "../../etc/passwd", "$(touch PWNED)", "`touch PWNED`", "a;touch PWNED", "serve", "memory", "L2"]
MODELS = [Q, "meta-llama/Llama-3.1-8B", "Qwen/Qwen3-32B", "no/such-model", EVIL, "../../../etc", ""]


def _commands() -> list[str]:
    base = [f"vllm serve {Q} -tp 8", f"vllm serve {Q} -tp 4 --max-model-len 32768",
            "python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp 2",
            "vllm serve meta-llama/Llama-3.1-8B --gpu-memory-utilization 0.9"]
    junk = ["-tp nan", "-tp ١٢", f"--max-model-len {'9' * 5000}", "; touch PWNED", "&& touch PWNED", "$(touch PWNED)",
            "--tensor-paralel-size 8", f"--served-model-name '{EVIL}'", "--kv-cache-dtype fp8", "-tp 0o17",
            "--gpu-memory-utilization -0.0", "--speculative-config '{\"method\": \"<script>\"}'", "'unclosed"]
    return base + [f"{b} {j}" for b in base[:2] for j in junk]


COMMAND_LINES = _commands()
TRAIN = ["torchrun --nproc-per-node=8 -m torchtitan.train --job.config_file {toml}",
         "torchrun --nproc-per-node=8 pretrain_gpt.py --tensor-model-parallel-size 8 --num-layers 32 "
         "--hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --micro-batch-size 1"]


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


class Arena:
    """The scratch folder every input runs in: canaries, planted folders, hostile files, a hostile catalog."""

    def __init__(self, root: Path):
        self.root = root
        inp, self.out = root / "in", root / "out"
        inp.mkdir()
        self.out.mkdir()
        self.victim = root / "victim"
        self.victim.mkdir()
        (self.victim / "precious.txt").write_text("the user's own file\n")
        (root / "link-dir").symlink_to(self.victim)
        (root / "link-file").symlink_to(self.victim / "precious.txt")
        (root / "dangling").symlink_to(root / "nowhere")
        # output folders with a planted record listing a user's file with its true digest
        self.planted = []
        for marker in ("manifest.json", ".optkg-generated.json"):
            d = root / f"planted-{marker.strip('.').split('.')[0]}"
            d.mkdir()
            (d / "thesis.tex").write_text("precious\n")
            (d / marker).write_text(json.dumps({"files": {"thesis.tex": {"sha256": _sha(d / "thesis.tex"),
                                                                          "source_sha256": None}}}))
            self.planted.append(d)
        os.mkfifo(inp / "fifo")
        nl = inp / f"nl\n{MARK}.yaml"
        nl.write_text(EXAMPLE.read_text())
        stack = inp / "stack.yaml"
        stack.write_text(EXAMPLE.read_text())
        (inp / "deep.json").write_text("[" * 100_000)
        (inp / "deep.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
        (inp / "digits.toml").write_text(f"[parallelism]\ntensor_parallel_degree = {'9' * 5000}\n")
        (inp / "ok.toml").write_text("[parallelism]\ntensor_parallel_degree = 8\n[model]\nname = 'llama3'\n"
                                     "flavor = '70B'\n")
        (inp / "bomb.yaml").write_text('a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
            f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n" for p, c in zip("abcdefgh", "bcdefghi")))
        (inp / "list.yaml").write_text(EXAMPLE.read_text() + "description: [" + "1," * 300_000 + "1]\n")
        with open(inp / "huge.prom", "wb") as f:  # sparse: over every size cap, costs no disk
            f.truncate(300 * 2**20)
        log = LOG.read_text()
        (inp / "big.log").write_text(log.replace("GPU KV cache size: 178,880", f"GPU KV cache size: {'9' * 5000}"))
        (inp / "neg.log").write_text(log.replace("Available KV cache memory: 8.11 GiB",
                                                 "Available KV cache memory: -5.00 GiB"))
        cfg = json.loads((REPO / "catalog" / "models" / "Qwen__Qwen3-32B.json").read_text())
        for name, change in (("head0", {"head_dim": 0}), ("layers0", {"num_hidden_layers": 0})):
            d = inp / name
            d.mkdir()
            (d / "config.json").write_text(json.dumps(dict(cfg, **change), indent=1))
        dup = inp / "dup"
        dup.mkdir()
        (dup / "config.json").write_text(json.dumps(cfg, indent=1).replace(
            '"num_hidden_layers": 64', '"num_hidden_layers": 2,\n "num_hidden_layers": 99999'))
        (inp / "unknown.prom").write_text('foo_bar 1\nbaz_qux{a="b"} 2\n')
        (inp / "digits.prom").write_text(f'# TYPE x gauge\nvllm:num_requests_running{{model_name="m"}} {"9" * 5000}\n')
        (inp / "empty").mkdir()
        # catalogs: a copy, and a copy whose technique names and rule messages carry a newline and the marker
        self.catalog = root / "catalog"
        shutil.copytree(REPO / "catalog", self.catalog)
        shutil.copytree(REPO / "rules", root / "rules")
        evil = root / "evil"
        shutil.copytree(REPO / "catalog", evil / "catalog")
        shutil.copytree(REPO / "rules", evil / "rules")
        for f in sorted((evil / "catalog" / "techniques").rglob("*.yaml"))[:5]:
            text = f.read_text()
            f.write_text(text.replace("\nname: ", f'\nname: "{EVIL}" # ', 1))
        bad_rules = root / "bad-rules"
        shutil.copytree(REPO / "rules", bad_rules)
        first = sorted(bad_rules.rglob("*.yaml"))[0]
        first.write_text(first.read_text() + "\n- id: broken\n  when: 'tp_size >'\n")
        self.inputs = {
            "files": [str(EXAMPLE), str(stack), str(nl), str(inp / "fifo"), "/dev/zero", str(inp / "missing.yaml"),
                      str(inp / "empty"), str(inp / "deep.json"), str(inp / "bomb.yaml"), str(inp / "list.yaml"),
                      str(inp / "huge.prom"), str(root / "link-file"), str(root / "dangling"), "/etc/passwd",
                      "/proc/self/mem", "-", str(LOG), str(inp / "big.log"), str(inp / "neg.log"), str(PROM), str(SMI),
                      str(TRACE), str(inp / "unknown.prom"), str(inp / "digits.prom"), str(inp / "head0"),
                      str(inp / "layers0" / "config.json"), str(dup / "config.json"), str(inp / "deep.toml"),
                      str(inp / "digits.toml")],
            "catalogs": [str(self.catalog), str(evil / "catalog"), str(inp / "missing"), str(EXAMPLE), "/dev/zero",
                         str(root / "link-dir")],
            "rules": [str(root / "rules"), str(evil / "rules"), str(bad_rules), "/etc/passwd", str(inp / "empty"),
                      str(inp / "missing")],
            "outputs": [str(d) for d in self.planted] + [
                str(root / "link-dir"), str(root / "link-file"), str(root / "dangling"),
                str(self.victim / "precious.txt"), str(stack), "/dev/full", str(inp / "fifo"),
                str(self.out / f"nl\n{MARK}"), str(self.out / "new-{n}"), str(self.out / "new-{n}.svg")],
        }
        self.toml = {"ok": str(inp / "ok.toml"), "deep": str(inp / "deep.toml"), "digits": str(inp / "digits.toml")}
        self.canaries = self._canaries()

    def _canaries(self) -> dict[str, str]:
        out = {}
        for d in (self.victim, *self.planted):
            for p in sorted(d.iterdir()):
                if not p.name.startswith((".", "manifest")):
                    out[str(p)] = _sha(p)
        return out

    def restore(self) -> None:
        """Put the canaries back as they were (after an input that was allowed to replace one: --force)."""
        for d in (self.victim, *self.planted):
            for p in d.iterdir():
                if str(p) not in self.canaries and not p.name.startswith((".", "manifest")):
                    shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        for k in self.canaries:
            p = Path(k)
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            elif p.is_symlink():
                p.unlink()
            p.write_text("the user's own file\n" if p.parent == self.victim else "precious\n")

    def lost(self) -> list[str]:
        """The canaries changed or deleted, and files written into the symlinks' target folder."""
        now = self._canaries()
        changed = [k for k in self.canaries if now.get(k) != self.canaries[k]]
        written = [str(p) for p in self.victim.iterdir() if str(p) not in self.canaries]
        return sorted(changed + written)


def _subparser(name: str) -> argparse.ArgumentParser:
    p = build_parser(name)
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _kind(a: argparse.Action) -> str:
    """What an option holds, from its type, choices and names."""
    names = " ".join(a.option_strings) + " " + a.dest
    tname = getattr(a.type, "__name__", "")
    if a.nargs == 0:
        return "flag"
    if a.choices:
        return "choice"
    if tname in ("int", "ascii_int"):
        return "int"
    if tname in ("float", "finite_float"):
        return "float"
    for key, kind in (("changed_since", "git"), ("gpu_memory", "float"), ("gpu_compute", "float"), ("gpu", "gpu"),
                      ("version", "version"), ("release", "version"), ("catalog", "catalog"), ("rules", "rules"),
                      ("train", "train"), ("vllm", "command"), ("sglang", "command"), ("cmd", "command"),
                      ("model", "model"), ("output", "output"), ("diagram", "output"), ("plot", "output"),
                      ("write_baseline", "output"), ("-o", "output")):
        if key in names:
            return kind
    if tname in ("Path", "PosixPath") or any(k in a.dest for k in ("file", "stack", "config", "baseline", "log",
                                                                    "trace", "before", "metrics", "path", "dir",
                                                                    "budget_from", "inputs", "paths")):
        return "file"
    return "name"


class Gen:
    """Command lines for one sub-command, from its parser; ``refuse`` says which values must be refused."""

    def __init__(self, arena: Arena):
        self.arena = arena
        self.parsers = {c: _subparser(c) for c in COMMANDS}
        self.n = 0

    def value(self, rnd: random.Random, kind: str, a: argparse.Action) -> tuple[str, bool]:
        """A value for option ``a`` and whether optkg must refuse it."""
        A = self.arena.inputs
        bad = rnd.random() < 0.35
        if kind == "int":
            return (rnd.choice(BAD_INTS), True) if bad else (rnd.choice(OK_INTS), False)
        if kind == "float":
            return (rnd.choice(BAD_FLOATS), True) if bad else (rnd.choice(OK_FLOATS), False)
        if kind == "choice":
            if bad:
                return rnd.choice([EVIL, "", "TEXT", str(list(a.choices)[0]) + "x"]), True
            return str(rnd.choice(list(a.choices))), False
        if kind == "gpu":
            return (rnd.choice(BAD_GPUS), True) if bad else (rnd.choice(GPUS), False)
        if kind == "version":
            return (rnd.choice(BAD_VERSIONS), True) if bad else (rnd.choice(VERSIONS), False)
        if kind == "git":
            return (rnd.choice(GIT_OPTIONS), True) if bad else (rnd.choice(["HEAD", "main", "HEAD~1", EVIL]), False)
        if kind == "catalog":
            return rnd.choice(A["catalogs"]), False
        if kind == "rules":
            return rnd.choice(A["rules"]), False
        if kind == "command":
            return rnd.choice(COMMAND_LINES), False
        if kind == "train":
            return rnd.choice(TRAIN).format(toml=self.arena.toml[rnd.choice(["ok", "deep", "digits"])]), False
        if kind == "model":
            return rnd.choice(MODELS), False
        if kind == "output":
            self.n += 1
            return rnd.choice(A["outputs"]).replace("{n}", str(self.n)), False
        if kind == "file":
            return rnd.choice(A["files"]), False
        return rnd.choice(NAMES + A["files"][:3]), False

    def argv(self, rnd: random.Random) -> tuple[list[str], bool]:
        cmd = rnd.choice(sorted(COMMANDS))
        p = self.parsers[cmd]
        argv, refuse = [cmd], False
        actions = [a for a in p._actions if not isinstance(a, argparse._HelpAction)]
        for a in actions:
            if a.option_strings or a.nargs in ("?", "*") and rnd.random() < 0.3:
                continue
            kind = _kind(a)
            n = rnd.randint(1, 2) if a.nargs in ("+", "*") else 1
            for _ in range(n):
                v, must = self.value(rnd, kind, a)
                argv.append(v)
                refuse |= must and kind in ("int", "float")
        for a in rnd.sample([a for a in actions if a.option_strings], k=min(4, sum(1 for a in actions
                                                                                  if a.option_strings))):
            if rnd.random() < 0.4:
                continue
            kind = _kind(a)
            flag = rnd.choice(a.option_strings)
            if kind == "flag":
                argv.append(flag)
                continue
            v, must = self.value(rnd, kind, a)
            argv += [f"{flag}={v}"] if v.startswith("-") or rnd.random() < 0.2 else [flag, v]
            refuse |= must
        # commands that write beside the catalog write into the scratch copy; evidence never fetches
        if cmd in ("docs", "schema", "new") and "--catalog" not in " ".join(argv):
            argv += ["--catalog", str(self.arena.catalog)]
        if cmd == "evidence":
            argv.append("--offline")
        if cmd == "check" and rnd.random() < 0.8:
            argv.append("--no-speed")
        return argv, refuse


class _Hang(BaseException):
    """Raised inside an input that ran past HARD_LIMIT CPU seconds."""


def _stop(signum, frame):
    raise _Hang()


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_one(argv: list[str]) -> tuple[int | None, str, str, float]:
    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGPROF, _stop)
    signal.setitimer(signal.ITIMER_PROF, HARD_LIMIT)
    t = _cpu()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(list(argv))
    except _Hang:
        code = None
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)
    return code, out.getvalue(), err.getvalue(), _cpu() - t


def problems(arena: Arena, argv: list[str], refuse: bool, code, out: str, err: str, cpu: float) -> list[str]:
    """What went wrong with one input, by class (empty: it held)."""
    found = []
    if code is None or cpu > CPU_LIMIT:
        found.append(f"hang: {cpu:.1f} s CPU")
    elif code not in (0, 1, 2) or "internal error" in err or "Traceback" in err:
        found.append(f"internal: exit {code}: {err.strip()[-300:]}")
    elif code == 2 and err.strip():
        lines = [ln for ln in err.rstrip("\n").split("\n") if not ln.startswith(("usage:", " "))
                 and not re.match(r"optkg( [a-z]+)?: (note|warning): ", ln)]  # said before the error, apart
        if lines == [] and out.strip():  # validate / place / check --fail-on: exit 2 is "problems found", a report
            pass
        elif len(lines) != 1 or not lines[0].startswith("optkg: error: "):
            found.append(f"message: {err.strip()[:300]}")
    if any(ln.lstrip().startswith(MARK) for ln in (out + "\n" + err).split("\n")):
        found.append("injection: a line starts with " + MARK)
    if PLANTED_NAME in out + err:
        found.append("security: the planted cache entry was trusted")
    lost = arena.lost()
    if lost:
        if "--force" not in argv:  # asked to replace: not a loss (the report's rule: -o --force is allowed)
            found.append(f"data loss: {lost}")
        arena.restore()
    if any((d / "PWNED").exists() for d in (arena.root, arena.root / "in", arena.out, REPO)):
        found.append("injection: a PWNED file appeared")
    if refuse and code in (0, 1) and not {"-h", "--help"} & set(argv):  # help is printed before values are read
        found.append(f"misread: exit {code} for a value the option cannot hold")
    return found


def _short(argv: list[str]) -> str:
    """The command line as a list, each value cut at 80 characters (a 5,000-digit value stays readable)."""
    return repr([a if len(a) <= 80 else a[:60] + f"...({len(a)} chars)" for a in argv])


def _renamed(x):
    """``x`` with every string "tensor-parallelism" (key or value) replaced by PLANTED_NAME."""
    if isinstance(x, dict):
        return {_renamed(k): _renamed(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_renamed(v) for v in x]
    return PLANTED_NAME if x == "tensor-parallelism" else x


def _plant_cache(cache: Path) -> int:
    """Rewrite every catalog cache entry's body as an attacker with write access to the folder would (a
    technique renamed), with the header's tag recomputed as a SHA-256 of the new body (without the user's
    key, no better tag can be made); return how many were planted."""
    n = 0
    for e in cache.glob("catalog-*.json"):
        head, _, body = e.read_bytes().partition(b"\n")
        try:  # the body is marshal data of the catalog's JSON value (kg.core.cache, format 4)
            body = marshal.dumps(_renamed(marshal.loads(body)))
        except (ValueError, EOFError, TypeError):
            body = body.replace(b"tensor-parallelism", PLANTED_NAME.encode())
        try:
            h = json.loads(head)
            h["mac"] = hashlib.sha256(body).hexdigest()
            head = json.dumps(h).encode()
        except (ValueError, TypeError):
            head = hashlib.sha256(body).hexdigest().encode()
        e.write_bytes(head + b"\n" + body)
        n += 1
    return n


@pytest.fixture(scope="module")
def arena(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz-arena")
    a = Arena(root)
    return a


def fuzz(arena: Arena, seed: int, n: int, monkeypatch) -> tuple[Counter, Counter, list[str]]:
    """Run ``n`` inputs from ``seed``; return (inputs per sub-command, problems per class, the failures)."""
    monkeypatch.chdir(arena.root)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # "-" reads standard input: an empty one
    cache = Path(os.environ["OPTKG_CACHE_DIR"])
    run_one(["check", str(EXAMPLE), "--no-speed"])  # a cache entry to plant into
    _plant_cache(cache)
    git_before = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    gen, rnd = Gen(arena), random.Random(seed)
    per_cmd, per_class, failures = Counter(), Counter(), []
    for i in range(n):
        argv, refuse = gen.argv(rnd)
        code, out, err, cpu = run_one(argv)
        per_cmd[argv[0]] += 1
        for p in problems(arena, argv, refuse, code, out, err, cpu):
            per_class[p.split(":", 1)[0]] += 1
            failures.append(f"seed {seed} #{i}: {_short(argv)}: {p[:400]}")
        if i % 200 == 199:
            _plant_cache(cache)  # entries written since are planted too
    git_after = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout
    if git_after != git_before:
        per_class["data loss"] += 1
        failures.append(f"seed {seed}: the repository's work tree changed: {git_after!r} (was {git_before!r})")
    return per_cmd, per_class, failures


def test_fuzz_every_command_with_hostile_input(arena, monkeypatch):
    per_cmd, per_class, failures = fuzz(arena, 0, SAMPLE, monkeypatch)
    assert not failures, "\n".join(failures[:20])
    assert sum(per_cmd.values()) == SAMPLE


@pytest.mark.slow
@pytest.mark.parametrize("shard", range(SHARDS))
def test_fuzz_every_command_with_hostile_input_full(arena, monkeypatch, shard, capsys):
    t = time.monotonic()
    per_cmd, per_class, failures = fuzz(arena, 1000 + shard, PER_SHARD, monkeypatch)
    line = (f"fuzz shard {shard}: {sum(per_cmd.values())} inputs in {time.monotonic() - t:.0f} s; "
            f"per command {dict(sorted(per_cmd.items()))}; problems {dict(per_class) or 0}")
    with capsys.disabled():
        print("\n" + line)
    if os.environ.get("OPTKG_FUZZ_REPORT"):  # one line per shard (xdist workers print nowhere)
        with open(os.environ["OPTKG_FUZZ_REPORT"], "a") as f:
            f.write(line + "".join(f"\n  {x}" for x in failures[:40]) + "\n")
    assert set(per_cmd) == set(COMMANDS)
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:40])
