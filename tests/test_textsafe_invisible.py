"""Invisible characters in user values are shown escaped at every text sink (kg.core.textsafe)."""


def test_invisible_characters_are_shown_escaped_at_the_terminal(cli):
    # tester finding 8: `--gpu 'H100\u200b'` printed "unknown GPU 'H100'", indistinguishable from a known GPU
    from kg.core.textsafe import one_line, terminal
    assert terminal("H100\u200b") == "H100\\u200b" and one_line("a\ufeffb\u00adc") == "a\\ufeffb\\u00adc"
    code, out, err = cli("check", "--vllm", "vllm serve Qwen/Qwen3-32B", "--gpu", "H100\u200b")
    assert "unknown GPU 'H100\\u200b'" in out + err and "\u200b" not in out + err
