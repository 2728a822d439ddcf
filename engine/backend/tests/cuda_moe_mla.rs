//! The CUDA mixture-of-experts and MLA ops against the CPU backend on random data: routing
//! (softmax top-k; sigmoid with a selection bias, grouped top-k and scaling) with the experts'
//! SwiGLU and a shared expert, for decode-sized and prefill-sized row counts; MLA's per-head
//! projection, latent cache writes and attention over a mixed batch (a chunk with a cached
//! prefix next to a decode row and a padding row), bf16 and fp8 latent caches.
//!
//! Runs with the `cuda` feature where HEARTH_TEST_CUDA=1 says a GPU is there.
#![cfg(feature = "cuda")]
#![allow(clippy::unwrap_used)]

use hearth_backend::{
    AttnMetadata, Backend, CpuBackend, CudaBackend, ForwardBatch, HostWeight, KvCacheSpec, KvDtype,
    MlaShape, MoeLayer, MoeRouting, MoeScoring, RopeSpec, SeqAttn, NO_SLOT,
};

mod common;
use common::{batch, bf, gpu, max_rel, rand, Pair};

/// Uploads the same bf16-rounded matrices to both backends, as one group.
fn group(
    cpu: &CpuBackend,
    gpu: &CudaBackend,
    shapes: &[([usize; 2], u64)],
    amp: f32,
) -> (
    Vec<<CpuBackend as Backend>::Weight>,
    Vec<<CudaBackend as Backend>::Weight>,
) {
    let hosts: Vec<HostWeight> = shapes
        .iter()
        .map(|&([r, c], seed)| {
            let v: Vec<f32> = rand(r * c, seed).iter().map(|x| x * amp).collect();
            HostWeight::f32("w", vec![r, c], bf(&v))
        })
        .collect();
    (
        cpu.upload_group(hosts.clone()).unwrap(),
        gpu.upload_group(hosts).unwrap(),
    )
}

/// [gate, up, down] per expert from the gate/up group and the down group.
fn experts<W>(gate_up: Vec<W>, downs: Vec<W>) -> Vec<[W; 3]> {
    let mut gu = gate_up.into_iter();
    downs
        .into_iter()
        .map(|d| [gu.next().unwrap(), gu.next().unwrap(), d])
        .collect()
}

#[test]
fn moe_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new(2).unwrap();
    let (hidden, inter, n_experts) = (256, 128, 16);
    for (scoring, top_k, n_group, topk_group, shared) in [
        (MoeScoring::Softmax, 2, 1, 1, false),
        (MoeScoring::Sigmoid, 4, 4, 2, true),
    ] {
        let routing = MoeRouting {
            n_experts,
            top_k,
            scoring,
            norm_topk_prob: true,
            n_group,
            topk_group,
            routed_scaling_factor: 2.5,
        };
        let (rc, rg) = group(&cpu, &gpu, &[([n_experts, hidden], 1)], 0.2);
        let bias = rand(n_experts, 2)
            .iter()
            .map(|x| 0.05 * x)
            .collect::<Vec<_>>();
        let bc = cpu
            .upload(HostWeight::f32("b", vec![n_experts], bias.clone()))
            .unwrap();
        let bgpu = gpu
            .upload(HostWeight::f32("b", vec![n_experts], bias))
            .unwrap();
        let gu: Vec<_> = (0..2 * n_experts)
            .map(|i| ([inter, hidden], 10 + i as u64))
            .collect();
        let dn: Vec<_> = (0..n_experts)
            .map(|i| ([hidden, inter], 100 + i as u64))
            .collect();
        let (guc, gug) = group(&cpu, &gpu, &gu, 0.1);
        let (dnc, dng) = group(&cpu, &gpu, &dn, 0.1);
        let (ec, eg) = (experts(guc, dnc), experts(gug, dng));
        let (sc, sg) = group(
            &cpu,
            &gpu,
            &[
                ([inter, hidden], 200),
                ([inter, hidden], 201),
                ([hidden, inter], 202),
            ],
            0.1,
        );
        let shared_c: [_; 3] = sc.try_into().ok().unwrap();
        let shared_g: [_; 3] = sg.try_into().ok().unwrap();
        let sig = scoring == MoeScoring::Sigmoid;
        // Decode batches up to `gemv_rows` run as per-pair dot products, past that on tensor cores
        // over each expert's pairs (moe_tc.cu; at 200 rows some experts take more than one
        // 32-pair pass; with HEARTH_MOE_DECODE=gemv, which run.sh's moe stage runs too, as dot
        // products); prefill past 16 rows as grouped GEMMs:
        // moe_gemm.cu over every expert's tiles (at 600 rows with the hot expert: 640 slots for
        // it, 128 or 256 for the others), or with HEARTH_MOE_GEMM=cublas (run.sh's moe stage
        // runs both) cuBLASLt: one GEMM per expert, or at 150 rows top-4 batched over experts
        // padded to the longest run.
        for (rows, prefill) in [
            (1, false),
            (3, false),
            (5, false),
            (32, false),
            (200, false),
            (20, true),
            (150, true),
            (600, true),
        ] {
            let x = rand(rows * hidden, 3 + rows as u64);
            // The GPU rounds matmul inputs to bf16 past the GEMV rows: the CPU gets the same x.
            let xc = if rows > gpu.gemv_rows() {
                bf(&x)
            } else {
                x.clone()
            };
            let kinds = vec![prefill; rows];
            let lc = MoeLayer {
                routing: &routing,
                router: &rc[0],
                score_bias: sig.then_some(&bc),
                experts: &ec,
                shared: shared.then_some(&shared_c),
            };
            let lg = MoeLayer {
                routing: &routing,
                router: &rg[0],
                score_bias: sig.then_some(&bgpu),
                experts: &eg,
                shared: shared.then_some(&shared_g),
            };
            let mut oc = cpu.buf(0);
            cpu.moe(&xc, &kinds, &lc, &mut oc);
            gpu.begin_step(&batch(rows));
            let xg = gpu.buf_from_host(&x);
            let mut og = gpu.buf(0);
            gpu.moe(&xg, &kinds, &lg, &mut og);
            let got = gpu.to_host(&og);
            let d = max_rel(&got, &oc);
            println!("moe {scoring:?} top-{top_k} rows {rows}: max rel diff {d:.2e}");
            assert!(d < 1e-2, "moe {scoring:?} rows {rows}: {d}");
            // Decode rows come out the same alone as in the batch.
            if !prefill && rows <= gpu.gemv_rows() {
                for r in 0..rows {
                    gpu.begin_step(&batch(1));
                    let mut o1 = gpu.buf(0);
                    let x1 = gpu.buf_from_host(&x[r * hidden..(r + 1) * hidden]);
                    gpu.moe(&x1, &[false], &lg, &mut o1);
                    let alone = gpu.to_host(&o1);
                    assert!(
                        alone == got[r * hidden..(r + 1) * hidden],
                        "moe row {r} of {rows}: alone differs from in the batch"
                    );
                }
            }
        }
    }
}

#[test]
fn linear_heads_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new(2).unwrap();
    for (rows, heads, n, k) in [
        (1, 4, 64, 48),
        (7, 20, 512, 192),
        (12, 3, 40, 512),
        (32, 20, 512, 192),
        (300, 20, 256, 512),
    ] {
        let (wc, wg) = group(&cpu, &gpu, &[([heads * n, k], 5)], 1.0);
        let x = rand(rows * heads * k, 6);
        let kinds = vec![false; rows];
        // Past the GEMV rows the GPU runs a GEMM per head on bf16 inputs.
        let xc = if rows > gpu.gemv_rows() {
            bf(&x)
        } else {
            x.clone()
        };
        let mut oc = cpu.buf(0);
        cpu.linear_heads(&xc, &kinds, &wc[0], heads, &mut oc);
        gpu.begin_step(&batch(rows));
        let mut og = gpu.buf(0);
        gpu.linear_heads(&gpu.buf_from_host(&x), &kinds, &wg[0], heads, &mut og);
        let d = max_rel(&gpu.to_host(&og), &oc);
        println!("linear_heads rows {rows} heads {heads} [{n}, {k}]: max rel diff {d:.2e}");
        assert!(d < 1e-3, "linear_heads: {d}");
    }
}

/// Two-layer latent caches of `width`-wide rows: the CPU's (its default type) and the GPU's in
/// `dtype`.
fn latent_caches(
    cpu: &CpuBackend,
    gpu: &CudaBackend,
    width: usize,
    (num_blocks, block_size): (usize, usize),
    dtype: KvDtype,
) -> (
    <CpuBackend as Backend>::KvCache,
    <CudaBackend as Backend>::KvCache,
) {
    let spec = KvCacheSpec {
        num_layers: 2,
        num_blocks,
        block_size,
        num_kv_heads: 1,
        head_dim: width,
        dtype: Default::default(),
        latent: true,
    };
    (
        cpu.alloc_kv(spec).unwrap(),
        gpu.alloc_kv(spec.with_dtype(dtype)).unwrap(),
    )
}

/// MLA's preparation (the latent's norm, RoPE on the query and key, the cache write and the
/// absorbed query) against the CPU's ops one after another: decode rows (one launch on the GPU,
/// beside the absorbed query's dot products), a prefill-sized step, and small dimensions. Each row is then its own sequence of one key, so attention gives back the
/// cached latent row.
#[test]
fn mla_prep_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new(2).unwrap();
    let p = Pair {
        cpu: &cpu,
        gpu: &gpu,
    };
    for (rows, rank, rope, heads, nope, dtype) in [
        (1, 512, 64, 20, 192, KvDtype::Bf16),
        (3, 512, 64, 20, 192, KvDtype::Fp8E4m3),
        (12, 512, 64, 20, 192, KvDtype::Bf16),
        (2, 32, 8, 4, 16, KvDtype::Bf16),
    ] {
        let bs = 4;
        let (mut kc, mut kg) = latent_caches(&cpu, &gpu, rank + rope, (16, bs), dtype);
        let step = ForwardBatch {
            tokens: vec![0; rows],
            positions: (0..rows as u32).map(|r| 5 * r + 3).collect(),
            attn: AttnMetadata {
                seqs: (0..rows)
                    .map(|r| SeqAttn {
                        query_start: r,
                        query_len: 1,
                        context_len: 1,
                        block_table: vec![r as u32],
                    })
                    .collect(),
                prefill: vec![false; rows],
                slot_mapping: (0..rows as u32).map(|r| r * bs as u32).collect(),
            },
            logits_rows: vec![],
        };
        let rope_spec = RopeSpec::new(10000.0, rope, rope, false, None);
        let (nc, ng) = p.w("kv_norm", vec![rank], &rand(rank, 60));
        let (wc, wg) = p.w(
            "w_uk",
            vec![heads * rank, nope],
            &rand(heads * rank * nope, 61),
        );
        let k = rand(rows * rank, 62);
        let (q_rope, k_rope) = (rand(rows * heads * rope, 63), rand(rows * rope, 64));
        // bf16 inputs, as past the GEMV rows the GPU's matmul rounds them.
        let q_nope = bf(&rand(rows * heads * nope, 65));
        let kinds = vec![false; rows];
        let (sc, sg) = (cpu.begin_step(&step), gpu.begin_step(&step));
        let (mut lc, mut qrc, mut krc, mut qlc) =
            (cpu.buf(0), q_rope.clone(), k_rope.clone(), cpu.buf(0));
        cpu.mla_prep(
            &mut kc,
            1,
            (&k, &nc, 1e-6),
            &mut lc,
            (&mut qrc, &mut krc),
            (&q_nope, &wc, &mut qlc),
            heads,
            &rope_spec,
            &kinds,
            &sc,
        );
        let up = |v: &[f32]| gpu.buf_from_host(v);
        let (mut lg, mut qrg, mut krg, mut qlg) =
            (gpu.buf(0), up(&q_rope), up(&k_rope), gpu.buf(0));
        gpu.mla_prep(
            &mut kg,
            1,
            (&up(&k), &ng, 1e-6),
            &mut lg,
            (&mut qrg, &mut krg),
            (&up(&q_nope), &wg, &mut qlg),
            heads,
            &rope_spec,
            &kinds,
            &sg,
        );
        let what = format!("mla_prep rows {rows} rank {rank} {dtype:?}");
        // The latent goes out in bf16 past the GEMV rows (it feeds a matmul there).
        let checks = [
            (
                "latent",
                gpu.to_host(&lg),
                lc,
                if rows > gpu.gemv_rows() { 8e-3 } else { 1e-5 },
            ),
            ("q_rope", gpu.to_host(&qrg), qrc, 1e-5),
            ("k_rope", gpu.to_host(&krg), krc, 1e-5),
            ("q_latent", gpu.to_host(&qlg), qlc, 1e-3),
        ];
        for (name, got, want, tol) in checks {
            let d = max_rel(&got, &want);
            println!("{what}: {name} max rel diff {d:.2e}");
            assert!(d < tol, "{what}: {name} {d}");
        }
        // One key each: the output is the cached latent.
        let shape = MlaShape {
            n_heads: 1,
            kv_lora_rank: rank,
            rope_dim: rope,
            scale: 1.0,
        };
        let (ql, qr) = (rand(rows * rank, 66), rand(rows * rope, 67));
        let (mut oc, mut og) = (cpu.buf(0), gpu.buf(0));
        cpu.mla_attention(&kc, 1, &ql, &qr, shape, &sc, &mut oc);
        gpu.mla_attention(&kg, 1, &up(&ql), &up(&qr), shape, &sg, &mut og);
        let d = max_rel(&gpu.to_host(&og), &oc);
        println!("{what}: cached latent max rel diff {d:.2e}");
        let tol = if dtype == KvDtype::Fp8E4m3 {
            7e-2
        } else {
            8e-3
        };
        assert!(d < tol, "{what}: cached latent {d}");
    }
}

/// Sequence A: `pre_a` cached tokens, then a chunk of queries; B: `pre_b` cached, one decode
/// row; and a padding row (no context, no slot) that must come out as zeros. Rank 512 with rope
/// 64 takes the tensor-core kernel below 64 queries (narrow tiles below 8 queries, wide ones
/// from 8; long contexts split; 40 heads make two head groups), other shapes the per-row kernel;
/// chunks of 64 queries or more take the GEMM path (600 queries: two query tiles, the first
/// cut short of the later keys).
#[test]
fn mla_attention_matches_cpu_on_a_mixed_batch() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new(2).unwrap();
    for (rank, rope, heads, dtype, chunk, (pre_a, pre_b)) in [
        (512, 64, 16, KvDtype::Bf16, 12, (9usize, 6usize)),
        (512, 64, 20, KvDtype::Fp8E4m3, 12, (9, 6)),
        (32, 8, 4, KvDtype::Bf16, 12, (9, 6)),
        (512, 64, 20, KvDtype::Bf16, 100, (9, 6)),
        (512, 64, 20, KvDtype::Fp8E4m3, 100, (9, 6)),
        (32, 16, 4, KvDtype::Bf16, 100, (9, 6)),
        (512, 64, 20, KvDtype::Fp8E4m3, 600, (300, 6)),
        (512, 64, 16, KvDtype::Bf16, 5, (700, 1000)),
        (512, 64, 20, KvDtype::Fp8E4m3, 40, (700, 1000)),
        (512, 64, 40, KvDtype::Bf16, 3, (40, 300)),
    ] {
        let bs: usize = 4;
        let num_blocks = 512;
        let (mut kc, mut kg) = latent_caches(&cpu, &gpu, rank + rope, (num_blocks, bs), dtype);
        let a_blocks: Vec<u32> = (0..(pre_a + chunk).div_ceil(bs) as u32)
            .map(|i| (i * 5 + 3) % num_blocks as u32)
            .collect();
        let b_blocks: Vec<u32> = (0..num_blocks as u32)
            .filter(|b| !a_blocks.contains(b))
            .take((pre_b + 1).div_ceil(bs))
            .collect();
        let slot = |blocks: &[u32], p: usize| blocks[p / bs] * bs as u32 + (p % bs) as u32;
        let seq = |query_start, query_len, context_len, table: &Vec<u32>| SeqAttn {
            query_start,
            query_len,
            context_len,
            block_table: table.clone(),
        };
        // Values the fp8 cache holds exactly would hide nothing; both caches get the same
        // inputs and the tolerance covers fp8's rounding.
        let write = |rows: usize, slots: Vec<u32>, seed: u64, kc: &mut _, kg: &mut _| {
            let b = ForwardBatch {
                tokens: vec![0; rows],
                positions: vec![0; rows],
                attn: AttnMetadata {
                    seqs: vec![],
                    prefill: vec![true; rows],
                    slot_mapping: slots,
                },
                logits_rows: vec![],
            };
            let (lat, kr) = (
                bf(&rand(rows * rank, seed)),
                bf(&rand(rows * rope, seed + 1)),
            );
            let s = cpu.begin_step(&b);
            cpu.write_latent(kc, 1, &lat, &kr, &s);
            let s = gpu.begin_step(&b);
            gpu.write_latent(kg, 1, &gpu.buf_from_host(&lat), &gpu.buf_from_host(&kr), &s);
        };
        let prefix: Vec<u32> = (0..pre_a)
            .map(|p| slot(&a_blocks, p))
            .chain((0..pre_b).map(|p| slot(&b_blocks, p)))
            .collect();
        write(pre_a + pre_b, prefix, 20, &mut kc, &mut kg);
        let rows = chunk + 1 + 1;
        let step = ForwardBatch {
            tokens: vec![0; rows],
            positions: (pre_a as u32..(pre_a + chunk) as u32)
                .chain([pre_b as u32, 0])
                .collect(),
            attn: AttnMetadata {
                seqs: vec![
                    seq(0, chunk, pre_a + chunk, &a_blocks),
                    seq(chunk, 1, pre_b + 1, &b_blocks),
                    seq(chunk + 1, 1, 0, &vec![]),
                ],
                prefill: (0..rows).map(|r| r < chunk).collect(),
                slot_mapping: (pre_a..pre_a + chunk)
                    .map(|p| slot(&a_blocks, p))
                    .chain([slot(&b_blocks, pre_b), NO_SLOT])
                    .collect(),
            },
            logits_rows: vec![chunk - 1, chunk],
        };
        // The CPU cache cannot take a padding row's slot: it writes the 13 real rows.
        let (lat, kr) = (bf(&rand(rows * rank, 30)), bf(&rand(rows * rope, 31)));
        let mut cpu_step = step.clone();
        cpu_step.attn.slot_mapping[chunk + 1] = NO_SLOT;
        let sc = cpu.begin_step(&cpu_step);
        cpu.write_latent(&mut kc, 1, &lat, &kr, &sc);
        let sg = gpu.begin_step(&step);
        gpu.write_latent(
            &mut kg,
            1,
            &gpu.buf_from_host(&lat),
            &gpu.buf_from_host(&kr),
            &sg,
        );
        let q_lat = rand(rows * heads * rank, 40);
        let q_rope = rand(rows * heads * rope, 41);
        let shape = MlaShape {
            n_heads: heads,
            kv_lora_rank: rank,
            rope_dim: rope,
            scale: 0.3 / ((rank + rope) as f32).sqrt(),
        };
        let mut oc = cpu.buf(0);
        // The CPU has no padding rows: compare the 13 real rows, and the padding row to zeros.
        let mut real = step.clone();
        real.attn.seqs.pop();
        real.tokens.pop();
        real.attn.prefill.pop();
        real.attn.slot_mapping.pop();
        let sc = cpu.begin_step(&real);
        let real_rows = rows - 1;
        cpu.mla_attention(
            &kc,
            1,
            &q_lat[..real_rows * heads * rank].to_vec(),
            &q_rope[..real_rows * heads * rope].to_vec(),
            shape,
            &sc,
            &mut oc,
        );
        let mut og = gpu.buf(0);
        gpu.mla_attention(
            &kg,
            1,
            &gpu.buf_from_host(&q_lat),
            &gpu.buf_from_host(&q_rope),
            shape,
            &sg,
            &mut og,
        );
        let got = gpu.to_host(&og);
        let (got, pad) = got.split_at(real_rows * heads * rank);
        let d = max_rel(got, &oc);
        // The tensor-core kernel and the GEMM path (chunks of 64 queries or more) round queries
        // and probabilities to bf16.
        let rounds = (rank, rope) == (512, 64) || chunk >= 64;
        let tolerance = match (dtype, rounds) {
            (KvDtype::Bf16, false) => 1e-4,
            (KvDtype::Bf16, true) => 2e-2,
            (KvDtype::Fp8E4m3, _) => 8e-2,
        };
        println!(
            "mla rank {rank} rope {rope} heads {heads} {} chunk {chunk} after {pre_a}/{pre_b} \
             cached: max rel diff {d:.2e}",
            dtype.name()
        );
        assert!(d < tolerance, "mla {}: {d}", dtype.name());
        assert!(pad.iter().all(|&v| v == 0.0), "padding row output");
    }
}

/// MLA's output by W_UV for decode rows (`mla_attention_uv`: the split merge inside W_UV's
/// launch) against `mla_attention` then `linear_heads`, bit for bit, over contexts of one to
/// many splits and a padding row, bf16 and fp8 latent caches; and against the CPU.
#[test]
fn mla_attention_uv_is_the_two_ops() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new(2).unwrap();
    let (rank, rope, heads, v_dim, bs) = (512, 64, 20, 256, 16);
    let contexts = [1usize, 31, 33, 200, 700, 1500];
    let shape = MlaShape {
        n_heads: heads,
        kv_lora_rank: rank,
        rope_dim: rope,
        scale: 0.3 / ((rank + rope) as f32).sqrt(),
    };
    let (wc, wg) = group(&cpu, &gpu, &[([heads * v_dim, rank], 50)], 1.0);
    for dtype in [KvDtype::Bf16, KvDtype::Fp8E4m3] {
        let num_blocks: usize = contexts.iter().map(|c| c.div_ceil(bs)).sum();
        let (mut kc, mut kg) = latent_caches(&cpu, &gpu, rank + rope, (num_blocks, bs), dtype);
        // Sequence i's blocks follow sequence i - 1's; its last key is this step's.
        let mut tables = vec![];
        let mut next = 0u32;
        for &c in &contexts {
            let n = c.div_ceil(bs) as u32;
            tables.push((next..next + n).rev().collect::<Vec<u32>>());
            next += n;
        }
        let slots: Vec<u32> = contexts
            .iter()
            .zip(&tables)
            .flat_map(|(&c, t)| (0..c).map(|p| t[p / bs] * bs as u32 + (p % bs) as u32))
            .collect();
        let keys = slots.len();
        let all = ForwardBatch {
            tokens: vec![0; keys],
            positions: vec![0; keys],
            attn: AttnMetadata {
                seqs: vec![],
                prefill: vec![true; keys],
                slot_mapping: slots,
            },
            logits_rows: vec![],
        };
        let (lat, kr) = (bf(&rand(keys * rank, 60)), bf(&rand(keys * rope, 61)));
        let s = cpu.begin_step(&all);
        cpu.write_latent(&mut kc, 1, &lat, &kr, &s);
        let s = gpu.begin_step(&all);
        let (lat_g, kr_g) = (gpu.buf_from_host(&lat), gpu.buf_from_host(&kr));
        gpu.write_latent(&mut kg, 1, &lat_g, &kr_g, &s);
        // One decode row a sequence (the cache holds its key already), then a padding row: as
        // many sequences a step as keep it within the GEMV rows, where the split merge runs
        // inside W_UV's launch.
        let ids: Vec<usize> = (0..contexts.len()).collect();
        for seqs in ids.chunks(gpu.gemv_rows().saturating_sub(1).max(1)) {
            let real = seqs.len();
            let mut step = ForwardBatch {
                tokens: vec![0; real],
                positions: seqs.iter().map(|&i| contexts[i] as u32 - 1).collect(),
                attn: AttnMetadata {
                    seqs: seqs
                        .iter()
                        .enumerate()
                        .map(|(j, &i)| SeqAttn {
                            query_start: j,
                            query_len: 1,
                            context_len: contexts[i],
                            block_table: tables[i].clone(),
                        })
                        .collect(),
                    prefill: vec![false; real],
                    slot_mapping: vec![NO_SLOT; real],
                },
                logits_rows: vec![0],
            };
            let cpu_step = step.clone();
            step.tokens.push(0);
            step.positions.push(0);
            step.attn.seqs.push(SeqAttn {
                query_start: real,
                query_len: 1,
                context_len: 0,
                block_table: vec![],
            });
            step.attn.prefill.push(false);
            step.attn.slot_mapping.push(NO_SLOT);
            let rows = real + 1;
            let q_lat = rand(rows * heads * rank, 62);
            let q_rope = rand(rows * heads * rope, 63);
            let (ql, qr) = (gpu.buf_from_host(&q_lat), gpu.buf_from_host(&q_rope));
            let kinds = vec![false; rows];
            let sg = gpu.begin_step(&step);
            let (mut attn, mut apart) = (gpu.buf(0), gpu.buf(0));
            gpu.mla_attention(&kg, 1, &ql, &qr, shape, &sg, &mut attn);
            gpu.linear_heads(&attn, &kinds, &wg[0], heads, &mut apart);
            let mut fused = gpu.buf(0);
            let bufs = (&mut gpu.buf(0), &mut fused);
            gpu.mla_attention_uv(&kg, 1, (&ql, &qr), shape, (&sg, &kinds), &wg[0], bufs);
            let (apart, fused) = (gpu.to_host(&apart), gpu.to_host(&fused));
            let same = apart
                .iter()
                .zip(&fused)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert_eq!(fused.len(), rows * heads * v_dim);
            assert!(same, "{}: the fused launch changed the bits", dtype.name());
            let (got, pad) = fused.split_at(real * heads * v_dim);
            assert!(pad.iter().all(|&v| v == 0.0), "padding row output");

            let sc = cpu.begin_step(&cpu_step);
            let mut oc = cpu.buf(0);
            let bufs = (&mut cpu.buf(0), &mut oc);
            let q = (
                &q_lat[..real * heads * rank].to_vec(),
                &q_rope[..real * heads * rope].to_vec(),
            );
            cpu.mla_attention_uv(&kc, 1, q, shape, (&sc, &kinds[..real]), &wc[0], bufs);
            let d = max_rel(got, &oc);
            println!(
                "mla_attention_uv {} {seqs:?}: max rel diff {d:.2e}",
                dtype.name()
            );
            let tolerance = if dtype == KvDtype::Bf16 { 2e-2 } else { 8e-2 };
            assert!(d < tolerance, "mla_attention_uv {}: {d}", dtype.name());
        }
    }
}
