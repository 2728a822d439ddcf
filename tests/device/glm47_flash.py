"""GPU-machine helper for the MoE/MLA benchmarks (see tests/device/run.sh), on a GLM-4.7-Flash-shaped
model: transformers' Glm4MoeLiteConfig defaults (checked against the published shapes below), with
random bf16 weights made by the engine itself (a RANDOM_WEIGHTS model directory: 60 GB of weights
would not fit this machine's disk).

make DIR TOKENIZER_DIR   config.json (+ the RANDOM_WEIGHTS marker and a tokenizer), unless there
roofline DIR             device-to-device copy bandwidth, bytes read per decoded token (the active
                         experts, the shared expert, attention, norms, router, one embedding row
                         and the head) and the implied batch-1 decode ceiling
"""
import json
import os
import shutil
import sys

PUBLISHED = dict(hidden_size=2048, num_hidden_layers=47, intermediate_size=10240,
                 num_attention_heads=20, n_routed_experts=64, moe_intermediate_size=1536,
                 num_experts_per_tok=4, n_shared_experts=1, vocab_size=154880)


def make(d, tok_dir):
    if os.path.exists(os.path.join(d, "config.json")):
        print(f"{d}: already there")
        return
    from transformers import Glm4MoeLiteConfig
    cfg = Glm4MoeLiteConfig()
    for k, v in PUBLISHED.items():
        assert getattr(cfg, k) == v, f"Glm4MoeLiteConfig default {k}={getattr(cfg, k)}, published {v}"
    cfg.architectures = ["Glm4MoeLiteForCausalLM"]
    cfg.save_pretrained(d)
    open(os.path.join(d, "RANDOM_WEIGHTS"), "w").close()
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, f), d)
    c = json.load(open(os.path.join(d, "config.json")))
    print(f"{d}: config written:", {k: c.get(k) for k in (
        "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
        "n_group", "topk_group", "routed_scaling_factor", "mlp_layer_types", "rope_parameters")})


def bytes_per_token(c):
    h, nh = c["hidden_size"], c["num_attention_heads"]
    q_rank, kv_rank = c["q_lora_rank"], c["kv_lora_rank"]
    nope, rope, v = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    attn = (h * q_rank + q_rank + q_rank * nh * (nope + rope) + h * (kv_rank + rope) + kv_rank
            + kv_rank * nh * (nope + v) + nh * v * h)
    moe_i, k = c["moe_intermediate_size"], c["num_experts_per_tok"]
    sparse = (k + c["n_shared_experts"]) * 3 * h * moe_i + c["n_routed_experts"] * (h + 1)
    dense = 3 * h * c["intermediate_size"]
    types = c.get("mlp_layer_types") or ["dense"] + ["sparse"] * (c["num_hidden_layers"] - 1)
    layers = sum(attn + 2 * h + (sparse if t == "sparse" else dense) for t in types)
    head = c["vocab_size"] * h + h + h  # head, final norm, one embedding row
    return 2 * (layers + head)


def roofline(d):
    from qwen3_8b import copy_bandwidth
    bw = copy_bandwidth()
    per_token = bytes_per_token(json.load(open(os.path.join(d, "config.json"))))
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s; bytes read per decoded token "
          f"{per_token / 1e9:.3f} GB; batch-1 decode roofline {bw / per_token:.1f} tok/s")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2], sys.argv[3])
    elif cmd == "roofline":
        roofline(sys.argv[2])
    else:
        sys.exit(f"unknown command {cmd}")
