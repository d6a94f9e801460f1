//! One adapter per wire API, behind one trait: each reads a request of its API
//! into the common form (`wire::Asked`) and writes a reply back from one
//! `ChatReply`, whole or as its API's stream. The call itself (the budget, the
//! model, the meter, the trace) is the same for every API and lives once, in
//! `chat`. Adding an API is a module of its own and a line in `of`.

use super::wire::{self, Api, Asked, BadRequest, ReplyMeta};
use super::{anthropic, gemini, legacy, responses};
use crate::model::ChatReply;
use serde_json::Value;

/// How a stream is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Server-sent events (OpenAI, Anthropic, Gemini).
    Sse,
    /// Newline-delimited JSON (Ollama).
    Ndjson,
}

impl Framing {
    pub fn name(self) -> &'static str {
        match self {
            Framing::Sse => "sse",
            Framing::Ndjson => "ndjson",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Framing::Sse => "text/event-stream",
            Framing::Ndjson => "application/x-ndjson",
        }
    }
}

/// What a reply is written from besides the model's reply: its ids and time,
/// the request as read, and the call's operation id (the Responses API names
/// its items by it).
pub struct Replying<'a> {
    pub meta: &'a ReplyMeta<'a>,
    pub asked: &'a Asked,
    pub operation_id: &'a str,
}

/// One wire API.
pub trait Adapter: Sync {
    /// A request body in the common form; Err names the value at fault.
    fn read(&self, body: &Value) -> Result<Asked, BadRequest>;
    /// The reply as one JSON body.
    fn reply(&self, reply: &ChatReply, r: &Replying) -> Value;
    /// The reply as the API's stream (emulated from the complete reply).
    fn stream(&self, reply: &ChatReply, r: &Replying) -> (Framing, String);
}

/// The adapter of `api`.
pub fn of(api: Api) -> &'static dyn Adapter {
    match api {
        Api::OpenAi => &OpenAiChat,
        Api::Ollama => &OllamaChat,
        Api::Responses => &Responses,
        Api::Anthropic => &Messages,
        Api::Completions => &Completions,
        Api::Generate => &Generate,
        Api::Gemini => &Gemini { stream: false },
        Api::GeminiStream => &Gemini { stream: true },
    }
}

/// Read a request body of `api` (a Gemini request's model is its path's: the caller sets it).
pub fn read_request(api: Api, body: &Value) -> Result<Asked, BadRequest> {
    of(api).read(body)
}

/// OpenAI's `/v1/chat/completions` (`wire`).
struct OpenAiChat;

impl Adapter for OpenAiChat {
    fn read(&self, body: &Value) -> Result<Asked, BadRequest> {
        wire::read_chat(Api::OpenAi, body)
    }
    fn reply(&self, reply: &ChatReply, r: &Replying) -> Value {
        wire::openai_reply(reply, r.meta)
    }
    fn stream(&self, reply: &ChatReply, r: &Replying) -> (Framing, String) {
        (Framing::Sse, wire::openai_sse(reply, r.meta, r.asked.include_usage))
    }
}

/// Ollama's `/api/chat` (`wire`).
struct OllamaChat;

impl Adapter for OllamaChat {
    fn read(&self, body: &Value) -> Result<Asked, BadRequest> {
        wire::read_chat(Api::Ollama, body)
    }
    fn reply(&self, reply: &ChatReply, r: &Replying) -> Value {
        wire::ollama_reply(reply, r.meta)
    }
    fn stream(&self, reply: &ChatReply, r: &Replying) -> (Framing, String) {
        (Framing::Ndjson, wire::ollama_ndjson(reply, r.meta))
    }
}

/// OpenAI's Responses API (`responses`).
struct Responses;

impl Adapter for Responses {
    fn read(&self, body: &Value) -> Result<Asked, BadRequest> {
        responses::read(body)
    }
    fn reply(&self, reply: &ChatReply, r: &Replying) -> Value {
        responses::reply(reply, r.meta, r.asked, &responses::Ids::of(r.operation_id))
    }
    fn stream(&self, reply: &ChatReply, r: &Replying) -> (Framing, String) {
        let ids = responses::Ids::of(r.operation_id);
        (Framing::Sse, responses::sse(reply, r.meta, r.asked, &ids))
    }
}

/// Anthropic's Messages API (`anthropic`).
struct Messages;

impl Adapter for Messages {
    fn read(&self, body: &Value) -> Result<Asked, BadRequest> {
        anthropic::read(body)
    }
    fn reply(&self, reply: &ChatReply, r: &Replying) -> Value {
        anthropic::reply(reply, r.meta)
    }
    fn stream(&self, reply: &ChatReply, r: &Replying) -> (Framing, String) {
        (Framing::Sse, anthropic::sse(reply, r.meta))
    }
}

/// OpenAI's legacy `/v1/completions` (`legacy`).
struct Completions;

impl Adapter for Completions {
    fn read(&self, body: &Value) -> Result<Asked, BadRequest> {
        legacy::read(Api::Completions, body)
    }
    fn reply(&self, reply: &ChatReply, r: &Replying) -> Value {
        legacy::completion(reply, r.meta)
    }
    fn stream(&self, reply: &ChatReply, r: &Replying) -> (Framing, String) {
        (Framing::Sse, legacy::completion_sse(reply, r.meta, r.asked.include_usage))
    }
}

/// Ollama's `/api/generate` (`legacy`).
struct Generate;

impl Adapter for Generate {
    fn read(&self, body: &Value) -> Result<Asked, BadRequest> {
        legacy::read(Api::Generate, body)
    }
    fn reply(&self, reply: &ChatReply, r: &Replying) -> Value {
        legacy::generate(reply, r.meta)
    }
    fn stream(&self, reply: &ChatReply, r: &Replying) -> (Framing, String) {
        (Framing::Ndjson, legacy::generate_ndjson(reply, r.meta))
    }
}

/// Google's Gemini API (`gemini`): `generateContent`, or `streamGenerateContent`.
struct Gemini {
    stream: bool,
}

impl Adapter for Gemini {
    fn read(&self, body: &Value) -> Result<Asked, BadRequest> {
        let mut asked = gemini::read(body, "")?;
        asked.stream = self.stream;
        Ok(asked)
    }
    fn reply(&self, reply: &ChatReply, r: &Replying) -> Value {
        gemini::reply(reply, r.meta)
    }
    fn stream(&self, reply: &ChatReply, r: &Replying) -> (Framing, String) {
        (Framing::Sse, gemini::sse(reply, r.meta))
    }
}
