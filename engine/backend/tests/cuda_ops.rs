//! The CUDA ops besides the linears (`cuda_linear.rs`), attention (`cuda_attention.rs`) and MoE
//! / MLA (`cuda_moe_mla.rs`) against the CPU backend (the reference) on random data: norms, the
//! fused q/k norm + rotary + cache write (NeoX and interleaved, partial), SiLU product,
//! embedding, logits gather and sampling.
//!
//! Runs with the `cuda` feature where HEARTH_TEST_CUDA=1 says a GPU is there. Tolerances are
//! bf16's: weights, the KV cache and GEMM inputs are stored in bf16 on the GPU.
#![cfg(feature = "cuda")]
#![allow(clippy::unwrap_used)]

use hearth_backend::{
    AttnMetadata, AttnShape, Backend, CpuBackend, ForwardBatch, KvCacheSpec, RopeSpec, RopeWrite,
    SeqAttn, NO_SLOT,
};

mod common;
use common::{batch, bf, gpu, max_rel, rand, upload, Pair};

/// The fused q/k norm + rotary + cache write against the CPU's separate ops, with and without
/// q/k norms, NeoX and interleaved, partial rotary, and a padding row that must write nothing.
#[test]
fn rope_write_kv_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new(2).unwrap();
    let p = Pair {
        cpu: &cpu,
        gpu: &gpu,
    };
    let (rows, n_heads, n_kv, hd, bs) = (4, 4, 2, 64, 4);
    let spec = KvCacheSpec {
        num_layers: 2,
        num_blocks: 4,
        block_size: bs,
        num_kv_heads: n_kv,
        head_dim: hd,
        dtype: Default::default(),
        latent: false,
    };
    let mut b = batch(rows);
    b.attn.slot_mapping = vec![4, 5, NO_SLOT, 8];
    let (qn, qng) = p.w("qn", vec![hd], &rand(hd, 40));
    let (kn, kng) = p.w("kn", vec![hd], &rand(hd, 41));
    for (norm, neox, rotary) in [(true, true, 64), (false, false, 64), (true, true, 32)] {
        let rope = RopeSpec::new(10000.0, hd, rotary, neox, None);
        fn rw<'a, W>(qk_norm: Option<[&'a W; 2]>, rope: &'a RopeSpec) -> RopeWrite<'a, W> {
            RopeWrite {
                qk_norm,
                eps: 1e-6,
                n_heads: 4,
                n_kv_heads: 2,
                rope,
                layer: 1,
            }
        }
        let (q, k, v) = (
            rand(rows * n_heads * hd, 42),
            rand(rows * n_kv * hd, 43),
            bf(&rand(rows * n_kv * hd, 44)),
        );
        let (mut cc, mut cg) = (cpu.alloc_kv(spec).unwrap(), gpu.alloc_kv(spec).unwrap());
        let (mut qc, mut kc) = (q.clone(), k.clone());
        // The CPU has no padding rows: its copy of row 2 goes to a slot nothing reads.
        let mut bc = b.clone();
        bc.attn.slot_mapping[2] = 15;
        let scc = cpu.begin_step(&bc);
        cpu.rope_write_kv(
            (&mut qc, &mut kc, &v),
            &rw(norm.then_some([&qn, &kn]), &rope),
            &mut cc,
            &scc,
        );
        let sg = gpu.begin_step(&b);
        let (mut qg, mut kg, vg) = (upload(&gpu, &q), upload(&gpu, &k), upload(&gpu, &v));
        gpu.rope_write_kv(
            (&mut qg, &mut kg, &vg),
            &rw(norm.then_some([&qng, &kng]), &rope),
            &mut cg,
            &sg,
        );
        let (dq, dk) = (
            max_rel(&gpu.to_host(&qg), &qc),
            max_rel(&gpu.to_host(&kg), &kc),
        );
        println!("rope_write_kv norm={norm} neox={neox} rotary={rotary}: q {dq:.2e} k {dk:.2e}");
        assert!(dq < 1e-5 && dk < 1e-5, "rope_write_kv q {dq} k {dk}");
        // The cache, read back through attention: keys 0 and 1 of block 1 (rows 0 and 1),
        // key 0 of block 2 (row 3), key 0 of block 3 (never written: the padding row's).
        let seq = |i: usize, ctx: usize, block: u32| SeqAttn {
            query_start: i,
            query_len: 1,
            context_len: ctx,
            block_table: vec![block],
        };
        let probe = ForwardBatch {
            tokens: vec![0; 3],
            positions: vec![1, 0, 0],
            attn: AttnMetadata {
                seqs: vec![seq(0, 2, 1), seq(1, 1, 2), seq(2, 1, 3)],
                prefill: vec![false; 3],
                slot_mapping: vec![5, 8, 12],
            },
            logits_rows: vec![0, 1, 2],
        };
        let shape = AttnShape {
            n_heads,
            n_kv_heads: n_kv,
            head_dim: hd,
            scale: 0.125,
        };
        let pq = rand(3 * n_heads * hd, 45);
        let sc = cpu.begin_step(&probe);
        let mut ac = cpu.buf(0);
        cpu.attention(&cc, 1, &pq, shape, &sc, &mut ac);
        let sg = gpu.begin_step(&probe);
        let mut ag = gpu.buf(0);
        gpu.attention(&cg, 1, &upload(&gpu, &pq), shape, &sg, &mut ag);
        let got = gpu.to_host(&ag);
        let d = max_rel(&got, &ac);
        // Decode attention (head_dim 64) runs on the tensor cores: Q and P in bf16.
        assert!(d < 2e-2, "rope_write_kv cache contents: {d}");
        assert!(
            got[2 * n_heads * hd..].iter().all(|x| *x == 0.0),
            "the padding row wrote into the cache"
        );
        assert!(ac[..n_heads * hd].iter().any(|x| *x != 0.0));
    }
}

/// Sampling on the GPU picks what the host reference (hearth_backend::sample) picks, for greedy,
/// temperature, top-k, top-p and min-p rows.
#[test]
fn gpu_sampling_matches_the_host_reference() {
    use hearth_backend::sample::sample_row;
    use hearth_backend::SampleRow;
    let Some(gpu) = gpu() else { return };
    let vocab = 151_936;
    let row = |temperature, top_k, top_p, min_p, u| SampleRow {
        temperature,
        top_k,
        top_p,
        min_p,
        u,
    };
    let rows = [
        SampleRow::GREEDY,
        row(1.0, 0, 1.0, 0.0, 0.31),
        row(0.7, 50, 1.0, 0.0, 0.52),
        row(1.0, 0, 0.9, 0.0, 0.83),
        row(1.2, 0, 1.0, 0.1, 0.27),
        row(0.8, 40, 0.95, 0.05, 0.66),
        row(1.0, 1, 1.0, 0.0, 0.9),
        row(0.6, 0, 0.5, 0.0, 0.999),
    ];
    let logits: Vec<f32> = rand(rows.len() * vocab, 50)
        .iter()
        .map(|x| x * 12.0)
        .collect();
    let want: Vec<u32> = logits
        .chunks_exact(vocab)
        .zip(&rows)
        .map(|(l, p)| sample_row(l, p))
        .collect();
    gpu.begin_step(&batch(rows.len()));
    let got = gpu.sample_rows(&upload(&gpu, &logits), vocab, &rows);
    println!("gpu sampling: {got:?} (host reference {want:?})");
    assert_eq!(got, want);
    // Different draws really move the sample, under every kind of threshold, each to the host's
    // token for a draw within 1e-4 of it: the running sums that pick it are added in another
    // order (and exp rounds differently), which can move a draw across a near boundary.
    for p in [
        row(1.0, 0, 1.0, 0.0, 0.0),
        row(0.9, 1000, 1.0, 0.0, 0.0),
        row(1.0, 0, 0.3, 0.0, 0.0),
        row(0.5, 200, 0.8, 0.0, 0.0),
    ] {
        let draws: Vec<SampleRow> = (0..16)
            .map(|i| SampleRow {
                u: i as f32 / 16.0,
                ..p
            })
            .collect();
        let host = |u: f32| sample_row(&logits[..vocab], &SampleRow { u, ..p });
        let all = logits[..vocab].repeat(draws.len());
        gpu.begin_step(&batch(draws.len()));
        let got = gpu.sample_rows(&upload(&gpu, &all), vocab, &draws);
        for (d, &g) in draws.iter().zip(&got) {
            let (lo, hi) = (host((d.u - 1e-4).max(0.0)), host(d.u + 1e-4));
            assert!(lo <= g && g <= hi, "{d:?}: gpu {g}, host {lo}..={hi}");
        }
        let spread: std::collections::HashSet<u32> = got.into_iter().collect();
        assert!(spread.len() > 8, "u must pick different tokens: {spread:?}");
    }
}

#[test]
fn norms_rope_silu_embedding_gather_match_cpu() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new(2).unwrap();
    let p = Pair {
        cpu: &cpu,
        gpu: &gpu,
    };
    // Rows the GEMVs take, so the norms write f32 (past them bf16 for the matmuls: 8e-3).
    let (rows, n) = (3, 96);
    let tol = if rows > gpu.gemv_rows() { 8e-3 } else { 1e-5 };
    let b = batch(rows);
    let sc = cpu.begin_step(&b);
    let sg = gpu.begin_step(&b);
    let x = rand(rows * n, 4);
    let (wc, wg) = p.w("norm", vec![n], &rand(n, 5));

    let mut oc = cpu.buf(0);
    cpu.rms_norm(&x, &wc, 1e-6, &mut oc);
    let mut og = gpu.buf(0);
    gpu.rms_norm(&upload(&gpu, &x), &wg, 1e-6, &mut og);
    assert!(max_rel(&gpu.to_host(&og), &oc) < tol, "rms_norm");

    let r = rand(rows * n, 6);
    let (mut rc, mut rg) = (r.clone(), upload(&gpu, &r));
    cpu.add_rms_norm(&mut rc, &x, &wc, 1e-6, &mut oc);
    gpu.add_rms_norm(&mut rg, &upload(&gpu, &x), &wg, 1e-6, &mut og);
    assert!(max_rel(&gpu.to_host(&og), &oc) < tol, "add_rms_norm out");
    assert!(
        max_rel(&gpu.to_host(&rg), &rc) < 1e-6,
        "add_rms_norm residual"
    );

    for (neox, rotary) in [(true, 32), (false, 32), (true, 16)] {
        let rope = RopeSpec::new(10000.0, 32, rotary, neox, None);
        let (mut xc, mut xg) = (x.clone(), upload(&gpu, &x));
        cpu.rope(&mut xc, &sc, 3, &rope);
        gpu.rope(&mut xg, &sg, 3, &rope);
        let d = max_rel(&gpu.to_host(&xg), &xc);
        assert!(d < 1e-5, "rope neox={neox} rotary={rotary}: {d}");
    }

    let u = rand(rows * n, 7);
    cpu.silu_mul(&x, &u, &mut oc);
    gpu.silu_mul(&upload(&gpu, &x), &upload(&gpu, &u), &mut og);
    assert!(max_rel(&gpu.to_host(&og), &oc) < 1e-5, "silu_mul");

    let (ec, eg) = p.w("embed", vec![50, n], &rand(50 * n, 8));
    cpu.embedding(&ec, &sc, &mut oc);
    gpu.embedding(&eg, &sg, &mut og);
    assert!(max_rel(&gpu.to_host(&og), &oc) < 1e-6, "embedding");

    cpu.gather_logits_rows(&x, n, &sc, &mut oc);
    gpu.gather_logits_rows(&upload(&gpu, &x), n, &sg, &mut og);
    assert_eq!(gpu.to_host(&og), oc, "gather");
}
