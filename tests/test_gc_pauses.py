"""Bulk builds without the cyclic collector's rescans (kg.core.parallel.paused_gc) and without reference cycles
that keep a catalog document alive until the collector's next full pass (the 10,000-technique pipeline of
``make bench`` spent ~3 s of CPU in the collector, now ~0.7 s)."""
from __future__ import annotations

import gc

from kg.core.parallel import paused_gc
from kg.core.yamlio import parse_yaml
from kg.knowledge.filechecks import _placeholders


class Marker:
    pass


def test_what_a_paused_block_made_is_in_the_oldest_generation_after_it():
    gc.collect()
    with paused_gc():
        assert not gc.isenabled()
        made = [Marker() for _ in range(10)]
    assert gc.isenabled()
    assert gc.get_count()[0] == 0  # no young collection has the block's objects to walk
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(m) in oldest for m in made)


def test_a_paused_block_inside_a_disabled_collector_leaves_it_disabled():
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_placeholder_walk_leaves_no_reference_cycle():
    doc = parse_yaml("id: x\nname: TODO display name\ncoordinates:\n  stages: [TODO]\n", "x.yaml")
    assert doc.lines  # the document's full line map, built once (composing the text makes cycles of its own)
    gc.collect()
    gc.disable()
    try:
        found = _placeholders(doc)
        assert [(p.line, p.path) for p in found] == [(2, "name"), (4, "coordinates.stages[0]")]
        del found
        assert gc.collect() == 0
    finally:
        gc.enable()
