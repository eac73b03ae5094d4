"""Stack files name their training runtime: ``framework:`` / ``framework_version:`` (catalog/frameworks/) and
training settings (catalog/settings/); the facts reach the rule namespace (issue 12, step 1)."""
import pytest

from kg.analyses.check import stack_facts
from kg.core.errors import OptkgError
from kg.engine.expr import evaluate
from kg.inputs.runtimes import frameworks, resolve_framework
from kg.inputs.stack import stack_from_mapping

MODEL = "meta-llama/Meta-Llama-3.1-8B"


def _stack(catalog, **kw):
    return stack_from_mapping({"model": MODEL, **kw}, catalog)


def test_shipped_frameworks_are_data():
    ids = set(frameworks())
    assert {"megatron", "deepspeed", "fsdp", "torchtitan", "hf-trainer"} <= ids
    assert resolve_framework("DeepSpeed", "x") == "deepspeed"
    assert resolve_framework("megatron-core", "x") == "megatron"  # alias


def test_framework_reaches_the_rule_namespace(catalog):
    st = _stack(catalog, framework="deepspeed", framework_version="0.14.4",
                techniques=["zero-2", {"pipeline-parallelism": {"pp_size": 4}}])
    assert (st.framework, st.framework_version) == ("deepspeed", "0.14.4")
    facts, ns = stack_facts(st)
    assert ns["framework"] == "deepspeed" and ns["framework_version"] == "0.14.4"
    assert facts[0] == {"kind": "stack", "engine": "unknown", "framework": "deepspeed"}
    # the zero-2 -> pipeline-parallelism coupling condition, as written in catalog/techniques/zero-2.yaml
    cond = next(c["condition"] for c in catalog.techniques["zero-2"]["couplings"] if c["target"] == "pipeline-parallelism")
    assert evaluate(cond, ns) is True
    st2 = _stack(catalog, framework={"name": "megatron", "version": "0.9.0"},
                 techniques=["zero-2", {"pipeline-parallelism": {"pp_size": 4}}])
    assert st2.framework_version == "0.9.0"
    assert evaluate(cond, stack_facts(st2)[1]) is False


def test_no_framework_leaves_the_fact_missing(catalog):
    _, ns = stack_facts(_stack(catalog, techniques=["zero-2"]))
    assert "framework" not in ns  # undecidable, not 'unknown' (which would make == 'deepspeed' silently false)


def test_training_settings_are_typed(catalog):
    st = _stack(catalog, framework="fsdp", settings={"global_batch_size": 1024, "seq_length": "4096", "precision": "bf16"})
    assert st.settings == {"global_batch_size": 1024, "seq_length": 4096, "precision": "bf16"}
    with pytest.raises(OptkgError, match=r"global_batch_size: expected a value >= 1, found 0"):
        _stack(catalog, settings={"global_batch_size": 0})
    with pytest.raises(OptkgError, match=r"zero_stage: expected a value <= 3, found 4"):
        _stack(catalog, settings={"zero_stage": 4})


@pytest.mark.parametrize("data, needle", [
    ({"framework": "deepspeeed"}, "unknown framework 'deepspeeed'; did you mean 'deepspeed'?"),
    ({"framework": {"name": "fsdp", "stage": 3}}, "unknown framework field 'stage' (fields: name, version)"),
    ({"framework_version": "1.0"}, "framework_version needs framework:"),
    ({"framework": "fsdp", "framework_version": "two"}, "framework_version: expected a version number such as 0.11.0"),
    ({"engine_version": "0.11.0"}, "engine_version needs engine:"),
])
def test_bad_framework_fields(catalog, data, needle):
    with pytest.raises(OptkgError) as e:
        _stack(catalog, **data)
    assert needle in str(e.value)


def test_a_misspelled_setting_names_each_suggestion_once(catalog):
    # gpu_memory_utilization is both a base setting and a technique parameter: one suggestion, not two
    with pytest.raises(OptkgError) as e:
        _stack(catalog, settings={"gpu_memory_utilisation": 0.9})
    assert str(e.value).endswith("unknown setting 'gpu_memory_utilisation'; did you mean gpu_memory_utilization?")


def test_an_engines_own_name_for_a_setting_names_the_setting(catalog):
    # SGLang's --mem-fraction-static sets gpu_memory_utilization (catalog/engines/sglang.yaml): a stack file that
    # writes SGLang's name is told which key optkg reads
    with pytest.raises(OptkgError) as e:
        _stack(catalog, engine="sglang", settings={"mem_fraction_static": 0.8})
    assert str(e.value).endswith("unknown setting 'mem_fraction_static'; did you mean gpu_memory_utilization? "
                                 "(gpu_memory_utilization is what sglang's --mem-fraction-static sets)")


def test_engine_version_beside_engine(catalog):
    st = _stack(catalog, engine="vllm", engine_version="0.10.2")
    assert (st.engine, st.engine_version) == ("vllm", "0.10.2")
