"""Inkling LoRA as vLLM 0.34.0 checks it (lora.py:155-158, read through tools/vllm_moe_ep.any_substring): with
--enable-lora, a model whose config.json architectures name Inkling is refused unless INKLING_MULTIMEM_AR=0.

optkg's catalog has no Inkling checkpoint, so the served config.json is a Qwen3-8B one with its architectures
set to ["InklingForCausalLM"] (and optkg's vllm_model__arch fact with it).
"""
from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kg.analyses.enginechecks import generated_refusals  # noqa: E402

SITE = ("vllm/config/lora.py", 158)


@pytest.fixture(scope="module")
def catalog():
    import kg
    return kg.load_catalog()


def _refused(command: str, inkling: bool, catalog) -> list[tuple[str, int]]:
    import kg
    from kg.analyses.check import stack_facts
    st = kg.stack_from_command(command, catalog)
    st.engine_version = "0.34.0"
    st.hardware, st.gpu_count = catalog.resolve_hardware("H100-SXM"), 1
    facts = dict(stack_facts(st)[1])
    if inkling:
        st.model = copy.copy(st.model)
        st.model.raw_config = {**st.model.raw_config, "architectures": ["InklingForCausalLM"]}
        facts["vllm_model__arch"] = "InklingForCausalLM"
    got = generated_refusals("vllm", "0.34.0", facts, stack=st)["engine_check_refusals"]
    return sorted((r["path"], r["line"]) for r in got if (r["path"], r["line"]) == SITE)


@pytest.mark.parametrize("command, inkling, refused", [
    ("vllm serve Qwen/Qwen3-8B --enable-lora", True, [SITE]),  # the variable unset reads as "1"
    ("INKLING_MULTIMEM_AR=1 vllm serve Qwen/Qwen3-8B --enable-lora", True, [SITE]),
    ("INKLING_MULTIMEM_AR=0 vllm serve Qwen/Qwen3-8B --enable-lora", True, []),
    ("vllm serve Qwen/Qwen3-8B", True, []),  # no LoRA: not checked
    ("vllm serve Qwen/Qwen3-8B --enable-lora", False, []),  # not Inkling
])
def test_inkling_lora_needs_the_multimem_all_reduce_off(command, inkling, refused, catalog):
    assert _refused(command, inkling, catalog) == refused
