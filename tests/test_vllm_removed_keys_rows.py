"""A removed --pooler-config key as vLLM 0.34.0 refuses it (tools/vllm_removed_keys.py): pooler.py:132
PoolerConfig.reject_removed_parameters raises "Parameter `normalize` was removed; use `use_activation` instead."
for any value of the key; a pooler config without it, or no --pooler-config at all, starts.

vllm-project/vllm#32243 replaced `normalize` with `use_activation`; xorbitsai/inference#4729 adapted a caller.
"""
from __future__ import annotations

import pytest

from engine_rows import refused_at

BASE = "vllm serve Qwen/Qwen3-8B --runner pooling --convert embed"
SITE = ("vllm/config/pooler.py", 132)


def _refused(extra: str, catalog) -> list[tuple[str, int]]:
    return refused_at(BASE + extra, SITE, catalog)


@pytest.mark.parametrize("extra, refused", [
    (" --pooler-config '{\"normalize\": true}'", [SITE]),
    (" --pooler-config '{\"normalize\": false, \"pooling_type\": \"CLS\"}'", [SITE]),
    (" --pooler-config '{\"use_activation\": true}'", []),
    (" --pooler-config '{\"pooling_type\": \"CLS\"}'", []),
    ("", []),
])
def test_the_removed_normalize_pooler_key_is_refused_whatever_its_value(extra, refused, catalog):
    assert _refused(extra, catalog) == refused
