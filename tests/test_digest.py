"""kg.core.digest gives hashlib's SHA-256 and hmac's HMAC-SHA256 exactly, on CPython's own SHA-256 (small inputs,
hashlib not loaded) and on hashlib's."""
from __future__ import annotations

import hashlib
import hmac
import random

import pytest

from kg.core import digest

MESSAGES = [b"", b"a", b"optkg" * 13, bytes(range(256)) * 5, random.Random(7).randbytes(70_001)]
KEYS = [b"", b"k", bytes(32), random.Random(8).randbytes(64), random.Random(9).randbytes(65), b"x" * 300]


@pytest.fixture(params=["cpython", "hashlib"])
def path(request, monkeypatch):
    if request.param == "cpython":
        if digest._builtin() is None:
            pytest.skip("this interpreter has no built-in SHA-256 module")
        monkeypatch.setattr(digest, "_constructor", lambda size: digest._builtin())
    else:
        monkeypatch.setattr(digest, "_constructor", lambda size: hashlib.sha256)
    return request.param


def test_sha256_and_hmac_match_hashlib_and_hmac(path):
    for m in MESSAGES:
        assert digest.sha256_hex([m[:3], m[3:]]) == hashlib.sha256(m).hexdigest()
        for k in KEYS:
            assert digest.hmac_sha256_hex(k, m) == hmac.new(k, m, hashlib.sha256).hexdigest(), (len(k), len(m))


def test_the_choice_follows_size_and_whether_hashlib_is_loaded(monkeypatch):
    monkeypatch.delitem(__import__("sys").modules, "hashlib")
    small, big = digest._constructor(100), digest._constructor(digest.SMALL)
    assert small is digest._builtin() and big is hashlib.sha256  # the import put hashlib back
    assert digest._constructor(100) is hashlib.sha256  # loaded now: OpenSSL for everything


def test_compare_digest():
    assert digest.compare_digest("ab", "ab") and not digest.compare_digest("ab", "ac")


def test_hmac_over_parts_is_hmac_over_their_concatenation_and_a_mac_reads_its_message_in_parts(path):
    from kg.core import provenance
    for m in MESSAGES:
        for k in KEYS[:3]:
            want = hmac.new(k, m, hashlib.sha256).hexdigest()
            assert digest.hmac_sha256_hex(k, [m[:5], b"", m[5:]]) == want
    parts = ("rules", "a3f0", b"\0payload\xff" * 1000, "é")
    message = b"cache\x005:rules\x004:a3f0\x009000:" + b"\0payload\xff" * 1000 + b"\x002:\xc3\xa9"  # the bytes MACed
    assert provenance._message("cache", parts) == message == b"".join(provenance._message_parts("cache", parts))
