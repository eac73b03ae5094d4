"""The checkpoint's own size (model.safetensors.index.json metadata.total_size, or one model.safetensors) beside the
weight estimate: read from the model folder only, shown next to the estimate, and used for the fit decision."""
from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from kg.analyses.check import check_stack
from kg.engine.rules import load_ruleset
from kg.inputs.checkpoint_index import checkpoint_size, config_folder
from kg.inputs.stack import stack_from_mapping

REPO = Path(__file__).resolve().parents[1]
AWQ = REPO / "tests/fixtures/model_configs/qwen2.5-7b-instruct-awq.json"
GIB = 2**30


@pytest.fixture(scope="module")
def rules():
    return load_ruleset("check")


def model_folder(tmp_path: Path, index_total: int | None = None) -> Path:
    d = tmp_path / "Qwen2.5-7B-Instruct-AWQ"
    d.mkdir()
    shutil.copy(AWQ, d / "config.json")
    if index_total is not None:
        (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": index_total},
                                                                    "weight_map": {}}))
    return d


def run(folder: Path, catalog, rules, gpu="RTX-4060", util=0.70):
    st = stack_from_mapping({"model": str(folder), "engine": {"name": "vllm", "version": "0.7.3"},
                             "hardware": {"gpu": gpu}, "settings": {"gpu_memory_utilization": util,
                                                                    "max_model_len": 4096}}, catalog)
    return check_stack(st, catalog, rules)


def test_index_total_size_scales_the_estimate_and_decides_the_fit(tmp_path, catalog, rules):
    # a checkpoint of 6 GiB: the estimate (5.19 GiB, one GPU) scaled to 6 GiB; 8.00 GiB x 0.70 = 5.60 GiB < 6 GiB,
    # so the weights no longer fit, while the estimate alone says they do
    folder = model_folder(tmp_path, 6 * GIB)
    rep = run(folder, catalog, rules)
    d = rep.derived
    assert d["weight_bytes_total_checkpoint"] == 6 * GIB
    assert d["weight_bytes_per_gpu_checkpoint"] == 6 * GIB  # TP 1: the whole checkpoint on the one GPU
    usable = 8 * GIB * 0.70  # RTX 4060: 8.00 GiB x 0.70
    assert d["weight_bytes_per_gpu_estimate"] < usable < d["weight_bytes_per_gpu_checkpoint"]
    assert d["weight_bytes_source"] == "checkpoint (metadata.total_size)"
    found = {f.rule_id: f for f in rep.findings}
    assert found["weights-do-not-fit"].numbers["weight_gib_per_gpu"] == 6.0
    assert found["weights-do-not-fit"].numbers["usable_gib_per_gpu"] == 5.6
    weights_line = next(x for x in d["kv_budget_breakdown"] if x["name"] == "weights")
    assert weights_line["bytes"] == 6 * GIB and "checkpoint" in weights_line["basis"]
    assert any("metadata.total_size" in n and "6.00 GiB" in n and "estimate 5.19" in n for n in rep.notes)


def test_without_a_checkpoint_the_estimate_is_used(tmp_path, catalog, rules):
    d = run(model_folder(tmp_path), catalog, rules).derived
    assert "weight_bytes_total_checkpoint" not in d
    assert d["weight_bytes_per_gpu"] == d["weight_bytes_per_gpu_estimate"] and d["weight_bytes_source"] == "estimate"


def test_single_safetensors_file_counts_its_tensor_data(tmp_path):
    folder = model_folder(tmp_path)
    header = json.dumps({"w": {"dtype": "F16", "shape": [3, 4], "data_offsets": [0, 24]},
                         "__metadata__": {"format": "pt"}}).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(24))
    ck, note = checkpoint_size(str(folder / "config.json"))
    assert note is None and ck.total_bytes == 24 and ck.how == "model.safetensors data"  # 3 x 4 x 2 bytes


@pytest.mark.parametrize("content", ['{"metadata": {}}', '{"metadata": {"total_size": -5}}', "not json",
                                     '{"metadata": {"total_size": true}}'])
def test_a_malformed_index_is_a_note_not_a_number(tmp_path, content):
    folder = model_folder(tmp_path)
    (folder / "model.safetensors.index.json").write_text(content)
    ck, note = checkpoint_size(str(folder / "config.json"))
    assert ck is None and "not used for the weights" in note


def test_a_truncated_safetensors_header_is_a_note(tmp_path):
    folder = model_folder(tmp_path)
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", 10**6) + b"{}")
    ck, note = checkpoint_size(str(folder / "config.json"))
    assert ck is None and "does not fit the file" in note


def test_bundled_configs_and_cache_snapshots_are_told_apart(tmp_path):
    assert config_folder(str(REPO / "catalog/models/meta-llama__Meta-Llama-3.1-8B.json")) is None  # bundled: no folder
    snap = tmp_path / "models--org--m" / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    assert config_folder(f"org/m (Hugging Face cache: {snap / 'config.json'})") == snap
