"""IR op priorities as vLLM 0.34.0 checks them: kernel.py:72 IrOpPriorityConfig._to_list_str, a
``@field_validator("*", mode="before")`` over every op field, asserts each entry of a list is a string (a
comma-separated string is split first). The walk now runs a "*" before-validator on each field given.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kg.analyses.enginechecks import generated_refusals  # noqa: E402

BASE = "vllm serve Qwen/Qwen3-8B"
SITE = ("vllm/config/kernel.py", 72)


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
    (" --ir-op-priority '{\"rms_norm\": [1]}'", [SITE]),
    (" --kernel-config '{\"ir_op_priority\": {\"rms_norm\": [\"vllm_c\", 2]}}'", [SITE]),
    (" --ir-op-priority '{\"rms_norm\": [\"vllm_c\", \"native\"]}'", []),
    (" --ir-op-priority '{\"rms_norm\": \"vllm_c,native\"}'", []),
    (" --kernel-config '{\"ir_op_priority\": {\"rms_norm\": [\"native\"]}}'", []),
    ("", []),
])
def test_an_ir_op_priority_entry_that_is_not_a_string_is_refused(extra, refused, catalog):
    assert _refused(extra, catalog) == refused
