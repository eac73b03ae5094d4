"""kg.analyses.diagnose: exact verdicts on the real samples and on fixtures derived from them (issue 6 acceptance).

Working for every number is in the comments; the readings come from the files as printed.
"""
from __future__ import annotations

import pytest
from conftest import REPO, SHARED

from kg.knowledge.catalog import load_catalog
from kg.analyses.diagnose import diagnose, fail_code, load_thresholds
from kg.analyses.diagnose_links import wall_techniques
from kg.core.errors import OptkgError
from kg.inputs.metrics.load import load_snapshot
from kg.engine.rules import load_ruleset
from kg.core.yamlio import load_yaml

M = SHARED / "data" / "metrics"
FX = REPO / "tests" / "fixtures" / "metrics"
H100 = "nvidia-h100-80gb-hbm3__590.48.01"
L40S = "nvidia-l40s__595.80"


@pytest.fixture(scope="module")
def rs():
    return load_ruleset("diagnose")


@pytest.fixture(scope="module")
def catalog():
    cat, _ = load_catalog()
    return cat


def run(rs, paths, catalog=None, **kw):
    snap_kw = {k: kw.pop(k) for k in ("before", "window_s", "phase") if k in kw}
    return diagnose(load_snapshot(paths, **snap_kw), rs, catalog, **kw)


def fired(d):
    return {f["rule_id"]: f for f in d["findings"]}


# ---------------------------------------------------------------- the real samples

def test_vllm_sample_not_loaded_no_wall(rs):
    d = run(rs, [M / "vllm_metrics_datadog_fixture_opt125m.prom"])
    v = d["verdict"]
    assert (v["kind"], v["state"], v["label"]) == ("neither", "not-loaded", "not loaded (neither wall)")
    assert v["confidence"] == "high"
    assert not any(d["walls"][w]["fired"] for w in ("memory", "compute", "bandwidth"))
    r = d["readings"]
    assert r["prefix_cache_hit_rate"] == 64 / 117  # vllm:prefix_cache_hits_total 64 / queries 117, since start
    assert r["kv_cache_usage"] == 0.0 and r["requests_waiting"] == 0.0
    assert d["workload"] == "serving" and d["engine"] == "vllm"
    # cache_config_info: 7281 blocks x 16 tokens = 116,496 tokens of KV capacity
    assert d["serving"]["kv_capacity_tokens"] == 116496
    # TTFT holds one observation (count 1, sum 0.31326723098754883): every quantile is that observation;
    # PromQL's interpolation inside (0.25, 0.5] (0.25 + 0.25 x 0.5 / 1 = 0.375) is kept as 'promql'
    ttft = d["serving"]["latency"]["ttft_seconds"]
    assert (ttft["p50"], ttft["p99"], ttft["estimate"]) == (0.31326723098754883, 0.31326723098754883, "exact")
    assert ttft["promql"]["p50"] == pytest.approx(0.375)


def test_h100_load_query_gpu(rs):
    d = run(rs, [M / f"nvidia_smi_query-gpu_load__{H100}.csv"])
    v = d["verdict"]
    # utilization.gpu 100 % > 85 %, time-based only, no target -> compute saturation likely, low confidence
    assert (v["kind"], v["label"], v["confidence"], v["severity"]) == ("compute", "compute saturation likely", "low", "low")
    assert "only time-based utilisation is present" in v["message"] and "DCGM_FI_PROF_SM_ACTIVE" in v["message"]
    r = d["readings"]
    assert r["compute_util"] == 1.0 and r["compute_metric"] == "time_based"
    assert r["device_memory_used_mib"] == 19818 and r["device_memory_total_mib"] == 81559
    assert r["device_memory_used_fraction"] == 19818 / 81559  # 0.2430 < 0.90: no memory wall
    assert r["power_w"] == 631.95 and r["power_ratio"] == 631.95 / 700  # ~632 W of 700 W corroborates
    assert r["bandwidth_util"] == 0.11 and r["bandwidth_metric"] == "mem_copy_util"  # 11 % < 70 %
    assert not d["walls"]["memory"]["fired"] and not d["walls"]["bandwidth"]["fired"]
    assert [x["rule_id"] for x in d["walls"]["compute"]["details"]] == ["compute-wall-power-corroborates"]


@pytest.mark.parametrize("name, kw", [
    (f"nvidia_smi_dmon_load__{H100}.txt", {}),
    ("nvidia_gpu_exporter_h100_load.prom", {}),
    (f"nvidia_smi_capture_linux-x86_64__{H100}.txt", {"phase": "load"}),
])
def test_every_h100_load_format_gives_the_same_verdict(rs, name, kw):
    v = run(rs, [M / name], **kw)["verdict"]
    assert (v["kind"], v["label"], v["confidence"]) == ("compute", "compute saturation likely", "low")


@pytest.mark.parametrize("name, kw", [
    (f"nvidia_smi_query-gpu_idle__{H100}.csv", {}),
    (f"nvidia_smi_dmon_idle__{H100}.txt", {}),
    (f"nvidia_smi_capture_linux-x86_64__{H100}.txt", {"phase": "idle"}),
    (f"nvidia_smi_dmon_idle__{L40S}.txt", {}),
    ("dcgm_exporter_issue512_h100_mig_excerpt.prom", {}),
    # GR_ENGINE_ACTIVE per MIG instance 0.029399 / 0.033893 / 0: the worst is 3.4 % < 5 %
    ("dcgm_exporter_dra166_a100_mig_excerpt.prom", {}),
    # the T4 file: GPU_UTIL 0 and the unlabelled SM_ACTIVE 0
    ("dcgm_exporter_datadog_fixture_t4.prom", {}),
])
def test_idle_samples(rs, name, kw):
    d = run(rs, [M / name], **kw)
    assert d["verdict"]["state"] == "idle", d["verdict"]
    assert not any(d["walls"][w]["fired"] for w in ("memory", "compute", "bandwidth"))


def test_a100_mig_reads_the_busiest_instance(rs):
    d = run(rs, [M / "dcgm_exporter_dra166_a100_mig_excerpt.prom"])
    assert d["readings"]["compute_util"] == 0.033893
    assert d["reading_sources"]["compute_util"].endswith("GPU 0/mig9")


def test_sglang_sample_not_loaded(rs):
    d = run(rs, [M / "sglang_metrics_datadog_fixture_opt125m.prom"])
    assert d["verdict"]["state"] == "not-loaded"
    # sglang:gen_throughput 425.5, sglang:cache_hit_rate 0.2, token_usage 0.25
    r = d["readings"]
    assert r["throughput_tokens_per_s"] == 425.5 and r["prefix_cache_hit_rate"] == 0.2 and r["kv_cache_usage"] == 0.25


def test_l40s_idle_time_utilisation_is_contradicted_by_power(rs):
    d = run(rs, [M / f"nvidia_smi_query-gpu_idle__{L40S}.csv"])
    # utilization.gpu 100 % but 144.97 W of 350 W = 41.4 % < 50 %: no compute wall, a warning instead
    assert not d["walls"]["compute"]["fired"]
    assert fired(d)["time-util-contradicted"]["numbers"]["power_ratio"] == pytest.approx(144.97 / 350)
    assert d["verdict"]["kind"] == "inconclusive" and "power" in d["verdict"]["message"]


@pytest.mark.parametrize("name", [f"nvidia_smi_query-gpu_load__{L40S}.csv", f"nvidia_smi_dmon_load__{L40S}.txt"])
def test_l40s_nvenc_load_is_video_work(rs, name):
    d = run(rs, [M / name])
    assert d["verdict"]["state"] == "video-engines"


def test_dcgm_field_list_alone_is_inconclusive_and_names_what_to_enable(rs):
    d = run(rs, [M / "dcgm_exporter_default-counters.csv"])
    assert d["verdict"]["kind"] == "inconclusive"
    assert "missing compute, bandwidth, memory" in d["verdict"]["message"]
    cf = d["checklist"]["collector_fields"]
    assert cf["DCGM_FI_PROF_SM_ACTIVE"] is False and cf["DCGM_FI_PROF_DRAM_ACTIVE"] is True
    compute = next(i for g in d["checklist"]["groups"] for i in g["items"] if i["id"] == "compute")
    assert compute["status"] == "missing" and compute["hint"].startswith("DCGM_FI_PROF_SM_ACTIVE is commented out in ") and compute["hint"].count("uncomment") == 1


# ---------------------------------------------------------------- derived fixtures: every outcome

def test_memory_wall(rs):
    d = run(rs, [FX / "vllm_kv_pressure.prom", FX / "dcgm_sm_busy.prom"])
    v = d["verdict"]
    # KV usage 0.97 > 0.90 with 12 waiting; 0.97 >= (1 + 0.9) / 2 -> severe
    assert (v["kind"], v["state"], v["severity"], v["confidence"]) == ("memory", "memory-wall", "severe", "high")
    assert "12 requests waiting" in v["message"]
    assert v["also"] == ["compute"]  # SMs 93 % with no throughput target: compute saturation too


def test_memory_wall_that_looks_like_idle_compute(rs):
    d = run(rs, [FX / "vllm_kv_pressure.prom", FX / "dcgm_sm_low.prom"])
    v = d["verdict"]
    # SM activity 35 % < 50 % while the KV pool is on the wall -> fix memory first
    assert v["state"] == "memory-wall-looks-like-idle-compute"
    assert v["label"] == "memory wall that looks like idle compute: fix memory first"
    # GPU_UTIL reads 97 % on the same GPU: SM activity decides, so there is no compute wall
    assert d["readings"]["compute_metric"] == "sm_active" and not d["walls"]["compute"]["fired"]


def test_compute_wall(rs):
    d = run(rs, [FX / "sglang_busy.prom", FX / "dcgm_sm_busy.prom"], target_throughput=2500)
    v = d["verdict"]
    # SM_ACTIVE max(0.93, 0.88) = 0.93 > 0.85; 1,800 < 2,500 tokens/s: shortfall 0.28 >= 0.20 -> severe
    assert (v["kind"], v["label"], v["severity"], v["confidence"]) == ("compute", "compute wall", "severe", "high")
    assert d["readings"]["throughput_shortfall"] == pytest.approx(0.28)
    assert d["reading_sources"]["compute_util"].endswith("GPU 0")


def test_bandwidth_wall(rs):
    d = run(rs, [FX / "dcgm_dram_busy.prom"])
    v = d["verdict"]
    assert (v["kind"], v["severity"], v["confidence"]) == ("bandwidth", "moderate", "high")  # 0.82 > 0.70, < 0.85


def test_neither_wall_latency_bound(rs):
    d = run(rs, [FX / "vllm_light_load.prom", FX / "dcgm_sm_low.prom"])
    v = d["verdict"]
    # 4 running, nothing waiting, SM 35 % and DRAM 25 % both < 60 %
    assert (v["kind"], v["state"]) == ("neither", "latency-bound")


def test_preallocation_is_not_a_memory_wall(rs):
    d = run(rs, [FX / "vllm_prealloc_healthy.prom", FX / "nvidia_smi_prealloc_90.csv"])
    # device memory 74,000 / 81,559 = 90.7 % (> 90 %), but vLLM preallocates: KV 20 %, empty queue
    assert d["readings"]["device_memory_used_fraction"] == 74000 / 81559 > 0.9
    assert not d["walls"]["memory"]["fired"]
    assert d["readings"]["memory_occupancy"] == 0.2  # the reading that counts is the KV pool
    assert d["verdict"]["kind"] == "neither"


def test_the_same_device_memory_is_a_wall_for_training(rs):
    d = run(rs, [FX / "nvidia_smi_prealloc_90.csv"], workload="training")
    assert d["verdict"]["kind"] == "memory" and d["verdict"]["confidence"] == "medium"


def test_rates_from_two_scrapes(rs):
    d = run(rs, [FX / "vllm_kv_pressure.prom"], before=[FX / "vllm_kv_pressure_before.prom"], window_s=60,
            target_throughput=1500)
    r = d["readings"]
    assert r["throughput_tokens_per_s"] == 1000.0  # (160,000 - 100,000) tokens / 60 s
    assert r["preemptions_new"] == 6 and r["preemption_rate_per_s"] == 0.1  # 9 - 3 in 60 s
    assert r["prefix_cache_hit_rate"] == 0.4  # (4,064 - 64) / (10,117 - 117) over the window
    assert r["success_rate"] == 0.975  # 200 finished in the window, 5 of them aborted
    assert d["verdict"]["severity"] == "critical"  # preemptions in the window


# ---------------------------------------------------------------- gate, checklist, thresholds

@pytest.mark.parametrize("files, target, state", [
    (["sglang_busy.prom", "dcgm_sm_mid.prom"], 2500, "open"),        # 70 % / 62 %, 1,800 < 2,500
    (["vllm_kv_pressure.prom", "dcgm_sm_busy.prom"], None, "closed"),  # 93 % / 97 %
    (["sglang_busy.prom", "dcgm_sm_mid.prom"], None, "undecided"),   # no target
    (["sglang_busy.prom", "dcgm_sm_mid.prom"], 1500, "not-needed"),  # target met
    (["sglang_busy.prom", "dcgm_sm_busy.prom"], 2500, "wall-first"),  # compute 93 % at its limit, memory 62 % not
])
def test_operator_gate(rs, files, target, state):
    d = run(rs, [FX / f for f in files], target_throughput=target)
    assert d["operator_gate"]["state"] == state


def test_checklist_of_the_vllm_sample(rs):
    d = run(rs, [M / "vllm_metrics_datadog_fixture_opt125m.prom"])
    status = {i["id"]: i["status"] for g in d["checklist"]["groups"] for i in g["items"]}
    assert status == {
        # one scrape: vllm:avg_generation_throughput_toks_per_s stands for throughput
        "throughput": "present", "ttft_distribution": "present", "itl_distribution": "present", "success_rate": "present",
        "memory": "present", "compute": "missing", "bandwidth": "missing", "queue_depth": "present",
        "request_length_distribution": "present", "concurrency": "present", "tp_size": "missing",
        "block_size": "present", "kv_cache_dtype": "present", "max_model_len": "missing"}
    assert d["checklist"]["comparable"] is False
    assert d["verdict"]["comparability"] == ("cannot be compared with another run: missing context "
                                             "(tensor-parallel size, max model length)")


def test_checklist_with_stack_context_is_comparable(rs, catalog):
    from kg.inputs.stack import stack_from_mapping
    st = stack_from_mapping({"model": "Qwen/Qwen3-32B", "engine": "vllm",
                             "techniques": [{"tensor-parallelism": {"tp_size": 4}}],
                             "settings": {"max_model_len": 32768}}, catalog)
    d = run(rs, [M / "vllm_metrics_datadog_fixture_opt125m.prom"], catalog, stack=st,
            check_rules=load_ruleset("check"))
    assert d["checklist"]["comparable"] is True and "comparability" not in d["verdict"]
    assert d["readings"]["tp_size"] == 4 and d["readings"]["max_model_len"] == 32768


def test_thresholds_override_changes_the_verdict_and_is_reported(rs, tmp_path):
    f = tmp_path / "my.yaml"
    f.write_text("thresholds:\n  bandwidth_wall_util: 0.10\n")
    over, where = load_thresholds(f, rs)
    assert over == {"bandwidth_wall_util": 0.10} and where == {"bandwidth_wall_util": f"{f}:2"}
    d = run(rs, [M / f"nvidia_smi_query-gpu_load__{H100}.csv"], thresholds=over, thresholds_where=where)
    # utilization.memory 11 % > 10 %: a bandwidth wall on the coarse proxy -> low severity, low confidence
    assert d["walls"]["bandwidth"]["fired"] and d["walls"]["bandwidth"]["severity"] == "low"
    t = d["thresholds"]["bandwidth_wall_util"]
    assert t["value"] == 0.10 and t["default"] == 0.70 and t["source"] == f"override ({f}:2)"
    assert d["thresholds"]["compute_wall_util"]["source"] == "default"


@pytest.mark.parametrize("text, line, what", [
    ("compute_wall_utl: 0.8\n", 1, "unknown threshold 'compute_wall_utl'; did you mean 'compute_wall_util'?"),
    ("thresholds:\n  compute_wall_util: 85\n", 2, "expected a fraction 0-1 (0.9 means 90 %), found 85"),
    ("compute_wall_util: high\n", 1, "expected a number, found 'high'"),
    ("thresholds: 3\n", 1, "expected `thresholds: {name: value}`"),
])
def test_bad_thresholds_file(rs, tmp_path, text, line, what):
    f = tmp_path / "t.yaml"
    f.write_text(text)
    with pytest.raises(OptkgError) as e:
        load_thresholds(f, rs)
    assert str(e.value).startswith(f"{f}:{line}: ") and what in str(e.value)


def test_thresholds_are_data_with_provenance_and_recalibration():
    doc = load_yaml(REPO / "rules" / "walls.yaml").data
    th = doc["thresholds"]
    # the four method thresholds and the operator gate, exactly as shared/method/001 §3 and §6 state them
    assert {k: th[k]["value"] for k in ("memory_wall_occupancy", "memory_wall_kv_usage", "compute_wall_util",
                                         "compute_disguise_util", "bandwidth_wall_util", "operator_gate_compute",
                                         "operator_gate_memory")} == {
        "memory_wall_occupancy": 0.90, "memory_wall_kv_usage": 0.90, "compute_wall_util": 0.85,
        "compute_disguise_util": 0.50, "bandwidth_wall_util": 0.70, "operator_gate_compute": 0.85,
        "operator_gate_memory": 0.85}
    for name, t in th.items():
        assert t["provenance"].strip(), name
        assert "recalibrate" in t["note"].lower(), name


def test_fail_code_counts_walls_only(rs):
    h100 = run(rs, [M / f"nvidia_smi_query-gpu_load__{H100}.csv"])  # compute wall, low
    assert fail_code(h100, "severe") == 0 and fail_code(h100, "low") == 1 and fail_code(h100, "never") == 0
    idle = run(rs, [M / "vllm_metrics_datadog_fixture_opt125m.prom"])  # only info findings
    assert fail_code(idle, "low") == 0


# ---------------------------------------------------------------- catalog links and the user's stack

def test_wall_rules_name_existing_techniques(rs, catalog):
    for r in rs.rules:
        for tid in r.fixes:
            assert catalog.resolve(tid), f"{r.id}: fixes names unknown technique {tid}"


def test_memory_wall_links_catalog_techniques_with_costs(rs, catalog):
    d = run(rs, [FX / "vllm_kv_pressure.prom"], catalog)
    techs = d["walls"]["memory"]["techniques"]
    ids = [t["technique"] for t in techs]
    # the rule's direction first (its fixes, in order), then every serving technique with a storage benefit
    assert ids[:3] == ["decode-context-parallelism", "kv-cache-quantization", "awq-quantization"]
    for t in techs:
        assert "inference" in t["coordinates"]["stages"]
        bens = catalog.techniques[t["technique"]]["benefits"]
        assert t["named_by_rule"] or any(b["dimension"] == "storage" for b in bens)
    kvq = techs[ids.index("kv-cache-quantization")]
    assert {c["dimension"] for c in kvq["costs"]} == {c["dimension"] for c in catalog.techniques["kv-cache-quantization"]["costs"]}


def test_wall_techniques_filters_by_stage(catalog):
    train = {t["technique"] for t in wall_techniques(catalog, "compute", "training", [])}
    assert all("training" in catalog.techniques[t]["coordinates"]["stages"] for t in train)
    assert "fp8-training" in train and "speculative-decoding" not in train


def test_memory_wall_under_tp8_on_4_kv_heads_removes_replication_first(rs, catalog):
    from kg.analyses.check import check_stack
    from kg.engines.launch import parse_command
    st = parse_command("vllm serve Qwen/Qwen3-235B-A22B -tp 8", catalog, "vllm")
    check_rules = load_ruleset("check")
    d = run(rs, [FX / "vllm_kv_pressure.prom"], catalog, stack=st, check_rules=check_rules)
    w = d["walls"]["memory"]
    # Qwen3-235B-A22B: 4 KV heads; TP 8 replicates each twice -> kv-head-replication, fixed by DCP
    assert [x["rule_id"] for x in w["stack"]["first"]] == ["kv-head-replication"]
    first = w["techniques"][0]
    assert first["technique"] == "decode-context-parallelism" and first["do_first_because"] == ["kv-head-replication"]
    assert w["techniques"][1]["technique"] == "kv-cache-quantization"
    # every reported collision is a check finding that appears only once the candidate is added (re-derived here)
    import copy

    from kg.inputs.stack import add_technique
    base = {f.fingerprint for f in check_stack(st, catalog, check_rules).findings}
    for c in w["techniques"]:
        if c["in_stack"]:
            assert not c["collides"]
            continue
        st2 = copy.deepcopy(st)
        add_technique(st2, catalog, c["technique"], {p["name"]: p["default"] for p in
                                                     catalog.techniques[c["technique"]].get("parameters") or []
                                                     if p.get("default") is not None}, "test")
        new = {f.fingerprint for f in check_stack(st2, catalog, check_rules).findings} - base
        assert {col["fingerprint"] for col in c["collides"]} == new, c["technique"]
    assert d["stack"]["techniques"]["tensor-parallelism"] == {"tp_size": 8}


# ---------------------------------------------------------------- inputs that do not belong together

def test_idle_engine_with_a_busy_gpu_is_metrics_disagree(rs):
    # the tester's command: the opt-125m vLLM sample (0 running, 0 waiting) with the H100 gpu-burn CSV
    d = run(rs, [M / "vllm_metrics_datadog_fixture_opt125m.prom", M / f"nvidia_smi_query-gpu_load__{H100}.csv"],
            target_throughput=2000)
    v = d["verdict"]
    assert (v["kind"], v["state"], v["label"], v["severity"]) == (
        "inconsistent", "metrics-disagree", "metrics disagree: not from the same run", "warning")
    assert v["message"].startswith("engine idle, GPU busy: vllm reports 0 running requests and none waiting while "
                                   "time-based utilisation (utilization.gpu) reads 100%.")
    # the compute wall still fires on the GPU reading alone; the verdict says it is not one
    assert v["walls_read_separately"] == ["compute"] and d["walls"]["compute"]["fired"]
    assert [w["rule_id"] for w in d["input_warnings"]] == ["metrics-disagree"]


def test_busy_engine_with_an_idle_gpu_is_metrics_disagree(rs):
    d = run(rs, [FX / "vllm_light_load.prom", FX / "nvidia_smi_h100_idle.csv"])
    f = fired(d)["metrics-disagree"]
    # 4 running requests (vllm_light_load) while utilization.gpu reads 0 % (< idle_util 5 %)
    assert f["numbers"] == {"requests_running": 4, "compute_util": 0, "direction": "engine busy, GPU idle"}
    assert d["verdict"]["state"] == "metrics-disagree"


def test_invalid_readings_are_reported_as_invalid_not_missing(rs, tmp_path):
    (tmp_path / "dcgm.prom").write_text('DCGM_FI_PROF_SM_ACTIVE{gpu="0"} 1.5\nDCGM_FI_PROF_DRAM_ACTIVE{gpu="0"} 0.2\n')
    (tmp_path / "vllm.prom").write_text('vllm:kv_cache_usage_perc{model_name="m"} NaN\n'
                                        'vllm:num_requests_waiting{model_name="m"} -5\n'
                                        'vllm:num_requests_running{model_name="m"} 2\n')
    d = run(rs, [tmp_path / "dcgm.prom", tmp_path / "vllm.prom"])
    items = {i["id"]: i for g in d["checklist"]["groups"] for i in g["items"]}
    assert (items["compute"]["status"], items["memory"]["status"], items["queue_depth"]["status"]) == (
        "invalid", "invalid", "invalid")
    assert "DCGM_FI_PROF_SM_ACTIVE for GPU 0 reads 1.5 (outside the 0-1 range of a fraction)" in items["compute"]["hint"]
    # the resource checklist does not call them missing: only bandwidth is present, nothing is missing
    res = next(g for g in d["checklist"]["groups"] if g["id"] == "resources")
    assert (res["present"], res["invalid"], [i["id"] for i in res["items"] if i["status"] == "missing"]) == (1, 3, [])
    assert fired(d)["invalid-readings"]["numbers"] == {"invalid": 3}
    assert d["verdict"]["message"] == (
        "not enough readings: compute, memory read but invalid (DCGM_FI_PROF_SM_ACTIVE for GPU 0 reads 1.5 "
        "(outside the 0-1 range of a fraction); vllm:kv_cache_usage_perc for vllm reads nan (not a number))")
    assert d["walls"]["compute"]["status"].startswith("reading invalid: DCGM_FI_PROF_SM_ACTIVE")
    assert "kv_cache_usage" not in d["readings"] and "requests_waiting" not in d["readings"]
    assert len(d["invalid_readings"]) == 3


def test_mixed_gpu_models_warn_and_name_the_files(rs):
    d = run(rs, [FX / "nvidia_smi_h100_load.csv", FX / "nvidia_smi_l40s_load.csv"])
    f = fired(d)["inputs-mixed-machines"]
    assert f["numbers"] == {"gpu_models": 2, "hosts": 0}
    assert (f"NVIDIA H100 80GB HBM3 ({FX / 'nvidia_smi_h100_load.csv'}); "
            f"NVIDIA L40S ({FX / 'nvidia_smi_l40s_load.csv'})") in f["message"]


def test_served_model_differs_from_the_stack(rs, catalog):
    from kg.inputs.stack import stack_from_doc
    from kg.core.yamlio import YamlDoc
    stack = stack_from_doc(YamlDoc("s.yaml", {"model": "meta-llama/Meta-Llama-3.1-8B", "engine": "vllm"}, {}), catalog, REPO)
    d = run(rs, [M / "vllm_metrics_datadog_fixture_opt125m.prom"], stack=stack)
    assert fired(d)["metrics-model-mismatch"]["message"].startswith(
        "the engine metrics label the served model facebook/opt-125m, but the stack (--stack/--vllm/--sglang) "
        "runs meta-llama/Meta-Llama-3.1-8B")
    assert "metrics-model-mismatch" not in fired(run(rs, [M / "vllm_metrics_datadog_fixture_opt125m.prom"]))
