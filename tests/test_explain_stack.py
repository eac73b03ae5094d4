"""``optkg explain A B --stack FILE|--vllm CMD``: only paths whose conditions can hold for the stack,
shortest first, and how many were left out (issue 12, step 5)."""
import json


def _explain(cli, tmp_path, framework, *extra):
    f = tmp_path / f"{framework}.yaml"
    f.write_text(f"model: meta-llama/Meta-Llama-3.1-8B\nframework: {framework}\n"
                 "techniques: [zero-2, {pipeline-parallelism: {pp_size: 4}}]\n")
    code, out, err = cli("explain", "zero-2", "pipeline-parallelism", "--stack", str(f), "--format", "json", *extra)
    assert code == 0, err
    return json.loads(out)


def test_the_direct_conflict_holds_only_on_deepspeed(cli, tmp_path):
    code, out, _ = cli("explain", "zero-2", "pipeline-parallelism", "--format", "json")
    every = json.loads(out)
    assert [s["key"] for s in every["paths"][0]] == ["zero-2#0"]  # without a stack: shortest first, all kinds
    ds = _explain(cli, tmp_path, "deepspeed")
    assert [s["key"] for s in ds["paths"][0]] == ["zero-2#0"]
    mg = _explain(cli, tmp_path, "megatron")
    assert all([s["key"] for s in p] != ["zero-2#0"] for p in mg["paths"])
    assert "zero-2#0: pp_size > 1 and framework == 'deepspeed' is false for this stack" in mg["left_out_reasons"]
    assert mg["left_out"] > ds["left_out"] > 0
    lengths = [len(p) for p in mg["paths"]]
    assert lengths == sorted(lengths)  # still shortest first


def test_serving_stack_drops_training_only_paths(cli):
    code, out, err = cli("explain", "tensor-parallelism", "decode-context-parallelism", "--vllm",
                         "vllm serve Qwen/Qwen3-235B-A22B -tp 8", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["left_out"] > 0
    assert any(r.endswith("is not used at the inference stage") for r in d["left_out_reasons"])
    _, text, _ = cli("explain", "tensor-parallelism", "decode-context-parallelism", "--vllm",
                     "vllm serve Qwen/Qwen3-235B-A22B -tp 8")
    first = " ".join(text.split("path 1:")[0].split())  # the header, wrapped at 100 columns
    assert f"that can hold for Qwen/Qwen3-235B-A22B (vllm) ({d['left_out']} left out)" in first


def test_explain_ranks_paths_and_shows_the_most_direct(cli):
    # TP <-> DCP: 41 paths up to 4 edges. The direct edge (DCP requires TP) first; then, of the two-edge paths, the
    # one through a property TP raises and DCP mitigates (KV-head replication) before one through query heads
    code, out, err = cli("explain", "tensor-parallelism", "decode-context-parallelism", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["paths_total"] == 41 and len(d["paths"]) == 3
    assert [(s["key"], s["kind"]) for s in d["paths"][0]] == [("decode-context-parallelism#4", "requires")]
    assert [s["kind"] for s in d["paths"][1]] == ["causes", "mitigates"]
    assert d["paths"][1][0]["to"] == "p:kv_head_replication"
    _, text, _ = cli("explain", "tensor-parallelism", "decode-context-parallelism")
    assert "41 path(s) up to 4 edges; the 3 most direct" in " ".join(text.split())
    assert max(len(x) for x in text.splitlines()) <= 100
    _, out, _ = cli("explain", "tensor-parallelism", "decode-context-parallelism", "--all", "--format", "json")
    assert len(json.loads(out)["paths"]) == 41


def test_training_job_file_is_read_as_check_reads_it(cli):
    # the README's training stack (framework: + training:), which the serving stack reader refuses: read as a
    # training job (kg.analyses.training.training_facts): Megatron TP 8 PP 4, distributed optimizer, no ZeRO-3
    from conftest import REPO
    code, out, err = cli("explain", "tensor-parallelism", "zero-3-fsdp", "--stack",
                         str(REPO / "examples" / "llama-3.1-70b-megatron-train.yaml"), "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert (d["stack"], d["paths_total"], d["left_out"]) == ("llama-3.1-70b-megatron-train.yaml", 9, 34)
    assert not any("is not used at the training stage" in r and "tensor-parallelism" in r for r in d["left_out_reasons"])
