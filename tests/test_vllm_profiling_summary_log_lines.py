"""The vLLM ~0.7-0.9 memory-profiling summary (newuser5 #20) is read: 'the current vLLM instance can use
total_gpu_memory (139.81GiB) x gpu_memory_utilization (0.85) = 118.84GiB' / 'model weights take 83.88GiB;
non_torch_memory takes 7.16GiB; PyTorch activation peak memory takes 6.37GiB; the rest of the memory reserved for KV
Cache is 21.43GiB.' (V0 worker.py:267 at 0.7.3) and '# cuda blocks: 18418' (executor_base.py:111). The fixture's lines
are those of a published 8 x H200 DeepSeek-R1 run (vLLM 0.7.3, March 2025)."""
from pathlib import Path

from kg.engines.vllm.logs import parse

LOG = Path(__file__).parent / "fixtures" / "logs" / "vllm-0.7.3-deepseek-r1-h200-tp8-profiling-summary.log"
GIB = 2**30


def test_profiling_summary_values():
    log = parse(LOG.read_text().splitlines(), str(LOG))
    v = {k: x.value for k, x in log.values.items()}
    assert v["total_memory"] == 139.81 * GIB and v["gpu_memory_utilization"] == 0.85
    assert v["requested"] == 118.84 * GIB and v["weights"] == 83.88 * GIB and v["non_torch"] == 7.16 * GIB
    assert v["activation_peak"] == 6.37 * GIB and v["kv_cache_memory"] == 21.43 * GIB
    assert v["num_gpu_blocks"] == 18_418 and v["max_concurrency"] == 2.30
    assert log.generation == "v0"
