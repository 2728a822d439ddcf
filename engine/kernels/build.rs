//! Compiles the CUDA kernels ahead of time into one fatbin (compute_80 PTX plus sm_89, sm_90a,
//! sm_100a and sm_120a cubins) when the `cuda` feature is on, so nothing is JIT-compiled while
//! serving. nvcc is found through NVCC, then CUDA_HOME/bin, then PATH.

use std::path::{Path, PathBuf};
use std::process::Command;

const ARCHS: &[&str] = &[
    "arch=compute_80,code=compute_80",
    "arch=compute_89,code=sm_89",
    "arch=compute_90a,code=sm_90a",
    "arch=compute_100a,code=sm_100a",
    "arch=compute_120a,code=sm_120a",
];

fn main() {
    println!("cargo:rerun-if-changed=cu");
    println!("cargo:rerun-if-env-changed=NVCC");
    println!("cargo:rerun-if-env-changed=CUDA_HOME");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    let out =
        PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("hearth.fatbin");
    let nvcc = find_nvcc();
    let mut cmd = Command::new(&nvcc);
    // --threads 0: the five targets compile in parallel, one a core.
    cmd.args([
        "-fatbin",
        "-O3",
        "-std=c++17",
        "-Xptxas",
        "-warn-spills",
        "--threads",
        "0",
    ]);
    for a in ARCHS {
        cmd.args(["-gencode", a]);
    }
    cmd.arg("-o")
        .arg(&out)
        .arg(Path::new("cu").join("kernels.cu"));
    let status = cmd.status().unwrap_or_else(|e| {
        panic!(
            "feature `cuda` needs nvcc: running {} failed: {e}. Set NVCC or CUDA_HOME, or put nvcc \
             on PATH (without a CUDA toolkit: pip install nvidia-cuda-nvcc==13.0.88 \
             nvidia-cuda-cccl==13.0.85, see tests/run.sh)",
            nvcc.display()
        )
    });
    assert!(
        status.success(),
        "nvcc failed on engine/kernels/cu/kernels.cu ({status})"
    );
}

fn find_nvcc() -> PathBuf {
    if let Some(p) = std::env::var_os("NVCC") {
        return p.into();
    }
    if let Some(home) = std::env::var_os("CUDA_HOME") {
        let p = Path::new(&home).join("bin").join("nvcc");
        if p.exists() {
            return p;
        }
    }
    "nvcc".into()
}
