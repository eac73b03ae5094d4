"""--quantization-config ``linear`` / ``moe`` names as vLLM checks them (tools/vllm_quant_spec.py): an online
shorthand that builds no spec for the field, a quantization-key name the release does not have, a key that is not
a string.

Commands of the form of public reports: vllm-project/vllm#50281 (RFC) launches
``--quantization-config '{"linear":"fp8_per_channel", ...}'``; #49347's review discusses ``{"moe":{"weight":"mxfp4"}}``
(a known name: accepted); the refused ones change one value of those.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kg.analyses.enginechecks import generated_refusals  # noqa: E402

BASE = "vllm serve Qwen/Qwen3-30B-A3B --quantization-config '{}'"
# (not a string, unknown name, shorthand without the field): config/quantization.py at each release
LINES = {"0.34.0": (73, 77, 213), "0.33.0": (58, 62, 146)}


@pytest.fixture(scope="module")
def catalog():
    import kg
    return kg.load_catalog()


def _refused(cfg: str, release: str, catalog) -> list[int]:
    import kg
    from kg.analyses.check import stack_facts
    st = kg.stack_from_command(BASE.format(cfg), catalog)
    st.engine_version = release
    got = generated_refusals("vllm", release, stack_facts(st)[1], stack=st)
    return [r["line"] for r in got["engine_check_refusals"] if r["path"] == "vllm/config/quantization.py"]


@pytest.mark.parametrize("cfg, which", [
    ('{"linear": "fp8_per_channel", "ignore": ["lm_head"]}', None),   # #50281
    ('{"moe": {"weight": "mxfp4"}}', None),                          # #49347
    ('{"linear": {"weight": "fp8_per_block_static", "activation": "fp8_per_token"}}', None),
    ('{"linear": "nvfp4_per_token"}', 2),     # the shorthand builds a moe spec only
    ('{"linear": "fp8_per_chanel"}', 1),      # a misspelt name
    ('{"moe": {"weight": "mxfp4_static"}}', 1),
    ('{"moe": {"weight": 4}}', 0),
    ('{"linear": {"activation": ["fp8_per_token"]}}', 0),
])
def test_linear_and_moe_specs_are_checked_against_the_releases_names(cfg, which, catalog):
    for release, lines in LINES.items():
        assert _refused(cfg, release, catalog) == ([] if which is None else [lines[which]]), release


def test_a_shorthand_added_in_0_34_0_is_an_unknown_name_at_0_33_0(catalog):
    # mxfp4_hadamard32 (0.34.0 quantization.py _ONLINE_SHORTHANDS) builds a linear spec only
    assert _refused('{"moe": "mxfp4_hadamard32"}', "0.34.0", catalog) == [213]
    assert _refused('{"moe": "mxfp4_hadamard32"}', "0.33.0", catalog) == [62]
    assert _refused('{"linear": "mxfp4_hadamard32"}', "0.34.0", catalog) == []


@pytest.mark.parametrize("cfg, refused", [
    ('{"linear": {"weight": "mxfp4"}}', []),                 # the weight names map it to the base's MXFP4 key
    ('{"linear": "mxfp4"}', []),                             # the mxfp4 shorthand's linear spec: the same key
    ('{"linear": {"activation": "fp8_per_token"}}', []),     # weight not set: merged onto the base's
    ('{"linear": {"weight": "fp8_per_block_static"}}', [394]),
    ('{"linear": "fp8_per_block"}', [394]),
])
def test_a_hadamard_shorthands_weight_cannot_be_overridden(cfg, refused, catalog):
    # 0.34.0 quantization.py:385-398 merge_spec: --quantization mxfp4_hadamard32 rotates the linear weights; the
    # shorthand does not exist at 0.33.0
    import kg
    from kg.analyses.check import stack_facts
    st = kg.stack_from_command(BASE.format(cfg) + " --quantization mxfp4_hadamard32", catalog)
    st.engine_version = "0.34.0"
    got = generated_refusals("vllm", "0.34.0", stack_facts(st)[1], stack=st)["engine_check_refusals"]
    assert [r["line"] for r in got if r["path"] == "vllm/config/quantization.py"] == refused
