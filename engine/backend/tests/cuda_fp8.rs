//! fp8 e4m3 weights with a scale a row (`quantization: fp8`) on CUDA against the CPU backend,
//! which dequantizes the same bytes to f32: the fp8 GEMVs (up to `gemv_rows`: one matrix, into the
//! residual stream, Q/K/V, SwiGLU, the RMS norm folded in or from gemv_norm_stats) and, past the
//! GEMV rows gemm_fp8 on the tensor cores (up to 128 rows and K % 16 == 0; K split in parts for
//! narrow matrices), past 64 rows W8A8 (x's rows quantized to e4m3 with a scale each, cuBLASLt's
//! fp8 matmul) where the GPU's cuBLASLt has it, else past 128 rows the matrices dequantized to
//! bf16 for cuBLASLt (fused when uploaded as a group). A row's outputs have the same bits alone
//! and among the GEMVs' rows, and among every batch past them that gemm_fp8 takes.
//!
//! Runs with the `cuda` feature where HEARTH_TEST_CUDA=1 says a GPU is there. Tolerances: the
//! GEMVs compute in f32 on the exact fp8 values (1e-3, summation order); past them the inputs
//! are bf16 (8e-3; the dequantized weights past 128 rows too), and for W8A8 the CPU multiplies
//! the same quantized rows (8e-3: the fp8 tensor cores' accumulation).
#![cfg(feature = "cuda")]
#![allow(clippy::unwrap_used)]

use hearth_backend::quant::fp8::{dequantize_rows, quantize_rows};
use hearth_backend::{Backend, CpuBackend, CudaBackend, HostWeight};

mod common;
use common::{batch, bf, gpu, max_rel, rand, upload};

type Weights = (
    Vec<<CpuBackend as Backend>::Weight>,
    Vec<<CudaBackend as Backend>::Weight>,
);

/// Matrices `(rows, seed)` of `k` columns quantized to fp8, uploaded as one group on both.
fn fp8_group(cpu: &CpuBackend, gpu: &CudaBackend, k: usize, parts: &[(usize, u64)]) -> Weights {
    let ws: Vec<HostWeight> = parts
        .iter()
        .map(|&(n, seed)| HostWeight::f32("w", vec![n, k], rand(n * k, seed)).to_fp8())
        .collect();
    (
        cpu.upload_group(ws.clone()).unwrap(),
        gpu.upload_group(ws).unwrap(),
    )
}

/// What the GPU's matmul of m rows of x [m, k] multiplies: x itself (the GEMVs), x in bf16 (past
/// them), and past the rows where the GPU takes W8A8 (`fp8_w8a8_after`), x's rows quantized as
/// weight rows are (`quantization: fp8`).
fn gemm_input(gpu: &CudaBackend, x: &[f32], (m, n, k): (usize, usize, usize)) -> Vec<f32> {
    if m <= gpu.gemv_rows() {
        return x.to_vec();
    }
    match gpu.fp8_w8a8_after() {
        Some(after) if m > after && k.is_multiple_of(16) && n.is_multiple_of(8) => {
            let (bytes, scales) = quantize_rows(m, k, |r, row| {
                row.copy_from_slice(&x[r * k..(r + 1) * k]);
            });
            dequantize_rows(&bytes, &scales, k)
        }
        _ => bf(x),
    }
}

fn tolerance(gpu: &CudaBackend, m: usize) -> f32 {
    if m > gpu.gemv_rows() {
        8e-3
    } else {
        1e-3
    }
}

#[test]
fn fp8_linears_match_cpu() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new(2).unwrap();
    for (m, n, k) in [
        (1, 96, 64),
        (3, 40, 72),
        (8, 4096, 128),
        (1, 2049, 1024),
        (5, 33, 24),
        (9, 64, 96),
        // Past one chunk with a short last one (gemm_fp8_tma's chunks are 128 values), features
        // past the last full block, 17 and 40 rows (wgmma n = 32 and 64).
        (17, 768, 400),
        (40, 300, 1040),
        (64, 512, 4096),
        (65, 1000, 200),
        (130, 4096, 1040),
        (128, 24, 4096),
        (300, 128, 256),
    ] {
        let (wc, wg) = fp8_group(&cpu, &gpu, k, &[(n, 1)]);
        let bias = HostWeight::f32("b", vec![n], rand(n, 2));
        let (bc, bg) = (cpu.upload(bias.clone()).unwrap(), gpu.upload(bias).unwrap());
        let x = rand(m * k, 3);
        let xc = gemm_input(&gpu, &x, (m, n, k));
        let kinds = vec![false; m];
        let mut oc = cpu.buf(0);
        cpu.linear(&xc, &kinds, &wc[0], Some(&bc), &mut oc);
        gpu.begin_step(&batch(m));
        let xg = upload(&gpu, &x);
        let mut og = gpu.buf(0);
        gpu.linear(&xg, &kinds, &wg[0], Some(&bg), &mut og);
        let d = max_rel(&gpu.to_host(&og), &oc);
        println!("fp8 linear m={m} n={n} k={k}: max rel diff {d:.2e}");
        assert!(d < tolerance(&gpu, m), "fp8 linear m={m} n={n} k={k}: {d}");

        // Into a residual stream.
        let res = rand(m * n, 4);
        let mut rc = res.clone();
        cpu.linear_residual(&xc, &kinds, &wc[0], &mut rc);
        let mut rg = upload(&gpu, &res);
        gpu.linear_residual(&xg, &kinds, &wg[0], &mut rg);
        let d = max_rel(&gpu.to_host(&rg), &rc);
        println!("fp8 linear_residual m={m}: max rel diff {d:.2e}");
        assert!(d < tolerance(&gpu, m), "fp8 linear_residual m={m}: {d}");
    }
}

#[test]
fn fp8_fused_qkv_and_swiglu_match_cpu_and_are_batch_invariant() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend::new(2).unwrap();
    let (nq, nkv, k) = (512, 128, 1024);
    let (qkv_c, qkv_g) = fp8_group(&cpu, &gpu, k, &[(nq, 30), (nkv, 31), (nkv, 32)]);
    let (gu_c, gu_g) = fp8_group(&cpu, &gpu, k, &[(nq, 37), (nq, 38)]);
    let norm = HostWeight::f32("norm", vec![k], rand(k, 39));
    let (nc, ng) = (cpu.upload(norm.clone()).unwrap(), gpu.upload(norm).unwrap());
    let (mut alone, mut alone_tc): (Vec<Vec<f32>>, Vec<Vec<f32>>) = (Vec::new(), Vec::new());
    for m in [1, 2, 5, 8, 12, 64, 100, 128, 200] {
        let x = rand(m * k, 36);
        let xc = gemm_input(&gpu, &x, (m, nq, k));
        let kinds = vec![false; m];
        let (mut q, mut kk, mut v) = (cpu.buf(0), cpu.buf(0), cpu.buf(0));
        cpu.linear_qkv(
            &xc,
            &kinds,
            [&qkv_c[0], &qkv_c[1], &qkv_c[2]],
            None,
            [&mut q, &mut kk, &mut v],
        );
        let mut sw = cpu.buf(0);
        cpu.linear_swiglu(&xc, &kinds, &gu_c[0], &gu_c[1], &mut sw);
        // The same with the RMS norm before them, on the CPU as a norm then the linears.
        let mut h = cpu.buf(0);
        cpu.rms_norm(&x, &nc, 1e-6, &mut h);
        let hc = if m > gpu.gemv_rows() {
            gemm_input(&gpu, &bf(&h), (m, nq, k))
        } else {
            h.clone()
        };
        let (mut nq_c, mut nk_c, mut nv_c, mut nsw_c) =
            (cpu.buf(0), cpu.buf(0), cpu.buf(0), cpu.buf(0));
        cpu.linear_qkv(
            &hc,
            &kinds,
            [&qkv_c[0], &qkv_c[1], &qkv_c[2]],
            None,
            [&mut nq_c, &mut nk_c, &mut nv_c],
        );
        cpu.linear_swiglu(&hc, &kinds, &gu_c[0], &gu_c[1], &mut nsw_c);

        gpu.begin_step(&batch(m));
        let xg = upload(&gpu, &x);
        let (mut qg, mut kg, mut vg) = (gpu.buf(0), gpu.buf(0), gpu.buf(0));
        gpu.linear_qkv(
            &xg,
            &kinds,
            [&qkv_g[0], &qkv_g[1], &qkv_g[2]],
            None,
            [&mut qg, &mut kg, &mut vg],
        );
        let mut swg = gpu.buf(0);
        gpu.linear_swiglu(&xg, &kinds, &gu_g[0], &gu_g[1], &mut swg);
        let (mut hg, mut hg2) = (gpu.buf(0), gpu.buf(0));
        let (mut nqg, mut nkg, mut nvg, mut nswg) =
            (gpu.buf(0), gpu.buf(0), gpu.buf(0), gpu.buf(0));
        gpu.norm_linear_qkv(
            (&xg, &ng, 1e-6),
            &mut hg,
            &kinds,
            [&qkv_g[0], &qkv_g[1], &qkv_g[2]],
            None,
            [&mut nqg, &mut nkg, &mut nvg],
        );
        gpu.norm_linear_swiglu(
            (&xg, &ng, 1e-6),
            &mut hg2,
            &kinds,
            (&gu_g[0], &gu_g[1]),
            &mut nswg,
        );
        let outs = [
            ("q", gpu.to_host(&qg), q),
            ("k", gpu.to_host(&kg), kk),
            ("v", gpu.to_host(&vg), v),
            ("swiglu", gpu.to_host(&swg), sw),
            ("norm q", gpu.to_host(&nqg), nq_c),
            ("norm k", gpu.to_host(&nkg), nk_c),
            ("norm v", gpu.to_host(&nvg), nv_c),
            ("norm swiglu", gpu.to_host(&nswg), nsw_c),
        ];
        for (name, g, c) in &outs {
            let d = max_rel(g, c);
            println!("fp8 {name} m={m}: max rel diff {d:.2e}");
            assert!(d < tolerance(&gpu, m), "fp8 {name} m={m}: {d}");
        }
        // Row 0 has the same bits alone and among the GEMVs' rows, and past them (gemm_fp8) in
        // every batch up to 128 rows, or as many as take it before W8A8.
        let first = |outs: &[(&str, Vec<f32>, Vec<f32>)]| {
            outs.iter()
                .map(|(_, g, _)| g[..g.len() / m].to_vec())
                .collect()
        };
        let tc_rows = gpu.fp8_w8a8_after().unwrap_or(128);
        if m == 1 {
            alone = first(&outs);
        } else if m > gpu.gemv_rows() && m <= tc_rows && alone_tc.is_empty() {
            alone_tc = first(&outs);
        }
        let a = match m {
            _ if m <= gpu.gemv_rows() => &alone,
            _ if m <= tc_rows => &alone_tc,
            _ => continue,
        };
        for (i, (name, g, _)) in outs.iter().enumerate() {
            assert_eq!(
                g[..a[i].len()],
                a[i][..],
                "fp8 {name}: row 0 alone vs {m} rows"
            );
        }
    }
}
