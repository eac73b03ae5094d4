"""Run the 30 reproducers of ../shared/reference/hostile_inputs_turn3.md against this checkout's optkg.

Each reproducer is the report's own command (argv, never a shell), run as a separate process in a fresh
temporary folder with its own OPTKG_STATE_DIR and HOME; the catalog cache is shared and warmed once (#6
plants into its own). The report's 10 s limit is counted in CPU seconds of the optkg process, as the box is
shared and wall time depends on the load; a process still running after 120 s wall is a hang too. A
reproducer is *fixed* when the behaviour the report asks for holds: the file is still there, no output line
starts with ``::error::``, an exit 2 with a one-line ``optkg: error:`` (no internal error) within the limit,
or a name resolved as the report says. Prints one line per failure with its evidence, then the count per
class (the issue's "Done when": every class 0).

    .venv/bin/python tools/hostile_reproducers.py            # all 30
    .venv/bin/python tools/hostile_reproducers.py 13 18      # some
    .venv/bin/python tools/hostile_reproducers.py --markdown # a table for the lane's report

#30 (the in-process leak) runs kg.cli.main 300 times in a child process (about a minute).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OPTKG = str(REPO / ".venv" / "bin" / "optkg")
PY = str(REPO / ".venv" / "bin" / "python")
SHARED = REPO.parent / "shared"
Q = "Qwen/Qwen3-235B-A22B"
EXAMPLE = str(REPO / "examples" / "qwen3-235b-tp8.yaml")
LOGS = REPO / "tests" / "fixtures" / "logs"
BIG = "9" * 5000
LIMIT = 10.0      # the report's limit, in CPU seconds of the optkg process (the box is shared: wall time varies)
WALL = 120.0      # a run still going after this many wall seconds is a hang whatever the load

CLASSES = {"data loss": (1, 2), "security": (3, 4, 5, 6, 7), "internal": (8, 9, 10, 11, 12),
           "hang": (13, 14, 15, 16, 17), "misread": tuple(range(18, 29)), "message": (29,), "leak": (30,)}


class Run:
    def __init__(self, argv: list[str], cwd: Path, env: dict, limit: float = WALL):
        t = time.monotonic()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            p = subprocess.run([OPTKG, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=limit,
                               input="", errors="replace")
            self.code, self.out, self.err, self.hung = p.returncode, p.stdout, p.stderr, False
        except subprocess.TimeoutExpired as e:
            self.code, self.hung = None, True
            self.out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            self.err = (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.seconds = time.monotonic() - t
        self.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        self.hung = self.hung or self.cpu > LIMIT

    def one_line_error(self) -> bool:
        lines = self.err.rstrip("\n").split("\n")
        return (self.code == 2 and not self.hung and len(lines) == 1 and lines[0].startswith("optkg: error: ")
                and "internal error" not in self.err)

    def evidence(self) -> str:
        if self.hung:
            return f"over the limit: {self.cpu:.1f} s CPU, {self.seconds:.0f} s wall, exit {self.code}"
        first = (self.err.strip().split("\n") or [""])[0][:150]
        t = f"exit {self.code} after {self.cpu:.1f} s CPU"
        return f"{t}: {first!r}" if first else t


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _errs(*runs: Run) -> tuple[bool, str]:
    ok = all(r.one_line_error() for r in runs)
    bad = [r for r in runs if not r.one_line_error()]
    return ok, "; ".join(r.evidence() for r in (bad or runs[:1]))


# ---- the reproducers: each returns (fixed, evidence) -------------------------------------------------

def r1(d: Path, env: dict):
    out = d / "d"
    out.mkdir()
    (out / "thesis.tex").write_text("precious\n")
    first = Run(["export", "--all", "-o", str(out)], d, env)
    m = out / "manifest.json"
    if not m.is_file():
        return False, "no manifest written: " + first.evidence()
    j = json.loads(m.read_text())
    j["files"]["thesis.tex"] = {"sha256": _sha(out / "thesis.tex"), "source_sha256": None}
    m.write_text(json.dumps(j))
    second = Run(["export", "--all", "-o", str(out)], d, env)
    kept = (out / "thesis.tex").is_file() and (out / "thesis.tex").read_text() == "precious\n"
    return kept, f"thesis.tex {'kept' if kept else 'DELETED'}; second run exit {second.code}"


def r2(d: Path, env: dict):
    out = d / "d"
    out.mkdir()
    (out / "thesis.tex").write_text("precious\n")
    (out / "notes.txt").write_text("notes\n")
    Run(["export", "site", "-o", str(out)], d, env)
    m = out / ".optkg-generated.json"
    if not m.is_file():
        return False, "no .optkg-generated.json written"
    j = json.loads(m.read_text())
    for n in ("thesis.tex", "notes.txt"):
        j["files"][n] = {"sha256": _sha(out / n), "source_sha256": None}
    m.write_text(json.dumps(j))
    second = Run(["export", "site", "-o", str(out)], d, env)
    kept = (out / "thesis.tex").is_file() and (out / "notes.txt").is_file()
    return kept, f"thesis.tex and notes.txt {'kept' if kept else 'DELETED'}; second run exit {second.code}"


def _injected(text: str) -> list[str]:
    return [ln for ln in text.split("\n") if ln.lstrip().startswith("::error::")]


def r3(d: Path, env: dict):
    f = d / "nl\n::error::INJECTED.yaml"
    f.write_text("name: x\n")
    r = Run(["validate", str(f)], d, env)
    bad = _injected(r.out) + _injected(r.err)
    return not bad, f"{len(bad)} line(s) start with ::error::; exit {r.code}"


def _evil_catalog(d: Path) -> tuple[str, str]:
    """A copy of catalog/ and rules/ where one technique's name carries a newline and ``::error::``."""
    cat, rules = d / "C", d / "R"
    shutil.copytree(REPO / "catalog", cat)
    shutil.copytree(REPO / "rules", rules)
    src = cat / "techniques" / "tensor-parallelism.yaml"
    if not src.is_file():
        src = next((cat / "techniques").rglob("tensor-parallelism.yaml"))
    text = src.read_text()
    text = re.sub(r"(?m)^name: .*$", 'name: "Tensor parallelism\\n::error::INJECTED"', text, count=1)
    src.write_text(text)
    return str(cat), str(rules)


def r4(d: Path, env: dict):
    cat, rules = _evil_catalog(d)
    r = Run(["explain", "tensor-parallelism", "--catalog", cat, "--rules", rules], d, env)
    bad = _injected(r.out) + _injected(r.err)
    return not bad and r.code in (0, 2), f"{len(bad)} line(s) start with ::error::; exit {r.code}"


def r5(d: Path, env: dict):
    victim = d / "victim"
    victim.mkdir()
    (d / "L").symlink_to(victim)
    r = Run(["new", "fresh-tech-x", "-o", str(d / "L")], d, env)
    written = list(victim.iterdir())
    return not written and r.one_line_error(), f"{len(written)} file(s) written through the link; {r.evidence()}"


def r6(d: Path, env: dict):
    first = Run(["check", EXAMPLE], d, env)
    entries = sorted(Path(env["OPTKG_CACHE_DIR"]).glob("catalog-*.json"))
    if not entries:
        return False, "no catalog cache entry written: " + first.evidence()
    e = entries[0]
    raw = e.read_bytes()
    head, _, body = raw.partition(b"\n")
    body = body.replace(b'"tensor-parallelism"', b'"tensor-parallelismZ"')
    try:
        h = json.loads(head)
        for k in list(h):
            if "sha" in k or "digest" in k or "mac" in k:
                h[k] = hashlib.sha256(body).hexdigest()
        head = json.dumps(h).encode()
    except ValueError:
        head = hashlib.sha256(body).hexdigest().encode()
    e.write_bytes(head + b"\n" + body)
    r = Run(["check", EXAMPLE], d, env)
    trusted = "tensor-parallelismZ" in r.out + r.err
    return not trusted and r.code in (0, 1), f"tampered entry {'TRUSTED' if trusted else 'rejected'}; exit {r.code}"


def r7(d: Path, env: dict):
    runs = [Run(["validate", f"--changed-since={ref}"], REPO, env) for ref in ("--fork-point", "--", "--help")]
    said_ok = any("catalog OK" in r.out for r in runs)
    ok, ev = _errs(*runs)
    return ok and not said_ok, ev


def r8(d: Path, env: dict):
    log = d / "big.log"
    log.write_text(re.sub(r"GPU KV cache size: [0-9,]+", f"GPU KV cache size: {BIG}",
                          (LOGS / "vllm-21348-qwen3-235b-fp8-tp4.log").read_text()))
    v0 = d / "v0.log"
    v0.write_text(re.sub(r"GPU blocks: [0-9]+", f"GPU blocks: {BIG}",
                         (LOGS / "vllm-10517-llama31-8b-rtx3090-20k.log").read_text()))
    return _errs(Run(["reconcile", str(log), "--vllm", f"vllm serve {Q} -tp 4"], d, env),
                 Run(["check", "--vllm", f"vllm serve {Q} -tp 4", "--kv-budget-from", str(log)], d, env),
                 Run(["reconcile", str(v0), "--vllm", "vllm serve meta-llama/Llama-3.1-8B --max-model-len 20000"], d, env))


TRAIN = "torchrun --nproc-per-node=8 -m torchtitan.train --job.config_file {}"


def r9(d: Path, env: dict):
    t = d / "tt.toml"
    t.write_text(f"[parallelism]\ntensor_parallel_degree = {BIG}\n")
    return _errs(Run(["check", "--train", TRAIN.format(t), "--model", "meta-llama/Llama-3.1-70B", "--gpu", "H100-SXM"],
                     d, env))


def r10(d: Path, env: dict):
    t = d / "tt.toml"
    t.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    return _errs(Run(["check", "--train", TRAIN.format(t), "--model", "meta-llama/Llama-3.1-70B", "--gpu", "H100-SXM"],
                     d, env))


def r11(d: Path, env: dict):
    return _errs(Run(["check", "--vllm", f"vllm serve {Q} -tp 8", "--engine-version", BIG], d, env))


def r12(d: Path, env: dict):
    b = d / "b.json"
    b.write_text("[" * 100_000)
    return _errs(Run(["check", EXAMPLE, "--baseline", str(b)], d, env),
                 Run(["validate", "--baseline", str(b)], d, env),
                 Run(["place", "tensor-parallelism", "--baseline", str(b)], d, env))


def _seq(n: int) -> str:
    return ",".join(str(i) for i in range(1, n + 1))


def r13(d: Path, env: dict):
    return _errs(Run(["sweep", "--vllm", f"vllm serve {Q}", "--gpu", "H200", "--count", "65536",
                      "--tp", _seq(100), "--dcp", _seq(100)], d, env),
                 Run(["sweep", "--vllm", f"vllm serve {Q}", "--gpu", "H200", "--count", "65536",
                      "--tp", _seq(300), "--dcp", _seq(300)], d, env))


def r14(d: Path, env: dict):
    p = d / "big.prom"
    with p.open("w") as f:
        f.write("# TYPE vllm:num_requests_running gauge\n")
        line = 'vllm:num_requests_running{model_name="m",i="%07d"} 1\n'
        for i in range(1_000_000):
            f.write(line % i)
    return _errs(Run(["diagnose", str(p)], d, env))


def r15(d: Path, env: dict):
    src = SHARED / "data/metrics/nvidia_smi_query-gpu_load__nvidia-h100-80gb-hbm3__590.48.01.csv"
    head, rows = src.read_text().split("\n", 1)
    rows = [r for r in rows.split("\n") if r.strip()]
    p = d / "smi.csv"
    with p.open("w") as f:
        f.write(head + "\n")
        n = 0
        while f.tell() < 35 * 2**20:
            f.write(rows[n % len(rows)] + "\n")
            n += 1
    return _errs(Run(["diagnose", str(p)], d, env))


def r16(d: Path, env: dict):
    p = d / "s.yaml"
    p.write_text(Path(EXAMPLE).read_text() + "description: [" + "1," * 950_000 + "1]\n")
    return _errs(Run(["check", str(p)], d, env))


def r17(d: Path, env: dict):
    return _errs(Run(["evidence", "--rules", "/etc/passwd"], d, env))


def r18(d: Path, env: dict):
    s = d / "s.yaml"
    s.write_text(Path(EXAMPLE).read_text())
    text = s.read_text()
    gpu_line = re.search(r"(gpu:\s*)([^,}\n]+)", text)
    runs = [Run(["check", "--vllm", f"vllm serve {Q} -tp 8", "--gpu", g], d, env) for g in ("H10", "H200x", "1:00:00")]
    runs.append(Run(["sweep", "--vllm", f"vllm serve {Q}", "--gpu", "<script>x</script>", "--tp", "4,8"], d, env))
    typo = d / "typo.yaml"
    typo.write_text(text[:gpu_line.start(2)] + "H200x" + text[gpu_line.end(2):])
    runs.append(Run(["check", str(typo)], d, env))
    ok, ev = _errs(*runs)
    smi = d / "smi.yaml"
    smi.write_text(text[:gpu_line.start(2)] + "'NVIDIA H200'" + text[gpu_line.end(2):])
    r = Run(["check", str(smi), "--format", "json"], d, env)
    try:
        j = json.loads(r.out)
        missing = {m for u in j.get("not_evaluable", []) for m in u.get("missing") or []}
        resolved = j["stack"]["hardware"] == "H200" and "hardware" not in missing
    except (ValueError, KeyError, TypeError):
        resolved = False
    return ok and resolved, ev + f"; 'NVIDIA H200' {'resolves to H200' if resolved else 'NOT resolved'}"


def r19(d: Path, env: dict):
    fifo = d / "fifo"
    os.mkfifo(fifo)
    bomb = d / "bomb.yaml"
    bomb.write_text('a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
        f'{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n' for p, c in zip("abcdefgh", "bcdefghi")))
    return _errs(*(Run(["explain", "tensor-parallelism", *a], d, env) for a in (
        ["--stack", "/dev/zero"], ["--stack", str(d / "missing.yaml")], ["--stack", str(fifo)],
        ["--stack", str(bomb)], ["--vllm", "vllm serve x -tp nan"])))


def r20(d: Path, env: dict):
    base = (LOGS / "vllm-21348-qwen3-235b-fp8-tp4.log").read_text()
    runs = []
    for i, bad in enumerate(("-5.00 GiB", "nan GiB", "inf GiB", "1e308 GiB", "0.00 GiB", "nanx GiB")):
        p = d / f"l{i}.log"
        p.write_text(re.sub(r"Available KV cache memory: [^\n]*", f"Available KV cache memory: {bad}", base))
        runs.append(Run(["reconcile", str(p), "--vllm", f"vllm serve {Q} -tp 4"], d, env))
    v0 = d / "v0.log"
    v0.write_text(re.sub(r"GPU blocks: [0-9]+", "GPU blocks: -1952",
                         (LOGS / "vllm-10517-llama31-8b-rtx3090-20k.log").read_text()))
    runs.append(Run(["reconcile", str(v0), "--vllm", "vllm serve meta-llama/Llama-3.1-8B --max-model-len 20000"], d, env))
    return _errs(*runs)


SMI = SHARED / "data/metrics/nvidia_smi_query-gpu_load__nvidia-h100-80gb-hbm3__590.48.01.csv"
PROM = SHARED / "data/metrics/vllm_metrics_datadog_fixture_opt125m.prom"


def r21(d: Path, env: dict):
    unk = d / "unk.prom"
    unk.write_text('foo_bar 1\nbaz_qux{a="b"} 2\n')
    head = SMI.read_text().split("\n", 1)[0] + "\n"
    hdr = d / "hdr.csv"
    hdr.write_text(head)
    commas = d / "commas.csv"
    commas.write_text(head + "," * 200_000 + "\n")
    empty = d / "before"
    empty.mkdir()
    return _errs(Run(["diagnose", str(unk)], d, env), Run(["diagnose", str(hdr)], d, env),
                 Run(["diagnose", str(commas)], d, env), Run(["diagnose", str(PROM), "--before", str(empty)], d, env))


def r22(d: Path, env: dict):
    runs = []
    for i, line in enumerate((f'vllm:num_requests_running{{model_name="m"}} {BIG}',
                              f'vllm:num_requests_running{{model_name="m"}} 1 {BIG}',
                              f'DCGM_FI_DEV_GPU_UTIL{{gpu="{BIG}",modelName="NVIDIA H100 80GB HBM3"}} 50')):
        p = d / f"m{i}.prom"
        p.write_text("# TYPE x gauge\n" + line + "\n")
        runs.append(Run(["diagnose", str(p)], d, env))
    head, rows = SMI.read_text().split("\n", 1)
    first = rows.split("\n", 1)[0].split(", ")
    mib = next(i for i, c in enumerate(first) if c.endswith(" MiB"))
    first[mib] = BIG + " MiB"
    p = d / "smi.csv"
    p.write_text(head + "\n" + ", ".join(first) + "\n")
    runs.append(Run(["diagnose", str(p)], d, env))
    return _errs(*runs)


def r23(d: Path, env: dict):
    return _errs(*(Run(a, d, env) for a in (
        ["kv", "--model", Q, "--tp=١٢"],
        ["fit", str(SHARED / "data/traces/mooncake_fast25_conversation_trace.jsonl"), "--model", Q, "--tp", "١٢"],
        ["check", "--vllm", f"vllm serve {Q}", "--count", "٨"],
        ["sweep", "--vllm", f"vllm serve {Q}", "--gpu", "H200", "--tp", "٤,٨"],
        ["explain", "tensor-parallelism", "--depth", "٣"],
        ["diagnose", str(PROM), "--window", "٣٠"],
        ["gaps", "--top", "٣"])))


QWEN32 = REPO / "catalog" / "models" / "Qwen__Qwen3-32B.json"


def r24(d: Path, env: dict):
    runs = []
    for i, (k, v) in enumerate((("head_dim", 0), ("max_position_embeddings", 0), ("max_position_embeddings", []),
                                ("max_position_embeddings", True), ("max_position_embeddings", -0.0),
                                ("num_hidden_layers", 0))):
        c = json.loads(QWEN32.read_text())
        c[k] = v
        sub = d / f"m{i}"
        sub.mkdir()
        (sub / "config.json").write_text(json.dumps(c, indent=1))
        runs.append(Run(["kv", "--config", str(sub / "config.json"), "--tp", "2"], d, env))
        if k == "num_hidden_layers":
            runs.append(Run(["check", "--config", str(sub / "config.json")], d, env))
    return _errs(*runs)


def r25(d: Path, env: dict):
    text = json.dumps(json.loads(QWEN32.read_text()), indent=1).replace(
        '"num_hidden_layers": 64', '"num_hidden_layers": 2,\n "num_hidden_layers": 99999')
    p = d / "config.json"
    p.write_text(text)
    latin = d / "l"
    latin.mkdir()
    (latin / "config.json").write_bytes(QWEN32.read_bytes().replace(b'"qwen3"', b'"qwen3\xe9"'))
    return _errs(Run(["kv", "--config", str(p), "--tp", "2"], d, env),
                 Run(["kv", "--config", str(latin / "config.json"), "--tp", "2"], d, env))


def r26(d: Path, env: dict):
    runs = [Run(["check", "--vllm", f"vllm serve {Q} -tp 8", "--engine-version", v], d, env)
            for v in ("", "1.2.3.4.5.6", "18446744073709551616")]
    s = d / "v.yaml"
    s.write_text(Path(EXAMPLE).read_text() + "\nengine_version: 18446744073709551616\n")
    text = Path(EXAMPLE).read_text()
    if re.search(r"(?m)^\s+version:", text):
        s.write_text(re.sub(r"(?m)^(\s+version:\s*).*$", r"\g<1>18446744073709551616", text, count=1))
    runs.append(Run(["check", str(s)], d, env))
    return _errs(*runs)


def r27(d: Path, env: dict):
    base = ("name: t\nmodel: Qwen/Qwen3-235B-A22B\nengine: {{name: vllm}}\nhardware: {{gpu: H200, count: {count}}}\n"
            "techniques:\n  - tensor-parallelism: {{tp_size: {tp}}}\n{extra}")
    runs = []
    for i, (tp, count, extra) in enumerate((("0o17", "8", ""), ("!!str 8", "8", ""), ("8", "0x1f", ""),
                                            ("8", "8", "settings:\n  kv_budget_gib: -0.0\n"))):
        p = d / f"s{i}.yaml"
        p.write_text(base.format(tp=tp, count=count, extra=extra))
        runs.append(Run(["check", str(p)], d, env))
    return _errs(*runs)


def r28(d: Path, env: dict):
    return _errs(Run(["fit", str(SHARED / "data/traces/mooncake_fast25_conversation_trace.jsonl"), "--model", Q,
                      "--gpu", "H200", "--tp", "8", "--speculative-config", '{"method": "<script>"}'], d, env),
                 Run(["gaps", "--stage", ",,,"], d, env))


def r29(d: Path, env: dict):
    rules = d / "rules"
    shutil.copytree(REPO / "rules", rules)
    (rules / "bad1.yaml").write_text("ruleset: chekc\nrules: []\n")
    (rules / "bad2.yaml").write_text("ruleset: chekd\nrules: []\n")
    (rules / "bad3.yaml").write_text("ruleset: check\nrules:\n  - id: x\n    condition: 'tp_size >'\n")
    return _errs(Run(["check", EXAMPLE, "--rules", str(rules)], d, env),
                 Run(["sweep", "--vllm", f"vllm serve {Q}", "--gpu", "H200", "--tp", "4,8", "--rules", str(rules)], d, env))


LEAK = r"""
import gc, resource, sys, io, contextlib
import kg.cli
def rss():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * 4096 / 2**20
marks = {}
for i in range(1, N + 1):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            kg.cli.main(["check", EXAMPLE])
        except SystemExit:
            pass
    if i in (1, 100, 200, N):
        gc.collect()
        marks[i] = rss()
print(marks[1], marks[100], marks[200], marks[N])
"""


def r30(d: Path, env: dict, calls: int = 300):
    code = LEAK.replace("N + 1", f"{calls} + 1").replace("EXAMPLE", repr(EXAMPLE)).replace(", N)", f", {calls})")
    code = code.replace("marks[N]", f"marks[{calls}]")
    p = subprocess.run([PY, "-c", code], cwd=d, env=env, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        return False, "child failed: " + p.stderr.strip()[-200:]
    m1, m100, m200, mn = (float(x) for x in p.stdout.split())
    growth = mn - m200
    per_1000 = growth * 800 / max(calls - 200, 1)  # the bound: calls 200 -> 1,000 grow < 15 MiB
    return per_1000 < 15, (f"RSS {m1:.0f} MiB after call 1, {m100:.0f} after 100, {m200:.0f} after 200, "
                           f"{mn:.0f} after {calls}: +{growth:.1f} MiB after call 200, {per_1000:.1f} MiB "
                           "extrapolated to call 1,000 (bound 15)")


REPRODUCERS = {i: globals()[f"r{i}"] for i in range(1, 31)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ids", nargs="*", type=int, help="failure numbers (default: all 30)")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    ap.add_argument("--leak-calls", type=int, default=300, help="kg.cli.main calls for #30 (default 300)")
    a = ap.parse_args(argv)
    ids = a.ids or list(REPRODUCERS)
    results = {}
    warm = Path(tempfile.mkdtemp(prefix="hostile-cache-"))
    Run(["check", EXAMPLE], REPO, dict(os.environ, OPTKG_CACHE_DIR=str(warm)))
    for i in ids:
        with tempfile.TemporaryDirectory(prefix=f"hostile{i}-") as t:
            d = Path(t)
            env = dict(os.environ, OPTKG_CACHE_DIR=str(d / "cache" if i == 6 else warm), OPTKG_STATE_DIR=str(d / "state"),
                       HOME=str(d / "home"), PYTHONHASHSEED="0")
            env.pop("OPTKG_HOME", None)
            (d / "home").mkdir()
            t0 = time.monotonic()
            try:
                fixed, ev = r30(d, env, a.leak_calls) if i == 30 else REPRODUCERS[i](d, env)
            except Exception as e:  # the harness's own failure is shown, never counted as fixed
                fixed, ev = False, f"harness: {type(e).__name__}: {e}"
            results[i] = (fixed, ev)
            line = f"#{i:<2} {'fixed' if fixed else 'OPEN '}  {ev}  [{time.monotonic() - t0:.0f} s]"
            if not a.markdown:
                print(line, flush=True)
    shutil.rmtree(warm, ignore_errors=True)
    if a.markdown:
        print("| # | class | status | evidence |\n|---|---|---|---|")
        for i, (fixed, ev) in results.items():
            cls = next(c for c, ns in CLASSES.items() if i in ns)
            print(f"| {i} | {cls} | {'fixed' if fixed else 'open'} | {ev.replace('|', '/')} |")
    print("open per class: " + ", ".join(
        f"{c} {sum(1 for n in ns if n in results and not results[n][0])}" for c, ns in CLASSES.items()))
    return 0 if all(f for f, _ in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
