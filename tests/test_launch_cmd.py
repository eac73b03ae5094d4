"""optkg check --cmd: one option for every engine's launch command, detected from the program (issue 15).

Commands are the shapes the engines document (vLLM `vllm serve`, the OpenAI api_server module, SGLang's
launch_server, TensorRT-LLM's `trtllm-serve` + LLM-API YAML, LMDeploy's `lmdeploy serve api_server`,
`docker run` of the vLLM image); expected values are worked out from the bundled configs.
"""
import json

import pytest

from kg.core.errors import OptkgError
from kg.engines.launch import parse_launch
from kg.inputs.launch.registry import Launcher, detect, launchers, register, _REGISTRY


def _check(cli, *args):
    code, out, err = cli("check", *args, "--format", "json", "--fail-on", "never")
    assert code == 0, err
    return json.loads(out)


def _ids(d):
    return sorted(f["rule_id"] for f in d["findings"])


@pytest.mark.parametrize("cmd, engine", [
    ("vllm serve Qwen/Qwen3-235B-A22B --tensor-parallel-size 8", "vllm"),
    ("python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-235B-A22B -tp 8", "vllm"),
    ("python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B --tp-size 8", "sglang"),
    ("trtllm-serve Qwen/Qwen3-235B-A22B --tp_size 8", "trtllm"),
    ("trtllm-serve serve Qwen/Qwen3-235B-A22B --tensor_parallel_size 8", "trtllm"),
    ("lmdeploy serve api_server Qwen/Qwen3-235B-A22B --tp 8", "lmdeploy"),
    ("docker run --gpus 8 vllm/vllm-openai:v0.11.0 --model Qwen/Qwen3-235B-A22B --tensor-parallel-size 8", "vllm"),
])
def test_cmd_detects_engine(catalog, cmd, engine):
    st = parse_launch(cmd, catalog)
    assert st.engine == engine
    assert st.settings["tp_size"] == 8 and st.techniques["tensor-parallelism"]["tp_size"] == 8
    assert st.model.num_attention_heads == 64  # Qwen3-235B-A22B


def test_cmd_end_to_end_kv_replication(cli):
    # 4 KV heads at TP 8: each KV head is held by 2 ranks (same numbers as --vllm, test_check_cli.test_vllm_tp8)
    for cmd in ("vllm serve Qwen/Qwen3-235B-A22B --tensor-parallel-size 8",
                "lmdeploy serve api_server Qwen/Qwen3-235B-A22B --tp 8"):
        d = _check(cli, "--cmd", cmd)
        f = {x["rule_id"]: x for x in d["findings"]}["kv-head-replication"]
        assert f["numbers"]["replication_factor"] == 2 and f["numbers"]["kv_bytes_per_token_per_gpu"] == 48_128


def test_docker_run_equals_stack_file(cli, tmp_path):
    cmd = ("docker run --runtime nvidia --gpus 8 -v ~/.cache/huggingface:/root/.cache/huggingface -p 8000:8000 "
           "--ipc=host -it --rm vllm/vllm-openai:v0.11.0 --model Qwen/Qwen3-235B-A22B --tensor-parallel-size 8")
    stack = tmp_path / "stack.yaml"
    stack.write_text("model: Qwen/Qwen3-235B-A22B\nengine: {name: vllm, version: '0.11.0'}\n"
                     "hardware: {gpu: H100-SXM, count: 8}\n"
                     "techniques: [paged-kv-cache, continuous-batching, prefix-caching, chunked-prefill, cuda-graphs,\n"
                     "             {tensor-parallelism: {tp_size: 8}}]\n"
                     "settings: {kv_cache_dtype: auto, block_size: 16, gpu_memory_utilization: 0.9}\n")
    a = _check(cli, "--cmd", cmd, "--gpu", "H100-SXM")
    b = _check(cli, str(stack))
    assert a["findings"] and _ids(a) == _ids(b)
    assert [f["numbers"] for f in a["findings"]] == [f["numbers"] for f in b["findings"]]
    st = parse_launch(cmd, __import__("kg.knowledge.catalog", fromlist=["x"]).load_catalog()[0])
    assert (st.engine_version, st.gpu_count) == ("0.11.0", 8)


def test_docker_gpus_env_and_image_program(catalog):
    st = parse_launch("docker run --gpus '\"device=0,1,2,3\"' -e CUDA_LAUNCH_BLOCKING=1 -e VLLM_USE_V1=1 "
                      "vllm/vllm-openai:latest Qwen/Qwen3-32B -tp 4", catalog)
    assert st.gpu_count == 4 and st.settings["vllm_use_v1"] == 1 and st.engine_version is None
    assert "CUDA_LAUNCH_BLOCKING=1" in st.ignored
    assert any("names no release" in n for n in st.notes)
    st = parse_launch("docker run --gpus all --shm-size 32g lmsysorg/sglang:v0.4.6.post1-cu124 "
                      "python3 -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp 2", catalog)
    assert (st.engine, st.engine_version, st.gpu_count, st.settings["tp_size"]) == ("sglang", "0.4.6.post1", None, 2)
    assert any("--gpus all" in n for n in st.notes)
    # the image already runs `vllm serve`: repeating it is what users paste, and what vLLM refuses
    st = parse_launch("docker run vllm/vllm-openai:v0.9.1 vllm serve Qwen/Qwen3-32B", catalog)
    assert st.model.name == "Qwen/Qwen3-32B" and any("unrecognized arguments" in n for n in st.notes)
    with pytest.raises(OptkgError, match="not a known serving image"):
        parse_launch("docker run -d nginx:latest", catalog)


def test_trtllm_heads_not_divisible(cli):
    # Qwen2-7B-Instruct has 28 query heads: TP 8 does not divide them. Of the divisors {1, 2, 4, 7, 14, 28},
    # 7 and 14 fail the 4 KV heads (kv-heads-not-divisible-by-tp) and 7, 14, 28 the MLP split
    # (intermediate_size 18944 = 2^9 x 37): only 1, 2, 4 start
    code, out, _ = cli("check", "--cmd", "trtllm-serve Qwen/Qwen2-7B-Instruct --tp_size 8", "--format", "json")
    f = {x["rule_id"]: x for x in json.loads(out)["findings"]}["heads-not-divisible-by-tp"]
    assert f["severity"] == "error" and f["numbers"]["valid_tp_sizes"] == [1, 2, 4]
    assert code == 1


def test_trtllm_llm_api_yaml(cli, tmp_path, monkeypatch):
    # files named by the command are read relative to the working directory
    monkeypatch.chdir(tmp_path)
    (tmp_path / "extra.yaml").write_text("kv_cache_config:\n  dtype: fp8\n  enable_block_reuse: true\n"
                                         "  free_gpu_memory_fraction: 0.85\nenable_attention_dp: false\n"
                                         "cuda_graph_config:\n  max_batch_size: 64\n")
    d = _check(cli, "--cmd", "trtllm-serve Qwen/Qwen3-32B --tp_size 2 --extra_llm_api_options extra.yaml")
    assert "fp8-kv-cache-reuse-accuracy" in _ids(d)
    assert any("cuda_graph_config.max_batch_size: 64" in x and "extra.yaml:7" in x for x in d["ignored_flags"])
    (tmp_path / "noreuse.yaml").write_text("kv_cache_config: {dtype: fp8, enable_block_reuse: false}\n")
    d = _check(cli, "--cmd", "trtllm-serve Qwen/Qwen3-32B --config noreuse.yaml")
    assert "fp8-kv-cache-reuse-accuracy" not in _ids(d)
    (tmp_path / "int8.yaml").write_text("kv_cache_config: {dtype: int8}\n")
    d = _check(cli, "--cmd", "trtllm-serve Qwen/Qwen3-32B --config=int8.yaml")
    assert "int8-kv-cache-reuse" in _ids(d)  # block reuse is on by default (KvCacheConfig.enable_block_reuse=True)
    (tmp_path / "bad.yaml").write_text("kv_cache_config:\n  free_gpu_memory_fraction: lots\n")
    code, _, err = cli("check", "--cmd", "trtllm-serve Qwen/Qwen3-32B --config bad.yaml")
    assert code == 2 and "bad.yaml:2" in err and "free_gpu_memory_fraction" in err


def test_trtllm_yaml_overrides_flags(catalog, tmp_path):
    (tmp_path / "o.yaml").write_text("tensor_parallel_size: 4\n")
    st = parse_launch("trtllm-serve Qwen/Qwen3-32B --tp_size 2 --config o.yaml", catalog, base_dir=tmp_path)
    assert st.settings["tp_size"] == 4  # update_llm_args_with_extra_dict: the file wins


def test_lmdeploy_flags(catalog):
    st = parse_launch("lmdeploy serve api_server Qwen/Qwen3-32B --tp 2 --quant-policy 8 --enable-prefix-caching "
                      "--cache-max-entry-count 0.5 --session-len 32768 --server-port 23333", catalog)
    assert st.settings["kv_cache_dtype"] == "int8" and "kv-cache-quantization" in st.techniques
    assert "prefix-caching" in st.techniques and st.settings["gpu_memory_utilization"] == 0.5
    assert st.settings["max_model_len"] == 32768 and st.settings["block_size"] == 64
    assert "--server-port 23333" in st.ignored
    st = parse_launch("lmdeploy serve api_server Qwen/Qwen3-32B --quant_policy fp8", catalog)
    assert st.settings["kv_cache_dtype"] == "fp8" and "prefix-caching" not in st.techniques  # off by default
    with pytest.raises(OptkgError, match="--quant-policy: expected one of"):
        parse_launch("lmdeploy serve api_server Qwen/Qwen3-32B --quant-policy 3", catalog)


def test_underscore_spelling_equals_dashes(catalog, cli):
    a = parse_launch("vllm serve Qwen/Qwen3-32B --enable_prefix_caching --tensor_parallel_size 2 --frobnicate 7", catalog)
    b = parse_launch("vllm serve Qwen/Qwen3-32B --enable-prefix-caching --tensor-parallel-size 2 --frobnicate 7", catalog)
    assert a.techniques == b.techniques and a.settings == b.settings and a.settings["tp_size"] == 2
    # an option no release has is refused (rule engine-option-refused), not "ignored (not modelled)"
    assert a.ignored == b.ignored == [] and [r["flag"] for r in a.refused] == [r["flag"] for r in b.refused] == ["--frobnicate"]
    d = _check(cli, "--cmd", "vllm serve Qwen/Qwen3-32B --enable_prefix_caching --tensor_parallel_size 2 --frobnicate 7")
    assert "--frobnicate 7" not in d["ignored_flags"]
    assert [f["rule_id"] for f in d["findings"] if f["severity"] == "error"] == ["engine-option-refused"]
    # SGLang's plain argparse does not fold underscores: the underscore spelling is an option SGLang refuses
    st = parse_launch("python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp_size 2", catalog)
    assert "tensor-parallelism" not in st.techniques and [r["flag"] for r in st.refused] == ["--tp_size"]
    assert st.refused[0]["suggestion"] == "--tp-size"


def test_abbreviations_and_equals(catalog):
    st = parse_launch("vllm serve Qwen/Qwen3-32B --max-model 4096 --gpu-memory-util=0.8 --tensor_parallel 2", catalog)
    assert (st.settings["max_model_len"], st.settings["gpu_memory_utilization"], st.settings["tp_size"]) == (4096, 0.8, 2)
    assert any("--tensor_parallel is an abbreviation of --tensor-parallel-size" in n for n in st.notes)
    # an ambiguous prefix is not guessed: argparse refuses it, and the note says which options it could match
    st = parse_launch("vllm serve Qwen/Qwen3-32B --max-num 8", catalog)
    assert [r["flag"] for r in st.refused] == ["--max-num"] and any("ambiguous" in n for n in st.notes)
    # click (trtllm-serve) accepts no abbreviations: --tp is no option of `serve` (its alias is --tp_size)
    st = parse_launch("trtllm-serve Qwen/Qwen3-32B --tp 8", catalog)
    assert "tensor-parallelism" not in st.techniques and st.ignored == []
    assert [(r["flag"], r["suggestion"]) for r in st.refused] == [("--tp", None)]


def test_repeated_flags_last_wins(catalog):
    st = parse_launch("vllm serve Qwen/Qwen3-32B -tp 4 --max-model-len 8192 -tp 1 --max-model-len 4096", catalog)
    assert st.settings["tp_size"] == 1 and "tensor-parallelism" not in st.techniques
    assert st.settings["max_model_len"] == 4096
    st = parse_launch("vllm serve Qwen/Qwen3-32B -q awq -q fp8", catalog)
    assert "fp8-inference-kernels" in st.techniques and "awq-quantization" not in st.techniques
    st = parse_launch("vllm serve Qwen/Qwen3-32B --no-enable-prefix-caching --enable-prefix-caching", catalog)
    assert "prefix-caching" in st.techniques


def test_vllm_config_file(catalog, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "serve.yaml").write_text("tensor_parallel_size: 4\nmax-model-len: 8192\nenable-prefix-caching: false\n"
                                         "speculative-config:\n  method: ngram\n  num_speculative_tokens: 3\n")
    st = parse_launch("vllm serve Qwen/Qwen3-32B --config serve.yaml --max-model-len 4096", catalog)
    assert st.settings["tp_size"] == 4 and st.settings["max_model_len"] == 4096  # the command line wins
    assert "prefix-caching" not in st.techniques
    assert st.settings["speculative_method"] == "ngram" and st.settings["num_speculative_tokens"] == 3
    with pytest.raises(OptkgError, match="missing.yaml: file not found"):
        parse_launch("vllm serve Qwen/Qwen3-32B --config missing.yaml", catalog)


def test_aliases_still_work(cli):
    d = _check(cli, "--vllm", "--model Qwen/Qwen3-32B -tp 2")  # a bare list of flags
    assert d["stack"]["techniques"]["tensor-parallelism"]["tp_size"] == 2 and d["stack"]["source"] == "--vllm"
    code, _, err = cli("check", "--sglang", "vllm serve Qwen/Qwen3-32B")
    assert code == 2 and err.strip().endswith("--sglang: a vllm command, not an sglang one: pass it with --vllm (or --cmd)")


def test_another_engines_command_names_the_flag_that_takes_it(cli):
    code, _, err = cli("check", "--vllm", "python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp 2")
    assert code == 2 and err.strip().endswith("--vllm: an sglang command, not a vllm one: pass it with --sglang (or --cmd)")
    code, _, err = cli("check", "--sglang", "lmdeploy serve api_server Qwen/Qwen3-32B --tp 2")
    assert code == 2 and err.strip().endswith("--sglang: an lmdeploy command, not an sglang one: pass it with --cmd")
    code, _, err = cli("check", "--sglang", "vllm chat")  # a program of the family, not an engine's launch
    assert code == 2 and "does not look like a sglang launch command" in err


def test_unknown_program_is_one_line_error(cli):
    code, out, err = cli("check", "--cmd", "ollama run llama3")
    assert code == 2 and "no known launch program" in err and "trtllm-serve" in err
    assert len(err.strip().splitlines()) == 1


def test_registry_plug_in(catalog):
    # the plug-in point: a launcher registered for a program is found by detect (the training helper's
    # real one, kg/inputs/launch/training.py, owns torchrun; this example uses a program of its own)
    assert {"docker", "lmdeploy", "sglang", "trtllm", "vllm", "training"} <= {lz.name for lz in launchers()}
    seen = []
    register(Launcher(name="example-torchrun", kind="training", programs=(("exampletrainrun",),),
                      parse=lambda launch: seen.append((launch.program, launch.args, launch.env)) or "parsed"))
    try:
        lz, launch = detect("NCCL_DEBUG=INFO exampletrainrun --nproc_per_node 8 pretrain_gpt.py --tp 2", catalog)
        assert lz.name == "example-torchrun" and launch.args[:2] == ["--nproc_per_node", "8"]
        assert parse_launch("exampletrainrun --nproc_per_node 8 pretrain_gpt.py", catalog) == "parsed"
        assert seen[-1][0] == ["exampletrainrun"]
        assert detect("torchrun --nproc_per_node 8 pretrain_gpt.py", catalog)[0].name == "training"
        # the earliest program wins: a vllm command that mentions torchrun later is still vllm
        assert detect("vllm serve Qwen/Qwen3-32B --served-model-name torchrun", catalog)[0].name == "vllm"
    finally:
        _REGISTRY.pop("example-torchrun", None)


def test_an_option_given_twice_is_noted_with_the_value_the_engine_keeps(cli):
    # tester finding 18: argparse keeps the last occurrence; optkg said nothing about the first
    code, out, err = cli("check", "--vllm", "vllm serve meta-llama/Llama-3.1-8B --max-model-len 4096 --max-model-len 8192",
                         "--gpu", "H100-SXM", "--format", "json")
    d = json.loads(out)
    assert code in (0, 1), err
    assert ("--vllm: --max-model-len is given twice (--max-model-len 4096, then --max-model-len 8192): the engine's "
            "parser keeps the last, 8192") in d["notes"]


def test_cli_options_are_not_matched_by_prefix(cli):
    # tester finding 14: `optkg kv --gpu H200` was read as --gpu-compute-capability H200 (kv has its own --gpu
    # now, so a prefix of another option is the case): --kv-budget is not --kv-budget-gib
    code, out, err = cli("kv", "--model", "Qwen/Qwen3-32B", "--kv-budget", "10")
    # refused (not read as --kv-budget-gib), with the full name offered as a suggestion
    assert code == 2 and "unknown option --kv-budget;" in err and "did you mean --kv-budget-gib?" in err
    assert "Traceback" not in err and out == ""


def test_vllm_serves_the_positional_model_when_model_is_also_given(catalog):
    # vllm serve A --model B serves A: ServeSubcommand.cmd sets args.model = args.model_tag (vllm 0.34.0
    # entrypoints/cli/serve.py:56-57), whichever comes first; the report said B before
    for cmd in ("vllm serve Qwen/Qwen3-32B --model Qwen/Qwen3-8B -tp 2", "vllm serve --model Qwen/Qwen3-8B Qwen/Qwen3-32B"):
        st = parse_launch(cmd, catalog)
        assert st.model.name == "Qwen/Qwen3-32B", cmd
        assert any("the model is named twice (Qwen/Qwen3-32B and --model Qwen/Qwen3-8B): the engine serves the "
                   "positional Qwen/Qwen3-32B (vllm/entrypoints/cli/serve.py:56 at vllm 0.34.0)" in n
                   for n in st.notes), st.notes
    st = parse_launch("vllm serve Qwen/Qwen3-32B --model Qwen/Qwen3-32B", catalog)  # the same name twice: no note
    assert not any("named twice" in n for n in st.notes)


def test_image_tag_with_a_four_part_release_names_it(catalog):
    # vllm/vllm-openai:v0.10.1.1 is a published release (newuser6 #8: read as 'names no release', 0.34.0 assumed)
    st = parse_launch("docker run --gpus all vllm/vllm-openai:v0.10.1.1 --model Qwen/Qwen3-32B -tp 2", catalog)
    assert st.engine_version == "0.10.1.1" and not any("names no release" in n for n in st.notes)
    for tag, release in (("v0.8.5.post1", "0.8.5.post1"), ("v0.11.0-cu128", "0.11.0"), ("0.9.2", "0.9.2")):
        assert parse_launch(f"docker run vllm/vllm-openai:{tag} --model Qwen/Qwen3-32B", catalog).engine_version == release
    # five parts is no release: not read
    st = parse_launch("docker run vllm/vllm-openai:v0.10.1.1.1 --model Qwen/Qwen3-32B", catalog)
    assert st.engine_version is None


def test_image_digest_is_named_a_digest_not_latest(catalog):
    st = parse_launch("docker run vllm/vllm-openai@sha256:0123abcd --model Qwen/Qwen3-32B", catalog)
    assert st.engine_version is None
    assert [n for n in st.notes if "names no release" in n] == \
        ["--cmd: image digest 'sha256:0123abcd' names no release; the engine version is unknown"]
