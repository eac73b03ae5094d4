"""The optkg version (kept equal to pyproject.toml's ``version``; tests/test_packaging.py builds the wheel)."""

__version__ = "0.1.0"
