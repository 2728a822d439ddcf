//! GGML dequantization against gguf-py, llama.cpp's Python reference implementation
//! (fixtures/make_quant_golden.py): every supported block type, bit-exact up to f32 rounding.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use hearth_backend::quant::dequantize_row;
use hearth_backend::GgmlType;
use serde::Deserialize;

#[derive(Deserialize)]
struct Golden {
    bytes: Vec<u8>,
    values: Vec<f32>,
}

#[test]
fn dequantize_matches_gguf_py() {
    let text = include_str!("fixtures/quant_golden.json");
    let golden: BTreeMap<String, Golden> = serde_json::from_str(text).unwrap();
    let types = [
        ("Q4_0", GgmlType::Q4_0),
        ("Q4_1", GgmlType::Q4_1),
        ("Q8_0", GgmlType::Q8_0),
        ("Q4_K", GgmlType::Q4K),
        ("Q5_K", GgmlType::Q5K),
        ("Q6_K", GgmlType::Q6K),
    ];
    for (name, ty) in types {
        let g = &golden[name];
        let mut out = vec![0f32; g.values.len()];
        dequantize_row(ty, &g.bytes, &mut out);
        for (i, (a, b)) in out.iter().zip(&g.values).enumerate() {
            assert!(
                (a - b).abs() <= 1e-6 * b.abs().max(1.0),
                "{name}[{i}]: {a} vs {b}"
            );
        }
    }
}
