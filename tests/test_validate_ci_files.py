"""The contributor-facing repository files: GitHub workflow, PR template, CONTRIBUTING walkthrough."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from catalog_copy import REPO

WORKFLOW = REPO / ".github" / "workflows" / "ci.yml"


def test_workflow_is_a_valid_github_workflow() -> None:
    # check-jsonschema ships the GitHub workflow schema (vendored, no network)
    r = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                        str(WORKFLOW)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_workflow_runs_the_promised_checks() -> None:
    wf = yaml.safe_load(WORKFLOW.read_text())
    runs = "\n".join(step.get("run", "") for job in wf["jobs"].values() for step in job["steps"])
    uses = [step.get("uses", "") for job in wf["jobs"].values() for step in job["steps"]]
    for cmd in ("optkg validate --changed-since", "--format github", "optkg validate\n", "--format sarif",
                "optkg place", "--format markdown", "optkg schema --check", "optkg docs --check",
                "optkg export --all --check", "make test"):
        assert cmd in runs + "\n", cmd
    assert any(u.startswith("github/codeql-action/upload-sarif@") for u in uses)
    assert wf["jobs"]["validate"]["permissions"]["security-events"] == "write"
    assert wf["jobs"]["placement"]["permissions"]["pull-requests"] == "write"


def test_contributing_commands_exist() -> None:
    from kg.cli import COMMANDS
    text = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    used = set(re.findall(r"(?:\$ |`)optkg ([a-z]+)", text))  # commands in console blocks and inline code
    assert {"new", "validate", "place", "docs", "export", "check", "schema"} <= used
    assert used <= set(COMMANDS), used - set(COMMANDS)
    tpl = (REPO / ".github" / "pull_request_template.md").read_text(encoding="utf-8")
    assert "optkg place" in tpl and "ids never die" in tpl
