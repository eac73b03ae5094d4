"""vLLM's _FLOAT16_NOT_SUPPORTED_MODELS (newuser5 #22): --dtype float16 refused, and with --dtype auto float16 left
out of the platform's dtypes, so Gemma 2/3 and GLM-4 run in float32 on GPUs without bfloat16.

Read: 0.9.0 has no such table; 0.10.0 / 0.10.1 config.py:3293-3298 gemma2, gemma3, plamo2, glm4; 0.11.0-0.15.0 add
gemma3_text; 0.29.0-0.34.0 (config/model.py:2442-2447) gemma2, gemma3, gemma3_text, glm4. _resolve_auto_dtype
(0.34.0 :2467-2508) filters platforms/cuda.py:298-307's dtypes ([float16, float32] below SM80) with _is_valid_dtype.
Gemma-2-9B at TP 4: 42 layers x 8 KV heads / 4 x (256 + 256) x 4 B = 172,032 B/token per GPU in float32."""
from cli_helpers import check_json, fired
from kg.engines import get


def test_float16_refused_per_release():
    v = get("vllm")
    assert [v.float16_refused("gemma2", r) for r in ("0.9.0", "0.10.0", "0.34.0", None)] == [False, True, True, True]
    assert [v.float16_refused("gemma3_text", r) for r in ("0.10.1", "0.11.0", "0.34.0")] == [False, True, True]
    assert [v.float16_refused("plamo2", r) for r in ("0.10.0", "0.15.0", "0.29.0")] == [True, True, False]
    assert v.float16_refused("llama", "0.34.0") is False
    assert get("sglang").float16_refused("gemma2", "0.5.23") is None  # not modelled for SGLang


def test_auto_dtype_of_a_float16_refusing_model():
    v = get("vllm")
    assert v.loaded_dtype("bfloat16", False, 7.5, "0.34.0", model_type="gemma2") == "float32"   # T4
    assert v.loaded_dtype("bfloat16", False, 8.0, "0.34.0", model_type="gemma2") == "bfloat16"
    assert v.loaded_dtype("float32", False, 7.0, "0.34.0", model_type="glm4") == "float32"      # V100
    assert v.loaded_dtype("float32", False, 9.0, "0.34.0", model_type="glm4") == "bfloat16"
    assert v.loaded_dtype("bfloat16", False, 7.5, "0.34.0", model_type="llama") == "float16"
    assert v.loaded_dtype("bfloat16", False, 7.5, "0.9.0", model_type="gemma2") == "float16"    # no table yet


def test_check_refuses_gemma2_float16():
    # 0.31.0: this rule; 0.34.0: the generated row of _check_valid_dtype (one refusal, not two)
    code, d = check_json("--vllm", "vllm serve google/gemma-2-9b-it --dtype float16", "--gpu", "A100-80GB",
                         "--count", "1", "--engine-version", "0.31.0")
    assert code == 1 and fired(d)["model-refuses-float16"]["severity"] == "error"
    code, d = check_json("--vllm", "vllm serve google/gemma-2-9b-it --dtype float16", "--gpu", "A100-80GB",
                         "--count", "1", "--engine-version", "0.34.0")
    assert code == 1 and "model-refuses-float16" not in fired(d) and "engine-startup-check-refuses" in fired(d)
    _, d = check_json("--vllm", "vllm serve google/gemma-2-9b-it --dtype float16", "--gpu", "A100-80GB",
                      "--count", "1", "--engine-version", "0.9.0")
    assert "model-refuses-float16" not in fired(d)


def test_gemma2_on_t4_is_sized_in_float32():
    _, d = check_json("--vllm", "vllm serve google/gemma-2-9b-it -tp 4", "--gpu", "T4", "--count", "4")
    assert d["derived"]["kv_bytes_per_token_per_gpu"] == 172_032
    assert "bfloat16-auto-falls-back-to-float16" not in fired(d)
