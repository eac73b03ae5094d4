"""DeepSpeed's mechanical startup checks over its JSON config, generated from the released source and evaluated on a
job that carries a DeepSpeed config (whatever runs it: the ``deepspeed`` launcher, the HF Trainer, TRL, LLaMA-Factory).

The rows are the ``status: table`` sites of ``checks/deepspeed-0.19.8.yaml`` (tools/training_check_sites.py via
tools/deepspeed_generated_checks.py). Each reads config keys under the names ``ds__<key>__<key>`` (the config's value,
else the default deepspeed 0.19.8 reads an absent key with: ``data/config-defaults-0.19.8.yaml``) and
``has__ds__<key>...`` (whether the config has the key), ``dp_world_size`` (the data-parallel size) and
``pipeline_engine`` (the job runs DeepSpeed's PipelineEngine). A key set to ``"auto"`` is filled in by the HF
integration before DeepSpeed reads the config: it is left unknown, as is every key of the legacy boolean
``"zero_optimization": true`` form (zero/config.py:71-78), so rows reading them are not evaluated.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from kg.core.yamlio import load_yaml

HERE = Path(__file__).parent
TABLE = HERE / "checks" / "deepspeed-0.19.8.yaml"
DEFAULTS = HERE / "data" / "config-defaults-0.19.8.yaml"
PINNED = "0.19.8"
_MISSING = object()
FILLED_BY_INTEGRATION = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")


@lru_cache(maxsize=1)
def defaults() -> dict[str, Any]:
    return dict(load_yaml(DEFAULTS).data or {}) if DEFAULTS.exists() else {}


def _lookup(config: Any, keys: list[str]) -> Any:
    cur = config
    for k in keys:
        if not isinstance(cur, dict) or k not in cur:
            return _MISSING
        cur = cur[k]
    return cur


def namespace(job: Any, names: set[str]) -> dict[str, Any]:
    """The values of ``names`` the job's DeepSpeed config gives (see module doc); unknown names are left out."""
    config = job.configs.get("deepspeed")
    ns: dict[str, Any] = {}
    # read by the deepspeed launcher's own script (deepspeed.initialize(config=...)), absent keys are absent; read by
    # the HF Trainer / accelerate, or on its own, the batch keys may be filled in by the integration (accelerate
    # 1.15.0 utils/dataclasses.py:1469-1472, transformers 5.24.0 integrations/deepspeed.py:142-150)
    direct = bool(job.configs.get("deepspeed_direct"))
    legacy_zero = isinstance(config, dict) and isinstance(config.get("zero_optimization"), bool)
    dflt = defaults()
    for n in names:
        if n.startswith(("ds__", "has__ds__")):
            present = n.startswith("has__")
            keys = n.removeprefix("has__").split("__")[1:]
            if legacy_zero and keys[:1] == ["zero_optimization"] and len(keys) > 1:
                continue
            v = _lookup(config, keys)
            if not direct and keys and keys[0] in FILLED_BY_INTEGRATION and (v is _MISSING or v == "auto"):
                continue
            if present:
                ns[n] = v is not _MISSING
            elif v is _MISSING:
                if n in dflt:
                    ns[n] = dflt[n]
            elif v != "auto":
                ns[n] = v
    if "dp_world_size" in names:
        dp = _dp_size(job)
        if dp is not None:
            ns["dp_world_size"] = dp
    if "pipeline_engine" in names:
        ns["pipeline_engine"] = bool(job.get("pipeline_engine")) or (job.get("pp_size") or 1) > 1
    return ns


def _dp_size(job: Any) -> int | None:
    """DeepSpeedConfig.world_size: the GPUs over the model-parallel sizes (runtime/config.py:457-470), when the job
    says how many GPUs it runs on."""
    g = job.get
    if not (g("world_size") or g("gpus_per_node") or g("dp_size")):
        return None
    p = job.parallel()
    return p["dp_size"] * p["cp_size"]


def findings(job: Any) -> list[dict[str, Any]]:
    from kg.core.relcmp import older_than
    from kg.frameworks.checkrows import findings as fire
    from kg.frameworks.checkrows import names_of, table_lets, table_rows
    if "deepspeed" not in job.configs:
        return []
    v = job.framework_version if job.framework == "deepspeed" else None
    if v and (older_than(v, PINNED) or older_than(PINNED, v)):
        return []
    rows = table_rows(TABLE)
    lets = table_lets(TABLE)
    names = {n for r in rows for n in names_of(r["expr"])} | {n for _, e in lets for n in names_of(e)}
    return fire(rows, namespace(job, names), HERE / "checks", lets)
