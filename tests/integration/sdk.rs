//! The gateway's conformance suite: the official `openai`, `anthropic` and
//! `ollama` Python clients (pinned, from PyPI, in target/sdk-venv made by
//! make sdk-venv), each run as an external harness in the sandbox
//! through ablate's gateway to a scripted model server: chat, streaming,
//! tools, structured output, the Responses API (with a stored response
//! continued), the Messages API (streamed too), Ollama's chat, stream,
//! generate and show. Without the venv these tests are skipped, loudly; with
//! CI set they fail.

use crate::common;

use ablate::record::TrialStatus;
use common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const CLIENTS: [&str; 16] = [
    "openai-chat",
    "openai-chat-stream",
    "openai-tools",
    "openai-structured",
    "openai-responses",
    "openai-responses-stream",
    "openai-responses-tools",
    "anthropic",
    "anthropic-stream",
    "anthropic-tools",
    "ollama",
    "ollama-stream",
    "ollama-generate",
    "ollama-show",
    "openai-embed",
    "ollama-embed",
];

fn venv_python() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/sdk-venv/bin/python");
    if p.exists() {
        return Some(p);
    }
    if std::env::var_os("CI").is_some() {
        panic!("target/sdk-venv is missing: run make sdk-venv (make test does)");
    }
    eprintln!(
        "\n*** SKIPPED: the SDK conformance tests need target/sdk-venv (make sdk-venv; PyPI) ***\n"
    );
    None
}

/// The scripted model: a tool call first when tools are offered and no result
/// came back yet, JSON when a JSON schema is asked, else the fix.
fn upstream() -> Handler {
    Arc::new(|path, body, _n| {
        if let Some(m) = meta(path) {
            return m;
        }
        if path == "/v1/embeddings" {
            // Input i: [i + 0.5, -1.25, 0.375] (exact in float32), 3 tokens an input.
            let n = body["input"].as_array().map_or(1, Vec::len);
            let data: Vec<Value> = (0..n).map(|i| json!({"object": "embedding", "index": i, "embedding": [i as f64 + 0.5, -1.25, 0.375]})).collect();
            return Reply::json(
                json!({"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 3 * n, "total_tokens": 3 * n}}),
            );
        }
        let has_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
        let answered =
            body["messages"].as_array().is_some_and(|ms| ms.iter().any(|m| m["role"] == "tool"));
        if has_tools && !answered {
            return openai_tool("call_7", "read_file", "{\"path\": \"add.py\"}");
        }
        if body["response_format"]["type"] == "json_schema" {
            return openai_text(&json!({"code": "def add(a, b):\n    return a + b\n"}).to_string());
        }
        openai_text(RIGHT_ADD)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_clients_work_through_the_gateway() {
    let Some(python) = venv_python() else { return };
    let server = start(upstream()).await;
    let dir = tempfile::tempdir().unwrap();
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/harnesses/sdk");
    let values: Vec<String> = CLIENTS.iter().map(|c| format!("\"{c}\"")).collect();
    let harness = format!(
        "[harness]\nkind = \"external\"\ncommand = [\"python3\", \"{{harness}}/agent.py\"]\nfiles = [\"{}\"]\npython = \"{}\"\ncomponents.client = [{}]\n",
        agent.display(),
        python.display(),
        values.join(", ")
    );
    let mut arms = String::new();
    for c in CLIENTS {
        arms.push_str(&format!("[arms.{c}]\nclient = \"{c}\"\n"));
    }
    let suite = fixture("tiny");
    let mut cfg = Cfg::new(&suite, "openai", &server.url, &arms);
    cfg.top_extra = &harness;
    cfg.model_extra = "context_tokens = 4096\n";
    cfg.max_steps = 4;
    cfg.max_working_seconds = 60.0;
    let config = cfg.write(dir.path());
    let ran = run(&config, &dir.path().join("results")).await;
    let mut failures = Vec::new();
    let mut seen: std::collections::BTreeMap<String, Value> = Default::default();
    for r in &ran.records {
        let cmd = r.harness_command.as_ref().unwrap();
        let line = cmd.stdout_tail.lines().find_map(|l| l.strip_prefix("SEEN "));
        match line {
            Some(l) => {
                seen.insert(r.arm.clone(), serde_json::from_str(l).unwrap());
            }
            None => failures.push(format!("{}: no SEEN line; stderr:\n{}", r.arm, cmd.stderr_tail)),
        }
        if r.status != TrialStatus::Passed {
            failures.push(format!("{}: {:?} ({:?})", r.arm, r.status, r.error));
        }
        // Every call went through the gateway and was counted; nothing was refused.
        assert_eq!(cmd.refused_requests, 0, "{}: {cmd:?}", r.arm);
        assert!(cmd.first_model_call_seconds.is_some(), "{}", r.arm);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert_eq!(ran.records.len(), CLIENTS.len());
    // What each client returned, as it parsed it.
    assert_eq!(seen["openai-chat"]["finish"], "stop");
    assert_eq!(seen["openai-chat"]["usage"], json!([100, 20]), "the upstream's usage, passed on");
    assert_eq!(seen["openai-chat-stream"]["usage"], json!([100, 20]));
    assert_eq!(seen["openai-tools"]["call"], json!(["read_file", {"path": "add.py"}]));
    assert_eq!(
        (seen["openai-responses"]["status"].as_str(), &seen["openai-responses"]["usage"]),
        (Some("completed"), &json!([100, 20]))
    );
    assert_eq!(seen["openai-responses-stream"]["deltas"], 1);
    assert_eq!(seen["openai-responses-tools"]["call"], json!(["read_file", {"path": "add.py"}]));
    assert_eq!(
        (seen["anthropic"]["stop_reason"].as_str(), &seen["anthropic"]["usage"]),
        (Some("end_turn"), &json!([100, 20]))
    );
    assert_eq!(seen["anthropic-stream"]["pieces"], 1);
    assert_eq!(
        seen["anthropic-tools"]["call"],
        json!(["read_file", {"path": "add.py"}, "tool_use"])
    );
    assert_eq!(seen["ollama"]["done_reason"], "stop");
    assert_eq!(
        seen["ollama-show"]["context"],
        json!([4096]),
        "the context length where Ollama's clients look for it"
    );
    // Embeddings: the openai client asks base64 by default and decodes float32; Ollama's reads floats.
    assert_eq!(seen["openai-embed"]["vectors"], json!([[0.5, -1.25, 0.375], [1.5, -1.25, 0.375]]));
    assert_eq!(seen["openai-embed"]["usage"], 6);
    assert_eq!(seen["ollama-embed"]["vectors"], json!([[0.5, -1.25, 0.375]]));
    for arm in ["openai-embed", "ollama-embed"] {
        let r = ran.records.iter().find(|r| r.arm == arm).unwrap();
        assert_eq!(r.harness_command.as_ref().unwrap().embedding_calls, 1, "{arm}");
        assert_eq!(r.steps, 1, "{arm}: the embeddings call is not a step; the chat call is");
    }
    // What reached the model: the stop strings, the schema, the continued conversation.
    let chats = server.chats.lock().unwrap().clone();
    let with = |needle: &str| {
        chats.iter().filter(|b| b.to_string().contains(needle)).cloned().collect::<Vec<Value>>()
    };
    assert!(with("</done>").iter().all(|b| b["stop"] == json!(["</done>"])), "stop forwarded");
    assert_eq!(with("</done>").len(), 3, "openai, anthropic and ollama each sent a stop string");
    assert_eq!(with("json_schema")[0]["response_format"]["json_schema"]["name"], "fix");
    // The Responses API's second call continued the stored response: the first question, the
    // call and its output reached the model together.
    let continued: Vec<&Value> = chats
        .iter()
        .filter(|b| {
            b["messages"].as_array().is_some_and(|ms| ms.iter().any(|m| m["role"] == "tool"))
                && b["messages"][0]["role"] == "user"
        })
        .collect();
    assert!(
        continued.len() >= 2,
        "the chat-tools and responses-tools continuations: {continued:?}"
    );
    // A Responses call and an Anthropic call are traced as sent.
    let resp = ran.records.iter().find(|r| r.arm == "openai-responses").unwrap();
    let trace = traces(&ran.dir, &resp.trial_id);
    assert_eq!(trace[0].request["instructions"], "You fix code.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_the_gateway_does_not_serve_are_answered_and_traced() {
    // Plain HTTP, the way a harness would hit them; each endpoint is answered in its API's form.
    let server = start(upstream()).await;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("h");
    std::fs::create_dir_all(&script).unwrap();
    std::fs::write(
        script.join("agent.py"),
        r#"import json, os, urllib.request, urllib.error
base = os.environ["OPENAI_BASE_URL"].rsplit("/v1", 1)[0]
key = os.environ["OPENAI_API_KEY"]
out = {}
def go(method, path, body=None, headers=None):
    h = {"Content-Type": "application/json"}
    h.update(headers if headers is not None else {"Authorization": "Bearer " + key})
    req = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(), headers=h)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
out["model"] = go("GET", "/v1/models/" + os.environ["ABLATE_MODEL"])
out["other_model"] = go("GET", "/v1/models/gpt-9")[0]
out["ps"] = go("GET", "/api/ps")
out["embed"] = go("POST", "/v1/embeddings", {"model": "m", "input": "x"})
out["nowhere"] = go("POST", "/v1/assistants", {"x": 1})
out["lower_bearer"] = go("GET", "/v1/models", headers={"Authorization": "bearer " + key})[0]
out["x_api_key"] = go("GET", "/v1/models", headers={"x-api-key": key})[0]
out["api_key"] = go("GET", "/v1/models", headers={"api-key": key})[0]
out["anthropic_no_key"] = go("POST", "/v1/messages", {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}, headers={})
out["completion"] = go("POST", "/v1/completions", {"model": "m", "prompt": "Fix add.py", "max_tokens": 50})
out["ollama_format"] = go("POST", "/api/chat", {"model": "m", "stream": False, "format": "json", "messages": [{"role": "user", "content": "as json"}]})[0]
out["ollama_api_base"] = os.environ["OLLAMA_API_BASE"] == os.environ["OLLAMA_HOST"] and key in os.environ["OLLAMA_API_BASE"]
out["stop_string"] = go("POST", "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "x"}], "stop": "</x>"})[0]
print("OUT", json.dumps(out))
"#,
    )
    .unwrap();
    let harness = format!(
        "[harness]\nkind = \"external\"\ncommand = [\"python3\", \"{{harness}}/agent.py\"]\nfiles = [\"{}\"]\ncomponents.x = [true, false]\n",
        script.display()
    );
    let ran = run_harness(dir.path(), &server.url, &harness).await;
    let r = &ran.records[0];
    let cmd = r.harness_command.as_ref().unwrap();
    let line = cmd
        .stdout_tail
        .lines()
        .find_map(|l| l.strip_prefix("OUT "))
        .unwrap_or_else(|| panic!("{cmd:?}"));
    let out: Value = serde_json::from_str(line).unwrap();
    assert_eq!(
        out["model"],
        json!([200, {"id": "m", "object": "model", "created": 0, "owned_by": "ablate"}])
    );
    assert_eq!(out["other_model"], 404);
    assert_eq!(out["ps"][1]["models"][0]["name"], "m");
    assert_eq!(out["embed"][0], 200, "{out}");
    assert_eq!(out["embed"][1]["data"][0]["embedding"], json!([0.5, -1.25, 0.375]));
    assert_eq!(out["nowhere"][0], 404);
    assert!(
        out["nowhere"][1]["error"]["message"].as_str().unwrap().contains("POST /v1/assistants"),
        "{out}"
    );
    assert_eq!(
        (out["lower_bearer"].as_u64(), out["x_api_key"].as_u64(), out["api_key"].as_u64()),
        (Some(200), Some(200), Some(200))
    );
    // Anthropic's form of an error.
    assert_eq!(out["anthropic_no_key"][0], 401);
    assert_eq!(out["anthropic_no_key"][1]["type"], "error");
    assert_eq!(out["anthropic_no_key"][1]["error"]["type"], "authentication_error");
    assert_eq!(out["completion"][1]["object"], "text_completion");
    assert_eq!(out["stop_string"], 200);
    assert_eq!(
        (out["ollama_format"].as_u64(), out["ollama_api_base"].as_bool()),
        (Some(200), Some(true))
    );
    // Ollama's `format: "json"` reached the OpenAI-compatible model as its response_format.
    let chats = server.chats.lock().unwrap().clone();
    let json_call = chats
        .iter()
        .find(|b| b.to_string().contains("as json"))
        .expect("the format call reached the model");
    assert_eq!(json_call["response_format"], json!({"type": "json_object"}));
    assert_eq!(
        chats.iter().find(|b| b.to_string().contains("</x>")).unwrap()["stop"],
        json!(["</x>"])
    );
    // The refused requests are in the trace, each a line of its own, and counted.
    let trace = traces(&ran.dir, &r.trial_id);
    let refused: Vec<&str> = trace
        .iter()
        .flat_map(|s| s.notes.iter())
        .filter_map(|n| n.strip_prefix("refused: "))
        .collect();
    assert_eq!(
        refused,
        vec!["GET /v1/models/gpt-9", "POST /v1/assistants", "POST /v1/messages"],
        "{trace:?}"
    );
    assert_eq!(cmd.refused_requests, 3, "{cmd:?}");
    assert_eq!(cmd.embedding_calls, 1, "{cmd:?}");
    // Three model calls: the completion (as one user turn, said in the trace) and two chats.
    assert_eq!(r.steps, 3);
    assert!(trace.iter().any(|s| s.notes.iter().any(|n| n == ablate::gateway::legacy::NOTE)));
}
