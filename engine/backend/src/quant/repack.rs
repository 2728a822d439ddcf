//! Repacks GGML Q4_0 / Q4_1 / Q8_0 blocks into planes (f32 scales, f32 offsets, packed quants)
//! so the dot products read scales without f16 conversion. Lossless: f16 -> f32 is exact.

use half::f16;

use super::dot::{Q4Row, Q8Row};
use crate::GgmlType;

fn f16_at(b: &[u8], i: usize) -> f32 {
    f16::from_le_bytes([b[i], b[i + 1]]).to_f32()
}

/// A matrix of 4-bit weights in planes; value = q * d + m per block of 32.
#[derive(Debug, Clone)]
pub struct Q4Planes {
    pub blocks_per_row: usize,
    pub d: Vec<f32>,
    pub m: Vec<f32>,
    pub qs: Vec<u8>,
}

impl Q4Planes {
    pub fn row(&self, r: usize) -> Q4Row<'_> {
        let nb = self.blocks_per_row;
        Q4Row {
            d: &self.d[r * nb..(r + 1) * nb],
            m: &self.m[r * nb..(r + 1) * nb],
            qs: &self.qs[r * nb * 16..(r + 1) * nb * 16],
        }
    }

    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let w = self.row(r);
        for (b, y) in out.chunks_exact_mut(32).enumerate() {
            for j in 0..16 {
                let q = w.qs[b * 16 + j];
                y[j] = (q & 0xF) as f32 * w.d[b] + w.m[b];
                y[j + 16] = (q >> 4) as f32 * w.d[b] + w.m[b];
            }
        }
    }
}

/// A matrix of 8-bit weights in planes; value = q * d per block of 32.
#[derive(Debug, Clone)]
pub struct Q8Planes {
    pub blocks_per_row: usize,
    pub d: Vec<f32>,
    pub qs: Vec<i8>,
}

impl Q8Planes {
    pub fn row(&self, r: usize) -> Q8Row<'_> {
        let nb = self.blocks_per_row;
        Q8Row {
            d: &self.d[r * nb..(r + 1) * nb],
            qs: &self.qs[r * nb * 32..(r + 1) * nb * 32],
        }
    }

    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let w = self.row(r);
        for (i, o) in out.iter_mut().enumerate() {
            *o = w.qs[i] as f32 * w.d[i / 32];
        }
    }
}

/// Q4_0 or Q4_1 blocks (`bytes`, any number of rows of `cols`) into planes.
pub fn repack_q4(ty: GgmlType, bytes: &[u8], cols: usize) -> Q4Planes {
    let bb = ty.block_bytes();
    let n = bytes.len() / bb;
    let mut p = Q4Planes {
        blocks_per_row: cols / 32,
        d: Vec::with_capacity(n),
        m: Vec::with_capacity(n),
        qs: Vec::with_capacity(n * 16),
    };
    for blk in bytes.chunks_exact(bb) {
        let d = f16_at(blk, 0);
        if ty == GgmlType::Q4_1 {
            p.d.push(d);
            p.m.push(f16_at(blk, 2));
            p.qs.extend_from_slice(&blk[4..20]);
        } else {
            p.d.push(d);
            p.m.push(-8.0 * d);
            p.qs.extend_from_slice(&blk[2..18]);
        }
    }
    p
}

/// Q8_0 blocks into planes.
pub fn repack_q8(bytes: &[u8], cols: usize) -> Q8Planes {
    let n = bytes.len() / 34;
    let mut p = Q8Planes {
        blocks_per_row: cols / 32,
        d: Vec::with_capacity(n),
        qs: Vec::with_capacity(n * 32),
    };
    for blk in bytes.chunks_exact(34) {
        p.d.push(f16_at(blk, 0));
        p.qs.extend(blk[2..34].iter().map(|&b| b as i8));
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::dequantize_row;

    #[test]
    fn planes_dequantize_like_the_blocks() {
        for ty in [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0] {
            let cols = 64;
            let mut bytes: Vec<u8> = (0..ty.bytes_for(cols * 2))
                .map(|i| (i * 37 % 251) as u8)
                .collect();
            for blk in bytes.chunks_exact_mut(ty.block_bytes()) {
                blk[0..2].copy_from_slice(&f16::from_f32(0.03).to_le_bytes());
                if ty == GgmlType::Q4_1 {
                    blk[2..4].copy_from_slice(&f16::from_f32(-0.2).to_le_bytes());
                }
            }
            let rb = ty.bytes_for(cols);
            for r in 0..2 {
                let mut want = vec![0f32; cols];
                dequantize_row(ty, &bytes[r * rb..(r + 1) * rb], &mut want);
                let mut got = vec![0f32; cols];
                if ty == GgmlType::Q8_0 {
                    repack_q8(&bytes, cols).dequantize_row(r, &mut got);
                } else {
                    repack_q4(ty, &bytes, cols).dequantize_row(r, &mut got);
                }
                assert_eq!(got, want, "{ty:?} row {r}");
            }
        }
    }
}
