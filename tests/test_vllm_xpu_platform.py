"""vLLM's Intel XPU platform (vllm/platforms/xpu.py): an Intel GPU in the hardware catalog, the third platform walk of
tools/vllm_generated_checks.py and its rows, read only where the stack's GPU is an Intel one (``gpu_is_xpu``)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

from vllm_generated_checks import combine  # noqa: E402

from kg.analyses.enginechecks import generated_refusals  # noqa: E402

BASE = "vllm serve Qwen/Qwen2-7B-Instruct"


@pytest.fixture(scope="module")
def catalog():
    import kg
    return kg.load_catalog()


def _refused(cmd: str, gpu: str | None, catalog, release: str = "0.34.0") -> list[tuple[str, int]]:
    import kg
    from kg.analyses.check import stack_facts
    st = kg.stack_from_command(cmd, catalog)
    st.engine_version = release
    if gpu is not None:
        st.hardware, st.gpu_count = catalog.resolve_hardware(gpu), 2
    got = generated_refusals("vllm", release, stack_facts(st)[1], stack=st)["engine_check_refusals"]
    return [(r["path"], r["line"]) for r in got]


def test_the_max_1550_resolves_from_the_name_the_xpu_driver_prints_with_no_cuda_capability(catalog):
    hw = catalog.resolve_hardware("Intel(R) Data Center GPU Max 1550")
    assert (hw["id"], hw["vendor"], hw["memory_gib"], hw["compute_capability"]) == ("Max-1550", "intel", 128, None)


def test_rows_of_the_walks_combine_by_platform_and_a_stack_without_a_gpu_reads_the_cuda_alike_ones():
    assert combine({"nvidia": "a", "amd": "a", "intel": "a"}) == "a"
    assert combine({"nvidia": "a", "amd": "a"}) == "((not gpu_is_xpu) and (a))"
    assert combine({"intel": "x"}) == "(gpu_is_xpu and (x))"
    assert combine({"nvidia": "a", "amd": "a", "intel": "x"}) == "((x) if gpu_is_xpu else (a))"
    assert combine({"nvidia": "a", "intel": "x"}) == "((x) if gpu_is_xpu else ((gpu_vendor == 'nvidia') and (a)))"


def test_xpu_only_refusals_fire_on_an_intel_gpu_and_not_on_cuda_or_without_a_gpu(catalog):
    # config/model.py:1569-1571 (0.34.0): --enable-hc-sp with TP > 1 needs is_cuda_alike() (Qwen2 also lacks HC-SP
    # support, :1572-1573, read on every platform: the job fails either way)
    hc = BASE + " --enable-hc-sp -tp 2"
    assert _refused(hc, "Max-1550", catalog) == [("vllm/config/model.py", 1571), ("vllm/config/model.py", 1573)]
    assert _refused(hc, "H100-SXM", catalog) == [("vllm/config/model.py", 1573)]
    assert _refused(hc, None, catalog) == [("vllm/config/model.py", 1573)]
    # config/vllm.py:3200-3201, :3262-3263: the extensible KV cache asked for where it is "only supported on CUDA and
    # ROCm"; config/lora.py:121-122 (0.34.0; the same check at 0.33.0) dual CUDA streams for LoRA
    ext = BASE + " --enable-extensible-kv-cache"
    assert _refused(ext, "Max-1550", catalog) == [("vllm/config/vllm.py", 3263)]
    assert _refused(ext, "MI300X", catalog) == [] and _refused(ext, None, catalog) == []
    lora = "VLLM_LORA_ENABLE_DUAL_STREAM=1 " + BASE + " --enable-lora"
    assert _refused(lora, "Max-1550", catalog) == [("vllm/config/lora.py", 122)]
    assert _refused(lora, "H100-SXM", catalog) == []
    assert _refused(BASE, "Max-1550", catalog) == []


def test_an_intel_gpu_has_no_extensible_kv_cache_so_vllm_0_34_keeps_0_92_utilization(catalog):
    import kg
    from kg.inputs.effective import effective_configuration
    from kg.engines import get
    st = kg.stack_from_command(BASE, catalog)
    st.engine_version = "0.34.0"
    got = {}
    for gpu in ("Max-1550", "H100-SXM"):
        st.hardware, st.gpu_count = catalog.resolve_hardware(gpu), 1
        eng = get("vllm")
        got[gpu] = ({e["setting"]: e["value"] for e in effective_configuration(st, eng.release_facts)}
                    .get("gpu_memory_utilization"), eng.kv_sizing(st, {}))
    assert got == {"Max-1550": (0.92, None), "H100-SXM": (1.0, "extensible")}


def test_the_xpu_selector_refuses_a_forced_backend_outside_its_own_as_xpu_py_reads():
    from kg.analyses.xpu_attention import xpu_attention_facts
    table = {n: {} for n in ("FLASHINFER", "FLASH_ATTN", "TRITON_ATTN", "TRITON_MLA", "FLASH_ATTN_MLA", "FLASHMLA")}
    base = {"gpu_is_xpu": True, "num_attention_heads": 32, "attention_backends": table, "is_mla": False,
            "index_head_dim": None, "vision_model_type": None, "dtype_loaded": "bfloat16", "kv_cache_dtype": "auto"}

    def got(**kw):
        return xpu_attention_facts({**base, **kw}).get("xpu_attention_backend_refusal")
    assert got(attention_backend="flashinfer") == "FLASHINFER (vllm/platforms/xpu.py:265)"
    assert got(attention_backend="FLASHMLA", is_mla=True) == "FLASHMLA with an MLA model (vllm/platforms/xpu.py:165)"
    # taken: nothing forced, the XPU backends, float32 or batch invariance (Triton fallback), a TurboQuant KV cache
    assert [got(), got(attention_backend="FLASH_ATTN"), got(attention_backend="TRITON_ATTN"),
            got(attention_backend="TRITON_MLA", is_mla=True), got(attention_backend="FLASHINFER", dtype_loaded="float32"),
            got(attention_backend="FLASHINFER", VLLM_BATCH_INVARIANT=True),
            got(attention_backend="FLASHINFER", kv_cache_dtype="turboquant_k8v4")] == [""] * 7
    # not known: FLASH_ATTN_MLA's XPU validation, a multimodal model (prefix-LM or not), a per-kind map, a name the
    # release's table lacks, another vendor
    assert [got(attention_backend="FLASH_ATTN_MLA", is_mla=True), got(attention_backend="FLASHINFER",
                                                                       vision_model_type="siglip"),
            got(attention_backend="FLASHINFER", attention_config__backend_per_kind={"full_attention": "TRITON_ATTN"}),
            got(attention_backend="NO_SUCH"), got(attention_backend="FLASHINFER", gpu_is_xpu=False)] == [None] * 5


def test_xpu_batch_invariance_refuses_a_quantized_model_before_a_quantized_kv_cache():
    from kg.analyses.xpu_attention import xpu_batch_invariance_facts
    base = {"gpu_is_xpu": True, "VLLM_BATCH_INVARIANT": True, "weight_quant": "none", "kv_cache_dtype": "auto"}

    def got(**kw):
        return xpu_batch_invariance_facts({**base, **kw}).get("xpu_batch_invariance_refusal")
    assert got(weight_quant="fp8", kv_cache_dtype="fp8") == "quantization=fp8 (vllm/platforms/xpu.py:363)"
    assert got(kv_cache_dtype="fp8_e5m2") == "kv_cache_dtype=fp8_e5m2 (vllm/platforms/xpu.py:371)"
    assert [got(), got(kv_cache_dtype="bfloat16"), got(VLLM_BATCH_INVARIANT=False, weight_quant="awq")] == [""] * 3
    assert [got(weight_quant=None), got(gpu_is_xpu=False)] == [None, None]
