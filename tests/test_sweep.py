"""`optkg sweep`: every TP x DCP x KV-dtype combination checked, marked and ranked.

Model facts used in the worked values (catalog/models/Qwen__Qwen3-235B-A22B.json, the model's
Hugging Face config.json): num_attention_heads 64, num_key_value_heads 4, head_dim 128,
num_hidden_layers 94, bfloat16 (2 bytes), no sliding window.
"""
from __future__ import annotations

import csv
import io
import json
import math

import pytest

from kg.knowledge.catalog import load_catalog
from kg.analyses.check import check_stack
from kg.cli import main
from kg.engine.rules import load_ruleset
from kg.engines.launch import parse_command
from kg.analyses.sweep import CSV_COLUMNS, parse_int_list, sweep

MODEL = "Qwen/Qwen3-235B-A22B"
TPS = [1, 2, 4, 8, 16]
DCPS = [1, 2, 4, 8]


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def sweep_json(capsys, *extra):
    # vLLM 0.33.0 (16-token blocks, utilisation 0.92): the numbers below are worked out for it
    extra = extra if "--engine-version" in extra else (*extra, "--engine-version", "0.33.0")
    code, out, err = run(["sweep", "--vllm", f"vllm serve {MODEL}", "--tp", "1,2,4,8,16", "--dcp", "1,2,4,8",
                          "--kv-cache-dtype", "auto,fp8", "--format", "json", *extra], capsys)
    assert err == ""
    return code, json.loads(out)


def test_valid_marks_are_exactly_what_the_dcp_and_head_rules_allow(capsys):
    # Head divisibility: 64 % tp == 0 for every tp in {1,2,4,8,16}; KV heads 4: tp 1,2,4 divide 4 and
    # 8, 16 are multiples of 4, so no TP value is refused.
    # DCP (vLLM D1, D5-D7): dcp 1 always; dcp > 1 needs tp % dcp == 0, tp > 4, dcp <= tp / 4 and
    # (64 / 4 = 16) % dcp == 0:  tp 8 -> dcp <= 2 -> {1, 2};  tp 16 -> dcp <= 4 -> {1, 2, 4}.
    # So 8 (tp, dcp) pairs x 2 KV dtypes = 16 valid of 5 x 4 x 2 = 40.
    code, d = sweep_json(capsys, "--kv-budget-gib", "40")
    allowed = {(1, 1), (2, 1), (4, 1), (8, 1), (8, 2), (16, 1), (16, 2), (16, 4)}
    valid = {(c["tp_size"], c["dcp_size"], c["kv_cache_dtype"]) for c in d["combinations"] if c["valid"]}
    assert valid == {(t, p, k) for t, p in allowed for k in ("auto", "fp8")}
    assert d["summary"]["combinations"] == 40 and d["summary"]["valid"] == 16
    for c in d["combinations"]:
        if not c["valid"]:
            # where tp % dcp != 0 vLLM's own check refuses too (0.33.0 config/parallel.py:600, a generated row)
            own = ["engine-startup-check-refuses"] if c["tp_size"] % c["dcp_size"] else []
            assert [f["rule_id"] for f in c["findings"] if f["severity"] == "error"] == ["dcp-invalid-size", *own]
            assert c["reasons"] == ["rule dcp-invalid-size", *(f"rule {r}" for r in own)]
    assert code == 0
    assert d["schema_version"] == "1.1" and d["kind"] == "sweep"


def test_gpu_count_and_memory_decide_fit(capsys):
    # --count 8: tp 16 needs 16 GPUs -> does not fit. H200 141 GiB x 0.9 = 126.9 GiB per GPU; the bf16
    # weights of Qwen3-235B (~235e9 x 2 bytes = ~438 GiB) leave nothing at tp 1 (438 GiB) or tp 2 (219 GiB)
    # -> "no KV-cache memory left". Fit and valid: tp 4 dcp 1, tp 8 dcp 1, tp 8 dcp 2 (x 2 dtypes).
    # --no-speed: the ranking without the speed estimate (KV capacity first; tests/test_sweep_speed.py ranks by speed)
    code, d = sweep_json(capsys, "--gpu", "H200", "--count", "8", "--max-model-len", "32768", "--no-speed")
    ok = {(c["tp_size"], c["dcp_size"], c["kv_cache_dtype"]) for c in d["combinations"] if c["valid"] and c["fits"]}
    assert ok == {(t, p, k) for t, p in [(4, 1), (8, 1), (8, 2)] for k in ("auto", "fp8")}
    by = {(c["tp_size"], c["dcp_size"], c["kv_cache_dtype"]): c for c in d["combinations"]}
    # the sweep's own fit check, or the capacity rule that states the same (whichever the rules hold)
    c16 = by[(16, 4, "auto")]
    assert not c16["fits"]
    assert c16["reasons"] in (["needs 16 GPUs (tp 16 x pp 1 x dp 1); the stack has 8"],
                              ["rule parallel-size-exceeds-gpu-count"])
    c1 = by[(1, 1, "auto")]
    assert c1["kv_tokens_per_gpu"] == 0 and not c1["fits"]
    assert c1["reasons"] in (["no KV-cache memory left per GPU (estimated weights fill the budget)"],
                             ["rule weights-do-not-fit"], ["rule kv-budget-exhausted"])
    # ranking: valid-and-fit first; the best is tp 8 dcp 2 fp8 (fp8 halves bytes/token; dcp 2 removes
    # the 2x replication of tp 8 over 4 KV heads, doubling distinct tokens per GPU)
    ranks = [c["rank"] for c in d["combinations"]]
    assert ranks == list(range(1, 41))
    assert [c["valid"] and c["fits"] for c in d["combinations"]] == [True] * 6 + [False] * 34
    best = d["combinations"][0]
    assert (best["tp_size"], best["dcp_size"], best["kv_cache_dtype"]) == (8, 2, "fp8")
    assert d["summary"]["best"] == {"tp_size": 8, "pp_size": 1, "dcp_size": 2, "kv_cache_dtype": "fp8"}
    assert code == 0


def test_kv_numbers_of_one_combination(capsys):
    # tp 8 > 4 KV heads: 1 KV head per rank; bytes/token/GPU = 1 x (128 + 128) x 2 bytes x 94 layers = 48,128.
    # Budget 40 GiB = 42,949,672,960 bytes; blocks of 16 tokens: floor(42,949,672,960 / (48,128 x 16)) = 55,775
    # blocks = 892,400 tokens per GPU; x dcp 2 = 1,784,800 scheduler-wide; / 8 GPUs = 223,100 distinct per GPU.
    # Max concurrency at 32,768 tokens: each DCP rank holds ceil(32,768 / 2) = 16,384 tokens x 94 layers x 512
    # bytes = 788,529,152 bytes per request -> 42,949,672,960 / 788,529,152 = 54.468 -> 54.47.
    code, out, err = run(["sweep", "--vllm", f"vllm serve {MODEL} --max-model-len 32768", "--tp", "8", "--dcp", "2",
                          "--kv-budget-gib", "40", "--format", "json", "--engine-version", "0.33.0"], capsys)
    c = json.loads(out)["combinations"][0]
    assert c["kv_bytes_per_token_per_gpu"] == 48128
    assert c["kv_tokens_per_gpu"] == 892400 == math.floor(40 * 2**30 / (48128 * 16)) * 16
    assert c["kv_tokens_total"] == 1784800
    assert c["unique_kv_tokens_per_gpu"] == 223100
    assert c["max_concurrency"] == 54.47
    assert c["kv_replication"] == 1.0 and c["findings"] == [] and c["gpus_needed"] == 8


def test_sweep_kv_tokens_per_gpu_is_checks_figure(capsys):
    # Qwen3-32B TP 2 on two H100s, vLLM 0.34.0: check's "KV tokens per GPU" is 338,432 (5,288 blocks of 64);
    # the sweep column shows the same figure, not kv_tokens_total / (tp x pp) = 169,216
    code, out, err = run(["check", "--vllm", "vllm serve Qwen/Qwen3-32B -tp 2", "--gpu", "H100", "--count", "2",
                          "--no-speed"], capsys)
    assert "KV tokens per GPU" in out and "338,432" in out and code == 0
    code, out, err = run(["sweep", "--vllm", "vllm serve Qwen/Qwen3-32B", "--tp", "2", "--gpu", "H100", "--count", "2",
                          "--no-speed"], capsys)
    row = next(line.split() for line in out.splitlines() if line.startswith("1 "))
    assert "KV tok/GPU" in out and row[:4] == ["1", "2", "2", "338,432"] and "169,216" not in out


def test_replication_ranks_below_its_dcp_fix(capsys):
    # Same budget per GPU: tp 8 dcp 1 keeps each KV head on 2 GPUs, so its distinct tokens per GPU are
    # half of tp 8 dcp 2's (892,400 / 8 = 111,550 vs 223,100) and it carries the replication warning.
    code, d = sweep_json(capsys, "--kv-budget-gib", "40")
    by = {(c["tp_size"], c["dcp_size"], c["kv_cache_dtype"]): c for c in d["combinations"]}
    rep, fixed = by[(8, 1, "auto")], by[(8, 2, "auto")]
    assert rep["unique_kv_tokens_per_gpu"] == 111550 and fixed["unique_kv_tokens_per_gpu"] == 223100
    assert [f["rule_id"] for f in rep["findings"]] == ["kv-head-replication"]
    assert rep["rank"] > fixed["rank"]


def test_every_combination_equals_check_of_the_same_command():
    # The sweep applies an axis value the way the vLLM flag would; checking the pasted command must agree.
    cat, problems = load_catalog()
    assert not problems
    rules = load_ruleset("check")
    base = parse_command(f"vllm serve {MODEL} --max-model-len 32768", cat, "vllm")
    res = sweep(base, cat, rules, TPS, DCPS, None, ["auto", "fp8"])
    assert len(res.combinations) == 40
    for c in res.combinations:
        cmd = (f"vllm serve {MODEL} --max-model-len 32768 -tp {c.tp_size} -dcp {c.dcp_size} "
               f"--kv-cache-dtype {c.kv_cache_dtype}")
        rep = check_stack(parse_command(cmd, cat, "vllm"), cat, rules)
        assert [{"rule_id": f.rule_id, "severity": f.severity} for f in rep.findings] == c.findings, cmd
        assert rep.derived["kv_bytes_per_token_per_gpu"] == c.kv["kv_bytes_per_token_per_gpu"], cmd


def test_csv_and_text_outputs(capsys):
    code, out, err = run(["sweep", "--vllm", f"vllm serve {MODEL}", "--tp", "4,8", "--dcp", "1,2",
                          "--kv-budget-gib", "40", "--format", "csv"], capsys)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert tuple(rows[0].keys()) == CSV_COLUMNS
    assert len(rows) == 4
    r = next(r for r in rows if r["tp_size"] == "8" and r["dcp_size"] == "1")
    assert r["valid"] == "true" and r["findings"] == "kv-head-replication:warning"
    r = next(r for r in rows if r["tp_size"] == "4" and r["dcp_size"] == "2")
    assert r["valid"] == "false" and r["reasons"] == "rule dcp-invalid-size"
    code, out, err = run(["sweep", "--vllm", f"vllm serve {MODEL}", "--tp", "4,8", "--dcp", "1,2",
                          "--kv-budget-gib", "40"], capsys)
    assert "KV tok/GPU" in out and "verdict" in out
    # 40 GiB / (2 x 94 layers x 1 KV head x 128 x 2 bytes = 48,128 B per token) in 64-token blocks: 13,943 blocks =
    # 892,352 tokens on each GPU; distinct = scheduler-wide / GPUs: tp 8 replicates each KV head on 2 GPUs
    # (892,352 / 8 = 111,544), dcp 2 splits the tokens again (x 2), so the two tp 8 rows differ in that column
    lines = {tuple(line.split()[1:3]): line.split()[4:6] for line in out.splitlines() if line[:1] in "1234"}
    assert lines[("8", "2")] == ["892,352", "223,088"] and lines[("8", "1")] == ["892,352", "111,544"]
    assert "4 combination(s): 3 valid by the rules and the layout, 3 valid and fit" in out
    assert code == 0


def test_only_valid_top_and_exit_code(capsys):
    code, d = sweep_json(capsys, "--kv-budget-gib", "40", "--only-valid", "--top", "3")
    assert len(d["combinations"]) == 3 and all(c["valid"] and c["fits"] for c in d["combinations"])
    # nothing valid -> exit 1: tp 4 with dcp 2 only (dcp needs tp > 4 KV heads)
    code, out, err = run(["sweep", "--vllm", f"vllm serve {MODEL}", "--tp", "4", "--dcp", "2", "--kv-budget-gib", "40"],
                         capsys)
    assert code == 1 and "none runs" in out


def test_stack_file_base_keeps_its_techniques(tmp_path, capsys):
    f = tmp_path / "s.yaml"
    f.write_text(f"model: {MODEL}\nengine: vllm\ntechniques:\n  - tensor-parallelism: {{tp_size: 8}}\n"
                 "  - prefix-caching\nsettings: {max_model_len: 32768, kv_budget_gib: 40}\n")
    code, out, err = run(["sweep", str(f), "--dcp", "1,2", "--format", "json"], capsys)
    d = json.loads(out)
    assert [(c["tp_size"], c["dcp_size"]) for c in d["combinations"]] == [(8, 2), (8, 1)]
    assert d["axes"]["tp_size"] == [8]
    assert "prefix-caching" in d["base"]["techniques"]


@pytest.mark.parametrize("argv, needle", [
    (["--tp", "1,x"], "--tp: expected a comma-separated list of positive integers, found 'x'"),
    (["--tp", "0"], "--tp: expected a comma-separated list of positive integers, found '0'"),
    (["--dcp", ""], "--dcp: expected a comma-separated list of positive integers"),
    (["--kv-cache-dtype", "auto,bogus"], "--kv-cache-dtype: 'bogus'"),
    (["--tp", ",".join(str(i) for i in range(1, 400)), "--dcp", ",".join(str(i) for i in range(1, 400))],
     "159,201 combinations is over the limit of 100,000"),
    (["--top", "0"], "--top: expected a positive integer"),
])
def test_bad_axes_are_one_line_errors(argv, needle, capsys):
    code, out, err = run(["sweep", "--vllm", f"vllm serve {MODEL}", *argv], capsys)
    assert code == 2
    assert needle in err
    assert err.startswith("optkg: error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_sglang_dcp_sweep(capsys):
    # SGLang has --dcp-size from 0.5.15 (catalog/engines/options/sglang.yaml: since 0.5.15), so a DCP sweep runs there
    code, out, err = run(["sweep", "--sglang", f"python -m sglang.launch_server --model-path {MODEL}",
                          "--engine-version", "0.5.23", "--dcp", "1,2", "--kv-budget-gib", "40", "--format", "json"],
                         capsys)
    assert code == 0 and len(json.loads(out)["combinations"]) == 2
    code, out, err = run(["sweep", "--sglang", f"python -m sglang.launch_server --model-path {MODEL}",
                          "--tp", "4,8", "--kv-budget-gib", "40", "--format", "json"], capsys)
    assert code == 0 and len(json.loads(out)["combinations"]) == 2


@pytest.mark.parametrize("engine, cmd, before, first", [
    ("sglang", f"python -m sglang.launch_server --model-path {MODEL}", "0.5.14", "0.5.15"),
    ("vllm", f"vllm serve {MODEL}", "0.9.1", "0.10.2"),  # -dcp from 0.10.2 (the first scanned vLLM release with it)
])
def test_dcp_sweep_follows_the_release_flag_list(capsys, engine, cmd, before, first):
    # the sweep's flag table is the release's: a release without the DCP flag refuses the axis (exit 2), the
    # first release with it runs both values
    code, out, err = run(["sweep", f"--{engine}", cmd, "--engine-version", before, "--dcp", "1,2",
                          "--kv-budget-gib", "40"], capsys)
    assert code == 2 and f"has no flag that sets dcp_size at release {before}" in err
    code, out, err = run(["sweep", f"--{engine}", cmd, "--engine-version", first, "--dcp", "1,2",
                          "--kv-budget-gib", "40", "--format", "json"], capsys)
    assert code == 0 and len(json.loads(out)["combinations"]) == 2


def test_check_refuses_a_flag_the_release_lacks(capsys):
    # --engine-version reaches the --sglang parser: --dcp-size (0.5.15-) on 0.5.10 is an ERROR (the engine refuses it)
    code, out, err = run(["check", "--sglang", f"python -m sglang.launch_server --model-path {MODEL} --tp 8 --dcp-size 2",
                          "--engine-version", "0.5.10", "--format", "json"], capsys)
    refused = [f for f in json.loads(out)["findings"] if f["rule_id"] == "engine-option-refused"]
    assert code == 1 and refused[0]["severity"] == "error"
    assert ("--dcp-size is not an option of sglang 0.5.10 (it exists in sglang >=0.5.15)") in refused[0]["message"]
    code, out, err = run(["check", "--sglang", f"python -m sglang.launch_server --model-path {MODEL} --tp 8 --dcp-size 2",
                          "--engine-version", "0.5.15", "--format", "json"], capsys)
    assert not [f for f in json.loads(out)["findings"] if f["rule_id"] == "engine-option-refused"]


def test_output_file_is_not_overwritten_without_force(tmp_path, capsys):
    out = tmp_path / "sweep.csv"
    argv = ["sweep", "--vllm", f"vllm serve {MODEL}", "--tp", "8", "--format", "csv", "-o", str(out)]
    assert run(argv, capsys)[0] == 0
    first = out.read_text()
    assert first.startswith("rank,tp_size")
    out.write_text("mine\n")
    code, _, err = run(argv, capsys)
    assert code == 2 and "refusing to overwrite" in err and out.read_text() == "mine\n"
    assert run(argv + ["--force"], capsys)[0] == 0 and out.read_text() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep.csv"]


def test_parse_int_list_keeps_order_and_drops_duplicates():
    assert parse_int_list("8, 1,8,2", "--tp") == [8, 1, 2]


def test_max_model_len_that_does_not_fit_is_marked(capsys):
    # 1 GiB of KV per GPU at tp 8 (48,128 bytes/token/GPU): one 32,768-token request needs
    # 32,768 x 48,128 = 1,577,058,304 bytes -> 1,073,741,824 / 1,577,058,304 = 0.68 requests: vLLM would
    # refuse to start. dcp 2 stores ceil(32,768 / 2) = 16,384 tokens per rank -> 788,529,152 bytes -> 1.36.
    code, out, err = run(["sweep", "--vllm", f"vllm serve {MODEL} --max-model-len 32768", "--tp", "8", "--dcp", "1,2",
                          "--kv-budget-gib", "1", "--format", "json"], capsys)
    by = {c["dcp_size"]: c for c in json.loads(out)["combinations"]}
    assert by[1]["max_concurrency"] == 0.68 and not by[1]["fits"]
    assert by[1]["reasons"] in (["one request of max_model_len 32768 tokens does not fit in the KV cache "
                                 "(max concurrency 0.68)"], ["rule max-model-len-exceeds-kv-capacity"])
    assert by[2]["max_concurrency"] == 1.36 and by[2]["fits"] and by[2]["rank"] == 1


def test_sglang_dp_attention_needs_tp_gpus_not_tp_times_dp():
    # tester-4 #3: DP attention splits the TP group (SGLang layers/dp_attention.py: attn_tp = tp / dp), so
    # DeepSeek-V3 --tp 8 --dp 8 --enable-dp-attention runs on 8 GPUs, as check sizes it
    import json
    from conftest import run_cli
    code, out, err = run_cli("sweep", "--sglang", "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 "
                             "--enable-dp-attention --dp 8", "--tp", "8", "--gpu", "H200", "--count", "8", "--format", "json")
    assert code in (0, 1), err
    c = json.loads(out)["combinations"][0]
    assert c["gpus_needed"] == 8 and c["fits"] is True



def test_sglang_starts_with_a_pool_shorter_than_its_context_length():
    # newuser8: sweep marked SGLang layouts whose KV pool holds less than one context-length request "no fit" (with
    # "max_model_len None"); SGLang logs a warning and caps the request length at the pool ("Not an error",
    # sglang 0.5.23 srt/managers/tp_worker.py:556-571). 4 GiB per GPU at tp 2 (131,072 bytes/token/GPU) holds
    # 32,768 tokens < 40,960: max concurrency 0.8, still a layout that starts
    import json
    from conftest import run_cli
    code, out, err = run_cli("sweep", "--sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-32B",
                             "--tp", "2", "--kv-budget-gib", "4", "--format", "json")
    c = json.loads(out)["combinations"][0]
    assert c["max_concurrency"] == 0.8 and c["fits"] is True and c["reasons"] == []

def test_the_quantization_axis_value_none_is_the_launch_without_the_flag(catalog, check_rules):
    # sweep --quantization none,fp8 (newuser4 #23): 'none' drops --quantization (and the technique its value chose),
    # so the BF16 baseline is a row of its own instead of an invalid 'quantization-method-unknown-to-release' row
    import kg
    from kg.analyses.sweep_eval import _Applier, _copy_stack
    base = kg.stack_from_command("vllm serve Qwen/Qwen3-32B --quantization fp8", catalog)
    applier = _Applier(base, catalog)
    st = _copy_stack(base)
    applier.apply(st, "quantization", "none")
    assert "quantization" not in st.settings and "fp8-inference-kernels" not in st.techniques
    assert "fp8-inference-kernels" in base.techniques  # the base stack is not touched
    report = kg.check(st, catalog, check_rules).to_dict()
    assert report["derived"]["weight_quant"] == "none"
    assert "quantization-method-unknown-to-release" not in [f["rule_id"] for f in report["findings"]]


def test_the_header_names_every_gpu_of_a_gpu_axis():
    # newuser4 #26: a sweep over H100 and H200 said "hardware: H100-SXM x8" although half its rows run on H200
    from conftest import run_cli
    code, out, err = run_cli("sweep", "--vllm", "vllm serve Qwen/Qwen3-32B --max-model-len 16384", "--tp", "1",
                             "--gpu", "H100,H200", "--count", "8", "--no-speed")
    assert code == 0, err
    assert out.splitlines()[1] == "  model: Qwen/Qwen3-32B (gqa)   engine: vllm   hardware: H100-SXM, H200 x8"


def test_an_engine_axis_is_named_and_an_unselectable_expert_layout_is_invalid():
    # newuser6 #11 a, b: `--engine vllm,sglang` said "(vllm)" and "engine: vllm"; vLLM tp 4 ep 8 (its
    # --enable-expert-parallel spans tp x dp = 4 ranks) was "no fit" while SGLang's same layout is "invalid"
    from conftest import run_cli
    code, out, err = run_cli("sweep", "--vllm", f"vllm serve {MODEL}", "--gpu", "H200", "--count", "8", "--tp", "4",
                             "--ep", "4,8", "--engine", "vllm,sglang", "--no-speed")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:2] == [f"optkg sweep: {MODEL}", f"  model: {MODEL} (gqa)   engine: vllm, sglang   hardware: H200 x8"]
    assert lines[6] == "#  ep  engine  GPUs  KV tok/GPU  verdict  findings"
    verdicts = {tuple(x.split()[1:3]): x.split()[5] for x in lines[8:12]}
    assert verdicts == {("4", "vllm"): "ok", ("4", "sglang"): "ok", ("8", "vllm"): "invalid", ("8", "sglang"): "invalid"}
    assert ("invalid layout: ep 8 is not selectable: vLLM's --enable-expert-parallel spans all tp x dp = 4 ranks"
            in lines)
    assert not [x for x in lines if x.startswith("does not fit:")]
    assert "4 combination(s): 2 valid by the rules and the layout, 2 valid and fit" in " ".join(out.split())
    # one engine: the base command's name and engine, as before
    code, out, _ = run_cli("sweep", "--vllm", f"vllm serve {MODEL}", "--gpu", "H200", "--count", "8", "--tp", "4",
                           "--no-speed")
    assert out.splitlines()[:2] == [f"optkg sweep: {MODEL} (vllm)",
                                    f"  model: {MODEL} (gqa)   engine: vllm   hardware: H200 x8"]
