"""Engine startup logs: the memory numbers an engine prints while it sizes the KV cache, in bytes.

``StartupLog`` of ``LoggedValue``s (every size in bytes; GiB in the logs are 2**30 bytes: vLLM's "GB" in
``Loading model weights took`` and SGLang's "GB" are GiB too, both divide by 2**30). Each engine reads its own
lines (``kg.engines.<engine>.logs``, the protocol's ``read_log``); ``kg.engines.logs.read_startup_log`` asks
every engine.
"""
from __future__ import annotations

from kg.inputs.logs.model import GIB, NUM, LoggedValue, StartupLog, logged_model, logged_number

__all__ = ["GIB", "LoggedValue", "MAX_LOG_BYTES", "NUM", "StartupLog", "logged_model", "logged_number"]
MAX_LOG_BYTES = 64 * 1024 * 1024
