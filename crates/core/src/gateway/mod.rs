//! The gateway of external harnesses: a per-trial HTTP server speaking the
//! APIs agents speak (OpenAI chat and Responses, legacy completions,
//! Anthropic's Messages, Ollama's chat and generate, Google's Gemini,
//! embeddings) and the exec endpoint, forwarding each call to the experiment's
//! model (any `ModelClient`) under the trial's budget, and tracing each call.
//!
//! The house, arrows pointing down: `server` (connections, the router, the
//! credential) hands each request to the handler of its kind of call (`chat`
//! for every chat API, `embeddings`, `exec`). Each reads the request with its
//! wire API's adapter (`adapter::Adapter<C>`: for chats `wire` for OpenAI and
//! Ollama chat, `responses`, `anthropic`, `legacy`, `gemini`, each into the one
//! common form `wire::Asked`, its reply written back from one `ChatReply`; the
//! embeddings APIs into `embeddings::Asked`; the exec endpoint), and meters the
//! call on the trial's `meter`; `delivered` records what reached the model.
//!
//! The harness holds one credential (`TrialMeter::key`), never the upstream
//! endpoint or its key. The experiment fixes sampling (temperature, top_p,
//! the trial seed) and the output cap of each call, whatever the harness
//! asks; what it asked is noted in the trace. docs/external-harness.md,
//! "The gateway", is the user-facing description.

pub mod adapter;
pub mod anthropic;
mod chat;
pub mod delivered;
pub mod embeddings;
mod exec;
pub mod gemini;
mod http;
pub mod legacy;
mod meter;
pub mod responses;
mod server;
pub mod wire;

pub(crate) use exec::EXEC_PATH;
pub use meter::{GatewayStop, MeterSummary, Overridden, TrialMeter};
pub use server::serve;

/// Largest request body accepted (413 beyond).
pub const MAX_REQUEST_BYTES: usize = 8 << 20;

/// Most messages one call may send (its own and a stored conversation's together).
pub(crate) const MAX_MESSAGES: usize = 10_000;

/// Most bytes of message text one call may send, a stored conversation
/// (`previous_response_id`) included: what one body may hold.
pub(crate) const MAX_CONVERSATION_BYTES: usize = MAX_REQUEST_BYTES;

/// Most bytes of stored conversations a trial keeps for `previous_response_id`
/// (the oldest go first).
pub(crate) const MAX_STORED_BYTES: usize = 64 << 20;

/// The version `/api/version` reports, for Ollama clients that check it.
pub(crate) const OLLAMA_VERSION: &str = "0.9.0";

/// Headers every chat reply carries: what is left of the trial's budget.
pub(crate) const HEADER_STEPS: &str = "x-ablate-remaining-steps";
pub(crate) const HEADER_TOKENS: &str = "x-ablate-remaining-tokens";
pub(crate) const HEADER_SECONDS: &str = "x-ablate-remaining-seconds";

/// Bytes of a refused request body kept in its trace line.
pub const REFUSED_EXCERPT_BYTES: usize = 2048;

/// Most refused requests (no such endpoint, a wrong key) traced per trial;
/// beyond, they are counted only.
pub(crate) const TRACED_REFUSALS: u32 = 1000;
