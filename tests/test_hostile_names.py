"""No name a user controls can start a line of optkg's output: every command, every format.

A line break in a file name (git allows it), a technique name, a stack name, a rule message or a model
name, printed raw, lets the text after it start a line -- ``::error::...`` is a workflow command GitHub
Actions executes from a job's output, and a fake ``catalog OK`` line misleads a reader. Every name
optkg prints is escaped (kg.core.textsafe: ``\\n`` shown as the two characters) in text, markdown,
GitHub, SARIF, JSON and HTML output, on stdout and stderr.

The sweep runs every sub-command in every output format on inputs that carry the marker
``\\n::error::INJ`` in each name slot it can reach, and fails on any output line that begins with the
marker's command. ``make test`` runs the text and GitHub formats; ``make fuzz`` (slow) runs all.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import REPO, SHARED, run_cli

NL = "\n::error::INJ"
SMI = SHARED / "data" / "metrics" / "nvidia_smi_query-gpu_load__nvidia-h100-80gb-hbm3__590.48.01.csv"
PROM = SHARED / "data" / "metrics" / "vllm_metrics_datadog_fixture_opt125m.prom"
TRACE = SHARED / "data" / "traces" / "mooncake_fast25_conversation_trace.jsonl"
LOG = REPO / "tests" / "fixtures" / "logs" / "vllm-21348-qwen3-235b-fp8-tp4.log"
QWEN32 = REPO / "catalog" / "models" / "Qwen__Qwen3-32B.json"
Q = "Qwen/Qwen3-235B-A22B"


def injected(text: str) -> list[str]:
    """The lines of ``text`` that the marker starts (after optional spaces): each is an injection."""
    return [ln for ln in text.replace("\r", "\n").split("\n") if ln.lstrip().startswith("::error::INJ")]


@pytest.fixture(scope="module")
def bk(tmp_path_factory) -> Path:
    """A catalog and rules copy with the marker in a technique's names and a rule's message, and input files
    whose names (and stack name) carry it."""
    bk = tmp_path_factory.mktemp("names")
    home = bk / "home"
    shutil.copytree(REPO / "catalog", home / "catalog")
    shutil.copytree(REPO / "rules", home / "rules")
    t = yaml.safe_load((home / "catalog/techniques/prefix-caching.yaml").read_text())
    t.update(id="evil-tech", aliases=["evil-alias"], name="Evil" + NL + "-name", short_name="E" + NL + "-short",
             summary="summary" + NL + "-summary")
    t["couplings"] = [c for c in t["couplings"] if c.get("target") == "paged-kv-cache"]
    t["couplings"][0]["mechanism"] = "mech" + NL + "-mechanism"
    t["couplings"].append({"kind": "conflicts_with", "target": "tensor-parallelism", "from_dimension": "compute",
                           "to_dimension": "compute", "severity": "warning", "mechanism": "conflict" + NL + "-conflict",
                           "sources": [{"title": "src" + NL + "-src", "url": "https://example.com/a", "kind": "doc"}]})
    (home / "catalog/techniques/evil-tech.yaml").write_text(yaml.safe_dump(t, sort_keys=False, allow_unicode=True))
    rules = yaml.safe_load((home / "rules/kv_parallel.yaml").read_text())
    for r in rules["rules"]:
        r["message"] = "rule" + NL + "-rule " + r["message"]
    (home / "rules/kv_parallel.yaml").write_text(yaml.safe_dump(rules, sort_keys=False, allow_unicode=True))
    d = bk / ("in" + NL + "-dir")
    d.mkdir()
    (d / ("s" + NL + "-file.yaml")).write_text(
        f'name: "x\\n::error::INJ-stack"\nmodel: {Q}\nengine: {{name: vllm}}\nhardware: {{gpu: H200, count: 8}}\n'
        "techniques:\n  - tensor-parallelism: {tp_size: 8}\n  - evil-tech\n  - prefix-caching\n"
        "settings:\n  max_model_len: 32768\n")
    bad = dict(t, id="bad" + "-tech")
    bad.pop("couplings")
    (d / ("t" + NL + "-tech.yaml")).write_text(yaml.safe_dump(bad, sort_keys=False) + "x: [\n")
    shutil.copy(SMI, d / ("m" + NL + "-smi.csv"))
    shutil.copy(PROM, d / ("p" + NL + "-prom.prom"))
    shutil.copy(TRACE, d / ("r" + NL + "-trace.jsonl"))
    shutil.copy(LOG, d / ("l" + NL + "-log.log"))
    shutil.copy(QWEN32, d / ("c" + NL + "-config.json"))
    return bk


def _f(bk: Path, stem: str) -> str:
    d = bk / ("in" + NL + "-dir")
    return str(next(p for p in d.iterdir() if p.name.startswith(stem + "\n")))


def _home(bk: Path) -> list[str]:
    return ["--catalog", str(bk / "home" / "catalog"), "--rules", str(bk / "home" / "rules")]


# (command id, argv builder, formats)
COMMANDS = [
    ("check-file", lambda b: ["check", _f(b, "s"), *_home(b)], ("text", "json", "sarif", "markdown", "github", "html")),
    ("check-served-name", lambda b: ["check", "--vllm", f"vllm serve {Q} -tp 8 --served-model-name 'a{NL}-served'"],
     ("text", "json", "sarif", "markdown", "github", "html")),
    ("check-model", lambda b: ["check", "--vllm", f"vllm serve 'Qwen/Qwen3-8B{NL}-model' -tp 8"], ("text", "json")),
    ("check-gpu", lambda b: ["check", "--vllm", f"vllm serve {Q} -tp 8", "--gpu", "H200" + NL + "-gpu"],
     ("text", "github")),
    ("check-config", lambda b: ["check", "--config", _f(b, "c")], ("text", "json", "markdown", "github")),
    ("validate-file", lambda b: ["validate", _f(b, "t"), *_home(b)], ("text", "json", "sarif", "markdown", "github")),
    ("validate-catalog", lambda b: ["validate", *_home(b)], ("text", "json", "sarif", "markdown", "github")),
    ("place", lambda b: ["place", _f(b, "t"), *_home(b)], ("text", "json", "sarif", "markdown", "github")),
    ("explain-one", lambda b: ["explain", "evil-tech", *_home(b)], ("text", "json")),
    ("explain-two", lambda b: ["explain", "evil-tech", "tensor-parallelism", *_home(b)], ("text", "json")),
    ("matrix", lambda b: ["matrix", *_home(b)], ("text", "json")),
    ("gaps", lambda b: ["gaps", *_home(b)], ("text", "json", "markdown")),
    ("export-graph", lambda b: ["export", "graph", "--focus", "evil-tech", "-o", "-", *_home(b)],
     ("dot", "mermaid", "graphml", "json")),
    ("diagnose-smi", lambda b: ["diagnose", _f(b, "m")], ("text", "json", "markdown")),
    ("diagnose-prom", lambda b: ["diagnose", _f(b, "p")], ("text", "json", "markdown")),
    ("fit", lambda b: ["fit", _f(b, "r"), "--model", Q, "--tp", "8", "--gpu", "H200"], ("text", "json", "markdown")),
    ("kv", lambda b: ["kv", "--config", _f(b, "c"), "--tp", "2"], ("text", "json")),
    ("reconcile", lambda b: ["reconcile", _f(b, "l"), "--vllm", f"vllm serve {Q} -tp 4"], ("text", "json")),
    ("sweep", lambda b: ["sweep", _f(b, "s"), "--tp", "4,8", *_home(b)], ("text", "json", "csv")),
    ("models", lambda b: ["models", "Qwen" + NL + "-filter"], ("text", "json")),
    ("new", lambda b: ["new", "fresh-tech-y", "-o", str(b / ("in" + NL + "-dir"))], (None,)),
    ("docs-check", lambda b: ["docs", "--check", "-o", str(b / ("in" + NL + "-dir")), *_home(b)], (None,)),
    ("evidence-rules", lambda b: ["evidence", "--rules", _f(b, "s")], (None,)),
]
FAST = {"text", "github", None, "dot"}


def _cases(fast: bool):
    for cid, build, formats in COMMANDS:
        for fmt in formats:
            if (fmt in FAST) == fast or not fast and fmt in FAST:
                yield pytest.param(cid, build, fmt, id=f"{cid}-{fmt}")


def _sweep(bk: Path, build, fmt) -> None:
    argv = build(bk) + (["--format", fmt] if fmt else [])
    code, out, err = run_cli(*argv)
    assert code in (0, 1, 2), (argv, err[-500:])
    assert "internal error" not in err and "Traceback" not in err, err[-800:]
    assert not injected(out), injected(out)[:3]
    assert not injected(err), injected(err)[:3]
    if fmt == "json" and code != 2:
        json.loads(out)  # still a JSON document


@pytest.mark.parametrize("cid,build,fmt", list(_cases(fast=True)))
def test_no_name_starts_a_line_of_output(bk, cid, build, fmt):
    """hostile_inputs_turn3.md #3 (validate: a file named ``nl\\n::error::INJECTED.yaml``) and #4 (explain: a technique
    named ``...\\n::error::INJECTED``), and every other command and name slot with them."""
    _sweep(bk, build, fmt)


@pytest.mark.slow
@pytest.mark.parametrize("cid,build,fmt", [c for c in _cases(fast=False)])
def test_no_name_starts_a_line_of_output_in_any_format(bk, cid, build, fmt):
    _sweep(bk, build, fmt)


def test_the_sweep_reaches_every_command():
    from kg.cli import COMMANDS as ALL
    reached = {cid.split("-")[0] for cid, _, _ in COMMANDS}
    assert set(ALL) - reached == {"schema"}  # schema prints no user name


def test_validate_changed_since_refuses_a_git_option(tmp_path):
    """hostile_inputs_turn3.md #7: ``validate --changed-since=--fork-point`` (and ``--``) passed an option to git and
    printed "catalog OK"; ``--changed-since=--help`` made git's man page the one-line error."""
    for ref in ("--fork-point", "--", "--help", "-c"):
        code, out, err = run_cli("validate", f"--changed-since={ref}")
        assert code == 2, (ref, out)
        assert err.startswith(f"optkg: error: --changed-since: {ref!r} is not a git revision"), err
        assert err.count("\n") == 1 and "catalog OK" not in out


def test_docs_refuses_a_symlinked_output_folder(tmp_path):
    """Found by make fuzz (the class of hostile_inputs_turn3.md #5): ``docs -o LINK`` wrote rules.md,
    techniques.md, ... into the folder the link points to."""
    from conftest import run_cli
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "L").symlink_to(victim)
    code, out, err = run_cli("docs", "-o", str(tmp_path / "L"))
    assert code == 2 and "is a symbolic link to" in err and err.count("\n") == 1, err
    assert list(victim.iterdir()) == []
