"""The local Hugging Face hub cache: where it is (the same environment variables as huggingface_hub) and a
model's ``config.json`` in it, without network unless downloads are allowed (``OPTKG_HF_DOWNLOAD=1``)."""
from __future__ import annotations

import re
from pathlib import Path

from kg.core.errors import OptkgError

HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def hf_cache_dir() -> Path:
    """The Hugging Face hub cache folder, read from the environment at call time: ``HF_HUB_CACHE``, else
    ``HF_HOME``/hub, else ``XDG_CACHE_HOME``/huggingface/hub, else ~/.cache/huggingface/hub
    (huggingface_hub ``constants``)."""
    import os
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    base = Path(os.environ["XDG_CACHE_HOME"]).expanduser() if os.environ.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def hf_cache_config(name: str, revision: str | None = None) -> Path | None:
    """``config.json`` of hub id ``name`` at ``revision`` (default main) in the local Hugging Face cache, or None.

    Uses ``huggingface_hub.try_to_load_from_cache`` (no network). When it is not cached and downloads are
    allowed (``OPTKG_HF_DOWNLOAD=1`` and not ``HF_HUB_OFFLINE``), fetches config.json (and
    hf_quant_config.json when the repo has one) with ``hf_hub_download``. None when huggingface_hub is
    not installed.
    """
    import os
    if not HUB_ID.match(name):
        return None
    cache = hf_cache_dir()
    offline = str(os.environ.get("HF_HUB_OFFLINE", "")).lower() in ("1", "true", "yes", "on")
    may_download = os.environ.get("OPTKG_HF_DOWNLOAD") == "1" and not offline
    if not may_download and not (cache / f"models--{name.replace('/', '--')}").is_dir():
        # the hub cache keeps a repo under models--<org>--<name>: without that folder there is nothing to find,
        # and importing huggingface_hub (a third of `optkg check`'s start-up) would be for nothing
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        got = try_to_load_from_cache(name, "config.json", cache_dir=str(cache), revision=revision)
    except (ValueError, OSError):
        got = None
    if isinstance(got, str):
        return Path(got)
    if may_download:
        from huggingface_hub import hf_hub_download
        try:
            path = Path(hf_hub_download(name, "config.json", revision=revision, cache_dir=str(cache)))
        except Exception as e:  # noqa: BLE001 - any hub/network failure means "not found here"
            raise OptkgError(f"model '{name}': download of config.json failed ({type(e).__name__})") from None
        try:
            hf_hub_download(name, "hf_quant_config.json", revision=revision, cache_dir=str(cache))
        except Exception:  # noqa: BLE001, S110 - most repos have no hf_quant_config.json
            pass
        return path
    return None
