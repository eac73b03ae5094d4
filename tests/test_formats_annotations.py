"""GitHub workflow-command annotations and markdown PR comments (kg.output.formats)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from catalog_copy import copy_catalog, dump, optkg, technique
from kg.core.errors import OptkgError
from kg.output.formats import render

PROBLEM = {
    "code": "schema-enum", "severity": "error", "file": "cat/a,b:c.yaml", "line": 3, "column": 5,
    "path": "coordinates.layers[0]", "message": "'L9' is not a valid layer", "found": "L9", "expected": "",
    "hint": "100% sure\nreally", "valid_values": [{"value": "L1", "description": "Hardware | chips"}], "tags": ["schema"],
    "fingerprint": "0123456789abcdef",
}
REPORT = {"schema_version": "1.0", "kind": "validate", "techniques": 1, "problems": [PROBLEM], "suppressed": 0}


def test_github_annotation_escapes_exactly() -> None:
    out = render("github", "validate", REPORT).splitlines()
    # properties escape % CR LF : , ; the message escapes % CR LF (GitHub workflow-command rules)
    assert out[0] == ("::error file=cat/a%2Cb%3Ac.yaml,line=3,col=5,title=optkg validate%3A schema-enum%3A "
                      "coordinates.layers[0]::coordinates.layers[0]: 'L9' is not a valid layer [schema-enum]"
                      "%0Afound: 'L9'%0Avalid values: L1 (Hardware | chips)%0Ahint: 100%25 sure%0Areally")
    assert out[1] == "::notice title=optkg validate::1 problem(s) in 1 file(s): 1 error(s), 0 warning(s)"
    assert len(out) == 2


def test_github_levels_follow_severity() -> None:
    warn = dict(PROBLEM, severity="warning", hint="", found=None, valid_values=[])
    out = render("github", "validate", dict(REPORT, problems=[warn])).splitlines()
    assert out[0].startswith("::warning file=")
    check = {"schema_version": "1.0", "kind": "check", "stack": {"name": "s", "source": "--vllm"},
             "findings": [{"rule_id": "r1", "title": "T", "severity": "info", "message": "m", "rule_file": "rules/x.yaml",
                           "rule_line": 7, "techniques": [], "tags": [], "sources": []}]}
    line = render("github", "check", check).splitlines()[0]
    # a pasted command has no file in the user's repository: no file= (the rule file is optkg's own)
    assert line.startswith("::notice title=optkg check%3A T::m [r1]")


def test_an_input_file_without_line_positions_is_annotated_at_its_first_line(tmp_path: Path) -> None:
    ds = tmp_path / "ds_config.json"  # a DeepSpeed JSON: the finding belongs to the user's file, not rules/*.yaml
    ds.write_text("{}")
    check = {"schema_version": "1.0", "kind": "check", "stack": {"name": "s", "source": str(ds)},
             "findings": [{"rule_id": "r1", "title": "T", "severity": "error", "message": "m", "rule_file": "rules/x.yaml",
                           "rule_line": 7, "techniques": [], "tags": [], "sources": []}]}
    line = render("github", "check", check).splitlines()[0]
    assert line.startswith(f"::error file={str(ds).replace(':', '%3A')},line=1,col=1,title=optkg check%3A T::m [r1]")


def test_markdown_comment_table_escapes_pipes() -> None:
    md = render("markdown", "validate", REPORT)
    lines = md.splitlines()
    assert lines[0] == "<!-- optkg:validate -->"
    assert lines[1] == "### optkg validate: 1 problem(s) in 1 file(s): 1 error(s), 0 warning(s)"
    assert ("| error | `cat/a,b:c.yaml:3:5` | `coordinates.layers[0]` | 'L9' is not a valid layer (`schema-enum`) | "
            "100% sure<br>really |") in lines
    assert "  - `L1`: Hardware | chips" in lines


def test_unknown_format_or_kind_is_a_user_error() -> None:
    with pytest.raises(OptkgError, match="unknown format 'xml'"):
        render("xml", "validate", REPORT)
    with pytest.raises(OptkgError, match="no renderer for report kind 'explain'"):
        render("sarif", "explain", REPORT)


def test_formats_from_the_cli_for_all_three_kinds(tmp_path: Path) -> None:
    home = copy_catalog(tmp_path / "home")
    stack = home / "stack.yaml"
    stack.write_text("model: Qwen/Qwen3-235B-A22B\ntechniques:\n  - tensor-parallelism: {tp_size: 8}\n", encoding="utf-8")
    md = optkg(["check", "stack.yaml", "--format", "markdown"], home)
    assert md.stdout.startswith("<!-- optkg:check -->\n### optkg check: stack: 1 finding(s)")
    assert "| warning | `kv-head-replication` |" in md.stdout
    gh = optkg(["check", "stack.yaml", "--format", "github"], home)
    assert gh.stdout.startswith("::warning file=stack.yaml,line=3,col=5,title=optkg check%3A ")
    draft = home / "power-aware-router.yaml"
    dump(draft, technique("power-aware-router", ["governance"], ["L1"], "energy", ["energy"], ["compute"]))
    pm = optkg(["place", "power-aware-router.yaml", "--format", "markdown", "--no-stacks"], home)
    assert pm.stdout.startswith("<!-- optkg:place -->\n### optkg place: `power-aware-router`")
    assert "**Verdict:** " in pm.stdout
    vj = json.loads(optkg(["validate", "--format", "json", "--select", "error"], home).stdout)
    assert vj["schema_version"] == "1.0" and vj["kind"] == "validate"


CHECK_NOT_EVALUABLE = {
    "schema_version": "1.1", "kind": "check", "stack": {"name": "Qwen/Qwen3-32B (vllm)", "model": "Qwen/Qwen3-32B"},
    "findings": [], "outcomes": {"fired": 0, "held": 41, "not_evaluable": 2},
    "not_evaluable": [{"rule_id": "weights-do-not-fit", "needs": ["hardware"], "missing": ["hardware"]},
                      {"rule_id": "flashinfer-head-size", "needs": ["attention_backend"], "missing": ["attention_backend"]}],
    "suppressed": 0,
}


def test_ci_formats_never_say_no_findings_when_rules_could_not_be_evaluated() -> None:
    # tester finding (2026-12-01): github/markdown/SARIF said "no findings" where text said 15 rules could not run
    summary = "Qwen/Qwen3-32B (vllm): 0 finding(s) · 41 rules held · 2 could not be evaluated (missing: attention_backend, hardware)"
    gh = render("github", "check", CHECK_NOT_EVALUABLE).splitlines()
    assert gh == [f"::notice title=optkg check::{summary}"]
    md = render("markdown", "check", CHECK_NOT_EVALUABLE)
    assert "no findings" not in md.lower()
    assert "<summary>2 rule(s) could not be evaluated</summary>" in md
    assert "- `weights-do-not-fit`: missing hardware" in md
    sarif = json.loads(render("sarif", "check", CHECK_NOT_EVALUABLE))
    props = sarif["runs"][0]["properties"]["optkg"]
    assert props["summary"] == summary
    assert props["not_evaluable"] == [{"rule_id": "weights-do-not-fit", "missing": ["hardware"]},
                                      {"rule_id": "flashinfer-head-size", "missing": ["attention_backend"]}]
