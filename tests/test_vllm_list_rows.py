"""vLLM checks over values its startup code builds as lists (tools/vllm_loops.py: kept elements as select(), sorted(),
x[n:], set operations, appends to a local list), a function defined inside another (explicit), the breakable-CUDA-
graph default read from config.json's architectures (tools/vllm_breakable.py) and the Run:ai object-storage source.
Fire / no-fire on launch commands at the engine's lines, both releases where the check is in both."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

from kg.analyses.enginechecks import generated_refusals  # noqa: E402

LLAMA = "vllm serve meta-llama/Llama-3.1-8B "
SIZED = LLAMA + "--max-model-len 4096 --max-num-batched-tokens 8192 --max-num-seqs 128 "
VLLM = "vllm/config/vllm.py"


@pytest.fixture(scope="module")
def catalog():
    import kg
    return kg.load_catalog()


def _refused(cmd: str, release: str, catalog, config: str | None = None) -> list[tuple[str, int]]:
    import kg
    from kg.analyses.check import stack_facts
    st = kg.stack_from_command(cmd, catalog, config=config)
    st.engine_version, st.hardware, st.gpu_count = release, catalog.resolve_hardware("H100-SXM"), 8
    got = generated_refusals("vllm", release, stack_facts(st)[1], stack=st)["engine_check_refusals"]
    return [(r["path"], r["line"]) for r in got]


def test_custom_ops_with_two_base_modes_or_an_op_both_enabled_and_disabled_is_refused(catalog):
    # compilation.py:1171-1184 (0.34.0; :1021-1034 at 0.33.0): base_modes / conflicting_ops are lists kept from
    # custom_ops by comprehensions
    for release, modes, conflict in (("0.34.0", 1173, 1181), ("0.33.0", 1023, 1031)):
        c = "vllm/config/compilation.py"
        assert _refused(LLAMA + "-cc '{\"custom_ops\": [\"all\", \"none\"]}'", release, catalog) == [(c, modes)]
        assert _refused(LLAMA + "-cc '{\"custom_ops\": [\"+rms_norm\", \"-rms_norm\"]}'", release, catalog) == \
            [(c, conflict)]
        assert _refused(LLAMA + "-cc '{\"custom_ops\": [\"all\", \"+rms_norm\", \"-silu_and_mul\"]}'", release,
                        catalog) == []


def test_batch_sharded_sampling_is_refused_for_each_blocker_it_collects(catalog):
    # vllm.py:3316-3353 (0.34.0; :3182-3215 at 0.33.0): reasons appended to a local list, refused when it is not empty
    flag = LLAMA + "--enable-batch-sharded-sampling "
    for release, line in (("0.34.0", 3349), ("0.33.0", 3215)):
        assert _refused(flag, release, catalog) == [(VLLM, line)]  # tensor_parallel_size 1: nothing to shard
        assert _refused(flag + "-tp 2 --max-num-seqs 1", release, catalog) == [(VLLM, line)]  # an f-string reason
        assert _refused(flag + "-tp 2", release, catalog) == []


def test_the_gpu_model_runner_refuses_pipeline_parallelism_under_external_launcher(catalog):
    # vllm.py:3123-3137 and :3456-3460 (0.34.0): the unsupported features, a list the method returns
    assert _refused(LLAMA + "-pp 2 --distributed-executor-backend external_launcher", "0.34.0", catalog) == \
        [(VLLM, 3460)]
    assert _refused(LLAMA + "-pp 2", "0.34.0", catalog) == []


def test_capture_sizes_kept_below_the_token_budget_must_reach_the_given_maximum(catalog):
    # vllm.py:2459-2524 (0.34.0): the given sizes are de-duplicated, kept up to max_num_batched_tokens and sorted;
    # a given max_cudagraph_capture_size other than the largest kept one is refused. Llama is not among the
    # breakable-CUDA-graph architectures (vllm.py:99-134), so CUDA graphs stay on with the variable unset
    cc = "-cc '{\"cudagraph_capture_sizes\": [1, 2, 4, 8, 16384], \"max_cudagraph_capture_size\": %d}'"
    assert _refused(SIZED + cc % 16384, "0.34.0", catalog) == [(VLLM, 2518)]  # 16384 > 8192 tokens is dropped
    assert _refused(SIZED + cc % 8, "0.34.0", catalog) == []
    assert _refused(SIZED + cc % 16384 + " --enforce-eager", "0.34.0", catalog) == []


def test_prefill_or_decode_sizes_above_their_cap_are_refused_by_the_local_function(catalog):
    # vllm.py:2612-2647 (0.34.0): explicit() keeps the sizes within [1, limit] and refuses the largest above the cap;
    # called once for the prefill token sizes (limit max_num_batched_tokens) and once for the decode request sizes
    # (limit max_num_seqs)
    site = (VLLM, 2625)
    decode = "-cc '{\"decode_cudagraph_capture_request_sizes\": [1, 2, 4, 64], " \
             "\"max_decode_cudagraph_capture_requests\": 32}'"
    assert _refused(SIZED + decode, "0.34.0", catalog) == [site]
    assert _refused(SIZED.replace("--max-num-seqs 128", "--max-num-seqs 32") + decode, "0.34.0", catalog) == []
    prefill = "-cc '{\"prefill_cudagraph_capture_token_sizes\": [512, 4096], " \
              "\"max_prefill_cudagraph_capture_tokens\": 2048}'"
    assert _refused(SIZED + prefill, "0.34.0", catalog) == [site]
    assert _refused(SIZED.replace("8192", "2048") + prefill, "0.34.0", catalog) == []


def test_an_object_storage_model_needs_a_run_ai_load_format(catalog):
    # vllm.py:2856-2876 (0.34.0; :2775-2795 at 0.33.0): model_weights is the s3:// / gs:// / az:// path
    # (model.py:1224-1245); load_format auto becomes runai_streamer, another one outside the three is refused
    cfg = str(REPO / "tests" / "fixtures" / "model_configs" / "llama2-7b-vocab-40960.json")
    for release, line in (("0.34.0", 2870), ("0.33.0", 2789)):
        assert _refused("vllm serve s3://bucket/llama --load-format safetensors", release, catalog, cfg) == \
            [(VLLM, line)]
        assert _refused("vllm serve s3://bucket/llama", release, catalog, cfg) == []
        assert _refused(LLAMA + "--load-format safetensors", release, catalog) == []


def test_breakable_cuda_graph_architectures_are_read_per_platform_from_the_source():
    import checkgen as cg
    import vllm_breakable
    import vllm_generated_checks as g
    # the shape of 0.34.0 config/vllm.py:99-158: constants, a union, a return per platform
    src = '''
QWEN = frozenset({"Qwen3_5ForCausalLM"})
DEFAULT = frozenset({"DeepseekV32ForCausalLM", "KimiK3MTPModel"})

def default_breakable_cudagraph_architectures() -> frozenset[str]:
    """doc"""
    if current_platform.is_rocm():
        return frozenset({"DeepseekV41ForCausalLM"})
    if current_platform.is_cuda():
        return DEFAULT | QWEN
    return DEFAULT
'''

    class W:
        modules = {vllm_breakable.PATH: cg.read_module(vllm_breakable.PATH, src)}
        vendor = "nvidia"
    w = W()
    assert vllm_breakable.platform_architectures(w, g.PLATFORM_IS) == {
        "DeepseekV32ForCausalLM", "KimiK3MTPModel", "Qwen3_5ForCausalLM"}
    w.vendor = "amd"
    assert vllm_breakable.platform_architectures(w, g.PLATFORM_IS) == {"DeepseekV41ForCausalLM"}
    w.vendor = "intel"
    assert vllm_breakable.platform_architectures(w, g.PLATFORM_IS) == {"DeepseekV32ForCausalLM", "KimiK3MTPModel"}
    w.modules = {vllm_breakable.PATH: cg.read_module(vllm_breakable.PATH, src.replace("DEFAULT | QWEN", "pick()"))}
    w.vendor = "nvidia"
    assert vllm_breakable.platform_architectures(w, g.PLATFORM_IS) is None  # not a form read here: unknown


def test_the_breakable_default_reads_config_json_architectures_and_the_text_configs():
    import ast

    import checkgen as cg
    import vllm_breakable
    import vllm_generated_checks as g
    from kg.engine.expr import MissingFact, evaluate
    from kg.frameworks.checkrows import FUNCTIONS
    # 0.34.0 config/vllm.py:764-773, over a one-architecture platform set
    src = '''
def default_breakable_cudagraph_architectures() -> frozenset[str]:
    return frozenset({"BeamForCausalLM"})

class VllmConfig:
    def _uses_breakable_cudagraph_by_default(self) -> bool:
        model_config = self.model_config
        if model_config is None:
            return False
        architectures = set(model_config.architectures)
        text_config = getattr(model_config, "hf_text_config", None)
        architectures.update(getattr(text_config, "architectures", None) or ())
        return bool(architectures & default_breakable_cudagraph_architectures())
'''
    w = g.VllmWalker([cg.read_module(vllm_breakable.PATH, src)], g.PLATFORMS[0])
    call = ast.parse("self._uses_breakable_cudagraph_by_default()", mode="eval").body
    e = vllm_breakable.call_hook(w, call.func.attr, call, cg.Frame(vllm_breakable.PATH, {}), [], g.PLATFORM_IS)
    served = {"vllm_model__arch": "x", "hf_text__architectures": "__none__"}
    assert evaluate(e.text, {**served, "hf__architectures": ["BeamForCausalLM"]}, FUNCTIONS) is True
    assert evaluate(e.text, {**served, "hf__architectures": ["LlamaForCausalLM"]}, FUNCTIONS) is False
    wrapper = {**served, "hf__architectures": ["LlavaForConditionalGeneration"],
               "hf_text__architectures": ["BeamForCausalLM"]}  # a multimodal wrapper hosting a breakable model
    assert evaluate(e.text, wrapper, FUNCTIONS) is True
    with pytest.raises(MissingFact):  # an architecture vLLM rewrites (no vllm_model__arch): not evaluable
        evaluate(e.text, {"hf__architectures": ["BeamForCausalLM"], "hf_text__architectures": "__none__"}, FUNCTIONS)
