"""TensorRT-LLM and LMDeploy have no release list in optkg (newuser5 #15): a given --engine-version was accepted
without a word (vLLM / SGLang say when a release is newer than the latest they know); now it is noted as unchecked."""
from cli_helpers import check_json


def _note(d, engine, version):
    return [n for n in d["notes"] if n.startswith(f"{engine} {version}: optkg keeps no release list")]


def test_trtllm_release_is_noted_as_unchecked():
    _, d = check_json("--cmd", "trtllm-serve Qwen/Qwen3-32B --backend pytorch --tp_size 2", "--gpu", "H100",
                      "--count", "2", "--engine-version", "9.9.9")
    assert _note(d, "trtllm", "9.9.9") == [
        "trtllm 9.9.9: optkg keeps no release list for trtllm, so this release is not checked (an unknown or "
        "mistyped version is not caught); its options and defaults are read from one source "
        "(catalog/engines/trtllm.yaml), not per release"]


def test_lmdeploy_release_is_noted_and_without_a_version_nothing_is_said():
    _, d = check_json("--cmd", "lmdeploy serve api_server Qwen/Qwen3-32B --tp 2", "--gpu", "H100", "--count", "2",
                      "--engine-version", "0.99")
    assert len(_note(d, "lmdeploy", "0.99")) == 1
    _, d = check_json("--cmd", "lmdeploy serve api_server Qwen/Qwen3-32B --tp 2", "--gpu", "H100", "--count", "2")
    assert not [n for n in d["notes"] if "keeps no release list" in n]
