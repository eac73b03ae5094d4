"""`check` of a plain serving stack file decides "not training" without importing the training readers
(kg.cli.check_training.serving_stack_file); that shortcut must never hide a training file: no registered
framework claims a file made only of serving-stack fields, and the full detection agrees on the examples."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REPO
from kg.cli.check_training import SERVING_ONLY_FIELDS, serving_stack_file
from kg.frameworks.registry import all_frameworks
from kg.inputs.training import is_training_file

SERVING_DOC = {"name": "s", "model": "Qwen/Qwen3-8B", "config": "config.json", "engine": {"name": "vllm"},
               "engine_version": "0.34.0", "hardware": {"gpu": "H100-SXM", "count": 8},
               "techniques": ["tensor-parallelism"], "settings": {"max_model_len": 4096}, "description": "d"}


def test_the_serving_doc_uses_every_serving_only_field():
    assert set(SERVING_DOC) == SERVING_ONLY_FIELDS


@pytest.mark.parametrize("fid", sorted(all_frameworks()))
def test_no_framework_claims_a_file_of_serving_stack_fields(fid):
    fw = all_frameworks()[fid]
    for suffix in (".yaml", ".yml"):
        assert not fw.claims_file(Path("stack" + suffix), SERVING_DOC)


@pytest.mark.parametrize("name,serving", [("qwen3-235b-tp8.yaml", True), ("llama-3.1-70b-megatron-train.yaml", False)])
def test_shortcut_agrees_with_the_full_detection(name, serving):
    f = REPO / "examples" / name
    assert serving_stack_file(f) is serving
    assert is_training_file(f) is (not serving)


def test_a_stack_with_a_framework_field_is_left_to_the_full_detection(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("model: Qwen/Qwen3-8B\nengine: {name: vllm}\nframework: megatron\n")
    assert serving_stack_file(f) is False
