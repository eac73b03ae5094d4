"""--mm-encoder-attn-backend against the platform's ViT list, as vLLM checks it when the model builds its encoder
attention (tools/vllm_encoder_attn.py): models/vision.py passes the option to current_platform.get_vit_attn_backend,
whose assert refuses a backend the platform does not list (0.34.0 cuda.py:586, rocm.py:953, xpu.py:296; 0.33.0
cuda.py:545, rocm.py:928, xpu.py:296). The option came with vLLM #27061; ROCm's list is the one ROCm/vllm#981 had
to extend for a new backend. CUDA lists FLASH_ATTN, TRITON_ATTN, TORCH_SDPA, FLASHINFER (cuda.py:563-576); ROCm
FLASH_ATTN, ROCM_AITER_FA, TRITON_ATTN, TORCH_SDPA (rocm.py:937-943); XPU FLASH_ATTN, TRITON_ATTN, TORCH_SDPA
(xpu.py:274-279), after a float32 model falls back to Triton (:288-293).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from engine_rows import refused_at

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

VL = "Qwen/Qwen3-VL-8B-Instruct"  # Qwen3VLForConditionalGeneration builds it (qwen3_vl.py:662)
CUDA = {"0.34.0": ("vllm/platforms/cuda.py", 586), "0.33.0": ("vllm/platforms/cuda.py", 545)}
ROCM = {"0.34.0": ("vllm/platforms/rocm.py", 953), "0.33.0": ("vllm/platforms/rocm.py", 928)}
XPU = ("vllm/platforms/xpu.py", 296)


@pytest.mark.parametrize("release, flags, refused", [
    ("0.34.0", "--mm-encoder-attn-backend FLASHMLA", True),  # an AttentionBackendEnum member no ViT runs on
    ("0.33.0", "--mm-encoder-attn-backend FLASHMLA", True),
    ("0.34.0", "--mm-encoder-attn-backend rocm_aiter_fa", True),  # ROCm's, refused on CUDA (upper-cased first)
    ("0.34.0", "--mm-encoder-attn-backend FLASHINFER", False),
    ("0.34.0", "--mm-encoder-attn-backend TORCH_SDPA", False),
    ("0.34.0", "--mm-encoder-attn-backend NOT_A_BACKEND", False),  # AttentionBackendEnum[...] refuses it earlier
    ("0.34.0", "", False),
])
def test_a_vit_backend_cuda_does_not_list_is_refused(release, flags, refused, catalog):
    site = CUDA[release]
    assert refused_at(f"vllm serve {VL} {flags}", site, catalog, release=release) == ([site] if refused else [])


def test_the_check_needs_a_model_that_builds_an_encoder_attention(catalog):
    assert refused_at("vllm serve meta-llama/Meta-Llama-3.1-8B --mm-encoder-attn-backend FLASHMLA",
                      CUDA["0.34.0"], catalog) == []


@pytest.mark.parametrize("backend, refused", [("FLASHINFER", True), ("ROCM_AITER_FA", False)])
def test_rocm_refuses_a_vit_backend_it_does_not_list(backend, refused, catalog):
    site = ROCM["0.34.0"]
    got = refused_at(f"vllm serve {VL} --mm-encoder-attn-backend {backend}", site, catalog, gpu="MI300X")
    assert got == ([site] if refused else [])


@pytest.mark.parametrize("flags, refused", [
    ("--mm-encoder-attn-backend FLASHINFER", True),
    ("--mm-encoder-attn-backend FLASHINFER --dtype float32", False),  # float32: Triton before the assert
    ("--mm-encoder-attn-backend TRITON_ATTN", False),
])
def test_xpu_refuses_a_vit_backend_it_does_not_list_unless_the_model_is_float32(flags, refused, catalog):
    got = refused_at(f"vllm serve {VL} {flags}", XPU, catalog, gpu="Max-1550")
    assert got == ([XPU] if refused else [])


SRC = '''
from .vision import get_vit_attn_backend

class Attn:
    def __init__(self):
        self.backend = get_vit_attn_backend(64, None)

class Tower:
    def __init__(self, n):
        with ctx():
            self.blocks = [Attn() for _ in range(n)]

class Maybe:
    def __init__(self, cfg):
        if cfg.vision:
            self.tower = Tower(2)

class Late:
    def __init__(self, cfg):
        if cfg.text_only:
            return
        self.tower = Tower(2)

class Child(Tower):
    pass

class Helper:
    def __init__(self):
        self._build()

    def _build(self):
        self.tower = Tower(1)
'''


def test_a_class_builds_the_encoder_attention_only_on_every_path():
    import vllm_encoder_attn as E
    from vllm_model_registry import Classes
    vision = ("def _get_vit_attn_backend(h, d, *, attn_backend_override=None):\n"
              "    return current_platform.get_vit_attn_backend(h, d, backend=attn_backend_override)\n"
              "def get_vit_attn_backend(h, d):\n    mm_cfg = get_multimodal_config()\n"
              "    o = mm_cfg.mm_encoder_attn_backend if mm_cfg is not None else None\n"
              "    return _get_vit_attn_backend(h, d, attn_backend_override=o)\n")
    c = Classes({E.VISION: vision, "vllm/model_executor/models/m.py": SRC})
    assert E.seed_ok(c.tree(E.VISION)) is True
    b = E.Builds(c, c.mro)
    tree = c.tree("vllm/model_executor/models/m.py")
    got = {n.name: b.cls(n, "vllm/model_executor/models/m.py") for n in tree.body if isinstance(n, ast.ClassDef)}
    assert got == {"Attn": True, "Tower": True, "Maybe": False, "Late": False, "Child": True, "Helper": True}
    assert E.seed_ok(ast.parse(vision.replace("backend=attn_backend_override", "backend=None"))) is False


def test_the_refusal_names_the_backend_and_the_platforms_list(catalog):
    import kg
    from kg.analyses.check import stack_facts
    from kg.analyses.enginechecks import generated_refusals
    st = kg.stack_from_command(f"vllm serve {VL} --mm-encoder-attn-backend flashmla", catalog)
    st.engine_version, st.hardware, st.gpu_count = "0.34.0", catalog.resolve_hardware("H100-SXM"), 1
    got = [r["message"] for r in generated_refusals("vllm", "0.34.0", dict(stack_facts(st)[1]), stack=st)[
        "engine_check_refusals"] if (r["path"], r["line"]) == CUDA["0.34.0"]]
    assert got == ["Backend FLASHMLA is not supported for vit attention. Supported backends are: "
                   "FLASH_ATTN, FLASHINFER, TORCH_SDPA, TRITON_ATTN"]
