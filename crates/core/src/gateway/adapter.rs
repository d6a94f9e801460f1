//! One adapter per wire API, behind one trait: each reads a request of its API
//! into the common form of its kind of call ([`Call`]: a chat's `wire::Asked`,
//! an embedding's `embeddings::Asked`, an exec's command) and writes a reply
//! back from what answered it, whole or as its API's stream. The call itself
//! (the budget, the model, the meter, the trace) is the same for every API of
//! a kind and lives once (`chat`, `embeddings`, `exec`). Adding a chat API is a
//! module of its own and a line in `of`.

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

    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Framing::Sse => "text/event-stream",
            Framing::Ndjson => "application/x-ndjson",
        }
    }
}

/// A kind of call the gateway serves (a chat, an embedding, an exec command).
pub trait Call {
    /// A request of any of the kind's APIs, read into one form.
    type Asked;
    /// What a reply is written from.
    type Answer<'a>;
    /// The request body as its readers take it: borrowed where the call needs the body after
    /// reading it (a chat's delivery record), else by value, so that its strings move.
    type Body<'a>;
}

/// One wire API of a kind of call.
pub trait Adapter<C: Call>: Sync {
    /// A request body in the common form; Err names the value at fault.
    fn read(&self, body: C::Body<'_>) -> Result<C::Asked, BadRequest>;
    /// The reply as one JSON body.
    fn reply(&self, answer: &C::Answer<'_>) -> Value;
    /// The reply as the API's stream (emulated from the complete reply), if the API streams.
    fn stream(&self, _answer: &C::Answer<'_>) -> Option<(Framing, String)> {
        None
    }
}

/// A model call: the common form `wire::Asked`, answered from the model's reply.
pub enum Chat {}

impl Call for Chat {
    type Asked = Asked;
    type Answer<'a> = Replying<'a>;
    type Body<'a> = &'a Value;
}

/// What a chat reply is written from: the model's reply, its ids and time, the
/// request as read, and the call's operation id (the Responses API names its
/// items by it).
pub struct Replying<'a> {
    pub reply: &'a ChatReply,
    pub meta: &'a ReplyMeta<'a>,
    pub asked: &'a Asked,
    pub operation_id: &'a str,
}

/// The adapter of `api`.
pub fn of(api: Api) -> &'static dyn Adapter<Chat> {
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

impl Adapter<Chat> for OpenAiChat {
    fn read(&self, body: &Value) -> Result<Asked, BadRequest> {
        wire::read_chat(Api::OpenAi, body)
    }
    fn reply(&self, r: &Replying) -> Value {
        wire::openai_reply(r.reply, r.meta)
    }
    fn stream(&self, r: &Replying) -> Option<(Framing, String)> {
        Some((Framing::Sse, wire::openai_sse(r.reply, r.meta, r.asked.include_usage)))
    }
}

/// Ollama's `/api/chat` (`wire`).
struct OllamaChat;

impl Adapter<Chat> for OllamaChat {
    fn read(&self, body: &Value) -> Result<Asked, BadRequest> {
        wire::read_chat(Api::Ollama, body)
    }
    fn reply(&self, r: &Replying) -> Value {
        wire::ollama_reply(r.reply, r.meta)
    }
    fn stream(&self, r: &Replying) -> Option<(Framing, String)> {
        Some((Framing::Ndjson, wire::ollama_ndjson(r.reply, r.meta)))
    }
}

/// OpenAI's Responses API (`responses`).
struct Responses;

impl Adapter<Chat> for Responses {
    fn read(&self, body: &Value) -> Result<Asked, BadRequest> {
        responses::read(body)
    }
    fn reply(&self, r: &Replying) -> Value {
        responses::reply(r.reply, r.meta, r.asked, &responses::Ids::of(r.operation_id))
    }
    fn stream(&self, r: &Replying) -> Option<(Framing, String)> {
        let ids = responses::Ids::of(r.operation_id);
        Some((Framing::Sse, responses::sse(r.reply, r.meta, r.asked, &ids)))
    }
}

/// Anthropic's Messages API (`anthropic`).
struct Messages;

impl Adapter<Chat> for Messages {
    fn read(&self, body: &Value) -> Result<Asked, BadRequest> {
        anthropic::read(body)
    }
    fn reply(&self, r: &Replying) -> Value {
        anthropic::reply(r.reply, r.meta)
    }
    fn stream(&self, r: &Replying) -> Option<(Framing, String)> {
        Some((Framing::Sse, anthropic::sse(r.reply, r.meta)))
    }
}

/// OpenAI's legacy `/v1/completions` (`legacy`).
struct Completions;

impl Adapter<Chat> for Completions {
    fn read(&self, body: &Value) -> Result<Asked, BadRequest> {
        legacy::read(Api::Completions, body)
    }
    fn reply(&self, r: &Replying) -> Value {
        legacy::completion(r.reply, r.meta)
    }
    fn stream(&self, r: &Replying) -> Option<(Framing, String)> {
        Some((Framing::Sse, legacy::completion_sse(r.reply, r.meta, r.asked.include_usage)))
    }
}

/// Ollama's `/api/generate` (`legacy`).
struct Generate;

impl Adapter<Chat> for Generate {
    fn read(&self, body: &Value) -> Result<Asked, BadRequest> {
        legacy::read(Api::Generate, body)
    }
    fn reply(&self, r: &Replying) -> Value {
        legacy::generate(r.reply, r.meta)
    }
    fn stream(&self, r: &Replying) -> Option<(Framing, String)> {
        Some((Framing::Ndjson, legacy::generate_ndjson(r.reply, r.meta)))
    }
}

/// Google's Gemini API (`gemini`): `generateContent`, or `streamGenerateContent`.
struct Gemini {
    stream: bool,
}

impl Adapter<Chat> for Gemini {
    fn read(&self, body: &Value) -> Result<Asked, BadRequest> {
        let mut asked = gemini::read(body, "")?;
        asked.stream = self.stream;
        Ok(asked)
    }
    fn reply(&self, r: &Replying) -> Value {
        gemini::reply(r.reply, r.meta)
    }
    fn stream(&self, r: &Replying) -> Option<(Framing, String)> {
        Some((Framing::Sse, gemini::sse(r.reply, r.meta)))
    }
}
