"""Inkling LoRA as vLLM 0.34.0 checks it (lora.py:155-158, read through tools/vllm_moe_ep.any_substring): with
--enable-lora, a model whose config.json architectures name Inkling is refused unless INKLING_MULTIMEM_AR=0.

optkg's catalog has no Inkling checkpoint, so the served config.json is a Qwen3-8B one with its architectures
set to ["InklingForCausalLM"] (and optkg's vllm_model__arch fact with it).
"""
from __future__ import annotations

import copy

import pytest

from engine_rows import refused_at

SITE = ("vllm/config/lora.py", 158)


def _as_inkling(st, facts) -> None:
    st.model = copy.copy(st.model)
    st.model.raw_config = {**st.model.raw_config, "architectures": ["InklingForCausalLM"]}
    facts["vllm_model__arch"] = "InklingForCausalLM"


def _refused(command: str, inkling: bool, catalog) -> list[tuple[str, int]]:
    return refused_at(command, SITE, catalog, adjust=_as_inkling if inkling else None)


@pytest.mark.parametrize("command, inkling, refused", [
    ("vllm serve Qwen/Qwen3-8B --enable-lora", True, [SITE]),  # the variable unset reads as "1"
    ("INKLING_MULTIMEM_AR=1 vllm serve Qwen/Qwen3-8B --enable-lora", True, [SITE]),
    ("INKLING_MULTIMEM_AR=0 vllm serve Qwen/Qwen3-8B --enable-lora", True, []),
    ("vllm serve Qwen/Qwen3-8B", True, []),  # no LoRA: not checked
    ("vllm serve Qwen/Qwen3-8B --enable-lora", False, []),  # not Inkling
])
def test_inkling_lora_needs_the_multimem_all_reduce_off(command, inkling, refused, catalog):
    assert _refused(command, inkling, catalog) == refused
