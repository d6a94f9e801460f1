//! Out-of-process grading (`[check] mode = "out_of_process"`): the
//! candidate's modules run in a jail of their own, under a uid of their own,
//! served by remote.py; the tests run in another jail, on a fresh copy of the
//! task without the editable files, and ask the candidate's process for each
//! attribute and call on a socket pair. Only plain data crosses (remote.py's
//! codec: exact builtin types, no pickle), so nothing the candidate's code
//! does reaches a test, an assertion or a result.

use super::{Remote, grader_jail, grader_script, python_env, run_tests, runner_dir};
use crate::record::CheckResult;
use crate::sandbox::Sandbox;
use crate::sandbox::isolation::{self, ChannelEnd, Jail};
use crate::sandbox::process::{Confinement, ProcessOutcome, run_until};
use crate::suite::CheckSpec;

/// Bytes kept of the candidate's process's own output (it never reaches the parser).
const CANDIDATE_OUTPUT_CAP: usize = 16 * 1024;

/// Run the checks of `candidate` with its modules in their own process.
pub(super) async fn run(candidate: &Sandbox, spec: &CheckSpec) -> std::io::Result<CheckResult> {
    let tests_side = candidate.tests_side()?;
    let modules = candidate.candidate_modules();
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    let (ours, theirs) = (ChannelEnd::new(ours), ChannelEnd::new(theirs));
    let (done, stop) = tokio::sync::oneshot::channel::<()>();
    let tests = async {
        let result =
            run_tests(&tests_side, spec, Some(Remote { channel: &ours, modules: &modules })).await;
        drop(done);
        result
    };
    let served = serve(candidate, spec, &theirs, &modules, async {
        let _ = stop.await;
    });
    let (result, served) = tokio::join!(tests, served);
    let mut result = result?;
    append_candidate_output(&mut result, &served?);
    Ok(result)
}

/// The candidate's process: remote.py serving `modules` from the candidate's
/// workspace, until the tests' process is done (`stop`) or the check's timeout.
async fn serve(
    candidate: &Sandbox,
    spec: &CheckSpec,
    channel: &ChannelEnd,
    modules: &[String],
    stop: impl std::future::Future<Output = ()>,
) -> std::io::Result<ProcessOutcome> {
    let isolation = isolation::current().map_err(std::io::Error::other)?;
    let py = super::python_info();
    let runner = runner_dir()?;
    let jailed = isolation.is_isolated();
    if jailed {
        candidate.hand_over()?;
    }
    let script = grader_script(&runner, jailed, "remote.py");
    let mut argv = vec![py.executable.clone(), "-I".into(), "-B".into(), script, "serve".into()];
    argv.extend(modules.iter().cloned());
    let tests = candidate.path().join("tests");
    let confine = Confinement {
        isolation,
        jail: Jail { channel: Some(channel), ..grader_jail(candidate, &tests, &runner, py) },
        limits: spec.limits,
    };
    let env = python_env(py);
    let cap = CANDIDATE_OUTPUT_CAP;
    run_until(&argv, candidate.path(), &env, spec.timeout, cap, Some(&confine), None, stop).await
}

/// The candidate's process's own output, after the tests' (for reading only:
/// the summary was parsed from the tests' output before).
fn append_candidate_output(result: &mut CheckResult, served: &ProcessOutcome) {
    let text = format!("{}{}", served.stdout.text(), served.stderr.text());
    if text.trim().is_empty() {
        return;
    }
    if !result.output.is_empty() && !result.output.ends_with('\n') {
        result.output.push('\n');
    }
    result.output.push_str("--- the candidate's process ---\n");
    result.output.push_str(&text);
    result.output_truncated |= served.stdout.truncated() || served.stderr.truncated();
}
