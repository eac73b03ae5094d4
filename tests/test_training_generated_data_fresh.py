"""The training data files generated from released sources match a regeneration from those sources: DeepSpeed
0.19.8's config keys (tools/deepspeed_config_keys.py, from its sdist) and Megatron-LM core_v0.16.1's parser options
(tools/megatron_parser_options.py, from the megatron-core wheel and the Megatron-LM tree). A hand edit, or a change
to a generator that was not re-run, fails here. The sources sit under /work/wheels and /work/dl on the machines that
hold them; elsewhere the test is skipped with that reason."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WHEELS, DL = Path("/work/wheels"), Path("/work/dl")


def test_deepspeed_config_keys_file_is_what_its_generator_writes_from_the_sdist():
    sdist = WHEELS / "deepspeed-0.19.8.tar.gz"
    if not sdist.is_file():
        pytest.skip(f"{sdist} (the DeepSpeed 0.19.8 sdist) is not on this machine")
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import deepspeed_config_keys as gen
    finally:
        sys.path.remove(str(ROOT / "tools"))
    release, text, names = gen.render(str(sdist))
    assert release == "0.19.8" and names == 567
    assert gen.target(release).read_text() == text, "stale: run tools/deepspeed_config_keys.py --sdist " + str(sdist)


def test_megatron_parser_options_file_is_what_megatrons_own_parser_defines():
    wheels, lm = sorted(WHEELS.glob("megatron_core-0.16.1-*.whl")), DL / "megatron-lm-core_v0.16.1"
    if not wheels or not (lm / "megatron" / "training" / "arguments.py").is_file():
        pytest.skip("the megatron-core 0.16.1 wheel or the Megatron-LM core_v0.16.1 tree is not on this machine")
    # its own process: the generator stands in inert modules for torch and transformer-engine
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "megatron_parser_options.py"), "--core-wheel",
                        str(wheels[0]), "--megatron-lm-dir", str(lm), "--check"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "parser-options-core_v0.16.1.txt: fresh"


def test_torchtitan_toml_fields_file_is_what_jobconfig_defines():
    if not all(sorted(WHEELS.glob(f"torchtitan-{v}-*.whl")) for v in ("0.2.0", "0.2.1", "0.2.2")):
        pytest.skip("the torchtitan 0.2.0 / 0.2.1 / 0.2.2 wheels are not on this machine")
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import torchtitan_toml_fields as gen
    finally:
        sys.path.remove(str(ROOT / "tools"))
    assert gen.TARGET.read_text() == gen.render(WHEELS), "stale: run tools/torchtitan_toml_fields.py"


def test_accelerate_config_keys_file_is_what_config_args_defines():
    wheel = WHEELS / "accelerate-1.15.0-py3-none-any.whl"
    if not wheel.is_file():
        pytest.skip(f"{wheel} is not on this machine")
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import accelerate_config_keys as gen
    finally:
        sys.path.remove(str(ROOT / "tools"))
    release, text = gen.render(wheel)
    assert gen.target(release).read_text() == text, "stale: run tools/accelerate_config_keys.py"
