//! gemm_fp8 (cu/gemm_fp8.cu) and gemm_fp8_tma (cu/gemm_fp8_tma.cu): fp8 matrices past the GEMV
//! rows, read as fp8 by the tensor cores; and the conversions of the cuBLASLt paths past them
//! (fp8_rows_to_bf16, quantize_rows_fp8, fp8_rescale).

use cudarc::driver::sys::CUtensorMapDataType::{
    CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 as BF16, CU_TENSOR_MAP_DATA_TYPE_UINT8 as U8,
};
use cudarc::driver::{sys, CudaFunction, CudaStream, DeviceRepr};

use super::super::gemm::Out;
use super::launch::cluster_attribute;
use super::tensor_map::TensorMap;
use super::{cfg, flat, row_threads, Kernels, LaunchConfig};
use crate::BackendError;

/// Rows up to which fp8 matrices can take gemm_fp8 (W8A16: decode batches keep their
/// activations' bits) where W8A8 does not take them first (W8A8_AFTER_ROWS); past them the
/// matrix is dequantized to bf16 for cuBLASLt, which is faster there (Qwen3-8B's shapes on an
/// H100: gemm_fp8 is 1.2-2.8x faster than dequantizing at 9-128 rows, 1.4-2.2x slower at 256).
pub const FP8_GEMM_MAX_ROWS: usize = 128;
/// Rows past which fp8 matrices run as W8A8 on cuBLASLt where it has fp8 matmuls and the fp8
/// matmul before it is gemm_fp8_tma (decode batches past 64 sequences and prefill chunks;
/// HEARTH_FP8_W8A8_ROWS changes it; with gemm_fp8 on mma.sync it is FP8_GEMM_MAX_ROWS, not
/// measured against it): at 65-128 rows gemm_fp8_tma reads each weight tile twice and
/// cuBLASLt's W8A8 is about twice as fast; at 16-64 gemm_fp8_tma is as fast or faster
/// (Qwen3-8B's shapes on an H200).
pub const W8A8_AFTER_ROWS: usize = 64;
/// The kernels' tile (FG_ROWS, FG_FEATURES in cu/gemm_fp8.cu) and threads.
const ROWS: usize = 64;
const FEATURES: usize = 256;
const THREADS: u32 = 256;
/// gemm_fp8's chunk (FG_KC) and the shared memory of one pipeline stage (FG_STAGE_BYTES).
const CHUNK: usize = 64;
const STAGE_BYTES: usize = FEATURES * (CHUNK + 32) + ROWS * (CHUNK + 32) * 2;
/// gemm_fp8's pipeline stages at most (chunks in flight + the one multiplied): three leave room
/// for two blocks an SM on an H100, which the registers are sized for (FG_MIN_BLOCKS).
const MAX_STAGES: usize = 3;
const MAX_BLOCKS_PER_SM: usize = 2;
/// gemm_fp8_tma's tile (FT_FEATURES) and threads (FT_THREADS: three consumer warpgroups and a
/// producer warp), chunk (FT_KC in cu/gemm_fp8_tma.cu), activation box (64 values) and shared
/// memory (FT_SMEM_BYTES: FT_STAGES = 4 stages of weights and activations, 1 KiB for
/// aligning them, the barriers): one block an SM.
const WG_FEATURES: usize = 192;
const WG_THREADS: u32 = 416;
const WG_CHUNK: usize = 128;
const WG_XBOX: usize = 64;
const WG_STAGES: usize = 4;
const WG_SMEM_BYTES: usize =
    WG_STAGES * (WG_FEATURES * WG_CHUNK + ROWS * WG_CHUNK * 2) + 1024 + 2 * WG_STAGES * 8;
/// What a gemm_fp8_tma block's pipeline ramp costs, in chunks, for its K split.
const WG_RAMP_CHUNKS: usize = 1;
/// gemm_fp8_tma's K parts of a tile at most: one cluster, whose blocks add their sums through
/// distributed shared memory (8 is the portable cluster size).
const MAX_CLUSTER: usize = 8;

/// gemm_fp8_tma's output: `mode` (0 f32, 1 bf16, 2 added to f32, 3 SwiGLU, 4 Q/K/V apart) and,
/// for mode 4, where K and V go.
struct TmaOut {
    mode: i32,
    qkv: FtQkv,
}

impl TmaOut {
    fn mode(mode: i32) -> Self {
        TmaOut {
            mode,
            qkv: FtQkv::default(),
        }
    }
}

/// The kernel's FtQkv: mode 4 writes features below n0 to y ([m, n0] f32), below n0 + n1 to k
/// ([m, n1]), the rest to v.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct FtQkv {
    k: u64,
    v: u64,
    n0: i32,
    n1: i32,
}

// SAFETY: two device addresses and two i32, laid out as the kernel's struct (8-byte aligned, 24
// bytes); the driver copies them as they are.
unsafe impl DeviceRepr for FtQkv {}

/// `slots[p]`: how many clusters of p gemm_fp8_tma blocks run at once (`slots[1]`: blocks).
/// Clusters must fit in one GPC, so an H100's 132 SMs hold 66 of 2 but only 30 of 4 (120
/// blocks) and 15 of 8.
pub(super) type ClusterSlots = [usize; MAX_CLUSTER + 1];

/// Which kernel multiplies fp8 matrices past the GEMV rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fp8Gemm {
    /// gemm_fp8_tma: wgmma fed by TMA (sm_90a, compute capability 9.0), one block an SM.
    Wgmma,
    /// gemm_fp8: mma.sync (every other GPU), with its pipeline stages.
    MmaSync { stages: usize },
}

/// The fp8 GEMM for a GPU of compute capability `cc` with `sms` SMs whose blocks may have
/// `smem_optin` bytes of shared memory, `smem_per_sm` an SM, and the blocks it runs at once, as
/// `choose` says with HEARTH_FP8_GEMM, HEARTH_FP8_GEMM_STAGES and HEARTH_FP8_GEMM_BLOCKS.
pub(super) fn config(
    cc: (i32, i32),
    sms: usize,
    smem_optin: usize,
    smem_per_sm: usize,
) -> (Option<Fp8Gemm>, usize) {
    let env = |name: &str| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
    };
    let (kernel, per_sm) = choose(
        cc,
        smem_optin,
        smem_per_sm,
        &std::env::var("HEARTH_FP8_GEMM").unwrap_or_default(),
        env("HEARTH_FP8_GEMM_STAGES"),
    );
    (
        kernel,
        env("HEARTH_FP8_GEMM_BLOCKS").unwrap_or(sms * per_sm),
    )
}

/// The fp8 GEMM and its blocks an SM. `choice` "dequant": none (matrices dequantized for
/// cuBLASLt); "mma": gemm_fp8 on a 9.0 GPU too. `stages_cap` caps gemm_fp8's stages.
fn choose(
    cc: (i32, i32),
    smem_optin: usize,
    smem_per_sm: usize,
    choice: &str,
    stages_cap: Option<usize>,
) -> (Option<Fp8Gemm>, usize) {
    if choice == "dequant" {
        return (None, 1);
    }
    if cc == (9, 0) && choice != "mma" && smem_optin >= WG_SMEM_BYTES {
        return (Some(Fp8Gemm::Wgmma), 1);
    }
    let cap = stages_cap.unwrap_or(MAX_STAGES).clamp(2, 8);
    let stages = Some((smem_optin / STAGE_BYTES).min(cap)).filter(|s| *s >= 2);
    // The driver keeps 1 KiB a block.
    let per_sm = stages.map_or(1, |s| {
        (smem_per_sm / (s * STAGE_BYTES + 1024)).clamp(1, MAX_BLOCKS_PER_SM)
    });
    (stages.map(|stages| Fp8Gemm::MmaSync { stages }), per_sm)
}

/// gemm_fp8's (parts, chunks a part) for an [n, k] matrix aiming at `target` blocks a row tile:
/// as many parts as fill the target beside the feature blocks (at least one, at most a chunk
/// each), evened out so that none is empty.
fn split(n: usize, k: usize, target: usize) -> (usize, usize) {
    let blocks = n.div_ceil(FEATURES);
    let chunks = k.div_ceil(CHUNK);
    let parts = (target / blocks).clamp(1, chunks);
    let per_part = chunks.div_ceil(parts);
    (chunks.div_ceil(per_part), per_part)
}

/// gemm_fp8_tma's (parts, chunks a part) for an [n, k] matrix: the parts (a cluster a tile)
/// whose tiles finish soonest in whole waves of the clusters that fit at once (waves times a
/// block's chunks plus WG_RAMP_CHUNKS for its pipeline's ramp), the fewest parts of those.
/// Partial sums written to memory and added by another launch cost as many bytes again as a
/// third of the weights at 64 rows, so K is split only as far as one cluster goes: Qwen3-8B's
/// gate/up runs whole (128 blocks, one wave) in 47 us at 64 rows on an H100, against 73 us in
/// 4 parts of 256-feature tiles with gemm_fp8_reduce.
fn split_clusters(n: usize, k: usize, slots: &ClusterSlots) -> (usize, usize) {
    let tiles = n.div_ceil(WG_FEATURES);
    let chunks = k.div_ceil(WG_CHUNK);
    (1..=chunks.min(MAX_CLUSTER))
        .map(|p| {
            let per_part = chunks.div_ceil(p);
            (chunks.div_ceil(per_part), per_part)
        })
        .filter(|&(parts, _)| slots[parts] > 0)
        .min_by_key(|&(parts, per_part)| {
            let waves = tiles.div_ceil(slots[parts]);
            (waves * (per_part + WG_RAMP_CHUNKS), parts)
        })
        .expect("K has a chunk and one part always fits")
}

/// How many clusters of 2..=MAX_CLUSTER gemm_fp8_tma blocks the GPU runs at once (0 for a size
/// the driver refuses), beside `blocks` single blocks.
pub(super) fn cluster_slots(
    func: &CudaFunction,
    stream: &CudaStream,
    blocks: usize,
) -> ClusterSlots {
    let mut slots = [0; MAX_CLUSTER + 1];
    slots[1] = blocks.max(1);
    for (p, slot) in slots.iter_mut().enumerate().skip(2) {
        let mut attr = cluster_attribute(p as u32);
        let config = sys::CUlaunchConfig {
            gridDimX: 1,
            gridDimY: 1,
            gridDimZ: p as u32,
            blockDimX: WG_THREADS,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: WG_SMEM_BYTES as u32,
            hStream: stream.cu_stream(),
            attrs: &mut attr,
            numAttrs: 1,
        };
        let mut n = 0;
        // SAFETY: n, config and attr live across the call; the function is a loaded kernel
        // whose dynamic shared memory limit allows WG_SMEM_BYTES.
        let r = unsafe { sys::cuOccupancyMaxActiveClusters(&mut n, func.cu_function(), &config) };
        if r == sys::CUresult::CUDA_SUCCESS {
            *slot = n.max(0) as usize;
        }
    }
    slots
}

impl Kernels {
    /// out[rows, cols] (bf16) = w (fp8 e4m3) times each row's scale; cols % 8 == 0.
    pub fn fp8_rows_to_bf16(
        &self,
        (w, scales, out): (u64, u64, u64),
        (rows, cols): (usize, usize),
    ) -> Result<(), BackendError> {
        assert!(cols.is_multiple_of(8), "fp8 matrices have cols % 8 == 0");
        let units = (rows * cols / 8) as i64;
        let cols_i = cols as i32;
        launch!(
            self,
            fp8_rows_to_bf16,
            flat(units as usize),
            w,
            scales,
            out,
            units,
            cols_i
        )
    }

    /// Each row of x [rows, cols] (f32, or bf16 with `x_bf16`) as fp8 e4m3 in q [rows, cols] and
    /// its scale in scales [rows] (W8A8: the row's largest magnitude over 448); cols % 4 == 0.
    pub fn quantize_rows_fp8(
        &self,
        (x, x_bf16): (u64, bool),
        (q, scales): (u64, u64),
        (rows, cols): (usize, usize),
    ) -> Result<(), BackendError> {
        assert!(
            cols.is_multiple_of(4),
            "quantize_rows_fp8 takes cols % 4 == 0"
        );
        let (x_bf16, cols_i) = (i32::from(x_bf16), cols as i32);
        let config = cfg((rows as u32, 1), row_threads(cols / 4));
        launch!(
            self,
            quantize_rows_fp8,
            config,
            x,
            x_bf16,
            q,
            scales,
            cols_i
        )
    }

    /// W8A8's scales after an unscaled fp8 matmul: y [rows, n] = raw * sx[row] * sw[col] as
    /// `mode` says (raw and y f32 for Out::F32, bf16 for Out::Bf16, may be the same buffer; for
    /// Out::AddF32 raw f32 is added into y); n % 4 == 0, sw 16-byte aligned.
    pub fn fp8_rescale(
        &self,
        (raw, y, mode): (u64, u64, Out),
        (sx, sw): (u64, u64),
        (rows, n): (usize, usize),
    ) -> Result<(), BackendError> {
        assert!(
            n.is_multiple_of(4) && sw.is_multiple_of(16),
            "fp8_rescale takes n % 4 == 0 and 16-byte aligned scales"
        );
        let mode_i: i32 = match mode {
            Out::F32 => 0,
            Out::Bf16 => 1,
            Out::AddF32 => 2,
        };
        let n_i = n as i32;
        let config = cfg((rows as u32, 1), row_threads(n / 4));
        launch!(self, fp8_rescale, config, raw, y, sx, sw, n_i, mode_i)
    }

    /// Sets the chosen fp8 GEMM's shared memory limit and, for gemm_fp8_tma, measures how many
    /// clusters of each size it runs at once (at load, before any launch).
    pub(super) fn prepare_fp8_gemm(&mut self) -> Result<(), BackendError> {
        use cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as SMEM;
        match self.fp8_gemm {
            Some(Fp8Gemm::MmaSync { stages }) => self
                .gemm_fp8
                .set_attribute(SMEM, (stages * STAGE_BYTES) as i32)?,
            Some(Fp8Gemm::Wgmma) => {
                self.gemm_fp8_tma
                    .set_attribute(SMEM, WG_SMEM_BYTES as i32)?;
                self.fp8_clusters =
                    cluster_slots(&self.gemm_fp8_tma, &self.stream, self.gemm_fp8_blocks);
            }
            None => {}
        }
        Ok(())
    }

    /// The kernel fp8 matrices past the GEMV rows take, for the startup log.
    pub fn fp8_gemm_kernel(&self) -> String {
        match self.fp8_gemm {
            Some(Fp8Gemm::Wgmma) => format!(
                "gemm_fp8_tma on wgmma with TMA copies, K parts added in clusters (clusters of \
                 2..8 blocks at once: {:?})",
                &self.fp8_clusters[2..]
            ),
            Some(Fp8Gemm::MmaSync { .. }) => "gemm_fp8 on mma.sync".into(),
            None => "none".into(),
        }
    }

    /// Whether an fp8 matmul of `rows` rows over `k` columns takes gemm_fp8.
    pub fn fp8_gemm_fits(&self, rows: usize, k: usize) -> bool {
        self.fp8_gemm.is_some() && rows <= FP8_GEMM_MAX_ROWS && k.is_multiple_of(16)
    }

    /// How gemm_fp8 splits K for an [n, k] matrix: (parts, chunks a part). The feature blocks
    /// times the parts fill the SMs once where the features alone would not; it depends on n
    /// and k only, so a row's sums never depend on how many rows there are.
    fn fp8_split(&self, n: usize, k: usize) -> (usize, usize) {
        match self.fp8_gemm {
            Some(Fp8Gemm::Wgmma) => split_clusters(n, k, &self.fp8_clusters),
            _ => split(n, k, self.gemm_fp8_blocks),
        }
    }

    /// Bytes of partial sums gemm_fp8 needs for an [n, k] matrix at up to FP8_GEMM_MAX_ROWS
    /// rows (0 when it does not split K).
    pub fn fp8_gemm_parts_bytes(&self, n: usize, k: usize) -> usize {
        if !self.fp8_gemm_fits(1, k) || self.fp8_gemm == Some(Fp8Gemm::Wgmma) {
            return 0;
        }
        match self.fp8_split(n, k) {
            (1, _) => 0,
            (parts, _) => parts * FP8_GEMM_MAX_ROWS * n * 4,
        }
    }

    /// Whether fp8 matrices past the GEMV rows take gemm_fp8_tma (on wgmma; compute capability
    /// 9.0) rather than gemm_fp8 on mma.sync.
    pub fn fp8_gemm_on_wgmma(&self) -> bool {
        self.fp8_gemm == Some(Fp8Gemm::Wgmma)
    }

    /// Whether fp8 matrices of `rows` rows over `k` columns stored together take
    /// gemm_fp8_tma's fused epilogues (compute capability 9.0): `gemm_fp8_swiglu` for a gate/up
    /// pair, `gemm_fp8_qkv` for Q/K/V.
    pub fn fp8_epilogue_fits(&self, rows: usize, k: usize) -> bool {
        self.fp8_gemm_on_wgmma() && self.fp8_gemm_fits(rows, k)
    }

    /// out [m, n] bf16 = silu(x . (gate * scales)^T) * (x . (up * scales)^T) for x [m, k] bf16
    /// and w the [2 n, k] fp8 matrix of gate then up, `scales` their 2 n row scales: the matmul
    /// and SwiGLU in one launch, the sums never leaving the SMs. Only where `fp8_epilogue_fits`.
    pub fn gemm_fp8_swiglu(
        &self,
        (w, scales, x, out): (u64, u64, u64, u64),
        (m, n, k): (usize, usize, usize),
    ) -> Result<(), BackendError> {
        assert!(
            self.fp8_epilogue_fits(m, k),
            "gemm_fp8_swiglu runs where fp8_epilogue_fits (got {m} x {k})"
        );
        if self.skipping() {
            return Ok(());
        }
        // Tiles of half a block's features, gate and up together: the split of the [2 n, k]
        // matrix, which depends on n and k only.
        let (split, per_part) = split_clusters(2 * n, k, &self.fp8_clusters);
        let grid = (m.div_ceil(ROWS), n.div_ceil(WG_FEATURES / 2), split);
        let wmap = TensorMap::matrix(w, U8, 1, (2 * n, k), (WG_FEATURES / 2, WG_CHUNK))?;
        self.launch_tma(
            (wmap, scales, x, out),
            grid,
            (m, n, k, per_part),
            TmaOut::mode(3),
        )
    }

    /// q [m, nq], k [m, nk] and v [m, nv], f32, = x . (w * scales)^T for x [m, k] bf16 and w
    /// the [nq + nk + nv, k] fp8 matrix of Q, K and V stored together: the matmul writing each
    /// part where it goes (no split pass). Only where `fp8_epilogue_fits`.
    pub fn gemm_fp8_qkv(
        &self,
        (w, scales, x): (u64, u64, u64),
        [(q, nq), (kp, nk), (v, nv)]: [(u64, usize); 3],
        (m, k): (usize, usize),
    ) -> Result<(), BackendError> {
        assert!(
            self.fp8_epilogue_fits(m, k),
            "gemm_fp8_qkv runs where fp8_epilogue_fits (got {m} x {k})"
        );
        if self.skipping() {
            return Ok(());
        }
        let n = nq + nk + nv;
        let (split, per_part) = split_clusters(n, k, &self.fp8_clusters);
        let grid = (m.div_ceil(ROWS), n.div_ceil(WG_FEATURES), split);
        let wmap = TensorMap::matrix(w, U8, 1, (n, k), (WG_FEATURES, WG_CHUNK))?;
        let out = TmaOut {
            mode: 4,
            qkv: FtQkv {
                k: kp,
                v,
                n0: nq as i32,
                n1: nk as i32,
            },
        };
        self.launch_tma((wmap, scales, x, q), grid, (m, n, k, per_part), out)
    }

    /// One gemm_fp8_tma launch: `grid` (row tiles, feature tiles, K parts), clusters along its
    /// z, `wmap` describing the weights as the mode's tiles take them; y [m, n] (or as `out`
    /// says). The callers return before encoding maps where launches are skipped.
    fn launch_tma(
        &self,
        (wmap, scales, x, y): (TensorMap, u64, u64, u64),
        grid: (usize, usize, usize),
        (m, n, k, per_part): (usize, usize, usize, usize),
        out: TmaOut,
    ) -> Result<(), BackendError> {
        let cfg = LaunchConfig {
            grid_dim: (grid.0 as u32, grid.1 as u32, grid.2 as u32),
            block_dim: (WG_THREADS, 1, 1),
            shared_mem_bytes: WG_SMEM_BYTES as u32,
        };
        let xmap = TensorMap::matrix(x, BF16, 2, (m, k), (ROWS, WG_XBOX))?;
        let (m_i, n_i, k_i, pp) = (m as i32, n as i32, k as i32, per_part as i32);
        let mut b = self.launcher(&self.gemm_fp8_tma)?;
        b.cluster_z(grid.2 as u32);
        b.arg(&wmap).arg(&xmap).arg(&scales).arg(&y);
        b.arg(&m_i)
            .arg(&n_i)
            .arg(&k_i)
            .arg(&pp)
            .arg(&out.mode)
            .arg(&out.qkv);
        // SAFETY: the arguments follow gemm_fp8_tma's signature in cu/gemm_fp8_tma.cu in order
        // and type (the maps are its FtTensorMap, out.qkv its FtQkv); the weights, scales, x
        // and the outputs are live allocations of the shapes the mode takes (the callers'
        // contracts), which the maps describe; split_clusters keeps the K parts <=
        // MAX_CLUSTER, one cluster a tile.
        unsafe { b.launch(cfg) }
    }

    /// y (as `mode` says) = x . (w * scales)^T for x [m, k] bf16, w [n, k] fp8 e4m3 with an f32
    /// scale a row, y [m, n]; `parts` holds `fp8_gemm_parts_bytes(n, k)`. Where K is split, the
    /// parts' sums are added by gemm_fp8_reduce after (gemm_fp8), or by the cluster of a
    /// tile's parts itself (gemm_fp8_tma).
    pub fn gemm_fp8(
        &self,
        (w, scales, x, y, parts): (u64, u64, u64, u64, u64),
        (m, n, k): (usize, usize, usize),
        mode: Out,
    ) -> Result<(), BackendError> {
        let kernel = self.fp8_gemm.expect("gemm_fp8 runs where fp8_gemm_fits");
        assert!(
            (1..=FP8_GEMM_MAX_ROWS).contains(&m) && k.is_multiple_of(16),
            "gemm_fp8 takes 1..={FP8_GEMM_MAX_ROWS} rows and K % 16 == 0 (got {m} x {k})"
        );
        let (split, per_part) = self.fp8_split(n, k);
        let features = match kernel {
            Fp8Gemm::Wgmma => WG_FEATURES,
            Fp8Gemm::MmaSync { .. } => FEATURES,
        };
        let grid = (m.div_ceil(ROWS), n.div_ceil(features));
        let mode = match mode {
            Out::F32 => 0i32,
            Out::Bf16 => 1,
            Out::AddF32 => 2,
        };
        let (m_i, n_i, k_i, pp) = (m as i32, n as i32, k as i32, per_part as i32);
        let grid_dim = (grid.0 as u32, grid.1 as u32, split as u32);
        match kernel {
            Fp8Gemm::Wgmma => {
                if self.skipping() {
                    return Ok(());
                }
                let wmap = TensorMap::matrix(w, U8, 1, (n, k), (WG_FEATURES, WG_CHUNK))?;
                let grid = (grid.0, grid.1, split);
                return self.launch_tma(
                    (wmap, scales, x, y),
                    grid,
                    (m, n, k, per_part),
                    TmaOut::mode(mode),
                );
            }
            Fp8Gemm::MmaSync { stages } => {
                let stages_i = stages as i32;
                let cfg = LaunchConfig {
                    grid_dim,
                    block_dim: (THREADS, 1, 1),
                    shared_mem_bytes: (stages * STAGE_BYTES) as u32,
                };
                launch!(
                    self, gemm_fp8, cfg, w, scales, x, y, parts, m_i, n_i, k_i, pp, stages_i, mode
                )?;
            }
        }
        if split == 1 {
            return Ok(());
        }
        let split_i = split as i32;
        launch!(
            self,
            gemm_fp8_reduce,
            flat(m * n),
            parts,
            scales,
            y,
            m_i,
            n_i,
            split_i,
            mode
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_cover_k_once_without_empty_parts_or_passing_the_target() {
        for n in [24, 256, 1000, 4096, 6144, 24576, 151_936] {
            for k in [16, 96, 1040, 4096, 12288] {
                for target in [1, 132, 264, 1000] {
                    let (parts, per_part) = split(n, k, target);
                    let chunks = k.div_ceil(CHUNK);
                    let at = format!("n {n} k {k} target {target}: {parts} x {per_part}");
                    assert!(parts >= 1 && parts <= chunks, "{at}");
                    assert!(parts * per_part >= chunks, "{at}: K not covered");
                    assert!((parts - 1) * per_part < chunks, "{at}: an empty part");
                    let blocks = n.div_ceil(FEATURES);
                    assert!(
                        parts == 1 || blocks * parts <= target,
                        "{at}: past the target"
                    );
                }
            }
        }
        // Qwen3-8B on an H100 (two blocks an SM): Q/K/V in 11 parts of 6 chunks, gate/up in 2.
        assert_eq!(split(6144, 4096, 264), (11, 6));
        assert_eq!(split(24576, 4096, 264), (2, 32));
    }

    #[test]
    fn hopper_takes_the_wgmma_kernel_and_other_gpus_gemm_fp8() {
        // H100: 227 KiB a block, 228 KiB an SM.
        let (optin, per_sm) = (232_448, 233_472);
        let wgmma = (Some(Fp8Gemm::Wgmma), 1);
        let mma3 = (Some(Fp8Gemm::MmaSync { stages: 3 }), 2);
        assert_eq!(choose((9, 0), optin, per_sm, "", None), wgmma);
        assert_eq!(choose((9, 0), optin, per_sm, "mma", None), mma3);
        assert_eq!(choose((9, 0), optin, per_sm, "dequant", None), (None, 1));
        // Too little shared memory for its three 56 KiB stages: gemm_fp8.
        assert_eq!(choose((9, 0), 160 << 10, per_sm, "", None), mma3);
        // An Ada card (99 KiB a block, 100 KiB an SM): gemm_fp8 in two stages, one block an SM.
        let ada = (Some(Fp8Gemm::MmaSync { stages: 2 }), 1);
        assert_eq!(choose((8, 9), 101_376, 102_400, "", None), ada);
    }

    #[test]
    fn cluster_splits_cover_k_once_in_clusters_that_fit() {
        // An H100 (132 SMs, one block each): clusters of 1..=8 at once.
        let h100: ClusterSlots = [0, 132, 66, 39, 30, 22, 17, 15, 15];
        let only_blocks: ClusterSlots = [0, 132, 0, 0, 0, 0, 0, 0, 0];
        for n in [24, 256, 1000, 4096, 6144, 24576, 151_936] {
            for k in [16, 96, 1040, 4096, 12288] {
                for slots in [&h100, &only_blocks] {
                    let (parts, per_part) = split_clusters(n, k, slots);
                    let chunks = k.div_ceil(WG_CHUNK);
                    let at = format!("n {n} k {k} slots {slots:?}: {parts} x {per_part}");
                    assert!(
                        (1..=MAX_CLUSTER).contains(&parts) && parts <= chunks,
                        "{at}"
                    );
                    assert!(slots[parts] > 0, "{at}: no such cluster fits");
                    assert!(parts * per_part >= chunks, "{at}: K not covered");
                    assert!((parts - 1) * per_part < chunks, "{at}: an empty part");
                }
            }
        }
        // Qwen3-8B in 192-feature tiles: Q/K/V's 32 in clusters of 3 (39 fit; 30 of 4 would
        // take two waves), o's 22 in clusters of 5 (22 fit: one wave of 7 chunks), gate/up whole
        // (128 tiles, one wave), down's 22 in clusters of 5 (20 chunks each).
        assert_eq!(split_clusters(6144, 4096, &h100), (3, 11));
        assert_eq!(split_clusters(4096, 4096, &h100), (5, 7));
        assert_eq!(split_clusters(24576, 4096, &h100), (1, 32));
        assert_eq!(split_clusters(4096, 12288, &h100), (5, 20));
        // No clusters: K whole.
        assert_eq!(split_clusters(4096, 4096, &only_blocks), (1, 32));
    }
}
