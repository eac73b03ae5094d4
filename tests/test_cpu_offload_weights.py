"""vLLM / SGLang ``--cpu-offload-gb N``: N GiB of each GPU's weights stay in host memory, so the weights per GPU the fit
decision and the KV budget read lose N GiB (vLLM "the space in GiB to offload to CPU, per GPU", vllm/config/offload.py:
23-31 at 0.34.0; SGLang 0.5.23 srt/utils/offloader.py:69-72, cpu_offload_gb * 1024**3 bytes)."""
from __future__ import annotations

import pytest

GIB = 2**30


def _derived(catalog, check_rules, cmd):
    import kg
    stack = kg.stack_from_command(cmd, catalog)
    stack.hardware = catalog.resolve_hardware("H100")
    return kg.check(stack, catalog, check_rules).to_dict()


@pytest.mark.parametrize("cmd,before,offloaded", [
    # Llama-3.1-70B at TP 2: 70,552,387,584 B (65.71 GiB) per GPU; 40 GiB = 42,949,672,960 B stay on the host
    ("vllm serve meta-llama/Llama-3.1-70B -tp 2 --cpu-offload-gb 40", 70_552_387_584, 40 * GIB),
    # at TP 4 under SGLang: 35,276,193,792 B (32.85 GiB) per GPU, 20 GiB offloaded
    ("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B --tp 4 --cpu-offload-gb 20",
     35_276_193_792, 20 * GIB),
    # more than the GPU holds: everything moves, never below 0
    ("vllm serve meta-llama/Llama-3.1-70B -tp 2 --cpu-offload-gb 100", 70_552_387_584, 70_552_387_584),
])
def test_cpu_offload_gb_comes_off_the_weights_per_gpu(catalog, check_rules, cmd, before, offloaded):
    d = _derived(catalog, check_rules, cmd)["derived"]
    assert d["weight_bytes_offloaded_per_gpu"] == offloaded
    assert d["weight_bytes_per_gpu"] == d["weight_bytes_per_gpu_estimate"] == before - offloaded
    plain = _derived(catalog, check_rules, cmd.rsplit(" --cpu-offload-gb", 1)[0])["derived"]
    assert plain["weight_bytes_per_gpu"] == before and "weight_bytes_offloaded_per_gpu" not in plain


def test_offloaded_weights_leave_room_for_the_kv_cache_so_no_false_capacity_error(catalog, check_rules):
    # newuser4 #14: without the offload, 8.4 GiB of KV (54,976 tokens) is below max_model_len 131,072 -> ERROR;
    # 79.65 - 25.71 (weights) - 1.71 - 0.25 - 3.58 GiB = 48.4 GiB, less vLLM 0.34.0's extensible-cache margin
    # 0.75 x (1.71 + 0.25) = 1.47 GiB and the graph estimate again 0.25 GiB = 46.68 GiB -> 305,856 tokens
    r = _derived(catalog, check_rules, "vllm serve meta-llama/Llama-3.1-70B -tp 2 --cpu-offload-gb 40")
    assert r["derived"]["kv_tokens_per_gpu"] == 305_856
    assert not [f["rule_id"] for f in r["findings"] if f["severity"] == "error"]
    assert any(n.startswith("--cpu-offload-gb 40: 40.00 GiB of each GPU's weights stay in host memory")
               for n in r["notes"])
