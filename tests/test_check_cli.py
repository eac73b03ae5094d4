"""optkg check / kv / explain end to end on real configs and vLLM commands (issue 2 acceptance)."""
import json

import pytest

from conftest import REPO


def _findings(out):
    return {f["rule_id"]: f for f in json.loads(out)["findings"]}


def test_demo_stack_text(cli):
    code, out, err = cli("check", str(REPO / "examples/qwen3-235b-tp8.yaml"))
    assert code == 0, err
    assert "kv-head-replication" in out and "48,128" in out and "24,064" in out


def test_vllm_tp8(cli):
    code, out, _ = cli("check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B --tensor-parallel-size 8 "
                       "--enable-prefix-caching --port 8000 --host 0.0.0.0", "--format", "json")
    d = json.loads(out)
    f = _findings(out)["kv-head-replication"]
    assert f["numbers"]["replication_factor"] == 2
    assert f["numbers"]["kv_bytes_per_token_per_gpu"] == 48_128
    assert f["numbers"]["kv_bytes_per_token_per_gpu_unreplicated"] == 24_064
    assert f["numbers"]["suggested_dcp_sizes"] == [1, 2]
    assert f["cost_dimension"] == "storage" and f["fixes"][0]["technique"] == "decode-context-parallelism"
    assert f["sources"] and f["rule_file"].endswith("kv_parallel.yaml")
    assert d["schema_version"] == "1.1"  # 1.1 (issue 12): outcomes and not_evaluable added
    assert "--port 8000" in d["ignored_flags"] and "--host 0.0.0.0" in d["ignored_flags"]
    assert code == 0


def test_vllm_tp4_and_dcp(cli):
    _, out, _ = cli("check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 4", "--format", "json")
    d = json.loads(out)
    assert "kv-head-replication" not in _findings(out)
    assert d["derived"]["dcp_possible"] is False
    _, out, _ = cli("check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8 -dcp 2", "--format", "json")
    assert "kv-head-replication" not in _findings(out)


def test_llama70b(cli):
    _, out, _ = cli("check", "--vllm", "vllm serve meta-llama/Llama-3.1-70B -tp 16", "--format", "json")
    f = _findings(out)["kv-head-replication"]
    assert f["numbers"]["replication_factor"] == 2 and f["numbers"]["kv_bytes_per_token_per_gpu"] == 40_960
    _, out, _ = cli("check", "--vllm", "vllm serve meta-llama/Llama-3.1-70B -tp 8", "--format", "json")
    assert "kv-head-replication" not in _findings(out)


@pytest.mark.parametrize("model", ["deepseek-ai/DeepSeek-V3", "moonshotai/Kimi-K2-Instruct"])
def test_mla(cli, model):
    _, out, _ = cli("check", "--vllm", f"vllm serve {model} -tp 8", "--format", "json")
    f = _findings(out)["mla-kv-duplication"]
    assert f["numbers"]["replication_factor"] == 8 and f["numbers"]["kv_bytes_per_token_per_gpu"] == 70_272
    assert f["numbers"]["max_dcp_size"] == 8


def test_kimi_capacity_with_budget(cli):
    _, out, _ = cli("check", "--vllm", "vllm serve moonshotai/Kimi-K2-Instruct -tp 8 -dcp 8", "--kv-budget-gib", "46.80",
                    "--format", "json")
    d = json.loads(out)["derived"]
    assert abs(d["kv_tokens_total"] - 5_721_088) / 5_721_088 < 0.001


def test_heads_not_divisible(cli, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "qwen2", "num_attention_heads": 28, "num_key_value_heads": 4,
                               "hidden_size": 3584, "num_hidden_layers": 28, "torch_dtype": "bfloat16"}))
    code, out, _ = cli("check", "--vllm", f"vllm serve {tmp_path} -tp 8", "--format", "json")
    # divisors of 28 heads {1, 2, 4, 7, 14, 28}; 4 KV heads: 7 and 14 neither divide 4 nor are multiples of it;
    # no intermediate_size in this config, so no MLP split narrows it further
    f = _findings(out)["heads-not-divisible-by-tp"]
    assert f["severity"] == "error" and f["numbers"]["valid_tp_sizes"] == [1, 2, 4, 28]
    assert code == 1  # --fail-on error (default)
    code, _, _ = cli("check", "--vllm", f"vllm serve {tmp_path} -tp 8", "--fail-on", "never")
    assert code == 0


def test_kv_budget_exhausted_fix_does_not_raise_a_fraction_already_at_one(cli):
    # DeepSeek-V3 (FP8) at TP 8 on H100s, vLLM 0.34.0: gpu_memory_utilization defaults to 1.0
    # (vllm/config/cache.py:216), so raising it is no fix; 64-token MLA blocks of 70,272 B/token = 4,497,408 B
    code, out, _ = cli("check", "--vllm", "vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8",
                       "--gpu", "H100", "--count", "8", "--no-speed", "--format", "json")
    f = _findings(out)["kv-budget-exhausted"]
    assert f["numbers"]["block_bytes"] == 4_497_408 and code == 1
    assert f["fix"].startswith("--gpu-memory-utilization is already 1.0, so free memory per GPU: more GPUs")
    assert "raise --gpu-memory-utilization" not in f["fix"]


def test_max_model_len_message_names_its_source_and_groups_digits(cli):
    # Qwen3-32B -tp 4 on an H100, vLLM 0.34.0 (gpu_memory_utilization 1.0): the user's 10,000,000 tokens need
    # 610.35 GiB per GPU; the 56.57 GiB budget (58.53 GiB before the extensible cache's 1.71 GiB margin and second
    # 0.25 GiB graph estimate) holds 926,848 tokens
    _, out, _ = cli("check", "--vllm", "vllm serve Qwen/Qwen3-32B -tp 4 --max-model-len 10000000", "--gpu", "H100",
                    "--no-speed", "--format", "json")
    f = _findings(out)["max-model-len-exceeds-kv-capacity"]
    assert f["numbers"]["max_model_len_that_fits"] == 926_848
    assert "max_model_len 10,000,000 tokens (given with --max-model-len) needs 610.35 GiB" in f["message"]
    assert "the model's default" not in f["message"] and "is 926,848 tokens" in f["message"]
    assert f["fix"].startswith("lower --max-model-len to 926,848 or less")
    assert "gpu-memory-utilization" not in f["fix"]  # already 1.0: nothing to raise


def test_kv_command(cli):
    code, out, _ = cli("kv", "--model", "Qwen/Qwen3-235B-A22B", "--tp", "8", "--format", "json")
    d = json.loads(out)
    assert code == 0 and d["layout"]["bytes_per_token_per_gpu"] == 48_128 and d["layout"]["valid_dcp_sizes"] == [1, 2]


def test_explain_paths(cli):
    code, out, _ = cli("explain", "tensor-parallelism")
    assert code == 0
    assert "KV-head replication" in out and "Max concurrency" in out
    assert "Decode context parallelism" in out  # the mitigating edge
    code, out, _ = cli("explain", "tensor-parallelism", "decode-context-parallelism", "--format", "json")
    d = json.loads(out)
    assert d["paths"] and any(any(s["kind"] == "mitigates" for s in p) for p in d["paths"])


@pytest.mark.parametrize("argv, needle", [
    (["check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp eight"], "-tp: expected an integer"),
    (["check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 0"], "-tp: expected a value >= 1"),
    (["check", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B --speculative-config '{bad json'"], "--speculative-config: invalid JSON"),
    (["check", "--vllm", "vllm serve acme/Unknown-1B"], "pass --config"),
    (["kv", "--model", "Qwen/Qwen3-235B-A22B", "--tp", "-1"], "--tp: expected a positive integer"),
    (["check", "/nonexistent/stack.yaml"], "file not found"),
])
def test_bad_input_one_line_exit_2(cli, argv, needle):
    code, out, err = cli(*argv)
    assert code == 2
    assert needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_bad_stack_file(cli, tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("model: Qwen/Qwen3-235B-A22B\ntechniques:\n  - tensor-parallelism: {tp_size: eight}\n")
    code, _, err = cli("check", str(p))
    assert code == 2 and f"{p}:3" in err and "tp_size" in err
    p.write_text("model: Qwen/Qwen3-235B-A22B\ntechniques: [warp-drive]\n")
    code, _, err = cli("check", str(p))
    assert code == 2 and "unknown technique 'warp-drive'" in err
    p.write_text("model: [unclosed\n")
    code, _, err = cli("check", str(p))
    assert code == 2 and "YAML error" in err


def test_kv_replication_fix_and_dcp_text_are_per_engine(cli):
    # trtllm-serve has no vLLM -dcp: the fix names TensorRT-LLM's attention DP (LLM-API enable_attention_dp) and the
    # report shows no vLLM DCP sizes for it (TensorRT-LLM docs/source/features/parallel-strategy.md @65b31db)
    for cmd in ("trtllm-serve Qwen/Qwen3-235B-A22B --tp_size 8", "trtllm-serve deepseek-ai/DeepSeek-V3 --tp_size 8"):
        code, out, _ = cli("check", "--cmd", cmd)
        fix = next(x for x in out.splitlines() if x.strip().startswith("fix:"))
        assert "enable_attention_dp: true" in fix and "-dcp" not in out and "--dcp-size" not in out, out
        assert "valid DCP sizes" not in out and "DCP  " not in out and "(after DCP)" not in out
        assert "  KV-head replication  " in out
    d = json.loads(cli("check", "--cmd", "trtllm-serve Qwen/Qwen3-235B-A22B --tp_size 8", "--format", "json")[1])
    assert "valid_dcp_sizes" not in d["derived"]
    # vLLM keeps its DCP advice and sizes
    code, out, _ = cli("check", "--cmd", "vllm serve Qwen/Qwen3-235B-A22B -tp 8")
    assert "vLLM -dcp 2" in out and "valid DCP sizes" in out and "(after DCP)" in out


def test_an_empty_model_name_is_an_error_not_the_working_directorys_config(cli, tmp_path, monkeypatch):
    # newuser5 #19s: Path("") is the working directory, so `kv --model ""` read ./config.json as the model
    (tmp_path / "config.json").write_text((REPO / "catalog" / "models" / "Qwen__Qwen3-8B.json").read_text())
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("kv", "--model", "")
    assert (code, out) == (2, "")
    assert err.strip() == ("optkg: error: model: empty name (give a Hugging Face id such as Qwen/Qwen3-32B, or a "
                           "folder with config.json)")


def test_max_model_len_filled_by_the_release_default_is_not_called_given(cli):
    # newuser5 #4: the engine-default pass fills max_model_len (vLLM's default, the model's 131,072 for
    # gpt-oss-120b: effective_config source "engine default"); the finding must not tell the user to lower a flag
    # they never passed, while a value they did pass stays "given"
    def finding(cmd):
        _, out, _ = cli("check", "--vllm", cmd, "--gpu", "H100", "--count", "1", "--engine-version", "0.10.1",
                        "--no-speed", "--format", "json")
        return _findings(out)["max-model-len-exceeds-kv-capacity"]["message"]
    m = finding("vllm serve openai/gpt-oss-120b")
    assert "max_model_len 131,072 tokens (vLLM's default: --max-model-len is not given)" in m
    assert "given with --max-model-len" not in m
    m = finding("vllm serve openai/gpt-oss-120b --max-model-len 131072")
    assert "max_model_len 131,072 tokens (given with --max-model-len)" in m
