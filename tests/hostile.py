"""The reproductions of ../shared/reference/hostile_inputs.md as data (issue 17).

Each ``Case`` names the report's id and verdict, builds its inputs under a fresh folder ``bk`` (the
report's ``bk/``), and gives the ``optkg`` argv plus what must hold now. ``tests/test_hostile_inputs.py``
runs every case (in-process unless the sink is the process itself); ``tests/test_fuzz_targets.py``
reuses the builders. Paths into the checkout are absolute (``REPO``), the shared data is ``SHARED``.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from conftest import REPO, SHARED

EXAMPLE = str(REPO / "examples" / "qwen3-235b-tp8.yaml")
QWEN32 = REPO / "catalog" / "models" / "Qwen__Qwen3-32B.json"
PROM = SHARED / "data" / "metrics" / "vllm_metrics_datadog_fixture_opt125m.prom"
SMI = SHARED / "data" / "metrics" / "nvidia_smi_query-gpu_load__nvidia-h100-80gb-hbm3__590.48.01.csv"
MOONCAKE = SHARED / "data" / "traces" / "mooncake_fast25_conversation_trace.jsonl"
AZURE = SHARED / "data" / "traces" / "azure_llm_inference_2023_code.csv"
MODEL = "Qwen/Qwen3-235B-A22B"
FIT = ["--model", MODEL, "--tp", "8", "--gpu", "H200"]

STACK = """name: t
model: Qwen/Qwen3-235B-A22B
engine: {name: vllm}
hardware: {gpu: H200, count: 8}
techniques:
  - tensor-parallelism: {tp_size: 8}
settings:
  max_model_len: 32768
"""


@dataclass
class Case:
    id: str
    verdict: str  # the report's verdict before the fix
    build: Callable[[Path], list[str]]  # writes inputs under bk, returns the optkg argv
    expect: Callable[[int, str, str, Path], None]
    env: dict[str, str] = field(default_factory=dict)  # extra environment ({bk} is replaced)
    process: bool = False  # run as a subprocess (the sink is the process: exit code, stdout, console)
    shell: str = ""  # for process cases: shell redirections after the command


# -- expectations -------------------------------------------------------------------------------

def error(*needles: str) -> Callable[[int, str, str, Path], None]:
    """Bad input: exit 2, stderr starts with one ``optkg: error:`` line naming each needle."""
    def check(rc: int, out: str, err: str, bk: Path) -> None:
        assert rc == 2, (rc, err[-500:])
        first = err.split("\n", 1)[0]
        assert first.startswith("optkg: error: "), err[-500:]
        assert "internal error" not in err and "Traceback" not in err, err[-500:]
        for n in needles:
            assert n in err, (n, err[-800:])
    return check


def ok(*needles: str, rc: tuple[int, ...] = (0, 1)) -> Callable[[int, str, str, Path], None]:
    """A sane result: exit 0/1, no internal error; stdout holds each needle."""
    def check(rc_: int, out: str, err: str, bk: Path) -> None:
        assert rc_ in rc, (rc_, err[-500:])
        assert "internal error" not in err and "Traceback" not in err, err[-500:]
        for n in needles:
            assert n in out, (n, out[-800:])
    return check


def both(*checks: Callable[[int, str, str, Path], None]) -> Callable[[int, str, str, Path], None]:
    def check(rc: int, out: str, err: str, bk: Path) -> None:
        for c in checks:
            c(rc, out, err, bk)
    return check


def file_is(rel: str, text: str) -> Callable[[int, str, str, Path], None]:
    def check(rc: int, out: str, err: str, bk: Path) -> None:
        assert (bk / rel).read_text() == text, (bk / rel).read_text()[:200]
    return check


def absent(rel: str) -> Callable[[int, str, str, Path], None]:
    def check(rc: int, out: str, err: str, bk: Path) -> None:
        assert not (bk / rel).exists(), rel
    return check


def no_raw(*needles: str) -> Callable[[int, str, str, Path], None]:
    """None of ``needles`` (raw escapes, raw HTML) reaches stdout or stderr."""
    def check(rc: int, out: str, err: str, bk: Path) -> None:
        for n in needles:
            assert n not in out and n not in err, (n, out[:500])
    return check


def no_line_starts(prefix: str) -> Callable[[int, str, str, Path], None]:
    def check(rc: int, out: str, err: str, bk: Path) -> None:
        assert not any(line.startswith(prefix) for line in out.splitlines()), out[:500]
    return check


# -- builders -------------------------------------------------------------------------------------

def stack(bk: Path, name: str, text: str) -> str:
    p = bk / name
    p.write_text(text)
    return str(p)


def config(bk: Path, name: str, **update: Any) -> str:
    c = json.loads(QWEN32.read_text())
    c.update(update)
    p = bk / name
    p.write_text(json.dumps(c))
    return str(p)


def rules_copy(bk: Path, name: str, edit: Callable[[dict], None], file: str = "kv_parallel.yaml") -> str:
    d = bk / name
    shutil.copytree(REPO / "rules", d)
    p = d / file
    data = yaml.safe_load(p.read_text())
    edit(data)
    p.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return str(d)


def rule0(**fields: Any) -> Callable[[dict], None]:
    def edit(d: dict) -> None:
        r = d["rules"][0]
        for k, v in fields.items():
            if k.startswith("numbers."):
                r["numbers"][k[8:]] = v
            else:
                r[k] = v
    return edit


def home_copy(bk: Path, name: str = "home") -> Path:
    h = bk / name
    shutil.copytree(REPO / "catalog", h / "catalog")
    shutil.copytree(REPO / "rules", h / "rules")
    return h


EVIL_NAME = ('Evil "]; evil [label="pwn"]; x [shape=box label=" </text><script>alert(1)</script> | a | b | '
             '<img src=x onerror=alert(2)> `code` [link](javascript:alert(3)) %% mermaid --> click X call alert(4) '
             '& &amp; \u202e')


def evil_home(bk: Path) -> Path:
    """The report's hostile technique ``evil-tech`` in a catalog copy (E07-E15)."""
    h = home_copy(bk)
    t = yaml.safe_load((h / "catalog/techniques/prefix-caching.yaml").read_text())
    t.update(id="evil-tech", aliases=["evil-alias"], tags=["kv-cache"], short_name='E"]<', name=EVIL_NAME,
             summary='summary with | pipes | and <script>x</script> and ]]> CDATA end and "quotes"')
    t["couplings"] = [c for c in t["couplings"] if c.get("target") == "paged-kv-cache"]
    t["couplings"][0]["mechanism"] = 'mech "]; evil2 [label="x"]; </title><script>alert(5)</script> | pipe |'
    t["couplings"].append({"kind": "conflicts_with", "target": "tensor-parallelism", "from_dimension": "compute",
                           "to_dimension": "compute", "severity": "warning",
                           "mechanism": 'conflict mech | pipe | <script>alert(6)</script> "]; x [label="y',
                           "sources": [{"title": "src <b>bold</b> | p", "url": 'https://example.com/a"b<c>',
                                        "kind": "doc"}]})
    (h / "catalog/techniques/evil-tech.yaml").write_text(yaml.safe_dump(t, sort_keys=False, allow_unicode=True))
    return h


def evil_stack(bk: Path) -> str:
    return stack(bk, "evil-stack.yaml", 'name: "Evil <script>alert(7)</script> | x | \\n::error::INJECTED"\n'
                 "model: Qwen/Qwen3-235B-A22B\nengine: {name: vllm}\nhardware: {gpu: H200, count: 8}\n"
                 "techniques:\n  - tensor-parallelism: {tp_size: 8}\n  - evil-tech\n")


def evil_args(bk: Path) -> list[str]:
    h = bk / "home"
    return ["--catalog", str(h / "catalog"), "--rules", str(h / "rules")]


def fifo(bk: Path, name: str) -> str:
    import os
    p = bk / name
    os.mkfifo(p)
    return str(p)
