"""A given ``--dtype`` is the dtype the engine runs the model in, so an 'auto' KV cache has its element size
(newuser7 #3): vllm 0.34.0 utils/torch_utils.py:542-544 ``kv_cache_dtype_str_to_dtype`` returns model_config.dtype
for 'auto'. Qwen3-32B (bfloat16 checkpoint, 8 KV heads x 128 x 64 layers) at TP 2 caches 4 heads x 128 x 2 (K, V) x
64 layers = 65,536 elements per token per GPU: 131,072 bytes in bfloat16, 262,144 under ``--dtype float32``. The
estimator has no float32 kernels, so Speed says so instead of timing the 16-bit stack."""
import json

from kg.analyses.weightfacts import runtime_model
from kg.cli import main
from kg.engines import get
from kg.inputs.modelcfg import resolve_model


def _check(cmd, capsys):
    main(["check", "--vllm", cmd, "--gpu", "H100", "--count", "2", "--format", "json"])
    return json.loads(capsys.readouterr().out)


def test_float32_doubles_the_kv_bytes_per_token_and_speed_is_not_evaluable(capsys):
    out = _check("vllm serve Qwen/Qwen3-32B -tp 2 --dtype float32", capsys)
    assert out["derived"]["kv_bytes_per_token_per_gpu"] == 262144
    assert out["speed"]["status"] == "not_evaluable"
    assert "--dtype float32" in " ".join(out["speed"]["reasons"])
    # the copy keeps the config.json: the architecture check is still decided
    assert "vllm-architecture-not-registered" not in {u["rule_id"] for u in out["not_evaluable"]}


def test_bfloat16_given_keeps_two_bytes():
    m = resolve_model("Qwen/Qwen3-32B")
    same, note = runtime_model(get("vllm"), m, "bfloat16", 9.0, "0.34.0")
    assert same is m and note is None


def test_float16_given_on_a_float32_model_caches_two_bytes():
    m = resolve_model("Qwen/Qwen3-32B")
    as32, _ = runtime_model(get("vllm"), m, "float32", 9.0, "0.34.0")
    assert (as32.dtype, as32.dtype_bytes, as32.raw_config is m.raw_config) == ("float32", 4, True)
    as16, note = runtime_model(get("vllm"), as32, "half", 9.0, "0.34.0")
    assert (as16.dtype, as16.dtype_bytes, note) == ("float16", 2, None)
