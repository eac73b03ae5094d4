"""Engram checks as rows (tools/vllm_choices.py: the architecture -> n-gram field table; args_obj: --engram-config
defaults to None through ``VllmConfig.engram_config``, arg_utils.py:778 at 0.34.0, so its checks run only where given
or where the model carries Engram layers).

- config/engram.py:16-20 (both releases) `_NGRAM_LAYER_FIELDS`: DeepseekV41ForCausalLM -> engram_layer_ids,
  Qwen4Exp* -> ple_layer_ids. verify_model_config refuses an --engram-config for any other model, or one whose
  config.json lacks the field (0.34.0 :86, 0.33.0 :80); at 0.34.0 disk_offload needs a Qwen4Exp model on CUDA (:94).
- config/vllm.py:1413-1421 [0.33.0 :1473-1482]: DeepSeek V4.1 with Engram layers refuses DBO / microbatching.
vllm-project/vllm#57910 (the Engram docs page) lists the two families and the DBO limitation. The catalog has no
V4.1 or Qwen4Exp model, so those tests give a Qwen3-8B stack the architecture and the config.json key.
"""
from __future__ import annotations

import pytest

from engine_rows import refused_at

VERIFY = {"0.34.0": ("vllm/config/engram.py", 86), "0.33.0": ("vllm/config/engram.py", 80)}
DISK = ("vllm/config/engram.py", 94)
DBO = {"0.34.0": ("vllm/config/vllm.py", 1418), "0.33.0": ("vllm/config/vllm.py", 1479)}
ENGRAM = " --engram-config '{\"cpu_offload\": true}'"


def _as(arch: str, key: str | None):
    def adjust(st, facts):
        facts["vllm_model__arch"] = arch
        if key:
            facts[f"hf_text__{key}"] = [3, 11]
    return adjust


@pytest.mark.parametrize("release", ["0.34.0", "0.33.0"])
def test_an_engram_config_for_a_model_without_engram_layers_is_refused(release, catalog):
    site = VERIFY[release]
    assert refused_at("vllm serve Qwen/Qwen3-8B" + ENGRAM, site, catalog, release=release) == [site]
    assert refused_at("vllm serve Qwen/Qwen3-8B", site, catalog, release=release) == []  # not given: not checked
    v41 = _as("DeepseekV41ForCausalLM", "engram_layer_ids")
    assert refused_at("vllm serve Qwen/Qwen3-8B" + ENGRAM, site, catalog, release=release, adjust=v41) == []


def test_disk_offload_needs_a_qwen4exp_model_on_cuda(catalog):
    cmd = "vllm serve Qwen/Qwen3-8B --engram-config '{\"disk_offload\": true}'"
    qwen4 = _as("Qwen4ExpForCausalLM", "ple_layer_ids")
    assert refused_at(cmd, DISK, catalog, adjust=_as("DeepseekV41ForCausalLM", "engram_layer_ids")) == [DISK]
    assert refused_at(cmd, DISK, catalog, gpu="MI300X", adjust=qwen4) == [DISK]
    assert refused_at(cmd, DISK, catalog, adjust=qwen4) == []


@pytest.mark.parametrize("release", ["0.34.0", "0.33.0"])
def test_deepseek_v41_engram_refuses_dual_batch_overlap(release, catalog):
    site, v41 = DBO[release], _as("DeepseekV41ForCausalLM", "engram_layer_ids")
    cmd = "vllm serve Qwen/Qwen3-8B"
    assert refused_at(cmd + " --enable-dbo", site, catalog, release=release, adjust=v41) == [site]
    assert refused_at(cmd, site, catalog, release=release, adjust=v41) == []
    assert refused_at(cmd + " --enable-dbo", site, catalog, release=release) == []  # a model without Engram
