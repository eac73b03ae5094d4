"""SGLang 0.5.23's startup checks as generated rows over SGLang's own inputs (tools/sglang_generated_checks.py,
catalog/engines/checks/sites/sglang-0.5.23.yaml, kg.engines.sglang.checkns): a row fires where the engine's own
code raises on the same inputs, with its message and path:line, and never on a command SGLang's docs launch.
Stacks are built in-process from a command (parse_command) and a catalog GPU; no check CLI per case."""
from __future__ import annotations

import pytest

from kg.analyses.enginechecks import generated_refusals
from kg.engines.launch import parse_command
from kg.engines.sglang.checkns import convert, namespace

B = "python -m sglang.launch_server --model-path "


@pytest.fixture(scope="module")
def refusals(catalog):
    def run(cmd: str, gpu: str = "H100-SXM") -> list[tuple[str, int]]:
        st = parse_command(cmd, catalog, "sglang")
        st.hardware = catalog.resolve_hardware(gpu)
        got = generated_refusals("sglang", st.engine_version, {}, stack=st)
        assert got["engine_check_release"] == "0.5.23" and got["engine_check_rows_evaluated"] > 30
        return [(r["path"].rsplit("/", 1)[-1], r["line"], r["message"]) for r in got["engine_check_refusals"]]
    return run


def test_serving_rows_read_the_options_as_sglangs_parser_stores_them(refusals):
    """serving_hook.py:83 (SSL refresh without the files) and :88-91 (reuseport needs tokenizer workers > 1)."""
    assert refusals(B + "Qwen/Qwen3-8B --enable-ssl-refresh") == [
        ("serving_hook.py", 84, "--enable-ssl-refresh requires --ssl-certfile and --ssl-keyfile to be specified.")]
    assert [x[:2] for x in refusals(B + "Qwen/Qwen3-8B --enable-http-worker-reuseport")] == [("serving_hook.py", 91)]
    assert refusals(B + "Qwen/Qwen3-8B --enable-http-worker-reuseport --tokenizer-worker-num 2") == []


# Commands from SGLang's own docs (sgl-project/sglang docs/basic_usage/*.md, docs/advanced_features/*.md) on the
# GPUs the docs name; a model optkg does not bundle is replaced by a bundled one of the same family.
DOCS = [
    ("H200", "deepseek-ai/DeepSeek-V3.2 --tp 8 --dp 8 --enable-dp-attention --speculative-algorithm EAGLE "
             "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"),
    ("H200", "deepseek-ai/DeepSeek-V3.2 --disaggregation-mode prefill --tp 8 --dp 8 --enable-dp-attention "
             "--trust-remote-code --disaggregation-bootstrap-port 8998 --mem-fraction-static 0.9"),
    ("H200", "deepseek-ai/DeepSeek-R1 --tp 8 --page-size 64 --mem-fraction-static 0.85 --enable-hierarchical-cache "
             "--hicache-ratio 2 --hicache-size 0 --hicache-io-backend direct --hicache-write-policy write_through "
             "--hicache-storage-backend hf3fs --hicache-storage-prefetch-policy wait_complete "
             "--disaggregation-ib-device mlx5_0 --disaggregation-mode prefill --disaggregation-transfer-backend mooncake"),
    ("H200", "meta-llama/Llama-4-Maverick-17B-128E-Instruct --speculative-algorithm EAGLE3 "
             "--speculative-draft-model-path nvidia/Llama-4-Maverick-17B-128E-Eagle3 --speculative-num-steps 3 "
             "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --trust-remote-code --tp 8 "
             "--context-length 1000000"),
    ("H100-SXM", "Qwen/Qwen2-7B-Instruct --speculative-algorithm STANDALONE --speculative-draft-model-path "
                 "Qwen/Qwen2.5-1.5B-Instruct --speculative-num-steps 4 --speculative-eagle-topk 2 "
                 "--speculative-num-draft-tokens 7 --mem-fraction-static 0.7 --cuda-graph-max-bs 8"),
    ("H100-SXM", "openai/gpt-oss-120b --tool-server demo --tp 2"),
    ("MI300X", "deepseek-ai/DeepSeek-R1 --tp 8 --dp 8 --enable-dp-attention --trust-remote-code"),
    ("B200", "deepseek-ai/DeepSeek-V4-Flash --tp 8 --trust-remote-code"),
]


@pytest.mark.parametrize("gpu,args", DOCS, ids=[f"{g}-{a.split()[0]}" for g, a in DOCS])
def test_no_row_fires_on_a_command_sglangs_docs_launch(refusals, gpu, args):
    assert refusals(B + args, gpu) == []


def test_options_convert_as_sglangs_argparse_types_do():
    """utils/common.py human_readable_int (k = 1000, Ki = 1024), BooleanOptionalAction --no-X, store_true."""
    assert convert({"kind": "int", "parser": "human_readable_int"}, "4k", "set") == 4000
    assert convert({"kind": "int", "parser": "human_readable_int"}, "2Ki", "set") == 2048
    assert convert({"kind": "bool_optional"}, True, "no") is False
    assert convert({"kind": "list", "item": "int"}, ["1", "2"], "set") == [1, 2]


def test_platform_facts_follow_the_gpu(catalog):
    st = parse_command(B + "Qwen/Qwen3-8B --tp 2", catalog, "sglang")
    st.hardware = catalog.resolve_hardware("B200")
    ns = namespace(st, "0.5.23")
    assert (ns["tp_size"], ns["platform__is_cuda"], ns["platform__device_sm"], ns["platform__is_blackwell"]) == \
        (2, True, 100, True)
    assert ns["hf__architecture"] == "Qwen3ForCausalLM" and (ns["SGLANG_USE_MODELSCOPE"], ns["SGLANG_USE_MODELSCOPE__set"]) == (False, False)
    st.hardware = catalog.resolve_hardware("MI300X")
    ns = namespace(st, "0.5.23")
    assert (ns["platform__is_hip"], ns["platform__is_cuda"], ns["platform__is_sm90"]) == (True, False, False)


def test_model_facts_follow_sglangs_model_config(catalog):
    """mc__attention_arch by ModelConfig._derive_model_shapes' architecture chain (model_config.py:1367-1542, read into
    the inputs table); hf__index_topk as getattr(hf_config, 'index_topk', None): absent from DeepSeek-V3's config.json
    and not declared by transformers 5.19.0's DeepseekV3Config, 2048 in DeepSeek-V3.2's, not given for Qwen3."""
    got = {}
    for m in ("deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3.2", "Qwen/Qwen3-8B", "deepseek-ai/DeepSeek-V4-Flash"):
        ns = namespace(parse_command(B + m, catalog, "sglang"), "0.5.23")
        got[m.split("/")[1]] = (ns.get("mc__attention_arch"), ns.get("hf__index_topk", "-"))
    assert got == {"DeepSeek-V3": ("MLA", "__none__"), "DeepSeek-V3.2": ("MLA", 2048), "Qwen3-8B": ("MHA", "-"),
                   "DeepSeek-V4-Flash": ("MHA", 512)}


def _lines(got: list[tuple[str, int, str]]) -> set[tuple[str, int]]:
    return {(f, line) for f, line, _ in got}


def test_rows_after_the_load_format_evaluate_on_a_real_model(refusals):
    """Every field resolved after serving_hook.py:337 (declare_resolution(**renamed): the deprecated attention-backend
    aliases) was unknown for a real model path until the walk followed that dict; parallel_hook.py:250 (--dcp-size > 1
    with --enable-prefill-cp) now fires on a real checkpoint."""
    assert ("parallel_hook.py", 250) in _lines(refusals(B + "Qwen/Qwen3-8B --tp 2 --dcp-size 2 --enable-prefill-cp"))
    assert ("parallel_hook.py", 250) not in _lines(refusals(B + "Qwen/Qwen3-8B --tp 2 --dcp-size 2"))


def test_model_rows_read_sglangs_own_model_facts(refusals):
    """model_hook.py:188 (is_deepseek_dsa: the architecture and config.json's index_topk) and layernorm_sp_hook.py:131
    (SP_SUPPORTED_ARCHITECTURES, a frozenset union in layers/layernorm_sp.py:53-54)."""
    split = "--enable-dsa-cache-layer-split"
    assert ("model_hook.py", 188) in _lines(refusals(B + f"Qwen/Qwen3-8B {split}"))
    assert ("model_hook.py", 188) not in _lines(refusals(B + f"deepseek-ai/DeepSeek-V3.2 --tp 8 {split}", "H200"))
    assert ("model_hook.py", 188) in _lines(refusals(B + f"deepseek-ai/DeepSeek-V3 --tp 8 {split}", "H200"))
    assert ("layernorm_sp_hook.py", 131) in _lines(refusals(B + "meta-llama/Llama-3.1-8B --enable-layernorm-sp"))
    assert ("layernorm_sp_hook.py", 131) not in _lines(refusals(B + "Qwen/Qwen3-8B --tp 2 --enable-layernorm-sp"))


def test_text_config_facts_are_given_only_where_config_json_writes_them(catalog):
    """mc__attention_chunk_size / mc__num_nextn_predict_layers: getattr(hf_text_config, KEY, None)
    (model_config.py:797, :1602) from the section SGLang takes as the text config, only where config.json writes the
    key (a config class may default it); mc__nvfp4_moe_meta (model_config.py:775-787) from quantization_config."""
    from kg.engines.sglang.checkns import nvfp4_moe_meta
    got = {}
    for m in ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "zai-org/GLM-5.2", "Qwen/Qwen3-8B"):
        ns = namespace(parse_command(B + m, catalog, "sglang"), "0.5.23")
        got[m.split("/")[1]] = {k[4:]: v for k, v in ns.items() if k.startswith("mc__") and k != "mc__attention_arch"}
    assert got == {"Llama-4-Scout-17B-16E-Instruct": {"attention_chunk_size": 8192, "nvfp4_moe_meta": "__none__"},
                   "GLM-5.2": {"num_nextn_predict_layers": 1, "nvfp4_moe_meta": "__none__"},
                   "Qwen3-8B": {"nvfp4_moe_meta": "__none__"}}
    hybrid = {"quant_algo": "MIXED_PRECISION", "moe_quant_algo": "NVFP4", "group_size": 16}
    assert nvfp4_moe_meta({"quantization_config": hybrid}) == 16
    assert nvfp4_moe_meta({"quantization_config": {**hybrid, "moe_quant_algo": "FP8"}}) == "__none__"
