"""The startup checks of transformers' ``TrainingArguments.__post_init__``, generated from transformers 5.24.0's
source (``checks/transformers-5.24.0.yaml``, tools/dataclass_generated_checks.py) and evaluated on a job whose script
takes TrainingArguments flags (``job.configs["training_arguments"]``: the HF reader's flags and recipe files).

Rows read ``hf__<field>`` (the value the job gives, converted as HfArgumentParser converts it, else the field's
default: ``data/training-arguments-5.24.0.yaml``) and ``world_size`` (the processes the launcher starts).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from kg.core.yamlio import load_yaml

HERE = Path(__file__).parent
PINNED = "5.24.0"


@lru_cache(maxsize=4)
def fields(path: Path) -> dict[str, Any]:
    return dict(load_yaml(path).data or {}) if path.exists() else {}


def world_size(job: Any) -> int | None:
    """Processes the launcher starts (accelerate's num_processes, torchrun's nproc x nodes), when the job says."""
    g = job.get
    if g("world_size") or g("gpus_per_node"):
        return job.parallel()["world_size"]
    return None


def findings_for(job: Any, table: Path, field_file: Path) -> list[dict[str, Any]]:
    """The rows of ``table`` that fire on the job's TrainingArguments-style flags (dataclass fields of
    ``field_file``)."""
    from kg.frameworks.checkrows import dataclass_namespace, table_lets, table_rows
    from kg.frameworks.checkrows import findings as fire
    given = job.configs.get("training_arguments")
    if given is None:
        return []
    ns = dataclass_namespace(given, fields(field_file), "hf")
    ws = world_size(job)
    if ws is not None:
        ns["world_size"] = ws
    return fire(table_rows(table), ns, table.parent, table_lets(table))


def findings(job: Any) -> list[dict[str, Any]]:
    return findings_for(job, HERE / "checks" / "transformers-5.24.0.yaml",
                        HERE / "data" / "training-arguments-5.24.0.yaml")
