#!/usr/bin/env bash
# The CUDA backend's checks and benchmarks on the GPU machine (run through the device tool from
# the repo root, with devbin/ carried: xz-compressed stripped binaries built here with
# `cargo build --release --all-features`, the Qwen3 tokenizer, and SmolLM2's GGUF in two parts
# because one carry is limited to 64 MiB: part 1 in devbin/, part 2 in devbin2/ carried by the
# next call while the machine is still warm). Usage: tests/device/run.sh STAGE...
#   ops      op-level CUDA-vs-CPU tests, the tiny HF fixtures on CUDA, compute-sanitizer memcheck
#   moe      MoE/MLA op tests vs the CPU, every tiny HF fixture (dense, MoE, MLA) on CUDA,
#            compute-sanitizer memcheck over the MoE/MLA op tests
#   glm      GLM-4.7-Flash-shaped model (random weights made by the engine): batch-1 decode vs
#            the roofline of the bytes read per token; 32 concurrent 8192-token prompts with 1024
#            outputs each (fp8 latent cache)
#   kernels  each op's speed at Qwen3-8B shapes vs the copy bandwidth (benches/cuda_kernels.rs)
#   fp8      the Qwen3-8B-shaped checkpoint with an fp8 e4m3 KV cache: pp/tg bench, 64 concurrent
#   fp8w     fp8 weights (--quantization fp8): the fp8 linear op tests and the tiny dense fixtures
#            on CUDA vs the CPU, memcheck; the Qwen3-8B shape's logits vs transformers (bf16
#            weights), the roofline of both, tg128 with bf16 and fp8 weights in turn, twice, in
#            this one command; pp512/pp8192 and the engine in process at 1, 8 and 64 concurrent
#            (pack.sh cuda_fp8 fp8_weights)
#   qwen3    Qwen3-8B-shaped random checkpoint: logits vs transformers, pp/tg bench, roofline,
#            transformers' own decode speed
#   bench    only the checkpoint and our pp/tg bench
#   fp8gemm  gemm_fp8 (fp8 weights past 8 rows on the tensor cores): the fp8 op tests, memcheck,
#            fp8 logits vs transformers, the engine in process at 8 and 64 concurrent with bf16,
#            fp8 and fp8 dequantized for cuBLASLt in turn (pack.sh cuda_fp8)
#   profile  per-op GPU time split (HEARTH_CUDA_PROFILE=1) of pp8192, tg128 and 64 concurrent
#   ncu      Nsight Compute speed-of-light of the batch-1 decode kernels
#   serve    serving bench at concurrency 1/8/32/64 (1000-token prompts, 1000 outputs), cold start;
#            once per KV cache type in HEARTH_SERVE_KV (e.g. "auto fp8"); HEARTH_SERVE_QUANT=fp8
#            loads the weights as fp8; HEARTH_SERVE_ENGINES="new old" runs each build in turn
#   smollm2  SmolLM2 greedy tokens CUDA vs CPU (needs both GGUF parts)
#   gemvk    the decode GEMV kernels alone: gemv.cu vs the tensor-core experiment, 1 and 8 rows,
#            Qwen3-8B and GLM-4.7-Flash shapes (tests/device/gemv_bench.cu; needs only nvcc there)
#   gemvrows the decode GEMVs of 1-8 rows alone as a Qwen3-8B layer launches them, bf16 and fp8,
#            each batch's bits against its rows alone, with each gemv.cu in GEMV_VARIANTS ("NAME:DIR
#            NAME2:DIR2", DIR holding a gemv.cu; default the tree's); GEMV_NCU=1 adds Nsight Compute
#            on the first build's 8-row gate/up and down (tests/device/gemv_rows_bench.cu; needs
#            only nvcc there)
#   linear   the linear op tests (GEMV and cuBLASLt vs the CPU, batch invariance), the tiny HF
#            fixtures on CUDA, compute-sanitizer memcheck over the linear tests
#   ab       batch-1 decode (tg128) of Qwen3-8B and GLM-4.7-Flash shapes with each kernel build
#            devbin/kernels-NAME.cubin in turn (HEARTH_KERNELS_FILE), twice, in this one command
#            (pack.sh with AB_CUBINS="NAME=path ..."), over the shapes in AB_MODELS (default
#            "q8b glm"); tests/device/ab_variants.py builds the kernels as they are and
#            ablations of them (bodies removed, a per-layer timeline of the GEMVs)
#   sampling the engine in process, 1,000-token prompts, 500 outputs, 1 and 64 concurrent: greedy,
#            then sampled on the GPU (temperature 0.8 / top-p 0.9; temperature 1; Qwen3's
#            temperature 0.6 / top-k 20 / top-p 0.95) with the embedded kernels and each
#            kernel build devbin/kernels-NAME.cubin in turn, in rounds (SAMPLING_ROUNDS,
#            default 2) in this one command
#   abenv    batch-1 decode (tg128) with each setting of AB_ENVS ("NAME:VAR=value,VAR=value ...")
#            in turn, twice, in this one command, over the shapes in AB_MODELS (default "glm q8b");
#            a setting with HEARTH_BIN=old runs devbin/hearth-engine-old (as serveenv)
#   serveenv the engine in process (1,000-token prompts, AB_GEN outputs, default 500) at the
#            concurrencies in AB_CONCURRENCY (default "16,32,64") with each setting of AB_ENVS
#            ("NAME:VAR=value,VAR=value ...") in turn, in rounds (AB_ROUNDS, default 2), in this
#            one command, on the Qwen3-8B shape, with AB_ARGS added to the bench's arguments
#            (e.g. "--quantization fp8"), AB_KV=fp8 for an fp8 KV cache (AB_MAX_SEQS sequences
#            at most, default 64); a setting with
#            HEARTH_BIN=old runs the engine packed as
#            devbin/hearth-engine-old (pack.sh with OLD_ENGINE=path), for an A/B of two builds
#   ring     the weight ring (HEARTH_RING_DECODE=1): the same bits as the kernels on the
#            tiny dense fixtures (ring_decode), the tiny HF fixtures through it, memcheck, the
#            Qwen3-8B shape's logits vs transformers with and without it, then tg128 without and
#            with it, twice, in this one command (pack.sh ring_decode hf_reference)
#   ringprobe  where the ring's time goes: its launches a token (HEARTH_RING_DIAG=trace), tg128
#            off / on / without dot products, a token's timeline by step (HEARTH_RING_DIAG=
#            timeline), Nsight Compute on one token's launch
#            (pack.sh ring_decode)
#   fp8k     fp8 matrices at 16-128 rows alone: gemm_fp8 (W8A16 on mma.sync), gemm_fp8_tma (on
#            wgmma, TMA copies) and the wgmma W8A8 experiment, Qwen3-8B shapes
#            (tests/device/fp8_gemm_bench.cu; needs only nvcc there)
#   w8a8     fp8 weights past gemm_fp8's rows as W8A8 (scales by cuBLASLt, then by a pass)
#            against dequantized for cuBLASLt: the fp8 op tests, memcheck, fp8 logits vs
#            transformers, pp8192 and the engine in process, W8A8_MODES (HEARTH_FP8_W8A8
#            values, default "1 pass 0") (pack.sh cuda_fp8)
#   ppl      SmolLM2 (a real trained model) perplexity over the repo's docs (ctx 1,024, 40
#            chunks): its GGUF as is on CUDA, fp8 weights dequantized past 128 rows
#            (HEARTH_FP8_W8A8=0), W8A8 and W8A8 with the scales by a pass, and fp8 on the CPU
#            (needs the GGUF's parts)
#   fp8pre   fp8 weights' matmuls through cuBLASLt (16-8,192 rows, Qwen3-8B shapes): weights
#            dequantized to bf16 against W8A8 on the fp8 tensor cores, scales applied by
#            cuBLASLt or by a pass (tests/device/fp8_prefill_bench.cu; with fp8k in the same
#            command for gemm_fp8_tma at 16-128 rows)
#   dattn    decode attention alone (attn_decode_tc + merge, Qwen3-8B heads, bf16 and fp8, 1-128
#            rows) with each of its compile-time settings in DATTN_VARIANTS ("NAME:-DX=1 -DY=2;
#            NAME:-I dir" with another attention_decode_tc.cu in dir; default the kernel as it
#            is), in rounds (DATTN_ROUNDS, default 2), in one
#            command (tests/device/decode_attn_bench.cu; needs only nvcc there); DATTN_NCU=1 adds
#            Nsight Compute on the first variant (64 rows, fp8) and its top stalls by instruction
#   pwg      the wgmma prefill attention in the engine: cuda_attention (its bits against
#            mma.sync's), memcheck over the attention tests, pp8192 with HEARTH_PREFILL_ATTN unset and =mma
#            in turn, twice, bf16 / fp8 weights / fp8 weights and cache (pack.sh cuda_attention)
#   pattn    prefill attention alone (attn_prefill_tc on mma.sync against attn_prefill_wg on
#            wgmma, Qwen3-8B heads, bf16 and fp8): checked against f32 and each other, timed on
#            an 8,192-token prompt, with each compile-time setting in PATTN_VARIANTS ("NAME:-DX=1;
#            ..."; default the kernels as they are) (tests/device/prefill_attn_bench.cu; needs
#            only nvcc there)
#   readpat  how fast gemm_fp8's block tiling can read a weight matrix with no products, row-major
#            against tiled (tests/device/read_pattern_bench.cu; needs only nvcc there)
#   kvstride the paged KV cache's layout (a token's heads together) against one head's page of
#            keys together, K and V read in decode attention's shape (fp8 and bf16 pieces,
#            consecutive and shuffled pages, 3-5 blocks an SM or all that fit), against the copy
#            rate (tests/device/kv_stride_bench.cu; needs only nvcc there)
#   chain    batch-1 decode modelled as a chain of GEMVs (GLM-4.7-Flash and Qwen3-8B byte sizes):
#            a kernel a step in a graph (with and without PDL) vs one persistent kernel with grid
#            barriers or with a weight ring (a producer warp streaming the weights ahead of the
#            chain), against the copy rate (tests/device/chain_bench.cu; needs only nvcc there)
# Results go to $OUT (the device tool brings them back).
set -uo pipefail
OUT=${OUT:-/tmp/hearth-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=/tmp/hearth-bin
mkdir -p "$B"
for f in devbin/*.xz; do
    [ -e "$f" ] && xz -dc "$f" > "$B/$(basename "$f" .xz)" && chmod +x "$B/$(basename "$f" .xz)"
done
# Test binaries find fixtures through the absolute path they were built at.
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
TOK=/tmp/qwen3-tokenizer
[ -e devbin/qwen3-tokenizer ] && mkdir -p $TOK && cp devbin/qwen3-tokenizer/tokenizer_config.json $TOK/ && xz -dc devbin/qwen3-tokenizer/tokenizer.json.xz > $TOK/tokenizer.json
# SmolLM2's GGUF (98 MB) travels in parts over calls while the machine stays warm: smol.part1
# in devbin/ (beside the engine), smol.part2, part3, .. in devbin2/ (`split -b` of it, sized to
# the carry); /tmp/smol.gguf is the parts so far, whole once the last one came.
[ -e devbin/smol.part1 ] && cp devbin/smol.part1 /tmp/smol.part1
for p in devbin2/smol.part*; do [ -e "$p" ] && cp "$p" /tmp/; done
[ -e devbin2/smol.part2 ] || [ -e devbin2/smol.part3 ] && cat /tmp/smol.part* > /tmp/smol.gguf
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
E="$B/hearth-engine"
t() { local name=$1; shift; local s=$(date +%s.%N); "$@" > "$OUT/$name.txt" 2>&1; local rc=$?; printf '%-14s rc=%s %6.1fs\n' "$name" $rc "$(awk "BEGIN{print $(date +%s.%N) - $s}")" | tee -a "$OUT/summary.txt"; tail -n 25 "$OUT/$name.txt"; return $rc; }

# fp8 weights' checks: the fp8 op tests and memcheck over them, then the Qwen3-8B shape's fp8
# logits vs transformers on the same fp8 values (0.08: measured 5.3% / 4.5%).
fp8_checks() {
    HEARTH_TEST_CUDA=1 t cuda_fp8 "$B/cuda_fp8" --nocapture --test-threads=1
    HEARTH_GEMV_ROWS=8 HEARTH_TEST_CUDA=1 t cuda_fp8_gemv8 "$B/cuda_fp8" --nocapture --test-threads=1
    HEARTH_TEST_CUDA=1 t memcheck_fp8 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/cuda_fp8" --test-threads=1
    # W8A8 with the scales applied by a pass (cuBLASLt before 12.9, as the CUDA 12.8 image's),
    # and gemm_fp8 and its epilogues up to 128 rows (W8A8 from 129, as without gemm_fp8_tma).
    HEARTH_FP8_W8A8=pass HEARTH_TEST_CUDA=1 t cuda_fp8_pass "$B/cuda_fp8" --nocapture --test-threads=1
    HEARTH_FP8_W8A8_ROWS=128 HEARTH_TEST_CUDA=1 t cuda_fp8_rows128 "$B/cuda_fp8" --nocapture --test-threads=1
    HEARTH_FP8_W8A8=pass HEARTH_TEST_CUDA=1 t memcheck_fp8_pass compute-sanitizer --tool memcheck --error-exitcode 9 "$B/cuda_fp8" --test-threads=1
    make_models q8b
    [ -e /tmp/q8b-ref-fp8.json ] || t reference_fp8 python3 tests/device/qwen3_8b.py reference-fp8 /tmp/q8b /tmp/q8b-ref-fp8.json
    t check_logits_fp8 "$E" check-logits --model /tmp/q8b --quantization fp8 --reference /tmp/q8b-ref-fp8.json --tolerance 0.08
}

# The random-weight checkpoints named in $1 ("q8b", "glm").
make_models() {
    [[ " $1 " == *" q8b "* ]] && t make8b python3 tests/device/qwen3_8b.py make /tmp/q8b $TOK
    [[ " $1 " == *" glm "* ]] && t glm_make python3 tests/device/glm47_flash.py make /tmp/glm $TOK
    return 0
}

for stage in "$@"; do case $stage in
ops)
    # The op test binaries packed (pack.sh's default set is more than one carry holds: pack
    # cuda_ops cuda_attention and cuda_linear hf_reference in two calls).
    for b in cuda_ops cuda_attention cuda_linear hf_reference; do
        [ -e "$B/$b" ] || { echo "ops: $b not packed" | tee -a "$OUT/summary.txt"; continue; }
        HEARTH_TEST_CUDA=1 t "$b" "$B/$b" --nocapture --test-threads=1
        # The GEMV kernels' 5-8 row forms, which decode takes only with HEARTH_GEMV_ROWS past 4.
        [ "$b" = cuda_linear ] && HEARTH_GEMV_ROWS=8 HEARTH_TEST_CUDA=1 t cuda_linear_gemv8 "$B/$b" --nocapture --test-threads=1
        [ "$b" = hf_reference ] && continue
        HEARTH_TEST_CUDA=1 t "memcheck_$b" compute-sanitizer --tool memcheck --error-exitcode 9 "$B/$b" --test-threads=1
    done
    ;;
linear)
    HEARTH_TEST_CUDA=1 t cuda_linear "$B/cuda_linear" --nocapture --test-threads=1
    HEARTH_GEMV_ROWS=8 HEARTH_TEST_CUDA=1 t cuda_linear_gemv8 "$B/cuda_linear" --nocapture --test-threads=1
    HEARTH_TEST_CUDA=1 t hf_reference "$B/hf_reference" --nocapture --test-threads=1
    HEARTH_TEST_CUDA=1 t memcheck_linear compute-sanitizer --tool memcheck --error-exitcode 9 "$B/cuda_linear" --test-threads=1
    ;;
moe)
    HEARTH_TEST_CUDA=1 t cuda_moe_mla "$B/cuda_moe_mla" --nocapture --test-threads=1
    HEARTH_TEST_CUDA=1 HEARTH_MOE_GEMM=cublas HEARTH_MOE_DECODE=gemv t cuda_moe_mla_cublas "$B/cuda_moe_mla" --nocapture --test-threads=1
    HEARTH_TEST_CUDA=1 t hf_reference "$B/hf_reference" --nocapture --test-threads=1
    HEARTH_TEST_CUDA=1 t memcheck_moe compute-sanitizer --tool memcheck --error-exitcode 9 "$B/cuda_moe_mla" --test-threads=1
    ;;
glm)
    t glm_make python3 tests/device/glm47_flash.py make /tmp/glm $TOK
    t glm_roofline python3 tests/device/glm47_flash.py roofline /tmp/glm
    t glm_bench "$E" bench --model /tmp/glm -p 512,8192 -n 128 -r 1
    printf 'name: glm-flash\nmodel: /tmp/glm\nengine: {device: cuda, kv_cache_dtype: fp8, max_model_len: 9472, max_num_seqs: 32}\n' > /tmp/glm-fp8.yaml
    t glm_c32 "$E" bench --spec /tmp/glm-fp8.yaml --concurrency 32 --serve-prompt 8192 --serve-gen 1024
    ;;
qwen3)
    t make8b python3 tests/device/qwen3_8b.py make /tmp/q8b $TOK
    [ -e /tmp/q8b-ref.json ] || t reference python3 tests/device/qwen3_8b.py reference /tmp/q8b /tmp/q8b-ref.json
    t check_logits "$E" check-logits --model /tmp/q8b --reference /tmp/q8b-ref.json --tolerance 0.05
    t roofline python3 tests/device/qwen3_8b.py roofline /tmp/q8b
    t bench "$E" bench --model /tmp/q8b -p 512,8192 -n 128 -r 5
    t bench_ub8192 "$E" bench --model /tmp/q8b -p 8192 -n 1 -r 2 -u 8192
    t hf_decode python3 tests/device/qwen3_8b.py hf-decode /tmp/q8b 32
    ;;
bench)
    t make8b python3 tests/device/qwen3_8b.py make /tmp/q8b $TOK
    t bench "$E" bench --model /tmp/q8b -p 512,8192 -n 128 -r 5
    t bench_ub8192 "$E" bench --model /tmp/q8b -p 8192 -n 1 -r 2 -u 8192
    t c64 "$E" bench --model /tmp/q8b --concurrency 64 --serve-prompt 1000 --serve-gen 1000
    ;;
ab)
    variants=$(cd "$B" && ls kernels-*.cubin 2>/dev/null | sed 's/^kernels-//; s/\.cubin$//')
    [ -n "$variants" ] || { echo "ab: no devbin/kernels-*.cubin.xz (pack.sh with AB_CUBINS)"; exit 2; }
    models=${AB_MODELS:-q8b glm}
    make_models "$models"
    kernels_of() { HEARTH_KERNELS_FILE="$B/kernels-$1.cubin" "${@:2}"; }
    for i in 1 2; do
        for v in $variants; do
            for m in $models; do
                t "ab_${m}_${v}_$i" kernels_of "$v" "$E" bench --model "/tmp/$m" -p 512 -n 128 -r 5
            done
        done
    done
    grep -H "tg128" "$OUT"/ab_*.txt | tee -a "$OUT/summary.txt"
    ;;
sampling)
    make_models q8b
    variants=$(cd "$B" && ls kernels-*.cubin 2>/dev/null | sed 's/^kernels-//; s/\.cubin$//')
    # K: a kernel build to load instead of the embedded one.
    serving() {
        ${K:+env HEARTH_KERNELS_FILE=$K} "$E" bench --model /tmp/q8b --concurrency 1,64 \
            --serve-prompt 1000 --serve-gen 500 "$@"
    }
    for i in $(seq "${SAMPLING_ROUNDS:-2}"); do
        K= t "sampling_greedy_$i" serving
        for v in embedded $variants; do
            K=$B/kernels-$v.cubin
            [ -e "$K" ] || K=
            t "sampling_${v}_t0.8p0.9_$i" serving --temperature 0.8 --top-p 0.9
            t "sampling_${v}_t1_$i" serving --temperature 1
            t "sampling_${v}_t0.6k20p0.95_$i" serving --temperature 0.6 --top-k 20 --top-p 0.95
        done
    done
    grep -H -E "^\| (1|64) \|" "$OUT"/sampling_*.txt | tee -a "$OUT/summary.txt"
    ;;
abenv)
    models=${AB_MODELS:-glm q8b}
    make_models "$models"
    for i in 1 2; do
        for v in ${AB_ENVS:?abenv: set AB_ENVS}; do
            for m in $models; do
                # shellcheck disable=SC2046 # the settings split into env's arguments
                bin="$E"
                [[ "$v" == *HEARTH_BIN=old* ]] && bin="$B/hearth-engine-old"
                t "abenv_${m}_${v%%:*}_$i" env $(tr , ' ' <<< "${v#*:}") "$bin" bench --model "/tmp/$m" -p 512 -n 128 -r 5
            done
        done
    done
    grep -H "tg128" "$OUT"/abenv_*.txt | tee -a "$OUT/summary.txt"
    ;;
serveenv)
    make_models q8b
    # AB_KV=fp8: the model through a spec with an fp8 KV cache (and max_num_seqs AB_MAX_SEQS,
    # default 64).
    src=(--model /tmp/q8b)
    if [ -n "${AB_KV:-}" ]; then
        printf 'name: q8b-kv\nmodel: /tmp/q8b\nengine: {device: cuda, kv_cache_dtype: %s, max_model_len: 4096, max_num_seqs: %s}\n' "$AB_KV" "${AB_MAX_SEQS:-64}" > /tmp/q8b-kv.yaml
        src=(--spec /tmp/q8b-kv.yaml)
    fi
    for i in $(seq "${AB_ROUNDS:-2}"); do
        for v in ${AB_ENVS:?serveenv: set AB_ENVS}; do
            # shellcheck disable=SC2046,SC2086 # the settings and AB_ARGS split into arguments
            bin="$E"
            [[ "$v" == *HEARTH_BIN=old* ]] && bin="$B/hearth-engine-old"
            t "serveenv_${v%%:*}_$i" env $(tr , ' ' <<< "${v#*:}") "$bin" bench "${src[@]}" \
                --concurrency "${AB_CONCURRENCY:-16,32,64}" --serve-prompt 1000 --serve-gen "${AB_GEN:-500}" ${AB_ARGS:-}
        done
    done
    grep -H -E "^\| [0-9]+ \|" "$OUT"/serveenv_*.txt | tee -a "$OUT/summary.txt"
    ;;
ring)
    HEARTH_TEST_CUDA=1 t ring_decode "$B/ring_decode" --nocapture
    HEARTH_TEST_CUDA=1 HEARTH_RING_DECODE=1 t hf_reference_ring "$B/hf_reference" --nocapture --test-threads=1 cuda_backend
    HEARTH_TEST_CUDA=1 t memcheck_ring compute-sanitizer --tool memcheck --error-exitcode 1 "$B/ring_decode" --nocapture
    t make8b python3 tests/device/qwen3_8b.py make /tmp/q8b $TOK
    [ -e /tmp/q8b-ref.json ] || t reference python3 tests/device/qwen3_8b.py reference /tmp/q8b /tmp/q8b-ref.json
    t check_logits "$E" check-logits --model /tmp/q8b --reference /tmp/q8b-ref.json --tolerance 0.05
    HEARTH_RING_DECODE=1 t check_logits_ring "$E" check-logits --model /tmp/q8b --reference /tmp/q8b-ref.json --tolerance 0.05
    for i in 1 2; do
        t "ring_q8b_off_$i" "$E" bench --model /tmp/q8b -p 512 -n 128 -r 5
        HEARTH_RING_DECODE=1 t "ring_q8b_on_$i" "$E" bench --model /tmp/q8b -p 512 -n 128 -r 5
    done
    grep -H "tg128" "$OUT"/ring_q8b_*.txt | tee -a "$OUT/summary.txt"
    ;;
ringprobe)
    # Where the ring's time goes: its launches a token (HEARTH_RING_DIAG=trace), tg128 without
    # it, with it and with its dot products skipped, then Nsight Compute on one token's launch.
    HEARTH_TEST_CUDA=1 HEARTH_RING_DIAG=trace t ring_trace "$B/ring_decode" --nocapture
    grep "decode_ring launch" "$OUT/ring_trace.txt" | sort | uniq -c | sort -rn | head -20
    t make8b python3 tests/device/qwen3_8b.py make /tmp/q8b $TOK
    for v in off on nodot; do
        case $v in off) env=();; on) env=(HEARTH_RING_DECODE=1);; nodot) env=(HEARTH_RING_DECODE=1 HEARTH_RING_DIAG=nodot);; esac
        t "probe_q8b_$v" env "${env[@]}" "$E" bench --model /tmp/q8b -p 512 -n 128 -r 5
    done
    grep -H "tg128" "$OUT"/probe_q8b_*.txt | tee -a "$OUT/summary.txt"
    HEARTH_RING_DECODE=1 HEARTH_RING_DIAG=timeline t probe_q8b_timeline "$E" bench --model /tmp/q8b -p 512 -n 128 -r 1
    HEARTH_RING_DECODE=1 t ncu_ring ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy -k decode_ring --launch-skip 40 --launch-count 1 "$E" bench --model /tmp/q8b -p 1 -n 64 -r 0
    ;;
kernels)
    HEARTH_TEST_CUDA=1 t kernels "$B/cuda_kernels" --bench
    ;;
fp8)
    t make8b python3 tests/device/qwen3_8b.py make /tmp/q8b $TOK
    printf 'name: q8b-fp8\nmodel: /tmp/q8b\nengine: {device: cuda, kv_cache_dtype: fp8, max_model_len: 4096, max_num_seqs: 64}\n' > /tmp/q8b-fp8.yaml
    t bench_fp8 "$E" bench --spec /tmp/q8b-fp8.yaml -p 512,8192 -n 128 -r 5
    t c64_fp8 "$E" bench --spec /tmp/q8b-fp8.yaml --concurrency 64 --serve-prompt 1000 --serve-gen 1000
    ;;
fp8w)
    HEARTH_TEST_CUDA=1 t cuda_fp8 "$B/cuda_fp8" --nocapture --test-threads=1
    HEARTH_TEST_CUDA=1 t fp8_weights "$B/fp8_weights" --nocapture --test-threads=1
    HEARTH_TEST_CUDA=1 t memcheck_fp8 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/cuda_fp8" --test-threads=1
    make_models q8b
    [ -e /tmp/q8b-ref.json ] || t reference python3 tests/device/qwen3_8b.py reference /tmp/q8b /tmp/q8b-ref.json
    t check_logits "$E" check-logits --model /tmp/q8b --reference /tmp/q8b-ref.json --tolerance 0.05
    # Against transformers on the same fp8 values (fake-quantized; 0.08: past 8 rows the
    # dequantized weights are rounded to bf16 for cuBLASLt, 5.6% measured on an H100), and on
    # the bf16 weights (reported: what fp8 itself moves on a random-weight model).
    [ -e /tmp/q8b-ref-fp8.json ] || t reference_fp8 python3 tests/device/qwen3_8b.py reference-fp8 /tmp/q8b /tmp/q8b-ref-fp8.json
    t check_logits_fp8 "$E" check-logits --model /tmp/q8b --quantization fp8 --reference /tmp/q8b-ref-fp8.json --tolerance 0.08
    t check_logits_fp8_vs_bf16 "$E" check-logits --model /tmp/q8b --quantization fp8 --reference /tmp/q8b-ref.json --tolerance 1
    t roofline python3 tests/device/qwen3_8b.py roofline /tmp/q8b
    for i in 1 2; do
        t "fp8w_bf16_$i" "$E" bench --model /tmp/q8b -p 512 -n 128 -r 5
        t "fp8w_fp8_$i" "$E" bench --model /tmp/q8b --quantization fp8 -p 512 -n 128 -r 5
    done
    grep -H "tg128" "$OUT"/fp8w_*.txt | tee -a "$OUT/summary.txt"
    t fp8w_prefill "$E" bench --model /tmp/q8b --quantization fp8 -p 8192 -n 1 -r 2 -u 8192
    t fp8w_serve "$E" bench --model /tmp/q8b --quantization fp8 --concurrency 1,8,64 --serve-prompt 1000 --serve-gen 500
    ;;
w8a8)
    # fp8 weights past gemm_fp8's rows as W8A8 (cuBLASLt fp8 x fp8 with outer-vector scales;
    # HEARTH_FP8_W8A8=pass: unscaled, the scales by a pass) against the dequantized path
    # (HEARTH_FP8_W8A8=0): fp8_checks, a 300-token prompt's fp8 logits vs transformers
    # (reported), then pp8192 and the engine in process (fp8 KV cache, 1,000-token prompts, 500
    # outputs, W8A8_CONCURRENCY, default 32,64) with each of W8A8_MODES in turn, W8A8_ROUNDS
    # times (default 1), in this one command.
    fp8_checks
    # A 300-token prompt (W8A8 past 64 rows) against transformers on the same fp8 weights with
    # W8A8's quantized inputs emulated and without: reported, not judged (this random 36-layer
    # model amplifies noise at that length: transformers' own emulation moves its logits 43%).
    # W8A8_LONG=0 skips it.
    for v in w8a8 fp8; do
        [ "${W8A8_LONG:-1}" = 1 ] || break
        [ -e "/tmp/q8b-long-$v.json" ] || t "long_$v" python3 tests/device/qwen3_8b.py "long-$v" /tmp/q8b "/tmp/q8b-long-$v.json"
        t "check_long_${v}" "$E" check-logits --model /tmp/q8b --quantization fp8 --reference "/tmp/q8b-long-$v.json" --tolerance 1
        HEARTH_FP8_W8A8=0 t "check_long_${v}_dequant" "$E" check-logits --model /tmp/q8b --quantization fp8 --reference "/tmp/q8b-long-$v.json" --tolerance 1
    done
    printf 'name: q8b-kv\nmodel: /tmp/q8b\nengine: {device: cuda, kv_cache_dtype: fp8, max_model_len: 4096, max_num_seqs: 64}\n' > /tmp/q8b-kv.yaml
    for i in $(seq "${W8A8_ROUNDS:-1}"); do
        for w in ${W8A8_MODES:-1 pass 0}; do
            v=${w/#1/w8a8}
            v=${v/#0/dequant}
            t "w8a8_pp_${v}_$i" env HEARTH_FP8_W8A8=$w "$E" bench --model /tmp/q8b --quantization fp8 -p 8192 -n 1 -r 2 -u 8192
            t "w8a8_serve_${v}_$i" env HEARTH_FP8_W8A8=$w "$E" bench --spec /tmp/q8b-kv.yaml --quantization fp8 --concurrency "${W8A8_CONCURRENCY:-32,64}" --serve-prompt 1000 --serve-gen 500
        done
    done
    grep -H -E "^\| [0-9]+ \||pp8192" "$OUT"/w8a8_*.txt | tee -a "$OUT/summary.txt"
    ;;
ppl)
    cat README.md docs/*.md > /tmp/ppl-text.md
    ppl() { t "ppl_$1" env "$2" "$E" perplexity --model /tmp/smol.gguf --file /tmp/ppl-text.md --ctx 1024 --chunks 40 "${@:3}"; }
    ppl gguf_cuda HEARTH_FP8_W8A8=1 --device cuda
    ppl fp8_dequant_cuda HEARTH_FP8_W8A8=0 --device cuda --quantization fp8
    ppl fp8_w8a8_cuda HEARTH_FP8_W8A8=1 --device cuda --quantization fp8
    ppl fp8_w8a8_pass_cuda HEARTH_FP8_W8A8=pass --device cuda --quantization fp8
    ppl fp8_cpu HEARTH_FP8_W8A8=1 --device cpu --quantization fp8
    grep -h "^perplexity" "$OUT"/ppl_*.txt | tee -a "$OUT/summary.txt"
    ;;
fp8gemm)
    # gemm_fp8 (fp8 matrices past the GEMV rows on the tensor cores): the fp8 op tests, memcheck,
    # the Qwen3-8B shape's fp8 logits vs transformers on the same fp8 values, then the engine in
    # process at FP8_CONCURRENCY (default 8,64) with bf16 weights, fp8 through gemm_fp8 and fp8
    # dequantized for cuBLASLt (HEARTH_FP8_GEMM=dequant) in turn, twice, in this one command.
    fp8_checks
    if [ -n "${FP8_PROFILE:-}" ]; then
        # The per-op split at 64 concurrent with each fp8 matmul path.
        HEARTH_CUDA_PROFILE=1 t fp8gemm_profile_tc "$E" bench --model /tmp/q8b --quantization fp8 --concurrency 64 --serve-prompt 1000 --serve-gen 100
        HEARTH_CUDA_PROFILE=1 HEARTH_FP8_GEMM=dequant t fp8gemm_profile_dequant "$E" bench --model /tmp/q8b --quantization fp8 --concurrency 64 --serve-prompt 1000 --serve-gen 100
    fi
    serve() { t "fp8gemm_$1" "${@:2}" --model /tmp/q8b --concurrency "${FP8_CONCURRENCY:-8,64}" --serve-prompt 1000 --serve-gen 500; }
    for i in 1 2; do
        serve "bf16_$i" "$E" bench
        serve "tc_$i" "$E" bench --quantization fp8
        serve "dequant_$i" env HEARTH_FP8_GEMM=dequant "$E" bench --quantization fp8
    done
    grep -H -E "^\| [0-9]+ \|" "$OUT"/fp8gemm_*.txt | tee -a "$OUT/summary.txt"
    ;;
profile64)
    # Decode-dominated per-op split at 64 concurrent sequences (bf16 KV, then fp8).
    HEARTH_CUDA_PROFILE=1 t profile_c64_decode "$E" bench --model /tmp/q8b --concurrency 64 --serve-prompt 1000 --serve-gen 300
    [ -e /tmp/q8b-fp8.yaml ] && HEARTH_CUDA_PROFILE=1 t profile_c64_fp8 "$E" bench --spec /tmp/q8b-fp8.yaml --concurrency 64 --serve-prompt 1000 --serve-gen 300
    ;;
profile)
    HEARTH_CUDA_PROFILE=1 t profile_pp8192 "$E" bench --model /tmp/q8b -p 8192 -n 1 -r 1
    HEARTH_CUDA_PROFILE=1 t profile_tg128 "$E" bench --model /tmp/q8b -p 1 -n 128 -r 1
    HEARTH_CUDA_PROFILE=1 t profile_c64 "$E" bench --model /tmp/q8b --concurrency 64 --serve-prompt 1000 --serve-gen 100
    ;;
ncu)
    # Achieved bandwidth / compute of each decode kernel (batch 1, inside the decode graphs).
    t ncu_tg ncu --section SpeedOfLight -k 'regex:gemv|attn_decode|rope_write|add_rms|argmax' --launch-skip 1500 --launch-count 24 "$E" bench --model /tmp/q8b -p 1 -n 64 -r 0
    grep -E "^  [a-z_0-9]+|DRAM Throughput|Duration|Compute \(SM\) Throughput" "$OUT/ncu_tg.txt" | head -120 > "$OUT/ncu_summary.txt"
    ;;
serve)
    # Once per KV cache type in HEARTH_SERVE_KV (default: auto = bf16) and engine in
    # HEARTH_SERVE_ENGINES (default "new"; "old" is devbin/hearth-engine-old, pack.sh's
    # OLD_ENGINE; "NAME:VAR=value,VAR=value" runs the new one with those settings), with
    # HEARTH_SERVE_MAX_SEQS sequences at most (default 64).
    for engine in ${HEARTH_SERVE_ENGINES:-new}; do
    eng=${engine%%:*}
    envs=()
    [[ "$engine" == *:* ]] && read -ra envs <<< "$(tr , ' ' <<< "${engine#*:}")"
    SE="$E"
    [ "$eng" = old ] && SE="$B/hearth-engine-old"
    for kv in ${HEARTH_SERVE_KV:-auto}; do
    cat > /tmp/q8b-serve.yaml <<YAML
name: qwen3-8b-random
model: /tmp/q8b
served_model_name: qwen3-8b
engine: {device: cuda, max_model_len: 4096, max_num_seqs: ${HEARTH_SERVE_MAX_SEQS:-64}, gpu_memory_utilization: 0.95, kv_cache_dtype: $kv${HEARTH_SERVE_QUANT:+, quantization: $HEARTH_SERVE_QUANT}}
server: {host: 127.0.0.1, port: 8321}
YAML
    echo "== serve ($eng), kv_cache_dtype $kv" | tee -a "$OUT/summary.txt"
    s=$(date +%s.%N); env "${envs[@]}" "$SE" serve --spec /tmp/q8b-serve.yaml > "$OUT/serve_log_${eng}_$kv.txt" 2>&1 & pid=$!
    until curl -sf localhost:8321/ready > /dev/null; do sleep 0.1; kill -0 $pid 2>/dev/null || break; done
    echo "cold start to /ready: $(awk "BEGIN{print $(date +%s.%N) - $s}") s" | tee -a "$OUT/summary.txt"
    grep -i "phase" "$OUT/serve_log_${eng}_$kv.txt" | tee -a "$OUT/summary.txt"
    curl -s localhost:8321/v1/completions -H 'content-type: application/json' -d '{"model":"qwen3-8b","prompt":"The capital of France is","max_tokens":8}' | tee -a "$OUT/summary.txt"
    # Sampled on the GPU (temperature, top-p): the same seed gives the same text.
    for i in 1 2; do
        curl -s localhost:8321/v1/completions -H 'content-type: application/json' -d '{"model":"qwen3-8b","prompt":"Once upon a time","max_tokens":12,"temperature":0.8,"top_p":0.9,"seed":7}' | tee -a "$OUT/summary.txt"; echo | tee -a "$OUT/summary.txt"
    done
    # The HTTP load generator (hearth bench): one wave of requests per level, 1000-token
    # prompts, 1000 output tokens.
    for c in ${HEARTH_BENCH_LEVELS:-1 8 32 64}; do
        t "http_${eng}_${kv}_c$c" "$B/hearth" bench --url http://127.0.0.1:8321 --concurrency $c --requests $((c > 1 ? c : 2)) --input-len 1000 --output-len 1000 --out "$OUT/http_${eng}_${kv}_c$c"
        grep "^|" "$OUT/http_${eng}_${kv}_c$c/bench.md" | tail -1 | tee -a "$OUT/summary.txt"
    done
    kill $pid; wait $pid
    done
    done
    ;;
smollm2)
    if [ -e /tmp/smol.gguf ]; then
        # Against transformers' golden greedy tokens (tests/fixtures/smollm2/golden.json).
        HEARTH_TEST_CUDA=1 HEARTH_SMOLLM2_GGUF=/tmp/smol.gguf t smol_golden "$B/smollm2_golden" --nocapture
        # compute-sanitizer over a short generate run (3 prompts batched: prefill past the GEMV
        # rows, decode graphs, tensor-core attention).
        t memcheck_generate compute-sanitizer --tool memcheck --error-exitcode 9 "$E" generate --model /tmp/smol.gguf --device cuda --max-tokens 16 -p "What is the capital of France?" -p "Write a haiku about the sea." -p "List three prime numbers."
        for d in cpu cuda; do
            t "smol_$d" "$E" generate --model /tmp/smol.gguf --device $d --max-tokens 48 -p "What is the capital of France?" -p "Write a haiku about the sea." -p "List three prime numbers."
        done
        diff <(grep -v -i "INFO\|WARN" "$OUT/smol_cpu.txt") <(grep -v -i "INFO\|WARN" "$OUT/smol_cuda.txt") > "$OUT/smol_diff.txt" && echo "smollm2 greedy: identical" | tee -a "$OUT/summary.txt" || echo "smollm2 greedy: DIFFERENT" | tee -a "$OUT/summary.txt"
    else
        echo "smollm2: GGUF parts missing" | tee -a "$OUT/summary.txt"
    fi
    ;;
gemvk)
    t gemvk_build /usr/local/cuda/bin/nvcc -O3 -arch=sm_90a -o /tmp/gemv_bench tests/device/gemv_bench.cu
    t gemvk timeout 240 /tmp/gemv_bench
    ;;
gemvrows)
    read -ra GV <<< "${GEMV_VARIANTS:-base:engine/kernels/cu}"
    for v in "${GV[@]}"; do
        /usr/local/cuda/bin/nvcc -O3 -lineinfo -std=c++17 -gencode arch=compute_90a,code=sm_90a "-DGEMV_CU=\"$PWD/${v#*:}/gemv.cu\"" -I engine/kernels/cu -o "/tmp/gemvrows_${v%%:*}" tests/device/gemv_rows_bench.cu > "$OUT/gemvrows_build_${v%%:*}.txt" 2>&1 &
    done
    wait
    for v in "${GV[@]}"; do t "gemvrows_${v%%:*}" timeout 200 "/tmp/gemvrows_${v%%:*}"; done
    if [ -n "${GEMV_NCU:-}" ]; then
        v=${GV[0]%%:*}
        for k in gemv_swiglu_fp8_8_2 gemv_fp8_8_8 gemv_swiglu_bf16_8_4; do
            kk=(-k "regex:^$k\$" --launch-skip 3 --launch-count 1)
            t "gemvrows_ncu_$k" ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats "${kk[@]}" "/tmp/gemvrows_$v"
            ncu "${kk[@]}" --section SourceCounters --page source --print-source sass --csv "/tmp/gemvrows_$v" > "$OUT/gemvrows_ncu_$k.csv" 2>&1
            t "gemvrows_stalls_$k" python3 tests/device/ncu_top_stalls.py "$OUT/gemvrows_ncu_$k.csv" 30
        done
    fi
    ;;
fp8k)
    t fp8k_build /usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o /tmp/fp8_gemm_bench tests/device/fp8_gemm_bench.cu -lcuda
    t fp8k timeout 300 /tmp/fp8_gemm_bench
    ;;
fp8pre)
    t fp8pre_build /usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o /tmp/fp8_prefill_bench tests/device/fp8_prefill_bench.cu -lcublasLt
    t fp8pre timeout 300 /tmp/fp8_prefill_bench
    ;;
dattn)
    IFS=';' read -ra DV <<< "${DATTN_VARIANTS:-base:}"
    for v in "${DV[@]}"; do
        # shellcheck disable=SC2086
        /usr/local/cuda/bin/nvcc -O3 -lineinfo -std=c++17 -gencode arch=compute_90a,code=sm_90a ${v#*:} -I engine/kernels/cu -o "/tmp/dattn_${v%%:*}" tests/device/decode_attn_bench.cu > "$OUT/dattn_build_${v%%:*}.txt" 2>&1 &
    done
    wait
    for r in $(seq "${DATTN_ROUNDS:-2}"); do
        for v in "${DV[@]}"; do t "dattn_${v%%:*}_$r" timeout 200 "/tmp/dattn_${v%%:*}"; done
    done
    # DATTN_NCU=1: Nsight Compute on the first variant's fp8 launch at 64 rows x 1,536 keys.
    if [ -n "${DATTN_NCU:-}" ]; then
        v=${DV[0]%%:*}
        k=(-k regex:attn_decode_tc_fp8_128 --launch-skip 5 --launch-count 1)
        t dattn_ncu ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy "${k[@]}" "/tmp/dattn_$v"
        ncu "${k[@]}" --section SourceCounters --page source --print-source sass --csv "/tmp/dattn_$v" > "$OUT/dattn_ncu_source.csv" 2>&1
        t dattn_stalls python3 tests/device/ncu_top_stalls.py "$OUT/dattn_ncu_source.csv" 40
    fi
    ;;
pwg)
    # The wgmma prefill attention in the engine: the attention op tests (its bits against the
    # mma.sync kernel's) and memcheck over them, then pp8192 with it and with
    # HEARTH_PREFILL_ATTN=mma in turn, twice, in this one command: bf16 weights and cache, fp8
    # weights, fp8 weights and cache.
    HEARTH_TEST_CUDA=1 t cuda_attention "$B/cuda_attention" --nocapture --test-threads=1
    HEARTH_TEST_CUDA=1 t memcheck_attn compute-sanitizer --tool memcheck --error-exitcode 9 "$B/cuda_attention" --test-threads=1
    make_models q8b
    printf 'name: q8b-fp8kv\nmodel: /tmp/q8b\nengine: {device: cuda, kv_cache_dtype: fp8, quantization: fp8, max_model_len: 9216}\n' > /tmp/q8b-fp8kv.yaml
    for r in 1 2; do
        for v in wg mma; do
            a=(); [ $v = mma ] && a=(HEARTH_PREFILL_ATTN=mma)
            t "pp_bf16_${v}_$r" env "${a[@]}" "$E" bench --model /tmp/q8b -p 8192 -n 1 -r 2 -u 8192
            t "pp_fp8w_${v}_$r" env "${a[@]}" "$E" bench --model /tmp/q8b --quantization fp8 -p 8192 -n 1 -r 2 -u 8192
            t "pp_fp8kv_${v}_$r" env "${a[@]}" "$E" bench --spec /tmp/q8b-fp8kv.yaml -p 8192 -n 1 -r 2 -u 8192
        done
    done
    grep -H "pp8192" "$OUT"/pp_*.txt | tee -a "$OUT/summary.txt"
    ;;
pattn)
    IFS=';' read -ra PV <<< "${PATTN_VARIANTS:-base:}"
    for v in "${PV[@]}"; do
        # shellcheck disable=SC2086
        /usr/local/cuda/bin/nvcc -O3 -lineinfo -std=c++17 -gencode arch=compute_90a,code=sm_90a ${v#*:} -I engine/kernels/cu -o "/tmp/pattn_${v%%:*}" tests/device/prefill_attn_bench.cu > "$OUT/pattn_build_${v%%:*}.txt" 2>&1 &
    done
    wait
    for v in "${PV[@]}"; do t "pattn_${v%%:*}" timeout 200 "/tmp/pattn_${v%%:*}"; done
    ;;
readpat)
    t readpat_build /usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o /tmp/read_pattern_bench tests/device/read_pattern_bench.cu
    t readpat timeout 120 /tmp/read_pattern_bench
    ;;
kvstride)
    t kvstride_build /usr/local/cuda/bin/nvcc -O3 -arch=sm_90a -o /tmp/kv_stride_bench tests/device/kv_stride_bench.cu
    t kvstride timeout 120 /tmp/kv_stride_bench
    ;;
chain)
    t chain_build /usr/local/cuda/bin/nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/chain_bench tests/device/chain_bench.cu
    t chain timeout 240 /tmp/chain_bench
    ;;
esac; done
cat "$OUT/summary.txt"
# The device tool brings back at most 8 files: everything in one archive, plus the summary.
tar czf /tmp/hearth-results.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete &&
    mv /tmp/hearth-results.tgz "$OUT/results.tgz"
