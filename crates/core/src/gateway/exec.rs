//! The exec endpoint (a harness on the host, a container task): one command
//! run in the task's container as its agent user, metered and traced.

use super::MAX_REQUEST_BYTES;
use super::adapter::{Adapter, Call};
use super::http::{Resp, as_received, bad_request, json_of, json_response, refusal, settle};
use super::meter::{TrialMeter, refused_excerpt};
use super::wire::{self, Api, BadRequest};
use crate::record::BudgetLimit;
use crate::sandbox::process::ProcessOutcome;
use bytes::Bytes;
use hyper::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// The exec endpoint (a harness on the host, a container task): one command
/// run in the task's container as its agent user. docs/external-harness.md,
/// "Container tasks from the host".
pub(crate) const EXEC_PATH: &str = "/ablate/v1/exec";
/// A command's time when the request does not say (seconds).
pub(crate) const EXEC_DEFAULT_TIMEOUT: f64 = 120.0;
/// The longest a command may be given (seconds); the trial's remaining working time bounds it too.
pub(crate) const EXEC_MAX_TIMEOUT: f64 = 600.0;
/// Bytes of stdout and of stderr returned (and traced) per command.
pub(crate) const EXEC_OUTPUT_CAP: usize = 64 * 1024;
/// Bytes of a command line.
pub(crate) const EXEC_MAX_COMMAND: usize = 64 * 1024;

/// An exec call: one command line, answered from the process it ran.
pub(super) enum Exec {}

impl Call for Exec {
    type Asked = ExecAsk;
    type Answer<'a> = ProcessOutcome;
    type Body<'a> = Value;
}

/// `POST /ablate/v1/exec`, the one exec API.
struct ExecApi;

impl Adapter<Exec> for ExecApi {
    fn read(&self, body: Value) -> Result<ExecAsk, BadRequest> {
        read_exec(body)
    }
    fn reply(&self, out: &ProcessOutcome) -> Value {
        json!({
            "exit_code": out.exit_code,
            "timed_out": out.timed_out,
            "stdout": out.stdout.text(),
            "stderr": out.stderr.text(),
            "truncated": out.stdout.truncated() || out.stderr.truncated(),
            "duration_ms": out.duration.as_millis() as u64,
        })
    }
}

/// What an exec request asks.
#[derive(Debug)]
pub(super) struct ExecAsk {
    command: String,
    timeout: f64,
    stdin: Option<String>,
}

/// An exec request's body: a null reads as an absent value, a key not listed is refused.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecBody {
    command: Option<ExecCommand>,
    timeout_sec: Option<ExecTimeout>,
    stdin: Option<ExecStdin>,
}

const EXEC_COMMAND: &str = "`command` must be a string: a bash command line";

/// A bash command line: not blank, at most [`EXEC_MAX_COMMAND`] bytes.
struct ExecCommand(String);

impl<'de> serde::Deserialize<'de> for ExecCommand {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        wire::checked(d, |v| match v {
            Value::String(c) if c.trim().is_empty() => Err("`command` is empty".to_string()),
            Value::String(c) if c.len() > EXEC_MAX_COMMAND => {
                Err(format!("`command` exceeds {EXEC_MAX_COMMAND} bytes"))
            }
            Value::String(c) => Ok(ExecCommand(c)),
            _ => Err(EXEC_COMMAND.to_string()),
        })
    }
}

/// Seconds the command may run: positive and finite, cut to [`EXEC_MAX_TIMEOUT`].
struct ExecTimeout(f64);

impl<'de> serde::Deserialize<'de> for ExecTimeout {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        wire::checked(d, |v| match v.as_f64() {
            Some(t) if t > 0.0 && t.is_finite() => Ok(ExecTimeout(t.min(EXEC_MAX_TIMEOUT))),
            _ => Err("`timeout_sec` must be a positive number of seconds".to_string()),
        })
    }
}

/// The command's standard input: a string of at most [`MAX_REQUEST_BYTES`].
struct ExecStdin(String);

impl<'de> serde::Deserialize<'de> for ExecStdin {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        wire::checked(d, |v| match v {
            Value::String(s) if s.len() <= MAX_REQUEST_BYTES => Ok(ExecStdin(s)),
            _ => Err("`stdin` must be a string".to_string()),
        })
    }
}

fn read_exec(body: Value) -> Result<ExecAsk, BadRequest> {
    if !body.is_object() {
        return Err("the body must be a JSON object: {\"command\": \"...\"}".into());
    }
    let b: ExecBody = wire::from_body(body)?;
    Ok(ExecAsk {
        command: b.command.ok_or(EXEC_COMMAND)?.0,
        timeout: b.timeout_sec.map_or(EXEC_DEFAULT_TIMEOUT, |t| t.0),
        stdin: b.stdin.map(|s| s.0),
    })
}

/// An exec request from an authorized harness: one trace line whatever becomes of it.
pub(super) async fn exec_request(meter: Arc<TrialMeter>, body: Result<Bytes, bool>) -> Resp {
    let refusal = |status, kind: &str, message: &str, limit: Option<&str>| {
        refusal(Api::OpenAi, status, kind, message, limit)
    };
    let n = meter.next_exec();
    let mut step = meter.blank_step(n);
    let received = as_received(&body);
    let mut ran = false;
    let outcome: Result<Resp, (Resp, Value)> = async {
        let v = json_of(body, Api::OpenAi)?;
        let ask = ExecApi.read(v).map_err(|e| bad_request(Api::OpenAi, &e))?;
        let target = meter.exec.get().cloned().ok_or_else(|| refusal(StatusCode::NOT_FOUND, "not_found", "no exec endpoint in this trial", None))?;
        // One command at a time; the budget is looked at once it is this one's turn.
        let _turn = meter.exec_turn.lock().await;
        let left = {
            let st = meter.state.lock().unwrap();
            let limit =
                st.exhausted.or_else(|| (meter.working_in(&st).as_secs_f64() >= meter.budget.max_working_seconds).then_some(BudgetLimit::WorkingSeconds));
            if let Some(limit) = limit {
                let name = limit.name();
                return Err(refusal(
                    StatusCode::TOO_MANY_REQUESTS,
                    "budget_exhausted",
                    &format!("budget exhausted ({name}): the trial's {name} budget is spent; no further commands are run"),
                    Some(name),
                ));
            }
            meter.budget.max_working_seconds - meter.working_in(&st).as_secs_f64()
        };
        ran = true;
        let timeout = ask.timeout.min(left).max(0.1);
        if timeout < ask.timeout {
            step.notes.push(format!("timeout_sec: {timeout:.1} (what remains of the working time)"));
        }
        let out = target.shell(&ask.command, Duration::from_secs_f64(timeout), EXEC_OUTPUT_CAP, ask.stdin.as_deref().map(str::as_bytes)).await;
        step.latency_ms = out.duration.as_millis() as u64;
        let reply = ExecApi.reply(&out);
        step.reply = Some(reply.clone());
        Ok(json_response(StatusCode::OK, &reply))
    }
    .await;
    let resp = settle(outcome, &mut step);
    step.notes.insert(0, "exec".into());
    // A refused request is traced as an excerpt, as a refused chat request is.
    let received = json!({"exec": received});
    meter.trace(step, if ran { received } else { refused_excerpt(&received) });
    let mut resp = resp;
    meter.budget_headers(resp.headers_mut());
    resp
}

#[cfg(test)]
mod exec_tests {
    use super::read_exec;
    use serde_json::json;

    #[test]
    fn exec_requests_are_read_and_each_fault_names_its_key() {
        let a = read_exec(json!({"command": "ls", "timeout_sec": 5000, "stdin": "x"})).unwrap();
        // A timeout above the cap is cut to 600 s; an absent one is 120 s.
        assert_eq!((a.command.as_str(), a.timeout, a.stdin.as_deref()), ("ls", 600.0, Some("x")));
        let a = read_exec(json!({"command": "ls", "timeout_sec": null, "stdin": null})).unwrap();
        assert_eq!((a.timeout, a.stdin), (120.0, None));
        let refused = |body: serde_json::Value| {
            let e = read_exec(body).unwrap_err();
            (e.param, e.message)
        };
        let key = |k: &str| Some(k.to_string());
        assert_eq!(
            refused(json!({"command": "ls", "user": "root"})),
            (
                key("user"),
                "unknown field `user`, expected one of `command`, `timeout_sec`, `stdin`".into()
            )
        );
        assert_eq!(
            refused(json!({})),
            (None, "`command` must be a string: a bash command line".into())
        );
        assert_eq!(
            refused(json!({"command": "  "})),
            (key("command"), "`command` is empty".into())
        );
        assert_eq!(
            refused(json!({"command": "x".repeat(64 * 1024 + 1)})),
            (key("command"), "`command` exceeds 65536 bytes".into())
        );
        assert_eq!(
            refused(json!({"command": "ls", "timeout_sec": -1})),
            (key("timeout_sec"), "`timeout_sec` must be a positive number of seconds".into())
        );
        assert_eq!(
            refused(json!({"command": "ls", "stdin": 3})),
            (key("stdin"), "`stdin` must be a string".into())
        );
        assert_eq!(
            refused(json!(["ls"])),
            (None, r#"the body must be a JSON object: {"command": "..."}"#.into())
        );
    }
}
