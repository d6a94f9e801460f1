//! In-process llama.cpp on a GGUF file (the `local` provider).
//!
//! One `LocalClient` loads its GGUF once. A dedicated worker thread owns the
//! llama.cpp model and context and serves requests one at a time from a
//! queue; `chat()` puts a job on the queue and awaits the reply through a
//! oneshot channel, so any number of concurrent trials can share one model.
//! A process-wide lock also serializes the work of different local models so
//! that they never oversubscribe the CPU.
//!
//! Prompt: the messages are mapped to plain (role, content) turns in
//! Qwen2.5's native tool format and rendered with the GGUF's own chat template
//! through llama.cpp's built-in template engine (`llama_chat_apply_template`,
//! which recognizes the template, it does not run its Jinja). That engine
//! takes no tools, so the tools go into the system turn as Qwen2.5's template
//! writes them (`# Tools`, `<tools></tools>` holding the function signatures,
//! the `<tool_call>` instruction); assistant tool calls are rendered back as
//! `<tool_call>` blocks and consecutive tool results become one user turn of
//! `<tool_response>` blocks. For a ChatML model (Qwen2.5) the prompt is then
//! byte for byte what Qwen2.5's Jinja template gives (checked against the
//! GGUF's template rendered by jinja2; JSON key order aside:
//! tool parameter schemas come out with sorted keys). Other model families get
//! the same Hermes-style tool text in their own turn markup. Without tools, no
//! default system prompt is added (Qwen's "You are Qwen ..." is not).
//!
//! Reply: `<tool_call>{"name": ..., "arguments": ...}</tool_call>` blocks are
//! read out of the generated text into `ToolCall`s (`call_<n>`, `arguments` is
//! the argument JSON exactly as generated); a block that is not a JSON object
//! with a name goes to `unparsed_tool_calls` raw; the text outside the blocks
//! (trimmed) is the reply text. Optionally (`fenced_tool_calls`), a reply
//! with no block can also give calls written as a JSON object in a code fence
//! naming an offered tool: Qwen2.5-Coder-0.5B writes its calls that way.
//!
//! KV-cache reuse: the context has `slots` sequences (ABLATE_LOCAL_SLOTS,
//! default 8, of which ABLATE_LOCAL_BATCH, default 4, are decoded together), each of the configured context size and each remembering the
//! tokens it holds. A request goes to the slot whose tokens are a prefix of
//! its prompt (its own conversation, continued); else to the slot sharing the
//! longest prefix when that keeps at least half of the slot; else to a free or
//! least recently used slot, copying the best slot's cache into it first so
//! that a shared prefix (the system prompt) is still reused. Only the prompt
//! after the common prefix is evaluated. This is correct for any interleaving
//! of trials (a slot's tokens always match its KV entries); interleaved trials
//! just evict each other when there are more conversations than slots.
//! Reuse changes how the prompt is split into batches, which can change the
//! logits in the last bits, so the same request can give a different greedy
//! continuation with and without a warm cache; ABLATE_LOCAL_PREFIX_CACHE=0
//! turns reuse off for runs that must be bit-reproducible.
//!
//! Time: the time a job waits in the queue (behind other trials' jobs) is
//! reported as `wait`, not working time, like a rate-limit wait; `latency` is
//! the time the model worked on the request, and the request's timeout counts
//! from when the worker starts on it.
//!
//! Sampling: `model::sampling::TokenSampler` (greedy, or temperature, top-p
//! and a ChaCha8 draw from the request's seed), on the logits llama.cpp
//! returns; llama.cpp's own top-p sampler sorts the whole vocabulary.
//!
//! Environment: ABLATE_LOCAL_THREADS (generation and, unless
//! ABLATE_LOCAL_BATCH_THREADS is set, prompt evaluation; default: every core;
//! see `LocalOptions`),
//! ABLATE_LOCAL_SLOTS (default 8), ABLATE_LOCAL_BATCH (default 4; 1 = one sequence at a time), ABLATE_LOCAL_PREFIX_CACHE (default on),
//! ABLATE_LOCAL_FENCED_TOOL_CALLS (default off; see `LocalOptions`),
//! ABLATE_LOCAL_TEMPLATE (a llama.cpp template name such as `chatml`, instead
//! of the GGUF's), ABLATE_LOCAL_LOG=1 (keep llama.cpp's own log on stderr).

use super::sampling::{self, TokenSampler};
use super::{BoxFuture, CallOutcome, ChatReply, ChatRequest, Message, ModelClient, ModelError, Role, ToolCall, ToolSpec};
use crate::config::ModelSpec;
use crate::record::Tokens;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::token::LlamaToken;
use serde::Serialize;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Context size when the model spec gives none.
pub const DEFAULT_CONTEXT_TOKENS: u32 = 4096;
/// Slots: twice the batch, so that while four trials are decoded together the
/// caches of other conversations (the next trials of the same tasks) survive.
const DEFAULT_SLOTS: usize = 8;
/// Sequences decoded together.
const DEFAULT_BATCH: usize = 4;
/// Tokens per llama_decode call while evaluating a prompt.
const BATCH_TOKENS: u32 = 512;
/// Prompt tokens evaluated per step while other sequences are generating.
const PROMPT_CHUNK_WHILE_DECODING: usize = 128;
/// Shared prefix (tokens) that makes copying another slot's cache worthwhile.
const MIN_COPY_TOKENS: usize = 32;

/// Settings of the in-process engine that are not part of the model spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalOptions {
    /// CPU threads while generating (one token per llama_decode).
    pub threads: usize,
    /// CPU threads while evaluating a prompt (batches of tokens).
    pub batch_threads: usize,
    /// Conversations kept in the KV cache at once.
    pub slots: usize,
    /// Sequences decoded together, one `llama_decode` per step (continuous
    /// batching; at most `slots`). 1 serves one request at a time, as llama.cpp
    /// computes each sequence alone: bit-reproducible across concurrency.
    pub batch: usize,
    /// Reuse the KV cache of a common prompt prefix.
    pub prefix_cache: bool,
    /// When a reply has no `<tool_call>` block, also read a call written as a
    /// JSON object in a code fence (or as the whole reply) naming an offered
    /// tool, as small Qwen2.5-Coder models tend to write them.
    pub fenced_tool_calls: bool,
    /// A llama.cpp template name (`chatml`, `llama3`, ...) used instead of the GGUF's template.
    pub template: Option<String>,
    /// Leave llama.cpp's log on stderr.
    pub log: bool,
}

impl Default for LocalOptions {
    /// Every core, for prompts and for generation. Measured on 2 cores
    /// (benches/llama_ref.cpp, Qwen2.5-Coder-0.5B): idle, generation ran at
    /// about 27 tokens/s on 2 threads against 16 on 1; with one other process
    /// busy on a core, 11 against 16. In a 715 s run of configs/ablate.toml the
    /// trials' checks kept a core busy for 27 s, so all cores win. Set
    /// ABLATE_LOCAL_THREADS=1 when something else keeps a core busy.
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
        LocalOptions {
            threads: cores,
            batch_threads: cores,
            slots: DEFAULT_SLOTS,
            batch: DEFAULT_BATCH,
            prefix_cache: true,
            fenced_tool_calls: false,
            template: None,
            log: false,
        }
    }
}

impl LocalOptions {
    /// Defaults, overridden by the ABLATE_LOCAL_* environment variables.
    pub fn from_env() -> Result<Self, String> {
        let mut o = LocalOptions::default();
        let var = |name: &str| std::env::var(name).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let count = |name: &str, v: String| match v.parse::<usize>() {
            Ok(n) if (1..=1024).contains(&n) => Ok(n),
            _ => Err(format!("{name}={v} is not a count from 1 to 1024")),
        };
        let flag = |name: &str, v: String| match v.to_ascii_lowercase().as_str() {
            "1" | "true" | "on" | "yes" => Ok(true),
            "0" | "false" | "off" | "no" => Ok(false),
            _ => Err(format!("{name}={v} is not on/off")),
        };
        if let Some(v) = var("ABLATE_LOCAL_THREADS") {
            o.threads = count("ABLATE_LOCAL_THREADS", v)?;
            o.batch_threads = o.threads;
        }
        if let Some(v) = var("ABLATE_LOCAL_BATCH_THREADS") {
            o.batch_threads = count("ABLATE_LOCAL_BATCH_THREADS", v)?;
        }
        if let Some(v) = var("ABLATE_LOCAL_SLOTS") {
            o.slots = count("ABLATE_LOCAL_SLOTS", v)?;
            o.batch = o.batch.min(o.slots);
        }
        if let Some(v) = var("ABLATE_LOCAL_BATCH") {
            o.batch = count("ABLATE_LOCAL_BATCH", v)?;
        }
        if let Some(v) = var("ABLATE_LOCAL_PREFIX_CACHE") {
            o.prefix_cache = flag("ABLATE_LOCAL_PREFIX_CACHE", v)?;
        }
        if let Some(v) = var("ABLATE_LOCAL_FENCED_TOOL_CALLS") {
            o.fenced_tool_calls = flag("ABLATE_LOCAL_FENCED_TOOL_CALLS", v)?;
        }
        if let Some(v) = var("ABLATE_LOCAL_LOG") {
            o.log = flag("ABLATE_LOCAL_LOG", v)?;
        }
        o.template = var("ABLATE_LOCAL_TEMPLATE");
        Ok(o)
    }
}

/// Sampling settings of one generation.
#[derive(Debug, Clone, PartialEq)]
pub struct GenParams {
    pub max_tokens: u32,
    /// 0 means greedy.
    pub temperature: f64,
    pub top_p: f64,
    pub seed: u64,
    /// Limit on the worker's time for this request (queueing not counted).
    pub timeout: Duration,
    /// Generate max_tokens whatever the model says (benchmarks: a fixed
    /// amount of work, as llama.cpp's batched bench does).
    pub ignore_eos: bool,
}

impl GenParams {
    fn of(req: &ChatRequest) -> GenParams {
        GenParams { max_tokens: req.max_tokens, temperature: req.temperature, top_p: req.top_p, seed: req.seed, timeout: req.timeout, ignore_eos: false }
    }
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The model produced an end-of-generation token.
    Eos,
    /// max_tokens, or the context is full.
    Length,
    /// The request's timeout passed (only in a partial generation).
    Timeout,
}

impl Stop {
    pub fn name(self) -> &'static str {
        match self {
            Stop::Eos => "eos",
            Stop::Length => "length",
            Stop::Timeout => "timeout",
        }
    }
}

/// One generation, as the worker did it.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// Generated text (special tokens rendered, the end token left out).
    pub text: String,
    /// Tokens of the whole prompt.
    pub prompt_tokens: u32,
    /// Prompt tokens reused from the KV cache (not evaluated).
    pub cached_tokens: u32,
    /// Tokens sampled, the end-of-generation token included.
    pub generated_tokens: u32,
    pub stop: Stop,
    pub slot: usize,
    /// This request's share of the compute while its prompt was evaluated and
    /// while it generated (each step's time split over the step's tokens).
    pub prompt_seconds: f64,
    pub generation_seconds: f64,
    /// Most sequences decoded together in one step with this one.
    pub max_sequences: u32,
}

/// Counters over the life of a client, for benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LocalStats {
    pub requests: u64,
    /// Prompt tokens of all requests.
    pub prompt_tokens: u64,
    /// Prompt tokens reused from the KV cache.
    pub cached_tokens: u64,
    /// Prompt tokens evaluated (prompt minus cached).
    pub evaluated_tokens: u64,
    pub generated_tokens: u64,
    /// Time evaluating prompts.
    pub prompt_seconds: f64,
    /// Time sampling and decoding generated tokens.
    pub generation_seconds: f64,
    /// Time jobs waited in the queue.
    pub queue_seconds: f64,
}

impl LocalStats {
    pub fn prompt_tokens_per_second(&self) -> f64 {
        if self.prompt_seconds > 0.0 { self.evaluated_tokens as f64 / self.prompt_seconds } else { 0.0 }
    }
    pub fn generated_tokens_per_second(&self) -> f64 {
        if self.generation_seconds > 0.0 { self.generated_tokens as f64 / self.generation_seconds } else { 0.0 }
    }
}

/// What was loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalInfo {
    pub path: PathBuf,
    /// Context size of each slot (the limit of prompt + generation).
    pub context_tokens: u32,
    /// The engine settings in force (threads, slots, prefix cache, ...).
    pub options: LocalOptions,
    pub n_params: u64,
    pub size_bytes: u64,
    pub n_ctx_train: u32,
    /// The chat template given to llama.cpp (a name or the GGUF's Jinja text).
    pub template: String,
}

enum PromptInput {
    Chat { messages: Vec<Message>, tools: Vec<ToolSpec> },
    Text(String),
}

struct Job {
    input: PromptInput,
    params: GenParams,
    enqueued: Instant,
    reply: oneshot::Sender<JobResult>,
}

struct JobResult {
    /// The prompt text given to the tokenizer, once rendered.
    prompt: Option<String>,
    /// Complete, or partial (timeout) generation.
    generation: Option<Generation>,
    error: Option<ModelError>,
    /// Waiting: in the queue before the worker took the request, and the
    /// other sequences' share of the steps this one was decoded in.
    queued: Duration,
    /// This request's share of the compute: each step's time split over the
    /// tokens of the step (what its trial is charged).
    compute: Duration,
    batch: BatchStats,
}

/// How a request shared the engine: for the trace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct BatchStats {
    /// `llama_decode` steps the request took part in.
    pub steps: u32,
    /// Sequences in those steps: mean and largest.
    pub mean_sequences: f64,
    pub max_sequences: u32,
    /// Time in the queue before the worker took it, ms.
    pub queued_ms: u64,
    /// Wall time from admission to the last step, ms (compute share + others' share).
    pub wall_ms: u64,
}

/// The in-process llama.cpp client.
pub struct LocalClient {
    name: String,
    jobs: mpsc::Sender<Job>,
    sha256: String,
    info: LocalInfo,
    stats: Arc<Mutex<LocalStats>>,
}

impl LocalClient {
    /// Load the model of a `local` spec, with options from the environment.
    pub fn new(spec: &ModelSpec) -> Result<Self, String> {
        let opts = LocalOptions::from_env().map_err(|e| format!("model `{}`: {e}", spec.name))?;
        Self::with_options(spec, opts)
    }

    pub fn with_options(spec: &ModelSpec, opts: LocalOptions) -> Result<Self, String> {
        let name = spec.name.clone();
        let path = spec
            .resolved_path
            .clone()
            .or_else(|| spec.path.as_ref().map(PathBuf::from))
            .ok_or_else(|| format!("model `{name}`: the local provider needs the GGUF file's path"))?;
        if !path.is_file() {
            return Err(format!("model `{name}`: GGUF file `{}` not found", path.display()));
        }
        let context_tokens = spec.context_tokens.unwrap_or(DEFAULT_CONTEXT_TOKENS);
        if context_tokens < 16 {
            return Err(format!("model `{name}`: context_tokens {context_tokens} is too small"));
        }
        let slots = opts.slots.max(1);
        let opts = LocalOptions { threads: opts.threads.max(1), batch_threads: opts.batch_threads.max(1), slots, batch: opts.batch.clamp(1, slots), ..opts };
        let stats = Arc::new(Mutex::new(LocalStats::default()));
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<LocalInfo, String>>(1);
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
        let worker_stats = stats.clone();
        let worker_path = path.clone();
        std::thread::Builder::new()
            .name("ablate-llama".into())
            .spawn(move || worker_main(worker_path, context_tokens, opts, ready_tx, jobs_rx, worker_stats))
            .map_err(|e| format!("model `{name}`: cannot start the llama.cpp worker: {e}"))?;
        // Hash the file while the worker loads it.
        let sha256 = crate::digest::sha256_file(&path).map_err(|e| format!("model `{name}`: cannot read `{}`: {e}", path.display()))?;
        let info = match ready_rx.recv() {
            Ok(Ok(info)) => info,
            Ok(Err(e)) => return Err(format!("model `{name}`: {e}")),
            Err(_) => return Err(format!("model `{name}`: the llama.cpp worker stopped while loading")),
        };
        Ok(LocalClient { name, jobs: jobs_tx, sha256, info, stats })
    }

    /// sha256 of the GGUF file, hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    pub fn info(&self) -> &LocalInfo {
        &self.info
    }

    /// Counters since the client was made.
    pub fn stats(&self) -> LocalStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `chat` for callers outside an async runtime (benchmarks). Must not be
    /// called from inside a tokio runtime.
    pub fn chat_blocking(&self, req: &ChatRequest, operation_id: String) -> CallOutcome {
        let rx = self.submit(PromptInput::Chat { messages: req.messages.clone(), tools: req.tools.clone() }, GenParams::of(req));
        let res = rx.and_then(|rx| rx.blocking_recv().map_err(|_| self.stopped()));
        outcome(req, operation_id, res, self.info.options.fenced_tool_calls)
    }

    /// Generate from a prompt text that is given to the tokenizer as is (no
    /// chat template). Must not be called from inside a tokio runtime.
    pub fn generate_blocking(&self, prompt: &str, params: &GenParams) -> Result<Generation, ModelError> {
        let rx = self.submit(PromptInput::Text(prompt.to_string()), params.clone())?;
        let res = rx.blocking_recv().map_err(|_| self.stopped())?;
        match res.error {
            Some(e) => Err(e),
            None => res.generation.ok_or_else(|| ModelError::Other("no generation".into())),
        }
    }

    fn submit(&self, input: PromptInput, params: GenParams) -> Result<oneshot::Receiver<JobResult>, ModelError> {
        let (tx, rx) = oneshot::channel();
        self.jobs.send(Job { input, params, enqueued: Instant::now(), reply: tx }).map_err(|_| self.stopped())?;
        Ok(rx)
    }

    fn stopped(&self) -> ModelError {
        ModelError::Other(format!("model `{}`: the llama.cpp worker has stopped", self.name))
    }
}

impl ModelClient for LocalClient {
    fn chat<'a>(&'a self, req: &'a ChatRequest, operation_id: String) -> BoxFuture<'a, CallOutcome> {
        Box::pin(async move {
            let rx = self.submit(PromptInput::Chat { messages: req.messages.clone(), tools: req.tools.clone() }, GenParams::of(req));
            let res = match rx {
                Ok(rx) => rx.await.map_err(|_| self.stopped()),
                Err(e) => Err(e),
            };
            outcome(req, operation_id, res, self.info.options.fenced_tool_calls)
        })
    }

    fn identity(&self) -> BoxFuture<'_, Result<Option<String>, ModelError>> {
        Box::pin(async move { Ok(Some(format!("gguf-sha256:{}", self.sha256))) })
    }

    fn engine(&self) -> Option<Value> {
        let (i, o) = (&self.info, &self.info.options);
        Some(json!({
            "engine": "llama.cpp (llama-cpp-2, in process)",
            "path": i.path.display().to_string(),
            "size_bytes": i.size_bytes,
            "n_params": i.n_params,
            "context_tokens": i.context_tokens,
            "slots": o.slots,
            "batch": o.batch,
            "threads": o.threads,
            "batch_threads": o.batch_threads,
            "prefix_cache": o.prefix_cache,
            "fenced_tool_calls": o.fenced_tool_calls,
            "template": o.template.as_deref().unwrap_or("gguf"),
            "template_sha256": crate::digest::sha256_hex(i.template.as_bytes()),
        }))
    }
}

fn outcome(req: &ChatRequest, operation_id: String, res: Result<JobResult, ModelError>, fenced: bool) -> CallOutcome {
    let res = match res {
        Ok(r) => r,
        Err(e) => JobResult { prompt: None, generation: None, error: Some(e), queued: Duration::ZERO, compute: Duration::ZERO, batch: BatchStats::default() },
    };
    let request_body = json!({
        "prompt": res.prompt,
        "max_tokens": req.max_tokens,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "seed": req.seed,
        "sampler": if sampling::is_greedy(req.temperature, req.top_p) { "greedy" } else { "temperature, top_p, ChaCha8 draw from seed" },
    });
    let reply_body = res.generation.as_ref().map(|g| {
        json!({
            "text": g.text,
            "prompt_tokens": g.prompt_tokens,
            "cached_tokens": g.cached_tokens,
            "generated_tokens": g.generated_tokens,
            "stop": g.stop.name(),
            "batch": res.batch,
        })
    });
    let result = match (res.error, res.generation) {
        (Some(e), _) => Err(e),
        (None, Some(g)) => {
            let (mut text, mut tool_calls, unparsed_tool_calls) = parse_tool_calls(&g.text);
            if fenced && tool_calls.is_empty() && unparsed_tool_calls.is_empty() && !req.tools.is_empty() {
                (text, tool_calls) = parse_fenced_tool_calls(&text, &req.tools);
            }
            Ok(ChatReply {
                text,
                tool_calls,
                unparsed_tool_calls,
                finish_reason: Some(if g.stop == Stop::Eos { "stop" } else { "length" }.to_string()),
                usage: Tokens { input: g.prompt_tokens as u64, output: g.generated_tokens as u64, cached: g.cached_tokens as u64 },
                fingerprint: None,
            })
        }
        (None, None) => Err(ModelError::Other("the llama.cpp worker gave no result".into())),
    };
    CallOutcome { operation_id, request_body, reply_body, result, attempts: 1, latency: res.compute, wait: res.queued }
}

// ---------------------------------------------------------------------------
// Prompt: messages to template turns (Qwen2.5's tool format)

const TOOLS_HEAD: &str = "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>";
const TOOLS_TAIL: &str = "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>";

/// The tools section Qwen2.5's template appends to the system message.
pub fn tools_section(tools: &[ToolSpec]) -> String {
    let mut s = String::from(TOOLS_HEAD);
    for t in tools {
        s.push('\n');
        let _ = write!(
            s,
            "{{\"type\": \"function\", \"function\": {{\"name\": {}, \"description\": {}, \"parameters\": ",
            Value::from(t.name.as_str()),
            Value::from(t.description.as_str())
        );
        py_json(&t.parameters, &mut s);
        s.push_str("}}");
    }
    s.push_str(TOOLS_TAIL);
    s
}

/// The (role, content) turns given to the chat template: the system turn with
/// the tools section, assistant tool calls as `<tool_call>` blocks, and each
/// run of tool results as one user turn of `<tool_response>` blocks.
pub fn template_turns(messages: &[Message], tools: &[ToolSpec]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut rest = messages;
    if !tools.is_empty() {
        let section = tools_section(tools);
        match messages.first() {
            Some(m) if m.role == Role::System => {
                out.push(("system".into(), format!("{}{section}", m.content)));
                rest = &messages[1..];
            }
            _ => out.push(("system".into(), section.trim_start().to_string())),
        }
    }
    let mut in_tool_run = false;
    for m in rest {
        if m.role == Role::Tool {
            let block = format!("<tool_response>\n{}\n</tool_response>", m.content);
            match out.last_mut() {
                Some((_, content)) if in_tool_run => {
                    content.push('\n');
                    content.push_str(&block);
                }
                _ => out.push(("user".into(), block)),
            }
            in_tool_run = true;
            continue;
        }
        in_tool_run = false;
        let turn = match m.role {
            Role::System => ("system", m.content.clone()),
            Role::User => ("user", m.content.clone()),
            Role::Assistant => ("assistant", assistant_content(m)),
            Role::Tool => unreachable!(),
        };
        out.push((turn.0.into(), turn.1));
    }
    out
}

fn assistant_content(m: &Message) -> String {
    let mut s = m.content.clone();
    for c in &m.tool_calls {
        if !s.is_empty() {
            s.push('\n');
        }
        let args = c.arguments.trim();
        let args = if serde_json::from_str::<Value>(args).is_ok() { py_style(args) } else { args.to_string() };
        let _ = write!(s, "<tool_call>\n{{\"name\": \"{}\", \"arguments\": {args}}}\n</tool_call>", c.name);
    }
    s
}

/// JSON as Python's `json.dumps` writes it (", " and ": " separators, no
/// ASCII escaping), which is what Qwen's template (`tojson`) produces.
fn py_json(v: &Value, out: &mut String) {
    match v {
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_json(x, out);
            }
            out.push(']');
        }
        Value::Object(o) => {
            out.push('{');
            for (i, (k, x)) in o.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Value::from(k.as_str()).to_string());
                out.push_str(": ");
                py_json(x, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Re-space valid JSON text as `json.dumps` would, keeping its key order and
/// its strings as written.
fn py_style(json_text: &str) -> String {
    let mut out = String::with_capacity(json_text.len() + 16);
    let (mut in_str, mut esc) = (false, false);
    for c in json_text.chars() {
        if in_str {
            out.push(c);
            if esc {
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_str = true;
                out.push(c);
            }
            ',' => out.push_str(", "),
            ':' => out.push_str(": "),
            ' ' | '\t' | '\n' | '\r' => {}
            c => out.push(c),
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Reply: tool calls out of the generated text

const CALL_OPEN: &str = "<tool_call>";
const CALL_CLOSE: &str = "</tool_call>";

/// Split generated text into (text outside the blocks, trimmed; tool calls;
/// unreadable blocks, raw). A block left open at the end is read to the end.
pub fn parse_tool_calls(raw: &str) -> (String, Vec<ToolCall>, Vec<String>) {
    let mut text = String::new();
    let mut calls: Vec<ToolCall> = Vec::new();
    let mut unparsed = Vec::new();
    let mut rest = raw;
    while let Some(i) = rest.find(CALL_OPEN) {
        text.push_str(&rest[..i]);
        let after = &rest[i + CALL_OPEN.len()..];
        let (inner, next) = match after.find(CALL_CLOSE) {
            Some(j) => (&after[..j], &after[j + CALL_CLOSE.len()..]),
            None => (after, ""),
        };
        match parse_call(inner) {
            Some((name, arguments)) => calls.push(ToolCall { id: format!("call_{}", calls.len()), name, arguments }),
            None => unparsed.push(inner.to_string()),
        }
        rest = next;
    }
    text.push_str(rest);
    (text.trim().to_string(), calls, unparsed)
}

/// Tool calls written as a JSON object `{"name": <offered tool>, "arguments": ...}`
/// that is the whole reply or the body of a code fence (no language, or
/// `json`). Returns the text without those fences, and the calls.
pub fn parse_fenced_tool_calls(text: &str, tools: &[ToolSpec]) -> (String, Vec<ToolCall>) {
    let as_call = |body: &str| -> Option<(String, String)> {
        let v: Value = serde_json::from_str(body.trim()).ok()?;
        let has_args = v.get("arguments").or_else(|| v.get("parameters")).is_some();
        let (name, args) = parse_call(body)?;
        (has_args && tools.iter().any(|t| t.name == name)).then_some((name, args))
    };
    let call = |n: usize, (name, arguments): (String, String)| ToolCall { id: format!("call_{n}"), name, arguments };
    if let Some(c) = as_call(text) {
        return (String::new(), vec![call(0, c)]);
    }
    let mut out = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("```") {
        let after = &rest[i + 3..];
        let Some(nl) = after.find('\n') else { break };
        let info = after[..nl].trim();
        let Some(j) = after[nl + 1..].find("```") else { break };
        let body = &after[nl + 1..nl + 1 + j];
        let end = i + 3 + nl + 1 + j + 3;
        match as_call(body).filter(|_| info.is_empty() || info.eq_ignore_ascii_case("json")) {
            Some(c) => {
                out.push_str(&rest[..i]);
                calls.push(call(calls.len(), c));
            }
            None => out.push_str(&rest[..end]),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    (out.trim().to_string(), calls)
}

/// (name, arguments JSON text) of one block, or None when it is not a JSON
/// object with a non-empty string `name`. `arguments` (or `parameters`) is
/// kept as generated; a string holding JSON is unwrapped; absent means `{}`.
fn parse_call(inner: &str) -> Option<(String, String)> {
    let t = inner.trim();
    let v: Value = serde_json::from_str(t).ok()?;
    let obj = v.as_object()?;
    let name = obj.get("name")?.as_str()?.trim();
    if name.is_empty() {
        return None;
    }
    let key = ["arguments", "parameters"].into_iter().find(|k| obj.contains_key(*k));
    let arguments = match key {
        None => "{}".to_string(),
        Some(key) => match &obj[key] {
            Value::String(s) => s.clone(),
            other => raw_member(t, key).map(str::to_string).unwrap_or_else(|| other.to_string()),
        },
    };
    Some((name.to_string(), arguments))
}

/// The raw text of member `key` of the JSON object `t` (already validated);
/// the last one when repeated, as serde_json keeps.
fn raw_member<'t>(t: &'t str, key: &str) -> Option<&'t str> {
    let b = t.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let mut found = None;
    loop {
        i = skip_ws(b, i);
        if b.get(i) == Some(&b'}') {
            return found;
        }
        let ks = i;
        i = skip_value(b, i)?;
        let k: String = serde_json::from_str(&t[ks..i]).ok()?;
        i = skip_ws(b, i);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        let vs = i;
        i = skip_value(b, i)?;
        if k == key {
            found = Some(&t[vs..i]);
        }
        i = skip_ws(b, i);
        match b.get(i) {
            Some(b',') => i += 1,
            Some(b'}') => return found,
            _ => return None,
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

fn skip_value(b: &[u8], mut i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => {
            i += 1;
            while i < b.len() {
                match b[i] {
                    b'\\' => i += 2,
                    b'"' => return Some(i + 1),
                    _ => i += 1,
                }
            }
            None
        }
        b'{' | b'[' => {
            let mut depth = 0usize;
            while i < b.len() {
                match b[i] {
                    b'"' => {
                        i = skip_value(b, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            while i < b.len() && !matches!(b[i], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                i += 1;
            }
            Some(i)
        }
    }
}

// ---------------------------------------------------------------------------
// The worker

/// llama.cpp's backend can be initialized once per process; every client (and the
/// benchmarks) share it.
pub fn backend(log: bool) -> Result<&'static LlamaBackend, String> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            if !log {
                llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default().with_logs_enabled(false));
            }
            LlamaBackend::init().map_err(|e| format!("cannot initialize llama.cpp: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Held while a job runs, so that two local models never compute at once.
static COMPUTE: Mutex<()> = Mutex::new(());

#[derive(Debug, Clone, Default)]
struct Slot {
    /// The tokens whose KV entries this sequence holds, at positions 0..len.
    tokens: Vec<LlamaToken>,
    last_used: u64,
}

struct Engine<'m> {
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    batch: LlamaBatch<'static>,
    template: LlamaChatTemplate,
    slots: Vec<Slot>,
    /// Per-slot limit of prompt + generated tokens.
    limit: usize,
    prefix_cache: bool,
    clock: u64,
}

fn worker_main(
    path: PathBuf,
    context_tokens: u32,
    opts: LocalOptions,
    ready: mpsc::SyncSender<Result<LocalInfo, String>>,
    jobs: mpsc::Receiver<Job>,
    stats: Arc<Mutex<LocalStats>>,
) {
    let fail = |e: String| {
        let _ = ready.send(Err(e));
    };
    let backend = match backend(opts.log) {
        Ok(b) => b,
        Err(e) => return fail(e),
    };
    let model = match LlamaModel::load_from_file(backend, &path, &LlamaModelParams::default()) {
        Ok(m) => m,
        Err(e) => return fail(format!("cannot load GGUF `{}`: {e}", path.display())),
    };
    let (template, template_text) = match &opts.template {
        Some(name) => match LlamaChatTemplate::new(name) {
            Ok(t) => (t, name.clone()),
            Err(e) => return fail(format!("bad ABLATE_LOCAL_TEMPLATE: {e}")),
        },
        None => match model.chat_template(None) {
            Ok(t) => {
                let text = t.to_string().unwrap_or_default();
                (t, text)
            }
            Err(e) => return fail(format!("the GGUF has no usable chat template ({e}); set ABLATE_LOCAL_TEMPLATE")),
        },
    };
    // llama.cpp recognizes templates by their markers; fail now if it does not know this one.
    let probe = [LlamaChatMessage::new("system".into(), "s".into()), LlamaChatMessage::new("user".into(), "u".into())];
    let probe: Vec<LlamaChatMessage> = probe.into_iter().filter_map(Result::ok).collect();
    if let Err(e) = model.apply_chat_template(&template, &probe, true) {
        return fail(format!("llama.cpp does not recognize the model's chat template ({e}); set ABLATE_LOCAL_TEMPLATE"));
    }
    // llama.cpp gives each sequence n_ctx / n_seq_max cells, padded to 256.
    let per_slot = context_tokens.div_ceil(256) * 256;
    let slots = opts.slots;
    let n_batch = BATCH_TOKENS.min(per_slot);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(per_slot * slots as u32))
        .with_n_seq_max(slots as u32)
        .with_kv_unified(false)
        .with_swa_full(true)
        .with_n_batch(n_batch)
        .with_n_ubatch(n_batch)
        .with_n_threads(opts.threads as i32)
        .with_n_threads_batch(opts.batch_threads as i32);
    let ctx = match model.new_context(backend, params) {
        Ok(c) => c,
        Err(e) => return fail(format!("cannot create a llama.cpp context of {slots} x {per_slot} tokens: {e}")),
    };
    let info = LocalInfo {
        path: path.clone(),
        context_tokens,
        options: opts.clone(),
        n_params: model.n_params(),
        size_bytes: model.size(),
        n_ctx_train: model.n_ctx_train(),
        template: template_text,
    };
    let max_batch = opts.batch.clamp(1, slots);
    let mut engine = Engine {
        model: &model,
        ctx,
        batch: LlamaBatch::new(n_batch as usize, 1),
        template,
        slots: vec![Slot::default(); slots],
        limit: context_tokens as usize,
        prefix_cache: opts.prefix_cache,
        clock: 0,
    };
    if ready.send(Ok(info)).is_err() {
        return;
    }
    drop(ready);
    // Continuous batching: admit queued requests while there is room, then
    // one llama_decode over every active sequence; repeat.
    let mut active: Vec<Seq> = Vec::new();
    let mut open = true;
    loop {
        if active.is_empty() {
            if !open {
                break;
            }
            match jobs.recv() {
                Ok(job) => engine.admit(job, &mut active, &stats),
                Err(_) => break,
            }
        }
        while open && active.len() < max_batch {
            match jobs.try_recv() {
                Ok(job) => engine.admit(job, &mut active, &stats),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => open = false,
            }
        }
        if active.is_empty() {
            continue;
        }
        let guard = COMPUTE.lock().unwrap_or_else(|e| e.into_inner());
        engine.step(&mut active, &stats);
        drop(guard);
    }
}

/// One request being served: prompt evaluation in chunks, then one token a step.
struct Seq {
    job: Job,
    admitted: Instant,
    slot: usize,
    prompt_text: String,
    prompt: Vec<LlamaToken>,
    /// Next prompt token to evaluate.
    pos: usize,
    sampler: TokenSampler,
    out: Vec<LlamaToken>,
    g: Generation,
    /// Sampled and not yet decoded (the next step feeds it).
    next: Option<LlamaToken>,
    /// Index of this sequence's logits in the current step's batch.
    logits: Option<i32>,
    /// Tokens this sequence put into the current step.
    in_step: usize,
    charged: f64,
    steps: u32,
    sequences_sum: u64,
    max_sequences: u32,
}

impl Engine<'_> {
    /// Take a request: render and tokenize its prompt, give it a slot that no
    /// active sequence holds, and prepare that slot's cache. A request that
    /// cannot start is answered at once.
    fn admit(&mut self, job: Job, active: &mut Vec<Seq>, stats: &Mutex<LocalStats>) {
        if job.reply.is_closed() {
            return; // the caller is gone
        }
        let admitted = Instant::now();
        let fail = |job: Job, prompt: Option<String>, e: ModelError| {
            let queued = admitted.duration_since(job.enqueued);
            record_stats(stats, queued, None);
            let _ = job.reply.send(JobResult { prompt, generation: None, error: Some(e), queued, compute: Duration::ZERO, batch: BatchStats::default() });
        };
        let prompt_text = match &job.input {
            PromptInput::Chat { messages, tools } => match self.render(messages, tools) {
                Ok(p) => p,
                Err(e) => return fail(job, None, e),
            },
            PromptInput::Text(t) => t.clone(),
        };
        let prompt = self.tokenize(&prompt_text);
        if prompt.is_empty() {
            return fail(job, Some(prompt_text), ModelError::Other("the prompt is empty".into()));
        }
        if prompt.len() > self.limit {
            let e = ModelError::Other(format!("prompt of {} tokens exceeds the context of {}", prompt.len(), self.limit));
            return fail(job, Some(prompt_text), e);
        }
        let busy: Vec<bool> = (0..self.slots.len()).map(|i| active.iter().any(|s| s.slot == i)).collect();
        let (slot, source, reusable) = self.pick_slot(&prompt, &busy);
        self.clock += 1;
        self.slots[slot].last_used = self.clock;
        let seq = slot as i32;
        if let Some(src) = source {
            // Cross-sequence copies are whole-buffer copies in llama.cpp; the tail is cut below.
            match self.ctx.kv_cache_seq_cp(src as i32, seq, None, None) {
                Ok(()) => self.slots[slot].tokens = self.slots[src].tokens.clone(),
                Err(_) => self.clear_slot(slot),
            }
        }
        // At least the last prompt token is evaluated, for its logits.
        let keep = reusable.min(prompt.len() - 1).min(self.slots[slot].tokens.len());
        if keep < self.slots[slot].tokens.len() {
            match self.ctx.kv_cache_seq_rm(seq, Some(keep as u32), None) {
                Ok(()) => self.slots[slot].tokens.truncate(keep),
                Err(_) => self.clear_slot(slot), // e.g. recurrent models: no partial removal
            }
        }
        let cached = self.slots[slot].tokens.len();
        let p = &job.params;
        let sampler = TokenSampler::new(p.temperature, p.top_p, p.seed);
        let g = Generation {
            text: String::new(),
            prompt_tokens: prompt.len() as u32,
            cached_tokens: cached as u32,
            generated_tokens: 0,
            stop: Stop::Timeout,
            slot,
            prompt_seconds: 0.0,
            generation_seconds: 0.0,
            max_sequences: 0,
        };
        active.push(Seq {
            job,
            admitted,
            slot,
            prompt_text,
            prompt,
            pos: cached,
            sampler,
            out: Vec::new(),
            g,
            next: None,
            logits: None,
            in_step: 0,
            charged: 0.0,
            steps: 0,
            sequences_sum: 0,
            max_sequences: 0,
        });
    }

    /// One step: a llama_decode holding the token each generating sequence
    /// sampled last (one token per sequence), then one prompt chunk of the
    /// sequence that waits longest, in a llama_decode of its own (a batch
    /// mixing a long prompt with single tokens would be split by llama.cpp
    /// into equal per-sequence pieces, one token each). While others generate,
    /// chunks are short, so a long prompt does not stall them.
    fn step(&mut self, active: &mut Vec<Seq>, stats: &Mutex<LocalStats>) {
        let generating: Vec<usize> = (0..active.len()).filter(|&i| active[i].next.is_some()).collect();
        if !generating.is_empty() {
            self.batch.clear();
            let mut error = None;
            for s in active.iter_mut() {
                s.logits = None;
                s.in_step = 0;
            }
            for (n, &i) in generating.iter().enumerate() {
                let s = &mut active[i];
                let at = self.slots[s.slot].tokens.len();
                if let Err(e) = self.batch.add(s.next.unwrap_or(LlamaToken::new(0)), at as i32, &[s.slot as i32], true) {
                    error.get_or_insert(e.to_string());
                }
                s.logits = Some(n as i32);
                s.in_step = 1;
            }
            self.decode_step(active, generating.len(), error, stats);
        }
        let Some(i) = active.iter().position(|s| s.next.is_none() && s.pos < s.prompt.len()) else { return };
        let cap = self.batch_capacity();
        let chunk = if active.iter().any(|s| s.next.is_some()) { cap.min(PROMPT_CHUNK_WHILE_DECODING) } else { cap };
        self.batch.clear();
        let mut error = None;
        for s in active.iter_mut() {
            s.logits = None;
            s.in_step = 0;
        }
        let s = &mut active[i];
        let take = chunk.min(s.prompt.len() - s.pos);
        for (n, k) in (s.pos..s.pos + take).enumerate() {
            let last = k + 1 == s.prompt.len();
            if let Err(e) = self.batch.add(s.prompt[k], k as i32, &[s.slot as i32], last) {
                error.get_or_insert(e.to_string());
            }
            if last {
                s.logits = Some(n as i32);
            }
        }
        s.in_step = take;
        self.decode_step(active, take, error, stats);
    }

    /// Decode the batch built for the members (`in_step > 0`), charge them
    /// their share of its time, advance them, sample where they have logits,
    /// and answer the sequences that are done.
    fn decode_step(&mut self, active: &mut Vec<Seq>, n: usize, mut error: Option<String>, stats: &Mutex<LocalStats>) {
        let t0 = Instant::now();
        if error.is_none()
            && let Err(e) = self.ctx.decode(&mut self.batch)
        {
            error = Some(e.to_string());
        }
        let dt = t0.elapsed().as_secs_f64();
        let members = active.iter().filter(|s| s.in_step > 0).count() as u32;
        if let Some(e) = error {
            // The step failed for every sequence in it: their caches are unknown now.
            let mut i = 0;
            while i < active.len() {
                if active[i].in_step > 0 {
                    let s = active.swap_remove(i);
                    self.clear_slot(s.slot);
                    let what = if s.next.is_some() { "decode" } else { "evaluate the prompt" };
                    let partial = s.next.is_some().then(|| detokenize(self.model, &s.out));
                    self.finish(s, Err(ModelError::Other(format!("llama.cpp could not {what}: {e}"))), partial, stats);
                } else {
                    i += 1;
                }
            }
            return;
        }
        let now = Instant::now();
        let vocab = self.model.vocab();
        let mut i = 0;
        while i < active.len() {
            let s = &mut active[i];
            if s.in_step > 0 {
                // Each token of the step carries an equal share of its time.
                let share = dt * s.in_step as f64 / n.max(1) as f64;
                s.charged += share;
                s.steps += 1;
                s.sequences_sum += members as u64;
                s.max_sequences = s.max_sequences.max(members);
                if let Some(tok) = s.next.take() {
                    self.slots[s.slot].tokens.push(tok);
                    s.g.generation_seconds += share;
                } else {
                    let end = s.pos + s.in_step;
                    self.slots[s.slot].tokens.extend_from_slice(&s.prompt[s.pos..end]);
                    s.pos = end;
                    s.g.prompt_seconds += share;
                }
            }
            let mut done: Option<Stop> = None;
            if let Some(idx) = s.logits {
                let tok = LlamaToken::new(s.sampler.pick(self.ctx.get_logits_ith(idx)) as i32);
                s.g.generated_tokens += 1;
                if vocab.is_eog(tok) && !s.job.params.ignore_eos {
                    done = Some(Stop::Eos);
                } else {
                    s.out.push(tok);
                    if s.g.generated_tokens >= s.job.params.max_tokens || self.slots[s.slot].tokens.len() + 1 > self.limit {
                        done = Some(Stop::Length);
                    } else {
                        s.next = Some(tok);
                    }
                }
            }
            let timed_out = done.is_none() && s.charged >= s.job.params.timeout.as_secs_f64();
            let cancelled = done.is_none() && s.job.reply.is_closed();
            if done.is_some() || timed_out || cancelled {
                let mut s = active.swap_remove(i);
                let text = detokenize(self.model, &s.out);
                let result = match done {
                    Some(stop) => {
                        s.g.stop = stop;
                        Ok(())
                    }
                    None if cancelled => Err(ModelError::Other("the request was cancelled".into())),
                    None => Err(ModelError::Timeout(s.job.params.timeout.as_secs_f64())),
                };
                let _ = now;
                self.finish(s, result, Some(text), stats);
            } else {
                i += 1;
            }
        }
    }

    /// Answer a sequence: its generation (complete, or partial with the error).
    fn finish(&mut self, mut s: Seq, result: Result<(), ModelError>, text: Option<String>, stats: &Mutex<LocalStats>) {
        let queued = s.admitted.duration_since(s.job.enqueued);
        let wall = s.admitted.elapsed();
        let compute = Duration::from_secs_f64(s.charged.min(wall.as_secs_f64()));
        if let Some(t) = text {
            s.g.text = t;
        }
        s.g.max_sequences = s.max_sequences;
        let generation = match &result {
            Ok(()) => Some(s.g.clone()),
            // A partial generation once prompt evaluation is over.
            Err(_) => (s.pos >= s.prompt.len()).then(|| s.g.clone()),
        };
        record_stats(stats, queued, generation.as_ref());
        let batch = BatchStats {
            steps: s.steps,
            mean_sequences: if s.steps > 0 { s.sequences_sum as f64 / s.steps as f64 } else { 0.0 },
            max_sequences: s.max_sequences,
            queued_ms: queued.as_millis() as u64,
            wall_ms: wall.as_millis() as u64,
        };
        let _ = s.job.reply.send(JobResult {
            prompt: Some(s.prompt_text),
            generation,
            error: result.err(),
            queued: queued + wall.saturating_sub(compute),
            compute,
            batch,
        });
    }

    fn render(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<String, ModelError> {
        let chat = template_turns(messages, tools)
            .into_iter()
            .map(|(role, content)| LlamaChatMessage::new(role, content.replace('\0', "\u{FFFD}")))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ModelError::Other(format!("cannot pass a message to llama.cpp: {e}")))?;
        self.model.apply_chat_template(&self.template, &chat, true).map_err(|e| ModelError::Other(format!("cannot apply the chat template: {e}")))
    }

    /// Special tokens written in the prompt text (template markers) are parsed;
    /// BOS is added when the model wants it and the text does not start with it.
    fn tokenize(&self, prompt: &str) -> Vec<LlamaToken> {
        let vocab = self.model.vocab();
        let mut tokens = vocab.tokenize(prompt.as_bytes(), false, true);
        if vocab.should_add_bos() && tokens.first() != Some(&vocab.bos()) {
            tokens.insert(0, vocab.bos());
        }
        tokens
    }

    /// (slot to use, slot to copy from first, tokens of the target reusable after the copy)
    /// Slots marked `busy` belong to active sequences: never the target. They
    /// can be the source of a copy: between steps their cache holds exactly
    /// their `tokens`, and a sequence only appends, so the shared prefix is
    /// final (concurrent trials of one task share its prompt this way).
    fn pick_slot(&self, prompt: &[LlamaToken], busy: &[bool]) -> (usize, Option<usize>, usize) {
        let idle = || (0..self.slots.len()).filter(|&i| !busy[i]);
        let lru = |cands: &mut dyn Iterator<Item = usize>| cands.min_by_key(|&i| self.slots[i].last_used).unwrap_or(0);
        if !self.prefix_cache {
            return (lru(&mut idle()), None, 0);
        }
        let lcp: Vec<usize> = self.slots.iter().map(|s| common_prefix(&s.tokens, prompt)).collect();
        // The best match; ties go to the most recently used.
        let best = idle().max_by_key(|&i| (lcp[i], self.slots[i].last_used)).unwrap_or(0);
        let whole = |i: usize| lcp[i] == self.slots[i].tokens.len();
        // A conversation continued, or one that diverged late (keeps at least half).
        if lcp[best] > 0 && (whole(best) || lcp[best] * 2 >= self.slots[best].tokens.len()) {
            return (best, None, lcp[best]);
        }
        // Otherwise a free slot, else the least recently used one, seeded with
        // the best slot's cache when that shares more.
        let free: Vec<usize> = idle().filter(|&i| self.slots[i].tokens.is_empty()).collect();
        let target = if free.is_empty() { lru(&mut idle()) } else { lru(&mut free.into_iter()) };
        // The best source among all slots, busy ones included.
        let source = (0..self.slots.len()).max_by_key(|&i| (lcp[i], self.slots[i].last_used)).unwrap_or(best);
        // A cross-sequence copy moves the whole KV buffer of a slot: worth it for a real prefix only.
        if source != target && lcp[source] >= lcp[target] + MIN_COPY_TOKENS { (target, Some(source), lcp[source]) } else { (target, None, lcp[target]) }
    }

    fn clear_slot(&mut self, slot: usize) {
        let _ = self.ctx.clear_kv_cache_seq(Some(slot as u32), None, None);
        self.slots[slot].tokens.clear();
    }

    fn batch_capacity(&self) -> usize {
        self.ctx.n_batch().min(BATCH_TOKENS) as usize
    }
}

fn record_stats(stats: &Mutex<LocalStats>, queued: Duration, g: Option<&Generation>) {
    let mut s = stats.lock().unwrap_or_else(|e| e.into_inner());
    s.requests += 1;
    s.queue_seconds += queued.as_secs_f64();
    if let Some(g) = g {
        s.prompt_tokens += g.prompt_tokens as u64;
        s.cached_tokens += g.cached_tokens as u64;
        s.evaluated_tokens += (g.prompt_tokens - g.cached_tokens) as u64;
        s.generated_tokens += g.generated_tokens as u64;
        s.prompt_seconds += g.prompt_seconds;
        s.generation_seconds += g.generation_seconds;
    }
}

fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn detokenize(model: &LlamaModel, tokens: &[LlamaToken]) -> String {
    if tokens.is_empty() {
        return String::new();
    }
    // remove_special must stay false: with true the crate computes 2n - 1 capacity and underflows on n = 0.
    let bytes = model.vocab().detokenize(tokens, false, true);
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "read_file".into(),
            description: "Read a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }]
    }

    #[test]
    fn parses_calls_and_keeps_text_and_bad_blocks() {
        let raw = "I will look.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.py\", \"n\": 2}}\n</tool_call>\n\
                   <tool_call>\n{\"name\": \"x\", \"arguments\": {oops}\n</tool_call>\n\
                   <tool_call>{\"arguments\": {}}</tool_call>\n\
                   <tool_call>{\"name\": \"run_tests\", \"arguments\": \"{\\\"k\\\": 1}\"}</tool_call> done";
        let (text, calls, bad) = parse_tool_calls(raw);
        assert_eq!(text, "I will look.\n\n\n\n done");
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0], ToolCall { id: "call_0".into(), name: "read_file".into(), arguments: "{\"path\": \"a.py\", \"n\": 2}".into() });
        assert_eq!(calls[1], ToolCall { id: "call_1".into(), name: "run_tests".into(), arguments: "{\"k\": 1}".into() });
        assert_eq!(bad, vec!["\n{\"name\": \"x\", \"arguments\": {oops}\n".to_string(), "{\"arguments\": {}}".to_string()]);
    }

    #[test]
    fn parses_open_block_at_end_and_missing_arguments() {
        let (text, calls, bad) = parse_tool_calls("<tool_call>\n{\"name\": \"finish\"}\n");
        assert_eq!(text, "");
        assert_eq!(calls, vec![ToolCall { id: "call_0".into(), name: "finish".into(), arguments: "{}".into() }]);
        assert!(bad.is_empty());
        let (_, calls, bad) = parse_tool_calls("<tool_call>\n{\"name\": \"finish\", \"argu");
        assert!(calls.is_empty());
        assert_eq!(bad.len(), 1);
        let (text, calls, bad) = parse_tool_calls("  plain answer  ");
        assert_eq!((text.as_str(), calls.len(), bad.len()), ("plain answer", 0, 0));
    }

    #[test]
    fn raw_member_keeps_order_spacing_and_nesting() {
        let t = r#"{"name": "w", "arguments": {"z": "a,}\"b", "a": [1, {"k": []}]}, "x": 1}"#;
        assert_eq!(raw_member(t, "arguments"), Some(r#"{"z": "a,}\"b", "a": [1, {"k": []}]}"#));
        assert_eq!(raw_member(t, "x"), Some("1"));
        assert_eq!(raw_member(t, "nope"), None);
    }

    #[test]
    fn turns_follow_qwen25_tool_format() {
        let call = ToolCall { id: "call_0".into(), name: "read_file".into(), arguments: "{\"path\":\"a.py\"}".into() };
        let call2 = ToolCall { id: "call_1".into(), name: "read_file".into(), arguments: "{\"path\": \"b.py\"}".into() };
        let messages = vec![
            Message::system("Be brief."),
            Message::user("Fix it."),
            Message::assistant("", vec![call.clone(), call2.clone()]),
            Message::tool(&call, "print(1)"),
            Message::tool(&call2, "print(2)"),
            Message::assistant("Done.", vec![]),
            Message::user("Again."),
            Message::assistant("Sure.", vec![call.clone()]),
        ];
        let turns = template_turns(&messages, &spec_tools());
        let roles: Vec<&str> = turns.iter().map(|t| t.0.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user", "assistant", "user", "assistant"]);
        assert_eq!(
            turns[0].1,
            "Be brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
             You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n\
             {\"type\": \"function\", \"function\": {\"name\": \"read_file\", \"description\": \"Read a file.\", \
             \"parameters\": {\"properties\": {\"path\": {\"type\": \"string\"}}, \"required\": [\"path\"], \"type\": \"object\"}}}\n\
             </tools>\n\nFor each function call, return a json object with function name and arguments within \
             <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>"
        );
        assert_eq!(
            turns[2].1,
            "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.py\"}}\n</tool_call>\n\
             <tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"b.py\"}}\n</tool_call>"
        );
        assert_eq!(turns[3].1, "<tool_response>\nprint(1)\n</tool_response>\n<tool_response>\nprint(2)\n</tool_response>");
        assert_eq!(turns[6].1, "Sure.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.py\"}}\n</tool_call>");
        // No tools: messages pass through; no system turn is invented.
        let plain = template_turns(&[Message::user("hi")], &[]);
        assert_eq!(plain, vec![("user".to_string(), "hi".to_string())]);
        // Tools without a system message: the section alone.
        let t = template_turns(&[Message::user("hi")], &spec_tools());
        assert!(t[0].1.starts_with("# Tools\n\n"));
    }

    #[test]
    fn a_generated_call_renders_back_as_generated() {
        let generated = "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/x.py\", \"lines\": [1, 2]}}\n</tool_call>";
        let (text, calls, _) = parse_tool_calls(generated);
        let back = assistant_content(&Message::assistant(text, calls));
        assert_eq!(back, generated);
    }

    #[test]
    fn fenced_calls_need_an_offered_tool_and_arguments() {
        let tools = spec_tools();
        let raw = "Reading it.\n```json\n{\n  \"name\": \"read_file\",\n  \"arguments\": {\n    \"path\": \"calc.py\"\n  }\n}\n```\nthen\n```python\nprint(1)\n```\n```json\n{\"name\": \"other\", \"arguments\": {}}\n```";
        let (text, calls) = parse_fenced_tool_calls(raw, &tools);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "read_file");
        assert_eq!(calls[0].arguments, "{\n    \"path\": \"calc.py\"\n  }");
        assert_eq!(text, "Reading it.\n\nthen\n```python\nprint(1)\n```\n```json\n{\"name\": \"other\", \"arguments\": {}}\n```");
        let (text, calls) = parse_fenced_tool_calls(" {\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}} ", &tools);
        assert_eq!((text.as_str(), calls.len()), ("", 1));
        let (_, calls) = parse_fenced_tool_calls("```json\n{\"name\": \"read_file\"}\n```", &tools);
        assert!(calls.is_empty());
        let (text, calls) = parse_fenced_tool_calls("unterminated ```json\n{", &tools);
        assert_eq!((text.as_str(), calls.len()), ("unterminated ```json\n{", 0));
    }
}
