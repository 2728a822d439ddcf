//! What the CUDA op test files share: the GPU gate, deterministic data, and the roundings and
//! error measure the GPU's storage types call for.
#![allow(dead_code)]

use hearth_backend::{
    AttnMetadata, Backend, CpuBackend, CudaBackend, ForwardBatch, HostWeight, KvDtype, SeqAttn,
};

/// The GPU, where HEARTH_TEST_CUDA=1 says there is one.
pub fn gpu() -> Option<CudaBackend> {
    if std::env::var("HEARTH_TEST_CUDA").as_deref() != Ok("1") {
        println!("CUDA tests skipped (set HEARTH_TEST_CUDA=1 on a GPU machine)");
        return None;
    }
    Some(CudaBackend::new(0).unwrap())
}

/// Deterministic values in [-1, 1).
pub fn rand(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Rounds to fp8 e4m3 (4 exponent bits, bias 7, 3 mantissa bits, saturating at 448, nearest
/// even), what an fp8 GPU cache stores.
pub fn fp8(v: &[f32]) -> Vec<f32> {
    v.iter()
        .map(|&x| {
            if x == 0.0 {
                return 0.0;
            }
            let a = x.abs().min(448.0);
            let step = 2f32.powf(a.log2().floor().max(-6.0) - 3.0);
            ((a / step).round_ties_even() * step).min(448.0).copysign(x)
        })
        .collect()
}

/// Rounds through bf16, what the GPU stores.
pub fn bf(v: &[f32]) -> Vec<f32> {
    v.iter()
        .map(|x| half::bf16::from_f32(*x).to_f32())
        .collect()
}

/// Rounds as a KV cache of `dtype` stores the values.
pub fn as_cached(dtype: KvDtype, v: &[f32]) -> Vec<f32> {
    match dtype {
        KvDtype::Bf16 => bf(v),
        KvDtype::Fp8E4m3 => fp8(v),
    }
}

pub fn max_rel(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len(), "lengths");
    let scale = want.iter().fold(1e-3f32, |m, x| m.max(x.abs()));
    got.iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max)
        / scale
}

/// A one-sequence prefill batch of `n` tokens (for ops that only read the row count).
pub fn batch(n: usize) -> ForwardBatch {
    ForwardBatch {
        tokens: (0..n as u32).map(|i| i * 7 % 50).collect(),
        positions: (0..n as u32).map(|i| i * 3 + 1).collect(),
        attn: AttnMetadata {
            seqs: vec![SeqAttn {
                query_start: 0,
                query_len: n,
                context_len: n,
                block_table: vec![],
            }],
            prefill: vec![true; n],
            slot_mapping: (0..n as u32).collect(),
        },
        logits_rows: vec![n - 1, 0],
    }
}

/// The same weights on the CPU (the reference) and the GPU.
pub struct Pair<'a> {
    pub cpu: &'a CpuBackend,
    pub gpu: &'a CudaBackend,
}

impl Pair<'_> {
    pub fn w(
        &self,
        name: &str,
        shape: Vec<usize>,
        v: &[f32],
    ) -> (
        <CpuBackend as Backend>::Weight,
        <CudaBackend as Backend>::Weight,
    ) {
        // The CPU gets the bf16-rounded values too, so only arithmetic differs.
        let v = if shape.len() == 2 { bf(v) } else { v.to_vec() };
        (
            self.cpu
                .upload(HostWeight::f32(name, shape.clone(), v.clone()))
                .unwrap(),
            self.gpu.upload(HostWeight::f32(name, shape, v)).unwrap(),
        )
    }
}

/// Puts host values into a fresh GPU activation buffer.
pub fn upload(gpu: &CudaBackend, v: &[f32]) -> <CudaBackend as Backend>::Buf {
    gpu.buf_from_host(v)
}
