"""The same sweep evaluated in this process, in worker processes and as Ray tasks gives the same result.

The Ray run starts a real local Ray (``ray.init(num_cpus=2)``, the ``ray`` extra that ``make test``
installs); the sweep is rules-only (``workload=None``), 64 combinations, with LOCAL_MIN set to 0 so the
local executor really uses its worker processes.
"""
from __future__ import annotations

import pytest

from kg.analyses.sweep import sweep
from kg.analyses import sweep_exec
from kg.analyses.sweep_exec import _chunks

TPS = list(range(1, 9))
DCPS = list(range(1, 9))


@pytest.fixture(scope="module")
def base(catalog):
    from kg.engines.launch import parse_command
    st = parse_command("vllm serve Qwen/Qwen3-235B-A22B --max-model-len 32768", catalog, "vllm")
    st.hardware, st.gpu_count = catalog.resolve_hardware("H200"), 16
    return st


@pytest.fixture(scope="module")
def inline(base, catalog, check_rules):
    return sweep(base, catalog, check_rules, TPS, DCPS, executor="inline").to_dict()


def test_chunks_cover_every_index_once():
    for n, w in ((1, 2), (255, 2), (256, 2), (10_000, 8)):
        idx = [i for part in _chunks(n, w) for i in part]
        assert idx == list(range(n))


def test_worker_processes_give_the_inline_result(base, catalog, check_rules, inline, monkeypatch):
    monkeypatch.setattr(sweep_exec, "LOCAL_MIN", 0)  # a sweep this small would otherwise run inline
    local = sweep(base, catalog, check_rules, TPS, DCPS, executor="local", jobs=2).to_dict()
    assert local == inline
    assert inline["summary"]["combinations"] == 64 and inline["summary"]["valid"] > 0


def test_ray_tasks_give_the_inline_result(base, catalog, check_rules, inline):
    import ray  # the ray extra: make test installs it, so a missing Ray fails here rather than skipping
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        got = sweep(base, catalog, check_rules, TPS, DCPS, executor="ray").to_dict()
    finally:
        ray.shutdown()
    assert got == inline
