//! Reshaping checkpoint tensors on the host before upload: taking row ranges of a matrix
//! (MLA's fused projections are split into the parts the absorbed form uses) and per-head
//! transposes.

use hearth_backend::{HostWeight, WeightData};

/// Rows `ranges` of `w`, concatenated, in `w`'s own format (only whole rows are taken, so
/// quantized blocks stay intact).
pub fn rows(w: &HostWeight, name: &str, ranges: &[std::ops::Range<usize>]) -> HostWeight {
    let cols = w.cols();
    let n: usize = ranges.iter().map(|r| r.len()).sum();
    let data = match &w.data {
        WeightData::F32(v) => WeightData::F32(
            ranges
                .iter()
                .flat_map(|r| v[r.start * cols..r.end * cols].iter().copied())
                .collect(),
        ),
        WeightData::Ggml { ty, bytes } => {
            let rb = ty.bytes_for(cols);
            WeightData::Ggml {
                ty: *ty,
                bytes: ranges
                    .iter()
                    .flat_map(|r| bytes[r.start * rb..r.end * rb].iter().copied())
                    .collect::<Vec<u8>>()
                    .into(),
            }
        }
        WeightData::Fp8 { bytes, scales } => WeightData::Fp8 {
            bytes: ranges
                .iter()
                .flat_map(|r| bytes[r.start * cols..r.end * cols].iter().copied())
                .collect(),
            scales: ranges
                .iter()
                .flat_map(|r| scales[r.clone()].iter().copied())
                .collect(),
        },
    };
    HostWeight {
        name: name.to_owned(),
        shape: vec![n, cols],
        data,
    }
}

/// The values of `w` as f32, row-major.
pub fn to_f32(w: &HostWeight) -> Vec<f32> {
    match &w.data {
        WeightData::F32(v) => v.clone(),
        WeightData::Ggml { ty, bytes } => {
            let mut out = vec![0f32; w.rows() * w.cols()];
            hearth_backend::quant::dequantize_row(*ty, bytes, &mut out);
            out
        }
        WeightData::Fp8 { bytes, scales } => {
            hearth_backend::quant::fp8::dequantize_rows(bytes, scales, w.cols())
        }
    }
}

/// `w` holds `heads` matrices of `[n, k]` stacked; returns each one transposed (`[k, n]`),
/// stacked, as f32.
pub fn transpose_heads(w: &HostWeight, name: &str, heads: usize) -> HostWeight {
    let (n, k) = (w.rows() / heads, w.cols());
    let v = to_f32(w);
    let mut out = vec![0f32; v.len()];
    for h in 0..heads {
        let (src, dst) = (
            &v[h * n * k..(h + 1) * n * k],
            &mut out[h * n * k..(h + 1) * n * k],
        );
        for i in 0..n {
            for j in 0..k {
                dst[j * n + i] = src[i * k + j];
            }
        }
    }
    HostWeight::f32(name, vec![heads * k, n], out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_transposes_keep_values_in_place() {
        let w = HostWeight::f32("w", vec![4, 2], (0..8).map(|v| v as f32).collect());
        let r = rows(&w, "r", &[0..1, 3..4]);
        assert_eq!(r.shape, vec![2, 2]);
        assert_eq!(to_f32(&r), vec![0.0, 1.0, 6.0, 7.0]);
        // Two heads of [2, 2]: [[0,1],[2,3]] and [[4,5],[6,7]].
        let t = transpose_heads(&w, "t", 2);
        assert_eq!(to_f32(&t), vec![0.0, 2.0, 1.0, 3.0, 4.0, 6.0, 5.0, 7.0]);
    }
}
