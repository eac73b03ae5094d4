"""vLLM 0.34.0's draft-model speculator setup (tools/vllm_draft_setup.py): the draft DCP and the speculative
max_model_len against the target's, as generated rows.

DraftModelSpeculatorConfig.configure (v1/worker/gpu/spec_decode/speculator_config.py:236-247) refuses a given
draft_decode_context_parallel_size other than 1 or the target's DCP (config/speculative.py:1563) and a
speculative max_model_len above the target's (:1466). The commands are of the form of public reports: EAGLE on
Llama 3.1 8B with a speculative max_model_len (vllm-project/vllm#24662's launch, #41456 and #29945 set
speculative_config.max_model_len), DeepSeek-V3 MTP with DCP (vllm-project/vllm#53673 and #55472: the draft's DCP
against the target's).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kg.analyses.enginechecks import generated_refusals  # noqa: E402

EAGLE = ("vllm serve meta-llama/Llama-3.1-8B {flags} --speculative-config '{{\"method\": \"eagle\", \"model\": "
         "\"yuhuili/EAGLE-LLaMA3.1-Instruct-8B\", \"num_speculative_tokens\": 4{extra}}}'")
MTP = ("vllm serve deepseek-ai/DeepSeek-V3 -tp 8 -dcp 2 --speculative-config '{{\"method\": \"mtp\", \"model\": "
       "\"deepseek-ai/DeepSeek-V3\", \"num_speculative_tokens\": 1{extra}}}'")
MAX_LEN, DCP = ("vllm/config/speculative.py", 1466), ("vllm/config/speculative.py", 1563)


@pytest.fixture(scope="module")
def catalog():
    import kg
    return kg.load_catalog()


def _refused(cmd: str, release: str, catalog) -> tuple[list[tuple[str, int]], int]:
    import kg
    from kg.analyses.check import stack_facts
    st = kg.stack_from_command(cmd, catalog)
    st.engine_version = release
    st.hardware, st.gpu_count = catalog.resolve_hardware("H100-SXM"), 8
    got = generated_refusals("vllm", release, stack_facts(st)[1], stack=st)
    return [(r["path"], r["line"]) for r in got["engine_check_refusals"]], got["engine_check_rows_evaluated"]


@pytest.mark.parametrize("cmd, refused", [
    (EAGLE.format(flags="--max-model-len 4096", extra=', "max_model_len": 8192'), [MAX_LEN]),
    (EAGLE.format(flags="--max-model-len 4096", extra=', "max_model_len": 2048'), []),
    (EAGLE.format(flags="-tp 2", extra=', "draft_decode_context_parallel_size": 2'), [DCP]),
    (MTP.format(extra=', "draft_decode_context_parallel_size": 4'), [DCP]),
    (MTP.format(extra=', "draft_decode_context_parallel_size": 2'), []),
    (MTP.format(extra=', "draft_decode_context_parallel_size": 1'), []),
])
def test_the_draft_setup_refuses_a_draft_dcp_or_max_model_len_the_target_cannot_take(cmd, refused, catalog):
    got, evaluated = _refused(cmd, "0.34.0", catalog)
    assert got == refused and evaluated > 150


def test_a_speculative_max_model_len_with_the_targets_length_derived_is_not_evaluated(catalog):
    # without --max-model-len the target's length comes from config.json after ModelConfig resolves it: the row
    # reads a value the walk does not model, so it is not evaluated (no guess)
    got, _ = _refused(EAGLE.format(flags="", extra=', "max_model_len": 999999'), "0.34.0", catalog)
    assert MAX_LEN not in got
