//! Typed launchers for the kernels in hearth-kernels' fatbin: one method per kernel, each
//! checking what the kernel assumes. Pointers are raw device addresses (`u64`) of buffers the
//! backend owns; every launch goes to the backend's one stream.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, LaunchConfig};

use crate::BackendError;

/// Rows the GEMV kernels take in one pass (`gemv_bf16_M_R` for M = 1..=8).
pub const GEMV_MAX_ROWS: usize = 8;
/// Output features per block the GEMV kernels come in (`R`).
const GEMV_FEATURES_PER_BLOCK: [usize; 4] = [1, 2, 4, 8];
/// Rows from which wide outputs take 8 features per block instead of 4, so that each x load
/// feeds more weight rows (Qwen3-8B at 4 concurrent sequences: 521 -> 541 tok/s; 1 row keeps 4,
/// which fills the GPU better): fp8 weights and the Q/K/V launches.
const GEMV_WIDE_ROWS: usize = 2;
/// The same for one matrix of bf16 weights: at 2-3 rows its launches take ~15% less time with 4
/// (Qwen3-8B's o and down at 2 rows 11.6 / 26.9 against 12.9 / 31.8 us, `tests/device/run.sh
/// gemvrows` on a lent H200, twice); fp8 ones are faster with 8.
const GEMV_WIDE_ROWS_BF16: usize = 4;
/// Features per warp (gate and up rows each) the SwiGLU GEMVs come in.
const GEMV_SWIGLU_FEATURES: [usize; 3] = [1, 2, 4];

pub struct Kernels {
    stream: Arc<CudaStream>,
    /// Set while a decode graph replays the step: launches are then skipped (see `graph`).
    pub skip: AtomicBool,
    /// Set while a decode graph is being captured.
    pub capturing: AtomicBool,
    /// The GPU's streaming multiprocessors (sizes the prefill attention's blocks).
    sms: usize,
    /// Whether kernels may start before their predecessor ends (see `launch`), outside graphs
    /// and inside them.
    pdl: Pdl,
    embedding: CudaFunction,
    rms_norm: CudaFunction,
    add_rms_norm: CudaFunction,
    rope: CudaFunction,
    silu_mul: CudaFunction,
    add_bias: CudaFunction,
    f32_to_bf16: CudaFunction,
    split_qkv: CudaFunction,
    silu_mul_pair: CudaFunction,
    gather_rows: CudaFunction,
    /// [bf16 cache, fp8 cache] variants.
    write_kv: [CudaFunction; 2],
    attention_prefill: CudaFunction,
    /// `attn_decode[c][l * 3 + h]`: cache c (bf16, fp8), DECODE_LANES_PER_KEY[l],
    /// DECODE_HEADS_PER_BLOCK[h].
    attn_decode: [Vec<CudaFunction>; 2],
    /// The split merge, `[serial, wide]` (attn_decode_merge, _wide: loads in flight at once).
    attn_decode_merge: [CudaFunction; 2],
    /// Tensor-core decode, `[KV groups of up to 8, 16 query heads][cache][head_dim 64, 128]`
    /// (attention_decode_tc.cu).
    attn_decode_tc: [[[CudaFunction; 2]; 2]; 2],
    /// Tensor-core prefill, `[heads per block 1, 2][cache][head_dim 64, 128]` (two heads of a KV
    /// group share each K / V tile: pp8192 on Qwen3-8B 24.0k -> 25.2k tok/s).
    attn_prefill_tc: [[[CudaFunction; 2]; 2]; 2],
    /// Prefill on wgmma for head_dim 128, `[heads per block 1, 2][cache]`
    /// (attention_prefill_wg.cu): compute capability 9.0 only, unless HEARTH_PREFILL_ATTN=mma.
    attn_prefill_wg: Option<[[CudaFunction; 2]; 2]>,
    argmax_rows: CudaFunction,
    sample_rows: CudaFunction,
    /// `gemv[t][(M - 1) * 4 + i]` takes M rows and GEMV_FEATURES_PER_BLOCK[i] features per
    /// block of weights of type t (0 bf16, 1 fp8 with a scale a row); `gemv3` the same for up
    /// to three matrices at once.
    gemv: [Vec<CudaFunction>; 2],
    gemv3: [Vec<CudaFunction>; 2],
    /// `gemv_swiglu[t][(M - 1) * 3 + i]`: GEMV_SWIGLU_FEATURES[i] features per warp.
    gemv_swiglu: [Vec<CudaFunction>; 2],
    fp8_rows_to_bf16: CudaFunction,
    quantize_rows_fp8: CudaFunction,
    fp8_rescale: CudaFunction,
    gemm_fp8: CudaFunction,
    gemm_fp8_tma: CudaFunction,
    gemm_fp8_reduce: CudaFunction,
    /// Which kernel fp8 matrices past the GEMV rows take (None: off with
    /// HEARTH_FP8_GEMM=dequant, or too little shared memory; dequantized to bf16 for cuBLASLt
    /// then).
    fp8_gemm: Option<gemm_fp8::Fp8Gemm>,
    /// The blocks that kernel runs at once, its K split's target for one row tile: as many as
    /// the SMs hold, or HEARTH_FP8_GEMM_BLOCKS.
    gemm_fp8_blocks: usize,
    /// How many clusters of each size gemm_fp8_tma runs at once (measured when it is the
    /// kernel).
    fp8_clusters: gemm_fp8::ClusterSlots,
    rope_write_kv: [CudaFunction; 2],
    /// A decode step's rope_write_kv + decode attention + merge in one launch, `[group][cache]
    /// [head_dim 64, 128]` as `attn_decode_tc` (attention_decode_tc.cu), its arrival counters
    /// (a launch row's KV heads, zeroed here; the kernel leaves them zero), and whether decode
    /// steps take it (HEARTH_ROPE_ATTN=0: off).
    attn_decode_tc_rope: [[[CudaFunction; 2]; 2]; 2],
    attn_arrivals: (CudaSlice<u32>, u64),
    rope_attn_on: bool,
    moe_route: CudaFunction,
    moe_route_gemv: CudaFunction,
    /// moe_route_gemv's arrival counters, one a row (GEMV_MAX_ROWS), zeroed here; the kernel
    /// leaves them zero.
    route_arrivals: (CudaSlice<u32>, u64),
    moe_gate_up: CudaFunction,
    moe_down: CudaFunction,
    moe_combine: CudaFunction,
    moe_gemm: CudaFunction,
    moe_gemm_silu: CudaFunction,
    moe_sort: CudaFunction,
    moe_gate_up_tc: CudaFunction,
    moe_down_tc: CudaFunction,
    /// Whether decode experts take moe_tc.cu (off with HEARTH_MOE_DECODE=gemv: moe_gemv).
    moe_tc_on: bool,
    /// Whether prefill experts take moe_gemm (off with HEARTH_MOE_GEMM=cublas: cuBLASLt GEMMs).
    moe_gemm_on: bool,
    /// Whether the decode GEMVs take the RMS norm before them (GemvNorm; off with
    /// HEARTH_NORM_FOLD=0: a norm kernel each, to compare).
    norm_fold_on: bool,
    gemv_norm_stats: CudaFunction,
    /// gemv_norm_stats' inverse RMS of each row (GEMV_MAX_ROWS), read by the GEMV after it.
    norm_inv: (CudaSlice<f32>, u64),
    linear_heads: CudaFunction,
    /// [bf16 cache, fp8 cache] variants.
    write_latent: [CudaFunction; 2],
    mla_prep: [CudaFunction; 2],
    mla_attention: [CudaFunction; 2],
    mla_merge: CudaFunction,
    mla_gather: [CudaFunction; 2],
    mla_q_pack: CudaFunction,
    mla_softmax: CudaFunction,
    /// Tensor-core MLA, `[cache][MT 2, 4]`, and its split merge.
    mla_tc: [[CudaFunction; 2]; 2],
    mla_tc_merge: CudaFunction,
    /// The merge and W_UV in one launch for decode rows (none with HEARTH_MLA_MERGE_UV=0).
    mla_merge_uv: Option<CudaFunction>,
    /// The weight ring (HEARTH_RING_DECODE=1, sm_90 and later; see kernels/ring.rs).
    ring: Option<Ring>,
}

fn cfg(grid: (u32, u32), block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (grid.0, grid.1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Where kernels launch with programmatic stream serialization.
#[derive(Debug, Clone, Copy)]
struct Pdl {
    eager: bool,
    graphs: bool,
}

/// On compute capability 9.0 and later (griddepcontrol is sm_90 PTX): eager steps and decode
/// graphs; HEARTH_PDL=0 off, 1 outside graphs only.
fn programmatic_launch(stream: &CudaStream) -> Result<Pdl, BackendError> {
    let major = stream
        .context()
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let mode = std::env::var("HEARTH_PDL").unwrap_or_default();
    Ok(Pdl {
        eager: major >= 9 && mode != "0",
        graphs: major >= 9 && mode != "0" && mode != "1",
    })
}

/// Threads for a row-wise kernel over `n` values: a multiple of 32, at most 256.
fn row_threads(n: usize) -> u32 {
    (n.div_ceil(32) * 32).clamp(32, 256) as u32
}

/// Threads for the RMS norms: one 16-byte access each where rows allow (see norm_row).
pub(super) fn norm_threads(n: usize) -> u32 {
    let lanes = if n.is_multiple_of(4) { n / 4 } else { n };
    (lanes.div_ceil(32) * 32).clamp(32, 1024) as u32
}

/// The GEMV kernels `{prefix}_{M}_{R}` for M = 1..=GEMV_MAX_ROWS and R in `features` (features a
/// block: GEMV_FEATURES_PER_BLOCK, or GEMV_SWIGLU_FEATURES for the SwiGLU pairs).
fn gemv_table(
    prefix: &str,
    features: &[usize],
    f: &impl Fn(&str) -> Result<CudaFunction, BackendError>,
) -> Result<Vec<CudaFunction>, BackendError> {
    (1..=GEMV_MAX_ROWS)
        .flat_map(|m| features.iter().map(move |r| (m, r)))
        .map(|(m, r)| f(&format!("{prefix}_{m}_{r}")))
        .collect()
}

/// Grid for a grid-stride elementwise kernel over `n` values.
fn flat(n: usize) -> LaunchConfig {
    cfg(((n.div_ceil(256)).clamp(1, 65_535) as u32, 1), 256)
}

/// Launches `f` with the given arguments on `stream`.
macro_rules! launch {
    ($self:ident, $f:ident, $cfg:expr, $($arg:expr),+ $(,)?) => {{
        launch!(@fn $self, &$self.$f, $cfg, $($arg),+)
    }};
    (@fn $self:ident, $func:expr, $cfg:expr, $($arg:expr),+ $(,)?) => {{
        if $self.skipping() {
            return Ok(());
        }
        let mut b = $self.launcher($func)?;
        $( b.arg(&$arg); )+
        // SAFETY: every pointer argument is a live device allocation owned by the backend, sized
        // by the caller for the shapes passed alongside (each launcher's doc says which); the
        // argument list matches the kernel's `extern "C"` signature in cu/*.cu in order and type.
        unsafe { b.launch($cfg) }
    }};
}

// After `launch!`, which the attention launchers use too.
mod attention;
mod launch;
use attention::{decode_tc_variants, decode_variants};
pub use attention::{AttnLaunch, RopeWriteLaunch, ROPE_ATTN_MAX_KEYS};
use launch::Launch;
mod gemm_fp8;
mod tensor_map;
pub use gemm_fp8::{FP8_GEMM_MAX_ROWS, W8A8_AFTER_ROWS};
mod gemv;
pub use gemv::GemvNorm;
mod moe_mla;
mod ring;
mod ring_timeline;
pub use moe_mla::{
    MlaAbsorb, MlaLaunch, MlaPrepLaunch, MoeLaunch, MoeShape, MLA_MAX_RANK, MLA_TC_SHAPE,
    MOE_GEMM_ROWS, MOE_MAX_EXPERTS, MOE_MAX_GROUPS, MOE_MAX_TOPK,
};
use ring::Ring;

impl Kernels {
    /// The GPU's streaming multiprocessors.
    pub fn sms(&self) -> usize {
        self.sms
    }

    pub fn load(module: &Arc<CudaModule>, stream: Arc<CudaStream>) -> Result<Self, BackendError> {
        let f = |name: &str| module.load_function(name).map_err(BackendError::from);
        let sms = stream.context().attribute(
            cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )? as usize;
        let pdl = programmatic_launch(&stream)?;
        let smem_optin = stream
            .context()
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?
            as usize;
        let smem_per_sm = stream.context().attribute(
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
        )? as usize;
        let cc = (
            stream
                .context()
                .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            stream
                .context()
                .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let (fp8_gemm, fp8_blocks) = gemm_fp8::config(cc, sms, smem_optin, smem_per_sm);
        let mut k = Kernels {
            ring: Ring::load(module, &stream, sms, pdl.graphs)?,
            embedding: f("embedding")?,
            rms_norm: f("rms_norm")?,
            add_rms_norm: f("add_rms_norm")?,
            rope: f("rope")?,
            silu_mul: f("silu_mul")?,
            add_bias: f("add_bias")?,
            f32_to_bf16: f("f32_to_bf16")?,
            split_qkv: f("split_qkv")?,
            silu_mul_pair: f("silu_mul_pair")?,
            gather_rows: f("gather_rows")?,
            write_kv: [f("write_kv")?, f("write_kv_fp8")?],
            attention_prefill: f("attention_prefill")?,
            attn_decode: [
                decode_variants(&f, "attn_decode")?,
                decode_variants(&f, "attn_decode_fp8")?,
            ],
            attn_decode_merge: [f("attn_decode_merge")?, f("attn_decode_merge_wide")?],
            attn_decode_tc: decode_tc_variants(&f, "attn_decode_tc")?,
            attn_prefill_tc: [
                [
                    [f("attn_prefill_tc_64")?, f("attn_prefill_tc_128")?],
                    [f("attn_prefill_tc_fp8_64")?, f("attn_prefill_tc_fp8_128")?],
                ],
                [
                    [f("attn_prefill_tc_h2_64")?, f("attn_prefill_tc_h2_128")?],
                    [
                        f("attn_prefill_tc_h2_fp8_64")?,
                        f("attn_prefill_tc_h2_fp8_128")?,
                    ],
                ],
            ],
            attn_prefill_wg: if cc == (9, 0)
                && std::env::var("HEARTH_PREFILL_ATTN").as_deref() != Ok("mma")
            {
                Some([
                    [f("attn_prefill_wg_128")?, f("attn_prefill_wg_fp8_128")?],
                    [
                        f("attn_prefill_wg_h2_128")?,
                        f("attn_prefill_wg_h2_fp8_128")?,
                    ],
                ])
            } else {
                None
            },
            argmax_rows: f("argmax_rows")?,
            sample_rows: f("sample_rows")?,
            gemv: [
                gemv_table("gemv_bf16", &GEMV_FEATURES_PER_BLOCK, &f)?,
                gemv_table("gemv_fp8", &GEMV_FEATURES_PER_BLOCK, &f)?,
            ],
            gemv3: [
                gemv_table("gemv3_bf16", &GEMV_FEATURES_PER_BLOCK, &f)?,
                gemv_table("gemv3_fp8", &GEMV_FEATURES_PER_BLOCK, &f)?,
            ],
            gemv_swiglu: [
                gemv_table("gemv_swiglu_bf16", &GEMV_SWIGLU_FEATURES, &f)?,
                gemv_table("gemv_swiglu_fp8", &GEMV_SWIGLU_FEATURES, &f)?,
            ],
            fp8_rows_to_bf16: f("fp8_rows_to_bf16")?,
            quantize_rows_fp8: f("quantize_rows_fp8")?,
            fp8_rescale: f("fp8_rescale")?,
            gemm_fp8: f("gemm_fp8")?,
            gemm_fp8_tma: f("gemm_fp8_tma")?,
            gemm_fp8_reduce: f("gemm_fp8_reduce")?,
            fp8_gemm,
            gemm_fp8_blocks: fp8_blocks,
            fp8_clusters: Default::default(),
            rope_write_kv: [f("rope_write_kv")?, f("rope_write_kv_fp8")?],
            attn_decode_tc_rope: decode_tc_variants(&f, "attn_decode_tc_rope")?,
            attn_arrivals: {
                let b = stream.alloc_zeros::<u32>(
                    attention::DECODE_CHUNK_ROWS * attention::ROPE_ATTN_MAX_KV_HEADS,
                )?;
                let p = b.device_ptr(&stream).0;
                (b, p)
            },
            rope_attn_on: attention::rope_attn_from_env(),
            moe_route: f("moe_route")?,
            moe_route_gemv: f("moe_route_gemv")?,
            route_arrivals: {
                let b = stream.alloc_zeros::<u32>(GEMV_MAX_ROWS)?;
                let p = b.device_ptr(&stream).0;
                (b, p)
            },
            moe_gate_up: f("moe_gate_up")?,
            moe_down: f("moe_down")?,
            moe_combine: f("moe_combine")?,
            moe_gemm: f("moe_gemm_bf16")?,
            moe_gemm_silu: f("moe_gemm_silu_bf16")?,
            moe_gemm_on: std::env::var("HEARTH_MOE_GEMM").as_deref() != Ok("cublas"),
            moe_sort: f("moe_sort")?,
            moe_gate_up_tc: f("moe_gate_up_tc")?,
            moe_down_tc: f("moe_down_tc")?,
            moe_tc_on: std::env::var("HEARTH_MOE_DECODE").as_deref() != Ok("gemv"),
            norm_fold_on: std::env::var("HEARTH_NORM_FOLD").as_deref() != Ok("0"),
            gemv_norm_stats: f("gemv_norm_stats")?,
            norm_inv: {
                let b = stream.alloc_zeros::<f32>(GEMV_MAX_ROWS)?;
                let p = b.device_ptr(&stream).0;
                (b, p)
            },
            linear_heads: f("linear_heads")?,
            write_latent: [f("write_latent")?, f("write_latent_fp8")?],
            mla_prep: [f("mla_prep")?, f("mla_prep_fp8")?],
            mla_attention: [f("mla_attention")?, f("mla_attention_fp8")?],
            mla_merge: f("mla_merge")?,
            mla_gather: [f("mla_gather")?, f("mla_gather_fp8")?],
            mla_q_pack: f("mla_q_pack")?,
            mla_softmax: f("mla_softmax")?,
            mla_tc: [
                [f("mla_tc_2")?, f("mla_tc_4")?],
                [f("mla_tc_fp8_2")?, f("mla_tc_fp8_4")?],
            ],
            mla_tc_merge: f("mla_tc_merge")?,
            mla_merge_uv: (std::env::var("HEARTH_MLA_MERGE_UV").as_deref() != Ok("0"))
                .then(|| f("mla_merge_uv"))
                .transpose()?,
            pdl,
            sms,
            capturing: AtomicBool::new(false),
            stream,
            skip: AtomicBool::new(false),
        };
        for (c, fp8) in [false, true].into_iter().enumerate() {
            for (h, hd) in [64, 128].into_iter().enumerate() {
                for (i, per_block) in k.attn_prefill_tc.iter().enumerate() {
                    use cudarc::driver::sys::CUfunction_attribute as A;
                    let f = &per_block[c][h];
                    f.set_attribute(
                        A::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        Self::prefill_tc_smem(hd, fp8, i + 1) as i32,
                    )?;
                    // All of the unified L1 as shared memory: two blocks per SM need ~200 KiB.
                    f.set_attribute(A::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100)?;
                }
                for g in 0..2 {
                    k.attn_decode_tc[g][c][h].set_attribute(
                        cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        Self::decode_tc_smem(hd, fp8) as i32,
                    )?;
                    k.attn_decode_tc_rope[g][c][h].set_attribute(
                        cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        Self::rope_attn_max_smem(hd, fp8) as i32,
                    )?;
                }
            }
        }
        for (i, per_block) in k.attn_prefill_wg.iter().flatten().enumerate() {
            for f in per_block {
                f.set_attribute(
                    cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    Self::prefill_wg_smem(i + 1) as i32,
                )?;
            }
        }
        k.prepare_fp8_gemm()?;
        for (c, fp8) in [false, true].into_iter().enumerate() {
            for (w, wide) in [false, true].into_iter().enumerate() {
                k.mla_tc[c][w].set_attribute(
                    cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    Self::mla_tc_smem(wide, fp8) as i32,
                )?;
                // All of an SM's memory as shared memory: two narrow fp8 blocks fit in it.
                k.mla_tc[c][w].set_attribute(
                    cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                    100,
                )?;
            }
        }
        for f in [&k.moe_gemm, &k.moe_gemm_silu] {
            f.set_attribute(
                cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                moe_mla::MOE_GEMM_SMEM as i32,
            )?;
        }
        Ok(k)
    }

    /// A launch of `func` on the backend's stream (after the ring's recorded steps, which
    /// come before it).
    fn launcher<'a>(&'a self, func: &'a CudaFunction) -> Result<Launch<'a>, BackendError> {
        self.ring_flush()?;
        let pdl = if self.capturing.load(Ordering::Relaxed) {
            self.pdl.graphs
        } else {
            self.pdl.eager
        };
        Ok(Launch::new(&self.stream, func, pdl))
    }

    /// Whether launches are being skipped (a decode graph replays this step).
    pub fn skipping(&self) -> bool {
        self.skip.load(Ordering::Relaxed)
    }

    /// out[rows, cols] (f32) = table[ids[r]] (bf16 [vocab, cols]).
    pub fn embedding(
        &self,
        table: u64,
        ids: u64,
        out: u64,
        rows: usize,
        cols: usize,
    ) -> Result<(), BackendError> {
        let cols_i = cols as i32;
        launch!(
            self,
            embedding,
            cfg((rows as u32, 1), row_threads(cols)),
            table,
            ids,
            out,
            cols_i
        )
    }

    /// RMS norm of each `n`-long chunk of x (`chunks * n` f32) with f32 weight `w[n]`; out in
    /// bf16 when `out_bf16`, else f32.
    pub fn rms_norm(
        &self,
        (x, w, out): (u64, u64, u64),
        (chunks, n): (usize, usize),
        eps: f32,
        out_bf16: bool,
    ) -> Result<(), BackendError> {
        if let Some(r) = self
            .ring
            .as_ref()
            .filter(|r| chunks == 1 && !out_bf16 && r.recording())
        {
            if !self.skipping() && r.norm(&self.stream, (x, w, out), n, eps)? {
                return Ok(());
            }
        }
        let (n_i, ob) = (n as i32, i32::from(out_bf16));
        launch!(
            self,
            rms_norm,
            cfg((chunks as u32, 1), norm_threads(n)),
            x,
            w,
            out,
            n_i,
            eps,
            ob
        )
    }

    /// residual += x; out = rms_norm(residual), over `rows` rows of `n`; out in bf16 when
    /// `out_bf16`.
    pub fn add_rms_norm(
        &self,
        (residual, x, w, out): (u64, u64, u64, u64),
        (rows, n): (usize, usize),
        eps: f32,
        out_bf16: bool,
    ) -> Result<(), BackendError> {
        let (n_i, ob) = (n as i32, i32::from(out_bf16));
        launch!(
            self,
            add_rms_norm,
            cfg((rows as u32, 1), norm_threads(n)),
            residual,
            x,
            w,
            out,
            n_i,
            eps,
            ob
        )
    }

    /// In-place rotary embedding of x = [rows, n_heads * head_dim] at positions `pos[rows]`.
    pub fn rope(
        &self,
        x: u64,
        pos: u64,
        inv_freq: u64,
        rows: usize,
        shape: RopeShape,
    ) -> Result<(), BackendError> {
        let (nh, hd, rd, neox) = (
            shape.n_heads as i32,
            shape.head_dim as i32,
            shape.rotary_dim as i32,
            shape.neox as i32,
        );
        let threads = row_threads(shape.n_heads * shape.rotary_dim / 2);
        launch!(
            self,
            rope,
            cfg((rows as u32, 1), threads),
            x,
            pos,
            inv_freq,
            nh,
            hd,
            rd,
            neox
        )
    }

    /// out = silu(gate) * up over `n` values, out in bf16 when `out_bf16`.
    pub fn silu_mul(
        &self,
        (gate, up, out): (u64, u64, u64),
        n: usize,
        out_bf16: bool,
    ) -> Result<(), BackendError> {
        let ob = i32::from(out_bf16);
        launch!(self, silu_mul, flat(n), gate, up, out, n, ob)
    }

    /// y[rows, cols] += bias[cols].
    pub fn add_bias(&self, y: u64, bias: u64, cols: usize, n: usize) -> Result<(), BackendError> {
        let cols_i = cols as i32;
        launch!(self, add_bias, flat(n), y, bias, cols_i, n)
    }

    pub fn f32_to_bf16(&self, x: u64, y: u64, n: usize) -> Result<(), BackendError> {
        launch!(self, f32_to_bf16, flat(n), x, y, n)
    }

    /// Splits `rows` rows of a fused projection y[rows, n0 + n1 + n2] into outs[i] = (y_i, bias_i
    /// or 0, n_i).
    pub fn split_qkv(
        &self,
        y: u64,
        outs: [(u64, u64, usize); 3],
        rows: usize,
    ) -> Result<(), BackendError> {
        let [(q, bq, n0), (k, bk, n1), (v, bv, n2)] = outs;
        let total = rows * (n0 + n1 + n2);
        let (n0, n1, n2) = (n0 as i32, n1 as i32, n2 as i32);
        launch!(
            self,
            split_qkv,
            flat(total),
            y,
            q,
            k,
            v,
            bq,
            bk,
            bv,
            n0,
            n1,
            n2,
            total
        )
    }

    /// out[r, c] = silu(gu[r, c]) * gu[r, n + c] over `rows` rows of a fused gate/up
    /// projection (n even); gu in bf16 when `gu_bf16`, out when `out_bf16`.
    pub fn silu_mul_pair(
        &self,
        (gu, out): (u64, u64),
        (rows, n): (usize, usize),
        (gu_bf16, out_bf16): (bool, bool),
    ) -> Result<(), BackendError> {
        assert!(n.is_multiple_of(2), "silu_mul_pair: odd width {n}");
        let blocks = (n / 2).div_ceil(256).clamp(1, 64) as u32;
        let c = cfg((blocks, rows.clamp(1, 65_535) as u32), 256);
        let (n_i, rows_i) = (n as i32, rows as i32);
        let (gb, ob) = (i32::from(gu_bf16), i32::from(out_bf16));
        launch!(self, silu_mul_pair, c, gu, out, n_i, rows_i, gb, ob)
    }

    /// out[i] = x[rows[i]] for `n` gathered rows of `cols`; x and out each bf16 or f32 as
    /// `bf16` = (x's, out's) says.
    pub fn gather_rows(
        &self,
        (x, rows, out): (u64, u64, u64),
        (n, cols): (usize, usize),
        bf16: (bool, bool),
    ) -> Result<(), BackendError> {
        let (cols_i, ib, ob) = (cols as i32, i32::from(bf16.0), i32::from(bf16.1));
        launch!(
            self,
            gather_rows,
            cfg((n as u32, 1), row_threads(cols)),
            x,
            rows,
            out,
            cols_i,
            ib,
            ob
        )
    }

    /// Writes `rows` K and V rows of `kv_dim` into the layer's caches (bf16, or fp8 e4m3 when
    /// `fp8`) at `slots`.
    pub fn write_kv(
        &self,
        k: u64,
        v: u64,
        slots: u64,
        caches: (u64, u64),
        (rows, kv_dim): (usize, usize),
        fp8: bool,
    ) -> Result<(), BackendError> {
        let (kc, vc) = caches;
        let d = kv_dim as i32;
        launch!(
            @fn self,
            &self.write_kv[usize::from(fp8)],
            cfg((rows as u32, 1), row_threads(kv_dim)),
            k,
            v,
            slots,
            kc,
            vc,
            d
        )
    }

    /// ids[r] = argmax of logits row r (`rows` rows of `vocab`).
    pub fn argmax_rows(
        &self,
        logits: u64,
        ids: u64,
        rows: usize,
        vocab: usize,
    ) -> Result<(), BackendError> {
        let v = vocab as i32;
        launch!(
            self,
            argmax_rows,
            cfg((rows as u32, 1), 1024),
            logits,
            ids,
            v
        )
    }

    /// ids[r] = a token sampled from logits row r under params[5 r ..] = (temperature, top_k,
    /// top_p, min_p, u) (`rows` rows of `vocab`; see sample_rows in sample.cu).
    pub fn sample_rows(
        &self,
        logits: u64,
        params: u64,
        ids: u64,
        (rows, vocab): (usize, usize),
    ) -> Result<(), BackendError> {
        let v = vocab as i32;
        launch!(
            self,
            sample_rows,
            cfg((rows as u32, 1), 1024),
            logits,
            params,
            ids,
            v
        )
    }
}

/// Head layout for `rope`.
#[derive(Debug, Clone, Copy)]
pub struct RopeShape {
    pub n_heads: usize,
    pub head_dim: usize,
    pub rotary_dim: usize,
    pub neox: bool,
}
