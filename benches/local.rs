//! Speed of the embedded llama.cpp provider on this machine.
//!
//! `cargo bench --bench local` (or `make bench-local`) with the default model
//! in models/ (`make model`). Measures:
//! - prompt evaluation tokens/s (a ~600-token prompt, no cache),
//! - generation tokens/s (256 tokens, greedy),
//! - a 4-step trial conversation with and without prefix reuse: prompt tokens
//!   evaluated per step, against the tokens the conversation actually added.
//! Threads: ABLATE_LOCAL_THREADS (see model::local). Run on an idle machine.

use ablate::config::{ModelSpec, Provider, RetryPolicy};
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
    }
}

fn params(max_tokens: u32) -> GenParams {
    GenParams { max_tokens, temperature: 0.0, top_p: 1.0, seed: 1, timeout: Duration::from_secs(600) }
}

fn main() {
    let path = std::env::var("ABLATE_BENCH_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"));
    if !path.is_file() {
        eprintln!("{} is missing: run `make model`", path.display());
        std::process::exit(2);
    }
    let opts = LocalOptions::from_env().expect("ABLATE_LOCAL_* settings");
    println!("model {} ({} threads)", path.display(), opts.threads);

    // Prompt and generation speed, cache off so every prompt token is evaluated.
    let cold = LocalClient::with_options(&spec(path.clone()), LocalOptions { prefix_cache: false, ..opts.clone() }).expect("load");
    let task = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tasks/core/parse-duration/task.toml")).unwrap();
    let tests = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tasks/core/parse-duration/tests/test_duration.py")).unwrap();
    let long_prompt = format!("<|im_start|>user\n{task}\n{tests}<|im_end|>\n<|im_start|>assistant\n");
    let _ = cold.generate_blocking("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", &params(8)); // warm-up
    let mut pp = Vec::new();
    for _ in 0..3 {
        let g = cold.generate_blocking(&long_prompt, &params(1)).expect("prompt");
        pp.push(g.prompt_tokens as f64 / g.prompt_seconds);
    }
    let mut tg = Vec::new();
    for _ in 0..3 {
        let g = cold.generate_blocking("<|im_start|>user\nWrite a long Python module with many small utility functions.<|im_end|>\n<|im_start|>assistant\n", &params(256)).expect("gen");
        tg.push(g.generated_tokens as f64 / g.generation_seconds);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    println!("prompt evaluation: {:.1} tokens/s (median of 3, {} tokens)", median(&mut pp), cold.stats().evaluated_tokens / 4);
    println!("generation:        {:.1} tokens/s (median of 3, 256 tokens)", median(&mut tg));
    drop(cold);

    // A multi-step trial: each step resends the conversation plus the reply and new feedback.
    for cache in [false, true] {
        let client = LocalClient::with_options(&spec(path.clone()), LocalOptions { prefix_cache: cache, ..opts.clone() }).expect("load");
        let mut messages = vec![
            Message::system(ablate::harness::prompts::DEFAULT_SYSTEM),
            Message::user(format!("{task}\n\nThe tests:\n```python\n{tests}\n```")),
        ];
        let mut evaluated = Vec::new();
        let mut added = Vec::new();
        let mut last_total = 0u64;
        let start = Instant::now();
        for step in 0..4 {
            let req = ChatRequest { messages: messages.clone(), tools: vec![], max_tokens: 128, temperature: 0.0, top_p: 1.0, seed: 1, timeout: Duration::from_secs(600) };
            let out = client.chat_blocking(&req, format!("bench-{step}"));
            let reply = out.result.expect("reply");
            evaluated.push(reply.usage.input - reply.usage.cached);
            added.push(reply.usage.input - last_total.min(reply.usage.input));
            last_total = reply.usage.input + reply.usage.output;
            messages.push(Message::assistant(reply.text, vec![]));
            messages.push(Message::user("The harness ran the checks on your edit.\nChecks: 3/13 tests passed.\nFix the code and send the complete file again."));
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
