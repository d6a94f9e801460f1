//! `ablate suite check DIR`: prove every task of a suite.
//!
//! For each task: the stub fails every test, the reference solution passes
//! every test, and the parsed passed/total agrees with the declared test count
//! and with the runner's exit code. A problem names the task.

use super::run_checks;
use crate::record::{CheckResult, GradingMode};
use crate::sandbox::Sandbox;
use crate::suite::harbor::ContainerTask;
use crate::suite::{Suite, Task, TaskKind, load_task};
use std::path::Path;

#[derive(Debug, Clone)]
pub struct TaskReport {
    pub id: String,
    pub tests: u32,
    /// Where the candidate's code ran for both variants; None for a container
    /// task (its verifier runs in its container).
    pub mode: Option<GradingMode>,
    /// A container task's image and the images it builds on.
    pub image: Option<crate::record::TaskImage>,
    pub stub: Option<CheckResult>,
    pub solution: Option<CheckResult>,
    pub problems: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct SuiteReport {
    pub tasks: Vec<TaskReport>,
    /// Present when the whole suite loaded.
    pub suite: Option<Suite>,
    /// Problems not tied to one task (suite.toml).
    pub problems: Vec<String>,
}

impl SuiteReport {
    pub fn ok(&self) -> bool {
        self.problems.is_empty() && self.tasks.iter().all(|t| t.problems.is_empty())
    }
}

/// Check every task folder under `root`. Tasks that fail to load are reported
/// like tasks that fail their checks; the others are still checked.
pub async fn check_suite(root: &Path, engine: Option<crate::container::EngineKind>) -> SuiteReport {
    let mut report = SuiteReport { tasks: Vec::new(), suite: None, problems: Vec::new() };
    match crate::suite::load(root) {
        Ok(suite) => {
            for task in &suite.tasks {
                let r = match &task.kind {
                    TaskKind::Python => check_task(task).await,
                    TaskKind::Container(c) => {
                        check_container_task((task, c), &suite.containers, engine).await
                    }
                };
                report.tasks.push(r);
            }
            report.suite = Some(suite);
        }
        Err(err) => {
            // Fall back to a per-folder load so that every task gets a verdict.
            let suite_toml = root.join("suite.toml");
            if !suite_toml.is_file() || err.file == suite_toml {
                report.problems.push(err.to_string());
                return report;
            }
            let mut dirs: Vec<_> = std::fs::read_dir(root)
                .map(|rd| {
                    rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_dir()).collect()
                })
                .unwrap_or_default();
            dirs.sort();
            for dir in dirs {
                let id = dir.file_name().unwrap_or_default().to_string_lossy().to_string();
                if crate::digest::is_ignored(&id) {
                    continue;
                }
                match load_task(&dir) {
                    Ok(task) => report.tasks.push(check_task(&task).await),
                    Err(e) => report.tasks.push(TaskReport {
                        id,
                        tests: 0,
                        mode: None,
                        image: None,
                        stub: None,
                        solution: None,
                        problems: vec![e.to_string()],
                    }),
                }
            }
        }
    }
    report
}

pub(crate) async fn check_task(task: &Task) -> TaskReport {
    let declared = task.check.tests;
    let mut report = TaskReport {
        id: task.id.clone(),
        tests: declared,
        mode: Some(task.check.mode),
        image: None,
        stub: None,
        solution: None,
        problems: Vec::new(),
    };

    match run_variant(task, false).await {
        Ok(stub) => {
            if !stub.summary_found {
                report.problems.push("stub: no test summary found in the check output".into());
            } else if stub.passed > 0 {
                report.problems.push(format!(
                    "stub passes {} of {} tests; it must fail every test",
                    stub.passed, stub.total
                ));
            }
            if stub.exit_code == Some(0) {
                report.problems.push("stub: the check exited 0; it must fail".into());
            }
            report.stub = Some(stub);
        }
        Err(e) => report.problems.push(format!("stub: cannot run the check: {e}")),
    }

    match run_variant(task, true).await {
        Ok(sol) => {
            if sol.timed_out {
                report
                    .problems
                    .push(format!("solution: the check timed out after {:?}", task.check.timeout));
            } else if !sol.summary_found {
                report.problems.push("solution: no test summary found in the check output".into());
            } else if sol.passed != sol.total {
                let names = if sol.failed_tests.is_empty() {
                    String::new()
                } else {
                    format!(" (failing: {})", sol.failed_tests.join(", "))
                };
                report.problems.push(format!(
                    "solution passes {} of {} tests; it must pass every test{names}",
                    sol.passed, sol.total
                ));
            } else if sol.reported_total != Some(declared) {
                report.problems.push(format!(
                    "task.toml declares tests = {declared} but the checks ran {}",
                    sol.reported_total.unwrap_or(0)
                ));
            } else if sol.exit_code != Some(0) {
                report.problems.push(format!(
                    "solution: parsed {}/{} passed but the check exited {:?}",
                    sol.passed, sol.total, sol.exit_code
                ));
            } else if let Some(f) = &sol.forgery {
                report.problems.push(format!("solution: {f}"));
            } else if !sol.all_passed() {
                let r = sol.runner.clone().unwrap_or_default();
                report.problems.push(format!(
                    "solution: the grader's runner reported {} of {} tests passed (collected {:?}, finished {}); task.toml declares {declared}",
                    r.passed, r.tests, r.loaded, r.finished
                ));
            }
            report.solution = Some(sol);
        }
        Err(e) => report.problems.push(format!("solution: cannot run the check: {e}")),
    }
    report
}

async fn run_variant(task: &Task, solution: bool) -> std::io::Result<CheckResult> {
    let sandbox = Sandbox::create(task)?;
    if solution {
        sandbox.apply_solution(task)?;
    }
    let result = run_checks(&sandbox, &task.check).await?;
    if result.mode != task.check.mode {
        return Err(std::io::Error::other(format!(
            "the check ran {} but the task grades {}",
            result.mode.name(),
            task.check.mode.name()
        )));
    }
    Ok(result)
}

/// A container (Harbor) task proved as Harbor's own task CI proves one: the
/// oracle (`solution/solve.sh`) reaches the pass threshold, and an agent that
/// does nothing does not. `stub` holds the do-nothing run, `solution` the oracle's.
pub(crate) async fn check_container_task(
    (task, c): (&Task, &ContainerTask),
    settings: &crate::suite::ContainerSettings,
    engine: Option<crate::container::EngineKind>,
) -> TaskReport {
    let mut report = TaskReport {
        id: task.id.clone(),
        tests: 1,
        mode: None,
        image: None,
        stub: None,
        solution: None,
        problems: Vec::new(),
    };
    let (engine, image) = match task_image((task, c), engine).await {
        Ok(built) => built,
        Err(problem) => {
            report.problems.push(problem);
            return report;
        }
    };
    report.image = Some(image.clone());
    if !c.has_solution {
        report.problems.push("no solution/solve.sh: the oracle cannot prove the task".into());
    }
    let check = ContainerCheck { task, c, settings, engine, image_id: &image.id };
    for oracle in [false, true] {
        if oracle && !c.has_solution {
            continue;
        }
        let Some(grade) = check.run(oracle, &mut report.problems).await else { continue };
        if oracle {
            report.solution = Some(grade.check);
        } else {
            report.stub = Some(grade.check);
        }
    }
    report
}

/// The container engine, and the task's image built with it; Err: the problem to report.
async fn task_image(
    (task, c): (&Task, &ContainerTask),
    engine: Option<crate::container::EngineKind>,
) -> Result<(&'static crate::container::Engine, crate::record::TaskImage), String> {
    let engine = crate::container::init(engine).map_err(|e| e.to_string())?;
    let log = match crate::sandbox::scratch::dir() {
        Ok(d) => d.join(format!("build-{}.log", task.id)),
        Err(e) => return Err(e.to_string()),
    };
    let opts = crate::container::image::BuildOptions::default();
    match crate::container::image::ensure(engine, (task, c), &log, opts).await {
        Ok(i) => Ok((engine, i)),
        Err(crate::container::image::ImageError::Build { why, log }) => {
            // Kept beside the suite: the scratch folder goes when the command ends.
            let suite = task.dir.parent().unwrap_or(&task.dir);
            let name = suite.file_name().unwrap_or_default().to_string_lossy();
            let dir = suite.with_file_name(format!("{name}.build-logs"));
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let kept = crate::container::image::keep_log(&dir, &task.id, &text);
            Err(format!("image: environment/Dockerfile does not build ({why}); its log is {kept}"))
        }
        Err(e) => Err(format!("image: {e}")),
    }
}

/// What proving one container task runs on: the task, its image and the engine.
struct ContainerCheck<'a> {
    task: &'a Task,
    c: &'a ContainerTask,
    settings: &'a crate::suite::ContainerSettings,
    engine: &'static crate::container::Engine,
    image_id: &'a str,
}

impl ContainerCheck<'_> {
    /// One run in a container of the task's image, then its verifier: the oracle's
    /// (`solution/solve.sh`) or a do-nothing agent's. Its problems go to `problems`;
    /// None when no container started.
    async fn run(&self, oracle: bool, problems: &mut Vec<String>) -> Option<crate::record::Grade> {
        let ContainerCheck { task, c, settings, engine, image_id } = *self;
        let spec = crate::container::trial::Spec {
            task,
            container: c,
            image_id,
            settings,
            resources: Default::default(),
            trial_id: if oracle { "suite-check-oracle" } else { "suite-check-nop" },
            attempt: 1,
            binds: Vec::new(),
            env: Vec::new(),
            passed_env: &std::collections::BTreeMap::new(),
        };
        let name = if oracle { "oracle" } else { "no-op" };
        let container = match crate::container::trial::TrialContainer::start(engine, &spec).await {
            Ok(ct) => ct,
            Err(e) => {
                problems.push(format!("{name}: {e}"));
                return None;
            }
        };
        if oracle {
            let timeout = std::time::Duration::from_secs_f64(c.agent_timeout_sec.unwrap_or(600.0));
            match container.run_oracle(task, timeout).await {
                Ok(out) if out.exit_code != Some(0) => problems.push(format!(
                    "oracle: solution/solve.sh exited {:?}: {}",
                    out.exit_code,
                    crate::sandbox::process::tail(&out.stderr.text(), 500)
                )),
                Ok(_) => {}
                Err(e) => problems.push(format!("oracle: {e}")),
            }
        }
        let v = container.verify(task, settings.reward_threshold).await;
        let _ = container.remove().await;
        if let Some(e) = &v.error {
            problems.push(format!("{name}: {e}"));
        } else if oracle && !v.passed {
            problems.push(format!(
                "oracle: reward {} is below the pass threshold {}",
                v.reward.unwrap_or(0.0),
                v.threshold
            ));
        } else if !oracle && v.passed {
            problems.push(format!(
                "no-op: an agent that does nothing gets reward {}, at the pass threshold {}",
                v.reward.unwrap_or(0.0),
                v.threshold
            ));
        }
        Some(super::container_grade(v))
    }
}
