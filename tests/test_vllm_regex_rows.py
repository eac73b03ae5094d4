"""vLLM's regular-expression startup checks as rows (tools/vllm_regex.py, kg/engine/expr.py fullmatch / is_regex).

- --numa-bind-cpus entries must be numactl CPU lists: 0.34.0 config/parallel.py:35 `_NUMACTL_CPUSET_PATTERN`, checked
  at :544-548 (0.33.0 :35, :506-507). The option came with vllm-project/vllm#38635 ("CPU list values follow numactl
  --physcpubind syntax"); the accepted lists are the CPU-affinity column of #13855's `nvidia-smi topo -m` on a DGX
  (0-55,112-167 and 56-111,168-223). numactl itself also takes `all`, which vLLM's pattern refuses.
- --quantization-config targets keys `re:<pattern>` must compile (0.34.0 config/quantization.py:246-253, 0.33.0
  :171-176; `import regex as re`). The accepted key is the one #51285 / RFC #50281 quote (`re:.*mlp\\.gate$`); the
  refused one is a shell glob written where a regex belongs (`re:*.mlp`: nothing to repeat).
"""
from __future__ import annotations

import pytest

from engine_rows import refused_at
from kg.engine.expr import MAX_MATCH_CHARS, ExprError, ExprTypeError, compile_expr, evaluate

NUMACTL = r"^\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*$"  # 0.34.0 config/parallel.py:35 (and 0.33.0 :35)
NUMA = {"0.34.0": ("vllm/config/parallel.py", 545), "0.33.0": ("vllm/config/parallel.py", 507)}
TARGETS = {"0.34.0": ("vllm/config/quantization.py", 250), "0.33.0": ("vllm/config/quantization.py", 174)}
BASE = "vllm serve Qwen/Qwen3-8B"


def test_fullmatch_takes_only_a_literal_pattern_and_a_bounded_subject():
    assert [evaluate(f"fullmatch({NUMACTL!r}, x)", {"x": x}) for x in ("0-3", "0,2,4-7", "0-3,", "all", "")] == [
        True, True, False, False, False]
    for text in ("fullmatch(p, x)", "fullmatch('a')", "fullmatch(lower(p), x)"):
        with pytest.raises(ExprError, match="string literal"):
            compile_expr(text)
    with pytest.raises(ExprTypeError, match="limit is 1,000"):
        evaluate(f"fullmatch({NUMACTL!r}, x)", {"x": "1" * (MAX_MATCH_CHARS + 1)})


@pytest.mark.parametrize("pattern, valid", [
    (r".*mlp\.gate$", True), (r"model\.layers\.(\d+)\.mlp", True), ("*.mlp", False), ("model.layers.*[", False),
    ("(foo", False), ("a**", False), ("[z-a]", False), ("a|*", False),
    (r"\p{L}", None), ("^*", None), ("a(?i)b", None), (r"[\d-z]", None),  # re refuses, vLLM's regex accepts
])
def test_is_regex_is_false_only_where_vllms_regex_module_refuses_too(pattern, valid):
    if valid is None:
        with pytest.raises(ExprTypeError, match="may accept it"):
            evaluate("is_regex(p)", {"p": pattern})
    else:
        assert evaluate("is_regex(p)", {"p": pattern}) is valid


@pytest.mark.parametrize("release", ["0.34.0", "0.33.0"])
def test_a_numa_cpu_list_outside_numactl_list_syntax_is_refused(release, catalog):
    cmd = BASE + " --numa-bind --numa-bind-cpus "
    assert refused_at(cmd + "all", NUMA[release], catalog, release=release) == [NUMA[release]]
    assert refused_at(cmd + "0-55,112-167 56-111,168-223", NUMA[release], catalog, release=release) == []


@pytest.mark.parametrize("release", ["0.34.0", "0.33.0"])
def test_a_quantization_target_key_that_is_not_a_regex_is_refused(release, catalog):
    cmd = BASE + " --quantization-config '{\"targets\": {\"%s\": \"fp8_per_channel\"}}'"
    site = TARGETS[release]
    assert refused_at(cmd % "re:*.mlp", site, catalog, release=release) == [site]
    assert refused_at(cmd % "re:.*mlp\\\\.gate$", site, catalog, release=release) == []
    assert refused_at(cmd % "*.mlp", site, catalog, release=release) == []  # an exact layer name: no regex
    assert refused_at(cmd % "re:\\\\p{L}", site, catalog, release=release) == []  # not evaluable, not refused
