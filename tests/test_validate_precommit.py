"""The pre-commit hooks of .pre-commit-hooks.yaml, run by pre-commit from a scratch repository.

A scratch "hook" repository holds this checkout's code and manifest (committed there, so
pre-commit can pin a rev); a scratch "user" repository keeps its own small catalog and lists the
hooks in .pre-commit-config.yaml, as another project would. pre-commit builds the hook's Python
environment itself (pip install of optkg from the hook repository), so this takes ~15 s.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from catalog_copy import REPO, SOURCE, dump, minimal_catalog, technique

GIT = ["git", "-c", "user.email=t@example.org", "-c", "user.name=t", "-c", "commit.gpgsign=false"]


def _hook_repo(dst: Path) -> str:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "_data")
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copy(REPO / name, dst / name)
    shutil.copytree(REPO / "kg", dst / "kg", ignore=ignore)
    shutil.copytree(SOURCE / "catalog", dst / "catalog", ignore=ignore)
    shutil.copytree(SOURCE / "rules", dst / "rules", ignore=ignore)
    subprocess.run(GIT + ["init", "-q", "."], cwd=dst, check=True)
    subprocess.run(GIT + ["add", "-A"], cwd=dst, check=True)
    subprocess.run(GIT + ["commit", "-qm", "optkg"], cwd=dst, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=dst, check=True, capture_output=True, text=True).stdout.strip()


def test_manifest_exposes_validate() -> None:
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    by_id = {h["id"]: h for h in hooks}
    assert by_id["optkg-validate"]["entry"] == "optkg validate"
    assert by_id["optkg-validate"]["language"] == "python"
    assert by_id["optkg-validate"]["pass_filenames"] is True


def test_precommit_hook_runs_from_a_scratch_repository(tmp_path: Path) -> None:
    pytest.importorskip("pre_commit")
    hook = tmp_path / "hook-repo"
    hook.mkdir()
    rev = _hook_repo(hook)
    user = tmp_path / "user-repo"
    user.mkdir()
    minimal_catalog(user, [
        technique("kv-tiering", ["inference"], ["L5"], "storage", ["storage"], ["network"]),
        technique("request-router", ["inference"], ["L6"], "scheduling", ["scheduling"], ["network"]),
    ])
    (user / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{
        "repo": str(hook), "rev": rev, "hooks": [{"id": "optkg-validate"}, {"id": "optkg-validate-all"}]}]}))
    subprocess.run(GIT + ["init", "-q", "."], cwd=user, check=True)
    subprocess.run(GIT + ["add", "-A"], cwd=user, check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPTKG_", "PRE_COMMIT", "PYTHONPATH"))}
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    env["OPTKG_CACHE_DIR"] = str(tmp_path / "cache")
    # pip installs the hook's environment without byte-compiling every module of its dependencies (networkx,
    # huggingface_hub, ...): Python compiles the ones a hook imports when it imports them. 17.4 -> 13.3 CPU-s
    env["PIP_NO_COMPILE"] = "1"

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pre_commit", "run", *args], cwd=user, env=env,
                              capture_output=True, text=True, timeout=600)

    ok = run("optkg-validate", "--files", "catalog/techniques/kv-tiering.yaml")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "optkg validate (changed technique files)" in ok.stdout and "Passed" in ok.stdout
    # break a file: the hook fails and names file, line, column and field
    bad = technique("kv-tiering", ["inference"], ["L9"], "storage", ["storage"], ["network"])
    dump(user / "catalog" / "techniques" / "kv-tiering.yaml", bad)
    text = (user / "catalog" / "techniques" / "kv-tiering.yaml").read_text()
    line = next(i + 1 for i, ln in enumerate(text.splitlines()) if "L9" in ln)
    subprocess.run(GIT + ["add", "-A"], cwd=user, check=True)
    failed = run("optkg-validate", "--files", "catalog/techniques/kv-tiering.yaml")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert f"catalog/techniques/kv-tiering.yaml:{line}:" in failed.stdout
    assert "coordinates.layers[0]: 'L9' is not a valid layer [schema-enum]" in failed.stdout
    assert "Traceback" not in failed.stdout + failed.stderr
    # the whole-catalog hook validates the user's own catalog (./catalog), not the one shipped with optkg
    whole = run("optkg-validate-all", "--all-files")
    assert whole.returncode == 1 and "kv-tiering.yaml" in whole.stdout
    assert "tensor-parallelism" not in whole.stdout
