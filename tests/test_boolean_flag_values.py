"""A modelled vLLM boolean flag given a value (newuser5 #23): refused only by the releases whose parser refuses it.

Read in the wheels: vLLM 0.7.1-0.8.0 define --enable-chunked-prefill with StoreBoolean, nargs='?' (arg_utils.py:771
in 0.8.0: "True"/"False" accepted) and --enable-prefix-caching with argparse.BooleanOptionalAction (:467, nargs 0);
from 0.8.5 every bool field gets BooleanOptionalAction (0.8.5 arg_utils.py:152, 0.34.0 :385). argparse then stops
on "--x=False" ("ignored explicit argument 'False'") and on "--x False" ("unrecognized arguments: False")."""
from kg.analyses.enginechecks import refused_option_facts
from kg.engines.launch import parse_launch


def test_equals_value_on_boolean_optional_flag_is_refused_with_the_no_spelling(catalog):
    st = parse_launch("vllm serve Qwen/Qwen3-8B --enable-chunked-prefill=False", catalog, engine_version="0.34.0")
    assert [(r["flag"], r["suggestion"]) for r in st.refused] == [
        ("--enable-chunked-prefill=False", "--no-enable-chunked-prefill")]
    assert "enable_chunked_prefill" not in st.settings  # not applied: vLLM exits before reading it
    facts = refused_option_facts(st)
    assert facts["refused_argparse_error"] == 'argparse "ignored explicit argument"'
    assert facts["refused_options_text"] == ("--enable-chunked-prefill takes no value in vllm 0.34.0, so "
                                             "--enable-chunked-prefill=False is refused; did you mean "
                                             "--no-enable-chunked-prefill?")


def test_separate_value_word_is_an_unrecognized_argument(catalog):
    st = parse_launch("vllm serve Qwen/Qwen3-8B --enable-prefix-caching False", catalog, engine_version="0.9.0")
    assert [(r["flag"], r["suggestion"]) for r in st.refused] == [
        ("--enable-prefix-caching False", "--no-enable-prefix-caching")]
    assert refused_option_facts(st)["refused_argparse_error"] == 'argparse "unrecognized arguments"'


def test_true_value_suggests_the_bare_flag(catalog):
    st = parse_launch("vllm serve Qwen/Qwen3-8B --enable-prefix-caching=true", catalog, engine_version="0.10.0")
    assert [r["suggestion"] for r in st.refused] == ["--enable-prefix-caching"]


def test_store_boolean_release_takes_the_value(catalog):
    # 0.8.0: --enable-chunked-prefill is StoreBoolean (nargs='?'), so both spellings set False and start
    for cmd in ("--enable-chunked-prefill=False", "--enable-chunked-prefill False"):
        st = parse_launch(f"vllm serve Qwen/Qwen3-8B {cmd}", catalog, engine_version="0.8.0")
        assert not st.refused and st.settings["enable_chunked_prefill"] is False
    # ... while --enable-prefix-caching is already BooleanOptionalAction there
    st = parse_launch("vllm serve Qwen/Qwen3-8B --enable-prefix-caching=False", catalog, engine_version="0.8.0")
    assert [r["flag"] for r in st.refused] == ["--enable-prefix-caching=False"]


def test_unread_release_reads_the_value_with_a_note(catalog):
    st = parse_launch("vllm serve Qwen/Qwen3-8B --enable-prefix-caching False", catalog, engine_version="0.6.0")
    assert not st.refused and st.settings["enable_prefix_caching"] is False
    assert any("whether vllm 0.6.0 takes a value for --enable-prefix-caching was not read" in n for n in st.notes)


def test_bare_flag_is_unchanged(catalog):
    st = parse_launch("vllm serve Qwen/Qwen3-8B --enable-chunked-prefill --max-num-seqs 8", catalog,
                      engine_version="0.34.0")
    assert not st.refused and st.settings["enable_chunked_prefill"] is True and st.settings["max_num_seqs"] == 8
