"""vLLM 0.34.0 engine/arg_utils.py:2845-2855 (0.33.0 :2808-2818) copies each op of the deprecated top-level --ir-op-priority into
--kernel-config's ir_op_priority and refuses an op both name (:2852 [:2815]). tools/vllm_fields_loop.py walks the loop over
asdict(IrOpPriorityConfig) once per field (fused_add_rms_norm, gelu_and_mul_sparse, rms_norm: config/kernel.py)."""
from __future__ import annotations

import pytest

from engine_rows import refused_at

SITE = ("vllm/engine/arg_utils.py", 2852)
SITE_033 = ("vllm/engine/arg_utils.py", 2815)
BASE = "vllm serve meta-llama/Meta-Llama-3.1-8B "


@pytest.mark.parametrize("flags, refused", [
    ("--ir-op-priority '{\"rms_norm\": [\"vllm_c\"]}' --kernel-config '{\"ir_op_priority\": {\"rms_norm\": [\"native\"]}}'",
     True),
    ("--ir-op-priority '{\"rms_norm\": [\"vllm_c\"]}' "
     "--kernel-config '{\"ir_op_priority\": {\"fused_add_rms_norm\": [\"native\"]}}'", False),  # different ops
    ("--ir-op-priority '{\"rms_norm\": []}' --kernel-config '{\"ir_op_priority\": {\"rms_norm\": [\"native\"]}}'",
     False),  # an empty list is unset (:2847-2848)
    ("--ir-op-priority '{\"rms_norm\": [\"vllm_c\"]}'", False),
])
def test_an_ir_op_priority_given_twice_for_one_op_is_refused(flags, refused, catalog):
    assert refused_at(BASE + flags, SITE, catalog) == ([SITE] if refused else [])


def test_the_same_loop_refuses_at_0_33_0(catalog):
    both = "--ir-op-priority '{\"rms_norm\": [\"vllm_c\"]}' --kernel-config '{\"ir_op_priority\": {\"rms_norm\": [\"native\"]}}'"
    assert refused_at(BASE + both, SITE_033, catalog, release="0.33.0") == [SITE_033]
