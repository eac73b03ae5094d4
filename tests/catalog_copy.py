"""Test helpers: temporary copies of the shipped catalog, and running the optkg CLI on them.

Tests never write into the repository: each builds its own catalog copy under ``tmp_path``
(catalog/, rules/, examples/ of the checkout, or of ``$OPTKG_TEST_SOURCE`` when set) and points
optkg at it with ``OPTKG_HOME``. The catalog cache goes to a temporary folder too.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
SOURCE = Path(os.environ.get("OPTKG_TEST_SOURCE") or REPO)


def copy_catalog(dst: Path, rules: bool = True, examples: bool = True) -> Path:
    """Copy catalog/ (and rules/, examples/) into ``dst``; return ``dst`` (an OPTKG_HOME)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(SOURCE / "catalog", dst / "catalog", ignore=ignore)
    if rules:
        shutil.copytree(SOURCE / "rules", dst / "rules", ignore=ignore)
    if examples and (SOURCE / "examples").is_dir():
        shutil.copytree(SOURCE / "examples", dst / "examples", ignore=ignore)
    return dst


def env_for(home: Path, cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["OPTKG_HOME"] = str(home)
    env["OPTKG_CACHE_DIR"] = str(cache)
    env.pop("OPTKG_DEBUG", None)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def optkg(args: list[str], home: Path, cwd: Path | None = None, cache: Path | None = None,
          subprocess_: bool = False) -> subprocess.CompletedProcess:
    """Run ``optkg <args>`` against the catalog copy at ``home`` (OPTKG_HOME), in ``cwd`` (default ``home``).

    In-process by default (fast); ``subprocess_=True`` runs a real ``python -m kg.cli`` process,
    for tests about exit codes and what reaches stderr.
    """
    # default: the session's cache (tests/conftest.py), content-keyed, so a speed point or table another
    # test built serves this one; entries built from the copy's own files are keyed on them
    cache = cache or Path(os.environ.get("OPTKG_CACHE_DIR") or home / ".cache")
    if subprocess_:
        return subprocess.run([sys.executable, "-m", "kg.cli", *args], cwd=cwd or home, env=env_for(home, cache),
                              capture_output=True, text=True, timeout=120)
    import io
    from contextlib import redirect_stderr, redirect_stdout
    from kg.cli import main
    saved_env = {k: os.environ.get(k) for k in ("OPTKG_HOME", "OPTKG_CACHE_DIR", "OPTKG_DEBUG")}
    saved_cwd = os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ["OPTKG_HOME"] = str(home)
        os.environ["OPTKG_CACHE_DIR"] = str(cache)
        os.environ.pop("OPTKG_DEBUG", None)
        os.chdir(cwd or home)
        with redirect_stdout(out), redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(saved_cwd)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return subprocess.CompletedProcess(["optkg", *args], code, out.getvalue(), err.getvalue())


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def dump(path: Path, data: dict[str, Any]) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")


def technique(tid: str, stages: list[str], layers: list[str], dimension: str, benefits: list[str], costs: list[str],
              **extra: Any) -> dict[str, Any]:
    """A minimal valid technique entry (benefits/costs given as dimension lists)."""
    d: dict[str, Any] = {
        "id": tid,
        "name": extra.pop("name", tid.replace("-", " ").title()),
        "summary": extra.pop("summary", f"{tid} is a technique written for a test of placement and validation."),
        "status": extra.pop("status", "experimental"),
        "coordinates": {"stages": stages, "layers": layers, "dimension": dimension},
        "benefits": [{"dimension": b, "what": f"improves {b}"} for b in benefits],
        "costs": [{"dimension": c, "what": f"pays in {c}"} for c in costs],
        "references": [{"title": "FlashAttention paper", "url": "https://arxiv.org/abs/2205.14135", "kind": "paper"}],
    }
    d.update(extra)
    return d


def minimal_catalog(dst: Path, entries: list[dict[str, Any]]) -> Path:
    """A catalog with the shipped axes, no properties and only ``entries``; returns the catalog folder."""
    cat = dst / "catalog"
    (cat / "techniques").mkdir(parents=True)
    shutil.copy(SOURCE / "catalog" / "axes.yaml", cat / "axes.yaml")
    (cat / "properties.yaml").write_text("properties: []\n", encoding="utf-8")
    for e in entries:
        dump(cat / "techniques" / f"{e['id']}.yaml", e)
    return cat
