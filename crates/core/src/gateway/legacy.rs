//! The completion endpoints of the two chat APIs, for clients that still use
//! them: OpenAI's `/v1/completions` and Ollama's `/api/generate`. The
//! experiment's model is a chat model: the prompt is sent as one user turn
//! (after the system prompt Ollama's `system` gives), and the trace says so.

use super::wire::{self, Api, Asked, BadRequest, ReplyMeta};
use crate::model::{ChatReply, Message};
use serde::Deserialize;
use serde_json::{Value, json};

/// The note every such call's trace line carries.
pub const NOTE: &str =
    "a completion endpoint: the prompt was sent as one user turn of the chat model";

/// The keys of a completion request read typed; the others are the chat APIs' (`wire`).
#[derive(Deserialize)]
struct Request {
    prompt: Option<Prompt>,
    /// Ollama's system prompt.
    system: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged, expecting = "expected a string or a list of one string")]
enum Prompt {
    One(String),
    Many(Vec<String>),
}

/// Read a `/v1/completions` or `/api/generate` request.
pub fn read(api: Api, body: &Value) -> Result<Asked, BadRequest> {
    let obj = body.as_object().ok_or("the request body is not a JSON object")?;
    let req: Request = wire::from_json(body, "")?;
    let prompt = match req.prompt {
        Some(Prompt::One(s)) => s,
        Some(Prompt::Many(mut a)) if a.len() == 1 => a.remove(0),
        Some(Prompt::Many(_)) => {
            return Err(BadRequest::naming(
                "prompt",
                "`prompt` as a list is supported with one string only",
            ));
        }
        None => return Err(BadRequest::naming("prompt", "`prompt` is missing")),
    };
    let mut messages = Vec::new();
    if api == Api::Generate
        && let Some(s) = req.system.filter(|s| !s.is_empty())
    {
        messages.push(Message::system(s));
    }
    messages.push(Message::user(prompt));
    let mut asked = Asked::new(messages, Vec::new(), obj.get("model").cloned());
    if api == Api::Completions {
        read_completions_keys(body, &mut asked)?;
    } else {
        read_generate_keys(body, &mut asked)?;
    }
    Ok(asked)
}

/// `/v1/completions`' keys besides the prompt.
fn read_completions_keys(body: &Value, asked: &mut Asked) -> Result<(), BadRequest> {
    let obj = body.as_object().ok_or("the request body is not a JSON object")?;
    let non_null = |k: &str| obj.get(k).filter(|v| !v.is_null());
    wire::read_openai_keys(body, asked)?;
    asked.max_tokens = non_null("max_tokens").map(|v| ("max_tokens", v.clone()));
    if non_null("n").and_then(Value::as_u64).is_some_and(|n| n != 1)
        || non_null("best_of").and_then(Value::as_u64).is_some_and(|n| n != 1)
    {
        return Err(
            "`n` and `best_of` other than 1 are not supported: one completion a call".into()
        );
    }
    const KNOWN: [&str; 10] = [
        "model",
        "prompt",
        "stream",
        "stream_options",
        "temperature",
        "top_p",
        "seed",
        "max_tokens",
        "stop",
        "n",
    ];
    asked.ignored = wire::unread(obj, &KNOWN).collect();
    Ok(())
}

/// `/api/generate`'s keys besides the prompt and the system text; what the
/// chat model cannot be given (`suffix`, `template`, `raw`, ...) refused by name.
fn read_generate_keys(body: &Value, asked: &mut Asked) -> Result<(), BadRequest> {
    let obj = body.as_object().ok_or("the request body is not a JSON object")?;
    let non_null = |k: &str| obj.get(k).filter(|v| !v.is_null());
    wire::read_ollama_keys(body, asked)?;
    asked.response_format = wire::read_ollama_format(non_null("format"), "format")?;
    for k in ["suffix", "template", "raw", "context", "images"] {
        let given = match non_null(k) {
            None => false,
            Some(Value::String(s)) => !s.is_empty(),
            Some(Value::Bool(b)) => *b,
            Some(Value::Array(a)) => !a.is_empty(),
            Some(_) => true,
        };
        if given {
            return Err(BadRequest::naming(
                k,
                format!(
                    "`{k}` is not supported: the prompt is sent as one user turn of the chat model"
                ),
            ));
        }
    }
    // `keep_alive` is not among them: it is recorded as not delivered (by presence).
    const KNOWN: [&str; 11] = [
        "model", "prompt", "system", "stream", "options", "format", "suffix", "template", "raw",
        "context", "images",
    ];
    asked.ignored.extend(wire::unread(obj, &KNOWN));
    Ok(())
}

/// `/v1/completions`' reply.
pub fn completion(reply: &ChatReply, meta: &ReplyMeta) -> Value {
    json!({"id": format!("cmpl-{}", meta.id), "object": "text_completion", "created": meta.created, "model": meta.model, "system_fingerprint": reply.fingerprint,
        "choices": [{"text": reply.text, "index": 0, "logprobs": null, "finish_reason": if wire::openai_finish(reply) == "length" { "length" } else { "stop" }}],
        "usage": {"prompt_tokens": reply.usage.input, "completion_tokens": reply.usage.output, "total_tokens": reply.usage.total()}})
}

/// The same as a stream: the text, the finish, the usage when asked, `[DONE]`.
pub(crate) fn completion_sse(reply: &ChatReply, meta: &ReplyMeta, include_usage: bool) -> String {
    let full = completion(reply, meta);
    let chunk = |text: &str, finish: Value| {
        let mut c = full.clone();
        c["choices"][0]["text"] = json!(text);
        c["choices"][0]["finish_reason"] = finish;
        c["usage"] = Value::Null;
        if !include_usage && let Some(m) = c.as_object_mut() {
            m.remove("usage");
        }
        c
    };
    let mut chunks = vec![
        chunk(&reply.text, Value::Null),
        chunk("", full["choices"][0]["finish_reason"].clone()),
    ];
    if include_usage {
        let mut u = full.clone();
        u["choices"] = json!([]);
        chunks.push(u);
    }
    let mut out: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    out.push_str("data: [DONE]\n\n");
    out
}

fn generate_final(reply: &ChatReply, meta: &ReplyMeta, response: &str) -> Value {
    json!({"model": meta.model, "created_at": meta.created_at, "response": response, "done": true, "done_reason": wire::ollama_done(reply),
        "total_duration": 0, "load_duration": 0, "prompt_eval_count": reply.usage.input, "prompt_eval_duration": 0,
        "eval_count": reply.usage.output, "eval_duration": 0})
}

/// `/api/generate`'s reply.
pub fn generate(reply: &ChatReply, meta: &ReplyMeta) -> Value {
    generate_final(reply, meta, &reply.text)
}

/// The same as Ollama streams it: the text, then the `done` line.
pub(crate) fn generate_ndjson(reply: &ChatReply, meta: &ReplyMeta) -> String {
    let mut lines = Vec::new();
    if !reply.text.is_empty() {
        lines.push(json!({"model": meta.model, "created_at": meta.created_at, "response": reply.text, "done": false}));
    }
    lines.push(generate_final(reply, meta, ""));
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_request_is_one_user_turn_with_its_api_keys() {
        let body = json!({"model": "x", "prompt": "p", "system": "s", "options":
            {"temperature": 0.2, "num_predict": 5, "stop": "\n", "mirostat": 1}});
        let a = read(Api::Generate, &body).unwrap();
        let turns: Vec<_> = a.messages.iter().map(|m| (m.role, m.content.as_str())).collect();
        assert_eq!(turns, [(crate::model::Role::System, "s"), (crate::model::Role::User, "p")]);
        assert!(a.stream, "Ollama streams by default");
        assert_eq!(a.temperature, Some(json!(0.2)));
        assert_eq!(a.max_tokens, Some(("num_predict", json!(5))));
        assert_eq!(a.stop, ["\n"]);
        assert_eq!(a.ignored, ["options.mirostat"]);

        let body = json!({"prompt": ["p"], "stop": ["a", "b"], "max_tokens": 3, "stream": true,
            "stream_options": {"include_usage": true}, "logprobs": 2});
        let a = read(Api::Completions, &body).unwrap();
        assert_eq!((a.messages.len(), a.messages[0].content.as_str()), (1, "p"));
        assert_eq!(a.stop, ["a", "b"]);
        assert!(a.stream && a.include_usage);
        assert_eq!(a.max_tokens, Some(("max_tokens", json!(3))));
        assert_eq!(a.ignored, ["logprobs"]);
    }

    #[test]
    fn requests_it_cannot_forward_are_refused_naming_the_key() {
        for (api, body, message) in [
            (Api::Completions, json!({"model": "m"}), "`prompt` is missing"),
            (
                Api::Completions,
                json!({"prompt": ["a", "b"]}),
                "`prompt` as a list is supported with one string only",
            ),
            (
                Api::Completions,
                json!({"prompt": [1, 2]}),
                "prompt: expected a string or a list of one string",
            ),
            (
                Api::Completions,
                json!({"prompt": "p", "stop": 5}),
                "stop: expected a string or a list of strings",
            ),
            (
                Api::Completions,
                json!({"prompt": "p", "n": 2}),
                "`n` and `best_of` other than 1 are not supported: one completion a call",
            ),
            (
                Api::Completions,
                json!({"prompt": "p", "stream_options": {"include_usage": "yes"}}),
                "stream_options.include_usage: invalid type: string \"yes\", expected a boolean",
            ),
            (
                Api::Generate,
                json!({"prompt": "p", "stream": "no"}),
                "stream: invalid type: string \"no\", expected a boolean",
            ),
            (
                Api::Generate,
                json!({"prompt": "p", "options": 3}),
                "options: invalid type: integer `3`, expected an object of options",
            ),
            (
                Api::Generate,
                json!({"prompt": "p", "options": {"stop": [1]}}),
                "options.stop: expected a string or a list of strings",
            ),
            (
                Api::Generate,
                json!({"prompt": "p", "suffix": "x"}),
                "`suffix` is not supported: the prompt is sent as one user turn of the chat model",
            ),
        ] {
            assert_eq!(
                read(api, &body).err().map(|e| e.message).as_deref(),
                Some(message),
                "{body}"
            );
        }
    }
}
