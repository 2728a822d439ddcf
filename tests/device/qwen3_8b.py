"""GPU-machine helper for the CUDA backend's checks (see tests/device/run.sh).

make DIR TOKENIZER_DIR   write a random Qwen3-8B-shaped bf16 checkpoint (hidden 4096, 36 layers,
                         32 q / 8 kv heads, head_dim 128, intermediate 12288, vocab 151936) with
                         transformers, plus the real Qwen3 tokenizer, unless DIR already has it
reference DIR OUT.json   transformers' logits for every position of two prompts (in f32 on the
                         same bf16 weights) and 16 greedy tokens each, in check-logits' format
roofline DIR             device-to-device copy bandwidth, bytes read per decoded token (all weights
                         but the input embedding) and the implied batch-1 decode ceiling; also with
                         the layers' linear matrices in fp8 with an f32 scale a row
                         (`quantization: fp8`; the head and norms stay as they are)
reference-fp8 DIR OUT    the same on the layers' linear matrices quantized as `quantization: fp8`
                         stores them (and dequantized to f32): the reference of our fp8 logits
long-fp8 DIR OUT         reference-fp8's format for one 300-token prompt (its last 16 positions'
                         logits): past 128 rows, where the engine's fp8 matmuls are W8A8
long-w8a8 DIR OUT        the same with the engine's W8A8 emulated: in forward passes of more than
                         128 rows each linear's input rows quantized to e4m3 with a scale a row
hf-decode DIR N          transformers' own batch-1 greedy decode speed (bf16, N tokens)
"""
import json
import os
import shutil
import sys
import time

import torch


def config():
    from transformers import Qwen3Config
    return Qwen3Config(
        vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
        rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=False, torch_dtype="bfloat16",
    )


def make(d, tok_dir):
    if os.path.exists(os.path.join(d, "config.json")):
        print(f"{d}: already there")
        return
    from transformers import Qwen3ForCausalLM
    t = time.time()
    torch.manual_seed(0)
    with torch.device("cuda"):
        m = Qwen3ForCausalLM(config()).to(torch.bfloat16)
    m.save_pretrained(d, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, f), d)
    print(f"{d}: written in {time.time() - t:.1f} s")


def load(d, dtype):
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(d, dtype=dtype, device_map="cuda").eval()


def fake_quant_fp8(m):
    """The layers' linear matrices as `quantization: fp8` stores them, in f32: each row's
    largest magnitude over 448 as its scale, the values rounded to e4m3 (nearest, ties to even)
    and multiplied back."""
    with torch.no_grad():
        for name, p in m.named_parameters():
            if ".layers." in name and name.endswith("_proj.weight"):
                scale = p.abs().amax(dim=1, keepdim=True) / 448.0
                scale = torch.where(scale > 0, scale, torch.ones_like(scale))
                q = (p * (1.0 / scale)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
                p.copy_(q.to(torch.float32) * scale)


W8A8_MIN_ROWS = 129


def fake_quant_rows(x):
    """x's rows as the engine's W8A8 multiplies them: each row's largest magnitude over 448 as
    its scale, the row times its inverse rounded to e4m3, times the scale."""
    scale = x.abs().amax(dim=-1, keepdim=True) / 448.0
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = (x * (1.0 / scale)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return q.to(x.dtype) * scale


def w8a8_inputs(m):
    """Quantizes the layers' linear inputs as the engine's W8A8 does, in forward passes of more
    than 128 rows (a prompt's prefill; decode steps stay as they are)."""
    def hook(_module, args):
        x = args[0]
        rows = x.numel() // x.shape[-1]
        return (fake_quant_rows(x),) + args[1:] if rows >= W8A8_MIN_ROWS else None
    for name, mod in m.named_modules():
        if ".layers." in name and name.endswith("_proj") and isinstance(mod, torch.nn.Linear):
            mod.register_forward_pre_hook(hook)


def reference(d, out, fp8=False, w8a8=False, long=False):
    m = load(d, torch.float32)
    if fp8:
        fake_quant_fp8(m)
    if w8a8:
        w8a8_inputs(m)
    prompts = [[9707, 11, 1052, 374, 264, 1273, 315, 279, 7006, 22875, 1849, 13, 576, 3974, 13876, 38835],
               [785, 6722, 315, 9625, 374]]
    if long:
        prompts = [[(1000 + 7919 * i) % 150000 for i in range(300)]]
    cases = []
    with torch.no_grad():
        for p in prompts:
            ids = torch.tensor([p], device="cuda")
            logits = m(ids).logits[0].float().cpu()[-16:]
            g = m.generate(ids, max_new_tokens=16, do_sample=False)[0, len(p):].tolist()
            cases.append({"prompt": p, "logits": [[round(x, 5) for x in r] for r in logits.tolist()],
                          "greedy": g})
    if fp8:
        what = " and, past 128 rows, W8A8's quantized inputs" if w8a8 else ""
        json.dump({"dtype": "float32 compute on fp8-quantized (fake-quant) weights" + what,
                   "cases": cases}, open(out, "w"))
        print(f"{out}: {len(cases)} cases on fp8 weights")
        return
    # The yardstick for "bf16 tolerance": transformers' own bf16 run against its f32 run.
    mb = load(d, torch.bfloat16)
    worst = 0.0
    with torch.no_grad():
        for c in cases:
            ids = torch.tensor([c["prompt"]], device="cuda")
            ref = torch.tensor(c["logits"])
            got = mb(ids).logits[0].float().cpu()[-16:]
            worst = max(worst, ((got - ref).abs().max() / ref.abs().max()).item())
    import transformers
    json.dump({"transformers": transformers.__version__, "torch": torch.__version__,
               "dtype": "float32 compute on bf16 weights", "hf_bf16_vs_f32_relative": worst,
               "cases": cases}, open(out, "w"))
    print(f"{out}: {len(cases)} cases; transformers bf16 vs f32: max relative diff {worst:.3e}")


def copy_bandwidth():
    """Device-to-device copy rate in bytes/s (read + write), the roofline's bandwidth."""
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    t = time.time()
    reps = 20
    for _ in range(reps):
        b.copy_(a)
    torch.cuda.synchronize()
    return 2 * n * reps / (time.time() - t)


def roofline(d):
    bw = copy_bandwidth()
    from safetensors import safe_open
    total = 0
    embed = 0
    fp8_saved = 0
    for f in os.listdir(d):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(d, f), "pt") as s:
                for k in s.keys():
                    shape = s.get_slice(k).get_shape()
                    nbytes = 2
                    for x in shape:
                        nbytes *= x
                    total += nbytes
                    if k.endswith("embed_tokens.weight"):
                        embed += nbytes
                    if ".layers." in k and k.endswith("_proj.weight"):
                        # 1 byte a value instead of 2, plus an f32 scale a row.
                        fp8_saved += nbytes // 2 - 4 * shape[0]
    per_tok = total - embed
    per_tok_fp8 = per_tok - fp8_saved
    print(json.dumps({"copy_bandwidth_GBps": bw / 1e9, "bytes_per_token_GB": per_tok / 1e9,
                      "roofline_tok_s": bw / per_tok,
                      "fp8_bytes_per_token_GB": per_tok_fp8 / 1e9,
                      "fp8_roofline_tok_s": bw / per_tok_fp8}))


def hf_decode(d, n):
    m = load(d, torch.bfloat16)
    ids = torch.tensor([[785, 6722, 315, 9625, 374]], device="cuda")
    with torch.no_grad():
        m.generate(ids, max_new_tokens=4, do_sample=False)
        torch.cuda.synchronize()
        t = time.time()
        out = m.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        torch.cuda.synchronize()
    k = out.shape[1] - ids.shape[1]
    print(json.dumps({"hf_decode_tok_s": k / (time.time() - t), "tokens": k}))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2], sys.argv[3])
    elif cmd == "reference":
        reference(sys.argv[2], sys.argv[3])
    elif cmd == "reference-fp8":
        reference(sys.argv[2], sys.argv[3], fp8=True)
    elif cmd == "long-fp8":
        reference(sys.argv[2], sys.argv[3], fp8=True, long=True)
    elif cmd == "long-w8a8":
        reference(sys.argv[2], sys.argv[3], fp8=True, w8a8=True, long=True)
    elif cmd == "roofline":
        roofline(sys.argv[2])
    elif cmd == "hf-decode":
        hf_decode(sys.argv[2], int(sys.argv[3]))
