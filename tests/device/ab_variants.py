#!/usr/bin/env python3
"""Kernel builds for `tests/device/run.sh ab`: engine/kernels/cu with one edit, compiled to a cubin.

Usage: tests/device/ab_variants.py OUTDIR VARIANT...   (NVCC from tests/install_nvcc.sh)
Then: AB_CUBINS="base=OUTDIR/base.cubin nosmall=OUTDIR/nosmall.cubin" tests/device/pack.sh

Variants (all but `base` and `tf*` give wrong outputs: timing only):
  base      the kernels as they are
  noattn    decode attention and its split merge return right after their wait
  nosmall   also both RMS norms and q/k norm + RoPE + cache write
  nodot     the decode GEMVs load their weights but skip the dot products
  noload    the decode GEMVs compute on made-up weights instead of loading them
  timeline  one-row GEMVs wait first (no early loads) and stamp %globaltimer: the first block's
            start, its release by the kernel before and the last block's end, per launch; the
            o-proj GEMV of layer 34 of the 60th decoded token prints Qwen3-8B's layers 0-33
            (lines starting "TL", microseconds from layer 0's QKV release)
  tf        the small decode kernels (norms, embedding, RoPE, attention, merge) let the next
            kernel launch before they wait, instead of after
  tfnorm    only the norms and the embedding do
"""
import os
import shutil
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CU = os.path.join(ROOT, "engine", "kernels", "cu")


def edit(path, old, new, count=1):
    src = open(path).read()
    found = src.count(old)
    if found != count:
        sys.exit(f"{path}: expected {count} of {old!r}, found {found} (the kernels changed?)")
    open(path, "w").write(src.replace(old, new))


def first_wait_after(path, marker, new):
    """Replaces the first `pdl_begin();` after `marker` (a kernel's name or macro)."""
    src = open(path).read()
    at = src.index("pdl_begin();", src.index(marker))
    open(path, "w").write(src[:at] + new + src[at + len("pdl_begin();"):])


SMALL = [
    ("elementwise.cu", "rms_norm(const float"),
    ("elementwise.cu", "add_rms_norm(float"),
    ("attention.cu", "#define ROPE_WRITE_KV"),
]
ATTN = [
    ("attention_decode_tc.cu", "#define ATTN_DECODE_TC"),
    ("attention_decode.cu", "#define ATTN_DECODE_MERGE"),
]
NORMS = [("elementwise.cu", "rms_norm(const float"), ("elementwise.cu", "add_rms_norm(float"),
         ("elementwise.cu", "embedding(const bf16")]

TIMELINE = r'''
#define TL_INST 65536
#define TL_PRINT_INST (36 * 60 + 34)
__device__ unsigned long long tl_t[5][3][TL_INST];
__device__ unsigned tl_started[5];
__device__ unsigned tl_done[5][TL_INST];
__device__ __forceinline__ unsigned long long tl_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
struct Tl { int type; unsigned inst; unsigned long long t0, t1; };
// type: 0 QKV, 1 o-proj, 2 gate/up, 3 down (Qwen3-8B's K), -1 not stamped
__device__ __forceinline__ void tl_begin(Tl& tl, int type) {
    __shared__ unsigned inst_sh;
    tl.type = type;
    tl.t0 = tl_now();
    if (type >= 0 && threadIdx.x == 0) inst_sh = atomicAdd(&tl_started[type], 1) / gridDim.x;
    __syncthreads();
    tl.inst = inst_sh;
}
__device__ __forceinline__ void tl_end(Tl& tl) {
    if (tl.type < 0 || threadIdx.x != 0 || tl.inst >= TL_INST) return;
    const unsigned long long t2 = tl_now();
    atomicMax(&tl_t[tl.type][0][tl.inst], ~tl.t0);
    atomicMax(&tl_t[tl.type][1][tl.inst], ~tl.t1);
    atomicMax(&tl_t[tl.type][2][tl.inst], t2);
    __threadfence();
    if (atomicAdd(&tl_done[tl.type][tl.inst], 1) != gridDim.x - 1) return;
    if (tl.type != 1 || tl.inst != TL_PRINT_INST) return;
    const unsigned first = TL_PRINT_INST - 34;
    const unsigned long long b = ~tl_t[0][1][first];
    printf("TL layer | qkv start release end | oproj ... | gateup ... | down ...\n");
    for (int l = 0; l < 34; l++) {
        printf("TL %2d", l);
        for (int ty = 0; ty < 4; ty++)
            printf(" | %8.2f %8.2f %8.2f", (long long)(~tl_t[ty][0][first + l] - b) * 1e-3,
                   (long long)(~tl_t[ty][1][first + l] - b) * 1e-3,
                   (long long)(tl_t[ty][2][first + l] - b) * 1e-3);
        printf("\n");
    }
}
'''


def make(out, variant):
    src = os.path.join(out, variant)
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(CU, src)
    f = lambda name: os.path.join(src, name)
    if variant in ("noattn", "nosmall"):
        for name, marker in ATTN + (SMALL if variant == "nosmall" else []):
            first_wait_after(f(name), marker, "pdl_begin(); return;")
    elif variant == "nodot":
        edit(f("gemv.cu"), """                        float wf[8];
                        bf16x8_to_f32(wv[u][r], wf);
                        acc[m][r] += wf[0] * a.x + wf[1] * a.y + wf[2] * a.z + wf[3] * a.w +
                                     wf[4] * b.x + wf[5] * b.y + wf[6] * b.z + wf[7] * b.w;""",
             """                        const uint4 q = wv[u][r];
                        acc[m][r] += a.x + b.y + __int_as_float(q.x ^ q.y ^ q.z ^ q.w);""")
    elif variant == "noload":
        edit(f("gemv.cu"), "? ldg_stream(reinterpret_cast<const uint4*>(w[r]) + kb + 32 * u)",
             "? make_uint4(kb + u, r, kb ^ r, u)")
    elif variant in ("tf", "tfnorm"):
        edit(f("common.cuh"), "// The start of a kernel that prefetches nothing.",
             "__device__ __forceinline__ void pdl_begin_ahead() {\n    pdl_trigger();\n"
             "    pdl_wait();\n}\n// The start of a kernel that prefetches nothing.")
        for name, marker in NORMS + ([] if variant == "tfnorm" else SMALL[2:] + ATTN):
            first_wait_after(f(name), marker, "pdl_begin_ahead();")
    elif variant == "timeline":
        g = f("gemv.cu")
        edit(g, "if (M == 1) pdl_begin();", "if (false) pdl_begin();", count=5)
        edit(g, '#include "common.cuh"\n', '#include "common.cuh"\n' + TIMELINE)
        edit(g, "        if (M > 1) pdl_begin();", "        pdl_begin();", count=3)
        # gemv3 returns from its first two matrices: one if-chain instead, so tl_end runs last.
        edit(g, """        if (n0 < N0) return gemv_features<M, R>(W0, x, b0, y0, N0, K, n0, 0, nm);                 \\
        n0 -= N0;                                                                                 \\
        if (n0 < N1) return gemv_features<M, R>(W1, x, b1, y1, N1, K, n0, 0, nm);                 \\
        n0 -= N1;                                                                                 \\
        if (n0 < N2) gemv_features<M, R>(W2, x, b2, y2, N2, K, n0, 0, nm);                        \\""",
             """        if (n0 < N0) gemv_features<M, R>(W0, x, b0, y0, N0, K, n0, 0, nm);                        \\
        else if ((n0 -= N0) < N1) gemv_features<M, R>(W1, x, b1, y1, N1, K, n0, 0, nm);           \\
        else if ((n0 -= N1) < N2) gemv_features<M, R>(W2, x, b2, y2, N2, K, n0, 0, nm);           \\""")
        for kernel, stamped in [
            ("gemv_features<M, R>(W, x, bias, y, N, K, n0, add, none);",
             "M != 1 ? -1 : add ? (K == 12288 ? 3 : 1) : -1"),
            ("else if ((n0 -= N0) < N1)", "M != 1 ? -1 : 0"),
            ("gemv_swiglu_body<M, R>(Wg, Wu, x, y, N, K, GemvNorm{g, eps, inv});", "M != 1 ? -1 : 2"),
        ]:
            src_text = open(g).read()
            at = src_text.index(kernel)
            wait = src_text.rindex("        pdl_begin();", 0, at)
            stamp = f"        Tl tl;                                                                                    \\\n" \
                    f"        tl_begin(tl, {stamped});                                                                  \\\n"
            src_text = src_text[:wait] + stamp + "        pdl_begin(); tl.t1 = tl_now();" + \
                src_text[wait + len("        pdl_begin();"):]
            # tl_end after the kernel's last statement (the line ending its body).
            end = src_text.index("    }", src_text.index(kernel))
            src_text = src_text[:end] + "        tl_end(tl);                                                                               \\\n" + src_text[end:]
            open(g, "w").write(src_text)
    elif variant != "base":
        sys.exit(f"unknown variant {variant} (see --help)")
    nvcc = os.environ.get("NVCC", "nvcc")
    cubin = os.path.join(out, variant + ".cubin")
    subprocess.run([nvcc, "-cubin", "-O3", "-std=c++17", "-arch=sm_90a", "-o", cubin,
                    os.path.join(src, "kernels.cu")], check=True)
    print(cubin)


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    for v in sys.argv[2:]:
        make(sys.argv[1], v)
