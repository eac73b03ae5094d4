"""A removed --pooler-config key as vLLM 0.34.0 refuses it (tools/vllm_removed_keys.py): pooler.py:132
PoolerConfig.reject_removed_parameters raises "Parameter `normalize` was removed; use `use_activation` instead."
for any value of the key; a pooler config without it, or no --pooler-config at all, starts.

vllm-project/vllm#32243 replaced `normalize` with `use_activation`; xorbitsai/inference#4729 adapted a caller.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kg.analyses.enginechecks import generated_refusals  # noqa: E402

BASE = "vllm serve Qwen/Qwen3-8B --runner pooling --convert embed"
SITE = ("vllm/config/pooler.py", 132)


@pytest.fixture(scope="module")
def catalog():
    import kg
    return kg.load_catalog()


def _refused(extra: str, catalog) -> list[tuple[str, int]]:
    import kg
    from kg.analyses.check import stack_facts
    st = kg.stack_from_command(BASE + extra, catalog)
    st.engine_version = "0.34.0"
    st.hardware, st.gpu_count = catalog.resolve_hardware("H100-SXM"), 1
    got = generated_refusals("vllm", "0.34.0", stack_facts(st)[1], stack=st)["engine_check_refusals"]
    return sorted((r["path"], r["line"]) for r in got if (r["path"], r["line"]) == SITE)


@pytest.mark.parametrize("extra, refused", [
    (" --pooler-config '{\"normalize\": true}'", [SITE]),
    (" --pooler-config '{\"normalize\": false, \"pooling_type\": \"CLS\"}'", [SITE]),
    (" --pooler-config '{\"use_activation\": true}'", []),
    (" --pooler-config '{\"pooling_type\": \"CLS\"}'", []),
    ("", []),
])
def test_the_removed_normalize_pooler_key_is_refused_whatever_its_value(extra, refused, catalog):
    assert _refused(extra, catalog) == refused
