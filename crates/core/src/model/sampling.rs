//! Choosing the next token from a model's logits, as the experiment asks:
//! greedy at temperature 0; otherwise temperature, then top-p (nucleus) on the
//! tempered distribution (the order of OpenAI and Hugging Face), then a draw
//! from a ChaCha8 generator seeded with the request's seed. No top-k, min-p or
//! penalties.
//!
//! The nucleus is found without sorting the vocabulary. llama.cpp's own top-p
//! sampler sorts every candidate: with Qwen2.5's 151,936 tokens that took
//! 13.7 ms per token on the 2-core machine docs/benchmarks.md describes, a third of a
//! decode step. Here only the tokens that can be in the nucleus are sorted
//! (see [`TokenSampler::nucleus`]); the result is the same set.

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

/// Tokens whose tempered weight is below e^-40 of the best token's (which
/// weighs 1) are left out: with a 151,936-token vocabulary all of them
/// together weigh less than 7e-13 of the sum.
const NEGLIGIBLE_LOG_WEIGHT: f64 = -40.0;

/// The index of the largest logit (the first one on ties); NaN never wins.
pub(crate) fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    let mut best_value = f32::NEG_INFINITY;
    for (i, &v) in logits.iter().enumerate() {
        if v > best_value {
            best = i;
            best_value = v;
        }
    }
    best
}

/// Greedy: temperature 0 (or below, or NaN), or a top_p whose nucleus can
/// only hold the best token.
pub(crate) fn is_greedy(temperature: f64, top_p: f64) -> bool {
    temperature.is_nan() || temperature <= 0.0 || top_p.is_nan() || top_p <= 0.0
}

/// One generation's sampler: its settings, its random stream and scratch space.
pub struct TokenSampler {
    temperature: f64,
    top_p: f64,
    rng: ChaCha8Rng,
    /// (weight relative to the best token, token) of every non-negligible token.
    weights: Vec<(f64, u32)>,
    /// The nucleus, best first.
    nucleus: Vec<(f64, u32)>,
}

impl TokenSampler {
    pub fn new(temperature: f64, top_p: f64, seed: u64) -> Self {
        TokenSampler {
            temperature,
            top_p,
            rng: ChaCha8Rng::seed_from_u64(seed),
            weights: Vec::new(),
            nucleus: Vec::new(),
        }
    }

    pub(crate) fn is_greedy(&self) -> bool {
        is_greedy(self.temperature, self.top_p)
    }

    /// The next token.
    pub fn pick(&mut self, logits: &[f32]) -> usize {
        if self.is_greedy() {
            return argmax(logits);
        }
        let total = self.weigh(logits);
        if total.is_nan() || total <= 0.0 {
            return argmax(logits);
        }
        if self.top_p >= 1.0 {
            let u = self.rng.random::<f64>() * total;
            return draw(&self.weights, u);
        }
        self.nucleus(total);
        let mass: f64 = self.nucleus.iter().map(|&(w, _)| w).sum();
        let u = self.rng.random::<f64>() * mass;
        draw(&self.nucleus, u)
    }

    /// Tempered weights exp((logit - max) / T) of the tokens that matter; their sum.
    fn weigh(&mut self, logits: &[f32]) -> f64 {
        self.weights.clear();
        let max = logits[argmax(logits)] as f64;
        if !max.is_finite() {
            return 0.0;
        }
        // Weights in f32 (exp in f32 is several times faster; its relative
        // error is about 1e-7), summed in f64.
        let (max, inv_t) = (max as f32, (1.0 / self.temperature) as f32);
        // l > floor is false for NaN, so NaN logits are skipped.
        let floor = max + (NEGLIGIBLE_LOG_WEIGHT * self.temperature) as f32;
        let mut total = 0.0;
        for (i, &l) in logits.iter().enumerate() {
            if l > floor {
                let w = ((l - max) * inv_t).exp() as f64;
                total += w;
                self.weights.push((w, i as u32));
            }
        }
        total
    }

    /// The smallest set of most likely tokens whose probability reaches top_p
    /// (the token that crosses it included, ties by token id), best first:
    /// what sorting the whole vocabulary gives. Only tokens with a weight of at
    /// least `t` are sorted; if they reach top_p, every token left out weighs
    /// less than all of them and would come after the crossing point anyway.
    /// Otherwise `t` is lowered and the search repeats.
    fn nucleus(&mut self, total: f64) {
        let target = self.top_p * total;
        let mut t = 1e-3;
        loop {
            self.nucleus.clear();
            self.nucleus.extend(self.weights.iter().filter(|&&(w, _)| w >= t));
            self.nucleus.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let mut cum = 0.0;
            for k in 0..self.nucleus.len() {
                cum += self.nucleus[k].0;
                if cum >= target {
                    self.nucleus.truncate(k + 1);
                    return;
                }
            }
            if t == 0.0 {
                return; // rounding kept the sum just under the target: all tokens
            }
            t = if t > 1e-15 { t * 1e-4 } else { 0.0 };
        }
    }
}

/// The token at which the running sum of weights first exceeds `u`.
fn draw(weighted: &[(f64, u32)], u: f64) -> usize {
    let mut acc = 0.0;
    for &(w, tok) in weighted {
        acc += w;
        if acc > u {
            return tok as usize;
        }
    }
    weighted.last().map(|&(_, tok)| tok as usize).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nucleus by sorting the whole vocabulary, as llama.cpp does.
    fn nucleus_by_full_sort(logits: &[f32], temperature: f64, top_p: f64) -> Vec<u32> {
        // Weights computed as `weigh` does (f32 exp), so that near-ties sort alike.
        let max = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let inv_t = (1.0 / temperature) as f32;
        let mut w: Vec<(f64, u32)> = logits
            .iter()
            .enumerate()
            .map(|(i, &l)| (((l - max) * inv_t).exp() as f64, i as u32))
            .collect();
        let total: f64 = w.iter().map(|x| x.0).sum();
        w.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut cum = 0.0;
        let mut out = Vec::new();
        for (x, i) in w {
            cum += x;
            out.push(i);
            if cum >= top_p * total {
                break;
            }
        }
        out
    }

    fn logits(seed: u64, n: usize, spread: f64) -> Vec<f32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n).map(|_| ((rng.random::<f64>() - 0.5) * spread) as f32).collect()
    }

    #[test]
    fn argmax_takes_the_first_largest_and_skips_nan() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(argmax(&[f32::NAN, 0.5, f32::NAN]), 1);
        assert_eq!(argmax(&[f32::NEG_INFINITY, -1.0]), 1);
    }

    #[test]
    fn temperature_zero_or_top_p_zero_is_greedy() {
        let l = logits(1, 1000, 10.0);
        let best = argmax(&l);
        for (t, p) in [(0.0, 0.95), (0.7, 0.0), (-1.0, 1.0)] {
            let mut s = TokenSampler::new(t, p, 5);
            assert!(s.is_greedy());
            assert!((0..20).all(|_| s.pick(&l) == best));
        }
    }

    #[test]
    fn nucleus_matches_a_full_sort() {
        // Flat and peaked distributions, small and large nuclei, and ties.
        let mut cases: Vec<(Vec<f32>, f64, f64)> = Vec::new();
        for seed in 0..12 {
            for (spread, t, p) in [
                (4.0, 0.7, 0.95),
                (30.0, 0.7, 0.95),
                (1.0, 1.0, 0.5),
                (60.0, 0.2, 0.99),
                (8.0, 1.5, 0.999),
            ] {
                cases.push((logits(seed, 5000, spread), t, p));
            }
        }
        cases.push((vec![2.0, 2.0, 2.0, 1.0, 2.0], 1.0, 0.5));
        for (l, t, p) in &cases {
            let mut s = TokenSampler::new(*t, *p, 0);
            let total = s.weigh(l);
            s.nucleus(total);
            let mine: Vec<u32> = s.nucleus.iter().map(|x| x.1).collect();
            assert_eq!(mine, nucleus_by_full_sort(l, *t, *p), "T {t} top_p {p}");
        }
    }

    #[test]
    fn draws_follow_the_renormalized_nucleus() {
        // Probabilities at T=1: 0.5, 0.25, 0.125, 0.125 (ln weights 0, -ln2, -2 ln2).
        let ln2 = std::f32::consts::LN_2;
        let l = [0.0, -ln2, -2.0 * ln2, -2.0 * ln2];
        // top_p 0.7: nucleus {0, 1} (0.5 < 0.7 <= 0.75), renormalized 2/3 and 1/3.
        let mut s = TokenSampler::new(1.0, 0.7, 42);
        let n = 60_000;
        let mut counts = [0usize; 4];
        for _ in 0..n {
            counts[s.pick(&l)] += 1;
        }
        assert_eq!(counts[2] + counts[3], 0, "outside the nucleus: {counts:?}");
        let share = counts[0] as f64 / n as f64;
        assert!((share - 2.0 / 3.0).abs() < 0.01, "{counts:?}");
        // top_p 1: every token, at its own probability.
        let mut s = TokenSampler::new(1.0, 1.0, 42);
        let mut counts = [0usize; 4];
        for _ in 0..n {
            counts[s.pick(&l)] += 1;
        }
        for (c, p) in counts.iter().zip([0.5, 0.25, 0.125, 0.125]) {
            assert!((*c as f64 / n as f64 - p).abs() < 0.01, "{counts:?}");
        }
    }

    #[test]
    fn the_seed_fixes_the_draws() {
        let l = logits(3, 2000, 6.0);
        let run = |seed| {
            let mut s = TokenSampler::new(0.9, 0.95, seed);
            (0..50).map(|_| s.pick(&l)).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }
}
