//! Paged attention on CUDA against the CPU backend (the reference) on random data: a mixed batch
//! (a chunked prefill with a cached prefix next to decode rows, GQA, scattered blocks), long
//! prefills (the tensor-core kernels, bf16 and fp8 caches, wgmma against mma.sync bit for bit),
//! decode rows split over their keys with padding rows, and a decode step's rotary + attention in
//! one launch against the three kernels.
//!
//! Runs with the `cuda` feature where HEARTH_TEST_CUDA=1 says a GPU is there. Tolerances are
//! bf16's: weights, the KV cache and GEMM inputs are stored in bf16 on the GPU.
#![cfg(feature = "cuda")]
#![allow(clippy::unwrap_used)]

use hearth_backend::{
    AttnMetadata, AttnShape, Backend, CpuBackend, CudaBackend, ForwardBatch, KvCacheSpec, KvDtype,
    RopeSpec, RopeWrite, SeqAttn,
};

mod common;
use common::{as_cached, bf, gpu, max_rel, rand, upload, Pair};

#[test]
fn paged_attention_matches_cpu_on_a_mixed_batch() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new(2).unwrap();
    for hd in [64, 128, 96, 160] {
        attention_case(&cpu, &gpu, hd, KvDtype::Bf16, (8, 2, 4));
        attention_case(&cpu, &gpu, hd, KvDtype::Fp8E4m3, (8, 2, 4));
    }
    // An odd GQA group (one head per prefill block) and a cache block that is not a power of two.
    attention_case(&cpu, &gpu, 128, KvDtype::Bf16, (6, 2, 3));
    attention_case(&cpu, &gpu, 64, KvDtype::Fp8E4m3, (6, 2, 3));
}

/// A long prefill chunk (1,100 tokens after a 60-token cached prefix: 18 tiles x 16 head pairs,
/// enough blocks for the two-heads-per-block tensor-core kernel on an H100) against the CPU; and
/// on compute capability 9.0, where it runs on wgmma, against the mma.sync kernel's bits.
#[test]
fn long_prefill_attention_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new(8).unwrap();
    // The backend reads the setting when it loads its kernels; another test's backend made
    // meanwhile would run the other kernel, which gives the same bits.
    std::env::set_var("HEARTH_PREFILL_ATTN", "mma");
    let mma = CudaBackend::new(0).unwrap();
    std::env::remove_var("HEARTH_PREFILL_ATTN");
    let (n_heads, n_kv, hd, bs) = (32usize, 8usize, 128usize, 16usize);
    let (cached, n) = (60usize, 1100usize);
    let ctx = cached + n;
    for dtype in [KvDtype::Bf16, KvDtype::Fp8E4m3] {
        let spec = KvCacheSpec {
            num_layers: 1,
            num_blocks: ctx.div_ceil(bs),
            block_size: bs,
            num_kv_heads: n_kv,
            head_dim: hd,
            dtype: Default::default(),
            latent: false,
        };
        let (mut kc, mut kg, mut km) = (
            cpu.alloc_kv(spec).unwrap(),
            gpu.alloc_kv(spec.with_dtype(dtype)).unwrap(),
            mma.alloc_kv(spec.with_dtype(dtype)).unwrap(),
        );
        // Blocks in reverse order, so the table really is followed.
        let table: Vec<u32> = (0..spec.num_blocks as u32).rev().collect();
        let slot = |p: usize| table[p / bs] * bs as u32 + (p % bs) as u32;
        let kv_dim = n_kv * hd;
        let (k, v) = (
            as_cached(dtype, &rand(ctx * kv_dim, 40)),
            as_cached(dtype, &rand(ctx * kv_dim, 41)),
        );
        let q = rand(n * n_heads * hd, 42);
        let step = ForwardBatch {
            tokens: vec![0; ctx],
            positions: (0..ctx as u32).collect(),
            attn: AttnMetadata {
                seqs: vec![],
                prefill: vec![true; ctx],
                slot_mapping: (0..ctx).map(slot).collect(),
            },
            logits_rows: vec![],
        };
        // The prefix and the chunk's keys into the cache, then the chunk's attention.
        let sc = cpu.begin_step(&step);
        cpu.write_kv(&mut kc, 0, &k, &v, &sc);
        let sg = gpu.begin_step(&step);
        gpu.write_kv(&mut kg, 0, &upload(&gpu, &k), &upload(&gpu, &v), &sg);
        let sm = mma.begin_step(&step);
        mma.write_kv(&mut km, 0, &upload(&mma, &k), &upload(&mma, &v), &sm);
        let chunk = ForwardBatch {
            tokens: vec![0; n],
            positions: (cached as u32..ctx as u32).collect(),
            attn: AttnMetadata {
                seqs: vec![SeqAttn {
                    query_start: 0,
                    query_len: n,
                    context_len: ctx,
                    block_table: table.clone(),
                }],
                prefill: vec![true; n],
                slot_mapping: (cached..ctx).map(slot).collect(),
            },
            logits_rows: vec![n - 1],
        };
        let shape = AttnShape {
            n_heads,
            n_kv_heads: n_kv,
            head_dim: hd,
            scale: 1.0 / (hd as f32).sqrt(),
        };
        let mut oc = cpu.buf(0);
        cpu.attention(&kc, 0, &q, shape, &cpu.begin_step(&chunk), &mut oc);
        let mut og = gpu.buf(0);
        let sg = gpu.begin_step(&chunk);
        gpu.attention(&kg, 0, &upload(&gpu, &q), shape, &sg, &mut og);
        let d = max_rel(&gpu.to_host(&og), &oc);
        println!(
            "long prefill attention, {} cache: max rel diff {d:.2e}",
            dtype.name()
        );
        assert!(d < 2e-2, "long prefill attention ({}): {d}", dtype.name());
        let mut om = mma.buf(0);
        let sm = mma.begin_step(&chunk);
        mma.attention(&km, 0, &upload(&mma, &q), shape, &sm, &mut om);
        assert!(
            gpu.to_host(&og) == mma.to_host(&om),
            "long prefill attention ({}): the default kernel and HEARTH_PREFILL_ATTN=mma differ",
            dtype.name()
        );
    }
}

/// Sequence A: 13 cached tokens, now a 70-token prefill chunk (positions 13..83, two tiles of the
/// tiled kernel) in scattered blocks. Sequence B: 10 cached, one decode row at position 10.
/// Sequence C: a 5-token chunk after 2 cached tokens (the per-row kernel). head_dim 160 is past
/// the tiled kernel's limit, so everything takes the per-row kernel there. `layout` is (query
/// heads, KV heads, cache block size).
fn attention_case(
    cpu: &CpuBackend,
    gpu: &CudaBackend,
    hd: usize,
    dtype: KvDtype,
    (n_heads, n_kv, bs): (usize, usize, usize),
) {
    // K and V as the GPU cache stores them, so only the attention arithmetic differs.
    let kv = |v: &[f32]| as_cached(dtype, v);
    let spec = KvCacheSpec {
        num_layers: 2,
        num_blocks: 64,
        block_size: bs,
        num_kv_heads: n_kv,
        head_dim: hd,
        dtype: Default::default(),
        latent: false,
    };
    let (mut kc, mut kg) = (
        cpu.alloc_kv(spec).unwrap(),
        gpu.alloc_kv(spec.with_dtype(dtype)).unwrap(),
    );
    let scattered = |i: u32| (i * 7 + 5) % 64;
    let (na, nb, nc) = (
        83usize.div_ceil(bs),
        11usize.div_ceil(bs),
        7usize.div_ceil(bs),
    );
    let a_blocks: Vec<u32> = (0..na as u32).map(scattered).collect();
    let b_blocks: Vec<u32> = (na as u32..(na + nb) as u32).map(scattered).collect();
    let c_blocks: Vec<u32> = ((na + nb) as u32..(na + nb + nc) as u32)
        .map(scattered)
        .collect();
    let slot = |blocks: &[u32], pos: usize| blocks[pos / bs] * bs as u32 + (pos % bs) as u32;
    let kv_dim = n_kv * hd;
    let fill = ForwardBatch {
        tokens: vec![0; 25],
        positions: (0..13).chain(0..10).chain(0..2).collect(),
        attn: AttnMetadata {
            seqs: vec![],
            prefill: vec![true; 25],
            slot_mapping: (0..13)
                .map(|p| slot(&a_blocks, p))
                .chain((0..10).map(|p| slot(&b_blocks, p)))
                .chain((0..2).map(|p| slot(&c_blocks, p)))
                .collect(),
        },
        logits_rows: vec![],
    };
    let (k0, v0) = (kv(&rand(25 * kv_dim, 10)), kv(&rand(25 * kv_dim, 11)));
    for layer in 0..2 {
        let sc = cpu.begin_step(&fill);
        cpu.write_kv(&mut kc, layer, &k0, &v0, &sc);
        let sg = gpu.begin_step(&fill);
        gpu.write_kv(&mut kg, layer, &upload(gpu, &k0), &upload(gpu, &v0), &sg);
    }
    let seq = |query_start, query_len, context_len, block_table: &Vec<u32>| SeqAttn {
        query_start,
        query_len,
        context_len,
        block_table: block_table.clone(),
    };
    let rows = 70 + 1 + 5;
    let step = ForwardBatch {
        tokens: vec![0; rows],
        positions: (13..83).chain([10]).chain(2..7).collect(),
        attn: AttnMetadata {
            seqs: vec![
                seq(0, 70, 83, &a_blocks),
                seq(70, 1, 11, &b_blocks),
                seq(71, 5, 7, &c_blocks),
            ],
            prefill: (0..rows).map(|r| r != 70).collect(),
            slot_mapping: (13..83)
                .map(|p| slot(&a_blocks, p))
                .chain([slot(&b_blocks, 10)])
                .chain((2..7).map(|p| slot(&c_blocks, p)))
                .collect(),
        },
        logits_rows: vec![69, 70, 75],
    };
    let (k1, v1) = (kv(&rand(rows * kv_dim, 12)), kv(&rand(rows * kv_dim, 13)));
    let q = rand(rows * n_heads * hd, 14);
    let shape = AttnShape {
        n_heads,
        n_kv_heads: n_kv,
        head_dim: hd,
        scale: 1.0 / (hd as f32).sqrt(),
    };
    let sc = cpu.begin_step(&step);
    cpu.write_kv(&mut kc, 1, &k1, &v1, &sc);
    let mut oc = cpu.buf(0);
    cpu.attention(&kc, 1, &q, shape, &sc, &mut oc);
    let sg = gpu.begin_step(&step);
    gpu.write_kv(&mut kg, 1, &upload(gpu, &k1), &upload(gpu, &v1), &sg);
    let mut og = gpu.buf(0);
    gpu.attention(&kg, 1, &upload(gpu, &q), shape, &sg, &mut og);
    let d = max_rel(&gpu.to_host(&og), &oc);
    println!(
        "paged attention head_dim {hd}, heads {n_heads}/{n_kv}, block {bs}, {} cache: max rel \
         diff {d:.2e}",
        dtype.name()
    );
    // The tensor-core prefill kernel (head_dim 64 and 128) rounds Q and P to bf16.
    let tolerance = if hd == 64 || hd == 128 { 2e-2 } else { 1e-4 };
    assert!(d < tolerance, "attention head_dim {hd}: {d}");
}

/// Writes random keys and values (seeds `seed` and `seed + 1`), rounded as a `dtype` cache
/// stores them, at `slots` of layer 0 on both backends.
fn fill_layer0(
    (cpu, gpu): (&CpuBackend, &CudaBackend),
    (kc, kg): (
        &mut <CpuBackend as Backend>::KvCache,
        &mut <CudaBackend as Backend>::KvCache,
    ),
    dtype: KvDtype,
    slots: Vec<u32>,
    kv_dim: usize,
    seed: u64,
) {
    let n = slots.len();
    let fill = ForwardBatch {
        tokens: vec![0; n],
        positions: vec![0; n],
        attn: AttnMetadata {
            seqs: vec![],
            prefill: vec![true; n],
            slot_mapping: slots,
        },
        logits_rows: vec![],
    };
    let (k, v) = (
        as_cached(dtype, &rand(n * kv_dim, seed)),
        as_cached(dtype, &rand(n * kv_dim, seed + 1)),
    );
    let sc = cpu.begin_step(&fill);
    cpu.write_kv(kc, 0, &k, &v, &sc);
    let sg = gpu.begin_step(&fill);
    gpu.write_kv(kg, 0, &upload(gpu, &k), &upload(gpu, &v), &sg);
}

/// Decode rows over long contexts take several splits (merged in a second kernel); a padding
/// row (no key, no slot) comes out as zeros and writes nothing; a row alone gets the same bits
/// as in a batch (whose merge takes the serial form, the row alone the wide one).
#[test]
fn split_decode_attention_matches_cpu_and_padding_rows_are_inert() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new(2).unwrap();
    for (hd, n_heads, n_kv, dtype) in [
        (128, 32, 8, KvDtype::Bf16),
        (64, 6, 2, KvDtype::Bf16),
        (96, 4, 4, KvDtype::Bf16),
        (128, 32, 8, KvDtype::Fp8E4m3),
        // A GQA group filling the tensor-core tile (16 heads), and no grouping (fp8, 64).
        (128, 16, 1, KvDtype::Bf16),
        (64, 4, 4, KvDtype::Fp8E4m3),
    ] {
        let bs = 16;
        let long = 3000;
        let short = 100;
        let blocks = (long + short) / bs + 2;
        let spec = KvCacheSpec {
            num_layers: 1,
            num_blocks: blocks,
            block_size: bs,
            num_kv_heads: n_kv,
            head_dim: hd,
            dtype: Default::default(),
            latent: false,
        };
        let (mut kc, mut kg) = (
            cpu.alloc_kv(spec).unwrap(),
            gpu.alloc_kv(spec.with_dtype(dtype)).unwrap(),
        );
        // Blocks in reverse order, so the tables really are followed.
        let table_a: Vec<u32> = (0..long.div_ceil(bs) as u32).rev().collect();
        let table_b: Vec<u32> = (table_a.len() as u32..blocks as u32).collect();
        let slot = |t: &[u32], p: usize| t[p / bs] * bs as u32 + (p % bs) as u32;
        let slots = (0..long)
            .map(|p| slot(&table_a, p))
            .chain((0..short).map(|p| slot(&table_b, p)))
            .collect();
        fill_layer0(
            (&cpu, &gpu),
            (&mut kc, &mut kg),
            dtype,
            slots,
            n_kv * hd,
            20,
        );
        // Two decode rows reading what is cached (context_len counts the row's own key,
        // written above), then a padding row for the GPU.
        let row = |i: usize, ctx: usize, t: &Vec<u32>| SeqAttn {
            query_start: i,
            query_len: 1,
            context_len: ctx,
            block_table: t.clone(),
        };
        let real = ForwardBatch {
            tokens: vec![0; 2],
            positions: vec![long as u32 - 1, short as u32 - 1],
            attn: AttnMetadata {
                seqs: vec![row(0, long, &table_a), row(1, short, &table_b)],
                prefill: vec![false; 2],
                slot_mapping: vec![slot(&table_a, long - 1), slot(&table_b, short - 1)],
            },
            logits_rows: vec![0, 1],
        };
        let mut padded = real.clone();
        padded.pad_decode(&[16]);
        let shape = AttnShape {
            n_heads,
            n_kv_heads: n_kv,
            head_dim: hd,
            scale: 1.0 / (hd as f32).sqrt(),
        };
        let q = rand(2 * n_heads * hd, 22);
        let mut q4 = q.clone();
        q4.resize(16 * n_heads * hd, 0.5);
        let sc = cpu.begin_step(&real);
        let mut oc = cpu.buf(0);
        cpu.attention(&kc, 0, &q, shape, &sc, &mut oc);
        let sg = gpu.begin_step(&padded);
        let mut og = gpu.buf(0);
        gpu.attention(&kg, 0, &upload(&gpu, &q4), shape, &sg, &mut og);
        let got = gpu.to_host(&og);
        let (rows, pad) = got.split_at(2 * n_heads * hd);
        let d = max_rel(rows, &oc);
        println!(
            "split decode attention head_dim {hd} heads {n_heads}/{n_kv} {}: max rel diff {d:.2e}",
            dtype.name()
        );
        // The tensor-core kernel (head_dim 64 and 128) rounds Q and P to bf16 (f16 for fp8).
        let tolerance = if hd == 64 || hd == 128 { 2e-2 } else { 1e-4 };
        assert!(d < tolerance, "split decode attention head_dim {hd}: {d}");
        assert!(pad.iter().all(|x| *x == 0.0), "padding rows must be zeros");
        let alone = ForwardBatch {
            tokens: vec![0],
            positions: vec![long as u32 - 1],
            attn: AttnMetadata {
                seqs: vec![row(0, long, &table_a)],
                prefill: vec![false],
                slot_mapping: vec![slot(&table_a, long - 1)],
            },
            logits_rows: vec![0],
        };
        let sg = gpu.begin_step(&alone);
        let mut o1 = gpu.buf(0);
        gpu.attention(
            &kg,
            0,
            &upload(&gpu, &q[..n_heads * hd]),
            shape,
            &sg,
            &mut o1,
        );
        let same_bits =
            |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        // The tensor-core kernel's 16-row launch writes bf16 (for the o-projection's GEMM,
        // which would round the f32 output of a row alone the same way): the row alone's f32
        // rounded.
        let alone = gpu.to_host(&o1);
        let alone = if hd == 64 || hd == 128 {
            bf(&alone)
        } else {
            alone
        };
        assert!(
            same_bits(&alone, &rows[..n_heads * hd]),
            "head_dim {hd}: a row alone must match its bits in a batch"
        );
        // And in a launch of 64 rows (the most a decode attention launch takes).
        let mut wide = real.clone();
        wide.pad_decode(&[64]);
        let mut q64 = q.clone();
        q64.resize(64 * n_heads * hd, 0.5);
        let sg = gpu.begin_step(&wide);
        let mut o64 = gpu.buf(0);
        gpu.attention(&kg, 0, &upload(&gpu, &q64), shape, &sg, &mut o64);
        assert!(
            same_bits(&gpu.to_host(&o64)[..2 * n_heads * hd], rows),
            "head_dim {hd}: rows in a 64-row launch must match their bits in a 16-row one"
        );
    }
}

/// A decode step (every row its sequence's one new token) runs its q/k norm + RoPE + cache write
/// and its decode attention as one launch (`rope_attention`), the splits of a row merged by the
/// block that finishes last. For one split, two and many, bf16 and fp8 caches, GQA groups of 4,
/// 16 and 3:
/// - three rows alone (one launch each, f32 out) run first, into cache slots nothing wrote yet;
/// - then 70 rows padded to 80 (two launches of at most 64 rows, bf16 out for the o-projection's
///   GEMM), whose 67 other rows' keys nothing wrote yet either;
/// - then the same step as `rope_write_kv` + `attention`, the three kernels;
/// - then the first three rows as a step of three (f32 out), one launch and the three kernels.
///
/// A key the fused launch failed to write, or read before writing it, would change the bits.
/// The 80-row and 3-row steps must have the three kernels' bits, the rows alone the 3-row step's
/// and those rounded to bf16 the 80-row step's, and the 80-row step must match the CPU: within
/// 3e-2 with a bf16 cache; with an fp8 one
/// within 6.5e-2, since the GPU stores each row's own key and value in e4m3 (half an ulp is
/// 2^-4 of the value), where the CPU keeps them in bf16, and a row of one key sees only its own.
#[test]
fn decode_rope_attention_matches_the_three_kernels() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new(2).unwrap();
    let p = Pair {
        cpu: &cpu,
        gpu: &gpu,
    };
    for (hd, n_heads, n_kv, dtype, norm) in [
        (128, 32, 8, KvDtype::Bf16, true),
        (128, 32, 8, KvDtype::Fp8E4m3, true),
        (64, 16, 1, KvDtype::Bf16, false),
        (64, 6, 2, KvDtype::Fp8E4m3, false),
    ] {
        let bs = 16;
        // Context lengths counting the row's own key: 1, 2 and 8 splits of 384 keys first,
        // then 67 rows of 1 to 1,561 keys.
        let lens: Vec<usize> = [100usize, 385, 3000]
            .into_iter()
            .chain((0..67).map(|j| 1 + (j * 389) % 1561))
            .collect();
        let rows = lens.len();
        let tables: Vec<Vec<u32>> = {
            let mut next = 0u32;
            lens.iter()
                .map(|len| {
                    let n = len.div_ceil(bs) as u32;
                    // Blocks in reverse order, so the tables really are followed.
                    let t = (next..next + n).rev().collect();
                    next += n;
                    t
                })
                .collect()
        };
        let blocks = tables.iter().map(Vec::len).sum();
        let spec = KvCacheSpec {
            num_layers: 1,
            num_blocks: blocks,
            block_size: bs,
            num_kv_heads: n_kv,
            head_dim: hd,
            dtype: Default::default(),
            latent: false,
        };
        let (mut kc, mut kg) = (
            cpu.alloc_kv(spec).unwrap(),
            gpu.alloc_kv(spec.with_dtype(dtype)).unwrap(),
        );
        let slot = |t: &[u32], p: usize| t[p / bs] * bs as u32 + (p % bs) as u32;
        let kv_dim = n_kv * hd;
        // Every key but each row's own.
        let slots = lens
            .iter()
            .zip(&tables)
            .flat_map(|(len, t)| (0..len - 1).map(move |p| slot(t, p)))
            .collect();
        fill_layer0((&cpu, &gpu), (&mut kc, &mut kg), dtype, slots, kv_dim, 30);

        let (qn, qng) = p.w("qn", vec![hd], &rand(hd, 32));
        let (kn, kng) = p.w("kn", vec![hd], &rand(hd, 33));
        let rope = RopeSpec::new(1e6, hd, hd, true, None);
        fn rw<'a, W>(
            qk_norm: Option<[&'a W; 2]>,
            rope: &'a RopeSpec,
            (n_heads, n_kv_heads): (usize, usize),
        ) -> RopeWrite<'a, W> {
            RopeWrite {
                qk_norm,
                eps: 1e-6,
                n_heads,
                n_kv_heads,
                rope,
                layer: 0,
            }
        }
        let shape = AttnShape {
            n_heads,
            n_kv_heads: n_kv,
            head_dim: hd,
            scale: 1.0 / (hd as f32).sqrt(),
        };
        let (q, k, v) = (
            rand(rows * n_heads * hd, 34),
            rand(rows * kv_dim, 35),
            rand(rows * kv_dim, 36),
        );
        let step_of = |which: &[usize]| ForwardBatch {
            tokens: vec![0; which.len()],
            positions: which.iter().map(|&i| lens[i] as u32 - 1).collect(),
            attn: AttnMetadata {
                seqs: which
                    .iter()
                    .enumerate()
                    .map(|(j, &i)| SeqAttn {
                        query_start: j,
                        query_len: 1,
                        context_len: lens[i],
                        block_table: tables[i].clone(),
                    })
                    .collect(),
                prefill: vec![false; which.len()],
                slot_mapping: which
                    .iter()
                    .map(|&i| slot(&tables[i], lens[i] - 1))
                    .collect(),
            },
            logits_rows: (0..which.len()).collect(),
        };
        let (qh, kvh) = (n_heads * hd, kv_dim);
        let rwg = rw(norm.then_some([&qng, &kng]), &rope, (n_heads, n_kv));
        // The rows `which` (padded to `pad` rows) fused, or as the three kernels.
        let mut gpu_rows = |which: &[usize], pad: usize, fused: bool| {
            let pick = |x: &[f32], w: usize| -> Vec<f32> {
                let mut v: Vec<f32> = which
                    .iter()
                    .flat_map(|&i| x[i * w..(i + 1) * w].to_vec())
                    .collect();
                v.resize(pad * w, 0.5);
                v
            };
            let mut batch = step_of(which);
            batch.pad_decode(&[pad]);
            let step = gpu.begin_step(&batch);
            assert!(
                gpu.fuses_rope_attention(shape, &step),
                "a decode step of {pad} rows takes the one-launch path"
            );
            let (mut qg, mut kg1, vg) = (
                upload(&gpu, &pick(&q, qh)),
                upload(&gpu, &pick(&k, kvh)),
                upload(&gpu, &pick(&v, kvh)),
            );
            let mut out = gpu.buf(0);
            if fused {
                gpu.rope_attention(
                    (&mut qg, &mut kg1, &vg),
                    &rwg,
                    shape,
                    &mut kg,
                    &step,
                    &mut out,
                );
            } else {
                gpu.rope_write_kv((&mut qg, &mut kg1, &vg), &rwg, &mut kg, &step);
                gpu.attention(&kg, 0, &qg, shape, &step, &mut out);
            }
            gpu.to_host(&out)
        };
        let alone: Vec<Vec<f32>> = (0..3).map(|i| gpu_rows(&[i], 1, true)).collect();
        let all: Vec<usize> = (0..rows).collect();
        let fused = gpu_rows(&all, 80, true);
        let three = gpu_rows(&all, 80, false);
        let few = gpu_rows(&[0, 1, 2], 3, true);
        let few_three = gpu_rows(&[0, 1, 2], 3, false);
        let at = format!("head_dim {hd} heads {n_heads}/{n_kv} {}", dtype.name());
        let differ =
            |a: &[f32], b: &[f32]| a.iter().zip(b).any(|(x, y)| x.to_bits() != y.to_bits());
        assert_eq!(fused.len(), 80 * qh);
        for i in 0..80 {
            let (f, t) = (&fused[i * qh..(i + 1) * qh], &three[i * qh..(i + 1) * qh]);
            assert!(
                !differ(f, t),
                "{at}: row {i} fused differs from the three kernels (max rel {:.2e})",
                max_rel(f, t)
            );
        }
        assert!(
            !differ(&few, &few_three),
            "{at}: a 3-row step fused differs from the three kernels (max rel {:.2e})",
            max_rel(&few, &few_three)
        );
        for (i, row) in alone.iter().enumerate() {
            let want = &fused[i * qh..(i + 1) * qh];
            assert!(
                !differ(row, &few[i * qh..(i + 1) * qh]),
                "{at}: row {i} alone differs from its bits in a 3-row step"
            );
            assert!(
                !differ(&bf(row), want),
                "{at}: row {i} ({} keys) alone differs from its bits in the batch (max rel \
                 {:.2e})",
                lens[i],
                max_rel(&bf(row), want)
            );
        }

        let sc = cpu.begin_step(&step_of(&all));
        let (mut qc, mut kc1) = (q.clone(), k.clone());
        let mut oc = cpu.buf(0);
        cpu.rope_attention(
            (&mut qc, &mut kc1, &bf(&v)),
            &rw(norm.then_some([&qn, &kn]), &rope, (n_heads, n_kv)),
            shape,
            &mut kc,
            &sc,
            &mut oc,
        );
        let d = max_rel(&fused[..rows * qh], &oc);
        println!("rope + attention {at} norm={norm}: 80-row step vs CPU {d:.2e}");
        let tolerance = if dtype == KvDtype::Fp8E4m3 {
            6.5e-2
        } else {
            3e-2
        };
        assert!(d < tolerance, "rope + attention {at}: {d}");
    }
}
