//! The feed-forward half of a layer: a SwiGLU MLP, or a mixture of SwiGLU experts with a router
//! and an optional shared expert (Qwen3-MoE, GLM-4.x MoE, DeepSeek-V3, GLM-4.7-Flash).

use hearth_backend::{Backend, MoeLayer, MoeRouting};

use crate::layers::{Bufs, Load};
use crate::LoadError;

/// An architecture's experts: the routing rule and the sizes to load.
#[derive(Debug, Clone)]
pub struct MoeArch {
    pub routing: MoeRouting,
    pub expert_inter: usize,
    /// The shared expert's intermediate size, when there is one.
    pub shared_inter: Option<usize>,
    /// Sigmoid routers carry `e_score_correction_bias`.
    pub score_bias: bool,
}

pub enum Ffn<W> {
    Dense([W; 3]),
    Moe(Box<Moe<W>>),
}

pub struct Moe<W> {
    routing: MoeRouting,
    router: W,
    score_bias: Option<W>,
    experts: Vec<[W; 3]>,
    shared: Option<[W; 3]>,
}

impl<W> Ffn<W> {
    pub fn dense<B: Backend<Weight = W>>(l: &Load<'_, B>, i: usize) -> Result<Self, LoadError> {
        let inter = l.cfg().intermediate_size;
        Ok(Ffn::Dense(l.mlp(&format!("model.layers.{i}.mlp"), inter)?))
    }

    pub fn moe<B: Backend<Weight = W>>(
        l: &Load<'_, B>,
        i: usize,
        a: &MoeArch,
    ) -> Result<Self, LoadError> {
        let p = |s: &str| format!("model.layers.{i}.mlp.{s}");
        let (h, n) = (l.cfg().hidden_size, a.routing.n_experts);
        let router = l.up(&p("gate.weight"), &[n, h])?;
        let score_bias = if a.score_bias {
            Some(l.up(&p("gate.e_score_correction_bias"), &[n])?)
        } else {
            None
        };
        // All experts' gate/up pairs as one group and all downs as another, so a backend can
        // address expert e at a fixed stride from the first.
        let inter = a.expert_inter;
        let gate_up: Vec<_> = (0..n)
            .flat_map(|e| {
                ["gate_proj", "up_proj"]
                    .map(|w| (p(&format!("experts.{e}.{w}.weight")), [inter, h]))
            })
            .collect();
        let downs: Vec<_> = (0..n)
            .map(|e| (p(&format!("experts.{e}.down_proj.weight")), [h, inter]))
            .collect();
        let mut gate_up = l.group_vec(&gate_up)?.into_iter();
        let experts = l
            .group_vec(&downs)?
            .into_iter()
            .map(|down| {
                let gate = gate_up.next().expect("two per expert");
                let up = gate_up.next().expect("two per expert");
                [gate, up, down]
            })
            .collect();
        let shared = match a.shared_inter {
            Some(inter) => Some(l.mlp(&p("shared_experts"), inter)?),
            None => None,
        };
        Ok(Ffn::Moe(Box::new(Moe {
            routing: a.routing.clone(),
            router,
            score_bias,
            experts,
            shared,
        })))
    }

    /// The weight whose kernel path the startup log names.
    pub fn first_weight(&self) -> &W {
        match self {
            Ffn::Dense([gate, ..]) => gate,
            Ffn::Moe(m) => &m.experts[0][0],
        }
    }

    /// The FFN over `norm` (the FFN norm's weight and eps) applied to the residual stream `x`,
    /// through `h` (or folded into a dense MLP's first projections). A dense MLP adds its result
    /// to x (true); a MoE layer leaves it in `s.down`, for the caller to add (false).
    pub fn forward<B: Backend<Weight = W>>(
        &self,
        b: &B,
        (norm, eps): (&W, f32),
        (h, x): (&mut B::Buf, &mut B::Buf),
        kinds: &[bool],
        s: &mut Bufs<B::Buf>,
    ) -> bool {
        match self {
            Ffn::Dense([gate, up, down]) => {
                b.norm_linear_swiglu((x, norm, eps), h, kinds, (gate, up), &mut s.act);
                b.linear_residual(&s.act, kinds, down, x);
                true
            }
            Ffn::Moe(m) => {
                b.rms_norm(x, norm, eps, h);
                let layer = MoeLayer {
                    routing: &m.routing,
                    router: &m.router,
                    score_bias: m.score_bias.as_ref(),
                    experts: &m.experts,
                    shared: m.shared.as_ref(),
                };
                b.moe(h, kinds, &layer, &mut s.down);
                false
            }
        }
    }
}
