"""HiSparse's host pool as vLLM 0.34.0 checks it (tools/vllm_hisparse.py): kv_transfer.py:43 refuses a
HiSparseConnector without host_pool_gib, :46 one not above 0, and config/vllm.py:2137 HiSparse without a
HiSparseConnector that gives it.

The commands follow vllm-project/vllm#57041 (HiSparse is inferred from a HiSparseConnector in
--kv-transfer-config; its MultiConnector example nests HiSparseConnector with {"host_pool_gib": 128}).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kg.analyses.enginechecks import generated_refusals  # noqa: E402

BASE = "vllm serve deepseek-ai/DeepSeek-V3.2 -tp 8 --kv-transfer-config '{}'"
HS = '{{"kv_connector": "HiSparseConnector", "kv_role": "kv_both"{}}}'
MULTI = ('{"kv_connector": "MultiConnector", "kv_role": "kv_consumer", "kv_connector_extra_config": {"connectors": '
         '[{"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}, {"kv_connector": "HiSparseConnector", '
         '"kv_role": "kv_both", "kv_connector_extra_config": {"host_pool_gib": 128}}]}}')
WATCHED = {("vllm/config/kv_transfer.py", 43), ("vllm/config/kv_transfer.py", 46), ("vllm/config/vllm.py", 2137)}


@pytest.fixture(scope="module")
def catalog():
    import kg
    return kg.load_catalog()


def _refused(kv: str, catalog, extra: str = "") -> list[tuple[str, int]]:
    import kg
    from kg.analyses.check import stack_facts
    st = kg.stack_from_command(BASE.format(kv) + extra, catalog)
    st.engine_version = "0.34.0"
    st.hardware, st.gpu_count = catalog.resolve_hardware("H100-SXM"), 8
    got = generated_refusals("vllm", "0.34.0", stack_facts(st)[1], stack=st)["engine_check_refusals"]
    return sorted((r["path"], r["line"]) for r in got if (r["path"], r["line"]) in WATCHED)


@pytest.mark.parametrize("kv, refused", [
    (HS.format(', "kv_connector_extra_config": {"host_pool_gib": 128}'), []),
    (HS.format(""), [("vllm/config/kv_transfer.py", 43)]),
    (HS.format(', "kv_connector_extra_config": {"host_pool_gib": null}'), [("vllm/config/kv_transfer.py", 43)]),
    (HS.format(', "kv_connector_extra_config": {"host_pool_gib": 0}'), [("vllm/config/kv_transfer.py", 46)]),
    (MULTI, []),  # a MultiConnector's connectors list is not read: no guess
])
def test_a_hisparse_connector_needs_a_positive_host_pool(kv, refused, catalog):
    assert _refused(kv, catalog) == refused


def test_hisparse_asked_for_with_another_connector_is_refused(catalog):
    kv = '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}'
    assert _refused(kv, catalog, " --attention-config '{\"hisparse_config\": {}}'") == [("vllm/config/vllm.py", 2137)]
    assert _refused(kv, catalog) == []
