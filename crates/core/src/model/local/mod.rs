//! In-process llama.cpp on a GGUF file (the `local` provider).
//!
//! One `LocalClient` loads its GGUF once. A dedicated worker thread owns the
//! llama.cpp model and context and serves requests one at a time from a
//! queue; `chat()` puts a job on the queue and awaits the reply through a
//! oneshot channel, so any number of concurrent trials can share one model.
//! A process-wide lock also serializes the work of different local models so
//! that they never oversubscribe the CPU.
//!
//! Prompt: the GGUF's own chat template (or the `--local-template` file)
//! run as transformers runs it (`model::chat_template`, minijinja): a
//! template that reads `tools` gets the tools and the conversation as such
//! templates expect them, so the prompt is what the model's own tokenizer
//! config gives (Qwen2.5's default system prompt included when a
//! conversation has none); a template that takes no tools gets the tools in
//! Qwen2.5's Hermes-style text (`# Tools`, `<tools></tools>`, the
//! `<tool_call>` instruction) in the system turn, calls rendered back as
//! `<tool_call>` blocks and each run of results as one user turn of
//! `<tool_response>` blocks (`chat_format::template_turns`).
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
//! Settings (each an `ablate run --local-*` flag or its environment variable,
//! `model::EngineSettings`): ABLATE_LOCAL_THREADS (generation and, unless
//! ABLATE_LOCAL_BATCH_THREADS is set, prompt evaluation; default: every core;
//! see `LocalOptions`),
//! ABLATE_LOCAL_SLOTS (default 8), ABLATE_LOCAL_BATCH (default 4; 1 = one sequence at a time), ABLATE_LOCAL_PREFIX_CACHE (default on),
//! ABLATE_LOCAL_FENCED_TOOL_CALLS (default off; see `LocalOptions`),
//! ABLATE_LOCAL_TEMPLATE (a Jinja chat template file, instead of the GGUF's),
//! ABLATE_LOCAL_LOG=1 (keep llama.cpp's own log on stderr).

mod engine;

use super::chat_format::{parse_fenced_tool_calls, parse_tool_calls};
use super::sampling::{self};
use super::{
    BoxFuture, CallOutcome, ChatReply, ChatRequest, EngineLoadError, Message, ModelClient,
    ModelError, SetupError, SetupReason, ToolSpec,
};
use crate::experiment::config::ModelSpec;
use crate::record::Tokens;
pub use engine::backend;
use engine::worker_main;
use serde::Serialize;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Context size when the model spec gives none.
pub(crate) const DEFAULT_CONTEXT_TOKENS: u32 =
    crate::experiment::config::DEFAULT_LOCAL_CONTEXT_TOKENS;
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
    /// A Jinja chat template file used instead of the GGUF's own template.
    pub template: Option<PathBuf>,
    /// Leave llama.cpp's log on stderr.
    pub log: bool,
}

impl Default for LocalOptions {
    /// Every core, for prompts and for generation. Measured on 2 cores
    /// (benches/llama_ref.cpp, Qwen2.5-Coder-0.5B): idle, generation ran at
    /// about 27 tokens/s on 2 threads against 16 on 1; with one other process
    /// busy on a core, 11 against 16. In a 715 s run of configs/core.toml the
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
    /// Defaults, overridden by the settings given (flags or environment).
    pub fn from_settings(s: &crate::model::EngineSettings) -> Self {
        let mut o = LocalOptions::default();
        if let Some(n) = s.threads {
            o.threads = n as usize;
            o.batch_threads = o.threads;
        }
        if let Some(n) = s.batch_threads {
            o.batch_threads = n as usize;
        }
        if let Some(n) = s.slots {
            o.slots = n as usize;
            o.batch = o.batch.min(o.slots);
        }
        if let Some(n) = s.batch {
            o.batch = n as usize;
        }
        if let Some(b) = s.prefix_cache {
            o.prefix_cache = b;
        }
        if let Some(b) = s.fenced_tool_calls {
            o.fenced_tool_calls = b;
        }
        if let Some(b) = s.log {
            o.log = b;
        }
        o.template = s.template.clone().filter(|t| !t.as_os_str().is_empty());
        o
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
    /// Generation stops before the first of these strings (cut from the text).
    pub stop: Vec<String>,
}

impl GenParams {
    fn of(req: &ChatRequest) -> GenParams {
        GenParams {
            max_tokens: req.max_tokens,
            temperature: req.temperature,
            top_p: req.top_p,
            seed: req.seed,
            timeout: req.timeout,
            ignore_eos: false,
            stop: req.stop.iter().filter(|s| !s.is_empty()).cloned().collect(),
        }
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
    /// One of the request's stop strings was generated (cut from the text).
    StopString,
}

impl Stop {
    pub fn name(self) -> &'static str {
        match self {
            Stop::Eos => "eos",
            Stop::Length => "length",
            Stop::Timeout => "timeout",
            Stop::StopString => "stop_string",
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
    /// The stop sequence that ended the generation (`Stop::StopString`).
    pub stop_sequence: Option<String>,
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
    /// The chat template's Jinja text (the GGUF's, or the --local-template file's).
    pub template: String,
}

enum PromptInput {
    /// Rendered by the chat template with the generation prompt, then `prefill` appended.
    Chat {
        messages: Vec<Message>,
        tools: Vec<ToolSpec>,
        prefill: Option<String>,
    },
    Text(String),
}

impl PromptInput {
    /// A chat request's prompt: its messages, the tools it offers, its prefill.
    fn of(req: &ChatRequest) -> PromptInput {
        PromptInput::Chat {
            messages: req.messages.clone(),
            tools: offered_tools(req),
            prefill: req.prefill.clone(),
        }
    }
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
pub(crate) struct BatchStats {
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
    /// Load the model of a `local` spec with the engine settings given.
    pub fn new(
        spec: &ModelSpec,
        engine: &crate::model::EngineSettings,
    ) -> Result<Self, SetupError> {
        Self::with_options(spec, LocalOptions::from_settings(engine))
    }

    pub fn with_options(spec: &ModelSpec, opts: LocalOptions) -> Result<Self, SetupError> {
        let name = spec.name.clone();
        let fail = |reason| SetupError::new(&spec.name, reason);
        let path = spec
            .resolved_path
            .clone()
            .or_else(|| spec.path.as_ref().map(PathBuf::from))
            .ok_or_else(|| fail(SetupReason::NoPath))?;
        if !path.is_file() {
            return Err(fail(SetupReason::NotFound(path)));
        }
        let context_tokens = spec.context_tokens.unwrap_or(DEFAULT_CONTEXT_TOKENS);
        if context_tokens < 16 {
            return Err(fail(SetupReason::ContextTooSmall(context_tokens)));
        }
        let slots = opts.slots.max(1);
        let opts = LocalOptions {
            threads: opts.threads.max(1),
            batch_threads: opts.batch_threads.max(1),
            slots,
            batch: opts.batch.clamp(1, slots),
            ..opts
        };
        let stats = Arc::new(Mutex::new(LocalStats::default()));
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<LocalInfo, EngineLoadError>>(1);
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
        let worker_stats = stats.clone();
        let worker_path = path.clone();
        std::thread::Builder::new()
            .name("ablate-llama".into())
            .spawn(move || {
                worker_main(worker_path, context_tokens, opts, ready_tx, jobs_rx, worker_stats)
            })
            .map_err(|e| fail(SetupReason::Worker(e)))?;
        // Hash the file while the worker loads it.
        let sha256 = crate::digest::sha256_file(&path)
            .map_err(|source| fail(SetupReason::Read { path: path.clone(), source }))?;
        let info = match ready_rx.recv() {
            Ok(Ok(info)) => info,
            Ok(Err(e)) => return Err(fail(SetupReason::Load(e))),
            Err(_) => return Err(fail(SetupReason::WorkerStopped)),
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
        let rx = self.submit(PromptInput::of(req), GenParams::of(req));
        let res = rx.and_then(|rx| rx.blocking_recv().map_err(|_| self.stopped()));
        outcome(req, operation_id, res, self.info.options.fenced_tool_calls)
    }

    /// Generate from a prompt text that is given to the tokenizer as is (no
    /// chat template). Must not be called from inside a tokio runtime.
    pub fn generate_blocking(
        &self,
        prompt: &str,
        params: &GenParams,
    ) -> Result<Generation, ModelError> {
        let rx = self.submit(PromptInput::Text(prompt.to_string()), params.clone())?;
        let res = rx.blocking_recv().map_err(|_| self.stopped())?;
        match res.error {
            Some(e) => Err(e),
            None => res.generation.ok_or_else(|| ModelError::Other("no generation".into())),
        }
    }

    fn submit(
        &self,
        input: PromptInput,
        params: GenParams,
    ) -> Result<oneshot::Receiver<JobResult>, ModelError> {
        let (tx, rx) = oneshot::channel();
        self.jobs
            .send(Job { input, params, enqueued: Instant::now(), reply: tx })
            .map_err(|_| self.stopped())?;
        Ok(rx)
    }

    fn stopped(&self) -> ModelError {
        ModelError::Other(format!("model `{}`: the llama.cpp worker has stopped", self.name))
    }
}

impl ModelClient for LocalClient {
    /// The embedded model honours `stop` and `tool_choice: none`; it does not
    /// constrain its decoding (a required tool, a JSON format).
    fn cannot_honour(&self, req: &ChatRequest) -> Option<&'static str> {
        if req.tool_choice.constrains() {
            Some("tool_choice")
        } else if req.response_format.is_some() {
            Some("response_format")
        } else {
            None
        }
    }

    fn chat<'a>(
        &'a self,
        req: &'a ChatRequest,
        operation_id: String,
    ) -> BoxFuture<'a, CallOutcome> {
        Box::pin(async move {
            let rx = self.submit(PromptInput::of(req), GenParams::of(req));
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
            "template": o.template.as_deref().map_or("gguf".into(), |f| f.display().to_string()),
            "template_sha256": crate::digest::sha256_hex(i.template.as_bytes()),
        }))
    }
}

/// The tools the prompt offers: none when the request says `tool_choice: none`.
fn offered_tools(req: &ChatRequest) -> Vec<crate::model::ToolSpec> {
    if req.tool_choice == crate::model::ToolChoice::None { Vec::new() } else { req.tools.clone() }
}

fn outcome(
    req: &ChatRequest,
    operation_id: String,
    res: Result<JobResult, ModelError>,
    fenced: bool,
) -> CallOutcome {
    let res = match res {
        Ok(r) => r,
        Err(e) => JobResult {
            prompt: None,
            generation: None,
            error: Some(e),
            queued: Duration::ZERO,
            compute: Duration::ZERO,
            batch: BatchStats::default(),
        },
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
            "stop_sequence": g.stop_sequence,
            "prefill": req.prefill,
            "batch": res.batch,
        })
    });
    let result = match (res.error, res.generation) {
        (Some(e), _) => Err(e),
        (None, Some(g)) => Ok(chat_reply(req, &g, fenced)),
        (None, None) => Err(ModelError::Other("the llama.cpp worker gave no result".into())),
    };
    CallOutcome {
        operation_id,
        request_body,
        reply_body,
        result,
        attempts: 1,
        latency: res.compute,
        wait: res.queued,
    }
}

/// The reply of a generation: the prefill then the generated text, with its tool calls
/// (fenced ones too when `fenced` and the request offers tools).
fn chat_reply(req: &ChatRequest, g: &Generation, fenced: bool) -> ChatReply {
    // The reply is the prefill the turn started with, then what the model generated.
    let full = match &req.prefill {
        Some(p) => format!("{p}{}", g.text),
        None => g.text.clone(),
    };
    let (mut text, mut tool_calls, unparsed_tool_calls) = parse_tool_calls(&full);
    if fenced && tool_calls.is_empty() && unparsed_tool_calls.is_empty() && !req.tools.is_empty() {
        (text, tool_calls) = parse_fenced_tool_calls(&text, &req.tools);
    }
    ChatReply {
        text,
        tool_calls,
        unparsed_tool_calls,
        finish_reason: Some(
            if matches!(g.stop, Stop::Eos | Stop::StopString) { "stop" } else { "length" }
                .to_string(),
        ),
        usage: Tokens {
            input: g.prompt_tokens as u64,
            output: g.generated_tokens as u64,
            cached: g.cached_tokens as u64,
        },
        token_source: crate::model::TokenSource::Engine,
        usage_note: None,
        fingerprint: None,
    }
}
