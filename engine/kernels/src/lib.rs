//! Hearth's CUDA kernels, compiled ahead of time by build.rs into one fatbin and embedded here.
//! The CUDA backend loads `FATBIN` once at startup and looks its kernels up by the names in
//! `cu/*.cu` (all `extern "C"`). Without the `cuda` feature this crate is empty.

/// The fatbin: compute_80 PTX plus sm_89, sm_90a, sm_100a and sm_120a cubins.
#[cfg(feature = "cuda")]
pub static FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/hearth.fatbin"));
