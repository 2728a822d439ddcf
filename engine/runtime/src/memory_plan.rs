//! The CUDA memory plan, made after the weights are loaded: measure free memory, reserve the
//! activation arena for the largest step (every buffer a forward pass holds, the logits of
//! max_num_seqs rows) and the matmul scratch (the bf16 copy of a matmul's input, a fused
//! matmul's output before it is split) plus a fixed margin for cuBLASLt, graphs and the driver, then give the rest of `total * gpu_memory_utilization` to bf16 KV blocks. The
//! breakdown and the KV capacity in tokens are logged.

use hearth_backend::CudaBackend;
use hearth_models::CausalLm;
use tracing::info;

use crate::device::{StepLimits, GIB};
use crate::loader::LoadRequest;
use crate::RuntimeError;

/// cuBLASLt workspace, CUDA graphs and what the driver takes on first launches.
const MARGIN_BYTES: usize = 512 << 20;

pub fn plan_cuda(
    backend: &CudaBackend,
    req: &LoadRequest,
    model: &dyn CausalLm<CudaBackend>,
    limits: StepLimits,
) -> Result<usize, RuntimeError> {
    let info = model.info();
    let tokens = limits.max_num_batched_tokens;
    let logits_rows = limits.max_num_seqs.min(tokens);
    let arena =
        tokens * info.activation_floats_per_token * 4 + 2 * logits_rows * info.vocab_size * 4;
    let matmul_input = tokens * info.matmul_input_floats_per_token * 2;
    let fused = tokens * info.fused_floats_per_token * 4;
    backend.reserve_activations(arena)?;
    backend.reserve_scratch(matmul_input, fused)?;
    let activations = arena + matmul_input + fused;
    let dev = backend.device_info()?;
    let util = req.gpu_memory_utilization;
    let allowed = (dev.total_bytes as f64 * util) as usize;
    let in_use = dev.total_bytes - dev.free_bytes;
    let kv_bytes = allowed
        .checked_sub(in_use + MARGIN_BYTES)
        .filter(|b| *b > 0)
        .ok_or_else(|| {
            RuntimeError::Unsupported(format!(
                "engine.gpu_memory_utilization {util}: {:.2} GiB allowed on {} but weights and \
                 activations already take {:.2} GiB; raise it or lower max_num_batched_tokens",
                allowed as f64 / GIB,
                dev.name,
                (in_use + MARGIN_BYTES) as f64 / GIB
            ))
        })?;
    let per_token = model.kv_spec(1, 1).bytes_per_token(req.kv_dtype.bytes());
    let block_size = req.block_size.max(1);
    let blocks = kv_bytes / (per_token * block_size);
    info!(
        device = %dev.name,
        total_gib = format!("{:.2}", dev.total_bytes as f64 / GIB),
        in_use_gib = format!("{:.2}", in_use as f64 / GIB),
        activations_gib = format!("{:.2}", activations as f64 / GIB),
        margin_gib = format!("{:.2}", MARGIN_BYTES as f64 / GIB),
        kv_gib = format!("{:.2}", kv_bytes as f64 / GIB),
        gpu_memory_utilization = util,
        kv_bytes_per_token = per_token,
        kv_dtype = req.kv_dtype.name(),
        kv_tokens = blocks * block_size,
        "phase: plan memory (weights + activations in use, the KV cache gets the rest)"
    );
    Ok(blocks)
}
