//! Known values from textbooks, R and scipy, each cited where it is asserted.

use super::*;

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

macro_rules! assert_close {
    ($a:expr, $b:expr, $tol:expr) => {{
        let (a, b, tol) = ($a as f64, $b as f64, $tol as f64);
        assert!(close(a, b, tol), "{} = {a}, expected {b} ± {tol}", stringify!($a));
    }};
}

#[test]
fn quantiles() {
    assert_close!(normal_quantile(0.975), 1.959964, 1e-6);
    assert_close!(normal_quantile(0.5), 0.0, 1e-12);
    assert_close!(normal_quantile(0.8), 0.841621, 1e-6);
    assert_close!(t_quantile(0.975, 9.0), 2.262157, 1e-6);
    assert_close!(t_quantile(0.025, 9.0), -2.262157, 1e-6);
    assert_close!(t_quantile(0.95, 29.0), 1.699127, 1e-6);
    assert_close!(t_quantile(0.975, 1.0), 12.706205, 1e-5);
    assert_close!(t_quantile(0.975, 1e6), 1.959964, 1e-4);
    assert_close!(t_quantile(0.975, f64::INFINITY), 1.959964, 1e-6);
    // Below the switch the t quantile is still accurate.
    assert_close!(t_quantile(0.975, 1000.0), 1.962339, 1e-5);
    assert!(t_quantile(0.0, 5.0).is_nan());
    assert!(t_quantile(0.5, 0.0).is_nan());
    assert!(normal_quantile(1.0).is_nan());
    // t survival function: P(t_9 > 2.262157) = 0.025.
    assert_close!(t_sf(2.262157, 9.0), 0.025, 1e-7);
    assert_close!(t_sf(1.959964, 1e6), 0.025, 1e-6);
}

#[test]
fn mean_and_sd() {
    assert_close!(mean(&[1.0, 2.0, 3.0, 4.0]), 2.5, 1e-12);
    assert!(mean(&[]).is_nan());
    assert_close!(sample_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]), 2.138090, 1e-6);
    assert!(sample_sd(&[1.0]).is_nan());
    assert!(sample_sd(&[]).is_nan());
    assert_eq!(sample_sd(&[3.0, 3.0, 3.0]), 0.0);
}

#[test]
fn wilson_known_values() {
    let (lo, hi) = wilson(7, 10, 0.95);
    assert_close!(lo, 0.397, 5e-4);
    assert_close!(hi, 0.892, 5e-4);
    let (lo, hi) = wilson(0, 20, 0.95);
    assert_eq!(lo, 0.0);
    assert_close!(hi, 0.161, 5e-4);
    let (lo, hi) = wilson(20, 20, 0.95);
    assert_close!(lo, 0.839, 5e-4);
    assert_eq!(hi, 1.0);
    assert!(wilson(0, 0, 0.95).0.is_nan());
    assert!(wilson(3, 2, 0.95).1.is_nan());
}

#[test]
fn clopper_pearson_known_values() {
    let (lo, hi) = clopper_pearson(7, 10, 0.95);
    assert_close!(lo, 0.348, 5e-4);
    assert_close!(hi, 0.933, 5e-4);
    let (lo, hi) = clopper_pearson(0, 10, 0.95);
    assert_eq!(lo, 0.0);
    // Exact: 1 - 0.025^(1/10).
    assert_close!(hi, 1.0 - 0.025_f64.powf(0.1), 1e-9);
    let (lo, hi) = clopper_pearson(10, 10, 0.95);
    assert_close!(lo, 0.025_f64.powf(0.1), 1e-9);
    assert_eq!(hi, 1.0);
    assert!(clopper_pearson(1, 0, 0.95).0.is_nan());
}

#[test]
fn pass_rate_basic() {
    // Three tasks with per-task means 1, 0.5, 0 -> mean 0.5, sd 0.5.
    let tasks = vec![vec![1.0, 1.0], vec![1.0, 0.0], vec![0.0, 0.0], vec![]];
    let e = pass_rate(&tasks, 0.95);
    assert_eq!(e.n_tasks, 3);
    assert_eq!(e.n_trials, 6);
    assert_close!(e.mean, 0.5, 1e-12);
    assert_close!(e.se, 0.5 / 3f64.sqrt(), 1e-12);
    assert_eq!(e.df, 2.0);
    let half = t_quantile(0.975, 2.0) * e.se;
    assert_close!(e.lo, 0.5 - half, 1e-12);
    assert_close!(e.hi, 0.5 + half, 1e-12);
    // Unequal repeats: each task weighs the same.
    let e = pass_rate(&[vec![1.0], vec![0.0, 0.0, 0.0, 0.0]], 0.95);
    assert_close!(e.mean, 0.5, 1e-12);
    // One task: interval undefined.
    let e = pass_rate(&[vec![1.0, 0.0, 1.0]], 0.95);
    assert_close!(e.mean, 2.0 / 3.0, 1e-12);
    assert!(e.se.is_nan() && e.lo.is_nan() && e.hi.is_nan());
    assert_eq!((e.n_tasks, e.df), (1, 0.0));
    // No tasks.
    let e = pass_rate(&[], 0.95);
    assert!(e.mean.is_nan());
    assert_eq!((e.n_tasks, e.n_trials), (0, 0));
    // Degenerate: everything fails -> zero-width interval at 0.
    let e = pass_rate(&vec![vec![0.0; 3]; 5], 0.95);
    assert_eq!((e.mean, e.se, e.lo, e.hi), (0.0, 0.0, 0.0, 0.0));
}

#[test]
fn paired_effect_basic() {
    let control = vec![vec![0.0, 0.0], vec![1.0, 0.0], vec![1.0, 1.0], vec![0.0, 1.0]];
    let treatment = vec![vec![1.0, 0.0], vec![1.0, 1.0], vec![1.0, 1.0], vec![1.0, 1.0]];
    // d = 0.5, 0.5, 0, 0.5
    let p = paired_effect(&control, &treatment, 0.95);
    let d = [0.5, 0.5, 0.0, 0.5];
    let se = sample_sd(&d) / 2.0;
    assert_eq!(p.n_tasks, 4);
    assert_close!(p.mean_diff, 0.375, 1e-12);
    assert_close!(p.se, se, 1e-12);
    assert_eq!(p.df, 3.0);
    let t_stat = 0.375 / se; // = 3.0
    assert_close!(t_stat, 3.0, 1e-12);
    // Two-sided p of t = 3 on 3 df is 0.05767 (R: 2*pt(-3, 3)).
    assert_close!(p.p_value, 0.057669, 1e-5);
    let half = t_quantile(0.975, 3.0) * se;
    assert_close!(p.lo, 0.375 - half, 1e-12);
    assert_close!(p.hi, 0.375 + half, 1e-12);
    // The interval excludes 0 exactly when p < 0.05.
    assert!(p.lo < 0.0);

    // All differences zero.
    let z = paired_effect(&vec![vec![0.0]; 6], &vec![vec![0.0]; 6], 0.95);
    assert_eq!((z.mean_diff, z.se, z.lo, z.hi, z.p_value), (0.0, 0.0, 0.0, 0.0, 1.0));
    // All differences equal and non-zero.
    let z = paired_effect(&vec![vec![0.0]; 6], &vec![vec![1.0]; 6], 0.95);
    assert_eq!((z.lo, z.hi, z.p_value), (1.0, 1.0, 0.0));
    // Tasks empty in either arm are dropped from both.
    let z = paired_effect(&[vec![], vec![0.0], vec![1.0]], &[vec![1.0], vec![1.0], vec![]], 0.95);
    assert_eq!(z.n_tasks, 1);
    assert!(z.p_value.is_nan());
}

#[test]
#[should_panic(expected = "same tasks")]
fn paired_effect_length_mismatch_panics() {
    paired_effect(&[vec![1.0]], &[], 0.95);
}

/// Exact binomial point probability by direct summation of integers.
fn binom_half_pmf(n: u64, x: u64) -> f64 {
    let mut c = 1.0_f64;
    for i in 0..x {
        c = c * (n - i) as f64 / (i + 1) as f64;
    }
    c / 2f64.powi(n as i32)
}

#[test]
fn mcnemar_known_values() {
    // b = 1, c = 5: n = 6, P(X <= 1) = 7/64, P(X = 1) = 6/64,
    // mid-p = 14/64 - 6/64 = 0.125.
    let expected = 2.0 * (binom_half_pmf(6, 0) + binom_half_pmf(6, 1)) - binom_half_pmf(6, 1);
    assert_close!(expected, 0.125, 1e-15);
    assert_close!(mcnemar_mid_p(1, 5), expected, 1e-12);
    assert_close!(mcnemar_mid_p(5, 1), expected, 1e-12);
    // Fagerland et al. 2013 worked example: b = 2, c = 10 (n = 12):
    // mid-p = 2 * P(X <= 2) - P(X = 2) = (2*79 - 66) / 4096 = 0.02246.
    assert_close!(mcnemar_mid_p(2, 10), 92.0 / 4096.0, 1e-12);
    assert_eq!(mcnemar_mid_p(0, 0), 1.0);
    assert_close!(mcnemar_mid_p(4, 4), 1.0, 1e-12);
    // Large n does not underflow: symmetric -> 1, lopsided -> tiny.
    assert_close!(mcnemar_mid_p(1500, 1500), 1.0, 1e-9);
    assert!(mcnemar_mid_p(1000, 1400) < 1e-9);
}

#[test]
fn holm_known_values() {
    // R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") = 0.03 0.06 0.06 0.02
    let adj = holm(&[0.01, 0.04, 0.03, 0.005]);
    for (a, e) in adj.iter().zip([0.03, 0.06, 0.06, 0.02]) {
        assert_close!(*a, e, 1e-12);
    }
    // Capped at 1, monotone.
    let adj = holm(&[0.5, 0.4, 0.9]);
    assert_eq!(adj, vec![1.0, 1.0, 1.0]);
    assert!(holm(&[]).is_empty());
    // NaN stays NaN and does not count in m.
    let adj = holm(&[0.01, f64::NAN, 0.02]);
    assert_close!(adj[0], 0.02, 1e-12);
    assert!(adj[1].is_nan());
    assert_close!(adj[2], 0.02, 1e-12);
}

#[test]
fn pass_at_k_known_values() {
    assert_close!(pass_at_k(10, 3, 1), 0.3, 1e-12);
    assert_eq!(pass_at_k(10, 3, 10), 1.0);
    assert_eq!(pass_at_k(10, 0, 5), 0.0);
    // 1 - C(7,2)/C(10,2) = 1 - 21/45.
    assert_close!(pass_at_k(10, 3, 2), 1.0 - 21.0 / 45.0, 1e-12);
    // Large n stays finite and exact enough: 1 - C(190,10)/C(200,10).
    let direct = 1.0 - (0..10).map(|i| (190 - i) as f64 / (200 - i) as f64).product::<f64>();
    assert_close!(pass_at_k(200, 10, 10), direct, 1e-12);
    assert!(pass_at_k(5, 6, 1).is_nan());
    assert!(pass_at_k(5, 2, 6).is_nan());

    assert_close!(pass_hat_k(10, 3, 1), 0.3, 1e-12);
    assert_close!(pass_hat_k(10, 3, 2), 6.0 / 90.0, 1e-12);
    assert_eq!(pass_hat_k(10, 3, 4), 0.0);
    assert_eq!(pass_hat_k(10, 10, 10), 1.0);
    assert_eq!(pass_hat_k(10, 3, 0), 1.0);
}

#[test]
fn power_known_values() {
    // scipy.stats.t.ppf: the smallest n with n >= (t_{.975,n-1} + t_{.8,n-1})^2 * 0.25 / 0.01
    // is 199 (the Normal formula said 197); at alpha 0.01 (5 ablations, Bonferroni) 296.
    assert_eq!(sample_size_paired(0.25, 0.1, 0.05, 0.8), Some(199));
    assert_eq!(sample_size_paired(0.25, -0.1, 0.05, 0.8), Some(199));
    assert_eq!(sample_size_paired(0.25, 0.1, 0.01, 0.8), Some(296));
    // No variance: the floor is the exact sign-flip test's, 2/2^6 <= 0.05 < 2/2^5.
    assert_eq!(sample_size_paired(0.0, 0.1, 0.05, 0.8), Some(6));
    assert_eq!(sign_flip_min_tasks(0.05), 6);
    assert_eq!(sign_flip_min_tasks(0.01), 8);
    assert_eq!(sample_size_paired(0.25, 0.0, 0.05, 0.8), None);
    assert_eq!(sample_size_paired(0.25, 0.1, 1.5, 0.8), None);
    // MDE at 5 tasks, var_d 0.04 (scipy: (t.ppf(.975,4) + t.ppf(.8,4)) * sqrt(0.04/5)).
    // scipy.stats.nct gives the paired t-test 0.791 power at this effect;
    // the old Normal MDE (0.2506) had 0.564.
    assert_close!(min_detectable_effect(0.04, 5, 0.05, 0.8), 0.3324952300054415, 1e-9);
    assert_close!(min_detectable_effect(0.04, 5, 0.01, 0.8), 0.49596519465255795, 1e-9);
    assert_close!(min_detectable_effect(0.04, 20, 0.01, 0.8), 0.16644776429808955, 1e-9);
    assert!(min_detectable_effect(0.25, 0, 0.05, 0.8).is_nan());
    assert!(min_detectable_effect(0.25, 1, 0.05, 0.8).is_nan());
}

#[test]
fn sign_flip_known_values() {
    // Brute force over the 128 sign vectors of the statistic itself (Python,
    // itertools.product), inverted on a 0.0005 grid: p(0) = 0.09375, CI [0, 0.4].
    let d = [0.3, 0.1, 0.5, -0.1, 0.2, 0.4, 0.0];
    let s = sign_flip(&d, 0.95);
    assert!(s.exact);
    assert_close!(s.p_value, 0.09375, 1e-12);
    assert_close!(s.lo, 0.0, 1e-12);
    assert_close!(s.hi, 0.4, 1e-12);
    // The cases: 3 tasks each 5/10 -> 6/10 (p = 2/8), 2 tasks 0/2 -> 2/2 (p = 2/4):
    // no interval narrower than [-1, 1] at 95%.
    let s = sign_flip(&[0.1, 0.1, 0.1], 0.95);
    assert_eq!((s.lo, s.hi, s.p_value), (-1.0, 1.0, 0.25));
    let s = sign_flip(&[1.0, 1.0], 0.95);
    assert_eq!((s.lo, s.hi, s.p_value), (-1.0, 1.0, 0.5));
    // 6 identical differences: p = 2/64, and the only subset mean is 0.1.
    let s = sign_flip(&[0.1; 6], 0.95);
    assert_close!(s.p_value, 2.0 / 64.0, 1e-15);
    assert_close!(s.lo, 0.1, 1e-12);
    assert_close!(s.hi, 0.1, 1e-12);
    // Normal form (20 tasks): half-width z sqrt(SS/(T(T - z^2))) = 0.048758127 and
    // p = 2 P(Z > 2/sqrt(0.4)) = 0.0015654 (scipy.stats.norm).
    let d: Vec<f64> = (0..20).map(|i| if i < 10 { 0.2 } else { 0.0 }).collect();
    let s = sign_flip(&d, 0.95);
    assert!(!s.exact);
    assert_close!(s.lo, 0.1 - 0.04875812723671694, 1e-9);
    assert_close!(s.hi, 0.1 + 0.04875812723671694, 1e-9);
    assert_close!(s.p_value, 0.001565402258002548, 1e-9);
    assert!(sign_flip(&[], 0.95).p_value.is_nan());
}

#[test]
fn newcombe_known_values() {
    // Newcombe 1998, Stat. Med. 17:873, Table II, method 10: 56/70 - 48/80 -> (0.0524, 0.3339);
    // 10/10 - 0/10 -> (0.6075, 1.0000).
    let (lo, hi) = newcombe_unpaired(48.0, 80.0, 56.0, 70.0, 0.95);
    assert_close!(lo, 0.0524, 1e-4);
    assert_close!(hi, 0.3339, 1e-4);
    let (lo, hi) = newcombe_unpaired(0.0, 10.0, 10.0, 10.0, 0.95);
    assert_close!(lo, 0.6075, 1e-4);
    assert_close!(hi, 1.0, 1e-12);
}

#[test]
fn paired_inference_one_method() {
    // 2 tasks, 0/2 -> 2/2: no verdict can come from two tasks.
    let i = paired_inference(&vec![vec![0.0, 0.0]; 2], &vec![vec![1.0, 1.0]; 2], 0.95);
    assert_eq!((i.lo, i.hi), (-1.0, 1.0));
    assert!(i.p_value >= 0.5, "{i:?}");
    // 3 tasks each 5/10 -> 6/10: p >= 2/8, interval holds 0.
    let c: Vec<Vec<f64>> = (0..3).map(|_| (0..10).map(|k| (k < 5) as u8 as f64).collect()).collect();
    let t: Vec<Vec<f64>> = (0..3).map(|_| (0..10).map(|k| (k < 6) as u8 as f64).collect()).collect();
    let i = paired_inference(&c, &t, 0.95);
    assert!(i.lo < 0.0 && i.p_value >= 0.25, "{i:?}");
    assert_eq!(i.method.name(), "sign_flip_exact+mover");
    // One task: Newcombe over the trials, 0/5 -> 5/5: Wilson 0/5 upper 3.8415/8.8415 = 0.43448,
    // lo = 1 - sqrt(2) 0.43448 = 0.38555 > 0.
    let i = paired_inference(&[vec![0.0; 5]], &[vec![1.0; 5]], 0.95);
    assert_eq!(i.method.name(), "newcombe_one_task");
    let z2 = 1.959963984540054f64.powi(2);
    assert_close!(i.lo, 1.0 - 2f64.sqrt() * z2 / (5.0 + z2), 1e-9);
    assert!(i.p_value < 0.05, "{i:?}");
}

#[test]
fn one_sided_bounds_basic() {
    let d = [0.1, -0.2, 0.3, 0.0, 0.2];
    let (lo, hi) = one_sided_bounds(&d, 0.05);
    let m = mean(&d);
    let se = sample_sd(&d) / 5f64.sqrt();
    let q = 2.131847; // t_{0.95, 4}
    assert_close!(lo, m - q * se, 1e-6);
    assert_close!(hi, m + q * se, 1e-6);
    assert_eq!(one_sided_bounds(&[0.2, 0.2], 0.05), (0.2, 0.2));
    assert!(one_sided_bounds(&[0.2], 0.05).0.is_nan());
}

#[test]
fn score_intervals_basic() {
    // 10 tasks x 1 trial, all failed: n* = 10 (z / t_9)^2, Wilson upper z^2/(n* + z^2).
    let all_fail = vec![vec![0.0]; 10];
    let e = pass_rate_wilson(&all_fail, 0.95);
    let z = normal_quantile(0.975);
    let n_star = 10.0 * (z / t_quantile(0.975, 9.0)).powi(2);
    assert_eq!(e.lo, 0.0);
    assert_close!(e.hi, z * z / (n_star + z * z), 1e-12);
    assert_close!(e.hi, 0.3385, 1e-3);
    assert_eq!((e.mean, e.se, e.n_tasks, e.n_trials), (0.0, 0.0, 10, 10));
    // Every trial passes: the effective size falls back to the 10 tasks, not the 30
    // trials: n* = 10 (z/t_9)^2, lo = n*/(n* + z^2) = 0.66149 (scipy); 14 tasks x 10
    // trials: 0.74998 (it was 0.968 counting trials).
    let e = pass_rate_wilson(&vec![vec![1.0; 3]; 10], 0.95);
    assert_eq!(e.hi, 1.0);
    assert_close!(e.lo, 0.6614913773398168, 1e-9);
    let e = pass_rate_wilson(&vec![vec![1.0; 10]; 14], 0.95);
    assert_close!(e.lo, 0.7499788640490404, 1e-9);
    // Away from the boundary with many tasks it is close to the t interval.
    let tasks: Vec<Vec<f64>> = (0..200).map(|i| vec![(i % 2) as f64, ((i / 2) % 2) as f64]).collect();
    let (t, w) = (pass_rate(&tasks, 0.95), pass_rate_wilson(&tasks, 0.95));
    assert_close!(w.lo, t.lo, 0.01);
    assert_close!(w.hi, t.hi, 0.01);
    assert!(pass_rate_wilson(&[vec![1.0]], 0.95).lo.is_nan());

    // MOVER: both arms all fail -> symmetric interval around 0, not [0, 0].
    let m = paired_effect_mover(&all_fail, &all_fail, 0.95);
    assert_eq!((m.mean_diff, m.p_value), (0.0, 1.0));
    assert_close!(m.lo, -e_hi_all_fail(), 1e-12);
    assert_close!(m.hi, e_hi_all_fail(), 1e-12);
    // Many tasks, away from the boundary: close to the paired t interval.
    let control: Vec<Vec<f64>> = (0..200).map(|i| vec![(i % 2) as f64]).collect();
    let treatment: Vec<Vec<f64>> = (0..200).map(|i| vec![((i % 2 == 1) || i % 3 == 0) as u8 as f64]).collect();
    let (t, m) = (paired_effect(&control, &treatment, 0.95), paired_effect_mover(&control, &treatment, 0.95));
    assert_eq!((t.mean_diff, t.p_value), (m.mean_diff, m.p_value));
    assert_close!(m.lo, t.lo, 0.01);
    assert_close!(m.hi, t.hi, 0.01);
}

fn e_hi_all_fail() -> f64 {
    pass_rate_wilson(&vec![vec![0.0]; 10], 0.95).hi
}
