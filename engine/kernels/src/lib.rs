//! Hearth's CUDA kernels, compiled ahead of time by build.rs into one fatbin and embedded here.
//! The CUDA backend loads `FATBIN` once at startup and looks its kernels up by the names in
//! `cu/*.cu` (all `extern "C"`). Without the `cuda` feature this crate is empty.

/// The fatbin: compute_80 PTX plus sm_89, sm_90a, sm_100a and sm_120a cubins.
#[cfg(feature = "cuda")]
pub static FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/hearth.fatbin"));

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The backend launches every kernel with programmatic stream serialization, which is only
    /// safe if each kernel waits for its predecessor (griddepcontrol.wait) before it touches
    /// memory or returns: see pdl_wait in cu/common.cuh. Every kernel starts with
    /// `pdl_begin();`.
    #[test]
    fn every_kernel_waits_for_its_predecessor() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("cu");
        let mut kernels = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let src = std::fs::read_to_string(&path).unwrap();
            let name = path.file_name().unwrap().to_string_lossy();
            for (at, _) in src.match_indices("__global__") {
                kernels += 1;
                let body = &src[at..][src[at..].find('{').unwrap() + 1..];
                let first = body[..body.find(';').unwrap()].replace('\\', "");
                let first = first.trim();
                assert_eq!(first, "pdl_begin()", "{name}: a kernel at byte {at}");
            }
        }
        assert!(
            kernels > 30,
            "found only {kernels} kernels in {}",
            dir.display()
        );
    }
}
