"""Every startup check site of a released engine (tools/engine_check_sites.py): stable ids, the guards a site is
reached under (its own if-blocks, earlier `if T: return`, the call chain from a startup root), the translation of a
mechanical condition into a generated check row, and the committed per-release sites files (counts, rule ids,
expressions that compile). The scan itself runs from `make onboard`, not here: these tests read synthetic source
and the committed data only."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

from engine_check_classify import Translator, Untranslatable, translate  # noqa: E402
from engine_check_sites import resolve_contexts, sites_in  # noqa: E402

from kg.analyses.enginechecks import all_sites, generated_refusals, site_counts  # noqa: E402

SRC = '''
class ParallelConfig:
    tensor_parallel_size: int = 1
    enable_eplb: bool = False

    def __post_init__(self):
        if self.enable_eplb is False:
            return
        if self.tensor_parallel_size % 2 != 0:
            raise ValueError("EPLB needs an even TP size")
        self._verify_more()

    def _verify_more(self):
        for x in self.things:
            if x:
                raise ValueError("a thing")
        assert self.tensor_parallel_size <= 8, "too large"
'''


def _sites():
    walkers: list = []
    sites = sites_in("vllm/config/parallel.py", SRC, walkers)
    resolve_contexts(sites, walkers)
    return sites


def test_site_ids_name_path_function_and_a_hash_of_the_condition_and_survive_line_moves():
    ids = [s.id for s in _sites()]
    assert ids[0].startswith("vllm/config/parallel.py::ParallelConfig.__post_init__::")
    moved = sites_in("vllm/config/parallel.py", "\n\n\n" + SRC)
    assert [s.id for s in moved] == ids
    assert [s.line for s in moved] == [s.line + 3 for s in _sites()]


def test_an_earlier_if_return_is_a_negated_guard_and_the_caller_chain_is_followed():
    raise_site, loop_site, assert_site = _sites()
    assert raise_site.condition == "not (self.enable_eplb is False) and self.tensor_parallel_size % 2 != 0"
    assert raise_site.context == [] and raise_site.straight
    assert not loop_site.straight  # inside a for loop: no row
    assert assert_site.context is not None and len(assert_site.context) == 1  # reached under not (enable_eplb is False)


def test_translation_maps_fields_through_the_flag_table_and_refuses_none_comparisons():
    site = _sites()[2]
    tr = Translator({"tensor_parallel_size": "tp_size", "enable_eplb": "enable_eplb"}, {}, set(),
                    {"tensor_parallel_size": 1}, site.function)
    with pytest.raises(Untranslatable, match="identity test"):
        translate(site, tr)  # the call chain compares enable_eplb with False via `is`
    raise_site = _sites()[0]
    raise_site.guards = raise_site.guards[1:]  # only the modulo test
    tr = Translator({"tensor_parallel_size": "tp_size"}, {}, set(), {"tensor_parallel_size": 1}, raise_site.function)
    assert translate(raise_site, tr) == "tp_size % 2 != 0"  # ast.unparse of ((tp_size % 2) != 0)
    assert tr.reads == {"tp_size": 1}


LMDEPLOY_SRC = '''
import enum

class QuantPolicy(enum.IntEnum):
    NONE = 0
    FP8 = 16

class TurbomindEngineConfig:
    quant_policy: int = 0
    def __post_init__(self):
        self.quant_policy = QuantPolicy(self.quant_policy)
        assert self.quant_policy not in (QuantPolicy.FP8,), 'no fp8 on TurboMind'

class SpeculativeConfig:
    method: str
    dflash_block_size: int | None = None
    def __post_init__(self):
        if self.dflash_block_size is not None and self.dflash_block_size < 2:
            raise ValueError('too small')
'''


def test_lmdeploy_enum_members_translate_through_the_flag_value_map_and_cli_none_is_a_row_value():
    """QuantPolicy.FP8 becomes kv_cache_dtype 'fp8' (the --quant-policy value_map), the enum conversion of the
    field is not the engine changing it, the config belongs to TurboMind, and an option's None default
    (``is not None``) is '__none__' with SpeculativeConfig present only under --speculative-algorithm."""
    from engine_check_classify import classify_all
    walkers: list = []
    sites = sites_in("lmdeploy/messages.py", LMDEPLOY_SRC, walkers)
    resolve_contexts(sites, walkers)
    gen = {"class_fields": {"TurbomindEngineConfig": {"quant_policy": "kv_cache_dtype"},
                            "SpeculativeConfig": {"method": "lmdeploy_speculative_algorithm",
                                                  "dflash_block_size": "lmdeploy_speculative_dflash_block_size"}},
           "class_defaults": {"TurbomindEngineConfig": {"quant_policy": 0},
                              "SpeculativeConfig": {"method": "__none__", "dflash_block_size": "__none__"}}}
    rows = classify_all("lmdeploy", "0.18.0", sites, {"lmdeploy/messages.py": LMDEPLOY_SRC.splitlines()}, gen)
    fp8, spec = rows
    assert fp8["class"] == "table"
    assert fp8["expr"] == ("(lmdeploy_backend != 'pytorch' and turbomind_supports_arch) and "
                           "(not kv_cache_dtype not in ('fp8',))")
    assert fp8["defaults"] == {"kv_cache_dtype": "auto", "lmdeploy_backend": "turbomind"}
    assert spec["expr"] == ("lmdeploy_speculative_algorithm != '__none__' and "
                            "(lmdeploy_speculative_dflash_block_size != '__none__' and "
                            "lmdeploy_speculative_dflash_block_size < 2)")
    assert gen["used_facts"] >= {"kv_cache_dtype", "lmdeploy_speculative_dflash_block_size"}


def test_committed_sites_files_count_what_they_list_and_their_rows_compile():
    from kg.engine.expr import compile_expr
    from kg.analyses.enginechecks import row_functions
    files = {(d["engine"], d["release"]): d for d in all_sites()}
    assert site_counts(files[("vllm", "0.34.0")])["total"] == 480
    assert site_counts(files[("sglang", "0.5.23")])["total"] == 764
    assert site_counts(files[("lmdeploy", "0.18.0")])["total"] == 60
    for d in files.values():
        c = site_counts(d)
        assert d["counts"] == {k: c[k] for k in ("rule", "table", "unknowable", "uncovered")}
        assert len({s["id"] for s in d["sites"]}) == len(d["sites"])
        fns = tuple(sorted(row_functions(d)))
        for s in d["sites"]:
            if s["class"] == "table":
                compile_expr(s["expr"], fns)
        for x in d.get("lets") or []:  # named long values the rows read (over the cost limit: rows never evaluated)
            compile_expr(x["expr"], fns)


def test_generated_rows_refuse_eplb_without_expert_parallelism_at_the_engines_line():
    got = generated_refusals("vllm", "0.34.0", {"enable_eplb": True, "tp_size": 2, "techniques": []})
    assert got["engine_check_refusal_count"] == 1
    r = got["engine_check_refusals"][0]
    assert (r["path"], r["line"]) == ("vllm/config/parallel.py", 608)
    assert r["message"] == "enable_expert_parallel must be True to use EPLB."
    assert generated_refusals("vllm", "0.34.0", {"enable_eplb": True, "enable_expert_parallel": True, "tp_size": 2,
                                                 "techniques": []})["engine_check_refusal_count"] == 0
    # at TP 1, PCP 1, DP 1 vLLM also refuses EPLB for want of parallelism (config/parallel.py:617)
    alone = generated_refusals("vllm", "0.34.0", {"enable_eplb": True, "enable_expert_parallel": True,
                                                  "techniques": []})
    assert [(r["path"], r["line"]) for r in alone["engine_check_refusals"]] == [("vllm/config/parallel.py", 617)]
    assert generated_refusals("vllm", "0.20.0", {"enable_eplb": True}) == {}  # not a scanned release


@pytest.fixture(scope="module")
def catalog():
    import kg
    return kg.load_catalog()


@pytest.mark.parametrize("cmd", [
    # vLLM recipes (github.com/vllm-project/recipes 8959cf6, tests/fixtures/launch/vllm-recipes-commands.txt):
    # data / expert parallel launches of their form; they read the rows whose data-parallel size is a named long
    # value (lets)
    "vllm serve deepseek-ai/DeepSeek-V3 --trust-remote-code --enable-expert-parallel --data-parallel-size 8",
    "vllm serve deepseek-ai/DeepSeek-V3 --enable-expert-parallel --tensor-parallel-size 8 --enable-eplb",
    "vllm serve meta-llama/Llama-3.1-8B --data-parallel-size 2 --data-parallel-size-local 2",
])
def test_documented_data_and_expert_parallel_launches_raise_no_generated_row(cmd, catalog):
    import kg
    from kg.analyses.check import stack_facts
    st = kg.stack_from_command(cmd, catalog)
    for release in ("0.33.0", "0.34.0"):
        st.engine_version = release
        got = generated_refusals("vllm", release, stack_facts(st)[1], stack=st)
        assert got["engine_check_rows_evaluated"] > 50 and got["engine_check_refusals"] == [], (release, got)
    # the same with --data-parallel-size-local above the data-parallel size refuses (parallel.py:584 at 0.34.0)
    if "--data-parallel-size-local" in cmd:
        st = kg.stack_from_command(cmd.replace("--data-parallel-size-local 2", "--data-parallel-size-local 4"),
                                   catalog)
        st.engine_version = "0.34.0"
        got = generated_refusals("vllm", "0.34.0", stack_facts(st)[1], stack=st)
        assert [(r["path"], r["line"]) for r in got["engine_check_refusals"]] == [("vllm/config/parallel.py", 584)]


def _refusals(cmd: str, release: str, catalog) -> list[dict]:
    import kg
    from kg.analyses.check import stack_facts
    st = kg.stack_from_command(cmd, catalog)
    st.engine_version = release
    return generated_refusals("vllm", release, stack_facts(st)[1], stack=st)["engine_check_refusals"]


def _refused_lines(cmd: str, release: str, catalog) -> list[tuple[str, int]]:
    return [(r["path"], r["line"]) for r in _refusals(cmd, release, catalog)]


def test_generated_rows_read_the_served_models_config_json(catalog):
    # vLLM 0.34.0 config/model.py:1602 (DCP on a GQA model needs TP above its KV heads) is cited by the hand rule
    # dcp-invalid-size, so no row is generated for it: the refusal is reported once, by the rule
    gqa = ("vllm/config/model.py", 1602)
    assert gqa not in _refused_lines("vllm serve meta-llama/Llama-3.1-8B -tp 4 --decode-context-parallel-size 2",
                                     "0.34.0", catalog)
    # model.py:1099 reads config.json's is_encoder_decoder itself (Whisper sets it)
    assert ("vllm/config/model.py", 1099) in _refused_lines(
        "vllm serve openai/whisper-large-v3 --enable-prompt-embeds", "0.34.0", catalog)
    assert ("vllm/config/model.py", 1099) not in _refused_lines(
        "vllm serve meta-llama/Llama-3.1-8B --enable-prompt-embeds", "0.34.0", catalog)


def test_a_regeneration_covering_fewer_sites_does_not_replace_the_committed_file(tmp_path):
    """A regeneration of the same release that covers less (a missing wheel, environment or tool regression once
    wrote 25 SGLang table rows over 409) is refused; the same or more coverage is written."""
    from engine_check_sites import shrinkage
    old = tmp_path / "sglang-0.5.23.yaml"
    old.write_text("counts:\n  rule: 68\n  table: 428\n  unknowable: 32\n  uncovered: 236\n")
    assert shrinkage(old, {"rule": 68, "table": 25, "uncovered": 639}) == \
        "covered sites fall from rule 68 -> 68, table 428 -> 25"
    assert shrinkage(old, {"rule": 68, "table": 428}) == ""
    assert shrinkage(tmp_path / "new-release.yaml", {"table": 1}) == ""


def test_an_engine_release_without_readable_source_is_listed_as_not_scanned_with_its_reason():
    from kg.core import paths
    from kg.output.engine_checks_doc import sites_markdown
    rule_ids = {r for d in all_sites() for s in d["sites"] for r in s.get("by") or []}
    md = "\n".join(sites_markdown(paths.catalog_dir() / "engines" / "checks" / "sites", rule_ids))
    assert "| trtllm | 1.2.1 | not scanned | | | | | [why](#trtllm-not-scanned) |" in md
    assert "### trtllm 1.2.1: not scanned" in md and "over the 500 MB" in md


def test_a_config_built_on_one_branch_is_checked_there_only_and_its_message_carries_the_values(catalog):
    # engine/arg_utils.py (0.34.0): lora_config = LoRAConfig(...) if self.enable_lora else None, so config/lora.py:117
    # (max_cpu_loras below max_loras) is raised only with --enable-lora
    cmd = "vllm serve meta-llama/Llama-3.1-8B --max-loras 4 --max-cpu-loras 2"
    assert ("vllm/config/lora.py", 117) not in _refused_lines(cmd, "0.34.0", catalog)
    got = [r for r in _refusals(cmd + " --enable-lora", "0.34.0", catalog) if r["line"] == 117]
    assert [r["message"] for r in got] == ["max_cpu_loras (2) must be >= max_loras (4)."]
    # a field the generator could not read names the value instead of showing the raw {...}
    eplb = [r["message"] for r in _refusals("vllm serve Qwen/Qwen3-30B-A3B --enable-expert-parallel --enable-eplb",
                                            "0.34.0", catalog) if r["line"] == 617]
    assert len(eplb) == 1 and "{" not in eplb[0] and "TP=1" in eplb[0], eplb


def test_the_speculative_config_exists_when_any_of_its_options_is_given(catalog):
    # config/vllm.py:1669 (0.34.0): per-request spec-decode metrics need a speculative config, which
    # create_speculative_config builds from --speculative-config or --spec-method / --spec-model / --spec-tokens
    line = ("vllm/config/vllm.py", 1669)
    cmd = "vllm serve meta-llama/Llama-3.1-8B --per-request-spec-decode-metrics summary"
    assert line in _refused_lines(cmd, "0.34.0", catalog)
    assert line not in _refused_lines(cmd + " --spec-method ngram --spec-tokens 3", "0.34.0", catalog)


def test_the_sglang_walker_overrides_checkgen_only_with_the_same_parameters():
    """A SglWalker method named like a checkgen.Walker method replaces it for checkgen's own calls: a different
    signature broke regenerations twice (bind -> 25 rows over 409; dict_keys -> a TypeError mid-walk)."""
    import ast

    def methods(path: Path, cls: str) -> dict[str, list[str]]:
        tree = ast.parse(path.read_text())
        body = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls).body
        return {f.name: [a.arg for a in f.args.args] for f in body if isinstance(f, ast.FunctionDef)}
    base = methods(REPO / "tools" / "checkgen.py", "Walker")
    own = methods(REPO / "tools" / "sglang_generated_checks.py", "SglWalker")
    assert {k for k in set(base) & set(own) if base[k] != own[k]} == {"__init__"}


def test_the_model_registry_facts_are_the_served_architectures_in_its_release(catalog):
    """catalog/engines/models/vllm.yaml (tools/vllm_model_registry.py, read from each wheel's registry.py): the
    _ModelInfo facts of config.json's first architecture, given only where vLLM's lookup is the plain one."""
    import kg
    from kg.engines.vllm.registry import registry_facts
    facts = {}
    for cmd in ("vllm serve Qwen/Qwen3-VL-8B-Instruct", "vllm serve meta-llama/Llama-3.1-8B",
                "vllm serve meta-llama/Llama-3.1-8B --model-impl transformers"):
        st = kg.stack_from_command(cmd, catalog)
        st.engine_version = "0.34.0"
        facts[cmd] = registry_facts(st, st.values())
    vl, llama, tf = facts.values()
    assert (vl["vllm_model__supports_multimodal"], vl["vllm_model__supports_lora"]) == (True, True)
    assert (llama["vllm_model__supports_multimodal"], llama["vllm_model__is_hybrid"]) == (False, False)
    assert not any(k.startswith("vllm_model__supports") for k in tf)  # the Transformers backend's class instead
    assert llama["vllm_model__speculators_checkpoint"] is False and llama["vllm_model_cloud_storage"] is False
    # a release between two read ones: registered in both neighbours; one newer than every read: the newest read
    st = kg.stack_from_command("vllm serve Qwen/Qwen3-32B", catalog)
    for release, refused in (("0.28.0", False), ("0.35.0", False), ("0.4.0", True)):
        st.engine_version = release
        assert registry_facts(st, st.values())["vllm_architecture_refused"] is refused, release


def test_rows_read_the_registry_facts_of_the_served_architecture(catalog):
    # engine/arg_utils.py:2723 (0.34.0): default multimodal LoRAs on a model without a multimodal config
    mm_loras = " --enable-lora --default-mm-loras '{\"image\": \"/loras/img\"}'"
    assert ("vllm/engine/arg_utils.py", 2723) in _refused_lines("vllm serve meta-llama/Llama-3.1-8B" + mm_loras,
                                                                "0.34.0", catalog)
    assert ("vllm/engine/arg_utils.py", 2723) not in _refused_lines("vllm serve Qwen/Qwen3-VL-8B-Instruct" + mm_loras,
                                                                    "0.34.0", catalog)
    # config/vllm.py:3619: --use-replayssm needs a model class with SupportsReplaySSM (Nemotron-H has it)
    assert ("vllm/config/vllm.py", 3619) in _refused_lines("vllm serve meta-llama/Llama-3.1-8B --use-replayssm",
                                                           "0.34.0", catalog)
    assert ("vllm/config/vllm.py", 3619) not in _refused_lines(
        "vllm serve nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 --use-replayssm", "0.34.0", catalog)


def test_the_speculative_config_keeps_what_the_speculator_classes_do_not_assign(catalog):
    # config/speculative.py:1648 (0.34.0) _verify_args refuses tensor_parallel_size in --speculative-config; the
    # speculator classes' configure() (v1/worker/gpu/spec_decode/**/config.py) never assigns it
    spec = "vllm serve meta-llama/Llama-3.1-8B --speculative-config '{\"method\": \"ngram\", " \
           "\"num_speculative_tokens\": 3%s}'"
    line = ("vllm/config/speculative.py", 1648)
    assert line in _refused_lines(spec % ', "tensor_parallel_size": 2', "0.34.0", catalog)
    assert line not in _refused_lines(spec % "", "0.34.0", catalog)
    from vllm_speculators import speculator_effects
    assert speculator_effects({}) is None  # a release without the speculator modules: everything is forgotten


def test_an_sglang_row_over_the_cost_limit_is_cut_into_lets_that_keep_its_meaning():
    """A value or row over kg/engine/expr.py's limits (400 nodes) was dropped as __unknown__ (kv_cache_dtype after
    overrides.py:491 _dsa_kv_cache_dtype_default): SglWalker.fit names its largest parts as lets, evaluated where
    the row first reads them, so it means what it did."""
    from kg.analyses.enginechecks import _LetFacts
    from kg.engine.expr import compile_expr, evaluate
    from kg.engines.sglang.checkns import FUNCTIONS
    from sglang_generated_checks import SglWalker
    w = SglWalker.__new__(SglWalker)
    w.sg_lets, w.let_names, w.unk_lets, w.fitted = [], {}, set(), {}
    archs = " or ".join(f"(arch in {tuple(f'Arch{i}x{j}ForCausalLM' for j in range(30))!r})" for i in range(10))
    text = f"(kv == 'auto') and ({archs}) and (('fp8_e4m3' if major >= 10 else 'bfloat16') != kv)"
    fitted = w.fit(text)
    compile_expr(fitted, tuple(FUNCTIONS))
    assert fitted != text and w.sg_lets
    for facts in ({"kv": "auto", "arch": "Arch7x3ForCausalLM", "major": 10},
                  {"kv": "auto", "arch": "Arch9x29ForCausalLM", "major": 9},
                  {"kv": "fp8_e4m3", "arch": "Other"},  # the let is never read: arch short-circuits first
                  {"kv": "auto", "arch": "Other"}):
        ns = _LetFacts(facts, dict(w.sg_lets), FUNCTIONS)
        assert evaluate(fitted, ns, FUNCTIONS) == eval(text, {}, dict(facts))


def test_a_row_that_reads_an_unmodelled_value_on_every_way_to_a_refusal_never_fires():
    """Such a row refuses nothing on any stack, so its site is not counted as covered (27 rows on main d26b28c)."""
    from checkgen import Firing
    f = Firing({"_s1": "(__unknown__ if c else d)", "_s2": "(__unknown__ if c else __unknown__)",
                "_s3": "_s2 + 1"})
    assert not f.fires("a and (__unknown__ == 'fp8_e4m3')")
    assert not f.fires("(__unknown__ == 'fp8_e4m3') or (b > 0)")
    assert not f.fires("a and (_s3 > 2)")
    assert not f.fires("a and (x < __unknown__ < y)")
    assert f.fires("(b > 0) or (__unknown__ == 'fp8_e4m3')")
    assert f.fires("a and (_s1 == 'mxfp8')")
    assert f.fires("(__unknown__ if a else b) == 1")


MINI_SERVER_ARGS = '''class ServerArgs:
    ONLY = ("A", "B")

    def resolve_once(self):
        check(self)
        check_or(self)


def check(server_args):
    backends = set((server_args.attention_backend, server_args.decode_attention_backend))
    backends.discard(None)
    allowed = {"fa3", "triton"}
    if server_args.tp_size > 1:
        allowed = allowed - {"triton"}
    assert backends <= allowed, "backends"
    extra = {"a"}
    if server_args.tp_size > 2:
        extra.update({"b"})
    assert server_args.attention_backend in extra | {None}, "extra"
    if set((server_args.attention_backend, server_args.attention_backend)) != {"intel_xpu"}:
        raise ValueError("xpu")
    if not any(a in server_args.ONLY for a in server_args.archs):
        raise ValueError("archs")


def check_or(server_args, cfg=None):
    cfg = cfg or server_args
    if cfg.tp_size > 8:
        raise ValueError("or")
    prefill, decode = (server_args.attention_backend or server_args.decode_attention_backend, None)
    if prefill == "dsa":
        raise ValueError("unpacked")
'''


def test_the_sglang_walk_models_sets_optional_views_and_membership_over_a_list():
    """sglang kv_cache_hook.py:517-519 (set(attention_backends_of(..)); discard(None); backends <= allowed),
    :845-848 (decode_allowed.update(..) in a branch; x in allowed | {None}), attention_hook.py:55 (set(..) !=
    {"intel_xpu"}), kv_shard_hook.py:31 (cfg = cfg or resolving_view(..)), model_hook.py:1103 (any(a in C for a
    in architectures)): rows with Python's set semantics, never a lexicographic tuple comparison."""
    import ast
    import io
    import zipfile

    from kg.analyses.enginechecks import _LetFacts
    from kg.engine.expr import evaluate
    from kg.engines.sglang.checkns import FUNCTIONS
    from sglang_generated_checks import Modules, SglWalker, rows
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("sglang/srt/server_args.py", MINI_SERVER_ARGS)
    mods = Modules(zipfile.ZipFile(buf))
    w = SglWalker(mods, {"fields": {"attention_backend": {}, "decode_attention_backend": {}, "tp_size": {},
                                    "archs": {}}, "env": {}})
    sa = "sglang/srt/server_args.py"
    fn = next(f for f in mods.get(sa).classes["ServerArgs"].body if getattr(f, "name", "") == "resolve_once")
    w.invoke(fn, sa, w.record, [], {}, [], "ServerArgs")
    got = {line: r["expr"] for (_, line), r in rows(w).items()}
    assert sorted(got) == [15, 19, 21, 23, 29, 32]

    def fires(line: int, **facts) -> bool:
        ns = {"attention_backend": "fa3", "decode_attention_backend": "__none__", "tp_size": 1, "archs": ["A"]}
        ns.update(facts)
        return evaluate(got[line], _LetFacts(ns, dict(w.sg_lets), FUNCTIONS), FUNCTIONS)
    assert not fires(15) and fires(15, decode_attention_backend="flashinfer")
    assert not fires(15, decode_attention_backend="triton") and fires(15, decode_attention_backend="triton", tp_size=2)
    assert fires(19) and not fires(19, attention_backend="a") and not fires(19, attention_backend="__none__")
    assert fires(19, attention_backend="b") and not fires(19, attention_backend="b", tp_size=3)
    assert fires(21) and not fires(21, attention_backend="intel_xpu")
    assert not fires(23) and fires(23, archs=["C", "D"])
    assert fires(29, tp_size=9) and not fires(29)
    # a tuple element keeps its parentheses: (a if truthy(a) else b) == 'dsa', not a if truthy(a) else (b == 'dsa')
    assert fires(32, attention_backend="dsa") and not fires(32) and not fires(32, decode_attention_backend="dsa")


def test_hisparse_checks_run_only_where_its_config_exists(catalog):
    # config/vllm.py:1805-1816 (0.34.0): HiSparse exists when --attention-config gives hisparse_config or the KV
    # connector is HiSparseConnector (KVTransferConfig.has_connector); only then is PP > 1 refused
    line = ("vllm/config/vllm.py", 1816)
    base = "vllm serve meta-llama/Llama-3.1-8B -pp 2"
    assert line not in _refused_lines(base, "0.34.0", catalog)
    assert line in _refused_lines(base + " --kv-transfer-config '{\"kv_connector\": \"HiSparseConnector\", "
                                  "\"kv_role\": \"kv_both\"}'", "0.34.0", catalog)
    assert line not in _refused_lines(base + " --kv-transfer-config '{\"kv_connector\": \"NixlConnector\", "
                                      "\"kv_role\": \"kv_both\"}'", "0.34.0", catalog)


def test_an_enum_looked_up_by_name_and_a_hook_field_of_another_sub_config_keep_the_backend(catalog):
    # engine/arg_utils.py:2809-2810 (0.34.0) sets mamba_config.backend = MambaBackendEnum[--mamba-backend.upper()];
    # the per-architecture hooks assign `backend` on attention_config only, so config/vllm.py:3627 reads it
    nemotron = "vllm serve nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 --use-replayssm --replayssm-buffer-len "
    line = ("vllm/config/vllm.py", 3627)
    assert line in _refused_lines(nemotron + "32 --mamba-backend flashinfer", "0.34.0", catalog)
    assert line not in _refused_lines(nemotron + "16 --mamba-backend flashinfer", "0.34.0", catalog)
    assert line not in _refused_lines(nemotron + "32", "0.34.0", catalog)  # triton, the default


def test_every_committed_sglang_table_row_can_refuse():
    """A row that reads __unknown__ on every way to a refusal refuses nothing: counted as covered it inflated SGLang
    0.5.23's coverage (41 such rows at d26b28c). The generator now leaves those sites not covered."""
    from checkgen import Firing
    d = next(d for d in all_sites() if (d["engine"], d["release"]) == ("sglang", "0.5.23"))
    firing = Firing({str(x["name"]): str(x["expr"]) for x in d.get("lets") or []})
    assert [s["id"] for s in d["sites"] if s["class"] == "table" and not firing.fires(s["expr"])] == []


def _refused_on(cmd: str, gpu: str, release: str, catalog) -> list[tuple[str, int]]:
    import kg
    from kg.analyses.check import stack_facts
    st = kg.stack_from_command(cmd, catalog)
    st.hardware, st.gpu_count, st.engine_version = catalog.resolve_hardware(gpu), 1, release
    got = generated_refusals("vllm", release, stack_facts(st)[1], stack=st)["engine_check_refusals"]
    return [(r["path"], r["line"]) for r in got]


def test_a_literal_alias_and_a_platform_imported_inside_a_function_are_read_as_vllm_does(catalog):
    # config/kv_transfer.py:135-136 (0.34.0; :115 at 0.33.0): kv_role not in get_args(KVRole), KVRole =
    # Literal[KVProducer, KVConsumer] of two Literal aliases ('kv_producer', 'kv_both' / 'kv_consumer', 'kv_both')
    base = "vllm serve meta-llama/Llama-3.1-8B --kv-transfer-config '{\"kv_connector\": \"NixlConnector\", "
    for release, line in (("0.34.0", 136), ("0.33.0", 115)):
        assert ("vllm/config/kv_transfer.py", line) in _refused_lines(base + "\"kv_role\": \"kv_producr\"}'",
                                                                      release, catalog)
        assert _refused_lines(base + "\"kv_role\": \"kv_both\"}'", release, catalog) == []
    # config/mamba.py:86-98 (0.34.0): `from vllm.platforms import current_platform` inside __post_init__; stochastic
    # rounding with the Triton Mamba backend needs the SM 10.x family, and any of it needs CUDA (:89)
    cmd = "vllm serve nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 --enable-mamba-cache-stochastic-rounding"
    assert ("vllm/config/mamba.py", 98) in _refused_on(cmd, "H100-SXM", "0.34.0", catalog)
    assert ("vllm/config/mamba.py", 98) not in _refused_on(cmd, "B200", "0.34.0", catalog)
    assert ("vllm/config/mamba.py", 89) in _refused_on(cmd, "MI300X", "0.34.0", catalog)
    assert ("vllm/config/mamba.py", 89) not in _refused_on(cmd, "B200", "0.34.0", catalog)


def test_a_vllm_value_over_the_expression_limit_is_cut_into_lets_not_left_unknown():
    """VllmWalker.fit: a merged value over checkgen's MAX_TEXT names its largest parts as lets (evaluated before the
    row), so the rest of the walk still reads it; the same text twice is one let."""
    import vllm_generated_checks as vg
    w = vg.VllmWalker([], vg.PLATFORMS[0], [])
    parts = [f"(tensor_parallel_size == {i} and pipeline_parallel_size > {i})" for i in range(60)]
    text = "(" + " or ".join(parts) + ")"
    assert len(text) > 2000
    got = w.bind(text)
    assert isinstance(got, vg.cg.Expr) and len(got.text) <= vg.cg.MAX_TEXT
    lets = dict(w.lets)
    from kg.engine.expr import evaluate
    from kg.frameworks.checkrows import FUNCTIONS

    def value(tp: int, pp: int) -> bool:
        facts = {"tensor_parallel_size": tp, "pipeline_parallel_size": pp}
        for name, t in w.lets:
            facts[name] = evaluate(t, facts, FUNCTIONS)
        return evaluate(got.text, facts, FUNCTIONS)
    assert value(7, 8) is True and value(7, 7) is False and value(70, 99) is False
    assert w.bind(text).text == got.text and dict(w.lets) == lets


def test_every_committed_vllm_table_row_can_refuse():
    """A row true on no stack refuses nothing (0.33.0 vllm.py:3489 read 'truthy(__unknown__ if .. else False)'):
    14 such rows of 0.33.0 and 9 of 0.34.0 were counted covered at 77bfec5. tools/row_firing.py tells them by the
    values a row's parts can take; the generator leaves their sites not covered."""
    from row_firing import ValueFiring
    for d in all_sites():
        if d["engine"] != "vllm":
            continue
        firing = ValueFiring({str(x["name"]): str(x["expr"]) for x in d.get("lets") or []})
        assert [s["id"] for s in d["sites"] if s["class"] == "table" and not firing.fires(s["expr"])] == [], \
            d["release"]


def test_a_speculator_field_filled_only_where_none_keeps_a_given_value():
    # 0.34.0 v1/worker/gpu/spec_decode: suffix/config.py:26-28, dspark/config.py:80-85 and speculator_config.py:
    # 280-282 set num_speculative_tokens only `if spec.num_speculative_tokens is None`; a field also stored
    # unguarded (model here) may change whatever the user gave
    from vllm_speculators import filled_when_none
    src = ("class C:\n    @classmethod\n    def configure(cls, spec):\n"
           "        if spec.num_speculative_tokens is None:\n            spec.num_speculative_tokens = 3\n"
           "        if spec.x and spec.method is None:\n            spec.method = 'mtp'\n"
           "        spec.model = 'draft'\n")
    files = {"vllm/v1/worker/gpu/spec_decode/c/config.py": src}
    assert filled_when_none(files, ["method", "model", "num_speculative_tokens"]) == ["method",
                                                                                     "num_speculative_tokens"]


def test_an_env_variable_with_choices_and_an_option_built_into_a_config_class_are_read(catalog):
    # config/vllm.py:1159-1188 (0.34.0): VLLM_RELOAD_MODE is env_with_choices(..., "layerwise", ...) (envs.py:2303);
    # under "direct" LoRA is refused
    cmd = "vllm serve meta-llama/Llama-3.1-8B --enable-lora"
    assert ("vllm/config/vllm.py", 1188) in _refused_lines("VLLM_RELOAD_MODE=direct " + cmd, "0.34.0", catalog)
    assert ("vllm/config/vllm.py", 1188) not in _refused_lines(cmd, "0.34.0", catalog)
    # --watermark-config is a dict option create_watermark_config builds into WatermarkConfig or None
    # (arg_utils.py:2223-2229); with speculative decoding only dual_key_gumbel (or target-only) is accepted (:1326-1334)
    spec = ("vllm serve meta-llama/Llama-3.1-8B --speculative-config '{\"method\": \"eagle3\", \"model\": "
            "\"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\", \"num_speculative_tokens\": 3}' ")
    line = ("vllm/config/vllm.py", 1334)
    assert line in _refused_lines(spec + "--watermark-config '{\"key\": 1, \"algorithm\": \"gumbel\"}'", "0.34.0", catalog)
    assert line not in _refused_lines(spec + "--watermark-config '{\"key\": 1, \"algorithm\": \"dual_key_gumbel\"}'",
                                      "0.34.0", catalog)
    assert line not in _refused_lines("vllm serve meta-llama/Llama-3.1-8B --watermark-config '{\"key\": 1}'", "0.34.0",
                                      catalog)


def test_any_and_all_over_a_list_option_are_bounds_of_its_min_and_max(catalog):
    # config/compilation.py:1198-1199 (0.34.0; :1049 at 0.33.0): any(s <= 0 for s in decoder_replay_cudagraph_capture_sizes)
    # is `is_a(L, 'list') and len(L) > 0 and min(L) <= 0`
    base = "vllm serve meta-llama/Llama-3.1-8B --compilation-config '{\"decoder_replay_cudagraph_capture_sizes\": "
    for release, line in (("0.34.0", 1199), ("0.33.0", 1049)):
        assert ("vllm/config/compilation.py", line) in _refused_lines(base + "[1, 0, 4]}'", release, catalog)
        assert ("vllm/config/compilation.py", line) not in _refused_lines(base + "[1, 2, 4]}'", release, catalog)
        assert ("vllm/config/compilation.py", line) not in _refused_lines(base + "[]}'", release, catalog)


def test_an_annotated_module_constant_is_its_value(catalog):
    # config/kernel.py:161 (0.34.0) PASSTHROUGH_ALL2ALL_BACKEND: Final = "passthrough"; bind_passthrough_all2all_backend
    # (:206-214) refuses an explicit all2all backend with a FlashInfer MoE-EP backend, which dispatches itself
    cmd = "vllm serve deepseek-ai/DeepSeek-V3 -tp 8 --enable-expert-parallel --moe-backend flashinfer_moe_ep_cutedsl"
    line = ("vllm/config/kernel.py", 211)
    assert line in _refused_lines(cmd + " --all2all-backend deepep_low_latency", "0.34.0", catalog)
    assert line not in _refused_lines(cmd, "0.34.0", catalog)


def test_torch_dtypes_and_module_dict_constants_are_read_as_vllm_does(catalog):
    # config/model.py:2428-2460 (0.34.0; :2416 at 0.33.0): --dtype half on a model type of _FLOAT16_NOT_SUPPORTED_MODELS
    # (gemma2 ...) is refused, _STR_DTYPE_TO_TORCH_DTYPE mapping 'half' to torch.float16
    for release, line in (("0.34.0", 2460), ("0.33.0", 2416)):
        assert ("vllm/config/model.py", line) in _refused_lines("vllm serve google/gemma-2-9b-it --dtype half",
                                                                release, catalog)
        assert _refused_lines("vllm serve google/gemma-2-9b-it --dtype bfloat16", release, catalog) == []
        assert _refused_lines("vllm serve meta-llama/Llama-3.1-8B --dtype half", release, catalog) == []
    got = [r["message"] for r in _refusals("vllm serve google/gemma-2-9b-it --dtype half", "0.34.0", catalog)]
    assert got[0].startswith("The model type gemma2 does not support float16."), got


OMNI = str(Path(__file__).resolve().parent / "fixtures" / "model_configs" / "qwen3-omni-30b-a3b")
OMNI_DRAFT = str(Path(__file__).resolve().parent / "fixtures" / "model_configs" / "qwen3-omni-dspark-draft")


def _omni_dspark(draft: str, tokens: int, release: str, catalog) -> tuple[list[tuple[str, int]], list[str]]:
    import kg
    from kg.analyses.check import stack_facts
    cmd = (f"vllm serve {OMNI} --speculative-config '{{\"method\": \"dspark\", \"model\": \"{draft}\", "
           f"\"num_speculative_tokens\": {tokens}}}'")
    st = kg.stack_from_command(cmd, catalog)
    st.engine_version = release
    st.hardware, st.gpu_count = catalog.resolve_hardware("H100-SXM"), 1
    got = generated_refusals("vllm", release, stack_facts(st)[1], stack=st)["engine_check_refusals"]
    return [(r["path"], r["line"]) for r in got], list(st.notes)


@pytest.mark.parametrize("change, line_0340, line_0330", [
    ({}, None, None),  # the draft as vLLM wants it: no refusal
    ({"architectures": ["Qwen3DSparkModel"]}, 222, 180),  # a generic DSpark draft, not converted
    ({"block_size": 5}, 241, 199),  # num_speculative_tokens 7 is not the trained block size
    ({"hidden_size": 4096}, 264, 222),  # not the thinker's 2048
    ({"use_aux_hidden_state": False}, 339, 297),
    ({"markov_head_type": "mlp"}, 356, 314),
    ({"dspark_bonus_anchor": True}, 364, 322),
])
def test_the_draft_models_config_json_is_read_for_the_qwen3_omni_dspark_checks(change, line_0340, line_0330,
                                                                                catalog, tmp_path):
    """config/speculative.py _validate_qwen3_omni_dspark (0.34.0 :209-431, 0.33.0 :167-389) reads the draft's own
    config.json (tools/vllm_draft_walk.py, kg.analyses.draftkeys): each field changed alone reaches its refusal."""
    import json
    cfg = json.loads(Path(OMNI_DRAFT, "config.json").read_text())
    cfg.update(change)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    for release, line in (("0.34.0", line_0340), ("0.33.0", line_0330)):
        lines, _ = _omni_dspark(str(tmp_path), 7, release, catalog)
        spec = [x for x in lines if x[0] == "vllm/config/speculative.py"]
        assert spec == ([("vllm/config/speculative.py", line)] if line else []), (release, change, lines)


def test_a_draft_config_optkg_cannot_read_leaves_its_checks_not_evaluable_and_says_so(catalog):
    lines, notes = _omni_dspark("example-org/qwen3-omni-dspark-not-cached", 7, "0.34.0", catalog)
    assert [x for x in lines if x[0] == "vllm/config/speculative.py"] == []
    note = next(n for n in notes if n.startswith("not evaluable: needs the draft model's config.json"))
    assert "17 of the engine's startup checks read it (vllm/config/speculative.py:222" in note


def test_a_kv_cache_dtype_outside_the_release_literal_is_refused_and_auto_is_not_guessed(catalog):
    # config/cache.py:73 KV_CACHE_DTYPES = list(get_args(CacheDType)) and :505-507 (0.34.0); utils/torch_utils.py:524
    # returns an explicit kv_cache_dtype as given, 'auto' is resolved from the checkpoint (left unknown). A command
    # is refused by the parser first; a stack file's technique value reaches the row
    from kg.analyses.check import fixture_stack, stack_facts

    def lines(kv: str | None) -> list[tuple[str, int]]:
        techs = [{"kv-cache-quantization": {"kv_cache_dtype": kv}}] if kv else []
        st = fixture_stack({"model": "meta-llama/Llama-3.1-8B", "engine": {"name": "vllm", "version": "0.34.0"},
                            "techniques": techs}, catalog, REPO)
        got = generated_refusals("vllm", "0.34.0", stack_facts(st)[1], stack=st)["engine_check_refusals"]
        return [(r["path"], r["line"]) for r in got]
    line = ("vllm/config/cache.py", 507)
    assert line in lines("int8")
    assert line not in lines("fp8_e4m3")
    assert line not in lines(None)


def test_the_runner_checks_read_whether_the_served_class_pools_or_generates():
    """config/model.py:722-751 (0.34.0; :705-734 at 0.33.0): registry.is_pooling_model / is_text_generation_model
    of the served architecture (models/interfaces_base.py:140-147, :226-232: the class's is_pooling_model attribute
    and a compute_logits method, read through its MRO by tools/vllm_model_registry.py)."""
    from kg.engines.vllm.registry import _arch_facts
    pooling = ("vllm_model__is_pooling_model", "vllm_model__is_text_generation_model")
    for arch, want in (("XLMRobertaModel", (True, False)), ("LlamaForCausalLM", (False, True)),
                       ("ModernBertModel", (False, False)), ("Qwen2ForRewardModel", (True, False))):
        got = dict(_arch_facts("0.34.0", arch))
        assert tuple(got[k] for k in pooling) == want, arch

    def lines(release: str, runner: str, convert: str, pool: bool, gen: bool) -> list[int]:
        facts = {"techniques": [], "runner": runner, "convert": convert, pooling[0]: pool, pooling[1]: gen}
        got = generated_refusals("vllm", release, facts)["engine_check_refusals"]
        return [r["line"] for r in got if r["path"] == "vllm/config/model.py"]
    assert lines("0.34.0", "generate", "auto", True, False) == [737]  # an embedding model under --runner generate
    assert lines("0.33.0", "draft", "auto", True, False) == [720]
    assert lines("0.34.0", "generate", "auto", False, True) == []
    assert lines("0.34.0", "pooling", "none", False, True) == [750]  # pooling a generative class without --convert
    assert lines("0.34.0", "pooling", "auto", False, True) == []  # --convert auto picks embed / classify
    assert lines("0.34.0", "generate", "none", False, False) == [745]


def test_the_speculator_config_class_attributes_are_read_by_method(catalog):
    """0.34.0: SpeculativeConfig.__post_init__ picks the speculator config class by method (v1/worker/gpu/spec_decode/
    speculator_config.py:298-311, :359-385; tools/vllm_speculators.speculator_class_attrs) and reads its class
    attributes: supported_options (speculative.py:1394-1403), adaptive_verification_uses_draft_logits (:1405-1414),
    supports_watermarking (vllm.py:1324-1329). A JSON key not given is the field's default (draft_sample_method
    'greedy': vllm.py:1314-1318 refuses watermarking with it)."""
    eagle3 = '"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3'
    ngram = '"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4'

    def lines(spec: str, extra: str = "") -> list[tuple[str, int]]:
        return _refused_lines(f"vllm serve meta-llama/Llama-3.1-8B{extra} --speculative-config '{{{spec}}}'",
                              "0.34.0", catalog)
    opt = ("vllm/config/speculative.py", 1399)
    assert lines(eagle3 + ', "dspark_draft_topk": 4') == [opt]  # eagle3 takes draft_lm_head_quantization only
    assert lines(ngram + ', "dspark_draft_topk": 4') == [opt]
    assert lines(eagle3 + ', "draft_lm_head_quantization": "fp8"') == [] and lines(eagle3) == []
    both = ', "enable_adaptive_verification": true, "use_local_argmax_reduction": true'
    assert lines(eagle3 + both) == [("vllm/config/speculative.py", 1410)]
    assert lines('"method": "suffix", "num_speculative_tokens": 3' + both) == []  # suffix: no draft logits
    wm = " --watermark-config '{\"algorithm\": \"gumbel\"}'"
    assert lines(ngram, wm) == [("vllm/config/vllm.py", 1315), ("vllm/config/vllm.py", 1325),
                                ("vllm/config/vllm.py", 1334)]
    assert lines(eagle3, wm) == [("vllm/config/vllm.py", 1315), ("vllm/config/vllm.py", 1334)]


def test_speculator_class_attributes_differing_in_a_methods_subclasses_are_not_given():
    import ast
    from vllm_speculators import VARIES, speculator_class_attrs
    base = ("_PKG = 'p'\ndef _builtin(m, n):\n    return n\nclass SpeculatorConfig:\n"
            "    supports_watermarking: ClassVar[bool] = False\n    parallel_drafting: ClassVar[bool] = False\n"
            "class A(SpeculatorConfig):\n    supports_watermarking = True\n"
            "_CONFIG_BY_METHOD: dict[str, str] = {'a': _builtin('a.config', 'A'), 'base': _builtin('x', "
            "'SpeculatorConfig')}\n")
    sub = "from ..speculator_config import A\nclass B(A):\n    parallel_drafting = True\n"
    files = {"vllm/v1/worker/gpu/spec_decode/speculator_config.py": base,
             "vllm/v1/worker/gpu/spec_decode/b/config.py": sub}
    got = speculator_class_attrs(files)
    assert got["a"]["supports_watermarking"] is True and got["a"]["parallel_drafting"] is VARIES
    # 'base' ends with any class of the tree: A and B watermark, SpeculatorConfig does not
    assert got["base"]["supports_watermarking"] is VARIES
    ast.parse(base)
    files["vllm/v1/worker/gpu/spec_decode/c/config.py"] = "class A:\n    pass\n"
    assert speculator_class_attrs(files) is None  # a class name defined twice: not read


def _refused_on_h100(cmd: str, release: str, catalog) -> list[tuple[str, int]]:
    import kg
    from kg.analyses.check import stack_facts
    st = kg.stack_from_command(cmd, catalog)
    st.engine_version = release
    st.hardware, st.gpu_count = catalog.resolve_hardware("H100-SXM"), 1
    return [(r["path"], r["line"]) for r in
            generated_refusals("vllm", release, stack_facts(st)[1], stack=st)["engine_check_refusals"]]


def test_a_check_inside_a_loop_over_a_list_option_is_a_per_element_row(catalog):
    # config/compilation.py:1164-1165 (0.34.0; :1014-1015 at 0.33.0): every custom_ops entry is 'all', 'none', '+op'
    # or '-op'; observability.py:186-204 (:192-210): every --custom-histogram-buckets family is known, its bounds
    # finite, positive and strictly increasing (a JSON option: arg_utils.py:418 parses dict[str, list[float]])
    base = "vllm serve meta-llama/Llama-3.1-8B "
    for release, ops, family, increasing in (("0.34.0", 1165, 188, 204), ("0.33.0", 1015, 194, 210)):
        ops_line = ("vllm/config/compilation.py", ops)
        assert ops_line in _refused_on_h100(base + "-cc '{\"custom_ops\": [\"+rms_norm\", \"silu\"]}'", release,
                                            catalog)
        assert ops_line not in _refused_on_h100(base + "-cc '{\"custom_ops\": [\"+rms_norm\", \"none\"]}'", release,
                                              catalog)
        buckets = base + "--custom-histogram-buckets '{\"%s\": [0.1, %s]}'"
        got = _refused_lines(buckets % ("time_to_first_token", "0.05"), release, catalog)
        assert got == [("vllm/config/observability.py", increasing)], got
        assert _refused_lines(buckets % ("ttft", "0.5"), release, catalog) == [("vllm/config/observability.py", family)]
        assert _refused_lines(buckets % ("time_to_first_token", "0.5"), release, catalog) == []


def test_device_ids_are_read_as_vllms_own_parser_reads_them(catalog):
    # engine/arg_utils.py:1209-1215 (0.34.0): --device-ids is one word split on commas, all-digit parts integers
    # (not the generic list path :248-254); duplicates are refused (:2183-2184), a mix of integers and UUIDs too
    # (:2190-2191)
    dup, mixed = ("vllm/engine/arg_utils.py", 2184), ("vllm/engine/arg_utils.py", 2191)
    base = "vllm serve meta-llama/Llama-3.1-8B --device-ids "
    assert _refused_lines(base + "0,0", "0.34.0", catalog) == [dup]
    assert _refused_lines(base + "0,GPU-3f2a", "0.34.0", catalog) == [mixed]
    assert _refused_lines(base + "GPU-3f2a,GPU-77b1", "0.34.0", catalog) == []
    assert _refused_lines(base + "1,0", "0.34.0", catalog) == []


def test_a_hand_pattern_limited_to_a_release_classifies_that_release_only():
    """catalog/engines/checks/classify/vllm.yaml ``releases:``: the draft's hf_overrides run where the draft-model
    speculator setup builds the draft's ModelConfig, which exists at 0.34.0 only
    (v1/worker/gpu/spec_decode/speculator_config.py:187-210); get_num_layers_by_block_type has no caller in either
    wheel."""
    import yaml
    by = {}
    for release in ("0.33.0", "0.34.0"):
        d = yaml.safe_load((REPO / "catalog/engines/checks/sites" / f"vllm-{release}.yaml").read_text())
        by[release] = {(s["function"], s["line"]): s for s in d["sites"]}
    hook = [s for k, s in by["0.34.0"].items() if k[0] == "SpeculativeConfig.hf_config_override"]
    assert [s["line"] for s in hook] == [838, 1132, 1209]
    assert all(s["class"] == "uncovered" and "DraftModelSpeculatorConfig.configure" in s["why"] for s in hook)
    old = [s for k, s in by["0.33.0"].items() if k[0] == "SpeculativeConfig.hf_config_override"]
    assert len(old) == 3 and not any("DraftModelSpeculatorConfig" in s.get("why", "") for s in old)
    for release, lines in (("0.34.0", [1815, 1820]), ("0.33.0", [1791, 1796])):
        got = [(k[1], s["class"], s.get("kind")) for k, s in by[release].items()
               if k[0] == "ModelConfig.get_num_layers_by_block_type"]
        assert got == [(n, "unknowable", "internal") for n in lines], release


def test_the_quantization_config_targets_and_hadamard_size_are_checked_as_vllm_does(catalog):
    # config/quantization.py:218-242 (0.34.0; :152-165 at 0.33.0, one check for a bad name or kind): the
    # --quantization-config targets are a dict of online shorthand names (_ONLINE_SHORTHANDS, :272) or spec dicts;
    # :140-143 hadamard_size is a power of two
    base = "vllm serve meta-llama/Llama-3.1-8B --quantization-config "
    for release, not_dict, unknown_name, bad_kind in (("0.34.0", 225, 234, 242), ("0.33.0", 158, 165, 165)):
        def lines(cfg: str) -> list[tuple[str, int]]:
            return [x for x in _refused_lines(base + cfg, release, catalog) if x[0] == "vllm/config/quantization.py"]
        assert lines("'{\"targets\": \"fp8_per_tensor\"}'") == [("vllm/config/quantization.py", not_dict)]
        assert lines("'{\"targets\": {\"re:.*mlp.*\": \"fp8_per_tensr\"}}'") == [
            ("vllm/config/quantization.py", unknown_name)]
        assert lines("'{\"targets\": {\"re:.*mlp.*\": 8}}'") == [("vllm/config/quantization.py", bad_kind)]
        assert lines("'{\"targets\": {\"re:.*mlp.*\": \"fp8_per_tensor\"}}'") == []
    hadamard = ("vllm/config/quantization.py", 143)
    assert hadamard in _refused_lines(base + "'{\"linear\": {\"weight\": \"mxfp4\", \"hadamard_size\": 48}}'",
                                      "0.34.0", catalog)
    assert hadamard not in _refused_lines(base + "'{\"linear\": {\"weight\": \"mxfp4\", \"hadamard_size\": 32}}'",
                                          "0.34.0", catalog)


def test_a_list_built_over_a_literal_tuple_is_unrolled_and_its_truth_read(catalog):
    # config/profiler.py:239-256 (0.34.0; :249-266 at 0.33.0): the proton options given a non-default value, listed by a
    # comprehension over a literal tuple, are refused unless the profiler is proton
    base = "vllm serve meta-llama/Llama-3.1-8B --profiler-config '{%s\"proton_data\": \"ops\"}'"
    for release, line in (("0.34.0", 256), ("0.33.0", 266)):
        assert ("vllm/config/profiler.py", line) in _refused_lines(base % "", release, catalog)
        assert ("vllm/config/profiler.py", line) not in _refused_lines(base % "\"profiler\": \"proton\", ", release,
                                                                       catalog)
        assert ("vllm/config/profiler.py", line) not in _refused_lines("vllm serve meta-llama/Llama-3.1-8B", release,
                                                                       catalog)


def test_a_string_split_in_a_loop_and_a_uri_profiler_dir_are_read_as_vllm_does(catalog):
    # config/parallel.py:549-554 (0.34.0; :511-516 at 0.33.0): each range of a --numa-bind-cpus entry ascends (what
    # follows `if "-" not in part: continue` is read only for a range); profiler.py:264-265 (:274-275): a URI
    # proton_profiler_dir (scheme://, scheme longer than one letter) is refused, known from the string alone
    for release, numa, uri in (("0.34.0", 554, 265), ("0.33.0", 516, 275)):
        cpus = "vllm serve meta-llama/Llama-3.1-8B --numa-bind-cpus "
        assert ("vllm/config/parallel.py", numa) in _refused_lines(cpus + "0-3,8 7-4", release, catalog)
        assert ("vllm/config/parallel.py", numa) not in _refused_lines(cpus + "0-3,8 4-7", release, catalog)
        prof = ("vllm serve meta-llama/Llama-3.1-8B --profiler-config "
                "'{\"profiler\": \"proton\", \"proton_profiler_dir\": \"%s\"}'")
        assert ("vllm/config/profiler.py", uri) in _refused_lines(prof % "s3://bucket/trace", release, catalog)
        assert ("vllm/config/profiler.py", uri) not in _refused_lines(prof % "/tmp/trace", release, catalog)


def test_a_before_validator_runs_on_the_json_key_the_user_gives(catalog):
    """CompilationConfig.validate_mode_before (compilation.py:1003-1021 at 0.34.0, :853-871 at 0.33.0) runs on the
    --compilation-config JSON's mode: a name outside CompilationMode.__members__ is refused, a member name in any
    case or an integer is not."""
    base = "vllm serve meta-llama/Llama-3.1-8B -cc "
    for release, line in (("0.34.0", 1015), ("0.33.0", 865)):
        assert _refused_lines(base + "'{\"mode\": \"FOO\"}'", release, catalog) == [("vllm/config/compilation.py", line)]
        assert _refused_lines(base + "'{\"mode\": \"vllm_compile\"}'", release, catalog) == []
        assert _refused_lines(base + "'{\"mode\": 3}'", release, catalog) == []


def test_the_multimodal_config_gets_the_given_options_with_none_dropped(catalog):
    """ModelConfig builds MultiModalConfig from a keyword dict whose None values are dropped and hands its InitVars
    to __post_init__ (config/model.py:869-901 at 0.34.0, :852-884 at 0.33.0; tools/vllm_kwargs.py): a multimodal
    model refuses --mm-shm-cache-max-object-size-mb other than the default 128 without --mm-processor-cache-type shm
    (multimodal.py:516-523 [:517-524]) and an FP8 encoder scale path without --mm-encoder-attn-dtype fp8
    (:525-533 [:526-534]); a text-only model builds no MultiModalConfig."""
    vl, text = "vllm serve Qwen/Qwen3-VL-8B-Instruct ", "vllm serve meta-llama/Llama-3.1-8B "
    mm = "vllm/config/multimodal.py"
    for release, shm, fp8 in (("0.34.0", 520, 529), ("0.33.0", 521, 530)):
        assert _refused_lines(vl + "--mm-shm-cache-max-object-size-mb 256", release, catalog) == [(mm, shm)]
        assert _refused_lines(vl + "--mm-shm-cache-max-object-size-mb 256 --mm-processor-cache-type shm", release,
                              catalog) == []
        assert _refused_lines(vl + "--mm-shm-cache-max-object-size-mb 128", release, catalog) == []
        assert _refused_lines(text + "--mm-shm-cache-max-object-size-mb 256", release, catalog) == []
        assert _refused_lines(vl + "--mm-encoder-fp8-scale-path /tmp/scales.json", release, catalog) == [(mm, fp8)]


def test_backend_per_kind_keys_are_the_kv_cache_kinds_of_the_release(catalog):
    """AttentionConfig.validate_backend_per_kind_before (attention.py:300-320 at 0.34.0, :240-260 at 0.33.0) refuses
    a --attention-config backend_per_kind key outside {kind.value for kind in KVCacheSpecKind}, the enum of
    v1/kv_cache_interface.py (:172-182 at 0.34.0)."""
    base = "vllm serve meta-llama/Llama-3.1-8B -ac '{\"backend_per_kind\": {\"%s\": \"FLASH_ATTN\"}}'"
    for release, line in (("0.34.0", 316), ("0.33.0", 256)):
        assert _refused_lines(base % "attention", release, catalog) == [("vllm/config/attention.py", line)]
        assert _refused_lines(base % "sliding_window", release, catalog) == []


def test_the_checkpoints_quantization_config_decides_the_quantization_vllm_checks(catalog):
    """ModelConfig._verify_quantization (model.py:1403-1506 at 0.34.0) re-derives --quantization from the checkpoint's
    quantization config when it has one (unknown here: the override methods are not read); without one the given
    method stands, and a deprecated one is refused without --allow-deprecated-quantization (:1492-1506 [:1472-1486]).
    vllm_model__quantization_config is config.json's quantization_config / compression_config (or its text_config's),
    or a ModelOpt hf_quant_config.json beside it (kg.engines.vllm.registry.checkpoint_quantization)."""
    import kg
    from kg.engines.vllm.registry import checkpoint_quantization
    facts = {m: checkpoint_quantization(kg.stack_from_command(f"vllm serve {m}", catalog))
             for m in ("meta-llama/Llama-3.1-8B", "Qwen/Qwen3-32B-FP8", "nvidia/DeepSeek-V3.1-NVFP4")}
    assert facts == {"meta-llama/Llama-3.1-8B": {"vllm_model__quantization_config": False},
                     "Qwen/Qwen3-32B-FP8": {"vllm_model__quantization_config": True},
                     "nvidia/DeepSeek-V3.1-NVFP4": {"vllm_model__quantization_config": True}}
    for release, line in (("0.34.0", 1500), ("0.33.0", 1480)):
        deprecated = ("vllm/config/model.py", line)
        plain = "vllm serve meta-llama/Llama-3.1-8B --quantization fbgemm_fp8"
        assert deprecated in _refused_lines(plain, release, catalog)
        assert deprecated not in _refused_lines(plain + " --allow-deprecated-quantization", release, catalog)
        assert deprecated not in _refused_lines("vllm serve Qwen/Qwen3-32B-FP8 --quantization fbgemm_fp8", release,
                                                catalog)


TRT_COMMIT = "0004396720054fd8e205cbf616f21f0b57c6b412"


def test_trtllm_sites_read_from_source_text_name_their_commit_and_show_on_the_page_as_committed():
    """No TensorRT-LLM wheel reaches this machine; llm_args.py was read from the public code index at one commit (no
    release pinnable) and scanned from that text. The sites file says where the text came from (its length equals
    the index's total_chars, 314,102) and the page renders the four counts and the origin exactly as committed."""
    from kg.core import paths
    from kg.output.engine_checks_doc import sites_markdown
    d = next(x for x in all_sites() if x["engine"] == "trtllm" and x["release"] == "0+commit.0004396")
    assert d["release"] == "0+commit.0004396"
    o = d["origin"]
    assert (o["repo"], o["commit"], o["release_pinned"]) == ("NVIDIA/TensorRT-LLM", TRT_COMMIT, False)
    assert o["files"] == [{"path": "tensorrt_llm/llmapi/llm_args.py", "chars": 314102,
                           "sha256": "3aa88d5196387e04a1f3452114e6fce5bb577406be475eec452479c09dedfd2a"}]
    assert d["counts"] == {"rule": 0, "table": 0, "unknowable": 26, "uncovered": 126}
    # 'glob' in global_pool_size is not the file system: the hand classification keeps it knowable
    pool = [s for s in d["sites"] if s["message"] == "global_pool_size must be >= 1"]
    assert [s["class"] for s in pool] == ["uncovered"]
    rule_ids = {r for x in all_sites() for s in x["sites"] for r in s.get("by") or []}
    md = sites_markdown(paths.catalog_dir() / "engines" / "checks" / "sites", rule_ids)
    assert "| trtllm | commit 0004396 (no release) | 152 | 0 | 0 | 26 | 126 | 0 / 126 = 0.0 % |" in md
    assert "| trtllm | 1.2.1 | not scanned | | | | | [why](#trtllm-not-scanned) |" in md
    start = md.index("### trtllm commit 0004396 (no release): 152 sites")
    section = "\n".join(md[start:md.index("</details>", start) + 1])
    assert f"Origin: NVIDIA/TensorRT-LLM at commit `{TRT_COMMIT}`" in section
    assert section in (REPO / "docs" / "engine-checks.md").read_text()
    # serve.py at 00209af1, the commit catalog/engines/trtllm.yaml reads the options at: its own file and row
    serve = next(x for x in all_sites() if x["engine"] == "trtllm" and x["release"] == "0+commit.00209af")
    assert serve["origin"]["files"][0]["chars"] == 48542 and serve["scanned"] == ["tensorrt_llm/commands/serve.py"]
    assert "| trtllm | commit 00209af (no release) | 22 | 0 | 0 | 17 | 5 | 0 / 5 = 0.0 % |" in md
    assert "| trtllm | commit 0066b2a (no release) | 13 | 0 | 0 | 3 | 10 | 0 / 10 = 0.0 % |" in md


def test_a_source_scan_records_each_file_read_and_writes_no_table_row(tmp_path):
    from engine_check_sites import scan_source, unreleased_row
    src = tmp_path / "tensorrt_llm" / "llmapi"
    src.mkdir(parents=True)
    text = ("class KvCacheConfig:\n    def validate(self):\n        if self.tokens_per_block < 1:\n"
            "            raise ValueError('tokens_per_block must be positive')\n")
    (src / "llm_args.py").write_text(text)
    (src / "other.py").write_text("raise ValueError('outside the scope')\n")
    sites, sources, files = scan_source("trtllm", tmp_path)
    assert [(s.path, s.line, s.function, s.message) for s in sites] == [
        ("tensorrt_llm/llmapi/llm_args.py", 4, "KvCacheConfig.validate", "tokens_per_block must be positive")]
    assert files == [{"path": "tensorrt_llm/llmapi/llm_args.py", "chars": 149,
                      "sha256": __import__("hashlib").sha256(text.encode()).hexdigest()}]
    row = unreleased_row({"id": "x", "class": "table", "expr": "block_size < 1", "defaults": {"block_size": 32}})
    assert row == {"id": "x", "class": "uncovered",
                   "why": "translatable (block_size < 1), but no table row is written from source of no pinned release"}


def test_a_video_pruning_method_the_served_class_does_not_implement_is_refused(catalog, tmp_path):
    """ModelConfig.__post_init__ refuses a --video-pruning-method outside the served class's
    supported_video_pruning_methods once --video-pruning-rate is above 0 (config/model.py:903-914 at 0.34.0,
    :883-894 at 0.33.0): SupportsMultiModalPruning gives ("evs",) (models/interfaces.py:539-541), Qwen3-VL adds
    "vidcom2" (qwen3_vl.py:1969); tools/vllm_model_registry.py reads the tuple per architecture."""
    import shutil
    from kg.engines.vllm.registry import _arch_facts
    fact = "vllm_model__supported_video_pruning_methods"
    assert dict(_arch_facts("0.34.0", "Qwen2_5_VLForConditionalGeneration"))[fact] == ("evs",)
    assert dict(_arch_facts("0.34.0", "Qwen3VLForConditionalGeneration"))[fact] == ("evs", "vidcom2")
    assert dict(_arch_facts("0.34.0", "LlamaForCausalLM"))[fact] == ()
    folder = tmp_path / "qwen2.5-vl"
    folder.mkdir()
    shutil.copy(REPO / "rules" / "fixtures" / "configs" / "qwen2.5-vl-7b-instruct.json", folder / "config.json")
    vidcom2 = " --video-pruning-rate 0.5 --video-pruning-method vidcom2"
    for release, line in (("0.34.0", 910), ("0.33.0", 890)):
        site = ("vllm/config/model.py", line)
        assert site in _refused_lines(f"vllm serve {folder}{vidcom2}", release, catalog)
        assert site not in _refused_lines(f"vllm serve {folder} --video-pruning-rate 0.5", release, catalog)
        assert site not in _refused_lines(f"vllm serve {folder} --video-pruning-method vidcom2", release, catalog)
        assert site not in _refused_lines(f"vllm serve Qwen/Qwen3-VL-8B-Instruct{vidcom2}", release, catalog)
