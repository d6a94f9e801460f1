//! Test support: synthetic runs, a real manifest and plan with trial records drawn from chosen
//! per-(task, arm) pass probabilities. For tests of the report, the gate and the exports, for
//! benchmarks of `ablate report` at 10k-1M records, and for `ablate synth-run`; never used by a
//! run. It sits outside the pipeline's crates, on `ablate-core`'s public API.

use ablate_core::experiment::config::Experiment;
use ablate_core::plan::{Plan, TrialSpec};
use ablate_core::record::{CheckResult, Grade, RunnerReport};
use ablate_core::record::{EndReason, Tokens, TrialRecord, TrialStatus};
use ablate_core::suite::{Suite, Task};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use std::io::{BufWriter, Write};
use std::path::Path;

/// Write `dir/manifest.json` and `dir/trials.jsonl` for every trial of the
/// plan; `rate(task, arm)` is the pass probability. Returns the record count.
pub fn write_run(
    dir: &Path,
    exp: &Experiment,
    suite: &Suite,
    plan: &Plan,
    seed: u64,
    rate: impl Fn(&str, &str) -> f64,
) -> std::io::Result<usize> {
    write_run_by_model(dir, exp, suite, plan, seed, |task, arm, _| rate(task, arm))
}

/// [`write_run`] with the pass probability `rate(task, arm, model)`.
pub fn write_run_by_model(
    dir: &Path,
    exp: &Experiment,
    suite: &Suite,
    plan: &Plan,
    seed: u64,
    rate: impl Fn(&str, &str, &str) -> f64,
) -> std::io::Result<usize> {
    let run_id = write_manifest(dir, exp, suite)?;
    let mut streams = Streams::of(seed);
    let mut out =
        BufWriter::with_capacity(1 << 20, std::fs::File::create(dir.join("trials.jsonl"))?);
    for t in &plan.trials {
        let task = suite.task(&t.task).expect("planned task");
        let pass = rate(&t.task, &t.arm, &t.model).clamp(0.0, 1.0);
        let rec = trial(&run_id, t, task, exp.budget.max_steps, pass, &mut streams);
        serde_json::to_writer(&mut out, &rec)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(plan.trials.len())
}

/// Create `dir` and write its manifest and plan; returns the run id, the folder's name as for a
/// real run.
fn write_manifest(dir: &Path, exp: &Experiment, suite: &Suite) -> std::io::Result<String> {
    std::fs::create_dir_all(dir)?;
    // The run id is the folder's name, as for a real run.
    let run_id = dir
        .file_name()
        .and_then(|n| n.to_str())
        .map(String::from)
        .unwrap_or_else(|| format!("synthetic-{}", exp.name));
    let order = ablate_core::plan::order(exp, suite).map_err(std::io::Error::other)?;
    let manifest = ablate_core::plan::manifest(
        run_id.clone(),
        exp,
        suite,
        &order,
        None,
        ablate_core::runner::facts::runner_facts(exp),
    );
    manifest.write_with_plan(dir, order.specs(None))?;
    drop(order);
    Ok(run_id)
}

/// The random streams of a synthetic run: the outcomes', and the spends' own.
struct Streams {
    rng: ChaCha8Rng,
    spend_rng: ChaCha8Rng,
}

impl Streams {
    fn of(seed: u64) -> Streams {
        Streams {
            rng: ChaCha8Rng::seed_from_u64(seed),
            // The spends' own stream, so that the outcomes drawn for a seed stay what they were.
            spend_rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5BE7_D000),
        }
    }
}

/// Trial `t`'s record, of `task`: passed with probability `pass`, up to `max_steps` steps, its
/// grade and its spend drawn from `streams`.
fn trial(
    run_id: &str,
    t: &TrialSpec,
    task: &Task,
    max_steps: u32,
    pass: f64,
    streams: &mut Streams,
) -> TrialRecord {
    let rng = &mut streams.rng;
    let total = task.check.tests;
    let passed = rng.random_bool(pass);
    let tests_passed = if passed { total } else { rng.random_range(0..total) };
    let status = if passed {
        TrialStatus::Passed
    } else {
        match rng.random_range(0..100) {
            0..=2 => TrialStatus::BudgetExhausted,
            3 => TrialStatus::ProviderError,
            _ => TrialStatus::Failed,
        }
    };
    let steps = rng.random_range(1..=max_steps);
    let end_reason = if passed { EndReason::ChecksPassed } else { EndReason::ModelDone };
    let mut rec =
        TrialRecord::blank(run_id, t, 1, status, end_reason, "2026-11-30T00:00:00Z".into());
    rec.tests_passed = tests_passed;
    rec.tests_total = total;
    rec.grade = Some(grade(task, passed, tests_passed, rng));
    rec.graded_pass = Some(passed);
    rec.steps = steps;
    rec.sessions = 1;
    spend(&mut rec, steps, &mut streams.spend_rng);
    rec.wall_seconds = 3.1 * steps as f64;
    rec.finished_at = "2026-11-30T00:00:03Z".into();
    rec
}

/// The grade of a trial of `task` that passed `tests_passed` of its tests (and the check, when
/// `passed`); its snapshot's digest drawn from `rng`.
fn grade(task: &Task, passed: bool, tests_passed: u32, rng: &mut ChaCha8Rng) -> Grade {
    let total = task.check.tests;
    Grade {
        check: CheckResult {
            mode: task.check.mode,
            command: task.check.command.clone(),
            exit_code: Some(if passed { 0 } else { 1 }),
            timed_out: false,
            passed: tests_passed,
            total,
            summary_found: true,
            reported_total: Some(total),
            runner: Some(RunnerReport {
                loaded: Some(total),
                tests: total,
                passed: tests_passed,
                finished: true,
                ..Default::default()
            }),
            forgery: None,
            failed_tests: Vec::new(),
            duration_ms: 120,
            output: String::new(),
            output_truncated: false,
        },
        snapshot_sha256: format!("{:064x}", rng.random::<u64>()),
        tampered_tests: Vec::new(),
        planted_modules: Vec::new(),
        snapshot_notes: Vec::new(),
        verifier: None,
    }
}

/// A trial's spend over its `steps`: tokens, cost, working time, loop-guard hits and the
/// harness command's outcome, the variation drawn from `spend_rng`.
fn spend(rec: &mut TrialRecord, steps: u32, spend_rng: &mut ChaCha8Rng) {
    // A trial's spend varies beyond its steps (a factor 0.5-2), and is priced at
    // $3 / $15 a million input / output tokens.
    let factor = 0.5 + 1.5 * spend_rng.random::<f64>();
    let (input, output) = ((600.0 * steps as f64 * factor) as u64, 150 * steps as u64);
    rec.tokens = Tokens { input, output, cached: 0 };
    rec.cost_usd = Some((3.0 * input as f64 + 15.0 * output as f64) / 1e6);
    rec.working_seconds = 3.0 * steps as f64;
    // The builtin harness's loop guard and a harness's own count, as outcomes beside the pass.
    rec.incidents.loop_guard_hits = spend_rng.random_range(0..=steps.saturating_sub(1));
    rec.harness_command = Some(ablate_core::record::CommandOutcome {
        command: vec!["synthetic".into()],
        exit_code: Some(0),
        stopped_by: None,
        wall_seconds: rec.working_seconds,
        stdout_tail: String::new(),
        stderr_tail: String::new(),
        first_model_call_seconds: None,
        refused_requests: 0,
        exec_calls: 0,
        embedding_calls: 0,
        metrics: [("tool_calls".to_string(), f64::from(steps * 2))].into(),
        metrics_refused: Vec::new(),
    });
}
