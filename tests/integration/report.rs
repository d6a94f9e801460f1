//! `ablate report` on generated run folders: files, key numbers, the guard.

use crate::common;

use ablate_synth as synth;
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn generate(dir: &Path, trials: u32, rate: impl Fn(&str, &str) -> f64) -> PathBuf {
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/core.toml");
    let mut exp = ablate::experiment::config::load(&cfg).unwrap();
    exp.trials = trials;
    // Every task of the suite (14): enough for a verdict after the family's adjustment.
    exp.tasks.clear();
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let plan = ablate::plan::build(&exp, &suite).unwrap();
    let run = dir.join("run");
    synth::write_run(&run, &exp, &suite, &plan, 11, rate).unwrap();
    run
}

fn rate(_task: &str, arm: &str) -> f64 {
    match arm {
        "full" => 0.9,
        "full-minus-feedback" => 0.1,
        "bare" => 0.2,
        _ => 0.85,
    }
}

fn ablate(args: &[&str]) -> (i32, String, String) {
    common::code_and_output(
        Command::new(env!("CARGO_BIN_EXE_ablate")).args(args).env("NO_COLOR", "1"),
        Duration::from_secs(60),
    )
}

fn csv_rows(path: &Path) -> Vec<HashMap<String, String>> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let headers = r.headers().unwrap().clone();
    r.records()
        .map(|rec| {
            headers
                .iter()
                .zip(rec.unwrap().iter())
                .map(|(h, v)| (h.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// Per task, the passed and total counts of `arm`'s counted rows of trials.csv (tasks in name order).
fn task_counts(
    trials: &[HashMap<String, String>],
    arm: &str,
    keep: impl Fn(&HashMap<String, String>) -> bool,
) -> BTreeMap<String, (u64, u64)> {
    let mut per_task: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for t in trials.iter().filter(|t| t["arm"] == arm && t["counted"] == "true" && keep(t)) {
        let e = per_task.entry(t["task"].clone()).or_default();
        e.0 += (t["status"] == "passed") as u64;
        e.1 += 1;
    }
    per_task
}

fn task_means(counts: &BTreeMap<String, (u64, u64)>) -> Vec<f64> {
    counts.values().map(|&(p, n)| p as f64 / n as f64).collect()
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// The two-sided 95% quantiles: z = qnorm(0.975) and t = qt(0.975, 13) for 14 tasks
/// (mpmath: sqrt(2) erfinv(0.95), and the root of betainc(13/2, 1/2, 0, 13/(13 + t^2))/2 = 0.025;
/// R gives 1.959964 and 2.160369).
const Z975: f64 = 1.959963984540054;
const T975_13: f64 = 2.1603686564627925;

/// The clustered Wilson interval of a pass rate over 14 tasks at 95% (Korn & Graubard 1998,
/// effective sample size with the df adjustment; Wilson 1927 at that size), from per-task means:
/// p = mean(m_t), v = sd(m_t)^2 / T, n_eff = min(p(1-p)/v, n_trials), or T when v = 0 or p is 0 or 1;
/// n* = n_eff (z/t)^2; Wilson at n*, lo = 0 when p = 0, hi = 1 when p = 1.
fn clustered_wilson_95(means: &[f64], n_trials: u64) -> (f64, f64) {
    clustered_wilson(means, n_trials, Z975, T975_13)
}

/// [`clustered_wilson_95`] at the level whose two-sided quantiles over 14 tasks are `z` and `t`.
fn clustered_wilson(means: &[f64], n_trials: u64, z: f64, t: f64) -> (f64, f64) {
    let (z975, t975_13) = (z, t);
    let tasks = means.len() as f64;
    assert_eq!(tasks, 14.0, "the quantiles are for 14 tasks");
    let p = mean(means);
    let v = means.iter().map(|m| (m - p).powi(2)).sum::<f64>() / (tasks - 1.0) / tasks;
    let n_eff = if v > 0.0 && p > 0.0 && p < 1.0 {
        (p * (1.0 - p) / v).min(n_trials as f64)
    } else {
        tasks
    };
    let n = n_eff * (z975 / t975_13).powi(2);
    let z2n = z975 * z975 / n;
    let centre = (p + z2n / 2.0) / (1.0 + z2n);
    let half = z975 / (1.0 + z2n) * (p * (1.0 - p) / n + z2n / (4.0 * n)).sqrt();
    (
        if p == 0.0 { 0.0 } else { (centre - half).max(0.0) },
        if p == 1.0 { 1.0 } else { (centre + half).min(1.0) },
    )
}

/// The exact two-sided sign-flip p-value of the per-task differences in Hartigan's (1969) form:
/// over the 2^T - 1 non-empty subsets' means M, p = min(1, 2 min(1 + #{M <= 0}, 1 + #{M >= 0}) / 2^T).
/// The mid-p sign-flip test of docs/statistics.md, from its definition: over every subset `B` of
/// flipped tasks (the empty one a tie), each tail counts the subsets whose mean lies beyond 0 and
/// half of those whose sum is 0; never below `2^(1 - n)` over the `n` tasks that changed.
fn sign_flip_p(d: &[f64]) -> f64 {
    let total = 1u32 << d.len();
    let (mut below, mut above, mut tie) = (0u32, 0u32, 1u32);
    for mask in 1..total {
        let picked: Vec<f64> =
            d.iter().enumerate().filter(|(i, _)| mask >> i & 1 == 1).map(|(_, x)| *x).collect();
        let m = mean(&picked);
        let m = if m.abs() < 1e-12 { 0.0 } else { m };
        below += (m < 0.0) as u32;
        above += (m > 0.0) as u32;
        tie += (m == 0.0) as u32;
    }
    let changed = d.iter().filter(|x| x.abs() > 1e-12).count() as i32;
    let mid = (f64::from(2 * below.min(above) + tie) / f64::from(total)).min(1.0);
    mid.max(0.5f64.powi(changed - 1).min(1.0))
}

fn choose(n: u64, k: u64) -> f64 {
    if k > n { 0.0 } else { (0..k).map(|i| (n - i) as f64 / (i + 1) as f64).product() }
}

#[test]
fn report_writes_every_file_with_the_right_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate(dir.path(), 4, rate);
    let (code, out, err) = ablate(&["report", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for f in ["trials.csv", "arms.csv", "effects.csv", "report.json", "report.md", "report.html"] {
        assert!(run.join(f).is_file(), "{f} written");
    }
    let trials = csv_rows(&run.join("trials.csv"));
    assert_eq!(trials.len(), 14 * 7 * 4, "14 tasks x 7 arms of configs/core.toml");
    let components = ["component.feedback", "component.loop_guard", "component.tools"];
    for c in components {
        assert!(trials[0].contains_key(c), "{c} in trials.csv: {:?}", trials[0].keys());
    }
    assert!(
        trials.iter().all(|t| t["counted"] == "true"),
        "one attempt per trial: every row counts"
    );
    let counts = |arm: &str| task_counts(&trials, arm, |_| true);
    let md = std::fs::read_to_string(run.join("report.md")).unwrap();
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();

    // The pass rate of an arm is the mean of its per-task means, and its interval the clustered
    // Wilson one, both recomputed here from trials.csv.
    let arms = csv_rows(&run.join("arms.csv"));
    assert_eq!(arms.len(), 7);
    for a in &arms {
        let c = counts(&a["arm"]);
        assert_eq!(c.len(), 14, "{}", a["arm"]);
        let means = task_means(&c);
        let expect = mean(&means);
        let (lo, hi) = clustered_wilson_95(&means, c.values().map(|&(_, n)| n).sum());
        let got: f64 = a["pass_rate"].parse().unwrap();
        assert!((got - expect).abs() < 1e-9, "{}: {got} vs {expect}", a["arm"]);
        let (got_lo, got_hi): (f64, f64) =
            (a["pass_rate_lo"].parse().unwrap(), a["pass_rate_hi"].parse().unwrap());
        assert!(
            (got_lo - lo).abs() < 1e-9 && (got_hi - hi).abs() < 1e-9,
            "{}: [{got_lo}, {got_hi}] vs [{lo}, {hi}]",
            a["arm"]
        );
        assert_eq!(a["trials"], "56");
        // Shown with one decimal in report.md's table and in the terminal.
        let shown = format!("{:.1}% [{:.1}%, {:.1}%]", expect * 100.0, lo * 100.0, hi * 100.0);
        assert!(
            md.contains(&format!("| {} | {} | 56 | 14 | {shown} |", a["arm"], a["model"])),
            "{shown} in report.md:\n{md}"
        );
        let block = format!(
            "Arm {} ({}, 56 trials over 14 tasks)\n  Pass rate:       {}  95% CI, tasks like these",
            a["arm"],
            a["model"],
            shown.replacen(" [", "  [", 1)
        );
        assert!(out.contains(&block), "{block:?} in:\n{out}");
    }

    let effects = csv_rows(&run.join("effects.csv"));
    assert_eq!(effects.len(), 6, "5 ablations + 1 combined");
    let fb = effects.iter().find(|e| e["components"] == "feedback").unwrap();
    assert_eq!(fb["kind"], "ablation");
    assert_eq!((fb["treatment"].as_str(), fb["control"].as_str()), ("full", "full-minus-feedback"));
    assert_eq!(fb["verdict"], "helps");
    // Holm over the 5 ablations, recomputed here from their p-values: in ascending order the
    // j-th (from 0) is tested at 0.05 / (5 - j) while every earlier one was rejected, its adjusted
    // p the running maximum of min(1, (5 - j) p).
    let mut ps: Vec<(f64, f64, f64, String)> = effects
        .iter()
        .filter(|e| e["kind"] == "ablation")
        .map(|e| {
            let f = |k: &str| e[k].parse::<f64>().unwrap();
            (f("p_value"), f("p_adjusted"), f("interval_level"), e["components"].clone())
        })
        .collect();
    ps.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut running, mut open) = (0.0f64, true);
    for (j, (p, padj, level, name)) in ps.iter().enumerate() {
        running = running.max((p * (5 - j) as f64).min(1.0));
        assert!(
            (padj - running).abs() < 1e-12,
            "{name}: Holm-adjusted p {padj}, by hand {running}"
        );
        open &= *p <= 0.05 / (5 - j) as f64;
        if open {
            assert!((level - (1.0 - 0.05 / (5 - j) as f64)).abs() < 1e-12, "{name}: level {level}");
        }
    }
    assert_eq!(fb["adjustment"], "holm");
    assert_eq!(fb["method"], "sign_flip_mid_p+trial_noise");
    assert_eq!(fb["estimand"], "tasks like these");
    // Every effect's rates and delta, recomputed from trials.csv: the mean over tasks of each arm's
    // task means, and of the per-task differences; its p-value is at least the exact sign-flip one.
    for e in &effects {
        let (c, t) = (task_means(&counts(&e["control"])), task_means(&counts(&e["treatment"])));
        let d: Vec<f64> = t.iter().zip(&c).map(|(t, c)| t - c).collect();
        let want = [("control_rate", mean(&c)), ("treatment_rate", mean(&t)), ("delta", mean(&d))];
        for (col, want) in want {
            let got: f64 = e[col].parse().unwrap();
            assert!((got - want).abs() < 1e-9, "{} {col}: {got} vs {want}", e["name"]);
        }
        let (p, sf) = (e["p_value"].parse::<f64>().unwrap(), sign_flip_p(&d));
        assert!(p >= sf - 1e-15, "{}: p {p} below the sign-flip p {sf}", e["name"]);
        if e["components"] == "feedback" {
            // full passes more than full-minus-feedback on every task: no subset mean is <= 0, and
            // the mid-p 1/2^14 is held to the exact test's smallest, 2/2^14.
            assert!(d.iter().all(|&x| x > 0.0), "{d:?}");
            assert_eq!(sf, 2.0 / 16384.0);
        }
        // The delta as every view shows it, e.g. "+82.1 pp".
        let shown = format!("{:+.1} pp", mean(&d) * 100.0);
        let line = out
            .lines()
            .find(|l| l.contains(&format!(" {} vs {} [", e["treatment"], e["control"])))
            .unwrap_or_else(|| panic!("{} in:\n{out}", e["name"]));
        assert!(
            line.contains(&shown) && line.ends_with(&e["verdict"]),
            "{shown} {}: {line}",
            e["verdict"]
        );
        let row = md
            .lines()
            .find(|l| l.contains(&format!(" | {} vs {} | ", e["treatment"], e["control"])))
            .unwrap_or_else(|| panic!("{} in:\n{md}", e["name"]));
        assert!(row.contains(&format!("| {shown} |")), "{shown}: {row}");
        assert!(html.contains(&shown), "{shown} in report.html");
    }
    // The verdict is read from the interval, which agrees with the adjusted p-value.
    for e in &effects {
        let (lo, hi): (f64, f64) = (e["lo"].parse().unwrap(), e["hi"].parse().unwrap());
        let level = 1.0 - e["interval_level"].parse::<f64>().unwrap();
        let p: f64 = e["p_value"].parse().unwrap();
        assert_eq!(e["verdict"].starts_with("helps"), lo > 0.0, "{e:?}");
        assert_eq!(e["verdict"].starts_with("hurts"), hi < 0.0, "{e:?}");
        assert_eq!(lo > 0.0 || hi < 0.0, p <= level + 1e-9, "{e:?}");
    }
    let combined = effects.iter().find(|e| e["kind"] == "combined").unwrap();
    assert_eq!(combined["p_adjusted"], "", "combined comparisons are not in the family");

    // pass@k and pass^k by Chen et al. 2021's unbiased estimator with n = 4 trials and c passes per
    // task: pass@k = 1 - C(4-c, k)/C(4, k), pass^k = C(c, k)/C(4, k), averaged over the tasks.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["ablations"].as_array().unwrap().len(), 5);
    for a in json["arms"].as_array().unwrap() {
        let c = counts(a["arm"].as_str().unwrap());
        let ks: Vec<u64> =
            a["pass_at_k"].as_array().unwrap().iter().map(|t| t[0].as_u64().unwrap()).collect();
        assert_eq!(ks, vec![1, 2, 3], "pass@k for k in 1, 2, 3 with 4 trials per task");
        for row in a["pass_at_k"].as_array().unwrap() {
            let k = row[0].as_u64().unwrap();
            let at: Vec<f64> =
                c.values().map(|&(p, n)| 1.0 - choose(n - p, k) / choose(n, k)).collect();
            let hat: Vec<f64> = c.values().map(|&(p, n)| choose(p, k) / choose(n, k)).collect();
            let (got_at, got_hat) = (row[1].as_f64().unwrap(), row[2].as_f64().unwrap());
            assert!(
                (got_at - mean(&at)).abs() < 1e-12 && (got_hat - mean(&hat)).abs() < 1e-12,
                "{} k={k}: {row}",
                a["arm"]
            );
        }
    }

    // One marker of the forest plot per effect row, and one of the frontier per arm; no script
    // in the page.
    assert_eq!(html.matches("<svg").count(), 2, "the forest plot and the frontier");
    assert!(html.contains("forest plot") && !html.contains("<script"));
    assert!(html.contains("aria-label=\"pass rate against "), "the frontier");
    assert_eq!(
        html.matches("<circle").count(),
        effects.len() + arms.len(),
        "one marker per effect and per arm"
    );
    assert!(md.contains("## Ablations") && md.contains("## Combined comparisons"));

    assert!(out.contains("Ablations (treatment - control"), "{out}");
    assert!(out.contains("not attributable"), "{out}");
    assert!(!out.contains("\x1b["), "no colour when NO_COLOR is set");
}

#[test]
fn analysis_refuses_an_ablation_whose_arms_differ_in_two_components() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate(dir.path(), 1, rate);
    let mpath = run.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&mpath).unwrap()).unwrap();
    // Edit the recorded arm so that the feedback ablation's control differs in tools too.
    for arm in m["experiment"]["arms"].as_array_mut().unwrap() {
        if arm["name"] == "full-minus-feedback" {
            arm["components"]["tools"] = serde_json::json!(false);
        }
    }
    std::fs::write(&mpath, serde_json::to_string(&m).unwrap()).unwrap();
    let (code, out, _) = ablate(&["report", run.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(
        out.contains("refused: not shown as an ablation") && out.contains("differ in 2 components"),
        "{out}"
    );
    let effects = csv_rows(&run.join("effects.csv"));
    let rows: Vec<(&str, &str)> =
        effects.iter().map(|e| (e["kind"].as_str(), e["components"].as_str())).collect();
    assert_eq!(
        rows,
        [
            ("ablation", "loop_guard"),
            ("ablation", "tools"),
            ("ablation", "acceptance"),
            ("ablation", "progress_handoff"),
            ("combined", "feedback;loop_guard;tools;acceptance;progress_handoff")
        ],
        "the feedback ablation is not reported; the others and the combined comparison are"
    );
}

#[test]
fn one_trial_per_task_and_a_torn_line_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate(dir.path(), 1, rate);
    let mut f = std::fs::OpenOptions::new().append(true).open(run.join("trials.jsonl")).unwrap();
    std::io::Write::write_all(&mut f, b"{\"trial_id\":\"ab").unwrap();
    let (code, out, _) = ablate(&["report", run.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("unreadable lines in trials.jsonl: [99]"), "{out}");
    let effects = csv_rows(&run.join("effects.csv"));
    assert_eq!(effects.len(), 6, "5 ablations + 1 combined");
    assert!(effects.iter().all(|e| e["n_tasks"] == "14"));
    assert_eq!(csv_rows(&run.join("trials.csv")).len(), 98);
}

/// Student's t CDF for an integer `df`, in closed form (Abramowitz & Stegun 26.7.3 for odd and
/// 26.7.4 for even degrees of freedom), with theta = atan(t / sqrt(df)).
fn t_cdf(t: f64, df: u32) -> f64 {
    let theta = (t / (df as f64).sqrt()).atan();
    let (s, c) = (theta.sin(), theta.cos());
    let a = if df % 2 == 1 {
        // 2/pi (theta + sin(theta) (cos + 2/3 cos^3 + ... + (2 4 .. df-3)/(1 3 .. df-2) cos^(df-2)))
        let (mut term, mut sum) = (c, if df > 1 { c } else { 0.0 });
        for j in (3..df.saturating_sub(1)).step_by(2) {
            term *= (j - 1) as f64 / j as f64 * c * c;
            sum += term;
        }
        2.0 / std::f64::consts::PI * (theta + s * sum)
    } else {
        // sin(theta) (1 + 1/2 cos^2 + 1 3/(2 4) cos^4 + ... + (1 3 .. df-3)/(2 4 .. df-2) cos^(df-2))
        let (mut term, mut sum) = (1.0, 1.0);
        for j in (2..df - 1).step_by(2) {
            term *= (j - 1) as f64 / j as f64 * c * c;
            sum += term;
        }
        s * sum
    };
    (1.0 + a) / 2.0
}

/// The t quantile by bisection of `t_cdf`: qt(0.975, 13) = 2.160369, qt(0.995, 19) = 2.860935 (R).
fn t_quantile(p: f64, df: u32) -> f64 {
    let (mut lo, mut hi) = (-100.0, 100.0);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if t_cdf(mid, df) < p { lo = mid } else { hi = mid }
    }
    (lo + hi) / 2.0
}

/// Tasks a paired t-test needs for 80% power against `mde` at the 5 ablations' Bonferroni level
/// 0.01 (Julious 2004, eq. 7): the smallest n >= 8 (the fewest tasks with which the exact sign-flip
/// test can reject at 0.01: 2/2^8 <= 0.01 < 2/2^7) with n >= (t_{0.995, n-1} + t_{0.8, n-1})^2 var_d / mde^2.
fn tasks_needed(var_d: f64, mde: f64) -> u64 {
    (8..)
        .find(|&n| {
            let q = t_quantile(0.995, n as u32 - 1) + t_quantile(0.8, n as u32 - 1);
            n as f64 >= q * q * var_d / (mde * mde)
        })
        .unwrap()
}

#[test]
fn t_quantiles_match_published_values() {
    // R: qt(0.975, c(1, 2, 3, 13)) = 12.706205, 4.302653, 3.182446, 2.160369; qt(0.8, 19) = 0.860951.
    for (p, df, want) in [
        (0.975, 1, 12.706205),
        (0.975, 2, 4.302653),
        (0.975, 3, 3.182446),
        (0.975, 13, 2.160369),
        (0.8, 19, 0.860951),
    ] {
        assert!((t_quantile(p, df) - want).abs() < 1e-6, "qt({p}, {df}) = {}", t_quantile(p, df));
    }
    assert!((t_quantile(0.975, 13) - T975_13).abs() < 1e-12);
}

#[test]
fn plan_from_a_pilot_sizes_each_ablation() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate(dir.path(), 3, |task, arm| {
        if arm == "full" {
            0.7
        } else if task.len() % 2 == 0 {
            0.2
        } else {
            0.6
        }
    });
    // var(d) of each ablation from the pilot's records: the sample variance over tasks of
    // mean(full) - mean(full-minus-X), 3 trials a task and arm.
    let mut passes: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for line in std::fs::read_to_string(run.join("trials.jsonl")).unwrap().lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let key = (r["arm"].as_str().unwrap().to_string(), r["task"].as_str().unwrap().to_string());
        passes.entry(key).or_default().push((r["status"] == "passed") as u8 as f64);
    }
    let arm_means = |arm: &str| -> Vec<f64> {
        passes.iter().filter(|((a, _), _)| a == arm).map(|(_, v)| mean(v)).collect()
    };
    let components = ["feedback", "loop_guard", "tools", "acceptance", "progress_handoff"];
    let var_d: Vec<f64> = components
        .iter()
        .map(|c| {
            let d: Vec<f64> = arm_means("full")
                .iter()
                .zip(arm_means(&format!("full-minus-{}", c.replace('_', "-"))))
                .map(|(t, c)| t - c)
                .collect();
            assert_eq!(d.len(), 14);
            let m = mean(&d);
            d.iter().map(|x| (x - m).powi(2)).sum::<f64>() / 13.0
        })
        .collect();
    for (mde, arg) in [(0.10, "0.10"), (0.30, "0.30")] {
        let (code, out, err) = ablate(&["plan", "--pilot", run.to_str().unwrap(), "--mde", arg]);
        assert_eq!(code, 0, "{err}");
        assert!(
            out.contains(&format!("80% power to detect a paired effect of {:.1} pp", mde * 100.0)),
            "{out}"
        );
        assert_eq!(out.matches("var(d)").count(), 5, "one line per ablation: {out}");
        let lines: Vec<&str> = out.lines().collect();
        for (c, v) in components.iter().zip(&var_d) {
            let at = lines
                .iter()
                .position(|l| l.starts_with(&format!("  {c}: full vs ")))
                .unwrap_or_else(|| panic!("{c} in:\n{out}"));
            assert!(lines[at].contains(&format!("var(d) {v:.4} ")), "{v}: {}", lines[at]);
            let n = tasks_needed(*v, mde);
            assert!(
                lines[at + 1].starts_with(&format!("    -> {n} tasks at 3.0 trials per task;")),
                "{c} at mde {mde}: {n} tasks, not {}",
                lines[at + 1]
            );
        }
    }
    let (code, out, err) = ablate(&["plan", "--pilot", run.to_str().unwrap(), "--mde", "0"]);
    assert_eq!((code, out.as_str()), (2, ""));
    // Refused as a flag (clap names it), not as a key of the run's files.
    assert_eq!(
        err.lines().next().unwrap(),
        "error: invalid value '0' for '--mde <MDE>': 0 is not in (0, 1]; give a fraction such as 0.10",
        "{err}"
    );
}

/// A synthetic run of any config, `rate(task, arm)` per trial.
fn generate_from(dir: &Path, config: &str, rate: impl Fn(&str, &str) -> f64) -> PathBuf {
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join(config);
    let exp = ablate::experiment::config::load(&cfg).unwrap();
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let plan = ablate::plan::build(&exp, &suite).unwrap();
    let run = dir.join("run");
    synth::write_run(&run, &exp, &suite, &plan, 5, rate).unwrap();
    run
}

#[test]
fn the_one_task_seed_demo_gets_an_answer_for_that_task() {
    let dir = tempfile::tempdir().unwrap();
    // configs/seed-demo.toml: one task, 5 trials per arm and model; bare never passes, the harness always.
    let run =
        generate_from(
            dir.path(),
            "configs/seed-demo.toml",
            |_, arm| if arm == "bare" { 0.0 } else { 1.0 },
        );
    let (code, out, err) = ablate(&["report", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let effects = csv_rows(&run.join("effects.csv"));
    assert_eq!(effects.len(), 2, "one combined comparison per model");
    for e in &effects {
        assert_eq!(e["scope"], "one task: parse-duration");
        assert_eq!(e["method"], "newcombe_one_task");
        assert_eq!(e["estimand"], "this task");
        // Newcombe 1998 method 10, 5/5 - 0/5: lo = 1 - sqrt(2) * 3.8415/8.8415 = 0.38555 (hand).
        let lo: f64 = e["lo"].parse().unwrap();
        assert!((lo - 0.385548).abs() < 1e-5, "{lo}");
        assert_eq!(e["verdict"], "helps (this task only)");
    }
    // No output claims "tasks like these" for a one-task run.
    for f in ["report.md", "report.html"] {
        let text = std::fs::read_to_string(run.join(f)).unwrap();
        assert!(!text.contains("tasks like these") && text.contains("this task"), "{f}: {text}");
    }
    assert!(!out.contains("tasks like these") && out.contains("95% CI, this task"), "{out}");
    assert!(out.contains("says nothing about other tasks"), "{out}");
}

/// Rewrite every record of the run's trials.jsonl with `edit`, then report the run: its
/// terminal output and effects.csv's rows.
fn restatus_and_report(
    run: &Path,
    mut edit: impl FnMut(&mut serde_json::Value),
) -> (String, Vec<HashMap<String, String>>) {
    let path = run.join("trials.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            edit(&mut v);
            serde_json::to_string(&v).unwrap()
        })
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let (code, out, err) = ablate(&["report", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    (out, csv_rows(&run.join("effects.csv")))
}

/// Infrastructure cannot decide in the fixed design either: full and full-minus-feedback both
/// pass 90% of their trials; every other record of full-minus-feedback turned into a provider
/// error, counted as a failure, makes every task move up (sign flip p = 2 / 2^14 = 1.2e-4,
/// "helps" at the 99% level of 5 ablations), while without the errors nothing moves. The
/// verdict depends on the infrastructure: no verdict, flagged.
#[test]
fn a_verdict_the_infrastructure_would_decide_is_not_given() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate(dir.path(), 4, |_, _| 0.9);
    let mut n = 0u32;
    let (out, effects) = restatus_and_report(&run, |v| {
        if v["arm"] == "full-minus-feedback" {
            n += 1;
            v["status"] = json!(if n.is_multiple_of(2) { "provider_error" } else { "passed" });
        } else if v["status"] == "provider_error" || v["arm"] == "full" {
            v["status"] = json!("passed");
        }
    });
    let fb = effects.iter().find(|e| e["components"] == "feedback").unwrap();
    assert_eq!(
        fb["verdict"],
        "no verdict: the arms met different infrastructure (infrastructure errors: 28 in the control, 0 in the treatment) and the verdict depends on them",
        "{out}"
    );
    let p: f64 = fb["p_value"].parse().unwrap();
    assert!(p <= 0.01, "counted as failures the errors would decide: p {p}");
    assert!(out.contains("the verdict changes"), "{out}");
}

#[test]
fn infrastructure_errors_in_one_arm_are_flagged_with_the_effect_without_them() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate(dir.path(), 4, |_, arm| {
        if arm == "full" || arm == "full-minus-feedback" { 0.5 } else { 0.6 }
    });
    // Turn every third record of full-minus-feedback into a provider error.
    let mut n = 0;
    let (out, effects) = restatus_and_report(&run, |v| {
        // The generator's own occasional provider errors become plain failures.
        if v["status"] == "provider_error" {
            v["status"] = json!("failed");
        }
        if v["arm"] == "full-minus-feedback" {
            n += 1;
            if n % 3 == 0 {
                v["status"] = json!("provider_error");
            }
        }
    });
    let fb = effects.iter().find(|e| e["components"] == "feedback").unwrap();
    assert_eq!(
        (fb["infra_errors_control"].as_str(), fb["infra_differs"].as_str()),
        ("18", "true"),
        "56 trials, every third"
    );
    // Recomputed from trials.csv without the infrastructure-error statuses (TrialStatus::is_infrastructure_error).
    let trials = csv_rows(&run.join("trials.csv"));
    let kept = |t: &HashMap<String, String>| {
        !["provider_error", "harness_error", "grader_error", "interrupted"]
            .contains(&t["status"].as_str())
    };
    let (c, t) = (
        task_means(&task_counts(&trials, "full-minus-feedback", kept)),
        task_means(&task_counts(&trials, "full", kept)),
    );
    assert_eq!((c.len(), t.len()), (14, 14), "every task keeps trials");
    let excl = mean(&t.iter().zip(&c).map(|(t, c)| t - c).collect::<Vec<_>>());
    let got: f64 = fb["delta_excl_infra"].parse().unwrap();
    assert!((got - excl).abs() < 1e-9, "{got} vs {excl}");
    assert_ne!(fb["delta_excl_infra"], fb["delta"], "{fb:?}");
    assert!(
        out.contains("infrastructure errors differ (0 in full, 18 in full-minus-feedback)"),
        "{out}"
    );
    // The verdict is the same without them (the note says so by not saying it changes): it stands.
    assert_eq!(fb["verdict"], "no detectable effect", "{fb:?}");
    let other = effects.iter().find(|e| e["components"] == "tools").unwrap();
    assert_eq!(other["infra_differs"], "false");
    // report.md: the ablations' table stays one table (every line from its header to its
    // last row a table line), the note on feedback after it.
    let md = std::fs::read_to_string(run.join("report.md")).unwrap();
    let section =
        &md[md.find("## Ablations").unwrap()..md.find("## Combined comparisons").unwrap()];
    let table: Vec<&str> = section
        .lines()
        .skip_while(|l| !l.starts_with("| component |"))
        .take_while(|l| l.starts_with('|'))
        .collect();
    assert_eq!(table.len(), 2 + 5, "header, rule and the 5 ablations in one table:\n{section}");
    assert!(
        section.contains(&format!(
            "\n> **Infrastructure errors differ** in {} (0 vs 18): without them",
            fb["name"]
        )),
        "{section}"
    );
}

/// The columns of a CSV, in file order.
fn csv_header(path: &Path) -> Vec<String> {
    csv::Reader::from_path(path).unwrap().headers().unwrap().iter().map(String::from).collect()
}

#[test]
fn exports_are_typed_identified_and_mark_the_counted_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate(dir.path(), 2, rate);
    // An interrupted-then-rerun trial: its first record becomes attempt 1 (failed) and a
    // second record, attempt 2 (passed), follows: only attempt 2 counts.
    let path = run.join("trials.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let mut again = first.clone();
    again["attempt"] = serde_json::json!(2);
    again["status"] = serde_json::json!("passed");
    let mut once = first.clone();
    once["status"] = serde_json::json!("failed");
    let rest: Vec<&str> = text.lines().skip(1).collect();
    std::fs::write(
        &path,
        format!(
            "{}\n{}\n{}\n",
            serde_json::to_string(&once).unwrap(),
            rest.join("\n"),
            serde_json::to_string(&again).unwrap()
        ),
    )
    .unwrap();
    let (code, _, err) = ablate(&["report", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");

    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("manifest.json")).unwrap()).unwrap();
    let ids = [
        manifest["run_id"].as_str().unwrap(),
        manifest["experiment"]["name"].as_str().unwrap(),
        manifest["config_digest"].as_str().unwrap(),
        manifest["suite"]["digest"].as_str().unwrap(),
    ];
    // Column types as docs/exports.md states them.
    let floats: &[&str] = &[
        "alpha",
        "pass_rate",
        "pass_rate_lo",
        "pass_rate_hi",
        "pass_rate_excl_infra",
        "tests_passed_fraction",
        "tokens_per_trial",
        "working_seconds_per_trial",
        "steps_per_trial",
        "working_seconds",
        "wall_seconds",
        "rate_limit_wait_seconds",
        "control_rate",
        "treatment_rate",
        "delta",
        "lo",
        "hi",
        "interval_level",
        "p_value",
        "p_adjusted",
        "mde",
        "cost_usd",
    ];
    let ints: &[&str] = &[
        "trials",
        "tasks",
        "repeat",
        "seed",
        "attempt",
        "steps",
        "tokens_input",
        "passed",
        "failed",
        "n_tasks",
        "family_size",
        "infra_errors_control",
    ];
    let bools: &[&str] = &["counted", "infra_differs"];
    for file in ["trials.csv", "arms.csv", "effects.csv"] {
        let header = csv_header(&run.join(file));
        assert_eq!(
            &header[..4],
            ["run_id", "experiment", "config_digest", "suite_digest"],
            "{file}"
        );
        let rows = csv_rows(&run.join(file));
        for row in &rows {
            assert_eq!(
                [
                    row["run_id"].as_str(),
                    &row["experiment"],
                    &row["config_digest"],
                    &row["suite_digest"]
                ],
                ids,
                "{file}"
            );
            for (col, v) in row.iter().filter(|(_, v)| !v.is_empty()) {
                if floats.contains(&col.as_str()) {
                    assert!(
                        v.parse::<f64>().is_ok() && (v.contains('.') || v.contains('e')),
                        "{file} {col} = {v}: not a float"
                    );
                } else if ints.contains(&col.as_str()) {
                    assert!(v.parse::<i64>().is_ok(), "{file} {col} = {v}: not an integer");
                } else if bools.contains(&col.as_str()) {
                    assert!(v == "true" || v == "false", "{file} {col} = {v}");
                }
            }
        }
        if file == "trials.csv" {
            // docs/exports.md's order: the run's four, then trials.csv's own.
            let expected = "run_id,experiment,config_digest,suite_digest,trial_id,task,arm,model,repeat,seed,attempt,counted,status,graded_pass,reward,end_reason,\
                            budget_limit,tests_passed,tests_total,steps,sessions,tokens_input,tokens_output,tokens_cached,working_seconds,wall_seconds,\
                            rate_limit_wait_seconds,cost_usd,loop_guard_hits,invalid_tool_calls,unparsed_replies,path_refusals,snapshot_sha256,\
                            finished_at,system_fingerprints";
            let expected: Vec<&str> = expected.split(',').collect();
            assert_eq!(header[..expected.len()], expected[..]);
            // The two attempts of the rerun trial: only the second counts.
            let tid = first["trial_id"].as_str().unwrap();
            let of: Vec<(&str, &str)> = rows
                .iter()
                .filter(|r| r["trial_id"] == tid)
                .map(|r| (r["attempt"].as_str(), r["counted"].as_str()))
                .collect();
            assert_eq!(of, vec![("1", "false"), ("2", "true")]);
            assert_eq!(rows.iter().filter(|r| r["counted"] == "true").count(), 14 * 7 * 2);
        }
    }
    // Component values as columns: the ablated arm differs from full in its component only.
    let arms = csv_rows(&run.join("arms.csv"));
    let full = arms.iter().find(|a| a["arm"] == "full").unwrap();
    let minus = arms.iter().find(|a| a["arm"] == "full-minus-feedback").unwrap();
    assert_eq!(
        (full["component.feedback"].as_str(), minus["component.feedback"].as_str()),
        ("true", "false")
    );
    assert_eq!(
        (full["component.tools"].as_str(), minus["component.tools"].as_str()),
        ("true", "true")
    );
    // Effect rows carry both rates, the interval's level and method, and the adjustment.
    let effects = csv_rows(&run.join("effects.csv"));
    for e in &effects {
        let (c, t, d): (f64, f64, f64) = (
            e["control_rate"].parse().unwrap(),
            e["treatment_rate"].parse().unwrap(),
            e["delta"].parse().unwrap(),
        );
        assert!((t - c - d).abs() < 1e-9, "{e:?}");
        // Ablations are adjusted over the family of 5 (Holm); a combined comparison stands alone.
        let adjustment = if e["kind"] == "ablation" { "holm" } else { "none" };
        assert_eq!(
            (e["method"].as_str(), e["adjustment"].as_str()),
            ("sign_flip_mid_p+trial_noise", adjustment),
            "{e:?}"
        );
    }
    // The counted rows give the report's pass rate (the naive count over every row would not).
    let trials = csv_rows(&run.join("trials.csv"));
    let mut per_task: HashMap<String, (f64, f64)> = HashMap::new();
    for t in trials
        .iter()
        .filter(|t| t["arm"] == first["arm"].as_str().unwrap() && t["counted"] == "true")
    {
        let e = per_task.entry(t["task"].clone()).or_default();
        e.0 += (t["status"] == "passed") as u8 as f64;
        e.1 += 1.0;
    }
    let expect = per_task.values().map(|(p, n)| p / n).sum::<f64>() / per_task.len() as f64;
    let arm = arms.iter().find(|a| a["arm"] == first["arm"].as_str().unwrap()).unwrap();
    assert!((arm["pass_rate"].parse::<f64>().unwrap() - expect).abs() < 1e-12);
}

/// `ablate report --margin`: the verdicts in the equivalence words, printed only (the exports keep
/// the experiment's own, here none); a margin outside (0, 1) is refused naming the option.
#[test]
fn report_margin_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate(dir.path(), 4, rate);
    let (code, _, err) = ablate(&["report", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let before = std::fs::read_to_string(run.join("effects.csv")).unwrap();
    assert!(!before.contains("equivalent within"), "{before}");
    let (code, out, err) = ablate(&["report", run.to_str().unwrap(), "--margin", "0.5"]);
    assert_eq!(code, 0, "{err}");
    // The arms at 0.85 and 0.9 (14 tasks x 4 trials): no effect shown, and the two one-sided tests
    // put the difference well inside ±50 pp; feedback (0.9 vs 0.1) still helps.
    assert!(out.contains("equivalent within ±50 pp"), "{out}");
    assert!(
        out.lines().any(|l| l.trim_start().starts_with("feedback") && l.ends_with("helps")),
        "{out}"
    );
    assert!(
        err.contains("margin ±50 pp from the command line") && err.contains("were not rewritten"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(run.join("effects.csv")).unwrap(), before);
    let (code, _, err) = ablate(&["report", run.to_str().unwrap(), "--margin", "1.5"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--margin") && err.contains("1.5 is not in (0, 1)"), "{err}");
}

/// Every cost and reliability number of the report (report.json: spend per trial, per solved
/// task, pass^k and the consistency score, per arm and paired) is recomputed from trials.csv
/// by scripts/costs_reference.py, which shares no code with ablate: 14 tasks x 5 trials, so
/// the studentized bootstrap (10 tasks or more, 10 passes or more) and pass^2..pass^5 are all
/// exercised, with spends that vary by trial and a cost on every trial.
#[test]
fn every_cost_and_reliability_number_matches_an_independent_recomputation() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate(dir.path(), 5, rate);
    let (code, out, err) = ablate(&["report", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("trade-off: "), "{out}");
    assert!(out.contains("the tokens [") && out.contains("the cost ["), "{out}");
    let made = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/costs_reference.py"))
        .arg(&run)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&made.stdout);
    assert!(made.status.success(), "{stdout}{}", String::from_utf8_lossy(&made.stderr));
    let compared: usize = stdout
        .trim()
        .strip_prefix("compared ")
        .and_then(|s| s.strip_suffix(" numbers"))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    // 7 arms x (infrastructure errors + 2 spends per trial + 3 per solved + k = 2, 3, 5 x 2) x 3,
    // and 6 comparisons (5 ablations and the combined one) x (4 spends x 8 + 3 spends per
    // solved x 9 + 3 k x 9 + 2 metrics, loop_guard_hits and harness.tool_calls, x 5).
    assert_eq!(
        compared,
        7 * (1 + 2 + 3 + 3 * 2) * 3 + 6 * (4 * 8 + 3 * 9 + 3 * 9 + 2 * 5),
        "{stdout}"
    );
    assert!(out.contains("loop_guard_hits: ") && out.contains("harness.tool_calls: "), "{out}");
    // effects.csv holds each metric's cells as typed float columns, the values report.json holds.
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("report.json")).unwrap()).unwrap();
    let effects = csv_rows(&run.join("effects.csv"));
    let json_effects: Vec<&serde_json::Value> = report["ablations"]
        .as_array()
        .unwrap()
        .iter()
        .chain(report["combined"].as_array().unwrap())
        .collect();
    assert_eq!(effects.len(), json_effects.len());
    for (row, e) in effects.iter().zip(json_effects) {
        for m in e["costs"]["metrics"].as_array().unwrap() {
            let name = m["name"].as_str().unwrap();
            for (cell, value) in [
                ("control", &m["control"]),
                ("diff", &m["difference"]["estimate"]),
                ("diff_hi", &m["difference"]["hi"]),
            ] {
                // serde_json reads a float to within an ulp (no float_roundtrip): 1e-12 relative.
                let got: f64 = row[&format!("metric.{name}.{cell}")].parse().unwrap();
                let want = value.as_f64().unwrap();
                assert!((got - want).abs() <= 1e-12 * want.abs().max(1.0), "{name}.{cell}");
            }
        }
    }
}

/// A synthetic run whose experiment names a primary outcome.
fn generate_with_primary(dir: &Path, primary: &str) -> PathBuf {
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/core.toml");
    let mut exp = ablate::experiment::config::load(&cfg).unwrap();
    exp.trials = 3;
    exp.tasks.clear();
    exp.primary = Some(primary.to_string());
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let plan = ablate::plan::build(&exp, &suite).unwrap();
    let run = dir.join("run");
    synth::write_run(&run, &exp, &suite, &plan, 11, rate).unwrap();
    run
}

/// `primary = "tests_passed"`: every effect is on the fraction of tests passed. Recomputed
/// from trials.csv (tests_passed / tests_total a trial, the mean a task, treatment - control a
/// task, the mean over tasks); the report says what it decides on. A primary that is no score
/// in [0, 1] (`harness.tool_calls`, 2 to 8 a trial) gives no verdict and says why; the gate
/// decides on the primary too.
#[test]
fn a_primary_outcome_is_what_the_verdicts_decide_on() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate_with_primary(dir.path(), "tests_passed");
    let (code, out, err) = ablate(&["report", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("primary outcome: tests_passed"), "{out}");
    let trials = csv_rows(&run.join("trials.csv"));
    let fraction = |arm: &str| -> BTreeMap<String, f64> {
        let mut per: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for t in trials.iter().filter(|t| t["arm"] == arm && t["counted"] == "true") {
            let (p, n): (f64, f64) =
                (t["tests_passed"].parse().unwrap(), t["tests_total"].parse().unwrap());
            per.entry(t["task"].clone()).or_default().push(p / n);
        }
        per.into_iter().map(|(k, v)| (k, mean(&v))).collect()
    };
    let (c, t) = (fraction("full-minus-feedback"), fraction("full"));
    let d: Vec<f64> = c.iter().map(|(k, v)| t[k] - v).collect();
    let effects = csv_rows(&run.join("effects.csv"));
    let fb = effects.iter().find(|e| e["components"] == "feedback").unwrap();
    assert_eq!(fb["primary"], "tests_passed");
    let got: f64 = fb["delta"].parse().unwrap();
    assert!((got - mean(&d)).abs() < 1e-12, "{got} vs {}", mean(&d));
    let passes = task_means(&task_counts(&trials, "full", |_| true));
    assert!((got - mean(&passes)).abs() > 1e-6, "the delta is not the pass rate's");

    let dir2 = tempfile::tempdir().unwrap();
    let run2 = generate_with_primary(dir2.path(), "harness.tool_calls");
    let (code, out, err) = ablate(&["report", run2.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let effects = csv_rows(&run2.join("effects.csv"));
    for e in &effects {
        assert_eq!(
            e["verdict"],
            "no verdict: the primary outcome `harness.tool_calls` is missing on 0 trials and outside [0, 1] on 84 (a verdict decides on a score in [0, 1] every trial records)",
            "{e:?}"
        );
    }
    gate_decides_on_the_primary(&run, dir.path());
}

/// The gate on a run whose primary is `tests_passed`: the baseline saves each task's sum of
/// the fraction of tests passed (recomputed here from trials.csv); the verdict is the
/// stratified test's on those sums, as scripts/gate_reference.py's `strat_verdict` gives it
/// (its own implementation, run here); a candidate of another outcome is refused by name.
fn gate_decides_on_the_primary(run: &Path, dir: &Path) {
    let baseline = dir.join("baseline.csv");
    let (code, out, err) = ablate(&[
        "baseline",
        "save",
        run.to_str().unwrap(),
        "--arm",
        "full",
        "-o",
        baseline.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let trials = csv_rows(&run.join("trials.csv"));
    let rows = csv_rows(&baseline);
    let mut counts = Vec::new();
    for row in &rows {
        assert_eq!(row["primary"], "tests_passed");
        let sum: f64 = trials
            .iter()
            .filter(|t| t["arm"] == "full" && t["task"] == row["task"] && t["counted"] == "true")
            .map(|t| {
                t["tests_passed"].parse::<f64>().unwrap() / t["tests_total"].parse::<f64>().unwrap()
            })
            .sum();
        let score: f64 = row["score"].parse().unwrap();
        assert!((score - sum).abs() < 1e-9, "{row:?}: {sum}");
        counts.push(format!("({score},{},{score},{})", row["trials"], row["trials"]));
    }
    let (code, out, err) = ablate(&[
        "gate",
        "--baseline",
        baseline.to_str().unwrap(),
        "--candidate",
        run.to_str().unwrap(),
        "--arm",
        "full",
    ]);
    let script = format!(
        "import sys; sys.path.insert(0, 'scripts'); import gate_reference as g; print(g.strat_verdict([{}], 0.05, 0.05))",
        counts.join(",")
    );
    let reference = Command::new("python3").arg("-c").arg(&script).output().unwrap();
    let want = String::from_utf8_lossy(&reference.stdout).trim().to_string();
    assert!(out.starts_with(&format!("gate: {want} ")), "{want}: {out}{err}");
    let exit = match want.as_str() {
        "PASS" => 0,
        "FAIL" => 1,
        _ => 3,
    };
    assert_eq!(code, exit, "{out}{err}");
    assert!(out.contains("mean of the primary outcome `tests_passed`"), "{out}");
    // A candidate deciding on the pass rate against this baseline: refused, naming both.
    let other = generate(&dir.join("other"), 3, rate);
    let (code, _, err) = ablate(&[
        "gate",
        "--baseline",
        baseline.to_str().unwrap(),
        "--candidate",
        other.to_str().unwrap(),
        "--arm",
        "full",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("experiment.primary") && err.contains("`tests_passed`"), "{err}");
}

/// Container runs are recorded data: every trial says what engine and limits its container had,
/// each arm lists them, and a comparison whose arms ran a task under different ones gets no
/// verdict naming them, the others keep theirs. Here `bare`'s containers had half the memory.
#[test]
fn arms_that_ran_on_different_containers_get_no_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate(dir.path(), 2, rate);
    let (out, effects) = restatus_and_report(&run, |v| {
        let memory = if v["arm"] == "bare" { 1024 } else { 2048 };
        v["container"] = json!({"engine": "podman", "engine_version": "4.9.3", "cpus": 1.0,
            "memory_mb": memory, "pids": 4096});
    });
    assert!(
        out.contains("Containers:      podman 4.9.3, 1 cpus, 1024 MB, 4096 pids, disk not limited"),
        "{out}"
    );
    assert!(
        out.contains("Containers:      podman 4.9.3, 1 cpus, 2048 MB, 4096 pids, disk not limited"),
        "{out}"
    );
    for e in &effects {
        let with_bare = e["control"] == "bare" || e["treatment"] == "bare";
        let differs = e["verdict"]
            .starts_with("no verdict: the arms ran on different infrastructure (task `");
        assert_eq!(with_bare, differs, "{e:?}");
        if with_bare {
            assert!(
                e["verdict"]
                    .contains("1024 MB, 4096 pids, disk not limited in the control, podman 4.9.3, 1 cpus, 2048 MB"),
                "{e:?}"
            );
        }
    }
    assert!(effects.iter().any(|e| e["control"] == "bare"), "the run compares bare");
}

/// A config's `[experiment]` (its keys given), then a budget and a model no trial reaches.
fn with_budget_and_model(experiment: &str) -> String {
    format!(
        "[experiment]\n{experiment}\n\n[budget]\nmax_steps = 3\nmax_output_tokens_per_step = 256\nmax_total_tokens = 12000\nmax_working_seconds = 90\n\n[[models]]\nprovider = \"openai\"\nmodel = \"m\"\nendpoint = \"http://127.0.0.1:1\"\ntemperature = 0.7\n"
    )
}

/// A budget sweep of one ablation over 14 tasks: the feedback arm passes 20% of its trials at
/// 4000 tokens and 90% at 8000 and 16000; the bare arm 20% at every level.
fn generate_budget_sweep(dir: &Path) -> PathBuf {
    let config = with_budget_and_model(
        "name = \"budget-sweep\"\nsuite = \"../tasks/core\"\ntrials = 4\nseed = 3",
    ) + r#"
[arms.bare]
[arms.fb]
feedback = true

[[matrix.pairs]]
control = "bare"
treatment = "fb"

[matrix.budget]
max_total_tokens = [4000, 8000, 16000]
"#;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/budget-sweep.toml");
    let exp = ablate::experiment::config::load_str(&path, &config).unwrap();
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let plan = ablate::plan::build(&exp, &suite).unwrap();
    let run = dir.join("run");
    let rate = |_: &str, arm: &str| match arm {
        "fb-at-8000-tokens" | "fb-at-16000-tokens" => 0.9,
        _ => 0.2,
    };
    synth::write_run(&run, &exp, &suite, &plan, 5, rate).unwrap();
    run
}

/// Each task's pass rate of `arm`, from trials.csv, tasks in name order.
fn arm_task_means(trials: &[HashMap<String, String>], arm: &str) -> Vec<f64> {
    task_means(&task_counts(trials, arm, |_| true))
}

#[test]
fn a_budget_sweep_draws_each_arm_and_effect_against_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let run = generate_budget_sweep(dir.path());
    let (code, out, err) = ablate(&["report", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let trials = csv_rows(&run.join("trials.csv"));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("report.json")).unwrap()).unwrap();
    let curves = &report["budget_curves"];
    assert_eq!(curves["key"], "max_total_tokens");
    assert_eq!(curves["levels"], json!([4000.0, 8000.0, 16000.0]));
    let levels = ["4000", "8000", "16000"];
    // Three levels: each point's interval at 1 - 0.05/3 (Bonferroni), simultaneous over the curve.
    // z = qnorm(1 - 0.05/6) and t = qt(1 - 0.05/6, 13) (mpmath, as for Z975 and T975_13 above).
    let (z, t) = (2.393979799818509, 2.745938723172566);
    for (curve, arm) in curves["arms"].as_array().unwrap().iter().zip(["bare", "fb"]) {
        assert_eq!(curve["of"], arm);
        assert!((curve["band_level"].as_f64().unwrap() - (1.0 - 0.05 / 3.0)).abs() < 1e-12);
        let means: Vec<Vec<f64>> = levels
            .iter()
            .map(|l| arm_task_means(&trials, &format!("{arm}-at-{l}-tokens")))
            .collect();
        for (p, m) in curve["points"].as_array().unwrap().iter().zip(&means) {
            let (lo, hi) = clustered_wilson(m, 56, z, t);
            let got = |k: &str| p[k].as_f64().unwrap();
            assert!((got("estimate") - mean(m)).abs() < 1e-12, "{p}");
            assert!(
                (got("lo") - lo).abs() < 1e-9 && (got("hi") - hi).abs() < 1e-9,
                "{p}: {lo} {hi}"
            );
        }
        // Each step: the mean over tasks of the change of the task's pass rate.
        for (s, w) in curve["steps"].as_array().unwrap().iter().zip(means.windows(2)) {
            let change = mean(&w[1].iter().zip(&w[0]).map(|(b, a)| b - a).collect::<Vec<_>>());
            assert!((s["change"].as_f64().unwrap() - change).abs() < 1e-12, "{s}");
        }
    }
    let effect = &curves["effects"][0];
    assert_eq!(effect["of"], "fb vs bare");
    for (p, l) in effect["points"].as_array().unwrap().iter().zip(levels) {
        let (c, tr) = (
            arm_task_means(&trials, &format!("bare-at-{l}-tokens")),
            arm_task_means(&trials, &format!("fb-at-{l}-tokens")),
        );
        let d: Vec<f64> = tr.iter().zip(&c).map(|(a, b)| a - b).collect();
        assert!((p["estimate"].as_f64().unwrap() - mean(&d)).abs() < 1e-12, "{p}");
        // The band holds the effect's interval at 1 - 0.05/3: the exact sign-flip test of
        // the shifted differences rejects just outside it and not just inside.
        for (edge, outside) in
            [(p["lo"].as_f64().unwrap(), -1e-6), (p["hi"].as_f64().unwrap(), 1e-6)]
        {
            let at = |x: f64| sign_flip_p(&d.iter().map(|v| v - x).collect::<Vec<_>>());
            assert!(at(edge + outside) <= 0.05 / 3.0 + 1e-12, "{p}");
            assert!(at(edge - outside) > 0.05 / 3.0 - 1e-12, "{p}");
        }
    }
    // Helps at 8000 and 16000, grows from 4000 to 8000, and not past 8000: each said once.
    assert!(out.contains("Budget curves:"), "{out}");
    assert!(
        out.contains("helps at 8000 tokens, 16000 tokens; no level where it detectably hurts"),
        "{out}"
    );
    assert!(out.contains("grows detectably from 4000 tokens to 8000 tokens"), "{out}");
    assert!(
        out.contains("stops growing past 8000 tokens: no later step grows detectably"),
        "{out}"
    );
    // effects.csv names each comparison's level; report.html draws both charts.
    let effects = csv_rows(&run.join("effects.csv"));
    let at: Vec<(&str, &str)> =
        effects.iter().map(|e| (e["budget_key"].as_str(), e["budget_level"].as_str())).collect();
    assert_eq!(
        at,
        [
            ("max_total_tokens", "4000.0"),
            ("max_total_tokens", "8000.0"),
            ("max_total_tokens", "16000.0")
        ]
    );
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert_eq!(html.matches("aria-label=\"outcome against max_total_tokens\"").count(), 1);
    assert_eq!(html.matches("aria-label=\"effect against max_total_tokens\"").count(), 1);
    // One level's arms on different infrastructure: that level's effect has no verdict, and the
    // effect's curve is not drawn from it (the arms' curves are).
    let (out, _) = restatus_and_report(&run, |r| {
        let memory = if r["arm"] == "fb-at-8000-tokens" { 4096 } else { 2048 };
        r["container"] = json!({"engine": "podman", "engine_version": "4.9.3", "cpus": 1.0,
            "memory_mb": memory, "pids": 512});
    });
    assert!(
        out.contains("fb vs bare (m): no curve; at 8000 tokens, no verdict: the arms ran on different infrastructure"),
        "{out}"
    );
    assert!(!out.contains("helps at 8000 tokens"), "{out}");
    assert!(out.contains("arm fb (m), pass rate:"), "{out}");
}

#[test]
fn limits_the_arms_set_on_purpose_are_the_treatment_not_a_difference_of_infrastructure() {
    let dir = tempfile::tempdir().unwrap();
    let config = with_budget_and_model(
        "name = \"resources\"\nsuite = \"../tasks/terminal\"\ntrials = 3\nseed = 2",
    ) + r#"
[arms.one]
resources = { cpus = 1 }
[arms.two]
resources = { cpus = 2 }

[[matrix.pairs]]
control = "one"
treatment = "two"
"#;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/resources.toml");
    let exp = ablate::experiment::config::load_str(&path, &config).unwrap();
    assert_eq!(exp.comparisons[0].differs[0].component, "resources.cpus");
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let plan = ablate::plan::build(&exp, &suite).unwrap();
    let run = dir.path().join("run");
    synth::write_run(&run, &exp, &suite, &plan, 5, |_, arm| if arm == "one" { 0.1 } else { 0.9 })
        .unwrap();
    // Each arm's containers got its own cpus (the treatment) and the same memory: a verdict.
    let ran_on = |cpus: f64, memory_mb: u64| json!({"engine": "podman", "engine_version": "4.9.3", "cpus": cpus, "memory_mb": memory_mb, "pids": 512});
    let (_, effects) = restatus_and_report(&run, |r| {
        let cpus = if r["arm"] == "one" { 1.0 } else { 2.0 };
        r["container"] = ran_on(cpus, 512);
    });
    assert_eq!(effects[0]["verdict"], "helps", "{:?}", effects[0]);
    // Memory the arms do not set, different between them: no verdict, naming what differed.
    let (_, effects) = restatus_and_report(&run, |r| {
        let (cpus, memory) = if r["arm"] == "one" { (1.0, 512) } else { (2.0, 1024) };
        r["container"] = ran_on(cpus, memory);
    });
    let v = &effects[0]["verdict"];
    assert!(v.starts_with("no verdict: the arms ran on different infrastructure"), "{v}");
    assert!(v.contains("podman 4.9.3, 512 MB, 512 pids, disk not limited in the control"), "{v}");
}

/// The sequential design decides on the primary outcome: the replayed rule takes each trial's
/// score, so with `tests_passed` the comparisons' rates are the fractions of tests passed over
/// the tasks that entered; with `harness.solved`, which no builtin trial records, no task
/// enters and every comparison stops undecided at the first, saying why.
#[test]
fn a_sequential_run_decides_on_its_primary_outcome() {
    for (primary, seed) in [("tests_passed", 1u64), ("harness.solved", 2)] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/core.toml");
        let text = std::fs::read_to_string(&cfg).unwrap().replace(
            "alpha = 0.05",
            &format!("alpha = 0.05\ndesign = \"sequential\"\nprimary = \"{primary}\""),
        );
        let mut exp = ablate::experiment::config::load_str(&cfg, &text).unwrap();
        exp.tasks.clear();
        exp.seed = seed;
        let suite = ablate::suite::load(&exp.suite_path).unwrap();
        let plan = ablate::plan::build(&exp, &suite).unwrap();
        let run = dir.path().join("run");
        synth::write_run(&run, &exp, &suite, &plan, 11, rate).unwrap();
        let (code, _, err) = ablate(&["report", run.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        let effects = csv_rows(&run.join("effects.csv"));
        assert!(effects.iter().all(|e| e["design"] == "sequential" && e["primary"] == primary));
        if primary == "harness.solved" {
            for e in &effects {
                assert_eq!(e["n_tasks"], "0", "{e:?}");
                assert!(
                    e["verdict"].starts_with(
                        "no verdict: the primary outcome `harness.solved` is missing on"
                    ),
                    "{e:?}"
                );
            }
            continue;
        }
        // The entered tasks' fractions: the control's rate from trials.csv over the first
        // n_tasks tasks of the run's order, as the rule took them.
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(run.join("manifest.json")).unwrap()).unwrap();
        let order: Vec<String> = manifest["sequential"]["task_order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_string())
            .collect();
        let trials = csv_rows(&run.join("trials.csv"));
        assert!(effects.iter().any(|e| e["n_tasks"] != "0"), "tasks entered");
        for e in effects.iter().filter(|e| e["n_tasks"] != "0") {
            let n: usize = e["n_tasks"].parse().unwrap();
            let rate_of = |arm: &str| {
                let per_task: Vec<f64> = order[..n]
                    .iter()
                    .map(|task| {
                        let f: Vec<f64> = trials
                            .iter()
                            .filter(|t| {
                                t["arm"] == arm && &t["task"] == task && t["counted"] == "true"
                            })
                            .map(|t| {
                                t["tests_passed"].parse::<f64>().unwrap()
                                    / t["tests_total"].parse::<f64>().unwrap()
                            })
                            .collect();
                        mean(&f)
                    })
                    .collect();
                mean(&per_task)
            };
            let got: f64 = e["control_rate"].parse().unwrap();
            assert!((got - rate_of(&e["control"])).abs() < 1e-12, "{e:?}");
            assert!(!e["verdict"].contains("primary outcome"), "{e:?}");
        }
    }
}
