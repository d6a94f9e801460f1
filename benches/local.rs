//! Speed of the embedded llama.cpp provider on this machine.
//!
//! `cargo bench --bench local` with the default model in models/ (`make
//! model`); `make bench-local` (benches/local.sh) alternates it with
//! llama.cpp's own speed (benches/llama_ref.cpp) and prints the ratio. Measures:
//! - prompt evaluation tokens/s (an 850-token prompt, no cache),
//! - generation tokens/s (128 single-token decodes, greedy),
//! - a 4-step trial conversation with and without prefix reuse: prompt tokens
//!   evaluated per step, against the tokens the conversation actually added,
//! - (part `sampling`) time per token of top-p sampling, llama.cpp's chain
//!   against ablate's.
//!
//! Settings: ABLATE_LOCAL_* (see model::local); ABLATE_BENCH_REPS (5),
//! ABLATE_BENCH_GEN (128), ABLATE_BENCH_PARTS (`speed,reuse`; also `sampling`),
//! ABLATE_BENCH_MODEL. Run on an idle machine.

use ablate::experiment::config::{ModelSpec, Provider, RetryPolicy};
use ablate::model::local::{GenParams, LocalClient, LocalOptions};
use ablate::model::{ChatRequest, Message};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn spec(path: PathBuf) -> ModelSpec {
    ModelSpec {
        name: "qwen2.5-coder-0.5b".into(),
        provider: Provider::Local,
        model: "qwen".into(),
        endpoint: None,
        api_key_env: None,
        path: Some(path.display().to_string()),
        resolved_path: Some(path),
        temperature: 0.0,
        top_p: 1.0,
        context_tokens: Some(4096),
        request_timeout_seconds: 600.0,
        price: None,
        retry: RetryPolicy::None,
        max_response_bytes: ablate::experiment::config::DEFAULT_MAX_RESPONSE_BYTES,
        reasoning: true,
    }
}

/// The parse-duration task's text and its tests: a long, realistic prompt.
fn parse_duration_texts() -> (String, String) {
    let read = |rel: &str| {
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)).expect(rel)
    };
    (
        read("tasks/core/parse-duration/task.toml"),
        read("tasks/core/parse-duration/tests/test_duration.py"),
    )
}

fn params(max_tokens: u32) -> GenParams {
    GenParams {
        max_tokens,
        temperature: 0.0,
        top_p: 1.0,
        seed: 1,
        timeout: Duration::from_secs(600),
        ignore_eos: false,
        stop: Vec::new(),
    }
}

fn main() {
    let path = std::env::var("ABLATE_BENCH_MODEL").map(PathBuf::from).unwrap_or_else(|_| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
    });
    if !path.is_file() {
        eprintln!("{} is missing: run `make model`", path.display());
        std::process::exit(2);
    }
    let opts = LocalOptions::from_settings(
        &ablate::flags::EngineFlags::from_env()
            .unwrap_or_else(|e| panic!("ABLATE_LOCAL_* settings: {e}")),
    );
    let reps: usize =
        std::env::var("ABLATE_BENCH_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(5).max(1);
    let gen_tokens: u32 =
        std::env::var("ABLATE_BENCH_GEN").ok().and_then(|v| v.parse().ok()).unwrap_or(128);
    let parts = std::env::var("ABLATE_BENCH_PARTS").unwrap_or_else(|_| "speed,reuse".into());
    println!("model {}", path.display());
    if parts.split(',').any(|p| p == "speed") {
        speed(&path, &opts, reps, gen_tokens);
    }
    if parts.split(',').any(|p| p == "reuse") {
        reuse(&path, &opts);
    }
    if parts.split(',').any(|p| p == "sampling") {
        sampling(&path, reps);
    }
    if parts.split(',').any(|p| p == "batched") {
        batched(&path, &opts, reps, gen_tokens);
    }
}

/// Aggregate generation throughput with 1, 2, 4 and 8 concurrent requests
/// (continuous batching), measured like benches/llama_ref.cpp's batched mode:
/// N requests of about 32 prompt tokens each, submitted at once, each
/// generating exactly `gen_tokens` (end tokens ignored), greedy; N x
/// gen_tokens / the wall time from submission to the last reply. Each
/// repetition uses new prompts, so no cache is reused; a warm-up first.
fn batched(path: &std::path::Path, opts: &LocalOptions, reps: usize, gen_tokens: u32) {
    let list: Vec<usize> = std::env::var("ABLATE_BENCH_BATCH")
        .unwrap_or_else(|_| "1,2,4,8".into())
        .split(',')
        .filter_map(|v| v.parse().ok())
        .collect();
    let slots = list.iter().copied().max().unwrap_or(1).max(opts.slots);
    let words = "apple river stone cloud seven orange window garden silver candle forest mirror";
    for &n in &list {
        let client = std::sync::Arc::new(
            LocalClient::with_options(
                &spec(path.to_path_buf()),
                LocalOptions { slots, batch: n, prefix_cache: false, ..opts.clone() },
            )
            .expect("load"),
        );
        let p = GenParams { ignore_eos: true, ..params(gen_tokens) };
        let mut rates = Vec::new();
        for rep in 0..=reps {
            let start = Instant::now();
            let handles: Vec<_> = (0..n)
                .map(|k| {
                    let (c, p) = (client.clone(), p.clone());
                    let prompt = format!(
                        "Request {rep}-{k}. Repeat these words many times: {words} {words}"
                    );
                    std::thread::spawn(move || {
                        c.generate_blocking(&prompt, &p).expect("generate").generated_tokens
                    })
                })
                .collect();
            let total: u32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
            assert_eq!(total, n as u32 * gen_tokens);
            if rep > 0 {
                rates.push(total as f64 / start.elapsed().as_secs_f64());
            }
        }
        let mean = rates.iter().sum::<f64>() / rates.len() as f64;
        println!(
            "ablate batched, {} threads, tg{gen_tokens}, {n} sequences: {mean:.1} tokens/s (mean of {reps})",
            opts.threads
        );
    }
}

/// Time per token of choosing a token at temperature 0.7 and top_p 0.95 (the
/// settings of configs/core.toml) from real logits: llama.cpp's sampler
/// chain (temp, top_p, dist; it sorts the whole vocabulary) against
/// ablate's `TokenSampler`, which sorts only the nucleus candidates.
fn sampling(path: &std::path::Path, reps: usize) {
    use ablate::model::sampling::TokenSampler;
    use llama_cpp_2::context::params::LlamaContextParams;
    use llama_cpp_2::llama_batch::LlamaBatch;
    use llama_cpp_2::model::LlamaModel;
    use llama_cpp_2::model::params::LlamaModelParams;
    use llama_cpp_2::sampling::LlamaSampler;
    use llama_cpp_2::token::LlamaToken;
    use llama_cpp_2::token::data_array::LlamaTokenDataArray;

    let backend = ablate::model::local::backend(false).expect("backend");
    let model =
        LlamaModel::load_from_file(backend, path, &LlamaModelParams::default()).expect("load");
    let mut ctx = model
        .new_context(
            backend,
            LlamaContextParams::default().with_n_ctx(std::num::NonZeroU32::new(1024)),
        )
        .expect("context");
    // Logits after a few prompts, so that peaked and flat distributions are both in.
    let prompts = [
        "<|im_start|>user\nWrite a Python function that parses durations like 1h30m.<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\nOnce",
        "def parse_duration(text):\n    total = 0\n    for",
        "import",
    ];
    let mut all_logits = Vec::new();
    for p in prompts {
        let tokens = model.vocab().tokenize(p.as_bytes(), false, true);
        let mut batch = LlamaBatch::new(1024, 1);
        for (i, t) in tokens.iter().enumerate() {
            batch.add(*t, i as i32, &[0], i + 1 == tokens.len()).unwrap();
        }
        ctx.clear_kv_cache();
        ctx.decode(&mut batch).expect("decode");
        all_logits.push(ctx.get_logits_ith(batch.n_tokens() - 1).to_vec());
    }
    // What llama_sampler_sample does: a candidate per vocabulary entry, then the chain.
    let llama_draw = |logits: &[f32], seed: u32| -> i64 {
        let mut arr = LlamaTokenDataArray::from_iter(
            logits.iter().enumerate().map(|(i, &l)| {
                llama_cpp_2::token::data::LlamaTokenData::new(LlamaToken::new(i as i32), l, 0.0)
            }),
            false,
        );
        let mut chain = LlamaSampler::chain_simple([
            LlamaSampler::temp(0.7),
            LlamaSampler::top_p(0.95, 1),
            LlamaSampler::dist(seed),
        ]);
        arr.apply_sampler(&mut chain);
        arr.selected_token().map(|t| t.0 as i64).unwrap_or(-1)
    };
    let rounds = 40 * reps;
    let t0 = Instant::now();
    let mut sink = 0i64;
    for r in 0..rounds {
        sink += llama_draw(&all_logits[r % all_logits.len()], r as u32);
    }
    let llama_ms = t0.elapsed().as_secs_f64() * 1000.0 / rounds as f64;
    let t0 = Instant::now();
    for r in 0..rounds {
        let mut s = TokenSampler::new(0.7, 0.95, r as u64);
        sink += s.pick(&all_logits[r % all_logits.len()]) as i64;
    }
    let ours_ms = t0.elapsed().as_secs_f64() * 1000.0 / rounds as f64;
    println!(
        "sampling at temperature 0.7, top_p 0.95 over {} tokens: llama.cpp chain {:.2} ms per token, ablate TokenSampler {:.2} ms per token ({} draws each; {})",
        all_logits[0].len(),
        llama_ms,
        ours_ms,
        rounds,
        sink % 2
    );
    // Both must draw from the same distribution: total variation distance
    // between their empirical distributions, per set of logits.
    let draws: usize =
        std::env::var("ABLATE_BENCH_DRAWS").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    for (k, logits) in all_logits.iter().enumerate() {
        let mut a = std::collections::HashMap::<i64, f64>::new();
        let mut b = std::collections::HashMap::<i64, f64>::new();
        let mut s = TokenSampler::new(0.7, 0.95, 99);
        for r in 0..draws {
            *a.entry(llama_draw(logits, r as u32)).or_default() += 1.0 / draws as f64;
            *b.entry(s.pick(logits) as i64).or_default() += 1.0 / draws as f64;
        }
        let keys: std::collections::HashSet<i64> = a.keys().chain(b.keys()).copied().collect();
        let tv: f64 = keys
            .iter()
            .map(|k| (a.get(k).unwrap_or(&0.0) - b.get(k).unwrap_or(&0.0)).abs())
            .sum::<f64>()
            / 2.0;
        println!(
            "  logits set {k}: {} and {} distinct tokens drawn, total variation distance {tv:.3} ({draws} draws each)",
            a.len(),
            b.len()
        );
    }
}

/// Prompt evaluation and generation tokens/s, alternated and averaged over
/// `reps` the way llama.cpp's llama-bench does, with the prefix cache off so
/// every prompt token is evaluated.
fn speed(path: &std::path::Path, opts: &LocalOptions, reps: usize, gen_tokens: u32) {
    let cold = LocalClient::with_options(
        &spec(path.to_path_buf()),
        LocalOptions { prefix_cache: false, ..opts.clone() },
    )
    .expect("load");
    let (task, tests) = parse_duration_texts();
    let long_prompt =
        format!("<|im_start|>user\n{task}\n{tests}<|im_end|>\n<|im_start|>assistant\n");
    let gen_prompt = "<|im_start|>user\nWrite a long Python module with many small utility functions.<|im_end|>\n<|im_start|>assistant\n";
    let _ = cold
        .generate_blocking("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", &params(8)); // warm-up
    let (mut pp, mut tg) = (Vec::new(), Vec::new());
    let (mut n_prompt, mut n_gen, mut depth) = (0, 0, 0);
    for _ in 0..reps {
        let g = cold.generate_blocking(&long_prompt, &params(1)).expect("prompt");
        n_prompt = g.prompt_tokens;
        pp.push(g.prompt_tokens as f64 / g.prompt_seconds);
        // The first token comes from the prompt's logits: gen_tokens + 1 samples
        // take gen_tokens single-token decodes, llama-bench's tg measure.
        let g = cold.generate_blocking(gen_prompt, &params(gen_tokens + 1)).expect("gen");
        n_gen = g.generated_tokens.saturating_sub(1);
        depth = g.prompt_tokens;
        tg.push(n_gen as f64 / g.generation_seconds);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    println!(
        "ablate local provider, {} threads (batch {}), {} slots: pp{} {:.1} tokens/s, tg{} @ d{} {:.1} tokens/s (mean of {})",
        opts.threads,
        opts.batch_threads,
        opts.slots,
        n_prompt,
        mean(&pp),
        n_gen,
        depth,
        mean(&tg),
        reps
    );
    // Generation as configs/core.toml samples it (temperature 0.7, top_p 0.95).
    let mut sampled = Vec::new();
    for r in 0..reps {
        let p =
            GenParams { temperature: 0.7, top_p: 0.95, seed: r as u64, ..params(gen_tokens + 1) };
        let g = cold.generate_blocking(gen_prompt, &p).expect("gen");
        if g.generated_tokens > 1 {
            sampled.push((g.generated_tokens - 1) as f64 / g.generation_seconds);
        }
    }
    if !sampled.is_empty() {
        println!(
            "sampled generation (temperature 0.7, top_p 0.95): {:.1} tokens/s (mean of {})",
            mean(&sampled),
            sampled.len()
        );
    }
}

/// A 4-step trial conversation with and without prefix reuse: prompt tokens
/// evaluated per step against the tokens the conversation added.
fn reuse(path: &std::path::Path, opts: &LocalOptions) {
    let (task, tests) = parse_duration_texts();
    // A multi-step trial: each step resends the conversation plus the reply and new feedback.
    for cache in [false, true] {
        let client = LocalClient::with_options(
            &spec(path.to_path_buf()),
            LocalOptions { prefix_cache: cache, ..opts.clone() },
        )
        .expect("load");
        let mut messages = vec![
            Message::system(ablate::harness::prompts::DEFAULT_SYSTEM),
            Message::user(format!("{task}\n\nThe tests:\n```python\n{tests}\n```")),
        ];
        let mut evaluated = Vec::new();
        let mut added = Vec::new();
        let mut last_total = 0u64;
        let start = Instant::now();
        for step in 0..4 {
            let req = ChatRequest {
                messages: messages.clone(),
                tools: vec![],
                max_tokens: 128,
                temperature: 0.0,
                top_p: 1.0,
                seed: 1,
                timeout: Duration::from_secs(600),
                ..ChatRequest::default()
            };
            let out = client.chat_blocking(&req, format!("bench-{step}"));
            let reply = out.result.expect("reply");
            evaluated.push(reply.usage.input - reply.usage.cached);
            added.push(reply.usage.input - last_total.min(reply.usage.input));
            last_total = reply.usage.input + reply.usage.output;
            messages.push(Message::assistant(reply.text, vec![]));
            messages
                .push(Message::user("The harness ran the checks on your edit.\nChecks: 3/13 tests passed.\nFix the code and send the complete file again."));
        }
        let s = client.stats();
        println!(
            "4-step trial, prefix reuse {}: prompt tokens evaluated per step {:?} (sum {}), new tokens per step {:?} (sum {}), {:.1} s",
            if cache { "on " } else { "off" },
            evaluated,
            evaluated.iter().sum::<u64>(),
            added,
            added.iter().sum::<u64>(),
            start.elapsed().as_secs_f64()
        );
        let _ = s;
    }
}
