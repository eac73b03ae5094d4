"""IR op priorities as vLLM 0.34.0 checks them: kernel.py:72 IrOpPriorityConfig._to_list_str, a
``@field_validator("*", mode="before")`` over every op field, asserts each entry of a list is a string (a
comma-separated string is split first). The walk now runs a "*" before-validator on each field given.
"""
from __future__ import annotations

import pytest

from engine_rows import refused_at

BASE = "vllm serve Qwen/Qwen3-8B"
SITE = ("vllm/config/kernel.py", 72)


def _refused(extra: str, catalog) -> list[tuple[str, int]]:
    return refused_at(BASE + extra, SITE, catalog)


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
