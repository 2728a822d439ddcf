//! GGML block formats on the CPU: dequantization (the reference), repacking into planes, and
//! integer dot products; and fp8 e4m3 weights with a scale a row (`fp8`).

mod dequant;
mod dot;
pub mod fp8;
mod repack;

pub use dequant::dequantize_row;
pub use dot::{dot_f32, dot_q4, dot_q4_x4, dot_q8, Q4Row, Q8Row, QActs};
pub use repack::{repack_q4, repack_q8, Q4Planes, Q8Planes};
