"""A new serving engine is one package plus its data: a made-up engine "toyserve" is added to a copy of the repository
with kg/engines/toyserve/__init__.py (a subclass of the protocol overriding one budget term), its flag table
catalog/engines/toyserve.yaml (flags, one default) and its releases catalog/engines/releases/toyserve.yaml (one
release with one default) - nothing else - and `optkg check` reads a toyserve launch, applies the default and
sizes the budget with the new term. The copy still holds the layering rules (no engine-name comparison outside the
engine packages, which now include toyserve).

Numbers, Llama-3.1-8B (bf16) at TP 2 on an H100-SXM (81,559 MiB visible = 85,520,809,984 B), worked by hand:
toyserve's fraction 0.85 (its table default) is vLLM-like (the protocol's default budget): ceil(85,520,809,984 x 0.85)
= 72,692,688,487 B requested - weights 8,029,995,008 B (16,059,990,016 / 2) - activation (the sampler's 1,024
requests x 128,256 x 14 B = 1,838,678,016 B; 8,192-token forward at TP 2: 8,192 x (3 x 7,168 + 3 x 4,096) x 2 =
553,648,128 B) - CUDA graphs 268,435,456 B - non-torch 3,843,995,729.92 B (TP > 1, 70 GiB+) - toyserve's scratch pad
1 GiB (1,073,741,824 B) = 57,637,842,453.08 -> 57,637,842,453 B.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

PACKAGE = '''"""toyserve: a made-up engine (tests/test_engine_plugin.py): one package plus its data."""
from __future__ import annotations

from typing import Any

from kg.derive.budget import GIB, BudgetLine
from kg.engines.base import Engine


class Toyserve(Engine):
    name = "toyserve"
    title = "ToyServe"

    def budget(self, inp: Any) -> Any:
        """The default budget with one more line: toyserve keeps a 1 GiB scratch pad out of the KV cache."""
        from kg.derive.budget import serving_budget_of
        base = super().budget(inp)
        lines = base.lines + [BudgetLine("scratch pad", 1 * GIB, "toyserve's own buffer", "toyserve docs")]
        return serving_budget_of(inp, lines, base.notes, base.encoder_notes)


ENGINE = Toyserve()
'''

TABLE = '''# toyserve: a made-up engine for tests/test_engine_plugin.py
engine: toyserve
programs:
  - [toyserve, serve]
positional_model: true
spelling: {underscores: dashes, abbreviations: false, json_dots: false}
kv_cache_dtypes: [auto, fp8]
boolean_flags: [--trust-remote-code]
default_techniques: [paged-kv-cache, continuous-batching]
defaults:
  kv_cache_dtype: auto
  gpu_memory_utilization: 0.85
env: {}
flags:
  - {names: [--tp], set: tp_size, type: integer, minimum: 1, technique: tensor-parallelism, when: "value > 1"}
  - {names: [--max-len], set: max_model_len, type: integer, minimum: 1}
  - {names: [--mem-fraction], set: gpu_memory_utilization, type: number, minimum: 0.01, maximum: 1}
  - {names: [--block], set: block_size, type: integer, minimum: 1}
'''

RELEASES = '''# toyserve releases (made up)
engine: toyserve
releases: ["1.0.0"]
defaults:
  - {setting: block_size, value: 32, releases: ">=1.0.0",
     evidence: [{release: "1.0.0", path: "toyserve/config.py", line: 1, snippet: "block_size: int = 32"}]}
'''

SCRATCH = 1024**3


@pytest.fixture(scope="module")
def toy_repo(tmp_path_factory) -> Path:
    """A copy of the repository with toyserve's package and data added (and nothing else changed)."""
    root = tmp_path_factory.mktemp("toyrepo")
    for name in ("kg", "catalog", "rules"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_data"))
    (root / "kg" / "engines" / "toyserve").mkdir()
    (root / "kg" / "engines" / "toyserve" / "__init__.py").write_text(PACKAGE, encoding="utf-8")
    (root / "catalog" / "engines" / "toyserve.yaml").write_text(TABLE, encoding="utf-8")
    (root / "catalog" / "engines" / "releases" / "toyserve.yaml").write_text(RELEASES, encoding="utf-8")
    return root


def _optkg(repo: Path, *argv: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("OPTKG_HOME", "PYTHONPATH")}
    env.update(PYTHONPATH=str(repo), OPTKG_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, "-m", "kg.cli", *argv], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)


def test_only_the_package_and_its_data_are_added(toy_repo):
    added = sorted(str(p.relative_to(toy_repo)) for p in toy_repo.rglob("*toyserve*"))
    assert added == ["catalog/engines/releases/toyserve.yaml", "catalog/engines/toyserve.yaml", "kg/engines/toyserve"]
    for name in ("kg", "catalog", "rules"):  # every other file is the repository's own
        for f in (REPO / name).rglob("*"):
            if f.is_file() and "__pycache__" not in f.parts and "_data" not in f.parts:
                assert (toy_repo / f.relative_to(REPO)).read_bytes() == f.read_bytes(), f


def test_check_reads_a_toyserve_launch_with_its_default_and_budget_term(toy_repo, tmp_path):
    r = _optkg(toy_repo, "check", "--cmd", "toyserve serve meta-llama/Meta-Llama-3.1-8B --tp 2 --max-len 8192",
               "--gpu", "H100-SXM", "--count", "2", "--format", "json", tmp_path=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    d = json.loads(r.stdout)
    assert d["stack"]["engine"] == "toyserve" and d["stack"]["engine_version"] == "1.0.0"  # the only release
    assert d["stack"]["settings"]["tp_size"] == 2 and d["stack"]["settings"]["max_model_len"] == 8192
    eff = {e["setting"]: e for e in d["effective_config"]}
    assert eff["block_size"]["value"] == 32 and eff["block_size"]["source"] == "engine default"
    dv = d["derived"]
    lines = {x["name"]: x["bytes"] for x in dv["kv_budget_breakdown"]}
    assert lines["scratch pad"] == SCRATCH and lines["requested"] == 72_692_688_487
    assert dv["kv_budget_gpu_memory_utilization"] == 0.85
    assert dv["kv_budget_bytes_per_gpu"] == 57_637_842_453
    assert dv["kv_block_size"] == 32


def test_the_copy_keeps_the_layering_rules(toy_repo):
    sys.path.insert(0, str(REPO / "tests"))
    from archcheck import engine_branches, problems
    assert problems(toy_repo / "kg") == []
    # toyserve is an engine name now: generic code may not compare with it (its package may)
    planted = toy_repo / "kg" / "core" / "planted.py"
    planted.write_text('def f(engine):\n    return engine == "toyserve"\n', encoding="utf-8")
    try:
        assert [h for h in engine_branches(toy_repo / "kg") if "planted" in h] == [
            'kg/core/planted.py:2: return engine == "toyserve"']
    finally:
        planted.unlink()
