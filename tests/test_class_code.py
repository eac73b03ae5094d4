"""kg.core.classcode: kg's dataclass methods run from code objects kept between runs, identical to the ones
CPython compiles from the method texts, and a missing or damaged file only means compiling as before."""
from __future__ import annotations

import dataclasses
import sys
import types

import pytest

from kg.core import classcode

SOURCE = '''
import dataclasses

@dataclasses.dataclass(frozen=True)
class Point:
    """a frozen point"""
    x: int
    y: int = 2
    tags: tuple = ()

@dataclasses.dataclass
class Box:
    """a mutable box"""
    items: list = dataclasses.field(default_factory=list)
'''


def _classes(module_name: str) -> types.ModuleType:
    mod = types.ModuleType(module_name)
    sys.modules[module_name] = mod  # dataclasses reads the class's module
    try:
        exec(compile(SOURCE, f"<{module_name}>", "exec", dont_inherit=True), mod.__dict__)
    finally:
        del sys.modules[module_name]
    return mod


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """The hook installed, with its file in tmp_path and nothing loaded yet."""
    path = tmp_path / "dataclass-methods.bin"
    monkeypatch.setattr(classcode, "_path", lambda: str(path))
    monkeypatch.setattr(classcode, "_code", None)
    monkeypatch.setattr(classcode, "_new", [])
    monkeypatch.setattr(dataclasses, "exec", classcode._exec, raising=False)
    monkeypatch.setattr(classcode.sys, "dont_write_bytecode", False)
    return path


def _methods(cls: type) -> dict[str, types.CodeType]:
    return {name: getattr(cls, name).__code__ for name in
            ("__init__", "__repr__", "__eq__", "__setattr__", "__delattr__", "__hash__")
            if isinstance(vars(cls).get(name), types.FunctionType)}


def test_kept_code_equals_what_cpython_compiles(kept):
    plain = _classes("plain_probe")  # not a kg module: compiled from text as CPython does
    assert classcode._new == []
    first = _classes("kg.probe_a")  # compiled by the hook, and kept
    # a frozen dataclass has six method texts, a plain one three
    assert len(classcode._new) == 9
    classcode.save()
    assert kept.is_file()
    classcode._code = None
    classcode._new.clear()
    second = _classes("kg.probe_b")  # read back from the file: nothing compiled
    assert classcode._new == []
    for name in ("Point", "Box"):
        want = _methods(getattr(plain, name))
        assert sorted(want) == sorted(_methods(getattr(first, name))) == sorted(_methods(getattr(second, name)))
        for meth, code in want.items():
            assert _methods(getattr(first, name))[meth] == code
            assert _methods(getattr(second, name))[meth] == code
    # the annotations are the classes themselves, as without the hook (no __future__ flag leaks into the texts)
    assert plain.Point.__init__.__annotations__ == {"x": int, "y": int, "tags": tuple, "return": None}
    assert second.Point.__init__.__annotations__ == plain.Point.__init__.__annotations__
    p = second.Point(1)
    assert repr(p) == "Point(x=1, y=2, tags=())"
    assert p == second.Point(1, 2, ()) and hash(p) == hash(second.Point(1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 3
    assert second.Box().items == [] and second.Box() is not second.Box()


def test_a_damaged_file_means_compiling_as_before(kept):
    kept.write_bytes(b"not a code file")
    mod = _classes("kg.probe_c")
    assert len(classcode._new) == 9
    assert repr(mod.Point(5, 6)) == "Point(x=5, y=6, tags=())"


def test_nothing_is_written_without_bytecode_writing(kept, monkeypatch):
    monkeypatch.setattr(classcode.sys, "dont_write_bytecode", True)
    _classes("kg.probe_d")
    classcode.save()
    assert not kept.exists()
