//! Betting confidence sequences for the mean of observations in [0, 1]:
//! Waudby-Smith & Ramdas (2024), "Estimating means of bounded random
//! variables by betting", JRSS-B 86(1), 1-27 (arXiv:2010.09686).
//!
//! - The hedged capital process (their Section 4.2): for a candidate mean m,
//!   `K+_t(m) = prod (1 + l+_i (x_i - m))` and `K-_t(m) = prod (1 - l-_i (x_i - m))`,
//!   and m leaves the sequence once `max(theta K+, (1 - theta) K-) >= 1/alpha`,
//!   theta = 1/2. Under the mean m, `theta K+ + (1 - theta) K-` is a
//!   nonnegative martingale starting at 1, so by Ville's inequality the
//!   true mean leaves with probability at most alpha, at any time, however the
//!   times are chosen (the time-uniform guarantee).
//! - The bets are predictable plug-ins (their Section 4.3): with
//!   `mu_t = (1/2 + sum_{i<=t} x_i) / (t + 1)` and
//!   `s2_t = (1/4 + sum_{i<=t} (x_i - mu_i)^2) / (t + 1)`, either
//!   `l_t = sqrt(2 log(2/alpha) / (s2_{t-1} t log(1 + t)))` (`Bets::Uniform`,
//!   their eq. (26): a sequence about as tight at every time), or
//!   `l_t = sqrt(2 log(2/alpha) / (s2_{t-1} n))` (`Bets::Horizon(n)`, their
//!   plug-in for a sample of n: tightest around n tasks and much quicker to
//!   decide an effect than the uniform bets, still valid at every time).
//!   Each is truncated per side to `c / m` and `c / (1 - m)` with c = 1/2 (so
//!   every factor stays above 1 - c). The bets depend on earlier observations
//!   only, which is all the martingale needs.
//! - Without replacement from a population of N (their Section 6): the centre
//!   of the i-th factor is the mean of what remains if the population mean is m,
//!   `(N m - sum_{j<i} x_j) / (N - i + 1)`, and the logical bounds
//!   `[S_t / N, (S_t + N - t) / N]` hold; at t = N the sequence is the
//!   population mean itself.
//! - Each factor decreases in m for K+ and increases for K-, so the set is an
//!   interval: its ends are found by bisection; the running intersection is kept.
//!
//! `scripts/betting_cs_reference.py` computes the same sequences again from
//! these formulas (plain Python), and the tests compare them.

/// The truncation c of the bets.
pub(crate) const TRUNCATION: f64 = 0.5;
/// The weight theta of the upward capital in the hedged process.
pub(crate) const THETA: f64 = 0.5;

/// How the size of the bets is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bets {
    /// Shrinking like 1 / sqrt(t log t): about equally tight at every time.
    Uniform,
    /// Sized for a sample of this many observations: tightest around it.
    Horizon(usize),
}

/// The capital of the two bettors at one candidate mean, in logs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capital {
    pub up: f64,
    pub down: f64,
}

impl Capital {
    const START: Capital = Capital { up: 0.0, down: 0.0 };

    /// One observation `x` with the bet `bet`, centred at `mu` (in [0, 1]).
    fn step(&mut self, x: f64, bet: f64, mu: f64) {
        let up = if mu > 0.0 { bet.min(TRUNCATION / mu) } else { bet };
        let down = if mu < 1.0 { bet.min(TRUNCATION / (1.0 - mu)) } else { bet };
        self.up += (up * (x - mu)).ln_1p();
        self.down += (-down * (x - mu)).ln_1p();
    }

    /// Whether the upward bettor has reached 1/alpha (the mean is above the candidate).
    pub(crate) fn up_wins(&self, alpha: f64) -> bool {
        THETA.ln() + self.up >= -alpha.ln()
    }

    /// Whether the downward bettor has reached 1/alpha (the mean is below the candidate).
    pub(crate) fn down_wins(&self, alpha: f64) -> bool {
        (1.0 - THETA).ln() + self.down >= -alpha.ln()
    }
}

/// A candidate mean followed as observations come: its capital, and whether
/// each side has ever won (the running intersection at that point).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub m: f64,
    capital: Capital,
    /// Left the sequence from below: the mean is above m (at some time so far).
    pub above: bool,
    /// Left the sequence from above: the mean is below m.
    pub below: bool,
}

impl Point {
    /// The two bettors' capital at this candidate after every observation so far.
    pub fn capital(&self) -> Capital {
        self.capital
    }
}

/// A confidence sequence at level 1 - alpha for the mean of observations in [0, 1].
#[derive(Debug, Clone)]
pub struct BettingCs {
    alpha: f64,
    sizing: Bets,
    /// The population size, for the without-replacement form.
    population: Option<usize>,
    xs: Vec<f64>,
    /// The bet of each observation, fixed before it was seen.
    bets: Vec<f64>,
    sum: f64,
    squares: f64,
    s2: f64,
    points: Vec<Point>,
    /// The running intersection of the intervals: (lower, upper) after each observation.
    bounds: Vec<(f64, f64)>,
    track_bounds: bool,
}

impl BettingCs {
    /// `population`: the without-replacement form for a population of that size.
    /// `points`: candidate means followed as observations come (cheap decisions);
    /// `track_bounds`: the interval found after every observation (the plot's line).
    pub fn new(
        alpha: f64,
        sizing: Bets,
        population: Option<usize>,
        points: &[f64],
        track_bounds: bool,
    ) -> BettingCs {
        BettingCs {
            alpha,
            sizing,
            population,
            xs: Vec::new(),
            bets: Vec::new(),
            sum: 0.0,
            squares: 0.0,
            s2: 0.25,
            points: points
                .iter()
                .map(|&m| Point { m, capital: Capital::START, above: false, below: false })
                .collect(),
            bounds: Vec::new(),
            track_bounds,
        }
    }

    pub fn len(&self) -> usize {
        self.xs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.xs.is_empty()
    }

    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// The bet for observation number `t` (1-based), from the variance estimate before it.
    fn bet(&self, t: usize) -> f64 {
        let t = t as f64;
        let n = match self.sizing {
            Bets::Uniform => t * (1.0 + t).ln(),
            Bets::Horizon(n) => n.max(1) as f64,
        };
        (2.0 * (2.0 / self.alpha).ln() / (self.s2 * n)).sqrt()
    }

    /// The centre of observation `i` (0-based) under the mean `m`: m, or without
    /// replacement the mean of what remains; None where m is impossible.
    fn centre(&self, m: f64, i: usize, before: f64) -> Option<f64> {
        match self.population {
            None => Some(m),
            Some(n) => {
                let mu = (n as f64 * m - before) / (n - i) as f64;
                (-1e-12..=1.0 + 1e-12).contains(&mu).then(|| mu.clamp(0.0, 1.0))
            }
        }
    }

    /// Add an observation (clamped into [0, 1]).
    pub fn push(&mut self, x: f64) {
        let x = x.clamp(0.0, 1.0);
        if let Some(n) = self.population {
            assert!(self.xs.len() < n, "more observations than the population holds");
        }
        let t = self.xs.len() + 1;
        let bet = self.bet(t);
        let before = self.sum;
        for k in 0..self.points.len() {
            let m = self.points[k].m;
            match self.centre(m, t - 1, before) {
                Some(mu) => {
                    let p = &mut self.points[k];
                    p.capital.step(x, bet, mu);
                    p.above |= p.capital.up_wins(self.alpha);
                    p.below |= p.capital.down_wins(self.alpha);
                }
                None => {
                    // An impossible population mean: out, on the side it lies.
                    let p = &mut self.points[k];
                    let logical_lo = (before + x) / self.population.unwrap() as f64;
                    if m < logical_lo { p.above = true } else { p.below = true }
                }
            }
        }
        self.xs.push(x);
        self.bets.push(bet);
        self.sum += x;
        let mean = (0.5 + self.sum) / (t as f64 + 1.0);
        self.squares += (x - mean).powi(2);
        self.s2 = (0.25 + self.squares) / (t as f64 + 1.0);
        if self.track_bounds {
            let (lo, hi) = self.interval_now();
            let (lo, hi) = match self.bounds.last() {
                Some(&(l, h)) => (lo.max(l), hi.min(h)),
                None => (lo, hi),
            };
            self.bounds.push((lo, hi));
        }
    }

    /// The followed candidate means.
    pub fn points(&self) -> &[Point] {
        &self.points
    }

    /// The capital at `m` after every observation so far (None: m is impossible).
    pub fn capital(&self, m: f64) -> Option<Capital> {
        let mut c = Capital::START;
        let mut before = 0.0;
        for (i, (&x, &bet)) in self.xs.iter().zip(&self.bets).enumerate() {
            c.step(x, bet, self.centre(m, i, before)?);
            before += x;
        }
        Some(c)
    }

    /// The logical range of the mean: [0, 1], or without replacement what the
    /// unseen part of the population allows.
    fn logical(&self) -> (f64, f64) {
        match self.population {
            None => (0.0, 1.0),
            Some(n) => (self.sum / n as f64, (self.sum + (n - self.xs.len()) as f64) / n as f64),
        }
    }

    /// The interval of the latest observation alone (not intersected with earlier ones).
    fn interval_now(&self) -> (f64, f64) {
        let (lo, hi) = self.logical();
        if self.xs.is_empty() {
            return (lo, hi);
        }
        // The lower end: where the upward bettor stops winning (its capital decreases in m).
        let up_wins = |m: f64| self.capital(m).is_none_or(|c| c.up_wins(self.alpha));
        let down_wins = |m: f64| self.capital(m).is_none_or(|c| c.down_wins(self.alpha));
        let lower = if !up_wins(lo) {
            lo
        } else if up_wins(hi) {
            hi
        } else {
            bisect(lo, hi, up_wins)
        };
        let upper = if !down_wins(hi) {
            hi
        } else if down_wins(lo) {
            lo
        } else {
            bisect(lo, hi, |m| !down_wins(m))
        };
        (lower, upper)
    }

    /// The running intersection of the intervals so far: [0, 1] before any observation.
    pub fn interval(&self) -> (f64, f64) {
        if self.track_bounds {
            return self.bounds.last().copied().unwrap_or_else(|| self.logical());
        }
        // Without the tracked line: every interval so far again.
        let mut lo_hi = self.logical();
        let mut part = BettingCs::new(self.alpha, self.sizing, self.population, &[], false);
        for &x in &self.xs {
            part.push(x);
            let (l, h) = part.interval_now();
            lo_hi = (lo_hi.0.max(l), lo_hi.1.min(h));
        }
        lo_hi
    }

    /// The running intersection after each observation (tracked sequences only).
    pub fn history(&self) -> &[(f64, f64)] {
        &self.bounds
    }
}

/// The boundary of `inside` on [lo, hi], where `inside(lo)` holds and `inside(hi)` does not
/// (monotone): the last point that holds, to 1e-12.
fn bisect(mut lo: f64, mut hi: f64, inside: impl Fn(f64) -> bool) -> f64 {
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if inside(mid) {
            lo = mid
        } else {
            hi = mid
        }
        if hi - lo < 1e-12 {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// The approximate half-width, in the observations' units, of the sequence
/// after `t` observations of standard deviation `sd`: the predictable
/// plug-in empirical-Bernstein form of the same bets (Waudby-Smith & Ramdas
/// 2024, Theorem 2), `(log(2/a) + sum v_i psi(l_i)) / sum l_i` with
/// `psi(l) ~ l^2 / 2` and `v_i ~ sd^2`. For projecting how many more tasks
/// a comparison would need, not for any decision.
pub(crate) fn projected_half_width(sd: f64, t: usize, alpha: f64, sizing: Bets) -> f64 {
    let log = (2.0 / alpha).ln();
    let sd = sd.max(1e-9);
    let (mut bets, mut penalty) = (0.0, 0.0);
    for i in 1..=t {
        let i = i as f64;
        let n = match sizing {
            Bets::Uniform => i * (1.0 + i).ln(),
            Bets::Horizon(n) => n.max(1) as f64,
        };
        let l = (2.0 * log / (sd * sd * n)).sqrt().min(TRUNCATION / 0.5);
        bets += l;
        penalty += sd * sd * l * l / 2.0;
    }
    (log + penalty) / bets
}
