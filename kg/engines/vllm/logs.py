"""vLLM startup-log lines (V0 and V1 formats) -> ``StartupLog`` values.

Keys (bytes unless named otherwise):
- ``weights``: "Loading model weights took 14.9888 GB" (V0; GiB, ``model_runner.py``) or "Model loading
  took 14.99 GiB memory" (V1, ``v1/worker/gpu_model_runner.py``);
- V0 ``Memory profiling results: total_gpu_memory=.. initial_memory_usage=.. peak_torch_memory=..
  non_torch_memory=.. kv_cache_size=.. gpu_memory_utilization=..`` (vLLM 0.6.4-0.6.6 ``worker/worker.py``):
  ``total_memory``, ``peak_torch``, ``non_torch``, ``kv_cache_memory``, ``gpu_memory_utilization``;
- V0 ``# GPU blocks: N, # CPU blocks: M`` -> ``num_gpu_blocks`` (blocks);
- V1 ``Available KV cache memory: X GiB`` -> ``kv_cache_memory`` (``v1/worker/gpu_worker.py``);
- V1 ``GPU KV cache size: N tokens`` -> ``kv_cache_tokens`` (``v1/core/kv_cache_utils.py:1120-1154``);
- ``Maximum concurrency for N tokens per request: X x`` -> ``max_model_len`` (tokens), ``max_concurrency``;
- V1 0.33.0 ``Desired GPU memory utilization is (U, X GiB). Actual usage is A GiB for consumed memory
  (weights + non-torch), B GiB for peak activation, and C GiB for CUDAGraph memory``
  (``v1/worker/gpu_worker.py``) -> ``gpu_memory_utilization``, ``requested``, ``consumed``,
  ``activation_peak``, ``cuda_graphs``; ``Estimated CUDA graph memory: X GiB`` -> ``cuda_graphs``;
  "Current kv cache memory in use is X GiB" (same line) -> ``kv_cache_memory``;
- V0 "The model's max seq len (N) is larger than the maximum number of tokens that can be stored in
  KV cache (M)" -> ``max_model_len``, ``kv_token_limit``; V1 "To serve at least one request with the
  models's max seq len (N), (X GiB KV cache is needed, ... available KV cache memory (Y GiB) ...
  estimated maximum model length is M" -> ``kv_request_memory``, ``kv_cache_memory``, ``max_model_len_that_fits``.
"""
from __future__ import annotations

import re

from kg.inputs.logs.model import GIB, NUM, LoggedValue, StartupLog, logged_model, logged_number

# (regex, [(key, group, scale)]); scale GIB turns GiB into bytes, 1 keeps the number
PATTERNS: list[tuple[re.Pattern[str], list[tuple[str, int, float]]]] = [
    (re.compile(rf"Loading model weights took {NUM} ?GB"), [("weights", 1, GIB)]),
    (re.compile(rf"Model loading took {NUM} ?Gi?B"), [("weights", 1, GIB)]),
    (re.compile(rf"total_gpu_memory={NUM}GiB"), [("total_memory", 1, GIB)]),
    (re.compile(rf"initial_memory_usage={NUM}GiB"), [("initial_memory", 1, GIB)]),
    (re.compile(rf"peak_torch_memory={NUM}GiB"), [("peak_torch", 1, GIB)]),
    (re.compile(rf"non_torch_memory={NUM}GiB"), [("non_torch", 1, GIB)]),
    (re.compile(rf"kv_cache_size={NUM}GiB"), [("kv_cache_memory", 1, GIB)]),
    (re.compile(rf"gpu_memory_utilization={NUM}"), [("gpu_memory_utilization", 1, 1)]),
    (re.compile(rf"(?:^|[^A-Za-z])(?:# )?GPU blocks: {NUM}"), [("num_gpu_blocks", 1, 1)]),
    # vLLM ~0.7-0.9 memory profiling summary (V0 worker/worker.py:267 at 0.7.3; V1 v1/worker/gpu_worker.py in 0.8.x)
    # and V0 executor_base.py's "# cuda blocks: N, # CPU blocks: M" (newuser5 #20)
    (re.compile(rf"total_gpu_memory \({NUM} ?GiB\) x gpu_memory_utilization \({NUM}\) = {NUM} ?GiB"),
     [("total_memory", 1, GIB), ("gpu_memory_utilization", 2, 1), ("requested", 3, GIB)]),
    (re.compile(rf"model weights take {NUM} ?GiB"), [("weights", 1, GIB)]),
    (re.compile(rf"non_torch_memory takes {NUM} ?GiB"), [("non_torch", 1, GIB)]),
    (re.compile(rf"PyTorch activation peak memory takes {NUM} ?GiB"), [("activation_peak", 1, GIB)]),
    (re.compile(rf"the rest of the memory reserved for KV Cache is {NUM} ?GiB"), [("kv_cache_memory", 1, GIB)]),
    (re.compile(rf"# cuda blocks: {NUM}"), [("num_gpu_blocks", 1, 1)]),
    (re.compile(rf"Available KV cache memory: {NUM} ?GiB"), [("kv_cache_memory", 1, GIB)]),
    (re.compile(rf"GPU KV cache size: {NUM} tokens"), [("kv_cache_tokens", 1, 1)]),
    (re.compile(rf"Maximum concurrency for {NUM} tokens per request: {NUM}x"),
     [("max_model_len", 1, 1), ("max_concurrency", 2, 1)]),
    (re.compile(rf"Desired GPU memory utilization is \({NUM}, {NUM} GiB\)\. Actual usage is {NUM} GiB for consumed "
                rf"memory \(weights \+ non-torch\), {NUM} GiB for peak activation, and {NUM} GiB for CUDAGraph memory"),
     [("gpu_memory_utilization", 1, 1), ("requested", 2, GIB), ("consumed", 3, GIB), ("activation_peak", 4, GIB),
      ("cuda_graphs", 5, GIB)]),
    (re.compile(rf"Estimated CUDA graph memory: {NUM} GiB"), [("cuda_graphs", 1, GIB)]),
    (re.compile(rf"Current kv cache memory in use is {NUM} GiB"), [("kv_cache_memory", 1, GIB)]),
    (re.compile(rf"max seq len \({NUM}\) is larger than the maximum number of tokens that can be stored in KV cache "
                rf"\({NUM}\)"), [("max_model_len", 1, 1), ("kv_token_limit", 2, 1)]),
    (re.compile(rf"max seq len \({NUM}\), \({NUM} GiB KV cache is needed, which is larger than the available KV cache "
                rf"memory \({NUM} GiB\)\. Based on the available memory, the estimated maximum model length is {NUM}"),
     [("max_model_len", 1, 1), ("kv_request_memory", 2, GIB), ("kv_cache_memory", 3, GIB),
      ("max_model_len_that_fits", 4, 1)]),
    # the engine config line (vLLM 0.33.0 v1/engine/core.py:140, 0.6.4 engine/llm_engine.py:250) and the
    # non-default args dict (entrypoints: 'tensor_parallel_size': 2)
    (re.compile(r"(?:(?<![A-Za-z_'])tensor_parallel_size=|'tensor_parallel_size': )([0-9]+)"), [("tp_size", 1, 1)]),
]
MODEL_PATTERNS = [re.compile(r"with config: model='([^']+)'"), re.compile(r"'model': '([^']+)'")]
V0_MARKERS = ("Memory profiling results:", "# GPU blocks:", "GPU blocks:", "maximum number of tokens that can be stored",
              "# cuda blocks:")


def parse(lines: list[str], path: str) -> StartupLog | None:
    """The vLLM values in ``lines`` (first occurrence of each key, i.e. rank 0's), or None when there are none."""
    values: dict[str, LoggedValue] = {}
    model = None
    v0 = False
    for i, raw in enumerate(lines, 1):
        if "KV Cache is allocated" in raw:  # an SGLang line
            continue
        model = model or logged_model(raw, i, MODEL_PATTERNS)
        for rx, keys in PATTERNS:
            m = rx.search(raw)
            if not m:
                continue
            for key, group, scale in keys:
                if key not in values:
                    values[key] = LoggedValue(logged_number(m.group(group), key, path, i, raw) * scale, i,
                                              raw.strip()[:300])
        if any(k in raw for k in V0_MARKERS) and "GPU KV cache size" not in raw:
            v0 = True
    sizing = {"kv_cache_memory", "kv_cache_tokens", "num_gpu_blocks", "kv_token_limit", "max_concurrency"}
    if not sizing & set(values):
        return None
    return StartupLog(path, "vllm", "v0" if v0 else "v1", values, model)
