"""vLLM's CUDA-graph mode and the values the startup walk reads around it (tools/vllm_enums.py,
tools/vllm_generated_checks.py): CUDAGraphMode's tuple members and methods, the optimization-level defaults, the
per-architecture hooks scoped to their architectures, environment variables tested for being set, and
transformers' class default of is_encoder_decoder. Fire / no-fire on launch commands at the engine's lines."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

from kg.analyses.configdefaults import class_defaults  # noqa: E402
from kg.analyses.enginechecks import generated_refusals  # noqa: E402

H100 = "H100-SXM"
LLAMA = "vllm serve meta-llama/Llama-3.1-8B "
ENV0 = "VLLM_USE_BREAKABLE_CUDAGRAPH=0 "  # set: vLLM does not look at the breakable-by-default architectures


@pytest.fixture(scope="module")
def catalog():
    import kg
    return kg.load_catalog()


def _refused(cmd: str, release: str, catalog) -> list[tuple[str, int]]:
    import kg
    from kg.analyses.check import stack_facts
    st = kg.stack_from_command(cmd, catalog)
    st.engine_version, st.hardware, st.gpu_count = release, catalog.resolve_hardware(H100), 1
    got = generated_refusals("vllm", release, stack_facts(st)[1], stack=st)["engine_check_refusals"]
    return [(r["path"], r["line"]) for r in got]


def test_cudagraph_mode_methods_are_tables_over_its_members():
    # config/compilation.py:129-199 (0.34.0): FULL_DECODE_ONLY = (FULL, NONE), FULL_AND_PIECEWISE = (FULL, PIECEWISE)
    import checkgen as cg
    import vllm_enums
    src = '''
import enum
class CUDAGraphMode(enum.Enum):
    NONE = 0
    PIECEWISE = 1
    FULL = 2
    FULL_DECODE_ONLY = (FULL, NONE)
    FULL_AND_PIECEWISE = (FULL, PIECEWISE)

    def decode_mode(self) -> "CUDAGraphMode":
        return CUDAGraphMode(self.value[0]) if self.separate_routine() else self

    def without_piecewise(self) -> "CUDAGraphMode":
        if self == CUDAGraphMode.PIECEWISE:
            return CUDAGraphMode.NONE
        if self == CUDAGraphMode.FULL_AND_PIECEWISE:
            return CUDAGraphMode.FULL_DECODE_ONLY
        return self

    def has_full_cudagraphs(self) -> bool:
        return CUDAGraphMode(max(self.value)) == CUDAGraphMode.FULL if self.separate_routine() else self == CUDAGraphMode.FULL

    def separate_routine(self) -> bool:
        return isinstance(self.value, tuple)
'''
    e = vllm_enums.named_enums([cg.read_module("vllm/config/compilation.py", src)])["CUDAGraphMode"]
    assert e.values == {"NONE": 0, "PIECEWISE": 1, "FULL": 2, "FULL_DECODE_ONLY": "FULL_DECODE_ONLY",
                        "FULL_AND_PIECEWISE": "FULL_AND_PIECEWISE"}
    assert e.methods["decode_mode"] == {"NONE": 0, "PIECEWISE": 1, "FULL": 2, "FULL_DECODE_ONLY": 2,
                                        "FULL_AND_PIECEWISE": 2}
    assert e.methods["has_full_cudagraphs"] == {"NONE": False, "PIECEWISE": False, "FULL": True,
                                                "FULL_DECODE_ONLY": True, "FULL_AND_PIECEWISE": True}
    members = "(0, 1, 2, 'FULL_DECODE_ONLY', 'FULL_AND_PIECEWISE')"
    assert e.call("separate_routine", "m") == (f"((m in ('FULL_DECODE_ONLY', 'FULL_AND_PIECEWISE')) if m in "
                                               f"{members} else __unknown__)")
    assert e.call("without_piecewise", "m") == (f"(0 if m == 1 else ('FULL_DECODE_ONLY' if m == 'FULL_AND_PIECEWISE' "
                                                f"else (m if m in {members} else __unknown__)))")
    # a class body that reaches a module name is not run
    bad = src.replace("return isinstance(self.value, tuple)", "return helper(self)")
    assert vllm_enums.named_enums([cg.read_module("vllm/config/compilation.py", bad)]) == {}


def test_hisparse_refuses_a_full_cudagraph_mode_given_by_name(catalog):
    # config/vllm.py:1821-1822 (0.34.0; :1892-1893 at 0.33.0): -cc cudagraph_mode goes through
    # CUDAGraphMode[value.upper()] (compilation.py:1023-1029); FULL is refused, FULL_AND_PIECEWISE (the -O2 default,
    # vllm.py:339) is not
    hisparse = LLAMA + "--kv-transfer-config '{\"kv_connector\": \"HiSparseConnector\", \"kv_role\": \"kv_both\"}' "
    for release, line in (("0.34.0", 1822), ("0.33.0", 1893)):
        site = ("vllm/config/vllm.py", line)
        assert site in _refused(hisparse + "-cc '{\"cudagraph_mode\": \"full\"}'", release, catalog)
        assert site not in _refused(hisparse + "-cc '{\"cudagraph_mode\": \"FULL_AND_PIECEWISE\"}'", release, catalog)
        assert site not in _refused(hisparse, release, catalog)


def test_an_empty_capture_size_list_is_refused_only_where_cuda_graphs_are_captured(catalog):
    # config/vllm.py:2457-2460 (0.34.0): cudagraph_capture_sizes given empty, with CUDA graphs on (the -O2 default
    # FULL_AND_PIECEWISE); --enforce-eager sets the mode NONE (vllm.py:1697-1699). Unset, VLLM_USE_BREAKABLE_CUDAGRAPH
    # is the architecture's default (vllm.py:810-833, tools/vllm_breakable.py): Llama's is off
    site = ("vllm/config/vllm.py", 2460)
    for env in ("VLLM_USE_BREAKABLE_CUDAGRAPH=0 ", "VLLM_USE_BREAKABLE_CUDAGRAPH=1 "):
        assert _refused(env + LLAMA + "-cc '{\"cudagraph_capture_sizes\": []}'", "0.34.0", catalog) == [site]
    assert _refused(ENV0 + LLAMA + "-cc '{\"cudagraph_capture_sizes\": [1, 2]}'", "0.34.0", catalog) == []
    assert _refused(ENV0 + LLAMA + "-cc '{\"cudagraph_capture_sizes\": []}' --enforce-eager", "0.34.0", catalog) == []
    assert _refused(LLAMA + "-cc '{\"cudagraph_capture_sizes\": []}'", "0.34.0", catalog) == [site]


def test_checks_after_the_architecture_hooks_read_fields_no_hook_of_the_served_architecture_assigns(catalog):
    # the MODELS_CONFIG_MAP hooks (model_executor/models/config.py) assign cache_dtype / mamba fields for some
    # architectures only: Llama's and DeepSeek-V3's keep the command's values after try_verify_and_update_config
    assert ("vllm/config/vllm.py", 3559) in _refused(  # vllm.py:3553-3559 nvfp4_ds_mla with DCP
        "vllm serve deepseek-ai/DeepSeek-V3 --kv-cache-dtype nvfp4_ds_mla -dcp 2 -tp 2", "0.34.0", catalog)
    assert _refused("vllm serve deepseek-ai/DeepSeek-V3 --kv-cache-dtype nvfp4_ds_mla -tp 2", "0.34.0", catalog) == []
    rounding = ("vllm/config/vllm.py", 1546)  # vllm.py:1542-1546 stochastic rounding needs a float16 SSM cache
    assert rounding in _refused(LLAMA + "--enable-mamba-cache-stochastic-rounding", "0.34.0", catalog)
    assert rounding not in _refused(LLAMA + "--enable-mamba-cache-stochastic-rounding --mamba-ssm-cache-dtype float16",
                                    "0.34.0", catalog)
    aux = ("vllm/config/vllm.py", 1117)  # vllm.py:1116-1117 routed-experts output needs prefix caching
    assert _refused("vllm serve Qwen/Qwen3-30B-A3B --enable-return-routed-experts --no-enable-prefix-caching",
                    "0.34.0", catalog) == [aux]
    assert _refused("vllm serve Qwen/Qwen3-30B-A3B --enable-return-routed-experts", "0.34.0", catalog) == []


def test_hook_fields_are_unknown_only_for_the_architectures_whose_hook_assigns_them():
    import vllm_generated_checks as g
    text = '''
class VerifyAndUpdateConfig:
    pass

class LongcatConfig(VerifyAndUpdateConfig):
    @staticmethod
    def verify_and_update_config(vllm_config):
        compilation = vllm_config.compilation_config
        if compilation.cudagraph_mode is None:
            compilation.cudagraph_mode = 2

class DsConfig(VerifyAndUpdateConfig):
    @staticmethod
    def verify_and_update_config(vllm_config):
        vllm_config.parallel_config.set_dcp_defaults()

class MambaConfig(VerifyAndUpdateConfig):
    @staticmethod
    def verify_and_update_config(vllm_config):
        _pad(vllm_config)

def _pad(vllm_config):
    vllm_config.cache_config.mamba_page_size_padded = 8
    vllm_config.compilation_config.custom_ops.append("+x")

MODELS_CONFIG_MAP = {"LongcatForCausalLM": LongcatConfig, "DsForCausalLM": DsConfig, "MambaForCausalLM": MambaConfig}
'''
    arch, fields = g.model_hook_classes(text)
    assert arch == {"LongcatForCausalLM": "LongcatConfig", "DsForCausalLM": "DsConfig",
                    "MambaForCausalLM": "MambaConfig"}
    assert fields["LongcatConfig"] == {"cudagraph_mode"}  # through the local `compilation`
    assert fields["DsConfig"] is None  # a config method the walk does not read: may assign anything
    assert fields["MambaConfig"] == {"mamba_page_size_padded", "custom_ops"}  # a module function it calls
    assert g.model_hook_attrs(text) == {"cudagraph_mode", "mamba_page_size_padded", "custom_ops"}


def test_torch_compile_disable_is_read_from_the_environment(catalog):
    # config/vllm.py:1717-1722 (0.34.0): TORCH_COMPILE_DISABLE=1 sets the compilation mode NONE, which drops the
    # piecewise part of the default mode (vllm.py:1050-1067): FULL_DECODE_ONLY still has full graphs, so HiSparse's
    # FULL check (vllm.py:1822) is not reached with FULL_AND_PIECEWISE given
    hisparse = LLAMA + "--kv-transfer-config '{\"kv_connector\": \"HiSparseConnector\", \"kv_role\": \"kv_both\"}' "
    site = ("vllm/config/vllm.py", 2460)
    cmd = ENV0 + "TORCH_COMPILE_DISABLE=1 " + LLAMA + "-cc '{\"cudagraph_capture_sizes\": []}'"
    assert site in _refused(cmd, "0.34.0", catalog)  # FULL_DECODE_ONLY still captures
    assert ("vllm/config/vllm.py", 1822) not in _refused(ENV0 + "TORCH_COMPILE_DISABLE=1 " + hisparse, "0.34.0",
                                                          catalog)


def test_is_encoder_decoder_missing_from_config_json_is_the_transformers_class_default():
    # transformers 5.24.0: PretrainedConfig.is_encoder_decoder = False (configuration_utils.py:421), T5Config and
    # WhisperConfig True (models/t5/configuration_t5.py:56, models/whisper/configuration_whisper.py:138)
    got = class_defaults("is_encoder_decoder")
    assert (got["llama"], got["qwen3"], got["t5"], got["whisper"]) == (False, False, True, True)
    assert "my_remote_model" not in got


def test_a_raw_environment_read_is_none_when_the_command_does_not_set_it(catalog):
    # config/vllm.py:1674-1680 (0.34.0): torch_shm multimodal tensor IPC with os.environ.get(
    # "VLLM_WORKER_MULTIPROC_METHOD") != "spawn": unset is None there (not envs.py's 'fork'), so it refuses
    site = ("vllm/config/vllm.py", 1680)
    qwen_vl = "vllm serve Qwen/Qwen3-VL-8B-Instruct "
    assert _refused(qwen_vl + "--mm-tensor-ipc torch_shm", "0.34.0", catalog) == [site]
    assert _refused("VLLM_WORKER_MULTIPROC_METHOD=spawn " + qwen_vl + "--mm-tensor-ipc torch_shm", "0.34.0",
                    catalog) == []
