//! FP8 e4m3 weights with one f32 scale per output row (`quantization: fp8` on an unquantized
//! checkpoint, as vLLM's online fp8): a row's scale is its largest magnitude over 448 (e4m3's
//! largest finite value), each value is `round(w / scale)` to the nearest e4m3 (ties to even,
//! saturating), and `w ~ e4m3 * scale`. The rounding is CUDA's `__nv_cvt_float_to_fp8(..,
//! __NV_SATFINITE, __NV_E4M3)`, so a row quantized here or on a GPU has the same bytes.

use rayon::prelude::*;

/// e4m3's largest finite magnitude.
pub const FP8_MAX: f32 = 448.0;

/// The nearest e4m3 byte to `x` (ties to even; beyond +-448 saturates, NaN gives 0x7f).
pub fn f32_to_e4m3(x: f32) -> u8 {
    if x.is_nan() {
        return 0x7f;
    }
    let sign = ((x.to_bits() >> 24) & 0x80) as u8;
    let a = x.abs().min(FP8_MAX);
    if a < MIN_NORMAL {
        // Subnormals are multiples of 2^-9 (8 of them rounds up to the first normal, code 8).
        return sign | (a * 512.0).round_ties_even() as u8;
    }
    // Round the f32 mantissa's 23 bits to e4m3's 3, ties to even; a carry moves the exponent.
    let b = a.to_bits();
    let r = (b + 0x7_ffff + ((b >> 20) & 1)) >> 20;
    let e = (r >> 3) - 127 + 7;
    sign | ((e << 3) | (r & 7)) as u8
}

/// e4m3's smallest normal value, 2^-6.
const MIN_NORMAL: f32 = 0.015625;

/// The value of an e4m3 byte.
pub fn e4m3_to_f32(b: u8) -> f32 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let (e, m) = ((b >> 3) & 0xf, b & 7);
    if e == 0xf && m == 7 {
        return f32::NAN;
    }
    let v = if e == 0 {
        m as f32 / 8.0 * 2f32.powi(-6)
    } else {
        (1.0 + m as f32 / 8.0) * 2f32.powi(e as i32 - 7)
    };
    sign * v
}

/// One row's scale: its largest magnitude over 448 (1 for an all-zero row).
pub fn row_scale(row: &[f32]) -> f32 {
    let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
    if max > 0.0 {
        max / FP8_MAX
    } else {
        1.0
    }
}

/// Quantizes a row-major `[rows, cols]` matrix given row by row through `row_values` (which
/// fills a row's f32 values): the e4m3 bytes, row-major, and one scale a row. Rows run in
/// parallel.
pub fn quantize_rows(
    rows: usize,
    cols: usize,
    row_values: impl Fn(usize, &mut [f32]) + Sync,
) -> (Vec<u8>, Vec<f32>) {
    let mut bytes = vec![0u8; rows * cols];
    let mut scales = vec![0f32; rows];
    bytes
        .par_chunks_mut(cols.max(1))
        .zip(scales.par_iter_mut())
        .enumerate()
        .for_each_init(
            || vec![0f32; cols],
            |row, (r, (out, scale))| {
                row_values(r, row);
                *scale = row_scale(row);
                let inv = 1.0 / *scale;
                for (o, v) in out.iter_mut().zip(row.iter()) {
                    *o = f32_to_e4m3(v * inv);
                }
            },
        );
    (bytes, scales)
}

/// The f32 values of e4m3 `bytes` (`[rows, cols]`) times their row's scale.
pub fn dequantize_rows(bytes: &[u8], scales: &[f32], cols: usize) -> Vec<f32> {
    let table: Vec<f32> = (0..=255u8).map(e4m3_to_f32).collect();
    let table = &table;
    bytes
        .chunks_exact(cols.max(1))
        .zip(scales)
        .flat_map(|(row, s)| row.iter().map(move |b| table[*b as usize] * s))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `f32_to_e4m3` spelled out in f64 arithmetic: the binade's step, the quotient rounded.
    fn reference(x: f32) -> u8 {
        let sign = if x.is_sign_negative() { 0x80u8 } else { 0 };
        let a = (x.abs() as f64).min(FP8_MAX as f64);
        let e = if a > 0.0 {
            a.log2().floor().max(-6.0) as i32
        } else {
            -6
        };
        let q = (a / 2f64.powi(e - 3)).round_ties_even() as u32; // 0..=16
        let code = if e == -6 && q < 8 {
            q
        } else if q == 16 {
            ((e + 8) as u32) << 3
        } else {
            (((e + 7) as u32) << 3) | (q - 8)
        };
        sign | code as u8
    }

    #[test]
    fn rounding_matches_the_arithmetic_definition() {
        // Every e4m3 value, the midpoints between neighbours and points just beside them, and a
        // sweep of f32 bit patterns across the whole range.
        let mut xs: Vec<f32> = Vec::new();
        let vals: Vec<f32> = (0..0x7fu8).map(e4m3_to_f32).collect();
        for w in vals.windows(2) {
            let mid = (w[0] + w[1]) / 2.0;
            xs.extend([
                w[0],
                mid,
                f32::from_bits(mid.to_bits() - 1),
                f32::from_bits(mid.to_bits() + 1),
            ]);
        }
        xs.extend((0..2_000_000u32).map(|i| f32::from_bits(i * 0x217 % 0x4400_0000)));
        xs.extend([448.0, 449.0, 463.9, 464.0, 1e30, 2f32.powi(-10), 0.0]);
        for x in xs {
            for v in [x, -x] {
                assert_eq!(f32_to_e4m3(v), reference(v), "{v:e}");
            }
        }
    }

    #[test]
    fn every_e4m3_value_encodes_to_itself() {
        for b in 0..=255u8 {
            let v = e4m3_to_f32(b);
            if v.is_nan() {
                assert_eq!(f32_to_e4m3(v) & 0x7f, 0x7f);
                continue;
            }
            // -0 and +0 are both zero; every other value has one code.
            let back = f32_to_e4m3(v);
            assert!(
                back == b || v == 0.0,
                "{b:#04x} = {v} encodes to {back:#04x}"
            );
        }
    }

    #[test]
    fn known_values_and_rounding() {
        assert_eq!(e4m3_to_f32(0x7e), 448.0);
        assert_eq!(e4m3_to_f32(0x01), 2f32.powi(-9));
        assert_eq!(e4m3_to_f32(0x08), 2f32.powi(-6));
        assert_eq!(e4m3_to_f32(0x38), 1.0);
        assert_eq!(f32_to_e4m3(1.0), 0x38);
        assert_eq!(f32_to_e4m3(-2.0), 0xc0);
        // Between 1 (0x38) and 1.125 (0x39): ties to the even code.
        assert_eq!(f32_to_e4m3(1.0625), 0x38);
        assert_eq!(f32_to_e4m3(1.1875), 0x3a);
        assert_eq!(f32_to_e4m3(1.07), 0x39);
        // Saturation, and the subnormal binade.
        assert_eq!(f32_to_e4m3(1e6), 0x7e);
        assert_eq!(f32_to_e4m3(-500.0), 0xfe);
        assert_eq!(f32_to_e4m3(3.0 * 2f32.powi(-9)), 0x03);
        assert_eq!(f32_to_e4m3(2f32.powi(-11)), 0x00);
        // The largest subnormal rounds up into the first normal.
        assert_eq!(f32_to_e4m3(7.6 * 2f32.powi(-9)), 0x08);
    }

    #[test]
    fn rows_round_trip_within_e4m3_precision() {
        let (rows, cols) = (5, 37);
        let vals: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * (1 + i / cols) as f32)
            .collect();
        let (bytes, scales) = quantize_rows(rows, cols, |r, out| {
            out.copy_from_slice(&vals[r * cols..(r + 1) * cols])
        });
        let back = dequantize_rows(&bytes, &scales, cols);
        for r in 0..rows {
            let max = vals[r * cols..(r + 1) * cols]
                .iter()
                .fold(0f32, |m, v| m.max(v.abs()));
            // A row's largest value is exact; the rest within half a step (1/16 relative).
            assert!((scales[r] * FP8_MAX - max).abs() <= max * 1e-6);
            for c in 0..cols {
                let (v, q) = (vals[r * cols + c], back[r * cols + c]);
                assert!((v - q).abs() <= v.abs() / 16.0 + scales[r] * 2f32.powi(-10));
            }
        }
        assert_eq!(quantize_rows(1, 3, |_, o| o.fill(0.0)).1, vec![1.0]);
    }
}
