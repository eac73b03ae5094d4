"""Determinism: the same input gives byte-identical JSON, DOT and Mermaid under different
PYTHONHASHSEED values (set and dict iteration orders of strings change with the seed)."""
from __future__ import annotations

import json
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


# One interpreter per seed runs every case through kg.cli.main, each with its own stdout (was one process per case
# and seed: 16 start-ups and 16 reads of the catalog and tables, ~12 CPU-s more). The hash seed is fixed at
# interpreter start, so every case still runs under the seed it is checked for.
_DRIVER = """
import contextlib, io, json, sys
from kg.cli import main
out = {}
for name, argv in json.loads(sys.argv[1]).items():
    buf, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        code = main(argv)
    out[name] = [code, buf.getvalue(), err.getvalue()]
sys.stdout.write(json.dumps(out))
"""

# every case runs in the one worker that builds the module's fixture below
pytestmark = pytest.mark.xdist_group("hash-seeds")


def _run_all(seed: str, cache=None) -> dict[str, tuple[int, bytes, str]]:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    if cache is not None:
        env["OPTKG_CACHE_DIR"] = str(cache)
    p = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps(CASES)], cwd=REPO, env=env, capture_output=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr.decode()
    return {name: (code, out.encode(), err) for name, (code, out, err) in json.loads(p.stdout).items()}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Every case's (exit code, stdout, stderr) under seed 1 and under seed 4242. Seed 4242 gets an empty cache
    folder of its own: every cached table or speed point it reads was built under seed 4242. Seed 1 reads the
    session's cache (tests/conftest.py), built by processes of other (random) seeds or by this one: either way
    neither side reuses the other's work, and an empty folder there too cost ~5 CPU-s more."""
    return _run_all("1"), _run_all("4242", tmp_path_factory.mktemp("seed-4242-cache"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_bytes_under_two_hash_seeds(outputs, name):
    for by_case in outputs:
        code, out, err = by_case[name]
        assert code in (0, 1), err
        assert out, f"no output from {CASES[name]}"
    assert outputs[0][name][1] == outputs[1][name][1]
