"""Speculative-decoding drafts (kg.derive.drafts; issue 13 priority 5)."""
from __future__ import annotations

import json

from conftest import REPO, run_cli
from kg.derive.drafts import draft_facts, eagle3_params
from kg.inputs.modelcfg import config_dict, load_config_file, resolve_model

EAGLE3 = str(REPO / "tests/fixtures/model_configs/eagle3-llama3.1-8b")
CMD = ("vllm serve meta-llama/Llama-3.1-8B --max-model-len 131072 --speculative-config "
       "'{\"method\":\"eagle3\",\"model\":\"" + EAGLE3 + "\",\"num_speculative_tokens\":3}'")


def test_eagle3_head_size():
    d = load_config_file(EAGLE3)
    # fc 3 x 4096 x 4096 = 50,331,648; q/k/v over 2 x 4096 inputs 8,192 x (4,096 + 2 x 1,024) = 50,331,648 and
    # o 16,777,216; MLP 3 x 4096 x 14,336 = 176,160,768; lm_head 32,000 x 4,096 = 131,072,000
    assert eagle3_params(d, 32000) == 424_673_280
    f = draft_facts("eagle3", EAGLE3, resolve_model("meta-llama/Meta-Llama-3.1-8B"), 1, None, resolve_model,
                    raw_config=config_dict)
    assert (f.kind, f.layers, f.max_position_embeddings) == ("eagle3", 1, 2048)
    assert f.weight_bytes_per_gpu == 424_673_280 * 2      # float16: 849,346,560 B (~810 MiB)
    assert f.kv_bytes_per_token_per_gpu == 8 * 256 * 2    # one layer, 8 KV heads x (128 + 128) x 2 B


def test_check_subtracts_the_draft_and_flags_its_context():
    code, out, err = run_cli("check", "--vllm", CMD, "--gpu", "H100-SXM", "--format", "json")
    assert code in (0, 1), err
    d = json.loads(out)
    lines = {x["name"]: x["bytes"] for x in d["derived"]["kv_budget_breakdown"]}
    assert lines["draft weights"] == 849_346_560
    assert d["derived"]["kv_groups"].startswith("full x33 ")   # 32 target layers + the draft's
    f = {x["rule_id"]: x for x in d["findings"]}["draft-context-shorter-than-max-model-len"]
    assert f["numbers"]["draft_max_position_embeddings"] == 2048 and f["numbers"]["max_model_len"] == 131072


def test_mtp_layers_of_the_target():
    m = resolve_model("deepseek-ai/DeepSeek-V3")
    assert m.num_nextn_predict_layers == 1
    f = draft_facts("mtp", None, m, 8, None, resolve_model)
    # one MTP layer of MLA latent: 576 x 2 B per token; its weights load beside the target's (worked by hand in
    # tests/test_mtp_draft_weights_counted.py: 11,717,434,480 B / TP 8)
    assert (f.kind, f.layers, f.kv_bytes_per_token_per_gpu, f.weight_bytes_per_gpu) == ("mtp", 1, 1152, 1_464_679_310.0)
    assert draft_facts("ngram", None, m, 8, None, resolve_model) is None


def test_unresolvable_draft_is_a_note():
    # a whole draft model cannot be guessed from the target (an EAGLE head can: see below)
    cmd = CMD.replace(EAGLE3, "nobody/no-such-draft").replace('"method":"eagle3"', '"method":"draft_model"')
    code, out, err = run_cli("check", "--vllm", cmd, "--format", "json")
    assert code in (0, 1), err
    assert any(n.startswith("draft not sized: unknown model 'nobody/no-such-draft'") for n in json.loads(out)["notes"])


def test_a_missing_local_draft_path_is_an_input_error():
    """Tester-4 #14: a draft given as a path that does not exist was a note ('draft not sized') and the draft
    rules went 'not evaluable'; the engine would fail to open it, so it is a one-line error with exit 2."""
    from conftest import run_cli
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B --speculative-config "
                             "'{\"method\": \"eagle3\", \"model\": \"/nonexistent/head\", \"num_speculative_tokens\": 3}'",
                             "--gpu", "H100", "--count", "1")
    assert code == 2 and err.strip() == ("optkg: error: --speculative-config: the draft model path '/nonexistent/head' "
                                         "does not exist")


def test_the_table_shows_the_drafts_bytes_per_token():
    """Tester-4 #16: the table said 131,072 B/token while the token count used 135,168 (target + the EAGLE3
    head's one layer: 8 KV heads x 128 x 2 (K, V) x 2 B = 4,096)."""
    from conftest import run_cli
    code, out, err = run_cli("check", "--vllm", "vllm serve meta-llama/Meta-Llama-3.1-8B --speculative-config "
                             f"'{{\"method\": \"eagle3\", \"model\": \"{EAGLE3}\", \"num_speculative_tokens\": 3}}'",
                             "--gpu", "H100", "--count", "1")
    assert "  + the draft's bytes/token per GPU          4,096" in out


def test_an_eagle3_head_known_only_by_id_is_sized_from_the_targets_shape(cli):
    """yuhuili/EAGLE3-LLaMA3.1-Instruct-8B is not bundled: the head is one EAGLE3 layer of Llama-3.1-8B's shape.
    fc 3 x 4096^2 = 50,331,648; attention 2 x 4096 x (32 + 2 x 8) x 128 + 32 x 128 x 4096 = 67,108,864; MLP
    3 x 4096 x 14,336 = 176,160,768; lm_head over the target's 128,256 tokens 525,336,576: 818,937,856 params,
    1,637,875,712 bytes in bf16 at TP 1; its KV 2 x 8 x 128 x 2 = 4,096 bytes/token. Its context limit stays
    unknown, so the 128k rule names the fact and how to give it instead of 'draft_kind'."""
    import json
    spec = '{"method":"eagle3","model":"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B","num_speculative_tokens":3}'
    argv = ("check", "--vllm", f"vllm serve meta-llama/Meta-Llama-3.1-8B --speculative-config '{spec}' "
            "--max-model-len 131072", "--gpu", "H100")
    code, out, err = cli(*argv, "--format", "json")
    assert code in (0, 1), err
    d = json.loads(out)
    dv = d["derived"]
    assert (dv["draft_kind"], dv["draft_layers"]) == ("eagle3", 1)
    assert dv["draft_weight_bytes_per_gpu_estimate"] == 1_637_875_712
    assert dv["draft_kv_bytes_per_token_per_gpu"] == 4_096
    ne = {u["rule_id"]: u["needs"] for u in d["not_evaluable"]}
    assert ne["draft-context-shorter-than-max-model-len"] == ["draft_max_position_embeddings"]
    assert any("sized from the target's shape" in n for n in d["notes"])
    _, text, _ = cli(*argv)
    assert "  draft_max_position_embeddings (the draft head's config.json" in text
