"""optkg evidence on small wheels built here (zip files with a dist-info): found, moved and gone, and release selection."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from report_text import unwrap

from kg.analyses.evidence import Item, WheelReader, check_item, fetch_wheel, items_from_engine_tables, run, select_items
from kg.core.errors import OptkgError

REPO = Path(__file__).resolve().parents[1]

CACHE_V1 = "# cache config\nclass CacheConfig:\n    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)\n    swap_space: float = 4\n"
# 1.1: two lines inserted above, the default changed, swap_space removed
CACHE_V2 = ("# cache config\nimport os\n\nclass CacheConfig:\n"
            "    gpu_memory_utilization: float = Field(default=0.92, gt=0, le=1)\n    block_size: int = 16\n")


def make_wheel(folder: Path, dist: str, version: str, files: dict[str, str]) -> Path:
    """A minimal wheel: the given files plus <dist>-<version>.dist-info/{METADATA,WHEEL,RECORD}."""
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: optkg-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path


@pytest.fixture()
def wheels(tmp_path: Path) -> Path:
    make_wheel(tmp_path, "vllm", "1.0.0", {"vllm/config/cache.py": CACHE_V1})
    make_wheel(tmp_path, "vllm", "1.1.0", {"vllm/config/cache.py": CACHE_V2})
    return tmp_path


def item(snippet: str, line: int | None, release: str = "1.0.0", path: str = "vllm/config/cache.py",
         versions: str | None = ">=1.0.0", owner: str = "rule:r", role: str = "holds") -> Item:
    return Item(owner, "vllm", "vllm", release, path, snippet, line, role, versions)


def test_found_moved_gone_in_one_wheel(wheels: Path):
    reader = WheelReader(wheels / "vllm-1.1.0-py3-none-any.whl")
    found = check_item(item("class CacheConfig:", 4), reader, "1.1.0")
    moved = check_item(item("class CacheConfig:", 2), reader, "1.1.0")
    gone = check_item(item("swap_space: float = 4", 4), reader, "1.1.0")
    no_file = check_item(item("x", 1, path="vllm/config/parallel.py"), reader, "1.1.0")
    assert (found.status, found.lines) == ("found", [4])
    assert (moved.status, moved.lines, moved.note) == ("moved", [4], "recorded at line 2")
    assert (gone.status, gone.note) == ("gone", "snippet not in the file")
    assert (no_file.status, no_file.note) == ("gone", "vllm/config/parallel.py is not in vllm-1.1.0-py3-none-any.whl")
    reader.close()


def test_each_item_at_its_own_release(wheels: Path):
    items = [item("gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)", 3, owner="rule:a"),
             item("class CacheConfig:", 4, release="1.1.0", owner="rule:b")]
    results = run(items, cache_dir=wheels / "cache", wheel_dirs=[wheels], offline=True)
    assert [(r.item.owner, r.checked_release, r.status) for r in results] == [("rule:a", "1.0.0", "found"), ("rule:b", "1.1.0", "found")]


def test_a_new_release_checks_the_newest_knowledge(wheels: Path):
    # open-ended fact recorded at 1.0.0, checked against 1.1.0: the class moved two lines, the default changed
    items = [item("class CacheConfig:", 2, owner="rule:open"),
             item("gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)", 3, owner="rule:default"),
             item("swap_space: float = 4", 4, versions=">=1.0.0,<1.1.0", owner="rule:bounded")]
    results = run(items, engine="vllm", release="1.1.0", cache_dir=wheels / "cache", wheel_dirs=[wheels], offline=True)
    # the bounded fact does not claim 1.1.0 and is not checked
    assert [(r.item.owner, r.status, r.lines) for r in results] == [("rule:default", "gone", []), ("rule:open", "moved", [4])]


def test_select_takes_the_newest_recorded_release_not_after_the_asked_one():
    items = [item("a", 1, release="1.0.0"), item("b", 1, release="1.1.0"), item("c", 1, release="1.2.0"),
             item("d", 1, release="1.1.0", role="changed")]
    assert [(i.snippet, rel) for i, rel in select_items(items, "vllm", "1.1.0")] == [("b", "1.1.0")]
    assert [(i.snippet, rel) for i, rel in select_items(items, "vllm", "2.0")] == [("c", "2.0")]
    with pytest.raises(OptkgError, match="needs --engine"):
        select_items(items, None, "1.1.0")
    with pytest.raises(OptkgError, match="not a version number"):
        select_items(items, "vllm", "latest")


def test_offline_without_the_wheel_is_a_one_line_error(tmp_path: Path):
    with pytest.raises(OptkgError, match=r"no wheel for vllm==9\.9\.9 .* --offline forbids pip download"):
        fetch_wheel("vllm", "9.9.9", tmp_path / "cache", [tmp_path], offline=True)


def test_engine_table_entries_carry_evidence(tmp_path: Path):
    (tmp_path / "vllm.yaml").write_text(
        "engine: vllm\nflags:\n"
        "  - {names: [--swap-space], set: swap_space_gib, type: number, since: '1.0.0', until: '1.1.0',\n"
        "     evidence: [{package: vllm, release: '1.0.0', path: vllm/config/cache.py, line: 4, snippet: 'swap_space: float = 4'}]}\n"
        "env:\n"
        "  VLLM_X: {set: x, type: boolean, since: '1.1.0', evidence: [{package: vllm, release: '1.1.0', path: vllm/envs.py, snippet: 'VLLM_X'}]}\n"
        "defaults_evidence:\n"
        "  gpu_memory_utilization:\n"
        "    - {package: vllm, release: '1.1.0', path: vllm/config/cache.py, line: 5, snippet: 'default=0.92'}\n")
    items = items_from_engine_tables(tmp_path)
    assert [(i.owner, i.versions, i.release) for i in items] == [
        ("engine:vllm:flag --swap-space", ">=1.0.0,<1.1.0", "1.0.0"), ("engine:vllm:env VLLM_X", ">=1.1.0", "1.1.0"),
        ("engine:vllm:defaults gpu_memory_utilization", None, "1.1.0")]


RULES = """ruleset: check
rules:
  - id: demo-swap
    title: demo
    severity: error
    applies_to: {engines: [vllm], versions: ">=1.0.0,<1.2.0"}
    evidence:
      - {package: vllm, release: "1.0.0", path: vllm/config/cache.py, line: 4, snippet: "swap_space: float = 4"}
    match: [{kind: model}]
    message: m
    sources: [{title: s, url: "https://example.org"}]
"""


def test_cli_reports_gone_and_exits_1(wheels: Path, tmp_path: Path):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "r.yaml").write_text(RULES)
    (tmp_path / "catalog" / "engines").mkdir(parents=True)
    base = [sys.executable, "-m", "kg.cli", "evidence", "--rules", str(rules), "--catalog", str(tmp_path / "catalog"),
            "--wheel-dir", str(wheels), "--offline", "--cache-dir", str(tmp_path / "cache")]
    ok = subprocess.run(base + ["--engine", "vllm", "--release", "1.0.0"], capture_output=True, text=True, cwd=REPO)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[-1] == "found 1, moved 0, gone 0"
    bad = subprocess.run(base + ["--engine", "vllm", "--release", "1.1.0"], capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 1
    assert "GONE  rule:demo-swap: vllm 1.1.0 vllm/config/cache.py: snippet not in the file" in bad.stdout
    assert bad.stdout.splitlines()[-1] == "found 0, moved 0, gone 1"
    none = subprocess.run(base + ["--engine", "vllm", "--release", "1.3.0"], capture_output=True, text=True, cwd=REPO)
    assert none.returncode == 2 and "nothing was checked" in none.stderr and "Traceback" not in none.stderr


# ---------------------------------------------------------------- the engines' own checks (kg.analyses.enginechecks)
from kg.analyses.enginechecks import coverage, load_checks, scan_text, scan_wheel  # noqa: E402

SRC = '''def check(self):
    # speculative decoding is not supported with pipeline parallelism (a comment, skipped)
    if self.pp > 1 and self.spec:
        raise ValueError(
            "Speculative decoding is not supported with "
            "pipeline parallelism."
        )
    if self.a and self.b:
        raise ValueError("--a and --b are mutually exclusive")
'''


def test_scan_finds_messages_not_comments(tmp_path: Path):
    found = scan_text("vllm/config/x.py", SRC, "vllm")
    assert [(c.id, c.line, c.message) for c in found] == [
        ("vllm-config-x-5", 5, "Speculative decoding is not supported with pipeline parallelism."),
        ("vllm-config-x-9", 9, "--a and --b are mutually exclusive")]
    whl = make_wheel(tmp_path, "vllm", "2.0.0", {"vllm/config/x.py": SRC, "vllm/other/y.py": SRC})
    assert len(scan_wheel(whl, "vllm", ["vllm/config/"])) == 2


def test_coverage_counts_and_unknown_rules(tmp_path: Path):
    (tmp_path / "vllm-2.0.0.yaml").write_text(
        "engine: vllm\nrelease: '2.0.0'\nchecks:\n"
        "  - {id: a, path: vllm/config/x.py, line: 5, snippet: x, covered_by: [rule-a]}\n"
        "  - {id: b, path: vllm/config/x.py, line: 9, snippet: y, not_covered: no fact}\n"
        "  - {id: c, path: vllm/config/x.py, line: 9, snippet: y}\n")
    (f,) = coverage(load_checks(tmp_path), {"rule-a"})
    assert (f["total"], f["covered"], f["percent"]) == (3, 1, 33.3)
    assert [r["status"] for r in f["rows"]] == ["covered", "not covered", "unmapped"]
    with pytest.raises(OptkgError, match="check a names unknown rule"):
        coverage(load_checks(tmp_path), set())


def test_shipped_engine_check_lists():
    from kg.engine.rules import RULESET_KINDS, load_ruleset
    ids = {r.id for k in RULESET_KINDS for r in load_ruleset(k).rules}
    files = {(f["engine"], f["release"]): f for f in coverage(load_checks(REPO / "catalog" / "engines" / "checks"), ids)}
    # scanned from the released wheels: 36 messages in vllm/config/ + engine/arg_utils.py, 69 in sglang/srt/arg_groups/
    # SGLang covered: lane a 31 of rows 1-35 (rules/engine_checks_sglang_a.yaml + 2 older rules), lane b all 34 of rows 36-69
    # vLLM covered: 6 before + 28 from rules/engine_checks_vllm.yaml (2 left with a reason)
    assert {k: (f["total"], f["covered"]) for k, f in files.items()} == {("vllm", "0.33.0"): (36, 34), ("sglang", "0.5.23"): (69, 65)}
    assert all(r["status"] != "unmapped" for f in files.values() for r in f["rows"])
    doc = (REPO / "docs" / "engine-checks.md").read_text()
    assert "| vllm | 0.33.0 | 36 | 34 | 94.4 % |" in doc and "| sglang | 0.5.23 | 69 | 65 | 94.2 % |" in doc


UNPINNED_RULE = """  - id: demo-unpinned
    title: demo
    severity: warning
    applies_to: {engines: [trtllm], versions: ">=0.16.0"}
    evidence_unpinned: "the wheel is a stub sdist whose build downloads from an unreachable index"
    match: [{kind: model}]
    message: m
    sources: [{title: s, url: "https://example.org"}]
"""


def test_cli_lists_unpinned_rules_and_never_counts_them_found(wheels: Path, tmp_path: Path):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "r.yaml").write_text(RULES + UNPINNED_RULE)
    (tmp_path / "catalog" / "engines").mkdir(parents=True)
    base = [sys.executable, "-m", "kg.cli", "evidence", "--rules", str(rules), "--catalog", str(tmp_path / "catalog"),
            "--wheel-dir", str(wheels), "--offline", "--cache-dir", str(tmp_path / "cache")]
    only = subprocess.run(base + ["--engine", "trtllm"], capture_output=True, text=True, cwd=REPO)
    assert only.returncode == 0, only.stderr
    assert unwrap(only.stdout).splitlines() == [  # the text is wrapped at 100 columns
        "optkg evidence: 0 item(s) checked for trtllm (each item at its own release)",
        "found 0, moved 0, gone 0",
        "unpinned: 1 engine rule(s) rest on public docs or issues, not on a released source (nothing verified):",
        "  demo-unpinned: the wheel is a stub sdist whose build downloads from an unreachable index"]
    js = subprocess.run(base + ["--engine", "trtllm", "--format", "json"], capture_output=True, text=True, cwd=REPO)
    import json
    doc = json.loads(js.stdout)
    assert doc["summary"]["found"] == 0 and doc["rules_unpinned"] == [
        {"rule": "demo-unpinned", "reason": "the wheel is a stub sdist whose build downloads from an unreachable index"}]
    # the vLLM items are checked as before; the trtllm rule is not listed for another engine
    vllm = subprocess.run(base + ["--engine", "vllm", "--release", "1.0.0"], capture_output=True, text=True, cwd=REPO)
    assert vllm.returncode == 0 and vllm.stdout.splitlines()[-1] == "found 1, moved 0, gone 0"


@pytest.mark.parametrize("typo, hint", [("vlm", "did you mean vllm? "), ("sglnag", "did you mean sglang? "),
                                        ("foo", "")])
def test_an_unknown_engine_is_refused_with_the_nearest_engine_that_has_evidence(capsys, typo, hint):
    from kg.cli import main
    assert main(["evidence", "--engine", typo, "--offline"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"optkg: error: --engine: no evidence for engine '{typo}'; {hint}(engines with evidence: ")
    assert "Traceback" not in err
