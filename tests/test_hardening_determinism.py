"""Determinism: the same input gives byte-identical JSON, DOT and Mermaid under different
PYTHONHASHSEED values (set and dict iteration orders of strings change with the seed)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO

MODEL = "Qwen/Qwen3-235B-A22B"
CASES = {
    "check-json": ["check", "--vllm", f"vllm serve {MODEL} -tp 8 --max-model-len 32768", "--gpu", "H200",
                   "--format", "json", "--fail-on", "never", "--explain"],
    "check-stack-file": ["check", str(REPO / "examples" / "qwen3-235b-tp8.yaml"), "--format", "json", "--fail-on", "never"],
    "sweep-json": ["sweep", "--vllm", f"vllm serve {MODEL}", "--tp", "8,16", "--dcp", "1,2",
                   "--kv-cache-dtype", "auto,fp8", "--kv-budget-gib", "40", "--format", "json"],
    "matrix-json": ["matrix", "--format", "json"],
    "export-graph-dot": ["export", "graph", "--format", "dot", "-o", "-"],
    "export-graph-mermaid": ["export", "graph", "--format", "mermaid", "-o", "-"],
    "export-matrix-json": ["export", "matrix", "--format", "json", "-o", "-"],
    "gaps-json": ["gaps", "--format", "json"],
}


def _run(argv: list[str], seed: str, cache) -> bytes:
    env = dict(os.environ, PYTHONHASHSEED=seed, OPTKG_CACHE_DIR=str(cache))
    p = subprocess.run([sys.executable, "-m", "kg.cli", *argv], cwd=REPO, env=env, capture_output=True, timeout=300)
    assert p.returncode in (0, 1), p.stderr.decode()
    assert p.stdout, f"no output from {argv}"
    return p.stdout


@pytest.fixture(scope="module")
def seed_caches(tmp_path_factory):
    """One cache folder per hash seed, shared by the cases of this module (in one test worker): every cached
    table a seed-4242 run reads was built under seed 4242, so neither seed reuses the other's work, and the
    catalog is built once per seed instead of once per case."""
    root = tmp_path_factory.mktemp("seed-caches")
    return root / "cache1", root / "cache2"


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_bytes_under_two_hash_seeds(seed_caches, name):
    argv = CASES[name]
    a = _run(argv, "1", seed_caches[0])
    b = _run(argv, "4242", seed_caches[1])
    assert a == b
