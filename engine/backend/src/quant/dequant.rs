//! Dequantization of GGML blocks to f32, one row at a time. The reference every faster path
//! (the integer dot products in `dot.rs`, the CUDA kernels) is tested against.

use half::{bf16, f16};

use crate::GgmlType;

fn f16_at(b: &[u8], i: usize) -> f32 {
    f16::from_le_bytes([b[i], b[i + 1]]).to_f32()
}

/// Dequantizes `out.len()` elements stored as `ty` in `src`.
pub fn dequantize_row(ty: GgmlType, src: &[u8], out: &mut [f32]) {
    debug_assert_eq!(src.len(), ty.bytes_for(out.len()));
    let bb = ty.block_bytes();
    let be = ty.block_elems();
    match ty {
        GgmlType::F32 => {
            for (o, c) in out.iter_mut().zip(src.chunks_exact(4)) {
                *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        GgmlType::F16 => {
            for (o, c) in out.iter_mut().zip(src.chunks_exact(2)) {
                *o = f16::from_le_bytes([c[0], c[1]]).to_f32();
            }
        }
        GgmlType::BF16 => {
            for (o, c) in out.iter_mut().zip(src.chunks_exact(2)) {
                *o = bf16::from_le_bytes([c[0], c[1]]).to_f32();
            }
        }
        _ => {
            for (blk, y) in src.chunks_exact(bb).zip(out.chunks_exact_mut(be)) {
                match ty {
                    GgmlType::Q4_0 => q4_0(blk, y),
                    GgmlType::Q4_1 => q4_1(blk, y),
                    GgmlType::Q8_0 => q8_0(blk, y),
                    GgmlType::Q4K => q4_k(blk, y),
                    GgmlType::Q5K => q5_k(blk, y),
                    GgmlType::Q6K => q6_k(blk, y),
                    GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => unreachable!("dense above"),
                }
            }
        }
    }
}

fn q4_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let qs = &b[2..18];
    for j in 0..16 {
        y[j] = ((qs[j] & 0xF) as i32 - 8) as f32 * d;
        y[j + 16] = ((qs[j] >> 4) as i32 - 8) as f32 * d;
    }
}

fn q4_1(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let m = f16_at(b, 2);
    let qs = &b[4..20];
    for j in 0..16 {
        y[j] = (qs[j] & 0xF) as f32 * d + m;
        y[j + 16] = (qs[j] >> 4) as f32 * d + m;
    }
}

fn q8_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    for (o, &q) in y.iter_mut().zip(&b[2..34]) {
        *o = q as i8 as f32 * d;
    }
}

/// The 6-bit scale and min of sub-block `j` in the packed 12-byte K-quant scales.
pub(crate) fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

fn q4_k(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let dmin = f16_at(b, 2);
    let scales = &b[4..16];
    let qs = &b[16..144];
    for (i, chunk) in y.chunks_exact_mut(64).enumerate() {
        let (sc1, m1) = scale_min_k4(2 * i, scales);
        let (sc2, m2) = scale_min_k4(2 * i + 1, scales);
        let (d1, m1) = (d * sc1 as f32, dmin * m1 as f32);
        let (d2, m2) = (d * sc2 as f32, dmin * m2 as f32);
        let q = &qs[32 * i..32 * i + 32];
        for l in 0..32 {
            chunk[l] = d1 * (q[l] & 0xF) as f32 - m1;
            chunk[l + 32] = d2 * (q[l] >> 4) as f32 - m2;
        }
    }
}

fn q5_k(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let dmin = f16_at(b, 2);
    let scales = &b[4..16];
    let qh = &b[16..48];
    let qs = &b[48..176];
    for (i, chunk) in y.chunks_exact_mut(64).enumerate() {
        let (sc1, m1) = scale_min_k4(2 * i, scales);
        let (sc2, m2) = scale_min_k4(2 * i + 1, scales);
        let (d1, m1) = (d * sc1 as f32, dmin * m1 as f32);
        let (d2, m2) = (d * sc2 as f32, dmin * m2 as f32);
        let (u1, u2) = (1u8 << (2 * i), 2u8 << (2 * i));
        let q = &qs[32 * i..32 * i + 32];
        for l in 0..32 {
            let h1 = if qh[l] & u1 != 0 { 16 } else { 0 };
            let h2 = if qh[l] & u2 != 0 { 16 } else { 0 };
            chunk[l] = d1 * ((q[l] & 0xF) + h1) as f32 - m1;
            chunk[l + 32] = d2 * ((q[l] >> 4) + h2) as f32 - m2;
        }
    }
}

fn q6_k(b: &[u8], y: &mut [f32]) {
    let ql_all = &b[0..128];
    let qh_all = &b[128..192];
    let sc_all = &b[192..208];
    let d = f16_at(b, 208);
    for (n, chunk) in y.chunks_exact_mut(128).enumerate() {
        let ql = &ql_all[64 * n..];
        let qh = &qh_all[32 * n..];
        let sc = &sc_all[8 * n..];
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i32 - 32;
            let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
            chunk[l] = d * (sc[is] as i8) as f32 * q1 as f32;
            chunk[l + 32] = d * (sc[is + 2] as i8) as f32 * q2 as f32;
            chunk[l + 64] = d * (sc[is + 4] as i8) as f32 * q3 as f32;
            chunk[l + 96] = d * (sc[is + 6] as i8) as f32 * q4 as f32;
        }
    }
}
