//! Mixture-of-experts routing: which experts each token goes to, and with what weight, as
//! transformers' routers compute it (Qwen3-MoE's softmax top-k; DeepSeek-V3's and GLM-4.x's
//! sigmoid scores with a selection bias and grouped top-k). Plain data and host arithmetic: the
//! CPU backend routes with it, and device backends are checked against it.

/// How router logits become scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoeScoring {
    /// softmax over all experts (Qwen3-MoE).
    Softmax,
    /// sigmoid of each logit; the choice adds a per-expert bias (DeepSeek-V3, GLM-4.x).
    Sigmoid,
}

/// One MoE layer's routing rule.
#[derive(Debug, Clone, PartialEq)]
pub struct MoeRouting {
    pub n_experts: usize,
    /// Experts per token.
    pub top_k: usize,
    pub scoring: MoeScoring,
    /// Rescale the chosen experts' weights to sum to 1.
    pub norm_topk_prob: bool,
    /// Experts fall into `n_group` equal groups; a token picks among the experts of its
    /// `topk_group` best groups (a group's score: the sum of its two best choice scores).
    pub n_group: usize,
    pub topk_group: usize,
    /// Multiplies the final weights.
    pub routed_scaling_factor: f32,
}

/// One token's experts, ascending by expert id, with their weights.
pub type Route = Vec<(u32, f32)>;

/// Indices of the `k` largest values among those `allowed`, largest first (lowest index first
/// on ties).
fn top_k(values: &[f32], k: usize, allowed: impl Fn(usize) -> bool) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..values.len()).filter(|&i| allowed(i)).collect();
    idx.sort_by(|&a, &b| values[b].total_cmp(&values[a]).then(a.cmp(&b)));
    idx.truncate(k);
    idx
}

/// Routes one token from its router logits; `bias` is the per-expert selection bias
/// (`e_score_correction_bias`) of sigmoid routers.
pub fn route(logits: &[f32], bias: Option<&[f32]>, r: &MoeRouting) -> Route {
    debug_assert_eq!(logits.len(), r.n_experts);
    let (scores, chosen) = match r.scoring {
        MoeScoring::Softmax => {
            let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            let exp: Vec<f32> = logits.iter().map(|&v| (v - max).exp()).collect();
            let sum: f32 = exp.iter().sum();
            let probs: Vec<f32> = exp.iter().map(|e| e / sum).collect();
            let chosen = top_k(&probs, r.top_k, |_| true);
            (probs, chosen)
        }
        MoeScoring::Sigmoid => {
            let scores: Vec<f32> = logits.iter().map(|&v| 1.0 / (1.0 + (-v).exp())).collect();
            let choice: Vec<f32> = match bias {
                Some(b) => scores.iter().zip(b).map(|(s, b)| s + b).collect(),
                None => scores.clone(),
            };
            let per_group = r.n_experts / r.n_group.max(1);
            let groups: Vec<f32> = choice
                .chunks_exact(per_group)
                .map(|g| top_k(g, 2, |_| true).iter().map(|&i| g[i]).sum())
                .collect();
            let best_groups = top_k(&groups, r.topk_group, |_| true);
            let chosen = top_k(&choice, r.top_k, |i| best_groups.contains(&(i / per_group)));
            (scores, chosen)
        }
    };
    let mut route: Route = chosen.iter().map(|&i| (i as u32, scores[i])).collect();
    if r.norm_topk_prob {
        let sum: f32 = route.iter().map(|(_, w)| w).sum();
        let denom = match r.scoring {
            MoeScoring::Softmax => sum,
            MoeScoring::Sigmoid => sum + 1e-20,
        };
        route.iter_mut().for_each(|(_, w)| *w /= denom);
    }
    route
        .iter_mut()
        .for_each(|(_, w)| *w *= r.routed_scaling_factor);
    route.sort_by_key(|&(e, _)| e);
    route
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(scoring: MoeScoring, n_group: usize, topk_group: usize) -> MoeRouting {
        MoeRouting {
            n_experts: 8,
            top_k: 2,
            scoring,
            norm_topk_prob: true,
            n_group,
            topk_group,
            routed_scaling_factor: 1.0,
        }
    }

    #[test]
    fn softmax_picks_the_largest_and_renormalizes() {
        let logits = [0.0, 3.0, 1.0, 0.0, 2.0, 0.0, 0.0, 0.0];
        let r = route(&logits, None, &rule(MoeScoring::Softmax, 1, 1));
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 4]);
        let e = 1f32.exp();
        assert!((r[0].1 - e / (e + 1.0)).abs() < 1e-6, "{r:?}");
        assert!((r[0].1 + r[1].1 - 1.0).abs() < 1e-6);
    }

    #[test]
    fn softmax_without_norm_keeps_probabilities() {
        let mut rule = rule(MoeScoring::Softmax, 1, 1);
        rule.norm_topk_prob = false;
        let r = route(&[0.0; 8], None, &rule);
        assert_eq!(r, vec![(0, 0.125), (1, 0.125)]);
    }

    #[test]
    fn sigmoid_bias_steers_the_choice_but_not_the_weight() {
        let logits = [0.0, 2.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        let mut bias = [0.0f32; 8];
        bias[7] = 5.0;
        let mut rule = rule(MoeScoring::Sigmoid, 1, 1);
        rule.norm_topk_prob = false;
        rule.routed_scaling_factor = 2.0;
        let r = route(&logits, Some(&bias), &rule);
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 7]);
        let sig = |v: f32| 1.0 / (1.0 + (-v).exp());
        assert!((r[0].1 - 2.0 * sig(2.0)).abs() < 1e-6);
        assert!((r[1].1 - 2.0 * sig(0.0)).abs() < 1e-6);
    }

    #[test]
    fn grouped_top_k_only_looks_inside_the_best_groups() {
        // Groups of two: {0,1} {2,3} {4,5} {6,7}. Expert 0 alone is the largest, but group
        // {4,5} has the best pair sum, then {2,3}; only those two groups are open.
        let logits = [4.0, -4.0, 1.5, 1.5, 2.0, 2.0, -1.0, -1.0];
        let r = route(&logits, None, &rule(MoeScoring::Sigmoid, 4, 2));
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), vec![4, 5]);
        let open_one = route(&logits, None, &rule(MoeScoring::Sigmoid, 4, 3));
        assert_eq!(open_one.iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 4]);
    }
}
