"""ROCm's unsupported-architecture refusal (tools/vllm_rocm_models.py): RocmPlatform.verify_model_arch refuses an
architecture in _ROCM_UNSUPPORTED_MODELS (0.34.0 platforms/rocm.py:1247, the list at :72). The row is read from the
list, which is empty at 0.34.0 and 0.33.0: the row holds and refuses nothing; a release that lists a model refuses
it on ROCm only."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

from engine_rows import refused_at

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

SITE = ("vllm/platforms/rocm.py", 1247)

SRC = """
_ROCM_UNSUPPORTED_MODELS: list[str] = {names}

class RocmPlatform:
    @classmethod
    def verify_model_arch(cls, model_arch: str) -> None:
        if model_arch in _ROCM_UNSUPPORTED_MODELS:
            raise ValueError("not supported by ROCm")
"""


def test_the_empty_list_of_0_34_0_refuses_no_model_on_rocm(catalog):
    assert refused_at("vllm serve Qwen/Qwen3-VL-8B-Instruct", SITE, catalog, gpu="MI300X") == []


def test_the_listed_architectures_and_the_raise_are_read_from_the_module():
    import vllm_rocm_models as m
    assert m.shape(ast.parse(SRC.format(names="[]"))) == ((), 8)
    assert m.shape(ast.parse(SRC.format(names='["MambaForCausalLM"]'))) == (("mambaforcausallm",), 8)
    assert m.shape(ast.parse(SRC.format(names="some_call()"))) is None  # not a literal: nothing written
