//! The llama.cpp worker: one thread owns the model and the context, keeps a
//! KV-cache slot per conversation, and decodes every active sequence together
//! (continuous batching). `model::local` describes what it guarantees.

use super::*;
use super::{Message, ModelError, ToolSpec};
use crate::model::chat_template::ChatTemplate;
use crate::model::sampling::TokenSampler;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::vocab::LlamaVocab;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

/// llama.cpp's backend can be initialized once per process; every client (and the
/// benchmarks) share it.
pub fn backend(log: bool) -> Result<&'static LlamaBackend, EngineLoadError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            if !log {
                llama_cpp_2::send_logs_to_tracing(
                    llama_cpp_2::LogOptions::default().with_logs_enabled(false),
                );
            }
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| EngineLoadError::Backend(e.clone()))
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
    template: ChatTemplate,
    slots: Vec<Slot>,
    /// Per-slot limit of prompt + generated tokens.
    limit: usize,
    prefix_cache: bool,
    clock: u64,
}

pub(super) fn worker_main(
    path: PathBuf,
    context_tokens: u32,
    opts: LocalOptions,
    ready: mpsc::SyncSender<Result<LocalInfo, EngineLoadError>>,
    jobs: mpsc::Receiver<Job>,
    stats: Arc<Mutex<LocalStats>>,
) {
    let fail = |e: EngineLoadError| {
        let _ = ready.send(Err(e));
    };
    let backend = match backend(opts.log) {
        Ok(b) => b,
        Err(e) => return fail(e),
    };
    let model = match LlamaModel::load_from_file(backend, &path, &LlamaModelParams::default()) {
        Ok(m) => m,
        Err(e) => return fail(EngineLoadError::Gguf { path: path.clone(), reason: e.to_string() }),
    };
    let (template_text, template) = match load_template(&model, &path, &opts) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let (ctx, n_batch) = match new_context(&model, backend, context_tokens, &opts) {
        Ok(c) => c,
        Err(e) => return fail(e),
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
    let slots = opts.slots;
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
    engine.serve(&jobs, max_batch, &stats);
}

/// The chat template: the `--local-template` file, else the model's own; its text, and the
/// template parsed and checked on a plain exchange.
fn load_template(
    model: &LlamaModel,
    path: &Path,
    opts: &LocalOptions,
) -> Result<(String, ChatTemplate), EngineLoadError> {
    let template_text = template_text(model, path, opts)?;
    let where_from = || match &opts.template {
        Some(file) => format!("--local-template `{}`", file.display()),
        None => format!("the chat template of `{}`", path.display()),
    };
    let vocab = model.vocab();
    let token_text = |t| String::from_utf8_lossy(&vocab.token_to_piece(t, true, None)).into_owned();
    let template =
        match ChatTemplate::new(&template_text, &token_text(vocab.bos()), &token_text(vocab.eos()))
        {
            Ok(t) => t,
            Err(source) => return Err(EngineLoadError::Template { from: where_from(), source }),
        };
    // A template that cannot render a plain exchange fails now, not at the first trial.
    if let Err(e) = template.render(&[Message::system("s"), Message::user("u")], &[]) {
        return Err(EngineLoadError::TemplateRender { from: where_from(), source: e });
    }
    Ok((template_text, template))
}

/// The text of the chat template: the `--local-template` file, else the model's own.
fn template_text(
    model: &LlamaModel,
    path: &Path,
    opts: &LocalOptions,
) -> Result<String, EngineLoadError> {
    match &opts.template {
        Some(file) => std::fs::read_to_string(file)
            .map_err(|source| EngineLoadError::TemplateFile { file: file.clone(), source }),
        None => match model.chat_template(None).map(|t| t.to_string()) {
            Ok(Ok(t)) => Ok(t),
            Ok(Err(e)) => Err(EngineLoadError::TemplateNotUtf8 {
                path: path.to_path_buf(),
                reason: e.to_string(),
            }),
            Err(e) => {
                Err(EngineLoadError::NoTemplate { path: path.to_path_buf(), reason: e.to_string() })
            }
        },
    }
}

/// The llama.cpp context: `opts.slots` sequences of `context_tokens` each; with its batch size.
fn new_context<'m>(
    model: &'m LlamaModel,
    backend: &LlamaBackend,
    context_tokens: u32,
    opts: &LocalOptions,
) -> Result<(LlamaContext<'m>, u32), EngineLoadError> {
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
    match model.new_context(backend, params) {
        Ok(c) => Ok((c, n_batch)),
        Err(e) => Err(EngineLoadError::Context { slots, per_slot, reason: e.to_string() }),
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

impl Seq {
    /// A sequence admitted into `slot`, whose cache holds the first `cached` prompt tokens.
    fn new(
        job: Job,
        admitted: Instant,
        slot: usize,
        prompt_text: String,
        prompt: Vec<LlamaToken>,
        cached: usize,
    ) -> Seq {
        let p = &job.params;
        let sampler = TokenSampler::new(p.temperature, p.top_p, p.seed);
        let g = Generation {
            text: String::new(),
            prompt_tokens: prompt.len() as u32,
            cached_tokens: cached as u32,
            generated_tokens: 0,
            stop: Stop::Timeout,
            stop_sequence: None,
            slot,
            prompt_seconds: 0.0,
            generation_seconds: 0.0,
            max_sequences: 0,
        };
        Seq {
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
        }
    }
}

impl Engine<'_> {
    /// Continuous batching: admit queued requests while there is room, then
    /// one llama_decode over every active sequence; repeat.
    fn serve(&mut self, jobs: &mpsc::Receiver<Job>, max_batch: usize, stats: &Mutex<LocalStats>) {
        let mut active: Vec<Seq> = Vec::new();
        let mut open = true;
        loop {
            if active.is_empty() {
                if !open {
                    break;
                }
                match jobs.recv() {
                    Ok(job) => self.admit(job, &mut active, stats),
                    Err(_) => break,
                }
            }
            while open && active.len() < max_batch {
                match jobs.try_recv() {
                    Ok(job) => self.admit(job, &mut active, stats),
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => open = false,
                }
            }
            if active.is_empty() {
                continue;
            }
            let guard = COMPUTE.lock().unwrap_or_else(|e| e.into_inner());
            self.step(&mut active, stats);
            drop(guard);
        }
    }

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
            let _ = job.reply.send(JobResult {
                prompt,
                generation: None,
                error: Some(e),
                queued,
                compute: Duration::ZERO,
                batch: BatchStats::default(),
            });
        };
        let prompt_text = match &job.input {
            PromptInput::Chat { messages, tools, prefill } => match self.render(messages, tools) {
                Ok(p) => crate::model::chat_template::with_prefill(p, prefill.as_deref()),
                Err(e) => return fail(job, None, e),
            },
            PromptInput::Text(t) => t.clone(),
        };
        let prompt = self.tokenize(&prompt_text);
        if prompt.is_empty() {
            return fail(job, Some(prompt_text), ModelError::Other("the prompt is empty".into()));
        }
        if prompt.len() > self.limit {
            let e = ModelError::Other(format!(
                "prompt of {} tokens exceeds the context of {}",
                prompt.len(),
                self.limit
            ));
            return fail(job, Some(prompt_text), e);
        }
        let slot = self.prepare_slot(&prompt, active);
        let cached = self.slots[slot].tokens.len();
        active.push(Seq::new(job, admitted, slot, prompt_text, prompt, cached));
    }

    /// Give `prompt` a slot that no active sequence holds, seeded from another slot's cache
    /// when that shares more of it, and cut to the part it can reuse: the slot.
    fn prepare_slot(&mut self, prompt: &[LlamaToken], active: &[Seq]) -> usize {
        let busy: Vec<bool> =
            (0..self.slots.len()).map(|i| active.iter().any(|s| s.slot == i)).collect();
        let (slot, source, reusable) = self.pick_slot(prompt, &busy);
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
        slot
    }

    /// One step: a llama_decode holding the token each generating sequence
    /// sampled last (one token per sequence), then one prompt chunk of the
    /// sequence that waits longest, in a llama_decode of its own (a batch
    /// mixing a long prompt with single tokens would be split by llama.cpp
    /// into equal per-sequence pieces, one token each). While others generate,
    /// chunks are short, so a long prompt does not stall them.
    fn step(&mut self, active: &mut Vec<Seq>, stats: &Mutex<LocalStats>) {
        let generating: Vec<usize> =
            (0..active.len()).filter(|&i| active[i].next.is_some()).collect();
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
                if let Err(e) = self.batch.add(
                    s.next.unwrap_or(LlamaToken::new(0)),
                    at as i32,
                    &[s.slot as i32],
                    true,
                ) {
                    error.get_or_insert(e.to_string());
                }
                s.logits = Some(n as i32);
                s.in_step = 1;
            }
            self.decode_step(active, generating.len(), error, stats);
        }
        let Some(i) = active.iter().position(|s| s.next.is_none() && s.pos < s.prompt.len()) else {
            return;
        };
        let cap = self.batch_capacity();
        let chunk = if active.iter().any(|s| s.next.is_some()) {
            cap.min(PROMPT_CHUNK_WHILE_DECODING)
        } else {
            cap
        };
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
    fn decode_step(
        &mut self,
        active: &mut Vec<Seq>,
        n: usize,
        mut error: Option<String>,
        stats: &Mutex<LocalStats>,
    ) {
        let t0 = Instant::now();
        if error.is_none()
            && let Err(e) = self.ctx.decode(&mut self.batch)
        {
            error = Some(e.to_string());
        }
        let dt = t0.elapsed().as_secs_f64();
        let members = active.iter().filter(|s| s.in_step > 0).count() as u32;
        if let Some(e) = error {
            return self.fail_step(active, &e, stats);
        }
        let now = Instant::now();
        let vocab = self.model.vocab();
        let mut i = 0;
        while i < active.len() {
            let s = &mut active[i];
            if s.in_step > 0 {
                // Each token of the step carries an equal share of its time.
                let share = dt * s.in_step as f64 / n.max(1) as f64;
                self.charge(s, share, members);
            }
            let done = match s.logits {
                Some(idx) => self.sample(s, idx, &vocab),
                None => None,
            };
            let timed_out = done.is_none() && s.charged >= s.job.params.timeout.as_secs_f64();
            let cancelled = done.is_none() && s.job.reply.is_closed();
            if done.is_some() || timed_out || cancelled {
                let s = active.swap_remove(i);
                let _ = now;
                self.conclude(s, done, cancelled, stats);
            } else {
                i += 1;
            }
        }
    }

    /// A step that failed fails every sequence in it: their caches are unknown now.
    fn fail_step(&mut self, active: &mut Vec<Seq>, e: &str, stats: &Mutex<LocalStats>) {
        let mut i = 0;
        while i < active.len() {
            if active[i].in_step > 0 {
                let s = active.swap_remove(i);
                self.clear_slot(s.slot);
                let what = if s.next.is_some() { "decode" } else { "evaluate the prompt" };
                let partial = s.next.is_some().then(|| detokenize(self.model, &s.out));
                self.finish(
                    s,
                    Err(ModelError::Other(format!("llama.cpp could not {what}: {e}"))),
                    partial,
                    stats,
                );
            } else {
                i += 1;
            }
        }
    }

    /// Charge a member of the step its `share` of the step's time, and advance its slot by
    /// the tokens it put in.
    fn charge(&mut self, s: &mut Seq, share: f64, members: u32) {
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

    /// Sample the next token from the logits at `idx`; why the sequence stops, if it does.
    fn sample(&self, s: &mut Seq, idx: i32, vocab: &LlamaVocab) -> Option<Stop> {
        let tok = LlamaToken::new(s.sampler.pick(self.ctx.get_logits_ith(idx)) as i32);
        s.g.generated_tokens += 1;
        if vocab.is_eog(tok) && !s.job.params.ignore_eos {
            return Some(Stop::Eos);
        }
        s.out.push(tok);
        if stop_string_in_tail(self.model, &s.out, &s.job.params.stop) {
            Some(Stop::StopString)
        } else if s.g.generated_tokens >= s.job.params.max_tokens
            || self.slots[s.slot].tokens.len() + 1 > self.limit
        {
            Some(Stop::Length)
        } else {
            s.next = Some(tok);
            None
        }
    }

    /// Answer a sequence that is done: stopped (`done`), else cancelled or timed out.
    fn conclude(
        &mut self,
        mut s: Seq,
        done: Option<Stop>,
        cancelled: bool,
        stats: &Mutex<LocalStats>,
    ) {
        let mut text = detokenize(self.model, &s.out);
        if done == Some(Stop::StopString) {
            s.g.stop_sequence = cut_at_stop(&mut text, &s.job.params.stop);
        }
        let result = match done {
            Some(stop) => {
                s.g.stop = stop;
                Ok(())
            }
            None if cancelled => Err(ModelError::Other("the request was cancelled".into())),
            None => Err(ModelError::Timeout(s.job.params.timeout.as_secs_f64())),
        };
        self.finish(s, result, Some(text), stats);
    }

    /// Answer a sequence: its generation (complete, or partial with the error).
    fn finish(
        &mut self,
        mut s: Seq,
        result: Result<(), ModelError>,
        text: Option<String>,
        stats: &Mutex<LocalStats>,
    ) {
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
        self.template
            .render(messages, tools)
            .map_err(|e| ModelError::Other(format!("cannot apply the chat template: {e}")))
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
        let lru = |cands: &mut dyn Iterator<Item = usize>| {
            cands.min_by_key(|&i| self.slots[i].last_used).unwrap_or(0)
        };
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
        let source = (0..self.slots.len())
            .max_by_key(|&i| (lcp[i], self.slots[i].last_used))
            .unwrap_or(best);
        // A cross-sequence copy moves the whole KV buffer of a slot: worth it for a real prefix only.
        if source != target && lcp[source] >= lcp[target] + MIN_COPY_TOKENS {
            (target, Some(source), lcp[source])
        } else {
            (target, None, lcp[target])
        }
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

/// Whether the text of the last tokens holds a stop string (every token is at
/// least one byte, so the last `longest + 1` tokens cover any string that
/// the newest token completed).
fn stop_string_in_tail(model: &LlamaModel, out: &[LlamaToken], stop: &[String]) -> bool {
    let Some(longest) = stop.iter().map(String::len).max() else { return false };
    let tail = &out[out.len().saturating_sub(longest + 1)..];
    let text = detokenize(model, tail);
    stop.iter().any(|s| text.contains(s.as_str()))
}

/// Cut `text` before the earliest stop string in it.
/// Cut `text` before the first stop sequence in it; the sequence that matched.
pub(crate) fn cut_at_stop(text: &mut String, stop: &[String]) -> Option<String> {
    let (at, s) = stop
        .iter()
        .filter_map(|s| text.find(s.as_str()).map(|at| (at, s)))
        .min_by_key(|(at, _)| *at)?;
    text.truncate(at);
    Some(s.clone())
}

fn detokenize(model: &LlamaModel, tokens: &[LlamaToken]) -> String {
    if tokens.is_empty() {
        return String::new();
    }
    // remove_special must stay false: with true the crate computes 2n - 1 capacity and underflows on n = 0.
    let bytes = model.vocab().detokenize(tokens, false, true);
    String::from_utf8_lossy(&bytes).into_owned()
}
