"""optkg diagnose on the shared captures: captures that disagree, several engines or machines, a --gpu that differs
from the metrics, an unbundled model, threshold files and DCGM field-list hints."""
from __future__ import annotations

import json

from conftest import SHARED

M = SHARED / "data" / "metrics"
LOAD = M / "nvidia_smi_query-gpu_load__nvidia-h100-80gb-hbm3__590.48.01.csv"
IDLE = M / "nvidia_smi_query-gpu_idle__nvidia-h100-80gb-hbm3__590.48.01.csv"
VLLM = M / "vllm_metrics_datadog_fixture_opt125m.prom"
SGLANG = M / "sglang_metrics_datadog_fixture_opt125m.prom"
T4 = M / "dcgm_exporter_datadog_fixture_t4.prom"
FIELDS = M / "dcgm_exporter_dcp-metrics-included.csv"


def _json(cli, *argv):
    code, out, err = cli("diagnose", *map(str, argv), "--format", "json")
    return code, (json.loads(out) if out else None), err


def test_load_and_idle_capture_disagree_in_either_order(cli):
    # GPU 0 utilization.gpu reads 100 % in the load capture and 0 % in the idle one: gap 1.0 >= 0.50
    for files in ((LOAD, IDLE), (IDLE, LOAD)):
        code, d, _ = _json(cli, *files)
        v = d["verdict"]
        assert (v["state"], v["rule_id"]) == ("metrics-disagree", "gpu-readings-disagree")
        assert "GPU 0 gpu_util 0%" in v["message"] and "vs 100%" in v["message"] and "(gap 100%)" in v["message"]


def test_unbundled_model_keeps_tp_and_max_len(cli):
    code, d, err = _json(cli, VLLM, "--vllm", "vllm serve facebook/opt-125m --max-model-len 2048 --tensor-parallel-size 2")
    assert code == 0 and err == ""
    assert (d["readings"]["tp_size"], d["readings"]["max_model_len"]) == (2, 2048)
    assert any(n.startswith("model 'facebook/opt-125m' is not bundled") for n in d["notes"])
    assert d["readings"]["model_mismatch"] is False  # metrics label model_name facebook/opt-125m too


def test_before_after_of_different_engines_is_an_error(cli):
    code, out, err = cli("diagnose", "--before", str(VLLM), "--after", str(SGLANG), "--window", "30")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "(vllm) and the later scrape(s) (sglang) share no engine" in err


def test_two_engines_warn_naming_both(cli):
    code, d, _ = _json(cli, VLLM, SGLANG)
    w = next(x for x in d["input_warnings"] if x["rule_id"] == "inputs-several-engines")
    assert f"sglang ({SGLANG})" in w["message"] and f"vllm ({VLLM})" in w["message"]
    assert "Only sglang is diagnosed" in w["message"]


def test_gpu_flag_differs_from_metrics(cli):
    code, d, _ = _json(cli, LOAD, "--vllm", "vllm serve Qwen/Qwen3-32B", "--gpu", "L40S")
    w = next(x for x in d["input_warnings"] if x["rule_id"] == "metrics-gpu-mismatch")
    assert "runs on L40S (NVIDIA L40S 48GB), but the metrics name NVIDIA H100 80GB HBM3" in w["message"]
    code, d, _ = _json(cli, LOAD, "--vllm", "vllm serve Qwen/Qwen3-32B", "--gpu", "H100-SXM")
    assert not any(x["rule_id"] == "metrics-gpu-mismatch" for x in d["input_warnings"])


def test_mixed_machines_text_is_separated(cli):
    code, d, _ = _json(cli, T4, LOAD)
    w = next(x for x in d["input_warnings"] if x["rule_id"] == "inputs-mixed-machines")
    # the GPU-model list ends, then '; hosts: ' starts the host list (was run together)
    assert f"Tesla T4 ({T4.name}); hosts: 424773df46e0" in w["message"] or \
        f"Tesla T4 ({T4}); hosts: 424773df46e0" in w["message"]


def test_duplicate_and_unordered_thresholds(cli, tmp_path):
    dup = tmp_path / "dup.yaml"
    dup.write_text("idle_util: 0.01\nidle_util: 0.02\n")
    code, out, err = cli("diagnose", str(LOAD), "--thresholds", str(dup))
    assert code == 2 and err == f"optkg: error: {dup}:2: threshold 'idle_util' is given twice (first at line 1); keep one\n"
    bad = tmp_path / "bad.yaml"
    bad.write_text("idle_util: 0.9\nneither_wall_util: 0.1\n")
    code, out, err = cli("diagnose", str(LOAD), "--thresholds", str(bad))
    assert code == 2 and err == f"optkg: error: {bad}:1: idle_util (0.9) must be below neither_wall_util (0.1)\n"


def test_field_list_hints(cli):
    # dcp-metrics-included.csv: SM_ACTIVE commented out, DRAM_ACTIVE enabled; nvidia-smi gives coarse readings
    code, d, _ = _json(cli, FIELDS, LOAD)
    items = {i["id"]: i for g in d["checklist"]["groups"] for i in g["items"]}
    assert items["compute"]["hint"] == (f"DCGM_FI_PROF_SM_ACTIVE is commented out in {FIELDS}: uncomment it, "
                                        "restart the exporter and scrape it")
    assert items["bandwidth"]["hint"] == (f"DCGM_FI_PROF_DRAM_ACTIVE is enabled in {FIELDS}; scrape the exporter "
                                          "(GET /metrics) and pass that file")


def test_field_list_alone_is_an_input_error_naming_what_to_enable(cli):
    # the field list says what dcgm-exporter would collect, not what a GPU did: alone, exit 2 (it was an
    # INCONCLUSIVE verdict with exit 0); beside a capture it still gives the hints above
    code, out, err = cli("diagnose", str(FIELDS))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert ("a dcgm-exporter field list holds no readings; pass a scrape of the exporter (GET /metrics) with it "
            "(5 profiling field(s) are commented out, e.g. DCGM_FI_PROF_SM_ACTIVE)") in err
