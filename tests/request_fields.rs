//! Every field of every request the gateway reads takes one of four paths
//! (docs/delivery.md): forwarded, fixed by the experiment, refused by name, or
//! recorded in the delivery record as asked and not reached. The fields are
//! the official SDKs' own request types (target/sdk-venv: openai 3.57.0's
//! chat and Responses params, anthropic 2.15.0's Messages params, ollama
//! 0.6.3's `Client.chat`), so a field an SDK adds is checked the day the pin
//! moves. Without the venv the test is skipped loudly; with CI set it fails.

use ablate::gateway::adapter::read_request;
use ablate::gateway::delivered::observe;
use ablate::gateway::wire::Api;
use ablate::model::{BoxFuture, CallOutcome, ChatRequest, ModelClient, ModelError, Reasoning};
use serde_json::{Value, json};
use std::path::Path;

/// A provider that carries an effort, as OpenAI's chat API does.
struct Provider;
impl ModelClient for Provider {
    fn chat<'a>(&'a self, _: &'a ChatRequest, _: String) -> BoxFuture<'a, CallOutcome> {
        unreachable!("no call is made")
    }
    fn identity(&self) -> BoxFuture<'_, Result<Option<String>, ModelError>> {
        unreachable!("no call is made")
    }
    fn delivers_reasoning(&self, r: &Reasoning) -> Option<Reasoning> {
        Some(r.clone())
    }
}

/// The SDKs' request fields by API, read from their types by Python.
fn sdk_fields() -> Option<Value> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/sdk-venv/bin/python");
    let script = r#"
import inspect, json
from openai.types.chat import completion_create_params as c
from openai.types.responses import response_create_params as r
from anthropic.types import message_create_params as m
import ollama
keys = lambda t: sorted(t.__required_keys__ | t.__optional_keys__)
chat = [p for p in inspect.signature(ollama.Client.chat).parameters if p != "self"]
print(json.dumps({"chat": keys(c.CompletionCreateParamsBase), "responses": keys(r.ResponseCreateParamsBase),
                  "messages": keys(m.MessageCreateParamsBase), "ollama": chat}))
"#;
    match std::process::Command::new(&python).args(["-c", script]).output() {
        Ok(out) if out.status.success() => Some(serde_json::from_slice(&out.stdout).unwrap()),
        _ if std::env::var_os("CI").is_some() => {
            panic!("target/sdk-venv does not answer: run make sdk-venv (make test does)")
        }
        _ => {
            eprintln!(
                "\n*** SKIPPED: the request-field walk needs target/sdk-venv (make sdk-venv) ***\n"
            );
            None
        }
    }
}

/// A request of `api` with nothing but what it needs.
fn minimal(api: Api) -> Value {
    match api {
        Api::Responses => json!({"model": "m", "input": "hi"}),
        Api::Anthropic => {
            json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]})
        }
        _ => json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
    }
}

/// A value of the right shape for the fields the readers type; any other field gets a string.
fn sample(field: &str) -> Value {
    match field {
        "tools" | "functions" => json!([]),
        "tool_choice" => json!("auto"),
        "response_format" => json!({"type": "json_object"}),
        "text" => json!({"format": {"type": "json_object"}, "verbosity": "low"}),
        "reasoning" => json!({"effort": "low"}),
        "thinking" => json!({"type": "enabled", "budget_tokens": 1024}),
        "output_config" => json!({"effort": "low"}),
        "stop" | "stop_sequences" => json!(["</x>"]),
        "system" | "instructions" | "reasoning_effort" => json!("low"),
        "temperature" | "top_p" => json!(0.5),
        "seed" | "max_tokens" | "max_completion_tokens" | "max_output_tokens" | "n" => json!(7),
        "store" | "parallel_tool_calls" | "think" | "stream" | "logprobs" => json!(true),
        "stream_options" => json!({"include_usage": true}),
        "options" => json!({"temperature": 0.5, "num_ctx": 8192}),
        "format" => json!("json"),
        _ => json!("x"),
    }
}

/// Where a field shows in the delivery record when it is not recorded under its own name.
fn recorded_as(field: &str) -> &str {
    match field {
        "max_completion_tokens" | "max_output_tokens" => "max_tokens",
        "instructions" | "system" => "system",
        "text" | "format" => "response_format",
        "stop_sequences" => "stop",
        "thinking" | "output_config" | "reasoning_effort" | "think" => "reasoning",
        "options" => "temperature",
        f => f,
    }
}

/// Fields the gateway acts on itself: the conversation, the stream it answers
/// in, and its store of responses.
const CONSUMED: [&str; 6] =
    ["messages", "input", "stream", "stream_options", "store", "previous_response_id"];

/// The path `field` takes through `api`'s reader: Err names what is wrong.
fn path_of(api: Api, field: &str) -> Result<&'static str, String> {
    if CONSUMED.contains(&field) {
        return Ok("consumed");
    }
    let mut body = minimal(api);
    body[field] = sample(field);
    let asked = match read_request(api, &body) {
        Err(e) if e.message.contains(field) => return Ok("refused by name"),
        Err(e) => return Err(format!("refused without naming it: {}", e.message)),
        Ok(a) => a,
    };
    let sent = ChatRequest {
        messages: asked.messages.clone(),
        tools: asked.tools.clone(),
        reasoning: asked.reasoning.clone(),
        stop: asked.stop.clone(),
        tool_choice: asked.tool_choice.clone(),
        response_format: asked.response_format.clone(),
        ..ChatRequest::default()
    };
    let d = observe(&asked, &body, &sent, &Provider, "m");
    match d.fields.get(recorded_as(field)) {
        Some(seen) if seen.asked.iter().any(|v| v != "(not set)") => Ok("recorded"),
        _ => Err(format!("read, but the delivery record does not show it: {:?}", d.fields.keys())),
    }
}

#[test]
fn every_request_field_of_the_sdks_is_forwarded_fixed_refused_or_recorded() {
    let Some(fields) = sdk_fields() else { return };
    let mut wrong = Vec::new();
    let mut counted = 0;
    for (api, key) in [
        (Api::OpenAi, "chat"),
        (Api::Responses, "responses"),
        (Api::Anthropic, "messages"),
        (Api::Ollama, "ollama"),
    ] {
        let list = fields[key].as_array().unwrap();
        assert!(list.len() > 5, "{key}: {list:?}");
        for f in list {
            let f = f.as_str().unwrap();
            counted += 1;
            if let Err(why) = path_of(api, f) {
                wrong.push(format!("{key}.{f}: {why}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {counted} fields take no path:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn an_unknown_field_is_recorded_and_bookkeeping_only_by_presence() {
    // A field no API has is recorded as not delivered; a session id only by its presence.
    assert_eq!(path_of(Api::Responses, "frobnicate"), Ok("recorded"));
    let mut body = minimal(Api::OpenAi);
    body["user"] = json!("u-123");
    let asked = read_request(Api::OpenAi, &body).unwrap();
    let d = observe(&asked, &body, &ChatRequest::default(), &Provider, "m");
    assert_eq!(d.fields["user"].asked.iter().collect::<Vec<_>>(), ["(set)"]);
    // A setting nested beside one the gateway reads is recorded on its own.
    let mut body = minimal(Api::Responses);
    body["text"] = json!({"format": {"type": "text"}, "verbosity": "low"});
    let asked = read_request(Api::Responses, &body).unwrap();
    let d = observe(&asked, &body, &ChatRequest::default(), &Provider, "m");
    assert_eq!(d.fields["text.verbosity"].asked.iter().collect::<Vec<_>>(), ["low"]);
}
