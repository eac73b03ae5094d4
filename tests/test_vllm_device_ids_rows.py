"""--device-ids against CUDA_VISIBLE_DEVICES as vLLM checks it (tools/vllm_device_ids.py): with the variable set,
each integer id indexes its entries and one past them is refused (0.34.0 engine/arg_utils.py:2197-2212, the raise
at :2207; 0.33.0 :2174). Unset, the ids are physical GPU ids and nothing is checked here. --device-ids is one word
split on commas (arg_utils.py:1209-1215 [:1195-1200]); the variable's entries are the launch command's own.
The option came with https://github.com/vllm-project/vllm/pull/45026 ("--device-ids values as indices into the
CVD-visible set"); launchers moved to it, e.g. https://github.com/NVIDIA/srt-slurm/pull/253.
"""
from __future__ import annotations

import pytest

from engine_rows import refused_at

SITE = {"0.34.0": ("vllm/engine/arg_utils.py", 2207), "0.33.0": ("vllm/engine/arg_utils.py", 2174)}
MODEL = "meta-llama/Meta-Llama-3.1-8B"


@pytest.mark.parametrize("release, env, ids, refused", [
    ("0.34.0", "CUDA_VISIBLE_DEVICES=4,5 ", "0,2", True),  # index 2 of two visible GPUs
    ("0.33.0", "CUDA_VISIBLE_DEVICES=4,5 ", "0,2", True),
    ("0.34.0", "CUDA_VISIBLE_DEVICES=4,5 ", "=0,2", True),  # --device-ids=0,2: the same word
    ("0.34.0", "CUDA_VISIBLE_DEVICES=4,5 ", "0,1", False),
    ("0.34.0", "CUDA_VISIBLE_DEVICES=0,1,2,3 ", "2,3", False),
    ("0.34.0", "", "2,3", False),  # unset: physical ids, not indices
    ("0.34.0", "CUDA_VISIBLE_DEVICES=GPU-aa,GPU-bb ", "GPU-aa", False),  # UUIDs are not indices
])
def test_a_device_id_past_the_visible_devices_is_refused(release, env, ids, refused, catalog):
    site = SITE[release]
    flag = f"--device-ids{ids}" if ids.startswith("=") else f"--device-ids {ids}"
    got = refused_at(f"{env}vllm serve {MODEL} {flag} -tp 2", site, catalog, count=2, release=release)
    assert got == ([site] if refused else [])


ROCM_SYNC = ("vllm/platforms/rocm.py", 146)  # _sync_hip_cuda_env_vars, called at import (:157), both releases


@pytest.mark.parametrize("release, env, gpu, refused", [
    ("0.34.0", "HIP_VISIBLE_DEVICES=0,1 CUDA_VISIBLE_DEVICES=2,3", "MI300X", True),
    ("0.33.0", "HIP_VISIBLE_DEVICES=0,1 CUDA_VISIBLE_DEVICES=2,3", "MI300X", True),
    ("0.34.0", "HIP_VISIBLE_DEVICES=0,1 CUDA_VISIBLE_DEVICES=0,1", "MI300X", False),
    ("0.34.0", "HIP_VISIBLE_DEVICES= CUDA_VISIBLE_DEVICES=2,3", "MI300X", False),  # empty counts as unset
    ("0.34.0", "HIP_VISIBLE_DEVICES=0,1", "MI300X", False),  # copied into CUDA_VISIBLE_DEVICES (:151-152)
    ("0.34.0", "HIP_VISIBLE_DEVICES=0,1 CUDA_VISIBLE_DEVICES=2,3", "H100-SXM", False),  # ROCm imports rocm.py only
])
def test_rocm_refuses_hip_and_cuda_visible_devices_that_differ(release, env, gpu, refused, catalog):
    got = refused_at(f"{env} vllm serve {MODEL} -tp 2", ROCM_SYNC, catalog, gpu=gpu, count=2, release=release)
    assert got == ([ROCM_SYNC] if refused else [])
