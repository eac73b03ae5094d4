"""Where the catalog and rules live: a checkout, or the copy bundled into the wheel.

Order: ``$OPTKG_HOME`` (a folder holding catalog/ and rules/), then the checkout the package sits
in, then ``kg/_data`` (the wheel build copies catalog/ and rules/ there).
"""
from __future__ import annotations

import os
from pathlib import Path

_PKG = Path(__file__).resolve().parent.parent  # kg/ (this file is kg/core/paths.py)


def data_root() -> Path:
    env = os.environ.get("OPTKG_HOME")
    if env:
        return Path(env)
    checkout = _PKG.parent
    if (checkout / "catalog" / "axes.yaml").is_file() and (checkout / "rules").is_dir():
        return checkout
    return _PKG / "_data"


def catalog_dir() -> Path:
    return data_root() / "catalog"


def rules_dir() -> Path:
    return data_root() / "rules"
