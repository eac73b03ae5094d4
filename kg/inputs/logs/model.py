"""The parsed form of a startup log: ``StartupLog`` of ``LoggedValue``s (bytes, tokens or ratios)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

GIB = 1024**3


@dataclass
class LoggedValue:
    """One number read from the log: ``value`` (bytes, tokens or a ratio), the line it came from."""

    value: float
    line: int
    text: str


@dataclass
class StartupLog:
    """What a startup log says about memory (keys: see ``vllm.KEYS`` / ``sglang.KEYS``)."""

    path: str
    engine: str                    # vllm | sglang
    generation: str                # vllm: "v0" or "v1"; sglang: "sglang"
    values: dict[str, LoggedValue] = field(default_factory=dict)
    # the model the engine loaded when the log names it (vLLM "with config: model='...'" / non-default args
    # 'model': '...', SGLang model_path='...'), with its line; its TP size is ``values["tp_size"]``
    model: LoggedValue | None = None

    def get(self, key: str) -> float | None:
        v = self.values.get(key)
        return None if v is None else v.value

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


