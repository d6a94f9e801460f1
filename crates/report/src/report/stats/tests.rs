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
    // Above the switch to the expansion (df > 1e4): P(t_df > x) = I_{df/(df+x^2)}(df/2, 1/2) / 2,
    // mpmath's betainc at 40 digits. The Normal tail alone gives 0.0249979 and 2.8665e-7.
    assert_close!(t_sf(1.96, 2e4), 0.025004827499202714, 1e-10);
    assert_close!(t_sf(3.0, 2e4), 0.0013515605190602458, 1e-11);
    assert_close!(t_sf(5.0, 2e4), 2.8907570738290256e-7, 1e-12);
    assert_close!(t_sf(-1.96, 1e5), 1.0 - 0.02499928159715082, 1e-10);
    assert_close!(t_sf(t_quantile(0.975, 5e4), 5e4), 0.025, 1e-10);
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
    // Wilson's formula evaluated in mpmath at 40 digits, z = sqrt(2) erfinv(0.95) (what R's
    // prop.test(7, 10, correct = FALSE) computes: 0.3967781 0.8922087).
    let (lo, hi) = wilson(7, 10, 0.95);
    assert_close!(lo, 0.396778147461145, 1e-9);
    assert_close!(hi, 0.892208732593699, 1e-9);
    // By hand: 0/20: hi = z^2/(20 + z^2) = 0.161125158052819; 20/20: lo = 20/(20 + z^2) = 0.838874841947181.
    let (lo, hi) = wilson(0, 20, 0.95);
    assert_eq!(lo, 0.0);
    assert_close!(hi, 0.161125158052819, 1e-9);
    let (lo, hi) = wilson(20, 20, 0.95);
    assert_close!(lo, 0.838874841947181, 1e-9);
    assert_eq!(hi, 1.0);
    assert!(wilson(0, 0, 0.95).0.is_nan());
    assert!(wilson(3, 2, 0.95).1.is_nan());
}

#[test]
fn clopper_pearson_known_values() {
    // The roots of P(X >= 7 | 10, p) = 0.025 and P(X <= 7 | 10, p) = 0.025 (binomial sums,
    // mpmath findroot at 40 digits; R's binom.test(7, 10) prints 0.3475471 0.9332605).
    let (lo, hi) = clopper_pearson(7, 10, 0.95);
    assert_close!(lo, 0.347547149940003, 1e-9);
    assert_close!(hi, 0.933260488822266, 1e-9);
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
    // t_{.975,2} in closed form: (2q - 1)/sqrt(2q(1 - q)) = 0.95/sqrt(0.04875) = 4.302652729749;
    // half-width 4.302652729749 * 0.288675134595 = 1.242068855875 (t tables: 4.303).
    assert_close!(e.lo, -0.742068855875165, 1e-9);
    assert_close!(e.hi, 1.742068855875165, 1e-9);
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
    // By hand: mean 0.375, deviations 0.125 (x3) and -0.375, sum of squares 0.1875,
    // sd sqrt(0.1875/3) = 0.25, se 0.25/sqrt(4) = 0.125, t = 0.375/0.125 = 3.
    let p = paired_effect(&control, &treatment, 0.95);
    assert_eq!(p.n_tasks, 4);
    assert_close!(p.mean_diff, 0.375, 1e-12);
    assert_close!(p.se, 0.125, 1e-12);
    assert_eq!(p.df, 3.0);
    // Two-sided p of t = 3 on 3 df, in closed form (t_3's CDF, Abramowitz & Stegun 26.7, at
    // theta = atan(3/sqrt(3)) = pi/3): 1/3 - sqrt(3)/(2 pi) = 0.0576688856224 (R: 2*pt(-3, 3) = 0.05766889).
    assert_close!(p.p_value, 0.0576688856224373, 1e-10);
    // t_{.975,3} = 3.182446305284 (root of t_3's closed-form CDF in mpmath; t tables: 3.182):
    // 0.375 -/+ 0.125 * 3.182446305284. The lower bound is below 0, as p > 0.05 says.
    assert_close!(p.lo, -0.0228057881604636, 1e-9);
    assert_close!(p.hi, 0.772805788160464, 1e-9);

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
    // Large n does not underflow: symmetric -> 1, lopsided -> tiny. Exact with Python's integers:
    // (2 sum_{x <= 1000} C(2400, x) - C(2400, 1000)) / 2^2400 = 2.790525215958831e-16 (math.comb, Fraction).
    assert_close!(mcnemar_mid_p(1500, 1500), 1.0, 1e-9);
    let exact = 2.790525215958831e-16;
    assert_close!((mcnemar_mid_p(1000, 1400) - exact) / exact, 0.0, 1e-6);
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
    // Brute force over the 128 sign vectors of the statistic itself (scripts/import_reference.py's
    // sign_flip, which counts the flipped sums beyond and equal to the observed one and tests
    // every subset mean and every midpoint between them): mid-p(0) = (2 * 2 + 4) / 128 = 0.0625
    // (the exact test's 0.09375 less the 4 ties), CI [0, 0.4].
    let d = [0.3, 0.1, 0.5, -0.1, 0.2, 0.4, 0.0];
    let s = sign_flip(&d, 0.95);
    assert!(s.exact);
    assert_close!(s.p_value, 0.0625, 1e-12);
    assert_close!(s.lo, 0.0, 1e-12);
    assert_close!(s.hi, 0.4, 1e-12);
    // The cases: 3 tasks each 5/10 -> 6/10 (p = 2/8), 2 tasks 0/2 -> 2/2 (p = 2/4):
    // no interval narrower than [-1, 1] at 95%.
    let s = sign_flip(&[0.1, 0.1, 0.1], 0.95);
    assert_eq!((s.lo, s.hi, s.p_value), (-1.0, 1.0, 0.25));
    let s = sign_flip(&[1.0, 1.0], 0.95);
    assert_eq!((s.lo, s.hi, s.p_value), (-1.0, 1.0, 0.5));
    // 6 identical differences: the mid-p 1/64 is held to the exact test's smallest p, 2/64, and
    // the only subset mean is 0.1.
    let s = sign_flip(&[0.1; 6], 0.95);
    assert_close!(s.p_value, 2.0 / 64.0, 1e-15);
    assert_close!(s.lo, 0.1, 1e-12);
    assert_close!(s.hi, 0.1, 1e-12);
    // Above 16 tasks, the lattice: ten tasks +0.2 and ten unchanged. Brute force over the 2^20
    // subsets (scripts/import_reference.py's sign_flip): the mid-p 2^-10 is held to the exact
    // test's smallest p on 10 changed tasks, 2/2^10 = 0.001953125, and the interval is
    // [0.05, 0.15].
    let d: Vec<f64> = (0..20).map(|i| if i < 10 { 0.2 } else { 0.0 }).collect();
    let s = sign_flip(&d, 0.95);
    assert_eq!((s.exact, s.method), (true, SignFlipMethod::Lattice));
    assert_close!(s.p_value, 0.001953125, 1e-15);
    assert_close!(s.lo, 0.05, 1e-12);
    assert_close!(s.hi, 0.15, 1e-12);
    // 18 tasks with differences in sixths (trial counts 2 and 3), by the same brute force:
    // mid-p 0.008392333984375 (the exact test's 0.0108642578125 less the ties), [1/12, 13/27].
    let sixths = [2, -3, 4, 3, 0, 1, 2, -2, 6, 3, 0, 4, -1, 2, 3, 0, 2, 5];
    let d: Vec<f64> = sixths.iter().map(|&k| k as f64 / 6.0).collect();
    let s = sign_flip(&d, 0.95);
    assert_eq!(s.method, SignFlipMethod::Lattice);
    assert_close!(s.p_value, 0.008392333984375, 1e-13);
    assert_close!(s.lo, 1.0 / 12.0, 1e-12);
    assert_close!(s.hi, 13.0 / 27.0, 1e-12);
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
    // 2 tasks, 0/2 -> 2/2: no verdict can come from two tasks. Sign flip on d = (1, 1): the 3
    // subset means are all 1 > 0, p = 2 (1 + 0)/4 = 0.5, c = floor(0.025 * 4) = 0 -> [-1, 1].
    // MOVER (r = 0, n* = 2 (z/t_1)^2): lo = 1 - sqrt(2) t_1^2/(t_1^2 + 2), which reaches 0 at
    // t_1^2 = 2 (sqrt(2) + 1), alpha = 1 - 2 atan(2.197368)/pi = 0.271887 (Cauchy quantile):
    // the reported p is the larger, the sign flip's.
    let i = paired_inference(&vec![vec![0.0, 0.0]; 2], &vec![vec![1.0, 1.0]; 2], 0.95);
    assert_eq!((i.lo, i.hi), (-1.0, 1.0));
    assert_close!(i.p_value, 0.5, 1e-12);
    // 3 tasks each 5/10 -> 6/10, d = (0.1, 0.1, 0.1): the trials vary, so the sign flip
    // (c = floor(0.025 * 8) = 0 -> [-1, 1], p = 2/8 = 0.25) has the trial-noise floor beside it:
    // v = (10/9)(0.25 + 0.24)/10 times chi2_2(0.025)/2, t = 0.1/sqrt(that/3) on 2 df, p 0.0430049
    // (mpmath: regularized incomplete gamma and beta); the larger, the sign flip's, is reported.
    let c: Vec<Vec<f64>> =
        (0..3).map(|_| (0..10).map(|k| (k < 5) as u8 as f64).collect()).collect();
    let t: Vec<Vec<f64>> =
        (0..3).map(|_| (0..10).map(|k| (k < 6) as u8 as f64).collect()).collect();
    let i = paired_inference(&c, &t, 0.95);
    assert_eq!((i.lo, i.hi), (-1.0, 1.0));
    assert_close!(i.p_value, 0.25, 1e-15);
    assert_eq!(i.method.name(), "sign_flip_mid_p+trial_noise");
    // MOVER, still the floor where the trials cannot say (below): 3 tasks of this shape, its 95%
    // interval (-0.618391230163, 0.697388550160) from its closed form in mpmath.
    let m = paired_effect_mover(&c, &t, 0.95);
    assert_close!(m.lo, -0.618391230163, 1e-9);
    assert_close!(m.hi, 0.697388550160, 1e-9);
    // 6 tasks of one trial, 0 -> 1 everywhere: no spread, no trial noise -> MOVER's floor.
    let i = paired_inference(&vec![vec![0.0]; 6], &vec![vec![1.0]; 6], 0.95);
    assert_eq!(i.method.name(), "sign_flip_mid_p+mover");
    // One task: Newcombe over the trials, 0/5 -> 5/5: Wilson 0/5 upper 3.8415/8.8415 = 0.43448,
    // lo = 1 - sqrt(2) 0.43448 = 0.38555 > 0.
    let i = paired_inference(&[vec![0.0; 5]], &[vec![1.0; 5]], 0.95);
    assert_eq!(i.method.name(), "newcombe_one_task");
    let z2 = 1.959963984540054f64.powi(2);
    assert_close!(i.lo, 1.0 - 2f64.sqrt() * z2 / (5.0 + z2), 1e-9);
    // By hand: lo = 1 - sqrt(2) z^2/(5 + z^2) = 0 when z^2 = 5/(sqrt(2) - 1) = 12.0710678, z = 3.4743442,
    // so p = 2 (1 - Phi(3.4743442)) = erfc(3.4743442/sqrt(2)) = 5.12103608485e-4 (mpmath).
    assert_close!(i.p_value, 5.12103608484847e-4, 1e-9);
}

#[test]
fn paired_inference_two_tasks_rests_on_the_sign_flip() {
    // 2 tasks at 0.2, 0.4 (5 trials each) -> 0.6, 0.8. Two points always correlate perfectly: r = 1,
    // and the two arms' Wilson intervals mirror each other (l(p) = 1 - u(1 - p)), so
    // p2 - l2 = u1 - p1 and u2 - p2 = p1 - l1: MOVER's terms cancel,
    // lo = d - |(p2 - l2) - (u1 - p1)| = d = hi, a zero-width interval [0.4, 0.4] that excludes 0 at
    // every level. The reported inference stays honest only through the sign flip's [-1, 1] and p 2/4.
    let c = vec![vec![1.0, 0.0, 0.0, 0.0, 0.0], vec![1.0, 1.0, 0.0, 0.0, 0.0]];
    let t = vec![vec![1.0, 1.0, 1.0, 0.0, 0.0], vec![1.0, 1.0, 1.0, 1.0, 0.0]];
    for conf in [0.95, 0.999999] {
        let m = paired_effect_mover(&c, &t, conf);
        assert_close!(m.lo, 0.4, 1e-6);
        assert_close!(m.hi, 0.4, 1e-6);
    }
    let i = paired_inference(&c, &t, 0.95);
    assert_eq!((i.lo, i.hi), (-1.0, 1.0));
    assert_close!(i.mean_diff, 0.4, 1e-12);
    assert_close!(i.p_value, 0.5, 1e-12);
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
    // With z = 1.959963984540, t_9 = 2.262157162798 (root of t_9's closed-form CDF, mpmath):
    // n* = 7.506727203360, hi = 3.841458820694/11.348186024054 = 0.338508622660.
    let e = pass_rate_wilson(&all_fail, 0.95);
    assert_eq!(e.lo, 0.0);
    assert_close!(e.hi, 0.338508622660183, 1e-9);
    assert_eq!((e.mean, e.se, e.n_tasks, e.n_trials), (0.0, 0.0, 10, 10));
    // Every trial passes: the effective size falls back to the 10 tasks, not the 30
    // trials: n* = 10 (z/t_9)^2, lo = n*/(n* + z^2) = 0.66149 (scipy); 14 tasks x 10
    // trials: 0.74998 (it was 0.968 counting trials).
    let e = pass_rate_wilson(&vec![vec![1.0; 3]; 10], 0.95);
    assert_eq!(e.hi, 1.0);
    assert_close!(e.lo, 0.6614913773398168, 1e-9);
    let e = pass_rate_wilson(&vec![vec![1.0; 10]; 14], 0.95);
    assert_close!(e.lo, 0.7499788640490404, 1e-9);
    // Away from the boundary with many tasks it is close to the t interval. Task means: 50 x 0,
    // 100 x 0.5, 50 x 1; p = 0.5, var = (25/199)/200, n_eff = 0.25/var = 398 (of 400 trials),
    // n* = 398 (z/t_199)^2, t_199 = 1.971956544252 (mpmath, closed-form t CDF): Wilson
    // (0.450817059066, 0.549182940934); the t interval 0.5 -/+ t_199 sqrt(var) = (0.450577375, 0.549422625).
    let tasks: Vec<Vec<f64>> =
        (0..200).map(|i| vec![(i % 2) as f64, ((i / 2) % 2) as f64]).collect();
    let (t, w) = (pass_rate(&tasks, 0.95), pass_rate_wilson(&tasks, 0.95));
    assert_close!(w.lo, 0.4508170590659585, 1e-9);
    assert_close!(w.hi, 0.5491829409340415, 1e-9);
    assert_close!(t.lo, 0.450577374998, 1e-9);
    assert_close!(t.hi, 0.549422625002, 1e-9);
    assert!(pass_rate_wilson(&[vec![1.0]], 0.95).lo.is_nan());

    // MOVER: both arms all fail -> symmetric interval around 0, not [0, 0]: with r = 0 and
    // p1 = p2 = l1 = l2 = 0, lo = -u1 and hi = u2, the all-fail upper bound above.
    let m = paired_effect_mover(&all_fail, &all_fail, 0.95);
    assert_eq!((m.mean_diff, m.p_value), (0.0, 1.0));
    assert_close!(m.lo, -0.338508622660183, 1e-9);
    assert_close!(m.hi, 0.338508622660183, 1e-9);
    // Many tasks, away from the boundary: close to the paired t interval. Control 100/200,
    // treatment 134/200, d = 1 on the 34 tasks with i % 6 == 0, else 0: mean 0.17, t = 6.384280,
    // r = 0.701810; MOVER (0.116841390256, 0.221083324239) from the formula of
    // paired_effect_mover in mpmath; paired t 0.17 -/+ t_199 se = (0.117490932125, 0.222509067875),
    // p = 2 P(t_199 > 6.384280) = 1.1885944e-9 (closed-form t CDF).
    let control: Vec<Vec<f64>> = (0..200).map(|i| vec![(i % 2) as f64]).collect();
    let treatment: Vec<Vec<f64>> =
        (0..200).map(|i| vec![((i % 2 == 1) || i % 3 == 0) as u8 as f64]).collect();
    let (t, m) = (
        paired_effect(&control, &treatment, 0.95),
        paired_effect_mover(&control, &treatment, 0.95),
    );
    assert_eq!((t.mean_diff, t.p_value), (m.mean_diff, m.p_value));
    assert_close!(m.lo, 0.11684139025588734, 1e-9);
    assert_close!(m.hi, 0.22108332423913255, 1e-9);
    assert_close!(t.lo, 0.117490932125, 1e-9);
    assert_close!(t.hi, 0.222509067875, 1e-9);
    assert_close!((t.p_value - 1.1885944e-9) / 1.1885944e-9, 0.0, 1e-6);
}

#[test]
fn an_unchanged_task_added_does_not_move_the_sign_flip_test() {
    // 16 tasks x 1 trial, 4 fail -> pass: the exact p is 2/2^4 = 0.125 (the 12 unchanged tasks
    // change no sum); a 17th unchanged task leaves it there (the Normal approximation gave 0.0455).
    // 5 flips: 2/2^5 = 0.0625 (it gave 0.025). Brute force over all subsets in exact rationals
    // (Python, fractions) gives these p-values and the intervals [0, 0.5] (16 tasks) and
    // [0, 4/9] (17), [0, 0.5] (17 tasks, 5 flips).
    for (flips, tasks, p, hi) in
        [(4, 16, 0.125, 0.5), (4, 17, 0.125, 4.0 / 9.0), (5, 17, 0.0625, 0.5)]
    {
        let d: Vec<f64> = (0..tasks).map(|i| if i < flips { 1.0 } else { 0.0 }).collect();
        let s = sign_flip(&d, 0.95);
        assert!(s.exact, "{tasks}");
        assert_close!(s.p_value, p, 1e-15);
        assert_close!(s.lo, 0.0, 1e-15);
        assert_close!(s.hi, hi, 1e-12);
        // The reported inference: no verdict, as the exact test says.
        let control: Vec<Vec<f64>> = vec![vec![0.0]; tasks];
        let treatment: Vec<Vec<f64>> = d.iter().map(|&x| vec![x]).collect();
        let i = paired_inference(&control, &treatment, 0.95);
        assert!(i.p_value >= p - 1e-15 && i.lo <= 0.0, "{tasks} tasks, {flips} flips: {i:?}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Adding tasks whose difference is 0 never changes the p-value (on the lattice, exactly).
    #[test]
    fn zeros_never_change_the_sign_flip_p_value(k in proptest::collection::vec(-4i32..=4, 1..=14), zeros in 1usize..=30) {
        let d: Vec<f64> = k.iter().map(|&x| x as f64 / 4.0).collect();
        let mut with = d.clone();
        with.extend(std::iter::repeat_n(0.0, zeros));
        let (a, b) = (sign_flip(&d, 0.95), sign_flip(&with, 0.95));
        proptest::prop_assert!((a.p_value - b.p_value).abs() < 1e-12, "{} vs {} ({:?})", a.p_value, b.p_value, b.method);
        proptest::prop_assert!(b.exact);
    }
}

#[test]
fn fractional_scores_off_the_lattice_are_tested_by_monte_carlo_with_its_error() {
    // 20 tasks, 10 at +0.1234567 and 10 at -0.0004321 (no lattice up to 5040). Exact, over the
    // 2^20 subsets (scripts/import_reference.py's sign_flip): mid-p 0.0019521713256835938,
    // interval [0.0305401, 0.0924845]. Monte Carlo must land within 4 of its stated standard
    // errors of the exact mid-p, never below 1/(draws + 1), and near the exact interval.
    let d: Vec<f64> = (0..20).map(|i| if i < 10 { 0.1234567 } else { -0.0004321 }).collect();
    let s = sign_flip(&d, 0.95);
    assert_eq!((s.exact, s.method), (false, SignFlipMethod::MonteCarlo));
    assert!(s.p_value >= 1.0 / (SIGN_FLIP_DRAWS as f64 + 1.0));
    assert!((s.p_value - 0.0019521713256835938).abs() <= 4.0 * s.p_monte_carlo_se, "{s:?}");
    assert_close!(
        s.p_monte_carlo_se,
        (s.p_value * (1.0 - s.p_value) / SIGN_FLIP_DRAWS as f64).sqrt(),
        1e-15
    );
    assert!((s.lo - 0.0305401).abs() < 0.005 && (s.hi - 0.0924845).abs() < 0.005, "{s:?}");
}

#[test]
fn no_spread_is_decided_by_a_tolerance_not_by_float_equality() {
    // 14 tasks, each 6 passes in 10 trials (in different orders): the task means are all 0.6 and
    // the float variance was about 1e-33, so the Wilson fallback to n_eff = 14 tasks did not fire
    // ([0.509, 0.685]). By hand: n* = 14 (z / t_{0.975,13})^2 with t = 2.160368656 (t table),
    // Wilson at p = 0.6 on n*: [0.328765926, 0.821229847].
    let tasks: Vec<Vec<f64>> =
        (0..14).map(|k| (0..10).map(|i| ((i + k) % 10 < 6) as u8 as f64).collect()).collect();
    let means: Vec<f64> = tasks.iter().map(|t| mean(t)).collect();
    assert_eq!(sample_sd(&means), 0.0);
    let e = pass_rate_wilson(&tasks, 0.95);
    assert_close!(e.lo, 0.32876592602534327, 1e-9);
    assert_close!(e.hi, 0.8212298467845265, 1e-9);
    // Every task 6/10 -> 8/10: the differences have no spread, so no t-test MDE is claimed
    // (it printed "could detect ±0 pp"), and the correlation of the arms is 0.
    let better: Vec<Vec<f64>> =
        (0..14).map(|k| (0..10).map(|i| ((i + 3 * k) % 10 < 8) as u8 as f64).collect()).collect();
    let d: Vec<f64> = tasks.iter().zip(&better).map(|(c, t)| mean(t) - mean(c)).collect();
    assert_eq!(sample_sd(&d), 0.0);
    assert_eq!(min_detectable_effect(sample_sd(&d).powi(2), 14, 0.05, 0.8), 0.0);
    assert!(no_spread(&d) && !no_spread(&[0.6, 0.6 + 1e-9]));
}

#[test]
fn every_task_moving_alike_is_an_effect_when_the_trials_say_so() {
    // 14 tasks, each 6/10 -> 8/10 (280 trials): the differences have no spread, so the sign flip
    // (p = 2/2^14) has a point for an interval; the hull with MOVER said "no detectable effect".
    // The floor gives it width: v = (10/9)(0.24 + 0.16)/10 times chi2_13(0.025)/13 = 5.0087505/13,
    // 0.2 -/+ t_{0.975,13} sqrt(that/14) = [0.124444582, 0.275555418] (mpmath: regularized
    // incomplete gamma and beta and their roots); its t-test p 7.07e-5 is below the sign flip's
    // 2/2^14, which is reported.
    let c: Vec<Vec<f64>> =
        (0..14).map(|k| (0..10).map(|i| ((i + k) % 10 < 6) as u8 as f64).collect()).collect();
    let t: Vec<Vec<f64>> =
        (0..14).map(|k| (0..10).map(|i| ((i + 3 * k) % 10 < 8) as u8 as f64).collect()).collect();
    let i = paired_inference(&c, &t, 0.95);
    assert_eq!(i.method.name(), "sign_flip_mid_p+trial_noise");
    assert_close!(i.p_value, 2.0 / 16384.0, 1e-15);
    assert_close!(i.lo, 0.12444458165309147, 1e-9);
    assert_close!(i.hi, 0.27555541834690853, 1e-9);
    assert_eq!(paired_interval(&c, &t, 0.95), (i.lo, i.hi));
    assert!(paired_rejects(&c, &t, 0.05) && !paired_rejects(&c, &t, 0.0001));
}

/// The permutation t-test (the one-sample t statistic recomputed under every sign flip, by brute
/// force here, its mid-p counting ties at half weight and held to `2^(1 - n)` as the sign-flip
/// test is) gives the same p-value as the sign-flip test of the mean: under flips `sum d^2` is
/// fixed and t is increasing in `sum d`, so the two order the flips alike, ties included.
#[test]
fn permutation_t_is_the_sign_flip_test() {
    let mut rng = super::simulation::SplitMix64(0x7E57);
    for case in 0..200 {
        let n = 2 + case % 11;
        let d: Vec<f64> = (0..n).map(|_| ((rng.uniform() * 9.0).floor() - 4.0) / 4.0).collect();
        if no_spread(&d) {
            continue;
        }
        let t_of = |x: &[f64]| {
            let m = mean(x);
            let sd = sample_sd(x);
            if sd == 0.0 { m.signum() * f64::INFINITY } else { m / (sd / (x.len() as f64).sqrt()) }
        };
        let observed = t_of(&d);
        let (mut ge, mut le, mut eq) = (0u32, 0u32, 0u32);
        for mask in 0..(1u32 << n) {
            let flipped: Vec<f64> = d
                .iter()
                .enumerate()
                .map(|(i, x)| if mask >> i & 1 == 1 { -x } else { *x })
                .collect();
            let t = t_of(&flipped);
            ge += (t >= observed - 1e-9) as u32;
            le += (t <= observed + 1e-9) as u32;
            eq += ((t - observed).abs() <= 1e-9 || t == observed) as u32;
        }
        let changed = d.iter().filter(|x| **x != 0.0).count() as i32;
        let p_t = (f64::from(2 * ge.min(le) - eq) / f64::from(1u32 << n))
            .min(1.0)
            .max(0.5f64.powi(changed - 1).min(1.0));
        assert_close!(sign_flip(&d, 0.95).p_value, p_t, 1e-12);
        assert_close!(sign_flip_p(&d), p_t, 1e-12);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// The cheap p-value (flipped sums only) is the full test's, above the enumeration too.
    #[test]
    fn the_sums_alone_give_the_sign_flip_p_value(k in proptest::collection::vec(-6i32..=6, 2..=40)) {
        let d: Vec<f64> = k.iter().map(|&x| x as f64 / 6.0).collect();
        proptest::prop_assert!((sign_flip_p(&d) - sign_flip(&d, 0.95).p_value).abs() < 1e-12);
    }
}

#[test]
fn a_little_spread_never_narrows_the_interval_below_the_trials_noise() {
    // 13 tasks 6/10 -> 6/10 and one 6/10 -> 7/10: the sign-flip interval alone at 90% is [0, +2] pp
    // (by hand: 8191 subset means 0, and from the top 1 + 13 + 78 + 286 + 715 subsets reach
    // floor(0.05 2^14) = 819 at the mean 0.1/5), which two one-sided tests at 5% would read as
    // "equivalent within ±5 pp"; with every task unchanged the floor already applied. The trial
    // noise is the floor:
    // v = (13 (s2(6/10) + s2(6/10)) + s2(6/10) + s2(7/10)) / 10 / 14 times chi2_13(0.025)/13, mean
    // 0.1/14, 90% interval mean -/+ t_{0.95,13} sqrt(that/14) = [-0.060552521, 0.074838236]
    // (mpmath), which is the hull.
    let arm = |k: usize| -> Vec<f64> { (0..10).map(|i| (i < k) as u8 as f64).collect() };
    let c: Vec<Vec<f64>> = (0..14).map(|_| arm(6)).collect();
    let t: Vec<Vec<f64>> = (0..14).map(|i| arm(if i == 0 { 7 } else { 6 })).collect();
    let i = paired_inference(&c, &t, 0.90);
    assert_eq!(i.method.name(), "sign_flip_mid_p+trial_noise");
    assert_close!(i.lo, -0.06055252124764845, 1e-9);
    assert_close!(i.hi, 0.07483823553336273, 1e-9);
    assert!(!(i.lo > -0.05 && i.hi < 0.05), "not equivalent within ±5 pp: {i:?}");
    let d: Vec<f64> = (0..14).map(|i| if i == 0 { 0.1 } else { 0.0 }).collect();
    let s = sign_flip(&d, 0.90);
    assert_close!(s.lo, 0.0, 1e-15);
    assert_close!(s.hi, 0.02, 1e-15);
}

/// The size of the test with no effect, computed exactly rather than simulated: 20 tasks of one
/// trial whose difference is +1 or -1 each with probability 1/4 (base rate 0.5, ICC 0), the
/// rejection at 0.05 summed over every count of changed tasks and of positive ones. Expected
/// values by the same sums over McNemar's binomial (Python, math.comb, the tails written out):
/// the mid-p held to `2^(1 - n)` 0.04063043083442608 (the mid-p alone 0.041554541247023735:
/// at 5 changed tasks it would reject when all five agree, by chance 6.25% of the time), the
/// exact test 0.02261871947121108.
#[test]
fn the_mid_p_size_at_twenty_one_trial_tasks_is_below_alpha_exactly() {
    let choose = |n: u64, k: u64| (1..=k).fold(1.0, |c, i| c * (n - k + i) as f64 / i as f64);
    let (mut mid, mut exact) = (0.0, 0.0);
    for n in 0..=20u64 {
        let p_n = choose(20, n) * 0.5f64.powi(20); // changed with probability 1/2
        for x in 0..=n {
            let d: Vec<f64> = (0..20)
                .map(|i| {
                    if i < x {
                        1.0
                    } else if i < n {
                        -1.0
                    } else {
                        0.0
                    }
                })
                .collect();
            let p_x = p_n * choose(n, x) * 0.5f64.powi(n as i32);
            mid += p_x * f64::from(sign_flip_p(&d) <= 0.05);
            exact += p_x * f64::from(sign_flip_p_conservative(&d) <= 0.05);
        }
    }
    assert_close!(mid, 0.04063043083442608, 1e-12);
    assert_close!(exact, 0.02261871947121108, 1e-12);
}

/// The equivalence test's decisions against `scripts/betting_cs_reference.py`
/// (the betting sequence and SplitMix64 written again in plain Python: the
/// differences sorted, put in 100 seeded uniformly random orders, each
/// order's final capitals as plain products at level 2 alpha, a margin
/// rejected when its capital averaged over the orders reaches 1 / alpha),
/// margin 10 pp, alpha 0.05, seed 20261203 (`configs/humaneval-components.toml`'s): at which
/// numbers of tasks each sequence of per-task differences is shown equivalent.
/// Not monotone in the number of tasks (the bets are sized for it).
#[test]
fn equivalence_by_betting_matches_the_reference() {
    const SEED: u64 = 20261203;
    let shown = |ks: &[i32], trials: usize| {
        let (c, t) = arms_of_differences(ks, trials);
        paired_equivalent(&c, &t, 0.05, 0.1, SEED)
    };
    // Every task unchanged: first shown at 56 tasks; the averaged capitals 20.0261 each.
    assert!(!shown(&[0; 55], 1));
    assert!(shown(&[0; 56], 1));
    let (up, down) = order_free_capital(&[0.0; 56], 0.05, 0.1, SEED);
    assert_close!(up.exp(), 20.0261, 1e-4);
    assert_close!(down.exp(), 20.0261, 1e-4);
    // Differences 0.2, -0.2, 0, 0.4, -0.4, 0 (fifths) repeated: shown at 68, 69, 71 to 100, not at
    // 70; at 68 the capitals 20.2618 and 20.5568.
    let fifths: Vec<i32> = [1, -1, 0, 2, -2, 0].iter().cycle().take(100).copied().collect();
    assert!(!shown(&fifths[..67], 5));
    assert!(shown(&fifths[..68], 5));
    assert!(!shown(&fifths[..70], 5));
    assert!(shown(&fifths[..71], 5));
    assert!(shown(&fifths, 5));
    let d: Vec<f64> = fifths[..68].iter().map(|&k| f64::from(k) / 5.0).collect();
    let (up, down) = order_free_capital(&d, 0.05, 0.1, SEED);
    assert_close!(up.exp(), 20.2618, 1e-4);
    assert_close!(down.exp(), 20.5568, 1e-4);
    // One trial a task, +1, -1 and eight unchanged repeated: first at 137, not at 141.
    let pm: Vec<i32> = [1, -1, 0, 0, 0, 0, 0, 0, 0, 0].iter().cycle().take(170).copied().collect();
    assert!(!shown(&pm[..136], 1));
    assert!(shown(&pm[..137], 1));
    assert!(!shown(&pm[..141], 1));
    assert!(shown(&pm[..170], 1));
    // A mean difference of exactly the margin (0.3 and -0.1 alternating): never, even at 400.
    let at_margin: Vec<i32> = [3, -1].iter().cycle().take(400).copied().collect();
    assert!(!shown(&at_margin, 10));
    // No tasks, or a level or margin out of range: not shown.
    assert!(!paired_equivalent(&[], &[], 0.05, 0.1, SEED));
    let (c, t) = arms_of_differences(&[0; 100], 1);
    assert!(!paired_equivalent(&c, &t, 0.5, 0.1, SEED));
    assert!(!paired_equivalent(&c, &t, 0.05, 0.0, SEED));
}

/// Arms with one task per entry of `ks`, `trials` trials each, whose
/// difference is `k / trials` (k may be negative).
fn arms_of_differences(ks: &[i32], trials: usize) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let pass = |n: i32| (0..trials as i32).map(|i| (i < n) as u8 as f64).collect::<Vec<f64>>();
    ks.iter().map(|&k| if k >= 0 { (pass(0), pass(k)) } else { (pass(-k), pass(0)) }).unzip()
}

/// The data set of 100 tasks x 5 trials with no effect on which the earlier
/// rule (betting in the suite's order, a margin rejected at the first prefix
/// whose capital reached 1 / alpha) said "equivalent" in one order of the
/// tasks and "undecided" in another (`scripts/betting_cs_reference.py`, part
/// (e), which also measured the two answers on 35% of such data sets): the
/// rule now gives one answer, with the reference's averaged capitals 12.714
/// and 212.549 (so not equivalent: 12.714 < 20), for both orders and any other.
#[test]
fn equivalence_is_a_function_of_the_differences() {
    let one: [i32; 100] = [
        0, -1, 1, 0, 2, 0, -2, 1, -1, 1, 0, 1, -1, -2, -1, -1, -1, 0, 1, 1, 2, -2, -2, 0, -2, 0, 1,
        -1, -1, 3, -1, 1, -2, -2, 1, 0, 0, 0, -1, -1, -1, 0, 2, -1, 3, 1, 0, -1, -1, 0, 1, -1, -1,
        1, -1, 0, 1, 0, 0, 0, -1, -1, 1, -1, 3, -1, 1, 2, 1, 1, 0, 1, 1, -1, -3, 1, -2, 4, 2, -1,
        1, 2, 2, -2, -4, 2, -2, 0, -3, -4, -3, -2, 1, 0, 2, 2, -3, 0, 0, -2,
    ];
    let other: [i32; 100] = [
        -2, 2, 2, -1, -1, 0, 0, 2, 1, -1, 0, -2, -1, 0, 0, -4, 3, 2, 1, 1, 1, -2, -1, 0, 0, -1, 0,
        -1, -1, 1, -2, -1, -4, 2, 1, 0, -1, -3, 1, 2, 2, 3, 0, 2, -3, 4, -2, 1, 1, -1, 0, -1, -1,
        -2, -1, 2, -1, -2, 2, 1, -1, 0, 0, -1, -1, -2, -2, 0, -2, -2, 1, -2, 1, -1, 1, 1, -1, 1, 0,
        3, 1, 1, 0, 1, -1, 0, -3, 1, 1, 0, -1, -1, 0, 1, 0, 0, -3, 1, -1, 0,
    ];
    let (mut a, mut b) = (one.to_vec(), other.to_vec());
    a.sort();
    b.sort();
    assert_eq!(a, b, "one data set in two orders");
    let d = |ks: &[i32]| ks.iter().map(|&k| f64::from(k) / 5.0).collect::<Vec<f64>>();
    let (up, down) = order_free_capital(&d(&one), 0.05, 0.1, 20261203);
    assert_close!(up.exp(), 12.714, 1e-3);
    assert_close!(down.exp(), 212.549, 1e-3);
    assert_eq!(order_free_capital(&d(&other), 0.05, 0.1, 20261203), (up, down));
    let verdict = |ks: &[i32]| {
        let (c, t) = arms_of_differences(ks, 5);
        paired_equivalent(&c, &t, 0.05, 0.1, 20261203)
    };
    assert!(!verdict(&one) && !verdict(&other));
}

/// A null of symmetric per-task differences on which the mid-p (ablate's) and the paired t-test
/// both exceed alpha and the exact sign-flip test does not: 14 tasks of one trial, each moving
/// +1 or -1 with equal chances (docs/statistics.md, "Power": the exact test keeps its size on
/// every such null, the mid-p on the grid's nulls of pass/fail trials). By hand, with b tasks
/// up: t = (2b - 14) sqrt(13) / sqrt(14^2 - (2b - 14)^2) is 2.511 at |2b - 14| = 8 and 1.710 at
/// 6, against t_13(0.975) = 2.160; the mid-p at b = 11 is (2 (91 + 14 + 1) + 364) / 2^14 =
/// 0.0352 and at b = 10 (2 (364 + 91 + 14 + 1) + 1001) / 2^14 = 0.118; the exact p at b = 12 is
/// 2 (91 + 14 + 1) / 2^14 = 0.0129 and at b = 11 2 (364 + 106) / 2^14 = 0.0574. So the t-test and
/// the mid-p reject at b <= 3 or b >= 11, with probability 2 (1 + 14 + 91 + 364) / 2^14 =
/// 940 / 16384 = 5.74%, the exact test at b <= 2 or b >= 12: 212 / 16384 = 1.29%.
#[test]
fn on_a_symmetric_null_the_mid_p_and_the_t_test_exceed_alpha_and_the_exact_test_does_not() {
    let mut size = [0.0; 4];
    for b in 0..=14usize {
        let control: Vec<Vec<f64>> = (0..14).map(|i| vec![if i < b { 0.0 } else { 1.0 }]).collect();
        let treatment: Vec<Vec<f64>> =
            (0..14).map(|i| vec![if i < b { 1.0 } else { 0.0 }]).collect();
        let d: Vec<f64> = (0..14).map(|i| if i < b { 1.0 } else { -1.0 }).collect();
        let chance = (0..b).fold(1.0, |c, k| c * (14 - k) as f64 / (k + 1) as f64) / 16384.0;
        let rejects = [
            paired_effect(&control, &treatment, 0.95).p_value <= 0.05,
            sign_flip_p(&d) <= 0.05,
            paired_rejects(&control, &treatment, 0.05),
            sign_flip_p_conservative(&d) <= 0.05,
        ];
        for (s, r) in size.iter_mut().zip(rejects) {
            *s += chance * r as u8 as f64;
        }
    }
    let [t, mid_p, ablate, exact] = size;
    assert_close!(t, 940.0 / 16384.0, 1e-12);
    assert_close!(mid_p, 940.0 / 16384.0, 1e-12);
    assert_close!(ablate, 940.0 / 16384.0, 1e-12);
    assert_close!(exact, 212.0 / 16384.0, 1e-12);
}

/// 10 tasks 1/5 -> 3/5 alone, and with 50 unchanged tasks at 2/5 in each arm beside them: the
/// same p-value, by hand the exact sign flip's smallest, 2 / 2^10 (every changed task moved up;
/// the mid-p, 1 / 2^10, is held to it), where the trial-noise floor over all 60 tasks gave 0.070.
/// The floor looks at the changed tasks: v = 0.2/5 + 0.3/5 = 0.1, times chi2_9(0.025)/9 = 0.30004,
/// t = 0.4 / sqrt(0.030004 / 10) = 7.30 on 9 df, p 4.6e-5, below the sign flip's.
#[test]
fn unchanged_tasks_leave_the_p_value_alone() {
    let task = |c: usize, t: usize| -> (Vec<f64>, Vec<f64>) {
        let trials = |n: usize| (0..5).map(|i| f64::from(u8::from(i < n))).collect();
        (trials(c), trials(t))
    };
    let (mut c, mut t): (Vec<Vec<f64>>, Vec<Vec<f64>>) = (0..10).map(|_| task(1, 3)).unzip();
    let alone = paired_inference(&c, &t, 0.95);
    for _ in 0..50 {
        let (a, b) = task(2, 2);
        c.push(a);
        t.push(b);
    }
    let with = paired_inference(&c, &t, 0.95);
    assert_close!(alone.p_value, 2.0 / 1024.0, 1e-15);
    assert_close!(with.p_value, 2.0 / 1024.0, 1e-15);
    assert!(with.lo > 0.0 && alone.lo > 0.0);
}

/// Random comparisons, pass/fail trials and continuous scores (off any lattice: Monte Carlo
/// beyond 16 tasks), 1 to 5 trials a task, 2 to 30
/// tasks, with up to 40 unchanged tasks added (each arm's trials the same multiset, so the
/// task's difference is 0, with trial noise): the p-value is the same to 1e-15 and the verdict
/// (interval above, below or around 0) is the same.
#[test]
fn unchanged_tasks_never_move_a_verdict() {
    let mut rng = SplitMix64(0x0C4A_46ED_0000_0001);
    for case in 0..200 {
        let fractional = case % 4 == 3;
        let score = |rng: &mut SplitMix64, p: f64| {
            if fractional { (rng.uniform() + p) / 2.0 } else { rng.bernoulli(p) }
        };
        let (tasks, trials) =
            (2 + (rng.next_u64() % 29) as usize, 1 + (rng.next_u64() % 5) as usize);
        let lift = rng.uniform() * 0.4;
        let (mut c, mut t) = (Vec::new(), Vec::new());
        for _ in 0..tasks {
            let p = rng.uniform();
            c.push((0..trials).map(|_| score(&mut rng, p)).collect::<Vec<f64>>());
            t.push((0..trials).map(|_| score(&mut rng, (p + lift).min(1.0))).collect::<Vec<f64>>());
        }
        let before = paired_inference(&c, &t, 0.95);
        for test in [SignFlipTest::MidP, SignFlipTest::Exact] {
            let full = paired_inference_by(&c, &t, 0.95, test).p_value;
            assert_eq!(paired_p(&c, &t, test), full, "case {case}: paired_p is the inference's p");
        }
        for _ in 0..rng.next_u64() % 41 {
            let same: Vec<f64> = (0..trials).map(|_| score(&mut rng, 0.5)).collect();
            let mut shuffled = same.clone();
            shuffled.reverse();
            let at = (rng.next_u64() % (c.len() as u64 + 1)) as usize;
            c.insert(at, same);
            t.insert(at, shuffled);
        }
        let after = paired_inference(&c, &t, 0.95);
        let side = |i: &Inference| (i.lo > 0.0, i.hi < 0.0);
        assert!(
            (before.p_value - after.p_value).abs() <= 1e-15,
            "case {case}: {before:?} {after:?}"
        );
        assert_eq!(side(&before), side(&after), "case {case}: {before:?} {after:?}");
    }
}

/// The mid-p's guarantee is for arms identical on every task, not for every null of symmetric
/// differences. By hand, 16 changed one-trial tasks, b up: the exact p at b = 12 is
/// 2 (1820 + 560 + 120 + 16 + 1) / 2^16 = 0.07681, the mid-p 2 (697 + 910) / 2^16 = 0.04904; so
/// given 16 changed tasks moving up or down with equal chances the mid-p rejects at b <= 4 or
/// b >= 12, in 2 x 2517 / 65536 = 7.68% of runs at alpha 0.05.
#[test]
fn the_mid_p_exceeds_alpha_given_sixteen_changed_tasks() {
    let d = |b: usize| (0..16).map(|i| if i < b { 1.0 } else { -1.0 }).collect::<Vec<f64>>();
    assert_close!(sign_flip_p(&d(12)), 3214.0 / 65536.0, 1e-12);
    assert_close!(sign_flip_p_conservative(&d(12)), 5034.0 / 65536.0, 1e-12);
    let choose = |n: u64, k: u64| (1..=k).fold(1.0, |c, i| c * (n - k + i) as f64 / i as f64);
    let size: f64 = (0..=16u64)
        .filter(|&b| sign_flip_p(&d(b as usize)) <= 0.05)
        .map(|b| choose(16, b) / 65536.0)
        .sum();
    assert_close!(size, 5034.0 / 65536.0, 1e-12);
}

/// Holm's step-down by hand (the adjusted p-values are statsmodels' `multipletests(p,
/// method="holm")`, whose formula is the same running maximum): p = (0.01, 0.02, 0.04) at 0.05
/// is rejected at every step (0.01 <= 0.05/3, 0.02 <= 0.05/2, 0.04 <= 0.05), where Bonferroni
/// (0.05/3 each) rejects only the first; adjusted (0.03, 0.04, 0.04). p = (0.04, 0.01, 0.03,
/// 0.2): 0.01 <= 0.0125 rejected, 0.03 > 0.05/3 stops it, and every later one keeps that level;
/// adjusted (0.09, 0.04, 0.09, 0.2).
#[test]
fn holm_steps_match_a_hand_computation() {
    let s = holm(&[0.01, 0.02, 0.04], 0.05);
    let levels: Vec<f64> = s.iter().map(|x| x.level).collect();
    let adjusted: Vec<f64> = s.iter().map(|x| x.p_adjusted).collect();
    for (got, want) in levels.iter().zip([0.05 / 3.0, 0.025, 0.05]) {
        assert_close!(*got, want, 1e-15);
    }
    for (got, want) in adjusted.iter().zip([0.03, 0.04, 0.04]) {
        assert_close!(*got, want, 1e-15);
    }
    let s = holm(&[0.04, 0.01, 0.03, 0.2], 0.05);
    for (got, want) in s.iter().zip([0.05 / 3.0, 0.0125, 0.05 / 3.0, 0.05 / 3.0]) {
        assert_close!(got.level, want, 1e-15);
    }
    for (got, want) in s.iter().zip([0.09, 0.04, 0.09, 0.2]) {
        assert_close!(got.p_adjusted, want, 1e-15);
    }
    // A verdict reads p <= level: exactly Holm's rejections.
    let rejected: Vec<bool> =
        [0.04, 0.01, 0.03, 0.2].iter().zip(&s).map(|(p, x)| *p <= x.level).collect();
    assert_eq!(rejected, [false, true, false, false]);
    let s = holm(&[f64::NAN, 0.01], 0.05);
    assert!(s[0].p_adjusted.is_nan());
    assert_close!(s[1].p_adjusted, 0.02, 1e-15);
}
