//! Every field of every request the gateway reads takes one of four paths
//! (docs/delivery.md): forwarded, fixed by the experiment, refused by name, or
//! recorded in the delivery record as asked and not reached. The fields are
//! the official SDKs' own request types (target/sdk-venv: openai 3.57.0's
//! chat and Responses params, anthropic 2.15.0's Messages params, ollama
//! 0.6.3's `Client.chat`, google-genai 3.6.1's `GenerateContentConfig`, each
//! placed where the SDK's own converter puts it on the Gemini API's wire), so
//! a field an SDK adds is checked the day the pin moves. Without the venv the
//! test is skipped loudly; with CI set it fails.

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
out = {"chat": keys(c.CompletionCreateParamsBase), "responses": keys(r.ResponseCreateParamsBase),
       "messages": keys(m.MessageCreateParamsBase), "ollama": chat}

# Gemini: where google-genai's own converter puts each GenerateContentConfig field on the Gemini
# API's wire (top level or generationConfig), its nested converters and transformers made
# identities; a field it refuses for this API, or never sends (client options), is listed so.
import google.genai.models as g
from google.genai import types
calls = []
g.setv = lambda obj, path, value: calls.append((obj, path))
class Identity:
    def __getattr__(self, name):
        return lambda *a, **k: a[-1]
g.t = Identity()
for name in list(vars(g)):
    if name.endswith("_to_mldev") and name != "_GenerateContentConfig_to_mldev":
        setattr(g, name, lambda *a, **k: a[0])
gemini = []
for field in types.GenerateContentConfig.model_fields:
    calls.clear()
    top = {}
    try:
        g._GenerateContentConfig_to_mldev(None, {field: [1]}, top)
    except ValueError:
        gemini.append(["refused by the SDK", field])
        continue
    gemini += [["top" if o is top else "generationConfig", ".".join(p)] for o, p in calls]
    if not calls:
        gemini.append(["not sent", field])
out["gemini"] = gemini
print(json.dumps(out))
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
        Api::Gemini => json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
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
    path_through(api, &body, field, recorded_as(field))
}

/// The path `body`'s `field` takes through `api`'s reader, the delivery record showing it under
/// `shown`: refused by name, or recorded; Err names what is wrong.
fn path_through(api: Api, body: &Value, field: &str, shown: &str) -> Result<&'static str, String> {
    let asked = match read_request(api, body) {
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
    let d = observe(&asked, body, &sent, &Provider, "m");
    match d.fields.get(shown) {
        Some(seen) if seen.asked.iter().any(|v| v != "(not set)") => Ok("recorded"),
        _ => Err(format!("read, but the delivery record does not show it: {:?}", d.fields.keys())),
    }
}

/// A Gemini field's value of the right shape for the fields the reader types; any other gets a string.
fn gemini_sample(field: &str) -> Value {
    match field {
        "systemInstruction" => json!({"parts": [{"text": "be brief"}]}),
        "tools" => json!([{"functionDeclarations": [{"name": "f", "description": "d"}]}]),
        "toolConfig" => json!({"functionCallingConfig": {"mode": "ANY"}}),
        "temperature" | "topP" => json!(0.5),
        "seed" | "maxOutputTokens" => json!(7),
        "stopSequences" => json!(["</x>"]),
        "responseMimeType" => json!("application/json"),
        "responseJsonSchema" => json!({"type": "object"}),
        "thinkingConfig" => json!({"thinkingBudget": 1024}),
        _ => json!("x"),
    }
}

/// Where a Gemini field shows in the delivery record when not under its own wire path.
fn gemini_recorded_as(place: &str, field: &str) -> String {
    let common = match field {
        "systemInstruction" => "system",
        "toolConfig" => "tool_choice",
        "maxOutputTokens" => "max_tokens",
        "stopSequences" => "stop",
        "responseMimeType" | "responseJsonSchema" => "response_format",
        "thinkingConfig" => "reasoning",
        "topP" => "top_p",
        "temperature" | "seed" | "tools" => field,
        _ if place == "top" => field,
        _ => return format!("generationConfig.{field}"),
    };
    common.to_string()
}

/// The path a Gemini field takes, placed where google-genai puts it (`place`).
fn gemini_path(place: &str, field: &str) -> Result<&'static str, String> {
    let mut body = minimal(Api::Gemini);
    match place {
        "top" => body[field] = gemini_sample(field),
        "generationConfig" => body["generationConfig"] = json!({field: gemini_sample(field)}),
        _ => return Ok("not on the wire"),
    }
    path_through(Api::Gemini, &body, field, &gemini_recorded_as(place, field))
}

#[test]
fn every_gemini_config_field_of_the_sdk_is_forwarded_fixed_refused_or_recorded() {
    let Some(fields) = sdk_fields() else { return };
    let list = fields["gemini"].as_array().unwrap();
    let (mut wrong, mut on_wire) = (Vec::new(), 0);
    for pair in list {
        let (place, field) = (pair[0].as_str().unwrap(), pair[1].as_str().unwrap());
        on_wire += matches!(place, "top" | "generationConfig") as usize;
        if let Err(why) = gemini_path(place, field) {
            wrong.push(format!("gemini {place}.{field}: {why}"));
        }
    }
    // google-genai 3.6.1: 39 config fields, 30 of them on the Gemini API's wire (4 never sent, 5
    // refused by the SDK for the Gemini API).
    println!("gemini: {on_wire} of {} config fields on the wire", list.len());
    assert!(on_wire > 20 && list.len() > on_wire, "{list:?}");
    assert!(
        wrong.is_empty(),
        "{} of {on_wire} fields take no path:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
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
