"""optkg check FILE: Kubernetes manifests, compose files and TensorRT-LLM LLM-API YAML, detected by content (issue 15).

Fixtures: tests/fixtures/launch/SOURCES.md (vLLM's own Kubernetes and LeaderWorkerSet docs).
Expected numbers: KV bytes per token per GPU = 2 (K and V) x layers per PP stage x KV heads per rank x head_dim x 2 bytes.
"""
import json
from pathlib import Path

import pytest

from conftest import REPO

FIX = REPO / "tests/fixtures/launch"
MISTRAL = FIX / "mistral-7b-v0.3-config.json"
LLAMA405 = REPO / "catalog/models/meta-llama__Meta-Llama-3.1-405B.json"


def _json(cli, *args):
    code, out, err = cli("check", *args, "--format", "json", "--fail-on", "never")
    assert code == 0, err
    return json.loads(out)


def test_vllm_docs_deployment_end_to_end(cli):
    d = _json(cli, str(FIX / "vllm-docs-k8s-deployment.yaml"), "--config", str(MISTRAL))
    st = d["stack"]
    assert st["engine"] == "vllm" and st["gpu_count"] == 1  # resources.limits["nvidia.com/gpu"]: "1"
    assert st["settings"]["max_num_batched_tokens"] == 1024  # --max_num_batched_tokens (underscore spelling)
    assert "chunked-prefill" in st["techniques"] and d["ignored_flags"] == []
    # --trust-remote-code is read by vLLM's generated startup checks (catalog/engines/options/vllm-inputs.yaml)
    assert st["settings"]["trust_remote_code"] is True
    # 2 x 32 layers x 8 KV heads x 128 x 2 bytes = 131,072 bytes per token on the one GPU
    assert d["derived"]["kv_bytes_per_token_per_gpu"] == 131_072
    assert any("HUGGING_FACE_HUB_TOKEN comes from valueFrom" in n for n in d["notes"])


def test_vllm_docs_leaderworkerset_end_to_end(cli):
    d = _json(cli, str(FIX / "vllm-docs-lws.yaml"), "--config", str(LLAMA405))
    st = d["stack"]
    # leader + 1 worker pod, 8 GPUs each: the engine spans 16 GPUs (TP 8 x PP 2)
    assert (st["gpu_count"], st["settings"]["tp_size"], st["settings"]["pp_size"]) == (16, 8, 2)
    assert st["name"].startswith("LeaderWorkerSet/vllm/vllm-leader")
    # 126 layers / PP 2 = 63 per stage; 8 KV heads / TP 8 = 1 per rank: 2 x 63 x 1 x 128 x 2 = 32,256
    assert d["derived"]["kv_bytes_per_token_per_gpu"] == 32_256
    assert any("vllm-worker runs no known serving engine" in n for n in d["notes"])


def test_finding_points_at_flag_line(cli, tmp_path):
    text = (FIX / "vllm-docs-lws.yaml").read_text().replace("--tensor-parallel-size 8", "--tensor-parallel-size 32")
    f = tmp_path / "lws.yaml"
    f.write_text(text)
    code, out, _ = cli("check", str(f), "--config", str(LLAMA405), "--format", "json")
    found = {x["rule_id"]: x for x in json.loads(out)["findings"]}
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "--tensor-parallel-size 32" in l)
    assert found["kv-head-replication"]["location"] == f"{f}:{line}"
    code, out, _ = cli("check", str(f), "--config", str(LLAMA405), "--format", "github")
    assert f"file={f},line={line}" in out


def _deployment(name: str, tp: int, extra: str = "") -> str:
    """One vLLM Deployment of the prefill/decode pair below (NixlConnector KV transfer, H100 node label)."""
    return f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  template:
    spec:
      nodeSelector: {{nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}}
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          args: ["Qwen/Qwen3-235B-A22B", "--tensor-parallel-size", "{tp}",{extra}
                 "--kv-transfer-config", '{{"kv_connector":"NixlConnector","kv_role":"kv_both"}}']
          resources: {{limits: {{nvidia.com/gpu: {tp}}}}}
"""


PD = _deployment("qwen-prefill", 8) + "---\n" + _deployment("qwen-decode", 4, ' "--decode-context-parallel-size", "1",')


def test_prefill_decode_pair_gives_two_reports(cli, tmp_path):
    f = tmp_path / "pd.yaml"
    f.write_text(PD)
    d = _json(cli, str(f))
    assert d["kind"] == "check-set" and len(d["reports"]) == 2
    pre, dec = d["reports"]
    assert "[prefill]" in pre["stack"]["name"] and "[decode]" in dec["stack"]["name"]
    assert (pre["stack"]["gpu_count"], dec["stack"]["gpu_count"]) == (8, 4)
    assert pre["stack"]["hardware"] and pre["stack"]["engine_version"] == "0.11.0"  # GPU type from the node label
    # TP 8 over 4 KV heads replicates KV on the prefill side only
    assert "kv-head-replication" in {x["rule_id"] for x in pre["findings"]}
    assert "kv-head-replication" not in {x["rule_id"] for x in dec["findings"]}
    code, out, _ = cli("check", str(f), "--fail-on", "never")
    assert out.count("[prefill]") >= 1 and out.count("[decode]") >= 1


def test_compose_file(cli, tmp_path):
    f = tmp_path / "compose.yaml"
    f.write_text("services:\n  vllm:\n    image: vllm/vllm-openai:v0.10.2\n"
                 "    command: --model Qwen/Qwen3-235B-A22B --tensor-parallel-size 8 --max-model-len 32768\n"
                 "    environment:\n      - VLLM_ATTENTION_BACKEND=FLASHINFER\n    ipc: host\n"
                 "    deploy:\n      resources:\n        reservations:\n          devices:\n"
                 "            - driver: nvidia\n              count: 8\n              capabilities: [gpu]\n"
                 "  redis:\n    image: redis:7\n")
    d = _json(cli, str(f))
    st = d["stack"]
    assert (st["engine"], st["engine_version"], st["gpu_count"]) == ("vllm", "0.10.2", 8)
    assert st["settings"]["attention_backend"] == "FLASHINFER" and st["settings"]["max_model_len"] == 32768
    assert any("service redis runs no known serving engine" in n for n in d["notes"])


def test_llm_api_yaml_file(cli, tmp_path):
    f = tmp_path / "extra_llm_api_options.yaml"
    f.write_text("model: Qwen/Qwen2-7B-Instruct\ntensor_parallel_size: 8\n"
                 "kv_cache_config:\n  dtype: fp8\n  enable_block_reuse: true\n")
    code, out, _ = cli("check", str(f), "--format", "json")
    d = json.loads(out)
    ids = {x["rule_id"]: x for x in d["findings"]}
    assert d["stack"]["engine"] == "trtllm" and ids["heads-not-divisible-by-tp"]["numbers"]["valid_tp_sizes"] == [1, 2, 4]  # 28 heads, 4 KV heads, 18944 = 2^9 x 37
    assert "fp8-kv-cache-reuse-accuracy" in ids
    assert ids["fp8-kv-cache-reuse-accuracy"]["location"] in (f"{f}:4", f"{f}:5")
    assert code == 1


def test_docker_equals_manifest(cli, tmp_path):
    f = tmp_path / "pod.yaml"
    f.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: q}\nspec:\n  containers:\n  - name: vllm\n"
                 "    image: vllm/vllm-openai:v0.11.0\n"
                 "    args: [--model, Qwen/Qwen3-235B-A22B, --tensor-parallel-size, '8']\n"
                 "    resources: {limits: {nvidia.com/gpu: '8'}}\n")
    a = _json(cli, str(f))
    b = _json(cli, "--cmd", "docker run --gpus 8 vllm/vllm-openai:v0.11.0 --model Qwen/Qwen3-235B-A22B --tensor-parallel-size 8")
    assert [x["rule_id"] for x in a["findings"]] == [x["rule_id"] for x in b["findings"]] and a["findings"]
    assert a["stack"]["settings"] == b["stack"]["settings"] and a["stack"]["gpu_count"] == b["stack"]["gpu_count"] == 8


@pytest.mark.parametrize("text, where, what", [
    ("apiVersion: v1\nkind: Pod\nspec:\n  containers: oops\n", ":4", "containers: expected a list"),
    ("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    image: vllm/vllm-openai\n"
     "    args: [Qwen/Qwen3-32B]\n    resources: {limits: {nvidia.com/gpu: lots}}\n", ":8", "whole number of GPUs"),
    ("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    command: [vllm, {serve: 1}]\n", ":6",
     "command: expected a list of strings"),
    ("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    image: vllm/vllm-openai\n"
     "    args: [Qwen/Qwen3-32B, -tp, many]\n", ":5", "-tp: expected an integer"),
    ("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    env: {A: b}\n", ":6", "env: expected a list"),
    ("apiVersion: v1\nkind: Pod\nspec: !!python/object:os.system {}\n", ":3", "unsafe or unknown tag"),
    ("apiVersion: v1\nkind: Pod\n---\n- just\n- a list\n", ":4", "without apiVersion/kind"),
    ("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    image: redis\n", ":1", "nothing to check"),
])
def test_hostile_manifests(cli, tmp_path, text, where, what):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    code, out, err = cli("check", str(f))
    assert code == 2 and not out
    assert len(err.strip().splitlines()) == 1 and f"{f}{where}" in err and what in err, err
    assert "Traceback" not in err


def test_secret_env_values_are_not_printed(cli):
    # the LWS example in vLLM's docs sets HUGGING_FACE_HUB_TOKEN inline: the report must not repeat the value
    code, out, _ = cli("check", str(FIX / "vllm-docs-lws.yaml"), "--config", str(LLAMA405), "--format", "json")
    d = json.loads(out)
    assert "HUGGING_FACE_HUB_TOKEN=<redacted>" in d["ignored_flags"] and "<your-hf-token>" not in out
