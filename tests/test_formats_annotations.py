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
    assert line.startswith("::notice file=rules/x.yaml,line=7,col=1,title=optkg check%3A T::m [r1]")


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
