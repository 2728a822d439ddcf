//! Integer dot products between 4/8-bit weight rows and activations quantized to 16-bit blocks:
//! weights are never dequantized on the decode path.
//!
//! Why 16-bit activations and not llama.cpp's 8-bit: with 8-bit activations SmolLM2-135M Q4_1
//! answers "What is the capital of France?" with "L'Étoile, la Marseillaise..." (llama.cpp does
//! the same), while the float reference on the same dequantized weights says "The capital of
//! France is Paris." 16-bit activations are 256x finer, keep the integer `madd` path, and follow
//! the float reference.
//!
//! Weights arrive repacked by the CPU backend into planes (`Q4Row`, `Q8Row`): f32 block scales
//! and offsets beside the packed quants, so the inner loop has no f16 conversion. Activations are
//! quantized once per linear layer into [`QActs`]. AVX2 or scalar.

const QK: usize = 32;

/// One row of activations quantized to 16-bit blocks of 32.
#[derive(Debug, Clone, Default)]
pub struct QActs {
    /// Per-block scale.
    pub d: Vec<f32>,
    /// Per-block `d * sum(qs)`, for the offset term of Q4_1-style weights.
    pub s: Vec<f32>,
    pub qs: Vec<i16>,
}

impl QActs {
    pub fn quantize(x: &[f32]) -> Self {
        let mut q = QActs::default();
        q.quantize_into(x);
        q
    }

    pub fn quantize_into(&mut self, x: &[f32]) {
        debug_assert_eq!(x.len() % QK, 0);
        self.d.clear();
        self.s.clear();
        self.qs.resize(x.len(), 0);
        for (b, xs) in x.chunks_exact(QK).enumerate() {
            let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
            let d = amax / 32767.0;
            let id = if d > 0.0 { 1.0 / d } else { 0.0 };
            let mut sum = 0i32;
            for (q, &v) in self.qs[b * QK..(b + 1) * QK].iter_mut().zip(xs) {
                let r = (v * id).round() as i32;
                *q = r as i16;
                sum += r;
            }
            self.d.push(d);
            self.s.push(d * sum as f32);
        }
    }
}

/// A row of 4-bit weights: value = q * d + m per 32-block (Q4_0 has m = -8 d).
#[derive(Debug, Clone, Copy)]
pub struct Q4Row<'a> {
    pub d: &'a [f32],
    pub m: &'a [f32],
    /// 16 bytes per block: low nibbles are elements 0..16, high nibbles 16..32.
    pub qs: &'a [u8],
}

/// A row of 8-bit weights: value = q * d per 32-block.
#[derive(Debug, Clone, Copy)]
pub struct Q8Row<'a> {
    pub d: &'a [f32],
    pub qs: &'a [i8],
}

pub fn dot_q4(w: Q4Row<'_>, a: &QActs) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if simd::available() {
        // SAFETY: the features `simd::dot_q4` is compiled for were detected on this CPU.
        return unsafe { simd::dot_q4(w, a) };
    }
    let mut acc = 0f32;
    for b in 0..w.d.len() {
        let qs = &w.qs[b * 16..b * 16 + 16];
        let aq = &a.qs[b * QK..b * QK + QK];
        let mut s = 0i32;
        for j in 0..16 {
            s += (qs[j] & 0xF) as i32 * aq[j] as i32 + (qs[j] >> 4) as i32 * aq[j + 16] as i32;
        }
        acc += w.d[b] * a.d[b] * s as f32 + w.m[b] * a.s[b];
    }
    acc
}

/// `dot_q4` of one weight row against four activation rows: the weight block is expanded once
/// and reused (the prefill path).
pub fn dot_q4_x4(w: Q4Row<'_>, a: [&QActs; 4]) -> [f32; 4] {
    #[cfg(target_arch = "x86_64")]
    if simd::has_vnni() {
        // SAFETY: avx2, fma and avxvnni were detected on this CPU.
        return unsafe { simd::dot_q4_x4_vnni(w, a) };
    }
    #[cfg(target_arch = "x86_64")]
    if simd::available() {
        // SAFETY: the features `simd::dot_q4_x4` is compiled for were detected on this CPU.
        return unsafe { simd::dot_q4_x4(w, a) };
    }
    a.map(|a| dot_q4(w, a))
}

pub fn dot_q8(w: Q8Row<'_>, a: &QActs) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if simd::available() {
        // SAFETY: the features `simd::dot_q8` is compiled for were detected on this CPU.
        return unsafe { simd::dot_q8(w, a) };
    }
    let mut acc = 0f32;
    for b in 0..w.d.len() {
        let s: i32 = w.qs[b * QK..b * QK + QK]
            .iter()
            .zip(&a.qs[b * QK..b * QK + QK])
            .map(|(&x, &y)| x as i32 * y as i32)
            .sum();
        acc += w.d[b] * a.d[b] * s as f32;
    }
    acc
}

/// Plain f32 dot product (dense weights and dequantized K-quant rows).
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if simd::available() {
        // SAFETY: the features `simd::dot_f32` is compiled for were detected on this CPU.
        return unsafe { simd::dot_f32(a, b) };
    }
    dot_f32_portable(a, b)
}

#[inline(always)]
fn dot_f32_portable(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let ca = a.chunks_exact(16);
    let cb = b.chunks_exact(16);
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..16 {
            acc[k] = x[k].mul_add(y[k], acc[k]);
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;
    use std::sync::OnceLock;

    use super::{Q4Row, Q8Row, QActs, QK};

    pub fn available() -> bool {
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
    }

    pub fn has_vnni() -> bool {
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| available() && is_x86_feature_detected!("avxvnni"))
    }

    /// `dot_q4_x4` with AVX-VNNI: `vpdpwssd` fuses the two multiply-adds and their sum.
    #[target_feature(enable = "avx2,fma,avxvnni")]
    pub unsafe fn dot_q4_x4_vnni(w: Q4Row<'_>, a: [&QActs; 4]) -> [f32; 4] {
        let nb = w.d.len();
        assert!(w.m.len() == nb && w.qs.len() == nb * 16);
        for x in a {
            assert!(x.d.len() >= nb && x.s.len() >= nb && x.qs.len() >= nb * QK);
        }
        let mask = _mm_set1_epi8(0xF);
        let mut acc = [[_mm256_setzero_ps(); 2]; 4];
        let mut offsets = [0f32; 4];
        for b in 0..nb {
            // SAFETY: b < nb and `w.qs` holds nb * 16 bytes (asserted above).
            let q = unsafe { _mm_loadu_si128(w.qs.as_ptr().add(b * 16) as *const __m128i) };
            let lo = _mm256_cvtepu8_epi16(_mm_and_si128(q, mask));
            let hi = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(q, 4), mask));
            for k in 0..4 {
                let (a0, a1) = load2(&a[k].qs[b * QK..]);
                let p = _mm256_dpwssd_avx_epi32(_mm256_madd_epi16(lo, a0), hi, a1);
                let scale = _mm256_set1_ps(w.d[b] * a[k].d[b]);
                acc[k][b & 1] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(p), acc[k][b & 1]);
                offsets[k] += w.m[b] * a[k].s[b];
            }
        }
        [0, 1, 2, 3].map(|k| hsum(_mm256_add_ps(acc[k][0], acc[k][1])) + offsets[k])
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
        super::dot_f32_portable(a, b)
    }

    #[target_feature(enable = "avx2,fma")]
    fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
    }

    /// Sum of 32 i16 weight lanes (two halves) times 32 i16 activations, as eight f32.
    #[target_feature(enable = "avx2,fma")]
    fn madd32(w0: __m256i, w1: __m256i, a0: __m256i, a1: __m256i) -> __m256 {
        let p = _mm256_add_epi32(_mm256_madd_epi16(w0, a0), _mm256_madd_epi16(w1, a1));
        _mm256_cvtepi32_ps(p)
    }

    #[target_feature(enable = "avx2,fma")]
    fn load2(p: &[i16]) -> (__m256i, __m256i) {
        assert!(p.len() >= 32);
        // SAFETY: 32 readable i16 were asserted just above.
        unsafe {
            (
                _mm256_loadu_si256(p.as_ptr() as *const __m256i),
                _mm256_loadu_si256(p.as_ptr().add(16) as *const __m256i),
            )
        }
    }

    /// Even blocks into one accumulator, odd blocks into another, offsets summed in block
    /// order: the exact arithmetic of one lane of `dot_q4_x4`, so a row's result does not
    /// depend on how many rows are dotted with it (batch invariance).
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot_q4(w: Q4Row<'_>, a: &QActs) -> f32 {
        let nb = w.d.len();
        assert!(
            w.m.len() == nb && w.qs.len() == nb * 16 && a.d.len() >= nb && a.qs.len() >= nb * QK
        );
        let mask = _mm_set1_epi8(0xF);
        let block = |b: usize| {
            // SAFETY: b < nb and `w.qs` holds nb * 16 bytes (asserted above).
            let q = unsafe { _mm_loadu_si128(w.qs.as_ptr().add(b * 16) as *const __m128i) };
            let lo = _mm256_cvtepu8_epi16(_mm_and_si128(q, mask));
            let hi = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(q, 4), mask));
            let (a0, a1) = load2(&a.qs[b * QK..]);
            (_mm256_set1_ps(w.d[b] * a.d[b]), madd32(lo, hi, a0, a1))
        };
        let (mut even, mut odd) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let mut offsets = 0f32;
        let mut b = 0;
        while b + 1 < nb {
            let (s0, p0) = block(b);
            let (s1, p1) = block(b + 1);
            even = _mm256_fmadd_ps(s0, p0, even);
            odd = _mm256_fmadd_ps(s1, p1, odd);
            offsets += w.m[b] * a.s[b];
            offsets += w.m[b + 1] * a.s[b + 1];
            b += 2;
        }
        if b < nb {
            let (s0, p0) = block(b);
            even = _mm256_fmadd_ps(s0, p0, even);
            offsets += w.m[b] * a.s[b];
        }
        hsum(_mm256_add_ps(even, odd)) + offsets
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot_q4_x4(w: Q4Row<'_>, a: [&QActs; 4]) -> [f32; 4] {
        let nb = w.d.len();
        assert!(w.m.len() == nb && w.qs.len() == nb * 16);
        for x in a {
            assert!(x.d.len() >= nb && x.s.len() >= nb && x.qs.len() >= nb * QK);
        }
        let mask = _mm_set1_epi8(0xF);
        let mut acc = [[_mm256_setzero_ps(); 2]; 4];
        let mut offsets = [0f32; 4];
        for b in 0..nb {
            // SAFETY: b < nb and `w.qs` holds nb * 16 bytes (asserted above).
            let q = unsafe { _mm_loadu_si128(w.qs.as_ptr().add(b * 16) as *const __m128i) };
            let lo = _mm256_cvtepu8_epi16(_mm_and_si128(q, mask));
            let hi = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(q, 4), mask));
            for k in 0..4 {
                let (a0, a1) = load2(&a[k].qs[b * QK..]);
                let scale = _mm256_set1_ps(w.d[b] * a[k].d[b]);
                acc[k][b & 1] = _mm256_fmadd_ps(scale, madd32(lo, hi, a0, a1), acc[k][b & 1]);
                offsets[k] += w.m[b] * a[k].s[b];
            }
        }
        [0, 1, 2, 3].map(|k| hsum(_mm256_add_ps(acc[k][0], acc[k][1])) + offsets[k])
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot_q8(w: Q8Row<'_>, a: &QActs) -> f32 {
        let nb = w.d.len();
        assert!(w.qs.len() == nb * QK && a.d.len() >= nb && a.qs.len() >= nb * QK);
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let block = |b: usize| {
            // SAFETY: b < nb and `w.qs` holds nb * 32 bytes (asserted above).
            let (q0, q1) = unsafe {
                (
                    _mm_loadu_si128(w.qs.as_ptr().add(b * QK) as *const __m128i),
                    _mm_loadu_si128(w.qs.as_ptr().add(b * QK + 16) as *const __m128i),
                )
            };
            let (a0, a1) = load2(&a.qs[b * QK..]);
            let p = madd32(_mm256_cvtepi8_epi16(q0), _mm256_cvtepi8_epi16(q1), a0, a1);
            (_mm256_set1_ps(w.d[b] * a.d[b]), p)
        };
        let mut b = 0;
        while b + 1 < nb {
            let (s0, p0) = block(b);
            let (s1, p1) = block(b + 1);
            acc0 = _mm256_fmadd_ps(s0, p0, acc0);
            acc1 = _mm256_fmadd_ps(s1, p1, acc1);
            b += 2;
        }
        if b < nb {
            let (s0, p0) = block(b);
            acc0 = _mm256_fmadd_ps(s0, p0, acc0);
        }
        hsum(_mm256_add_ps(acc0, acc1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> u32 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 33) as u32
    }

    #[test]
    fn q4_and_q8_dots_match_float_reference() {
        let mut seed = 7;
        let nb = 9;
        let n = nb * QK;
        let x: Vec<f32> = (0..n)
            .map(|_| (lcg(&mut seed) % 2000) as f32 / 1000.0 - 1.0)
            .collect();
        let acts = QActs::quantize(&x);
        let d: Vec<f32> = (0..nb).map(|b| 0.01 + 0.001 * b as f32).collect();
        let m: Vec<f32> = (0..nb).map(|b| -0.05 * b as f32).collect();
        let q4: Vec<u8> = (0..nb * 16).map(|_| lcg(&mut seed) as u8).collect();
        let q8: Vec<i8> = (0..n).map(|_| lcg(&mut seed) as i8).collect();
        let mut w4 = vec![0f32; n];
        let mut w8 = vec![0f32; n];
        for b in 0..nb {
            for j in 0..16 {
                let q = q4[b * 16 + j];
                w4[b * QK + j] = (q & 0xF) as f32 * d[b] + m[b];
                w4[b * QK + j + 16] = (q >> 4) as f32 * d[b] + m[b];
            }
            for j in 0..QK {
                w8[b * QK + j] = q8[b * QK + j] as f32 * d[b];
            }
        }
        let exact = |w: &[f32]| -> (f32, f32) {
            let dot = w.iter().zip(&x).map(|(a, b)| a * b).sum();
            (dot, w.iter().zip(&x).map(|(a, b)| (a * b).abs()).sum())
        };
        let (r4, s4) = exact(&w4);
        let (r8, s8) = exact(&w8);
        let f4 = dot_q4(
            Q4Row {
                d: &d,
                m: &m,
                qs: &q4,
            },
            &acts,
        );
        let f8 = dot_q8(Q8Row { d: &d, qs: &q8 }, &acts);
        let x4 = dot_q4_x4(
            Q4Row {
                d: &d,
                m: &m,
                qs: &q4,
            },
            [&acts; 4],
        );
        assert!(
            x4.iter().all(|&v| (v - f4).abs() < 1e-5 * s4),
            "x4 {x4:?} vs {f4}"
        );
        // 16-bit activations: error under 1e-4 of the sum of |products|.
        assert!((f4 - r4).abs() < 1e-4 * s4, "q4 {f4} vs {r4}");
        assert!((f8 - r8).abs() < 1e-4 * s8, "q8 {f8} vs {r8}");
    }

    #[test]
    fn f32_dot_handles_tails() {
        let a: Vec<f32> = (0..37).map(|i| i as f32).collect();
        let b = vec![2f32; 37];
        assert_eq!(
            dot_f32(&a, &b),
            (0..37).map(|i| 2.0 * i as f32).sum::<f32>()
        );
    }
}
