//! What every layer kind's loading and forward pass share: pulling weights from a checkpoint
//! onto a backend, and the activation buffers one forward pass reuses across layers.

use hearth_backend::{Backend, HostWeight};

use crate::config::HfConfig;
use crate::source::WeightSource;
use crate::LoadError;

/// A checkpoint being uploaded to a backend.
pub struct Load<'a, B: Backend> {
    pub b: &'a B,
    pub src: &'a dyn WeightSource,
    /// Quantize the linear layers' matrices to fp8 e4m3 with a scale a row as they load
    /// (`LoadOptions::fp8`).
    pub fp8: bool,
}

impl<B: Backend> Load<'_, B> {
    pub fn cfg(&self) -> &HfConfig {
        self.src.config()
    }

    pub fn path(&self) -> &std::path::Path {
        self.src.path()
    }

    pub fn host(&self, name: &str, shape: &[usize]) -> Result<HostWeight, LoadError> {
        self.src.require(name, shape)
    }

    pub fn up(&self, name: &str, shape: &[usize]) -> Result<B::Weight, LoadError> {
        Ok(self.b.upload(self.host(name, shape)?)?)
    }

    pub fn up_host(&self, w: HostWeight) -> Result<B::Weight, LoadError> {
        Ok(self.b.upload(w)?)
    }

    /// Weights read together, uploaded together (a MoE layer's experts, stored back to back; a
    /// backend may fuse their matmuls).
    pub fn group_vec(&self, parts: &[(String, [usize; 2])]) -> Result<Vec<B::Weight>, LoadError> {
        self.upload_group(parts, false)
    }

    /// A linear layer's matrix: `up`, quantized to fp8 first when the load asks for it.
    pub fn linear(&self, name: &str, shape: &[usize]) -> Result<B::Weight, LoadError> {
        let w = self.host(name, shape)?;
        self.up_host(if self.fp8 { w.to_fp8() } else { w })
    }

    /// Linear layers' matrices read together (`group_vec`), quantized as `linear`.
    pub fn linear_group<const N: usize>(
        &self,
        parts: [(String, [usize; 2]); N],
    ) -> Result<[B::Weight; N], LoadError> {
        Ok(self
            .upload_group(&parts, self.fp8)?
            .try_into()
            .unwrap_or_else(|_| panic!("upload_group returns one weight per input")))
    }

    fn upload_group(
        &self,
        parts: &[(String, [usize; 2])],
        fp8: bool,
    ) -> Result<Vec<B::Weight>, LoadError> {
        let ws = parts
            .iter()
            .map(|(name, shape)| {
                let w = self.host(name, shape)?;
                Ok(if fp8 { w.to_fp8() } else { w })
            })
            .collect::<Result<Vec<_>, LoadError>>()?;
        let up = self.b.upload_group(ws)?;
        assert_eq!(
            up.len(),
            parts.len(),
            "upload_group returns one weight per input"
        );
        Ok(up)
    }

    /// A SwiGLU MLP's gate, up and down projections under `prefix` (`...mlp`).
    pub fn mlp(&self, prefix: &str, inter: usize) -> Result<[B::Weight; 3], LoadError> {
        let h = self.cfg().hidden_size;
        let [gate, up] = self.linear_group([
            (format!("{prefix}.gate_proj.weight"), [inter, h]),
            (format!("{prefix}.up_proj.weight"), [inter, h]),
        ])?;
        let down = self.linear(&format!("{prefix}.down_proj.weight"), &[h, inter])?;
        Ok([gate, up, down])
    }
}

/// Activation buffers of one forward pass, reused by every layer.
pub struct Bufs<Buf> {
    pub q: Buf,
    pub k: Buf,
    pub v: Buf,
    pub attn: Buf,
    pub act: Buf,
    pub down: Buf,
    /// MLA's extra intermediates.
    pub q_a: Buf,
    pub q_a_norm: Buf,
    pub q_rope: Buf,
    pub latent: Buf,
    /// MLA's absorbed query (`q_nope` through W_UK).
    pub q_latent: Buf,
}

impl<Buf> Bufs<Buf> {
    pub fn new<B: Backend<Buf = Buf>>(b: &B) -> Self {
        Bufs {
            q: b.buf(0),
            k: b.buf(0),
            v: b.buf(0),
            attn: b.buf(0),
            act: b.buf(0),
            down: b.buf(0),
            q_a: b.buf(0),
            q_a_norm: b.buf(0),
            q_rope: b.buf(0),
            latent: b.buf(0),
            q_latent: b.buf(0),
        }
    }
}
