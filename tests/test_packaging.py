"""The catalog and rules ship inside the wheel: a non-editable install works away from the checkout."""
import os
import subprocess
import sys
import zipfile

from conftest import REPO


def test_wheel_bundles_catalog_and_rules(tmp_path):
    wheel_dir = tmp_path / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheel_dir), str(REPO)],
                   check=True, capture_output=True, timeout=300)
    (whl,) = wheel_dir.glob("optkg-*.whl")
    names = set(zipfile.ZipFile(whl).namelist())
    assert "kg/_data/catalog/axes.yaml" in names
    assert "kg/_data/catalog/techniques/tensor-parallelism.yaml" in names
    assert "kg/_data/catalog/models/Qwen__Qwen3-235B-A22B.json" in names
    assert "kg/_data/rules/kv_parallel.yaml" in names
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(whl)],
                   check=True, capture_output=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(target), "OPTKG_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("OPTKG_HOME", None)
    out = subprocess.run([sys.executable, "-c", "import kg.core.paths, sys; from kg.cli import main; "
                          "print(kg.core.paths.data_root()); sys.exit(main(['check', '--vllm', "
                          "'vllm serve Qwen/Qwen3-235B-A22B -tp 8', '--format', 'json']))"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert str(target) in out.stdout.splitlines()[0]
    assert '"kv-head-replication"' in out.stdout
