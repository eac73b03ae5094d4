"""SGLang's model registry per release (tools/sglang_model_registry.py -> catalog/engines/models/sglang.yaml,
kg.engines.sglang.registry): newuser6 #10, Qwen3 on SGLang 0.4.x got "0 finding(s)" with model support unchecked."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import run_cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from sglang_model_registry import entry_classes  # noqa: E402


def test_entry_class_names_follow_aliases_lists_and_imports():
    src = ("from sglang.srt.models.llama import LlamaForCausalLM as Base\n"
           "class Qwen3ForCausalLM(Base):\n    pass\n"
           "Alias = Qwen3ForCausalLM\n"
           "EntryClass = [Alias, Base]\n")
    # SGLang registers entry.__name__: the alias is the class, the imported one keeps its own name
    assert entry_classes(src) == [("Qwen3ForCausalLM", 5), ("LlamaForCausalLM", 5)]


def _sglang(version: str) -> dict:
    code, out, err = run_cli("check", "--sglang", "python -m sglang.launch_server --model-path Qwen/Qwen3-32B --tp 2",
                             "--gpu", "H100-SXM", "--count", "2", "--engine-version", version, "--no-speed",
                             "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)


def test_sglang_model_support_is_an_error_where_read_and_not_evaluable_where_not():
    # 0.4.5 read: qwen2*.py only, no Transformers fallback -> the refusal
    rep = _sglang("0.4.5")
    assert [f["rule_id"] for f in rep["findings"]] == ["sglang-architecture-not-registered"]
    # 0.4.2 not read, Qwen3ForCausalLM in neither 0.4.0 nor 0.4.5 around it: listed as not evaluable, not silent
    rep = _sglang("0.4.2")
    assert rep["findings"] == []
    ne = [x for x in rep["not_evaluable"] if x["rule_id"] == "sglang-architecture-not-registered"]
    assert len(ne) == 1 and ne[0]["missing"] == ["sglang_architecture_refused"]
    # 0.5.1 registers it (qwen3.py)
    rep = _sglang("0.5.1")
    assert rep["findings"] == [] and not [x for x in rep["not_evaluable"]
                                          if x["rule_id"] == "sglang-architecture-not-registered"]
