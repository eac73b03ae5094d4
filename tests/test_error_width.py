"""A one-message error or note fits 100 columns at a terminal: a longer one continues on lines indented four spaces
(kg.core.textsafe.say); piped or redirected stderr keeps the one line. Before, `optkg kv --gpu H1OO` printed one
149-column line at a terminal, an unknown model 450."""
from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout

GPU_ERROR = ("optkg: error: unknown GPU 'H1OO'; did you mean H100-SXM? (a GPU not in catalog/hardware/: give "
             "--gpu-memory-gib N (and --gpu-compute-capability X.Y))")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _stderr(stream: io.StringIO, *argv: str) -> tuple[int, str]:
    from kg.cli import main
    with redirect_stdout(io.StringIO()), redirect_stderr(stream):
        code = main(list(argv))
    return code, stream.getvalue()


def test_unknown_gpu_error_is_wrapped_to_100_columns_at_a_terminal():
    code, err = _stderr(_Terminal(), "kv", "--model", "Qwen/Qwen3-32B", "--tp", "2", "--gpu", "H1OO")
    assert code == 2
    assert err == ("optkg: error: unknown GPU 'H1OO'; did you mean H100-SXM? (a GPU not in catalog/hardware/: give\n"
                   "    --gpu-memory-gib N (and --gpu-compute-capability X.Y))\n")


def test_unknown_gpu_error_stays_one_line_in_a_pipe():
    code, err = _stderr(io.StringIO(), "kv", "--model", "Qwen/Qwen3-32B", "--tp", "2", "--gpu", "H1OO")
    assert (code, err) == (2, GPU_ERROR + "\n")


def test_newer_release_note_of_kv_fits_100_columns_at_a_terminal():
    code, err = _stderr(_Terminal(), "kv", "--model", "Qwen/Qwen3-32B", "--tp", "2", "--engine-version", "0.40.0")
    assert code == 0
    assert err == ("optkg: note: vllm 0.40.0 is newer than the latest release optkg knows (0.34.0): checked with the\n"
                   "    knowledge of 0.34.0\n")


def test_a_path_longer_than_a_line_is_not_split():
    from kg.core.textsafe import fit_width
    path = "/data/" + "x" * 120 + "/config.json"
    text = fit_width(f"optkg: error: {path}: not found", split_words=False)
    assert text.split("\n") == ["optkg: error:", f"    {path}:", "    not found"]


def test_fit_text_report_on_stdout_says_the_newer_release_once():
    from conftest import REPO, run_cli
    trace = str(REPO / "examples" / "data" / "mooncake_fast25_conversation_trace.jsonl")
    code, out, err = run_cli("fit", trace, "--model", "Qwen/Qwen3-32B", "--tp", "2", "--gpu", "H100",
                             "--engine-version", "0.40.0")
    assert code == 0 and err == ""  # was on stderr too, so the terminal showed it twice
    assert " ".join(out.split()).count("vllm 0.40.0 is newer than the latest release optkg knows (0.34.0)") == 1
