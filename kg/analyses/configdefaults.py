"""transformers' config class defaults of keys a config.json may leave out, per ``model_type``
(catalog/models/defaults/<key>.yaml, written from the transformers wheel by tools/transformers_config_defaults.py):
vLLM reads such a key from the config object transformers builds, so where the file lacks it the class default is
what it sees (``is_encoder_decoder``: vllm/transformers_utils/config.py:807-813 at 0.34.0)."""
from __future__ import annotations

from functools import lru_cache
from typing import Any


@lru_cache(maxsize=4)
def class_defaults(key: str) -> dict[str, bool]:
    """model_type -> the class default of ``key``; a model type the table lacks (remote code) is not in it."""
    from kg.core.cache import built_from
    from kg.core.paths import catalog_dir
    f = catalog_dir() / "models" / "defaults" / f"{key}.yaml"
    if not f.exists():
        return {}

    def build():
        from kg.core.yamlio import load_yaml
        return load_yaml(f).data or {}
    # served from the content-keyed cache, as the other shipped tables a check reads: a warm check imports no PyYAML
    data = built_from(f"model-class-defaults-{key}", [f], build)
    return {str(k): v for k_, v in (("default_true", True), ("default_false", False)) for k in (data.get(k_) or {})}


def class_default(key: str, model_type: Any) -> bool | None:
    return class_defaults(key).get(str(model_type)) if isinstance(model_type, str) else None
