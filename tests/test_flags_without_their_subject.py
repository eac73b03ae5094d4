"""A flag that does not apply to what the command reads is refused (exit 2, one line), never silently ignored:
a serving check with the training framework's --framework-version, explain without a stack but with a stack's
--engine-version / --gpu (hostile run, the two misreads make fuzz found open)."""
from conftest import run_cli

DEMO = "examples/qwen3-235b-tp8.yaml"


def test_framework_version_on_a_serving_stack_is_refused():
    code, out, err = run_cli("check", DEMO, "--framework-version", "0.16.1")
    assert (code, out) == (2, "")
    assert err == ("optkg: error: --framework-version is the training framework's release (--train or a training "
                   "stack); for a serving engine give --engine-version\n")


def test_explain_refuses_stack_options_without_a_stack_and_reads_them_with_one():
    code, out, err = run_cli("explain", "tensor-parallelism", "pipeline-parallelism", "--engine-version", "0.34.0")
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert err.startswith("optkg: error: --engine-version describes a stack: give it with --stack FILE")
    code, _, err = run_cli("explain", "tensor-parallelism", "--gpu", "H100", "--count", "8")
    assert code == 2 and err.startswith("optkg: error: --gpu, --count describe a stack")
    code, out, err = run_cli("explain", "tensor-parallelism", "--vllm", "vllm serve Qwen/Qwen3-235B-A22B -tp 8",
                             "--engine-version", "0.33.0")
    assert code == 0 and err == "" and out
