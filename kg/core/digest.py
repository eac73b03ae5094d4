"""SHA-256 and HMAC-SHA256 for the content-keyed cache, without loading OpenSSL for a small input.

``import hashlib`` loads OpenSSL (libcrypto, ~12 M instructions and a 4.5 MB library mapped: a twentieth of
``optkg kv``, whose cache reads hash ~100 KB). CPython also ships its own SHA-256 (``_sha256``; ``_sha2`` from
3.12), slower per byte than OpenSSL's but with nothing to load. ``sha256_hex`` takes that one for an input under
``SMALL`` bytes when hashlib is not loaded yet, and hashlib otherwise (``optkg check`` hashes ~8 MB and has hashlib
loaded anyway); ``hmac_sha256_hex`` is HMAC (RFC 2104) over the same choice. Both give hashlib's and ``hmac``'s
exact digests (tests/test_digest.py); only the speed differs.
"""
from __future__ import annotations

import sys
from typing import Callable, Iterable

SMALL = 1 << 20  # bytes: below this, CPython's own SHA-256 costs less than loading OpenSSL
_BLOCK = 64  # SHA-256 block size (HMAC pads the key to it)
_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))


def _builtin() -> Callable | None:
    for name in ("_sha256", "_sha2"):  # CPython 3.11, 3.12+
        try:
            return __import__(name).sha256
        except (ImportError, AttributeError):
            continue
    return None


def _constructor(size: int) -> Callable:
    if size < SMALL and "hashlib" not in sys.modules:
        own = _builtin()
        if own is not None:
            return own
    import hashlib
    return hashlib.sha256


def sha256_hex(parts: Iterable[bytes]) -> str:
    """The SHA-256 hex digest of the concatenation of ``parts``."""
    parts = list(parts)
    h = _constructor(sum(len(p) for p in parts))()
    for p in parts:
        h.update(p)
    return h.hexdigest()


def hmac_sha256_hex(key: bytes, message: bytes | list[bytes]) -> str:
    """``hmac.new(key, message, hashlib.sha256).hexdigest()``; ``message`` may be given as a list of parts (their
    concatenation, hashed part by part: a cache entry's payload is not copied into one message)."""
    parts = message if isinstance(message, list) else [message]
    new = _constructor(sum(len(p) for p in parts) + len(key))
    if len(key) > _BLOCK:
        key = new(key).digest()
    key = key.ljust(_BLOCK, b"\0")
    inner = new(key.translate(_IPAD))
    for p in parts:
        inner.update(p)
    outer = new(key.translate(_OPAD))
    outer.update(inner.digest())
    return outer.hexdigest()


def compare_digest(a: str, b: str) -> bool:
    """``hmac.compare_digest``: equality in time independent of where the strings differ."""
    try:
        from _operator import _compare_digest  # what hmac.compare_digest falls back to, without importing hmac
    except ImportError:
        from hmac import compare_digest as _compare_digest
    return _compare_digest(a, b)
