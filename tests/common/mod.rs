//! Scripted model servers on loopback, and experiment helpers, for tests.
#![allow(dead_code)]

pub mod corpus;

use serde_json::{Value, json};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub delay: Duration,
}

impl Reply {
    pub fn json(v: Value) -> Reply {
        Reply { status: 200, headers: vec![], body: v.to_string(), delay: Duration::ZERO }
    }
    pub fn status(status: u16, body: &str) -> Reply {
        Reply { status, headers: vec![], body: body.to_string(), delay: Duration::ZERO }
    }
    pub fn header(mut self, k: &str, v: &str) -> Reply {
        self.headers.push((k.into(), v.into()));
        self
    }
    pub fn delayed(mut self, d: Duration) -> Reply {
        self.delay = d;
        self
    }
}

/// What a handler sees: path, parsed body (Null for GET), and the index of
/// this request among the requests to chat endpoints.
pub type Handler = Arc<dyn Fn(&str, &Value, usize) -> Reply + Send + Sync>;

pub struct Server {
    pub url: String,
    /// Bodies of chat requests, in arrival order.
    pub chats: Arc<Mutex<Vec<Value>>>,
    /// Request heads (request line and headers) of chat requests.
    pub heads: Arc<Mutex<Vec<String>>>,
    /// The mock server; it stops when dropped.
    _mock: Option<wiremock::MockServer>,
}

/// A model endpoint on loopback (wiremock) answering every request with
/// `handler`'s reply. A body delimited by the connection's close, which an
/// HTTP library will not send, needs `start_unframed`'s server instead.
pub async fn start(handler: Handler) -> Server {
    let mock = wiremock::MockServer::start().await;
    let (chats, heads) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
    let responder = Responder { handler, chats: chats.clone(), heads: heads.clone() };
    wiremock::Mock::given(wiremock::matchers::any()).respond_with(responder).mount(&mock).await;
    Server { url: mock.uri(), chats, heads, _mock: Some(mock) }
}

struct Responder {
    handler: Handler,
    chats: Arc<Mutex<Vec<Value>>>,
    heads: Arc<Mutex<Vec<String>>>,
}

impl wiremock::Respond for Responder {
    fn respond(&self, req: &wiremock::Request) -> wiremock::ResponseTemplate {
        let path = req.url.path();
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let index = if path.ends_with("/chat/completions") || path == "/api/chat" {
            let mut head = format!("{} {} HTTP/1.1", req.method, path);
            for (k, v) in req.headers.iter() {
                head.push_str(&format!("\r\n{k}: {}", v.to_str().unwrap_or("")));
            }
            self.heads.lock().unwrap().push(head);
            let mut c = self.chats.lock().unwrap();
            c.push(body.clone());
            c.len() - 1
        } else {
            usize::MAX
        };
        let reply = (self.handler)(path, &body, index);
        let mut t = wiremock::ResponseTemplate::new(reply.status)
            .set_body_raw(reply.body.into_bytes(), "application/json")
            .set_delay(reply.delay);
        for (k, v) in &reply.headers {
            t = t.insert_header(k.as_str(), v.as_str());
        }
        t
    }
}

/// A server that answers chat requests with `body` and no Content-Length, the
/// body running until it closes the connection (an HTTP/1.0-style reply no
/// HTTP library sends); other paths get `meta`'s replies the same way.
pub async fn start_unframed(body: Arc<String>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                // The request head is enough to choose the reply; its body is not read.
                let mut buf = Vec::new();
                let mut tmp = [0u8; 8192];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tokio::time::timeout(Duration::from_secs(10), sock.read(&mut tmp)).await {
                        Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&tmp[..n]),
                        _ => return,
                    }
                }
                let head = String::from_utf8_lossy(&buf);
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                let reply = meta(&path).unwrap_or_else(|| Reply::status(200, &body));
                let out = format!(
                    "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
                    reply.status
                );
                let _ = sock.write_all(out.as_bytes()).await;
                let _ = sock.write_all(reply.body.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    Server { url, chats: Arc::default(), heads: Arc::default(), _mock: None }
}

pub fn openai_text(text: &str) -> Reply {
    Reply::json(json!({
        "id": "x", "object": "chat.completion", "system_fingerprint": "fp_test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120, "prompt_tokens_details": {"cached_tokens": 10}}
    }))
}

pub fn openai_tool(id: &str, name: &str, args: &str) -> Reply {
    Reply::json(json!({
        "id": "x", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": args}}]}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    }))
}

pub fn ollama_text(text: &str) -> Reply {
    Reply::json(json!({
        "model": "m", "message": {"role": "assistant", "content": text}, "done": true, "done_reason": "stop",
        "prompt_eval_count": 90, "eval_count": 15
    }))
}

/// Reachability and identity endpoints of both providers.
pub fn meta(path: &str) -> Option<Reply> {
    match path {
        "/v1/models" => Some(Reply::json(json!({"data": [{"id": "m"}]}))),
        "/api/show" => Some(Reply::json(json!({"digest": "sha256:feedface", "details": {}}))),
        "/api/tags" => Some(Reply::json(
            json!({"models": [{"name": "m:latest", "model": "m:latest", "digest": "feedface"}]}),
        )),
        _ => None,
    }
}

pub const WRONG_ADD: &str =
    "Here it is:\n```python add.py\ndef add(a, b):\n    return a - b\n```\n";
pub const RIGHT_ADD: &str = "Fixed:\n```python add.py\ndef add(a, b):\n    return a + b\n```\nDONE";

/// Two arms: `a`, and `b` taking the first fenced block of a reply.
pub const TWO_ARMS: &str = "[arms.a]\n[arms.b]\nedit_format = \"first_fenced\"\n";

/// Messages of a chat request whose content contains `needle`.
pub fn count_messages(body: &Value, needle: &str) -> usize {
    body["messages"]
        .as_array()
        .map(|ms| {
            ms.iter().filter(|m| m["content"].as_str().unwrap_or("").contains(needle)).count()
        })
        .unwrap_or(0)
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/suites").join(name)
}

/// A copy of the tiny suite with every check timeout set to `secs`.
pub fn tiny_with_timeout(dir: &Path, secs: f64) -> PathBuf {
    let dst = dir.join("tiny");
    ablate::sandbox::copy_tree(&fixture("tiny"), &dst).unwrap();
    for task in ["add-two", "is-even"] {
        let p = dst.join(task).join("task.toml");
        let t = std::fs::read_to_string(&p)
            .unwrap()
            .replace("timeout_seconds = 10", &format!("timeout_seconds = {secs}"));
        std::fs::write(p, t).unwrap();
    }
    dst
}

pub struct Cfg<'a> {
    pub suite: &'a Path,
    pub tasks: &'a [&'a str],
    pub provider: &'a str,
    pub url: &'a str,
    pub trials: u32,
    pub arms: &'a str,
    pub max_steps: u32,
    pub max_total_tokens: u64,
    pub max_working_seconds: f64,
    pub model_extra: &'a str,
    /// Extra top-level TOML (e.g. a [harness] table).
    pub top_extra: &'a str,
    /// Extra lines of the [experiment] table (e.g. `pull = "never"`).
    pub experiment_extra: String,
}

impl<'a> Cfg<'a> {
    pub fn new(suite: &'a Path, provider: &'a str, url: &'a str, arms: &'a str) -> Cfg<'a> {
        Cfg {
            suite,
            tasks: &["add-two"],
            provider,
            url,
            trials: 1,
            arms,
            max_steps: 4,
            max_total_tokens: 100_000,
            max_working_seconds: 60.0,
            model_extra: "",
            top_extra: "",
            experiment_extra: String::new(),
        }
    }

    pub fn write(&self, dir: &Path) -> PathBuf {
        let tasks = self.tasks.iter().map(|t| format!("\"{t}\"")).collect::<Vec<_>>().join(", ");
        let text = format!(
            "[experiment]\nname = \"t\"\nsuite = \"{}\"\ntasks = [{tasks}]\ntrials = {}\nseed = 3\n{}\n[budget]\nmax_steps = {}\nmax_output_tokens_per_step = 200\nmax_total_tokens = {}\nmax_working_seconds = {}\n{}\n\n[[models]]\nname = \"m\"\nprovider = \"{}\"\nmodel = \"m\"\nendpoint = \"{}\"\ntemperature = 0.0\nretry = {{ backoff = \"exponential\", max_attempts = 3, base_ms = 10, max_ms = 50 }}\n{}\n\n{}\n",
            self.suite.display(),
            self.trials,
            self.experiment_extra,
            self.max_steps,
            self.max_total_tokens,
            self.max_working_seconds,
            self.top_extra,
            self.provider,
            self.url,
            self.model_extra,
            self.arms
        );
        let p = dir.join("exp.toml");
        std::fs::write(&p, text).unwrap();
        p
    }
}

/// A finished run as the tests look at it: the runner's summary and the
/// records read back from its trials.jsonl, in file order.
#[derive(Debug)]
pub struct Ran {
    pub dir: PathBuf,
    pub planned: usize,
    pub ran_now: usize,
    pub records: Vec<ablate::record::TrialRecord>,
    pub summary: ablate::runner::RunSummary,
}

impl From<ablate::runner::RunSummary> for Ran {
    fn from(summary: ablate::runner::RunSummary) -> Ran {
        let records =
            ablate::record::jsonl::read(&summary.dir.join("trials.jsonl")).unwrap().records;
        Ran {
            dir: summary.dir.clone(),
            planned: summary.planned,
            ran_now: summary.ran_now,
            records,
            summary,
        }
    }
}

/// `ablate run CONFIG --results RESULTS --plain`, then `extra`: a run as most tests start one.
pub fn run_args<'a>(config: &'a Path, results: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args =
        vec!["run", config.to_str().unwrap(), "--results", results.to_str().unwrap(), "--plain"];
    args.extend(extra);
    args
}

/// `ablate run CONFIG --resume RUN --plain`.
pub fn resume_args<'a>(config: &'a Path, run: &'a Path) -> Vec<&'a str> {
    vec!["run", config.to_str().unwrap(), "--resume", run.to_str().unwrap(), "--plain"]
}

/// One run of arm `b` (every component off) on the tiny suite's add-two task against the
/// OpenAI-compatible `url`, config and results in `dir`.
pub async fn run_tiny(dir: &Path, url: &str) -> Ran {
    let suite = fixture("tiny");
    run(&Cfg::new(&suite, "openai", url, "[arms.b]\n").write(dir), dir).await
}

/// One run of arm `a` on the tiny suite's add-two task under `harness` (a `[harness]` table)
/// against the OpenAI-compatible `url`, the config in `dir`, the results in `dir/results`.
pub async fn run_harness(dir: &Path, url: &str, harness: &str) -> Ran {
    let suite = fixture("tiny");
    let mut cfg = Cfg::new(&suite, "openai", url, "[arms.a]\n");
    cfg.top_extra = harness;
    run(&cfg.write(dir), &dir.join("results")).await
}

pub async fn run(config: &Path, results: &Path) -> Ran {
    try_run(config, results, 2).await.unwrap()
}

/// A run in process with `jobs` trials at once; setup errors come back.
pub async fn try_run(
    config: &Path,
    results: &Path,
    jobs: usize,
) -> Result<Ran, ablate::runner::RunError> {
    let exp = ablate::experiment::config::load(config).unwrap();
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    // The exports too, as `ablate run` writes them.
    let exports = std::sync::Arc::new(ablate::report::live::LiveExports::new(Default::default()));
    let opts = ablate::runner::RunOptions {
        jobs,
        shard: None,
        results_dir: results.to_path_buf(),
        resume: None,
        run_id: None,
        allow_model_change: false,
        reporters: vec![exports.clone()],
        engine: Default::default(),
        container_engine: None,
    };
    let summary = within(RUN_LIMIT, "the run", ablate::runner::run(exp, suite, opts)).await?;
    let exported = within(
        RUN_LIMIT,
        "the final exports",
        tokio::task::spawn_blocking(move || exports.finish()),
    )
    .await
    .unwrap();
    assert!(exported.is_ok_and(|e| e.report.is_ok()), "the final exports are written");
    Ok(Ran::from(summary))
}

/// Every process on the machine: (pid, parent pid, uid, command line).
fn processes() -> Vec<(u32, u32, u32, String)> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(status) = std::fs::read_to_string(e.path().join("status")) else { continue };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        };
        let (Some(ppid), Some(uid)) = (field("PPid:"), field("Uid:")) else { continue };
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        found.push((pid, ppid, uid, String::from_utf8_lossy(&cmd).replace('\0', " ")));
    }
    found
}

fn is_jail_uid(uid: u32) -> bool {
    (ablate::sandbox::isolation::UID_BASE
        ..ablate::sandbox::isolation::UID_BASE + ablate::sandbox::isolation::UID_SLOTS)
        .contains(&uid)
}

/// Processes under a jail uid that this test process's own jails left: each
/// uid it leased is taken again while looking (so no other ablate process on
/// the machine can be using it); a uid still held (a jail of a test running
/// now) is not looked at. Other runs' and tests' jails are never seen.
pub fn sandbox_processes() -> Vec<String> {
    let mut uids = ablate::sandbox::isolation::leased_uids();
    uids.sort();
    uids.dedup();
    processes_with_uids(&uids)
}

/// Processes running under one of `uids`, looked at while holding each uid's
/// lease; a uid another live process holds is skipped.
pub fn processes_with_uids(uids: &[u32]) -> Vec<String> {
    let held: Vec<_> = uids
        .iter()
        .filter_map(|u| ablate::sandbox::isolation::try_lease(*u).ok().flatten())
        .collect();
    let mine: std::collections::HashSet<u32> = held.iter().map(|l| l.uid()).collect();
    let found = processes()
        .into_iter()
        .filter(|(_, _, uid, _)| mine.contains(uid))
        .map(|(pid, _, uid, cmd)| format!("pid {pid} uid {uid}: {cmd}"))
        .collect();
    drop(held);
    found
}

/// The grader's checks (its runner.py) under a jail uid that descend from
/// `root` (an ablate process this test started): (pid, uid). Other jailed
/// processes (the setup's start of the interpreter) are not checks.
pub fn running_checks(root: u32) -> Vec<(u32, u32)> {
    let checks: std::collections::HashSet<u32> = processes()
        .into_iter()
        .filter(|(_, _, _, cmd)| cmd.contains("/ablate/runner.py"))
        .map(|(pid, _, _, _)| pid)
        .collect();
    jail_descendants(root).into_iter().filter(|(pid, _)| checks.contains(pid)).collect()
}

/// The processes under a jail uid that descend from `root` (an ablate
/// process this test started): (pid, uid).
pub fn jail_descendants(root: u32) -> Vec<(u32, u32)> {
    let all = processes();
    let mut family = std::collections::HashSet::from([root]);
    loop {
        let before = family.len();
        for (pid, ppid, _, _) in &all {
            if family.contains(ppid) {
                family.insert(*pid);
            }
        }
        if family.len() == before {
            break;
        }
    }
    all.into_iter()
        .filter(|(pid, _, uid, _)| family.contains(pid) && is_jail_uid(*uid))
        .map(|(pid, _, uid, _)| (pid, uid))
        .collect()
}

/// Whether a process is alive (not gone, not a zombie).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

pub fn traces(dir: &Path, trial_id: &str) -> Vec<ablate::record::TraceStep> {
    ablate::record::jsonl::read(&dir.join("traces").join(format!("{trial_id}.jsonl")))
        .unwrap()
        .records
}

/// How long an in-process run (and its exports) may take before the test fails.
/// The tests' multi-thread runtimes keep timers firing while a worker is busy.
pub const RUN_LIMIT: Duration = Duration::from_secs(300);

/// `fut`'s output, or a panic naming `what` once `limit` has passed.
pub async fn within<T>(limit: Duration, what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {limit:?}"))
}

/// SIGKILL to every process of the group `pgid` (a group that is gone gives ESRCH, ignored).
pub fn kill_group(pgid: Option<u32>) {
    if let Some(pgid) = pgid.and_then(|p| rustix::process::Pid::from_raw(p as i32)) {
        let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
    }
}

/// Has the child `pid` exited? Asked with WNOWAIT: the child stays a zombie, so
/// its pid (the id of its process group) cannot be reused before the group is killed.
fn exited(pid: u32) -> bool {
    use rustix::process::{Pid, WaitId, WaitIdOptions, waitid};
    let Some(pid) = Pid::from_raw(pid as i32) else { return true };
    match waitid(
        WaitId::Pid(pid),
        WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
    ) {
        Ok(status) => status.is_some(),
        // Already reaped (ECHILD): nothing left to wait for.
        Err(_) => true,
    }
}

/// A pipe read to its end on a thread of its own; the bytes arrive on the channel.
fn drain(pipe: Option<impl Read + Send + 'static>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut buf);
        }
        let _ = tx.send(buf);
    });
    rx
}

/// How long stdout and stderr may stay open after the command's group is dead.
const PIPE_GRACE: Duration = Duration::from_secs(5);

/// Run `cmd` to its end, at most `limit`: stdin null, stdout and stderr piped
/// and read on threads, the command in a process group of its own. Past the
/// limit the group is killed and the test panics naming the command; after the
/// exit the group is killed too (a grandchild left behind would hold the pipes
/// open), and the pipes' ends are waited for a few seconds at most.
pub fn output_within(cmd: &mut std::process::Command, limit: Duration) -> Output {
    use std::os::unix::process::CommandExt;
    let what = format!("{cmd:?}");
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let pid = child.id();
    let (out, err) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let deadline = Instant::now() + limit;
    while !exited(pid) {
        if Instant::now() >= deadline {
            kill_group(Some(pid));
            let _ = child.wait();
            panic!("{what} did not finish within {limit:?}: its process group was killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    kill_group(Some(pid));
    let status = child.wait().unwrap();
    let pipe = |rx: mpsc::Receiver<Vec<u8>>, name: &str| {
        rx.recv_timeout(PIPE_GRACE)
            .unwrap_or_else(|_| panic!("{what}: {name} still open {PIPE_GRACE:?} after the exit"))
    };
    Output { status, stdout: pipe(out, "stdout"), stderr: pipe(err, "stderr") }
}

/// [`output_within`], as (exit code, stdout, stderr): the code -1 when a signal ended it.
pub fn code_and_output(cmd: &mut std::process::Command, limit: Duration) -> (i32, String, String) {
    let out = output_within(cmd, limit);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `output_within` for a tokio command, awaited: the same deadline, process
/// group and kills, and kill_on_drop should the test's future be dropped.
pub async fn output_within_async(cmd: &mut tokio::process::Command, limit: Duration) -> Output {
    let what = format!("{cmd:?}");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let pid = child.id().expect("a child not yet waited for has a pid");
    let read = |pipe: Option<Box<dyn tokio::io::AsyncRead + Send + Unpin>>| {
        tokio::spawn(async move {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf).await;
            }
            buf
        })
    };
    let out = read(child.stdout.take().map(|p| Box::new(p) as _));
    let err = read(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + limit;
    while !exited(pid) {
        if Instant::now() >= deadline {
            kill_group(Some(pid));
            let _ = child.wait().await;
            panic!("{what} did not finish within {limit:?}: its process group was killed");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    kill_group(Some(pid));
    let status = child.wait().await.unwrap();
    let stdout = within(PIPE_GRACE, &format!("{what}: stdout after the exit"), out).await.unwrap();
    let stderr = within(PIPE_GRACE, &format!("{what}: stderr after the exit"), err).await.unwrap();
    Output { status, stdout, stderr }
}
