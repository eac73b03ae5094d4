"""The DeepSeek-V4 FlashInfer MoE-EP backend as vLLM 0.34.0 checks it (tools/vllm_moe_ep.py): kernel.py:238
refuses --moe-backend flashinfer_moe_ep_mega_deep_gemm for a model whose config.json architectures are not in
FLASHINFER_MOE_EP_ARCHITECTURES (:185-191), and leaves DeepSeek-V4 and the other backends alone.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine_rows import refused_at

SITE = ("vllm/config/kernel.py", 238)


def _refused(model: str, backend: str, catalog) -> list[tuple[str, int]]:
    return refused_at(f"vllm serve {model} -tp 8 --enable-expert-parallel --moe-backend {backend}", SITE, catalog,
                      gpu="B200", count=8)


@pytest.mark.parametrize("model, backend, refused", [
    ("deepseek-ai/DeepSeek-V3.2", "flashinfer_moe_ep_mega_deep_gemm", [SITE]),
    ("Qwen/Qwen3-30B-A3B", "flashinfer_moe_ep_mega_deep_gemm", [SITE]),
    ("deepseek-ai/DeepSeek-V4-Flash", "flashinfer_moe_ep_mega_deep_gemm", []),
    ("deepseek-ai/DeepSeek-V4-Pro", "flashinfer_moe_ep_mega_deep_gemm", []),
    ("deepseek-ai/DeepSeek-V3.2", "flashinfer_moe_ep_cutedsl", []),
    ("deepseek-ai/DeepSeek-V3.2", "auto", []),
])
def test_the_mega_deep_gemm_moe_backend_is_refused_outside_deepseek_v4(model, backend, refused, catalog):
    assert _refused(model, backend, catalog) == refused


SRC = """
FLASHINFER_MOE_EP_DEEP_GEMM = "flashinfer_moe_ep_mega_deep_gemm"
FLASHINFER_MOE_EP_ARCHITECTURES = frozenset({"DeepseekV4ForCausalLM", "DeepSeekV4MTPModel"})


def validate_flashinfer_moe_ep_model(moe_backend, architectures):
    \"\"\"Reject model-specific FlashInfer MoE-EP backends.\"\"\"
    if moe_backend != FLASHINFER_MOE_EP_DEEP_GEMM:
        return
    if not any(arch in FLASHINFER_MOE_EP_ARCHITECTURES for arch in architectures):
        raise ValueError("only DeepSeek-V4")
"""


def test_the_moe_ep_backend_and_architectures_are_read_from_the_module_text():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import checkgen as cg
    import vllm_moe_ep
    from types import SimpleNamespace
    w = SimpleNamespace(modules={vllm_moe_ep.PATH: cg.read_module(vllm_moe_ep.PATH, SRC)})
    assert vllm_moe_ep.shape(w) == ("flashinfer_moe_ep_mega_deep_gemm",
                                    frozenset({"DeepseekV4ForCausalLM", "DeepSeekV4MTPModel"}), 11)
    w.modules = {vllm_moe_ep.PATH: cg.read_module(vllm_moe_ep.PATH, SRC.replace("!= FLASHINFER", "== FLASHINFER"))}
    assert vllm_moe_ep.shape(w) is None  # another shape: nothing given
