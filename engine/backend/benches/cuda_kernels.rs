//! Speed of each CUDA op at the shapes of a real model (Qwen3-8B by default), against the
//! device-to-device copy bandwidth measured in the same run: weight bytes per second for the
//! linears, KV bytes per second for decode attention (bytes read, against the copy's read +
//! write rate), TFLOP/s for prefill GEMMs and attention.
//! What the tuning of a kernel is judged by, op by op; `hearth-engine bench` measures the model.
//!
//! Run on a GPU machine: `cargo bench -p hearth-backend --features cuda --bench cuda_kernels`
//! (or the built binary with `--bench`). Without HEARTH_TEST_CUDA=1 it says so and exits.
//! HEARTH_BENCH_OPS=linear,attn,prefill,elementwise picks sections; HEARTH_BENCH_FP8=1 runs the
//! linears (not the LM head) on fp8 weights (a byte a weight); HEARTH_BENCH_ROWS=16,64 picks the
//! linears' row counts.
#![allow(clippy::unwrap_used)]

#[cfg(feature = "cuda")]
fn main() {
    bench::main();
}

#[cfg(not(feature = "cuda"))]
fn main() {
    println!("cuda_kernels: built without the cuda feature");
}

#[cfg(feature = "cuda")]
mod bench {
    use std::time::Instant;

    use hearth_backend::{
        AttnMetadata, AttnShape, Backend, CudaBackend, ForwardBatch, HostWeight, KvCacheSpec,
        KvDtype, RopeSpec, RopeWrite, SeqAttn,
    };

    // Qwen3-8B.
    const HIDDEN: usize = 4096;
    const N_HEADS: usize = 32;
    const N_KV: usize = 8;
    const HD: usize = 128;
    const INTER: usize = 12288;
    const VOCAB: usize = 151_936;
    const BLOCK: usize = 16;

    pub fn main() {
        if std::env::var("HEARTH_TEST_CUDA").as_deref() != Ok("1") {
            println!("cuda_kernels: set HEARTH_TEST_CUDA=1 on a GPU machine");
            return;
        }
        let gpu = CudaBackend::new(0).unwrap();
        let info = gpu.device_info().unwrap();
        let copy = gpu.copy_bandwidth(1 << 30).unwrap();
        println!(
            "{}: device-to-device copy {:.0} GB/s (bytes read + written)",
            info.name,
            copy / 1e9
        );
        let sections = std::env::var("HEARTH_BENCH_OPS")
            .unwrap_or_else(|_| "linear,attn,prefill,elementwise".into());
        let on = |s: &str| sections.split(',').any(|x| x == s);
        if on("linear") {
            linears(&gpu, copy);
        }
        if on("attn") {
            decode_attention(&gpu, copy);
        }
        if on("prefill") {
            prefill(&gpu);
        }
        if on("elementwise") {
            elementwise(&gpu, copy);
        }
    }

    /// Mean seconds of `f` over enough runs to take ~0.2 s (after a warm-up run).
    fn time(gpu: &CudaBackend, mut f: impl FnMut()) -> f64 {
        f();
        gpu.synchronize().unwrap();
        let t0 = Instant::now();
        f();
        gpu.synchronize().unwrap();
        let once = t0.elapsed().as_secs_f64();
        let reps = ((0.2 / once.max(1e-6)) as usize).clamp(3, 2000);
        let t0 = Instant::now();
        for _ in 0..reps {
            f();
        }
        gpu.synchronize().unwrap();
        t0.elapsed().as_secs_f64() / reps as f64
    }

    fn rand(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect()
    }

    fn host_matrix(rows: usize, cols: usize, seed: u64) -> HostWeight {
        let v: Vec<f32> = rand(rows * cols, seed).iter().map(|x| x * 0.05).collect();
        HostWeight::f32("w", vec![rows, cols], v)
    }

    fn matrix(
        gpu: &CudaBackend,
        rows: usize,
        cols: usize,
        seed: u64,
    ) -> <CudaBackend as Backend>::Weight {
        gpu.upload(host_matrix(rows, cols, seed)).unwrap()
    }

    /// Whether the linears run on fp8 weights (HEARTH_BENCH_FP8=1).
    fn fp8() -> bool {
        std::env::var("HEARTH_BENCH_FP8").as_deref() == Ok("1")
    }

    /// A linear layer's host matrix: `host_matrix`, in fp8 where HEARTH_BENCH_FP8=1 says so.
    fn linear_host(rows: usize, cols: usize, seed: u64) -> HostWeight {
        let w = host_matrix(rows, cols, seed);
        if fp8() {
            w.to_fp8()
        } else {
            w
        }
    }

    /// Matrices uploaded together, as a model uploads Q/K/V and gate/up.
    fn group(
        gpu: &CudaBackend,
        rows: &[usize],
        cols: usize,
        seed: u64,
    ) -> Vec<<CudaBackend as Backend>::Weight> {
        let ws = rows
            .iter()
            .zip(seed..)
            .map(|(&r, s)| linear_host(r, cols, s))
            .collect();
        gpu.upload_group(ws).unwrap()
    }

    /// A batch of `m` single rows (decode), every row its own sequence of `ctx` tokens
    /// (`ctx` = 0: no KV metadata needed).
    fn decode_batch(m: usize, ctx: usize) -> ForwardBatch {
        let blocks = ctx.div_ceil(BLOCK);
        ForwardBatch {
            tokens: vec![1; m],
            positions: vec![ctx.saturating_sub(1) as u32; m],
            attn: AttnMetadata {
                seqs: (0..m)
                    .map(|i| SeqAttn {
                        query_start: i,
                        query_len: 1,
                        context_len: ctx,
                        block_table: (0..blocks).map(|b| (i * blocks + b) as u32).collect(),
                    })
                    .collect(),
                prefill: vec![false; m],
                slot_mapping: (0..m)
                    .map(|i| ((i * blocks) * BLOCK + ctx.saturating_sub(1)) as u32)
                    .collect(),
            },
            logits_rows: (0..m).collect(),
        }
    }

    /// One sequence prefilling tokens `start .. start + n`.
    fn prefill_batch(start: usize, n: usize) -> ForwardBatch {
        let ctx = start + n;
        ForwardBatch {
            tokens: vec![1; n],
            positions: (start as u32..ctx as u32).collect(),
            attn: AttnMetadata {
                seqs: vec![SeqAttn {
                    query_start: 0,
                    query_len: n,
                    context_len: ctx,
                    block_table: (0..ctx.div_ceil(BLOCK) as u32).collect(),
                }],
                prefill: vec![true; n],
                slot_mapping: (start as u32..ctx as u32).collect(),
            },
            logits_rows: vec![n - 1],
        }
    }

    fn linears(gpu: &CudaBackend, copy: f64) {
        println!("\n## linear: weight GB/s (% of copy bandwidth), prefill TFLOP/s");
        println!("| op | N x K | M | us | GB/s | % copy | TFLOP/s |");
        println!("|---|---|---:|---:|---:|---:|---:|");
        // Copies of the smaller matrices, used in turn, so none is served from the 50 MB L2.
        let copies = |rows, cols, seed, n: u64| -> Vec<_> {
            (0..n)
                .map(|i| gpu.upload(linear_host(rows, cols, seed + 10 * i)).unwrap())
                .collect()
        };
        let qkv: Vec<_> = (0..4)
            .map(|i| {
                group(
                    gpu,
                    &[N_HEADS * HD, N_KV * HD, N_KV * HD],
                    HIDDEN,
                    1 + 10 * i,
                )
            })
            .collect();
        let o = copies(HIDDEN, N_HEADS * HD, 4, 4);
        let gate_up = group(gpu, &[INTER, INTER], HIDDEN, 5);
        let down = copies(HIDDEN, INTER, 7, 2);
        let head = matrix(gpu, VOCAB, HIDDEN, 8);
        let rows: Vec<usize> = std::env::var("HEARTH_BENCH_ROWS")
            .map(|v| v.split(',').filter_map(|r| r.trim().parse().ok()).collect())
            .unwrap_or_else(|_| vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 8192]);
        for m in rows {
            let kinds = vec![m > 256; m];
            let report = |op: &str, n: usize, kk: usize, t: f64| {
                let per_weight = if fp8() && op != "lm_head" { 1 } else { 2 };
                let bytes = (n * kk * per_weight) as f64;
                let flops = 2.0 * (m * n * kk) as f64;
                println!(
                    "| {op} | {n} x {kk} | {m} | {:.1} | {:.0} | {:.1} | {:.1} |",
                    t * 1e6,
                    bytes / t / 1e9,
                    100.0 * bytes / t / copy,
                    flops / t / 1e12
                );
            };
            gpu.begin_step(&decode_batch(m, 0));
            let x = gpu.buf_from_host(&rand(m * HIDDEN, 9));
            let xi = gpu.buf_from_host(&rand(m * INTER, 10));
            let (mut y0, mut y1, mut y2) = (gpu.buf(0), gpu.buf(0), gpu.buf(0));
            let mut i = 0;
            let t = time(gpu, || {
                i += 1;
                let w = &qkv[i % 4];
                let w = [&w[0], &w[1], &w[2]];
                gpu.linear_qkv(&x, &kinds, w, None, [&mut y0, &mut y1, &mut y2])
            });
            report("qkv", (N_HEADS + 2 * N_KV) * HD, HIDDEN, t);
            let t = time(gpu, || {
                i += 1;
                gpu.linear(&x, &kinds, &o[i % 4], None, &mut y0)
            });
            report("o", HIDDEN, HIDDEN, t);
            let t = time(gpu, || {
                gpu.linear_swiglu(&x, &kinds, &gate_up[0], &gate_up[1], &mut y1)
            });
            report("gate+up (swiglu)", 2 * INTER, HIDDEN, t);
            let t = time(gpu, || {
                i += 1;
                gpu.linear(&xi, &kinds, &down[i % 2], None, &mut y2)
            });
            report("down", HIDDEN, INTER, t);
            if m <= 256 {
                let t = time(gpu, || gpu.linear(&x, &kinds, &head, None, &mut y0));
                report("lm_head", VOCAB, HIDDEN, t);
            }
        }
    }

    fn kv_cache(
        gpu: &CudaBackend,
        blocks: usize,
        dtype: KvDtype,
    ) -> <CudaBackend as Backend>::KvCache {
        gpu.alloc_kv(KvCacheSpec {
            num_layers: 1,
            num_blocks: blocks,
            block_size: BLOCK,
            num_kv_heads: N_KV,
            head_dim: HD,
            dtype,
            latent: false,
        })
        .unwrap()
    }

    const SHAPE: AttnShape = AttnShape {
        n_heads: N_HEADS,
        n_kv_heads: N_KV,
        head_dim: HD,
        scale: 0.088_388_35,
    };

    fn decode_attention(gpu: &CudaBackend, copy: f64) {
        println!("\n## decode attention: KV GB/s (% of copy bandwidth)");
        println!("| kv | rows | context | us | GB/s | % copy |");
        println!("|---|---:|---:|---:|---:|---:|");
        for dtype in [KvDtype::Bf16, KvDtype::Fp8E4m3] {
            for (m, ctx) in [
                (1usize, 1024usize),
                (1, 8192),
                (1, 32768),
                (8, 2048),
                (32, 1536),
                (64, 1536),
                (64, 4096),
                (128, 1536),
            ] {
                let cache = kv_cache(gpu, m * ctx.div_ceil(BLOCK), dtype);
                let step = gpu.begin_step(&decode_batch(m, ctx));
                let q = gpu.buf_from_host(&rand(m * N_HEADS * HD, 11));
                let mut out = gpu.buf(0);
                let t = time(gpu, || gpu.attention(&cache, 0, &q, SHAPE, &step, &mut out));
                let bytes = (m * ctx * N_KV * HD * 2 * dtype.bytes()) as f64;
                println!(
                    "| {} | {m} | {ctx} | {:.1} | {:.0} | {:.1} |",
                    dtype.name(),
                    t * 1e6,
                    bytes / t / 1e9,
                    100.0 * bytes / t / copy
                );
            }
        }
    }

    fn prefill(gpu: &CudaBackend) {
        println!("\n## prefill attention (causal): TFLOP/s");
        println!("| kv | cached | new tokens | ms | TFLOP/s |");
        println!("|---|---:|---:|---:|---:|");
        for dtype in [KvDtype::Bf16, KvDtype::Fp8E4m3] {
            for (start, n) in [(0usize, 512usize), (0, 2048), (0, 8192), (6144, 2048)] {
                let cache = kv_cache(gpu, (start + n).div_ceil(BLOCK), dtype);
                let step = gpu.begin_step(&prefill_batch(start, n));
                let q = gpu.buf_from_host(&rand(n * N_HEADS * HD, 12));
                let mut out = gpu.buf(0);
                let t = time(gpu, || gpu.attention(&cache, 0, &q, SHAPE, &step, &mut out));
                // QK^T and PV over the visible keys of every row.
                let pairs: f64 = (0..n).map(|r| (start + r + 1) as f64).sum();
                let flops = 4.0 * (N_HEADS * HD) as f64 * pairs;
                println!(
                    "| {} | {start} | {n} | {:.2} | {:.1} |",
                    dtype.name(),
                    t * 1e3,
                    flops / t / 1e12
                );
            }
        }
    }

    fn elementwise(gpu: &CudaBackend, copy: f64) {
        println!("\n## elementwise at prefill size: GB/s moved (% of copy bandwidth)");
        println!("| op | rows | us | GB/s | % copy |");
        println!("|---|---:|---:|---:|---:|");
        let norm = gpu
            .upload(HostWeight::f32("n", vec![HIDDEN], vec![1.0; HIDDEN]))
            .unwrap();
        let qk_norm = gpu
            .upload(HostWeight::f32("qn", vec![HD], vec![1.0; HD]))
            .unwrap();
        let rope = RopeSpec::new(1_000_000.0, HD, HD, true, None);
        for m in [64, 8192] {
            let report = |op: &str, bytes: usize, t: f64| {
                println!(
                    "| {op} | {m} | {:.1} | {:.0} | {:.1} |",
                    t * 1e6,
                    bytes as f64 / t / 1e9,
                    100.0 * bytes as f64 / t / copy
                );
            };
            let step = gpu.begin_step(&prefill_batch(0, m));
            let mut res = gpu.buf_from_host(&rand(m * HIDDEN, 13));
            let x = gpu.buf_from_host(&rand(m * HIDDEN, 14));
            let mut h = gpu.buf(0);
            let t = time(gpu, || gpu.add_rms_norm(&mut res, &x, &norm, 1e-6, &mut h));
            // residual and x read, residual written (f32), h written (bf16 past the GEMV rows).
            report(
                "add_rms_norm",
                m * HIDDEN * (12 + if m > gpu.gemv_rows() { 2 } else { 4 }),
                t,
            );
            let g = gpu.buf_from_host(&rand(m * INTER, 15));
            let u = gpu.buf_from_host(&rand(m * INTER, 16));
            let mut act = gpu.buf(0);
            let t = time(gpu, || gpu.silu_mul(&g, &u, &mut act));
            report("silu_mul", m * INTER * 4 * 3, t);
            let mut cache = kv_cache(gpu, m.div_ceil(BLOCK), KvDtype::Bf16);
            let mut q = gpu.buf_from_host(&rand(m * N_HEADS * HD, 17));
            let mut k = gpu.buf_from_host(&rand(m * N_KV * HD, 18));
            let v = gpu.buf_from_host(&rand(m * N_KV * HD, 19));
            let rw = RopeWrite {
                qk_norm: Some([&qk_norm, &qk_norm]),
                eps: 1e-6,
                n_heads: N_HEADS,
                n_kv_heads: N_KV,
                rope: &rope,
                layer: 0,
            };
            let t = time(gpu, || {
                gpu.rope_write_kv((&mut q, &mut k, &v), &rw, &mut cache, &step)
            });
            // q and k read and written, v read (f32), k and v written (bf16).
            report(
                "rope_write_kv",
                m * HD * (N_HEADS * 8 + N_KV * 8 + N_KV * 4 + 2 * N_KV * 2),
                t,
            );
        }
    }
}
