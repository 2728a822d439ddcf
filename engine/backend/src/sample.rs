//! Sampling one token from a row of logits by thresholds, the way the GPU kernel does it
//! (sample.cu): weights w_i = exp((l_i - max) / T); top-k keeps w >= the k-th largest weight,
//! top-p then keeps the fewest largest weights whose mass reaches top_p of what top-k kept,
//! min-p keeps w >= min_p (the largest weight is 1); ties at a threshold are all kept. Top-p's
//! masses are summed in fixed point (each weight rounded down to a multiple of 2^-32), so they
//! are exact in any order and the GPU's threshold is this one whenever its weights are. The token
//! is then picked by walking the kept weights in vocabulary order until their running sum passes
//! u times their total. Greedy rows (temperature 0 or top_k 1) take the first maximum.
//!
//! This is the host reference of the backends' `sample_rows` (and its default implementation).

/// How to sample one row, with the uniform draw in [0, 1) the request's generator made for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleRow {
    pub temperature: f32,
    /// 0 disables top-k.
    pub top_k: u32,
    pub top_p: f32,
    pub min_p: f32,
    pub u: f32,
}

impl SampleRow {
    /// A greedy row (what padding rows of a batch get).
    pub const GREEDY: SampleRow = SampleRow {
        temperature: 0.0,
        top_k: 1,
        top_p: 1.0,
        min_p: 0.0,
        u: 0.0,
    };

    fn greedy(&self) -> bool {
        self.temperature <= 0.0 || self.top_k == 1
    }
}

/// The token `row` samples to under `p` (see the module doc).
pub fn sample_row(logits: &[f32], p: &SampleRow) -> u32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let w: Vec<f32> = if p.greedy() {
        logits
            .iter()
            .map(|&l| if l == max { 1.0 } else { 0.0 })
            .collect()
    } else {
        let inv_t = 1.0 / p.temperature;
        logits.iter().map(|&l| ((l - max) * inv_t).exp()).collect()
    };
    let mut t = 0.0f32;
    if !p.greedy() {
        if p.top_k > 0 && (p.top_k as usize) < w.len() {
            t = kth_largest(&w, p.top_k as usize);
        }
        if p.top_p < 1.0 {
            t = top_p_threshold(&w, t, p.top_p);
        }
        if p.min_p > 0.0 {
            t = t.max(p.min_p);
        }
    }
    // Summed in f64: a running f32 sum over a long row drifts by ~1e-4 of the total.
    let total: f64 = w.iter().filter(|&&x| x >= t).map(|&x| x as f64).sum();
    let target = if p.greedy() { 0.0 } else { p.u as f64 * total };
    let mut acc = 0.0f64;
    let mut last = 0;
    for (i, &x) in w.iter().enumerate() {
        if x >= t && x > 0.0 {
            acc += x as f64;
            last = i;
            if acc > target {
                return i as u32;
            }
        }
    }
    last as u32
}

/// The k-th largest weight (1-based): the largest t with at least k weights >= t.
fn kth_largest(w: &[f32], k: usize) -> f32 {
    let mut w = w.to_vec();
    *w.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a)).1
}

/// A weight's mass for top-p: rounded down to a multiple of 2^-32 (weights are at most 1).
fn fixed_mass(x: f32) -> u64 {
    (x * 4_294_967_296.0) as u64
}

/// The weights' top-p mass goal: ceil(top_p * total), at least 1 and at most the total.
fn mass_needed(top_p: f32, total: u64) -> u64 {
    ((top_p as f64 * total as f64).ceil() as u64)
        .max(1)
        .min(total)
}

/// The largest weight t >= floor whose weights >= t carry `mass_needed` of those >= floor.
fn top_p_threshold(w: &[f32], floor: f32, top_p: f32) -> f32 {
    let mut kept: Vec<f32> = w.iter().copied().filter(|&x| x >= floor).collect();
    kept.sort_unstable_by(|a, b| b.total_cmp(a));
    let need = mass_needed(top_p, kept.iter().map(|&x| fixed_mass(x)).sum());
    let mut acc = 0u64;
    for &x in &kept {
        acc += fixed_mass(x);
        if acc >= need {
            return x;
        }
    }
    floor
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(temperature: f32, top_k: u32, top_p: f32, min_p: f32, u: f32) -> SampleRow {
        SampleRow {
            temperature,
            top_k,
            top_p,
            min_p,
            u,
        }
    }

    #[test]
    fn greedy_takes_the_first_maximum() {
        assert_eq!(sample_row(&[0.0, 3.0, 3.0, 1.0], &SampleRow::GREEDY), 1);
    }

    #[test]
    fn top_k_keeps_only_the_k_largest() {
        let logits = [1.0, 5.0, 4.0, 0.5, 4.5];
        for i in 0..100 {
            let u = i as f32 / 100.0;
            let t = sample_row(&logits, &row(1.0, 2, 1.0, 0.0, u));
            assert!(t == 1 || t == 4, "top_k 2 gave {t}");
        }
        // u near 0 takes the first kept token in vocabulary order, near 1 the last.
        assert_eq!(sample_row(&logits, &row(1.0, 2, 1.0, 0.0, 0.0)), 1);
        assert_eq!(sample_row(&logits, &row(1.0, 2, 1.0, 0.0, 0.999)), 4);
    }

    #[test]
    fn top_p_and_min_p_cut_the_tail() {
        // Weights at T=1: 1, e^-1, e^-5 ...: top_p 0.7 keeps only the first token.
        let logits = [10.0, 9.0, 5.0, 5.0];
        for i in 0..20 {
            let u = i as f32 / 20.0;
            assert_eq!(sample_row(&logits, &row(1.0, 0, 0.7, 0.0, u)), 0);
            let t = sample_row(&logits, &row(1.0, 0, 1.0, 0.3, u));
            assert!(t <= 1, "min_p 0.3 gave {t}");
        }
    }

    /// The largest t in [from, 1] (over f32 bit patterns, which order like the values of
    /// non-negative floats) for which `keeps(t)` holds: the thresholds' definition.
    fn largest_threshold(from: f32, keeps: impl Fn(f32) -> bool) -> f32 {
        let (mut lo, mut hi) = (from.to_bits(), 1.0f32.to_bits());
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if keeps(f32::from_bits(mid)) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        f32::from_bits(lo)
    }

    #[test]
    fn thresholds_are_the_largest_that_keep_enough() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32
        };
        for case in 0..40 {
            // Spread weights over many exponents, with ties and underflow to 0.
            let n = 50 + case * 37;
            let w: Vec<f32> = (0..n)
                .map(|_| match (next() * 10.0) as u32 {
                    0 => 0.0,
                    1 => 0.25,
                    _ => (-(next() * 40.0)).exp(),
                })
                .chain([1.0])
                .collect();
            let count = |t: f32| w.iter().filter(|&&x| x >= t).count();
            let mass = |t: f32| w.iter().filter(|&&x| x >= t).map(|&x| fixed_mass(x)).sum();
            let k = 1 + (next() * n as f32) as usize;
            let tk = kth_largest(&w, k);
            assert_eq!(tk, largest_threshold(0.0, |t| count(t) >= k), "top-k {k}");
            for floor in [0.0, tk] {
                let top_p = next();
                let need = mass_needed(top_p, mass(floor));
                let want = largest_threshold(floor, |t| mass(t) >= need);
                assert_eq!(top_p_threshold(&w, floor, top_p), want, "top-p {top_p}");
            }
        }
    }

    #[test]
    fn full_distribution_follows_u() {
        // Equal weights: u picks the token by position.
        let logits = [2.0; 4];
        assert_eq!(sample_row(&logits, &row(1.0, 0, 1.0, 0.0, 0.1)), 0);
        assert_eq!(sample_row(&logits, &row(1.0, 0, 1.0, 0.0, 0.6)), 2);
        assert_eq!(sample_row(&logits, &row(1.0, 0, 1.0, 0.0, 0.99)), 3);
    }
}
