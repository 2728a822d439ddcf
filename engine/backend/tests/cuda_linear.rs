//! The CUDA linear ops against the CPU backend (the reference) on random data: GEMV and cuBLASLt
//! linears with and without bias, into the residual stream, the fused Q/K/V and SwiGLU forms
//! (with the RMS norm before them folded in), and the bf16 inputs of the cuBLASLt path.
//!
//! Runs with the `cuda` feature where HEARTH_TEST_CUDA=1 says a GPU is there. Tolerances are
//! bf16's: weights and GEMM inputs are stored in bf16 on the GPU.
#![cfg(feature = "cuda")]
#![allow(clippy::unwrap_used)]

use hearth_backend::{Backend, CpuBackend, HostWeight};

mod common;
use common::{batch, bf, gpu, max_rel, rand, upload, Pair};

#[test]
fn linear_gemv_and_gemm_match_cpu() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new(2).unwrap();
    let p = Pair {
        cpu: &cpu,
        gpu: &gpu,
    };
    for (m, n, k, bias) in [
        (1, 96, 64, false),
        (3, 40, 72, true),
        (8, 128, 256, false),
        (9, 64, 96, true),
        (40, 200, 128, false),
        (5, 33, 30, false),
        (1, 2049, 64, true),
        (2, 4096, 128, false),
        (1, 8195, 64, false),
        (8, 8192, 128, true),
        // GLM-4.7-Flash's o-projection and first Q / latent projections.
        (4, 2048, 5120, false),
        (7, 1344, 2048, true),
        // Decode batch sizes past the GEMV rows.
        (16, 256, 1024, true),
        (33, 96, 64, true),
        (64, 512, 4096, false),
    ] {
        let (wc, wg) = p.w("w", vec![n, k], &rand(n * k, 1));
        let (bc, bg) = p.w("b", vec![n], &rand(n, 2));
        let x = rand(m * k, 3);
        // GEMM inputs are rounded to bf16 on the GPU past the GEMV rows.
        let xc = if m > gpu.gemv_rows() {
            bf(&x)
        } else {
            x.clone()
        };
        let mut oc = cpu.buf(0);
        cpu.linear(&xc, &vec![false; m], &wc, bias.then_some(&bc), &mut oc);
        gpu.begin_step(&batch(m));
        let xg = upload(&gpu, &x);
        let mut og = gpu.buf(0);
        gpu.linear(&xg, &vec![false; m], &wg, bias.then_some(&bg), &mut og);
        let d = max_rel(&gpu.to_host(&og), &oc);
        println!("linear m={m} n={n} k={k} bias={bias}: max rel diff {d:.2e}");
        assert!(d < 1e-3, "linear m={m} n={n} k={k}: {d}");
    }
}

/// Projections added straight into a residual stream: the GEMV (its rows), cuBLASLt with beta 1
/// on decode-sized batches (whose first call times candidate algorithms on the residual itself,
/// which must survive that) and on prefill-sized ones, twice in a row.
#[test]
fn linear_residual_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new(2).unwrap();
    let p = Pair {
        cpu: &cpu,
        gpu: &gpu,
    };
    for (m, n, k) in [
        (1, 256, 512),
        (5, 96, 64),
        (8, 4096, 128),
        (16, 256, 1024),
        (300, 128, 256),
    ] {
        let (wc, wg) = p.w("w", vec![n, k], &rand(n * k, 50));
        let x = rand(m * k, 51);
        let xc = if m > gpu.gemv_rows() {
            bf(&x)
        } else {
            x.clone()
        };
        let res = rand(m * n, 52);
        let mut rc = res.clone();
        gpu.begin_step(&batch(m));
        let mut rg = upload(&gpu, &res);
        let xg = upload(&gpu, &x);
        for _ in 0..2 {
            cpu.linear_residual(&xc, &vec![false; m], &wc, &mut rc);
            gpu.linear_residual(&xg, &vec![false; m], &wg, &mut rg);
        }
        let d = max_rel(&gpu.to_host(&rg), &rc);
        println!("linear_residual m={m} n={n} k={k}: max rel diff {d:.2e}");
        assert!(d < 1e-3, "linear_residual m={m} n={n} k={k}: {d}");
    }
}

/// A decode row's GEMV output is the same bit for bit alone and in a batch, for every GEMV form
/// (one matrix, into a residual, Q/K/V, SwiGLU), although wide outputs take 4 features per block
/// for one row and 8 for several, at real models' shapes and one the 16-byte path does not take.
#[test]
fn gemv_rows_are_batch_invariant() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new(2).unwrap();
    let p = Pair {
        cpu: &cpu,
        gpu: &gpu,
    };
    for (n, k) in [(4096, 1024), (2048, 5120), (1344, 2048), (40, 72)] {
        let (_, wg) = p.w("w", vec![n, k], &rand(n * k, 40));
        let (_, ug) = p.w("u", vec![n, k], &rand(n * k, 42));
        let (_, kg) = p.w("k", vec![n / 2, k], &rand(n / 2 * k, 43));
        let x = rand(8 * k, 41);
        let res = rand(8 * n, 44);
        let run = |m: usize| {
            gpu.begin_step(&batch(m));
            let rows = vec![false; m];
            let xg = upload(&gpu, &x[..m * k]);
            let (mut o, mut q, mut kk, mut v) = (gpu.buf(0), gpu.buf(0), gpu.buf(0), gpu.buf(0));
            let mut r = upload(&gpu, &res[..m * n]);
            gpu.linear(&xg, &rows, &wg, None, &mut o);
            gpu.linear_residual(&xg, &rows, &ug, &mut r);
            gpu.linear_qkv(&xg, &rows, [&wg, &kg, &kg], None, [&mut q, &mut kk, &mut v]);
            let mut sw = gpu.buf(0);
            gpu.linear_swiglu(&xg, &rows, &wg, &ug, &mut sw);
            [o, r, q, kk, sw].map(|b| gpu.to_host(&b))
        };
        let alone = run(1);
        for m in 2..=gpu.gemv_rows() {
            let batch = run(m);
            for (i, name) in ["linear", "residual", "q", "k", "swiglu"]
                .iter()
                .enumerate()
            {
                let w = alone[i].len();
                assert_eq!(
                    batch[i][..w],
                    alone[i][..],
                    "{name} n={n} k={k}: row 0 alone vs in {m} rows"
                );
            }
        }
    }
}

/// The RMS norm taken by the Q/K/V and SwiGLU GEMVs (folded into one-row launches, through
/// gemv_norm_stats for more of the GEMVs' rows) against the norm kernel then the GEMV, and both against the
/// CPU's norm and linears, at real models' widths and narrow ones: a row alone (folded) has the
/// same bits as in a batch (stats); past the GEMV rows, and at a width the GEMVs do not take it
/// (K % 8 != 0), the op is the norm and the linear, bit for bit.
#[test]
fn folded_norms_match_the_norm_kernel() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new(2).unwrap();
    let p = Pair {
        cpu: &cpu,
        gpu: &gpu,
    };
    for (nq, nkv, k) in [
        (4096, 1024, 4096),
        (2048, 512, 2048),
        (96, 32, 72),
        (40, 8, 28),
    ] {
        let (qc, qg) = p.w("q", vec![nq, k], &rand(nq * k, 60));
        let (kc, kg) = p.w("k", vec![nkv, k], &rand(nkv * k, 61));
        let (bqc, bqg) = p.w("bq", vec![nq], &rand(nq, 62));
        let (bkc, bkg) = p.w("bk", vec![nkv], &rand(nkv, 65));
        let (nc, ng) = p.w("norm", vec![k], &rand(k, 63));
        // A residual stream's scale, far from 1, so that a missing 1/rms shows.
        let x: Vec<f32> = rand(12 * k, 64).iter().map(|v| 7.0 * v).collect();
        let mut alone = Vec::new();
        for m in [1, 2, 4, 5, 8, 12] {
            let kinds = vec![false; m];
            gpu.begin_step(&batch(m));
            let xg = upload(&gpu, &x[..m * k]);
            let mut h = gpu.buf(0);
            let mut folded = [gpu.buf(0), gpu.buf(0), gpu.buf(0), gpu.buf(0)];
            let [fq, fk, fv, fs] = &mut folded;
            let (ws, biases) = ([&qg, &kg, &kg], Some([&bqg, &bkg, &bkg]));
            gpu.norm_linear_qkv((&xg, &ng, 1e-6), &mut h, &kinds, ws, biases, [fq, fk, fv]);
            gpu.norm_linear_swiglu((&xg, &ng, 1e-6), &mut h, &kinds, (&qg, &qg), fs);
            let mut apart = [gpu.buf(0), gpu.buf(0), gpu.buf(0), gpu.buf(0)];
            let [aq, ak, av, asw] = &mut apart;
            gpu.rms_norm(&xg, &ng, 1e-6, &mut h);
            gpu.linear_qkv(&h, &kinds, ws, biases, [aq, ak, av]);
            gpu.linear_swiglu(&h, &kinds, &qg, &qg, asw);
            let folded = folded.map(|b| gpu.to_host(&b));
            let apart = apart.map(|b| gpu.to_host(&b));
            // The CPU's norm and linears (GEMM inputs are bf16 past the GEMV rows).
            let mut hc = cpu.buf(0);
            cpu.rms_norm(&x[..m * k].to_vec(), &nc, 1e-6, &mut hc);
            if m > gpu.gemv_rows() {
                hc = bf(&hc);
            }
            let mut cpu_out = [cpu.buf(0), cpu.buf(0), cpu.buf(0), cpu.buf(0)];
            let [cq, ck, cv, cs] = &mut cpu_out;
            let cb = Some([&bqc, &bkc, &bkc]);
            cpu.linear_qkv(&hc, &kinds, [&qc, &kc, &kc], cb, [cq, ck, cv]);
            cpu.linear_swiglu(&hc, &kinds, &qc, &qc, cs);
            let unfolded = m > gpu.gemv_rows() || k % 8 != 0;
            for (i, name) in ["q", "k", "v", "swiglu"].iter().enumerate() {
                let d = max_rel(&folded[i], &apart[i]);
                let dc = max_rel(&folded[i], &cpu_out[i]);
                println!("folded norm m={m} k={k} {name}: vs apart {d:.2e}, vs cpu {dc:.2e}");
                if unfolded {
                    assert_eq!(
                        folded[i], apart[i],
                        "{name} m={m} k={k}: not folded, same op"
                    );
                }
                assert!(d < 1e-5, "{name} m={m} k={k}: folded vs apart {d}");
                // Past the GEMV rows the GEMM's inputs are bf16 (as in `fused_qkv_and_swiglu_match_cpu`).
                let tol = if m > gpu.gemv_rows() { 5e-3 } else { 1e-3 };
                assert!(dc < tol, "{name} m={m} k={k}: folded vs cpu {dc}");
            }
            if m == 1 {
                alone = folded.to_vec();
            } else if m <= gpu.gemv_rows() {
                for (i, a) in alone.iter().enumerate() {
                    assert_eq!(
                        folded[i][..a.len()],
                        a[..],
                        "output {i} k={k}: alone vs {m} rows"
                    );
                }
            }
        }
    }
}

/// The fused QKV and SwiGLU GEMVs, the fused GEMMs past the GEMV rows, and the separate
/// GEMMs of prefill-sized batches against the CPU's separate linears.
#[test]
fn fused_qkv_and_swiglu_match_cpu() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new(2).unwrap();
    let p = Pair {
        cpu: &cpu,
        gpu: &gpu,
    };
    for (m, nq, nkv, k, bias) in [
        (1, 4096, 1024, 128, false),
        (4, 4096, 1024, 512, true),
        (3, 256, 64, 96, true),
        (8, 96, 32, 64, false),
        (12, 128, 64, 64, true),
        // Decode batch sizes past the GEMV rows, and K of real models.
        (33, 512, 128, 1024, true),
        (20, 256, 64, 2048, false),
        (64, 4096, 1024, 4096, false),
        // Prefill-sized: Q, K and V as three GEMMs (past FUSED_QKV_MAX_ROWS).
        (2100, 256, 64, 512, true),
    ] {
        let (qc, qg) = p.w("q", vec![nq, k], &rand(nq * k, 30));
        let (kc, kg) = p.w("k", vec![nkv, k], &rand(nkv * k, 31));
        let (vc, vg) = p.w("v", vec![nkv, k], &rand(nkv * k, 32));
        let (bq, bqg) = p.w("bq", vec![nq], &rand(nq, 33));
        let (bk, bkg) = p.w("bk", vec![nkv], &rand(nkv, 34));
        let (bv, bvg) = p.w("bv", vec![nkv], &rand(nkv, 35));
        let x = rand(m * k, 36);
        let xc = if m > gpu.gemv_rows() {
            bf(&x)
        } else {
            x.clone()
        };
        let kinds = vec![false; m];
        let (mut oc, mut okc, mut ovc) = (cpu.buf(0), cpu.buf(0), cpu.buf(0));
        cpu.linear_qkv(
            &xc,
            &kinds,
            [&qc, &kc, &vc],
            bias.then_some([&bq, &bk, &bv]),
            [&mut oc, &mut okc, &mut ovc],
        );
        gpu.begin_step(&batch(m));
        let xg = upload(&gpu, &x);
        let (mut og, mut okg, mut ovg) = (gpu.buf(0), gpu.buf(0), gpu.buf(0));
        gpu.linear_qkv(
            &xg,
            &kinds,
            [&qg, &kg, &vg],
            bias.then_some([&bqg, &bkg, &bvg]),
            [&mut og, &mut okg, &mut ovg],
        );
        for (name, g, c) in [("q", &og, &oc), ("k", &okg, &okc), ("v", &ovg, &ovc)] {
            let d = max_rel(&gpu.to_host(g), c);
            println!("linear_qkv m={m} {name}: max rel diff {d:.2e}");
            assert!(d < 1e-3, "linear_qkv m={m} {name}: {d}");
        }
        // The same weights uploaded as a group (back to back: one fused GEMM past the GEMV
        // rows).
        let grouped = |parts: &[(usize, u64)]| {
            let ws = parts
                .iter()
                .map(|&(n, seed)| HostWeight::f32("w", vec![n, k], bf(&rand(n * k, seed))))
                .collect();
            gpu.upload_group(ws).unwrap()
        };
        let qkv = grouped(&[(nq, 30), (nkv, 31), (nkv, 32)]);
        gpu.linear_qkv(
            &xg,
            &kinds,
            [&qkv[0], &qkv[1], &qkv[2]],
            bias.then_some([&bqg, &bkg, &bvg]),
            [&mut og, &mut okg, &mut ovg],
        );
        for (name, g, c) in [("q", &og, &oc), ("k", &okg, &okc), ("v", &ovg, &ovc)] {
            let d = max_rel(&gpu.to_host(g), c);
            println!("linear_qkv grouped m={m} {name}: max rel diff {d:.2e}");
            assert!(d < 1e-3, "linear_qkv grouped m={m} {name}: {d}");
        }

        let (gc, gg) = p.w("gate", vec![nq, k], &rand(nq * k, 37));
        let (uc, ug) = p.w("up", vec![nq, k], &rand(nq * k, 38));
        cpu.linear_swiglu(&xc, &kinds, &gc, &uc, &mut oc);
        gpu.linear_swiglu(&xg, &kinds, &gg, &ug, &mut og);
        // Past the GEMV rows the fused GEMM writes gate and up in bf16, and the product is
        // written in bf16 for the down projection's GEMM.
        let tolerance = if m > gpu.gemv_rows() { 8e-3 } else { 1e-3 };
        let d = max_rel(&gpu.to_host(&og), &oc);
        println!("linear_swiglu m={m} n={nq}: max rel diff {d:.2e}");
        assert!(d < tolerance, "linear_swiglu m={m}: {d}");
        let gate_up = grouped(&[(nq, 37), (nq, 38)]);
        gpu.linear_swiglu(&xg, &kinds, &gate_up[0], &gate_up[1], &mut og);
        let d = max_rel(&gpu.to_host(&og), &oc);
        println!("linear_swiglu grouped m={m} n={nq}: max rel diff {d:.2e}");
        assert!(d < tolerance, "linear_swiglu m={m}: {d}");
    }
}

/// Past the GEMV rows, norms and SiLU products write bf16 (what the cuBLASLt path reads), and
/// the matmuls, the logits gather and `to_host` read it: the same results as f32 outputs
/// rounded to bf16.
#[test]
fn matmul_inputs_past_the_gemv_rows_are_bf16() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new(2).unwrap();
    let p = Pair {
        cpu: &cpu,
        gpu: &gpu,
    };
    let (rows, n, out) = (12, 96, 64);
    let mut b = batch(rows);
    b.logits_rows = (0..10).collect();
    let (sc, sg) = (cpu.begin_step(&b), gpu.begin_step(&b));
    let x = rand(rows * n, 50);
    let r = rand(rows * n, 51);
    let (wc, wg) = p.w("norm", vec![n], &rand(n, 52));
    let (mc, mg) = p.w("w", vec![out, n], &rand(out * n, 53));
    let (mut rc, mut rg) = (r.clone(), upload(&gpu, &r));
    let (mut hc, mut hg) = (cpu.buf(0), gpu.buf(0));
    cpu.add_rms_norm(&mut rc, &x, &wc, 1e-6, &mut hc);
    gpu.add_rms_norm(&mut rg, &upload(&gpu, &x), &wg, 1e-6, &mut hg);
    // One bf16 rounding step of the largest value at most.
    let d = max_rel(&gpu.to_host(&hg), &hc);
    assert!(d < 8e-3, "add_rms_norm bf16 out: {d}");
    // The matmul reads the bf16 rows as they are (the CPU gets them rounded the same way).
    let (mut yc, mut yg) = (cpu.buf(0), gpu.buf(0));
    let kinds = vec![false; rows];
    cpu.linear(&gpu.to_host(&hg), &kinds, &mc, None, &mut yc);
    gpu.linear(&hg, &kinds, &mg, None, &mut yg);
    let d = max_rel(&gpu.to_host(&yg), &yc);
    assert!(d < 1e-3, "linear on bf16 rows: {d}");
    // Ten gathered rows stay bf16 (the head's cuBLASLt path), two become f32 (its GEMV).
    let (mut gc, mut gg) = (cpu.buf(0), gpu.buf(0));
    cpu.gather_logits_rows(&gpu.to_host(&hg), n, &sc, &mut gc);
    gpu.gather_logits_rows(&hg, n, &sg, &mut gg);
    assert_eq!(gpu.to_host(&gg), gc, "gather of 10 bf16 rows");
    b.logits_rows = vec![11, 3];
    let (sc, sg) = (cpu.begin_step(&b), gpu.begin_step(&b));
    let mut hg = gpu.buf(0);
    let mut rg = upload(&gpu, &r);
    gpu.add_rms_norm(&mut rg, &upload(&gpu, &x), &wg, 1e-6, &mut hg);
    cpu.gather_logits_rows(&gpu.to_host(&hg), n, &sc, &mut gc);
    gpu.gather_logits_rows(&hg, n, &sg, &mut gg);
    assert_eq!(gpu.to_host(&gg), gc, "gather of 2 rows into f32");
    let mut yg = gpu.buf(0);
    gpu.linear(&gg, &[false; 2], &mg, None, &mut yg);
    let mut yc = cpu.buf(0);
    cpu.linear(&gc, &[false; 2], &mc, None, &mut yc);
    let d = max_rel(&gpu.to_host(&yg), &yc);
    assert!(d < 1e-3, "gemv on gathered rows: {d}");
}
