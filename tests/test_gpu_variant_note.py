"""A bare GPU family name that the catalog has in several memory sizes says which one it read.

``A100`` is an alias of A100-80GB (catalog/hardware/A100-80GB.yaml); the A100-40GB has half its memory, so every
KV and fit figure of a 40 GB user would be twice too large without a word. H100 SXM and PCIe have the same 80 GiB:
only their speed differs, and ``H100`` (the SXM card) gets no note.
"""
from __future__ import annotations

from kg.cli import main
from kg.knowledge.catalog import load_catalog
from kg.knowledge.gpus import variant_note


def test_a100_names_the_card_it_read_and_the_other_size(capsys):
    rc = main(["kv", "--model", "Qwen/Qwen3-8B", "--gpu", "A100"])
    err = capsys.readouterr().err
    assert rc == 0 and "optkg: note: GPU 'A100' read as A100-80GB (80 GiB); other variants: A100-40GB (pass the id)" in err


def test_ids_and_same_memory_variants_get_no_note():
    hw = load_catalog()[0].hardware
    assert variant_note(hw, "A100-80GB", hw["A100-80GB"]) is None
    assert variant_note(hw, "A100-SXM4-40GB", hw["A100-40GB"]) is None
    assert variant_note(hw, "H100", hw["H100-SXM"]) is None
