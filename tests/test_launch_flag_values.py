"""How launch commands are read: flag=false, launchers and environment words, value-less flags, per-engine
kv_cache_dtype choices, vLLM's human-readable integers per release and --revision."""
from __future__ import annotations

import json

import pytest

from cli_helpers import check_json, check_report, fired
from conftest import run_cli
from kg.core.errors import OptkgError


def parse(catalog, cmd: str, engine: str = "vllm"):
    from kg.engines.launch import parse_command
    return parse_command(cmd, catalog, engine)


def test_flag_equals_false_turns_the_flag_off_where_the_release_takes_a_value(catalog):
    # vLLM releases optkg has not read for boolean values (< 0.7.1) read the value, with a note; from 0.8.5 the
    # parser refuses it (tests/test_boolean_flag_values.py)
    from kg.engines.launch import parse_launch

    def old(cmd):
        return parse_launch(f"vllm serve meta-llama/Llama-3.1-8B {cmd}", catalog, engine_version="0.6.0")
    st = old("--enable-expert-parallel=false")
    assert "expert-parallelism" not in st.techniques and st.settings["enable_expert_parallel"] is False
    assert "prefix-caching" not in old("--enable-prefix-caching=false").techniques
    assert "cuda-graphs" in old("--enforce-eager=false").techniques
    assert "cuda-graphs" not in parse(catalog, "vllm serve meta-llama/Llama-3.1-8B --enforce-eager").techniques
    _, d = check_json("--vllm", "vllm serve meta-llama/Llama-3.1-8B --enable-expert-parallel=false")
    assert "ep-without-experts" not in fired(d) and "engine-option-refused" in fired(d)


def test_launchers_and_environment(catalog):
    st = parse(catalog, "env VLLM_USE_V1=1 vllm serve meta-llama/Llama-3.1-8B")
    assert st.model.name == "meta-llama/Meta-Llama-3.1-8B" and st.settings["vllm_use_v1"] == 1
    st = parse(catalog, "uv run vllm serve meta-llama/Llama-3.1-8B")
    assert st.model.name == "meta-llama/Meta-Llama-3.1-8B" and st.notes == []
    st = parse(catalog, "CUDA_VISIBLE_DEVICES=0,1,2,3 FOO=1 uv run python3.11 -m vllm.entrypoints.openai.api_server "
                        "--model meta-llama/Llama-3.1-8B")
    assert st.gpu_count == 4 and st.ignored == ["FOO=1"]
    st = parse(catalog, "mywrapper --x vllm serve meta-llama/Llama-3.1-8B")
    assert st.notes == ["--vllm: skipped the words before the vllm program: mywrapper --x"]


def test_value_less_flags_keep_the_model(catalog):
    st = parse(catalog, "vllm serve --disable-log-stats meta-llama/Llama-3.1-8B")  # accepted, not modelled
    assert st.model.name == "meta-llama/Meta-Llama-3.1-8B" and st.ignored == ["--disable-log-stats"]
    st = parse(catalog, "vllm serve --trust-remote-code meta-llama/Llama-3.1-8B")  # read by generated checks
    assert st.model.name == "meta-llama/Meta-Llama-3.1-8B" and st.settings["trust_remote_code"] is True
    st = parse(catalog, "vllm serve --no-something meta-llama/Llama-3.1-8B")  # refused (no --something), value-less
    assert st.model.name == "meta-llama/Meta-Llama-3.1-8B" and [r["flag"] for r in st.refused] == ["--no-something"]
    st = parse(catalog, "python -m sglang.launch_server --trust-remote-code --model-path Qwen/Qwen3-32B --tp 2", "sglang")
    assert st.model.name == "Qwen/Qwen3-32B" and st.settings["tp_size"] == 2


def test_kv_cache_dtype_values_per_engine(catalog):
    with pytest.raises(OptkgError, match=r"'banana' is not a vllm kv_cache_dtype.*valid: auto, float16"):
        parse(catalog, "vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype banana")
    # fp8_ds_mla is vLLM's packed MLA layout, not an SGLang choice (nvfp4 is one since SGLang 0.5.16: issue 14 item 15)
    with pytest.raises(OptkgError, match=r"'fp8_ds_mla' is not a sglang kv_cache_dtype"):
        parse(catalog, "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --kv-cache-dtype fp8_ds_mla", "sglang")
    assert "kv-cache-quantization" in parse(
        catalog, "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --kv-cache-dtype nvfp4", "sglang").techniques
    # nvfp4: 4-bit values + a 1-byte scale per 16 = 0.5625 B; 32 layers x 8 heads x 256 x 0.5625 = 36,864 B/token
    _, d = check_json("--vllm", "vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype nvfp4")
    assert d["derived"]["kv_bytes_per_token_per_gpu"] == 36_864
    # a bf16 cache is not KV quantisation
    assert "kv-cache-quantization" not in parse(catalog, "vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype bfloat16").techniques


def test_unsized_but_valid_kv_dtype_is_a_note_not_bf16(catalog):
    _, d = check_json("--vllm", "vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype turboquant_k8v4")
    assert "kv_bytes_per_token_per_gpu" not in d["derived"]
    assert any("does not model its cache size" in n for n in d["notes"])


def test_stack_file_kv_dtype(catalog):
    from kg.inputs.stack import stack_from_mapping
    with pytest.raises(OptkgError, match="'banana' is not a kv_cache_dtype"):
        stack_from_mapping({"model": "meta-llama/Llama-3.1-8B", "settings": {"kv_cache_dtype": "banana"}}, catalog)
    st = stack_from_mapping({"model": "meta-llama/Llama-3.1-8B", "engine": "vllm",
                             "techniques": [{"kv-cache-quantization": {"kv_cache_dtype": "int8"}}]}, catalog)
    assert any("'int8' is not a vllm kv_cache_dtype" in n for n in st.notes)


def test_human_readable_integers_per_release():
    # #12: vLLM's human_readable_int (0.33.0 utils/argparse_utils.py:30-94): k decimal, K binary; --max-model-len
    # from 0.8.5, --max-num-batched-tokens from 0.9.1; 'auto' / -1 from 0.14.0 (the engine fits it: noted)
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B --max-model-len 32k "
                             "--max-num-batched-tokens 16K", "--gpu", "H100", "--format", "json", "--no-speed")
    assert code in (0, 1), err
    st = json.loads(out)["stack"]["settings"]
    assert (st["max_model_len"], st["max_num_batched_tokens"]) == (32_000, 16_384)
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B --max-model-len 32k",
                             "--engine-version", "0.8.0", "--gpu", "H100")
    assert code == 2 and "expected an integer, found '32k'" in err
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B --max-model-len 1.5K",
                             "--gpu", "H100")
    assert code == 2 and "decimals are not allowed with the binary suffix K" in err
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B --max-model-len -1",
                             "--gpu", "H100", "--format", "json", "--no-speed")
    assert code in (0, 1), err
    d = json.loads(out)
    assert d["stack"]["settings"]["max_model_len_auto"] is True
    assert any("longest context that fits in the KV memory" in n for n in d["notes"])


# --revision in the launch command picks the HF-cache snapshot (vLLM --revision, engine/arg_utils.py:986 at 0.33.0);
# a revision the cache does not hold is a one-line input error (exit 2), not main.
def test_launch_revision_reads_that_snapshot(tmp_path, monkeypatch):
    from test_hf_cache import MISTRAL, make_cache
    cfg = json.loads(MISTRAL.read_text())
    make_cache(tmp_path, "org/model", cfg)
    make_cache(tmp_path, "org/model", dict(cfg, num_hidden_layers=16), rev="def456",
               commit="fedcba9876543210fedcba9876543210fedcba98")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    for rev, layers in (("", 32), (" --revision def456", 16)):
        d = check_report(["--vllm", f"vllm serve org/model{rev}", "--gpu", "H100", "--count", "1"])
        # Mistral-7B: 8 KV heads x 128 x 2 x 2 B = 4,096 B per token per layer
        assert d["derived"]["kv_bytes_per_token_model"] == 4_096 * layers
        assert not any("--revision" in x for x in d["ignored_flags"])
    code, out, err = run_cli("check", "--vllm", "vllm serve org/model --revision nosuch", "--gpu", "H100")
    assert code == 2 and "--revision nosuch" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
