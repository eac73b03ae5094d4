"""torchtitan's mechanical startup checks, generated from torchtitan 0.3.0's config classes
(``checks/torchtitan-0.3.0.yaml``, tools/torchtitan_generated_checks.py) and evaluated on a torchtitan job.

Rows read ``tt__<section>__<field>``: the job's config (TOML sections, ``--section.field`` overrides; values
converted to the field's type as torchtitan's CLI does), else the field's default in 0.3.0
(``data/config-fields-0.3.0.yaml``); ``world_size`` only when the launcher says (never derived from the degrees,
which is what ParallelDims checks).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from kg.core.yamlio import load_yaml

HERE = Path(__file__).parent
TABLE = HERE / "checks" / "torchtitan-0.3.0.yaml"
FIELDS = HERE / "data" / "config-fields-0.3.0.yaml"
PINNED = "0.3.0"


@lru_cache(maxsize=1)
def fields() -> dict[str, Any]:
    return dict(load_yaml(FIELDS).data or {}) if FIELDS.exists() else {}


def namespace(job: Any) -> dict[str, Any]:
    from kg.frameworks.checkrows import dataclass_namespace
    cfg = job.configs.get("torchtitan") or {}
    ns: dict[str, Any] = {}
    unknown = set(job.configs.get("torchtitan_unknown") or ())
    for sec, table in fields().items():
        given = cfg.get(sec) if isinstance(cfg.get(sec), dict) else {}
        ns.update(dataclass_namespace(given, table, f"tt__{sec}"))
        for f in table:
            if f"{sec}.{f}" in unknown:  # the registry computes it: not a value optkg can stand in for
                ns.pop(f"tt__{sec}__{f}", None)
    if job.configs.get("torchtitan_world_size"):
        ns["world_size"] = job.configs["torchtitan_world_size"]
    return ns


def findings(job: Any) -> list[dict[str, Any]]:
    from kg.core.relcmp import older_than
    from kg.frameworks.checkrows import findings as fire
    from kg.frameworks.checkrows import table_lets, table_rows
    if "torchtitan_registry" not in job.configs:
        return invalid_fields(job)  # a TOML job config is torchtitan <= 0.2.x's format (0.3.0 reads --module / --config)
    v = job.framework_version
    if v and (older_than(v, PINNED) or older_than(PINNED, v)):
        return []
    return fire(table_rows(TABLE), namespace(job), HERE / "checks", table_lets(TABLE))


def invalid_fields(job: Any) -> list[dict[str, Any]]:
    """TOML keys torchtitan 0.2.x's ConfigManager refuses (kg.frameworks.torchtitan.reader.invalid_toml_fields)."""
    from kg.frameworks.checkrows import unknown_keys_finding
    return unknown_keys_finding(
        job.configs.get("torchtitan_invalid_fields") or [], "a field of torchtitan's JobConfig",
        rule_id="torchtitan-invalid-config-field", package="torchtitan", release="0.2.0-0.2.2",
        path="torchtitan/config/manager.py", line=166,
        values="ValueError: Invalid field names in <section> data: {...}. Please modify your .toml config file",
        expr="a TOML key that is no field of the section's dataclass (config/job_config.py)",
        url="https://github.com/pytorch/torchtitan/blob/v0.2.2/torchtitan/config/manager.py#L166-L172",
        table="kg/frameworks/torchtitan/data/toml-fields-0.2.x.yaml")
