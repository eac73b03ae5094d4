"""Reproduction (not run by the tests; needs `pip install llm-analysis==0.2.2`, a venv is at
/work/dl/llm-analysis-venv): llm-analysis 0.2.2 on the issue's 70B job with Llama-3.1-70B's real shape (LLMAnalysis used directly, since
train() looks models up by name and its config check refuses ffn 28672 = 3.5 h). Its output is recorded in
tests/bench/training_anchors.py LLM_ANALYSIS_70B.

    /work/dl/llm-analysis-venv/bin/python tests/bench/llm_analysis_70b.py 8192 1
"""
import json, sys
from llm_analysis.analysis import LLMAnalysis, ActivationRecomputation, DSZeRO
from llm_analysis.config import ModelConfig, ParallelismConfig, get_gpu_config_by_name, get_dtype_config_by_name
seq = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
ar = int(sys.argv[2]) if len(sys.argv) > 2 else 1
# llm-analysis counts the MLP as 2 matrices h x ffn (analysis.py get_num_params_per_layer_mlp); SwiGLU has 3 of
# h x 28672, so ffn_embed_dim 43008 = 1.5 x 28672 gives it Llama-3.1-70B's parameter count exactly
mc = ModelConfig(name="Llama-3.1-70B", num_layers=80, n_head=64, hidden_dim=8192, vocab_size=128256, max_seq_len=131072,
                 num_key_value_heads=8, ffn_embed_dim=43008, expansion_ratio=43008 / 8192, model_type="llama")
a = LLMAnalysis(mc, get_gpu_config_by_name("h100-sxm-80gb"), get_dtype_config_by_name("w16a16e16"),
                ParallelismConfig(tp_size=8, pp_size=4, dp_size=16, sp_size=8))
r = a.training(batch_size_per_gpu=1, global_batch_size=1024, seq_len=seq,
               activation_recomputation=ActivationRecomputation(ar), ds_zero=DSZeRO(1), mlp_gated_linear_units=True)
keys = ("num_params_total", "weight_memory_per_gpu", "gradient_memory_per_gpu", "optimizer_state_memory_per_gpu",
        "(weight+op_state+grad)_memory_per_gpu", "activation_memory_per_gpu", "activation_memory_attn_per_gpu",
        "activation_memory_mlp_per_gpu", "activation_memory_layernorm_per_gpu", "activation_memory_embedding_output_per_gpu",
        "(weight+op_state+grad+act)_memory_per_gpu")
print(json.dumps({k: r.get(k) for k in keys}, indent=1))
