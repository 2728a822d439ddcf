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
    /// memory that kernel may write, or returns: see pdl_wait in cu/common.cuh. Every kernel
    /// starts with `pdl_begin();`, but for the decode kernels below, which first issue loads of
    /// their weights (never written by a kernel; moe_down's expert ids are two launches old,
    /// so complete), or of a step's metadata and cached keys, and then wait, each on every path
    /// (see their comments in moe.cu, mla.cu, attention_decode_tc.cu).
    #[test]
    fn every_kernel_waits_for_its_predecessor() {
        // (file, kernel name prefix, the first statement: it loads weights and then waits)
        const LOAD_THEN_WAIT: &[(&str, &str, &str)] = &[
            (
                "mla.cu",
                "linear_heads",
                "linear_heads_body<true>(x, w, out, n_heads, n, k, blockIdx.x, blockIdx.y)",
            ),
            (
                "mla.cu",
                "NAME",
                "if (q_nope && (int)blockIdx.y >= rows) /* W_UK's loads go out before the wait */ \
                 return linear_heads_body<true>(q_nope, w_uk, q_lat, n_heads, rank, nope, \
                 blockIdx.x, blockIdx.y - rows)",
            ),
            (
                "moe.cu",
                "moe_gate_up",
                "const bool routed_pair = (int)blockIdx.x < routed",
            ),
            (
                "moe.cu",
                "moe_down",
                "__shared__ float dots[2 * MOE_MAX_TOPK]",
            ),
            (
                "moe.cu",
                "moe_route_gemv",
                "__shared__ float row_logits[MOE_MAX_EXPERTS]",
            ),
            // The merge and W_UV issue every W_UV load, then wait (mla_tc.cu).
            (
                "mla_tc.cu",
                "mla_merge_uv",
                "constexpr int PER_WARP = MUV_OUT / 8",
            ),
            // One-row GEMVs issue their first weight loads, then wait (gemv_partials).
            ("gemv.cu", "gemv_T", "if (M > 1) pdl_begin()"),
            ("gemv.cu", "gemv3_T", "if (M > 1) pdl_begin()"),
            ("gemv.cu", "gemv_swiglu_T", "if (M > 1) pdl_begin()"),
            // Decode attention reads the step's metadata (copied before the graph) and issues
            // its first tiles of keys cached by earlier steps, then waits (attn_decode_tc_body,
            // attn_decode_tc_rope).
            (
                "attention_decode_tc.cu",
                "KERNEL",
                "extern __shared__ __align__(16) unsigned char dsm[]",
            ),
            (
                "attention_decode_tc.cu",
                "NAME",
                "extern __shared__ __align__(16) unsigned char dsm[]",
            ),
            // gemm_fp8_tma's producer issues its first stages' weight copies, then waits; its
            // consumers wait before anything else (gemm_fp8_tma.cu).
            (
                "gemm_fp8_tma.cu",
                "gemm_fp8_tma",
                "#if defined(__CUDA_ARCH_FEAT_SM90_ALL) extern __shared__ __align__(16) unsigned \
                 char ft_raw[]",
            ),
            // The ring's producer streams weights from the start; its consumers wait before
            // reading anything (ring.cu).
            (
                "ring.cu",
                "decode_ring",
                "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 extern __shared__ \
                 __align__(128) unsigned char ring_smem[]",
            ),
        ];
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("cu");
        let mut kernels = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let src = std::fs::read_to_string(&path).unwrap();
            let file = path.file_name().unwrap().to_string_lossy();
            for (at, _) in src.match_indices("__global__") {
                kernels += 1;
                let head = &src[at..at + src[at..].find('{').unwrap()];
                // The identifier before the parameter list (not __launch_bounds__ or a macro
                // naming launch bounds, such as gemv.cu's GEMV_BOUNDS).
                let name = head
                    .split('(')
                    .filter_map(|piece| piece.split_whitespace().last())
                    .map(|word| word.replace("##", ""))
                    .find(|word| word != "__launch_bounds__" && !word.ends_with("_BOUNDS"))
                    .unwrap();
                let body = &src[at..][head.len() + 1..];
                let first = body[..body.find(';').unwrap()].replace('\\', "");
                let first = first.split_whitespace().collect::<Vec<_>>().join(" ");
                let wanted = LOAD_THEN_WAIT
                    .iter()
                    .find(|(f, prefix, _)| *f == file && name.starts_with(prefix))
                    .map_or("pdl_begin()", |(_, _, stmt)| stmt);
                assert_eq!(first, wanted, "{file}: kernel {name} at byte {at}");
            }
        }
        assert!(
            kernels > 30,
            "found only {kernels} kernels in {}",
            dir.display()
        );
    }
}
