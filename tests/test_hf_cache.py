"""Hub ids resolve through the Hugging Face cache (kg.inputs.modelcfg.hf_cache_config; issue 13 priority 6).

The tests build a cache folder in the layout huggingface_hub writes: hub/models--org--name/refs/<rev>
holding a commit hash, snapshots/<hash>/config.json."""
from __future__ import annotations

import json

import pytest

from conftest import REPO
from kg.core.errors import OptkgError
from kg.inputs.modelcfg import hf_cache_config, hf_cache_dir, resolve_model

MISTRAL = REPO / "tests/fixtures/field_cases/configs/mistral-7b-v0.1.json"


def make_cache(root, repo: str, cfg: dict, rev: str = "main", commit: str = "0123456789abcdef0123456789abcdef01234567",
               extra: dict | None = None):
    d = root / ("models--" + repo.replace("/", "--"))
    (d / "refs").mkdir(parents=True, exist_ok=True)
    (d / "refs" / rev).write_text(commit)
    snap = d / "snapshots" / commit
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(cfg))
    for name, data in (extra or {}).items():
        (snap / name).write_text(json.dumps(data))
    return snap


def test_hub_id_in_hf_home_cache(tmp_path, monkeypatch):
    cfg = json.loads(MISTRAL.read_text())
    make_cache(tmp_path / "hf" / "hub", "mistralai/Mistral-7B-v0.1", cfg)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert hf_cache_dir() == tmp_path / "hf" / "hub"
    m = resolve_model("mistralai/Mistral-7B-v0.1")
    assert m.name == "mistralai/Mistral-7B-v0.1" and m.sliding_window == 4096
    assert "Hugging Face cache" in m.source


def test_hf_hub_cache_wins_and_revisions(tmp_path, monkeypatch):
    cfg = json.loads(MISTRAL.read_text())
    make_cache(tmp_path, "org/model", cfg)
    make_cache(tmp_path, "org/model", dict(cfg, num_hidden_layers=16), rev="v2",
               commit="fedcba9876543210fedcba9876543210fedcba98")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "elsewhere"))
    assert resolve_model("org/model").num_hidden_layers == 32
    assert resolve_model("org/model", revision="v2").num_hidden_layers == 16


def test_modelopt_file_beside_the_cached_config(tmp_path, monkeypatch):
    base = json.loads((REPO / "catalog/models/meta-llama__Meta-Llama-3.1-8B.json").read_text())
    hq = json.loads((REPO / "tests/fixtures/quant_configs/llama31-8b-modelopt-fp8/hf_quant_config.json").read_text())
    make_cache(tmp_path, "nvidia/Llama-3.1-8B-Instruct-FP8", base, extra={"hf_quant_config.json": hq})
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    m = resolve_model("nvidia/Llama-3.1-8B-Instruct-FP8")
    assert m.quant_method == "modelopt" and m.quantization_config_source == "hf_quant_config.json (ModelOpt)"


def test_not_cached_offline_falls_back_to_bundled_then_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OPTKG_HF_DOWNLOAD", "1")   # offline wins: no download is tried
    assert hf_cache_config("org/absent") is None
    assert resolve_model("meta-llama/Llama-3.1-8B").name == "meta-llama/Meta-Llama-3.1-8B"
    with pytest.raises(OptkgError, match="not in the Hugging Face cache"):
        resolve_model("org/absent")
    assert hf_cache_config("not a hub id") is None
