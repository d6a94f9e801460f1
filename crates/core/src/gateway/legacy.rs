//! The completion endpoints of the two chat APIs, for clients that still use
//! them: OpenAI's `/v1/completions` and Ollama's `/api/generate`. The
//! experiment's model is a chat model: the prompt is sent as one user turn
//! (after the system prompt Ollama's `system` gives), and the trace says so.

use super::wire::{self, Api, Asked, ReplyMeta};
use crate::model::{ChatReply, Message};
use serde_json::{Value, json};

/// The note every such call's trace line carries.
pub const NOTE: &str =
    "a completion endpoint: the prompt was sent as one user turn of the chat model";

/// Read a `/v1/completions` or `/api/generate` request.
pub fn read(api: Api, body: &Value) -> Result<Asked, String> {
    let obj = body.as_object().ok_or("the request body is not a JSON object")?;
    let non_null = |k: &str| obj.get(k).filter(|v| !v.is_null());
    let prompt = match non_null("prompt") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => {
            a[0].as_str().unwrap_or("").to_string()
        }
        Some(Value::Array(_)) => {
            return Err("`prompt` as a list is supported with one string only".into());
        }
        Some(_) => return Err("`prompt` is not a string".into()),
        None => return Err("`prompt` is missing".into()),
    };
    let mut messages = Vec::new();
    if api == Api::Generate
        && let Some(s) = non_null("system").and_then(Value::as_str).filter(|s| !s.is_empty())
    {
        messages.push(Message::system(s));
    }
    messages.push(Message::user(prompt));
    let mut asked = Asked::new(messages, Vec::new(), obj.get("model").cloned());
    match api {
        Api::Completions => {
            asked.stream = non_null("stream").and_then(Value::as_bool).unwrap_or(false);
            asked.include_usage = obj
                .get("stream_options")
                .and_then(|o| o.get("include_usage"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            asked.temperature = non_null("temperature").cloned();
            asked.top_p = non_null("top_p").cloned();
            asked.seed = non_null("seed").cloned();
            asked.max_tokens = non_null("max_tokens").map(|v| ("max_tokens", v.clone()));
            asked.stop = wire::read_stop(non_null("stop"), "stop")?;
            if non_null("n").and_then(Value::as_u64).is_some_and(|n| n != 1)
                || non_null("best_of").and_then(Value::as_u64).is_some_and(|n| n != 1)
            {
                return Err(
                    "`n` and `best_of` other than 1 are not supported: one completion a call"
                        .into(),
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
            asked.ignored = obj.keys().filter(|k| !KNOWN.contains(&k.as_str())).cloned().collect();
        }
        _ => {
            asked.stream = non_null("stream").and_then(Value::as_bool).unwrap_or(true);
            if let Some(o) = non_null("options").and_then(Value::as_object) {
                let get = |k: &str| o.get(k).filter(|v| !v.is_null()).cloned();
                asked.temperature = get("temperature");
                asked.top_p = get("top_p");
                asked.seed = get("seed");
                asked.max_tokens = get("num_predict").map(|v| ("num_predict", v));
                asked.stop = wire::read_stop(o.get("stop"), "options.stop")?;
                const KNOWN: [&str; 5] = ["temperature", "top_p", "seed", "num_predict", "stop"];
                asked.ignored.extend(
                    o.keys()
                        .filter(|k| !KNOWN.contains(&k.as_str()))
                        .map(|k| format!("options.{k}")),
                );
            }
            asked.response_format = wire::read_ollama_format(non_null("format"))?;
            for k in ["suffix", "template", "raw", "context", "images"] {
                let given = match non_null(k) {
                    None => false,
                    Some(Value::String(s)) => !s.is_empty(),
                    Some(Value::Bool(b)) => *b,
                    Some(Value::Array(a)) => !a.is_empty(),
                    Some(_) => true,
                };
                if given {
                    return Err(format!(
                        "`{k}` is not supported: the prompt is sent as one user turn of the chat model"
                    ));
                }
            }
            const KNOWN: [&str; 12] = [
                "model",
                "prompt",
                "system",
                "stream",
                "options",
                "format",
                "keep_alive",
                "suffix",
                "template",
                "raw",
                "context",
                "images",
            ];
            asked.ignored.extend(obj.keys().filter(|k| !KNOWN.contains(&k.as_str())).cloned());
        }
    }
    Ok(asked)
}

/// `/v1/completions`' reply.
pub fn completion(reply: &ChatReply, meta: &ReplyMeta) -> Value {
    json!({"id": format!("cmpl-{}", meta.id), "object": "text_completion", "created": meta.created, "model": meta.model, "system_fingerprint": reply.fingerprint,
        "choices": [{"text": reply.text, "index": 0, "logprobs": null, "finish_reason": if wire::openai_finish(reply) == "length" { "length" } else { "stop" }}],
        "usage": {"prompt_tokens": reply.usage.input, "completion_tokens": reply.usage.output, "total_tokens": reply.usage.total()}})
}

/// The same as a stream: the text, the finish, the usage when asked, `[DONE]`.
pub fn completion_sse(reply: &ChatReply, meta: &ReplyMeta, include_usage: bool) -> String {
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
pub fn generate_ndjson(reply: &ChatReply, meta: &ReplyMeta) -> String {
    let mut lines = Vec::new();
    if !reply.text.is_empty() {
        lines.push(json!({"model": meta.model, "created_at": meta.created_at, "response": reply.text, "done": false}));
    }
    lines.push(generate_final(reply, meta, ""));
    lines.iter().map(|l| format!("{l}\n")).collect()
}
