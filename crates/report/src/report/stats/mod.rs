//! Statistics for ablation reports: pure functions, `f64` throughout.
//!
//! The unit of independence is the **task**. Repeated trials of one task are
//! nested inside it and are *not* independent draws (a hard task stays hard on
//! every repeat), so every interval here that concerns a pass rate or an
//! effect is built from per-task means, with the number of tasks `T` as the
//! sample size and `T - 1` degrees of freedom. This is the clustered-standard-
//! error recipe of Miller (2024), "Adding Error Bars to Evals: A Statistical
//! Approach to Language Model Evaluations", arXiv:2411.00640, and the
//! equal-cluster-size case of two-stage sampling (Cochran 1977, *Sampling
//! Techniques*, 3rd ed., ch. 10-11), where the variance of the overall mean is
//! estimated from the spread of the primary units (tasks) alone.
//!
//! # Conventions
//!
//! * `conf` is a two-sided confidence level in `(0, 1)`, e.g. `0.95`;
//!   `alpha` is a significance level in `(0, 1)`, e.g. `0.05`.
//! * Invalid arguments (a level outside `(0, 1)`, `successes > n`, too few
//!   tasks for an interval, ...) give `NaN` rather than a panic, so that a
//!   report can print "n/a" for one cell instead of aborting. The only panic is
//!   a caller bug that no report should paper over: arms of different lengths
//!   in [`paired_effect`].
//! * Trial outcomes are numbers in `[0, 1]` (1 = pass). Fractional scores work
//!   too: all task-level functions only average them.
//! * Two interval families: the t intervals of [`pass_rate`] and
//!   [`paired_effect`] (Miller 2024), and the score-type intervals of
//!   [`pass_rate_wilson`] and [`paired_effect_mover`], which keep their
//!   coverage at rates near 0 or 1 where the t intervals collapse to zero
//!   width. The test `coverage_simulation` compares them (run it with
//!   `--nocapture` for the table).
//!
//! # Files
//!
//! `dist` (quantiles, mean, sd), `binomial` (Wilson, Clopper-Pearson, pass@k),
//! `clustered` (pass rate and paired effect over tasks, score-type intervals),
//! `sign_flip` (the sign-flip test and its interval: enumerated, on the
//! lattice of the differences, or Monte Carlo), `inference` (the reported
//! inference, Newcombe, McNemar), `power` (sample size,
//! detectable effect, gate bounds), `ratio` (ratios of means, spend per
//! solved task, pass^k and consistency with intervals); `tests` holds the known-value tests and
//! `simulation` the coverage simulations.

mod binomial;
mod clustered;
mod dist;
mod inference;
mod power;
mod ratio;
mod sign_flip;
#[cfg(test)]
pub(crate) mod simulation;
#[cfg(test)]
mod simulation_budget;
#[cfg(test)]
mod simulation_costs;
#[cfg(test)]
mod simulation_design;
#[cfg(test)]
mod simulation_sequential;
#[cfg(test)]
mod tests;

pub use binomial::*;
pub use clustered::*;
pub use dist::*;
pub use inference::*;
pub(crate) use power::*;
pub use ratio::*;
pub use sign_flip::*;

/// Degrees of freedom above which the Student-t distribution is computed from
/// the standard Normal instead of statrs' t routines (see [`t_quantile`]).
pub(crate) const T_NORMAL_DF: f64 = 1e4;
