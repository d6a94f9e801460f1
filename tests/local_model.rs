//! End to end with the embedded llama.cpp provider and the small SmolLM2-135M
//! model (`make model-small` fetches it): every trial is recorded with a valid
//! status, real token counts and a trace.
#![cfg(feature = "local")]

mod common;

use ablate::record::{TraceStep, TrialRecord, TrialStatus};
use std::path::Path;

const SMALL_MODEL: &str = "models/smollm2-135m-instruct-q4_1.gguf";
const SMALL_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_local_model_runs_two_arms_end_to_end() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let model = root.join(SMALL_MODEL);
    assert!(model.is_file(), "{} is missing: run `make model-small`", model.display());
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("local.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[experiment]
name = "local-e2e"
suite = "{suite}"
tasks = ["count-vowels", "parse-duration"]
trials = 2
seed = 5

[budget]
max_steps = 3
max_output_tokens_per_step = 128
max_total_tokens = 12000
max_working_seconds = 300

[[models]]
name = "smollm2-135m"
provider = "local"
model = "SmolLM2-135M-Instruct-Q4_1"
path = "{model}"
temperature = 0.7
top_p = 0.95
context_tokens = 4096

[arms.bare]
[arms.harness]
feedback = true
tools = true
acceptance = true

[[matrix.combined]]
control = "bare"
treatment = "harness"
"#,
            suite = root.join("tasks/core").display(),
            model = model.display()
        ),
    )
    .unwrap();
    // The CLI, with the engine's defaults: no ABLATE_LOCAL_* setting of the caller's leaks in.
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ablate"));
    cmd.args([
        "run",
        config.to_str().unwrap(),
        "--results",
        dir.path().join("results").to_str().unwrap(),
        "--run-id",
        "e2e",
        "-j",
        "2",
        "--plain",
    ]);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("ABLATE_LOCAL_") {
            cmd.env_remove(key);
        }
    }
    let out = common::output_within_async(&mut cmd, std::time::Duration::from_secs(1800)).await;
    assert!(out.status.success(), "the run completes: {}", String::from_utf8_lossy(&out.stderr));
    struct Summary {
        dir: std::path::PathBuf,
    }
    let summary = Summary { dir: dir.path().join("results").join("e2e") };
    let records: Vec<TrialRecord> =
        ablate::record::jsonl::read(&summary.dir.join("trials.jsonl")).unwrap().records;
    assert_eq!(records.len(), 8, "2 tasks x 2 arms x 2 trials");
    let mut saw_reuse = false;
    for r in &records {
        assert!(
            matches!(
                r.status,
                TrialStatus::Passed
                    | TrialStatus::Failed
                    | TrialStatus::BudgetExhausted
                    | TrialStatus::Timeout
            ),
            "{}: {:?} {:?}",
            r.trial_id,
            r.status,
            r.error
        );
        assert!(r.steps >= 1);
        assert!(r.tokens.input > 100 && r.tokens.output > 0, "real token counts: {:?}", r.tokens);
        // Graded against the task's declared tests (tasks/core/*/task.toml: `tests = 8` and `tests = 13`).
        let declared = match r.task.as_str() {
            "count-vowels" => 8,
            "parse-duration" => 13,
            other => panic!("task {other} is not in the config"),
        };
        assert_eq!(
            (r.grade.as_ref().map(|g| g.check.total), r.tests_total),
            (Some(declared), declared),
            "{}: graded",
            r.trial_id
        );
        let steps: Vec<TraceStep> = ablate::record::jsonl::read(
            &summary.dir.join("traces").join(format!("{}.jsonl", r.trial_id)),
        )
        .unwrap()
        .records;
        assert_eq!(steps.len() as u32, r.steps, "one trace line per step");
        assert_eq!(steps.iter().map(|s| s.tokens.output).sum::<u64>(), r.tokens.output);
        assert!(
            steps[0].request["prompt"].as_str().is_some_and(|p| p.contains("<|im_start|>")),
            "the prompt as rendered by the chat template"
        );
        if r.arm == "bare" {
            assert_eq!(r.steps, 1, "bare is one call");
        }
        if steps.len() >= 2 {
            // The second call continues the first conversation: its prefix is reused.
            assert!(
                steps[1].tokens.cached >= steps[0].tokens.input / 2,
                "prefix reuse: {:?} then {:?}",
                steps[0].tokens,
                steps[1].tokens
            );
            saw_reuse = true;
        }
    }
    assert!(saw_reuse, "some harness trial took a second step");
    let manifest: ablate::record::Manifest =
        serde_json::from_str(&std::fs::read_to_string(summary.dir.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(
        manifest.models[0].identity.as_deref(),
        Some(format!("gguf-sha256:{SMALL_SHA256}").as_str())
    );
    let engine =
        manifest.models[0].engine.as_ref().expect("the local engine's settings are recorded");
    // The defaults (docs/getting-started.md: every core for prompts and generation, ABLATE_LOCAL_SLOTS 8, ABLATE_LOCAL_BATCH 4).
    let cores = std::thread::available_parallelism().unwrap().get() as u64;
    let settings: Vec<Option<u64>> =
        ["threads", "batch_threads", "slots", "batch"].iter().map(|k| engine[k].as_u64()).collect();
    assert_eq!(settings, [Some(cores), Some(cores), Some(8), Some(4)], "{engine}");
    assert_eq!(engine["prefix_cache"], true, "{engine}");
    assert_eq!(engine["template"], "gguf", "{engine}");
    // The GGUF's template is the one the golden tests render (`sha256sum
    // crates/core/src/model/chat_templates/smollm2-135m-instruct.jinja`).
    assert_eq!(
        engine["template_sha256"],
        "872be49dbb638044ad01b60388f48d469ff2980e5f0dccdc22ec907db54d0788",
        "{engine}"
    );
    // Exports written at the end of the run: every trial recorded, the one combined comparison.
    assert!(summary.dir.join("report.html").is_file());
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(summary.dir.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(
        (report["planned_trials"].as_u64(), report["recorded_trials"].as_u64()),
        (Some(8), Some(8)),
        "{report}"
    );
    let combined: Vec<(&str, &str)> = report["combined"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["control"].as_str().unwrap(), c["treatment"].as_str().unwrap()))
        .collect();
    assert_eq!(combined, [("bare", "harness")]);
    assert!(report["ablations"].as_array().unwrap().is_empty());
}

/// The small model as a greedy local model spec.
fn small_model(
    context_tokens: u32,
    request_timeout_seconds: f64,
) -> ablate::experiment::config::ModelSpec {
    use ablate::experiment::config::{
        DEFAULT_MAX_RESPONSE_BYTES, ModelSpec, Provider, RetryPolicy,
    };
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join(SMALL_MODEL);
    assert!(model.is_file(), "{} is missing: run `make model-small`", model.display());
    ModelSpec {
        name: "s".into(),
        provider: Provider::Local,
        model: "s".into(),
        endpoint: None,
        api_key_env: None,
        path: Some(model.display().to_string()),
        resolved_path: Some(model),
        temperature: 0.0,
        top_p: 1.0,
        context_tokens: Some(context_tokens),
        request_timeout_seconds,
        price: None,
        retry: RetryPolicy::None,
        max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        reasoning: true,
    }
}

/// `--local-template FILE`: the file's Jinja is run instead of the GGUF's
/// template (the prompt is exactly its rendering, with the vocabulary's BOS
/// text given as `bos_token`), and the manifest's engine settings name it with
/// the sha256 of its text; a template that does not parse stops the client at
/// load, naming the file.
#[test]
fn a_template_file_replaces_the_ggufs_own() {
    use ablate::model::local::{LocalClient, LocalOptions};
    use ablate::model::{ChatRequest, Message, ModelClient};
    let spec = small_model(512, 120.0);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain.jinja");
    let text = "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n";
    std::fs::write(&file, text).unwrap();
    let client = LocalClient::with_options(
        &spec,
        LocalOptions { template: Some(file.clone()), ..LocalOptions::default() },
    )
    .unwrap();
    let req = ChatRequest {
        messages: vec![Message::user("Say hi.")],
        tools: vec![],
        max_tokens: 4,
        temperature: 0.0,
        top_p: 1.0,
        seed: 1,
        timeout: std::time::Duration::from_secs(120),
        ..ChatRequest::default()
    };
    let out = client.chat_blocking(&req, "op".into());
    assert!(out.result.is_ok(), "{:?}", out.result);
    // jinja2's rendering of the same template and message (trim_blocks, lstrip_blocks; the
    // source's one trailing newline dropped, as jinja2 drops it); SmolLM2's BOS is <|im_start|>
    // (its GGUF's tokenizer.ggml.bos_token_id 1); no default system turn is added.
    assert_eq!(
        out.request_body["prompt"],
        "<|im_start|><|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant"
    );
    let engine = client.engine().unwrap();
    assert_eq!(engine["template"], file.display().to_string());
    // sha256 of `text` (python3 -c 'import hashlib; print(hashlib.sha256(text.encode()).hexdigest())').
    assert_eq!(
        engine["template_sha256"],
        "da984122ef578daa5946eee655faac4227ebb1906bd987c81461b8d808ad84ef"
    );
    drop(client);
    std::fs::write(&file, "{% for m in messages %}").unwrap();
    let err = LocalClient::with_options(
        &spec,
        LocalOptions { template: Some(file.clone()), ..LocalOptions::default() },
    )
    .err()
    .unwrap();
    let err = err.to_string();
    assert!(
        err.contains(&format!("--local-template `{}`", file.display())) && err.contains("line 1"),
        "{err}"
    );
}

/// Continuous batching: four greedy requests decoded together give each the
/// text it gets alone (one sequence at a time, ABLATE_LOCAL_BATCH=1), and
/// each request's trace says how it shared the engine.
#[test]
fn batched_greedy_generations_match_one_at_a_time() {
    use ablate::model::local::{GenParams, LocalClient, LocalOptions};
    let spec = small_model(1024, 600.0);
    let prompts = [
        "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
        "The capital of France is",
        "List three prime numbers: 2,",
        "# Reverse a string in Python\ndef reverse(s):\n",
    ];
    let params = GenParams {
        max_tokens: 24,
        temperature: 0.0,
        top_p: 1.0,
        seed: 1,
        timeout: std::time::Duration::from_secs(120),
        ignore_eos: false,
        stop: Vec::new(),
    };
    let alone =
        LocalClient::with_options(&spec, LocalOptions { batch: 1, ..LocalOptions::default() })
            .unwrap();
    let single: Vec<String> =
        prompts.iter().map(|p| alone.generate_blocking(p, &params).unwrap().text).collect();
    drop(alone);
    let batched = std::sync::Arc::new(
        LocalClient::with_options(&spec, LocalOptions { batch: 4, ..LocalOptions::default() })
            .unwrap(),
    );
    // Each thread sends its generation (or its panic) back; the wait for it is bounded.
    let waits: Vec<_> = prompts
        .iter()
        .map(|p| {
            let (c, p, params) = (batched.clone(), p.to_string(), params.clone());
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(c.generate_blocking(&p, &params).unwrap());
            });
            rx
        })
        .collect();
    let limit = std::time::Duration::from_secs(300);
    let together: Vec<_> = waits
        .into_iter()
        .enumerate()
        .map(|(i, rx)| match rx.recv_timeout(limit) {
            Ok(g) => g,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                panic!("the generation of prompt {i} panicked")
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                panic!("the generation of prompt {i} did not finish within {limit:?}")
            }
        })
        .collect();
    let mut same = 0;
    for (i, g) in together.iter().enumerate() {
        eprintln!("prompt {i}: alone {:?}\n          batched {:?}", single[i], g.text);
        if g.text == single[i] {
            same += 1;
        }
    }
    eprintln!("{same} of {} greedy generations identical alone and batched", prompts.len());
    assert!(
        together.iter().all(|g| g.max_sequences >= 2),
        "the requests were decoded together: {:?}",
        together.iter().map(|g| g.max_sequences).collect::<Vec<_>>()
    );
    assert_eq!(same, prompts.len(), "batched greedy outputs differ from one-at-a-time ones");
}

/// A stop sequence ends the embedded engine's generation on the detokenized text, at the byte
/// where it begins: greedy generation with a stop sequence gives the generation without it,
/// cut before the sequence's first occurrence, and names the sequence that stopped it. The
/// chat path starts the assistant's turn with a prefill and reads the reply as prefill + text.
#[test]
fn a_stop_sequence_cuts_the_generation_where_it_begins_and_a_prefill_starts_the_reply() {
    use ablate::model::local::{GenParams, LocalClient, LocalOptions, Stop};
    let spec = small_model(1024, 600.0);
    let client =
        LocalClient::with_options(&spec, LocalOptions { batch: 1, ..LocalOptions::default() })
            .unwrap();
    let prompt = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n";
    let params = GenParams {
        max_tokens: 40,
        temperature: 0.0,
        top_p: 1.0,
        seed: 1,
        timeout: std::time::Duration::from_secs(120),
        ignore_eos: false,
        stop: Vec::new(),
    };
    let free = client.generate_blocking(prompt, &params).unwrap().text;
    // A stop sequence the free generation contains after its start: two characters of its second line.
    let second = free
        .find('\n')
        .map(|i| i + 1)
        .filter(|&i| free.len() >= i + 2)
        .expect("the free generation has a second line");
    let stop = free[second..].chars().take(2).collect::<String>();
    let cut = free.find(&stop).unwrap();
    let stopped = client
        .generate_blocking(
            prompt,
            &GenParams { stop: vec![stop.clone(), "\u{1}never".into()], ..params.clone() },
        )
        .unwrap();
    eprintln!("free {free:?}\nstop {stop:?} -> {:?}", stopped.text);
    assert_eq!(stopped.text, free[..cut], "cut at the byte where {stop:?} first begins");
    assert_eq!(stopped.stop, Stop::StopString);
    assert_eq!(stopped.stop_sequence.as_deref(), Some(stop.as_str()));

    let req = ablate::model::ChatRequest {
        messages: vec![ablate::model::Message::user(
            "Write a Python function that adds two numbers.",
        )],
        max_tokens: 24,
        temperature: 0.0,
        top_p: 1.0,
        seed: 1,
        timeout: std::time::Duration::from_secs(120),
        prefill: Some("```python\ndef add(".into()),
        ..ablate::model::ChatRequest::default()
    };
    let out = client.chat_blocking(&req, "op".into());
    let reply = out.result.unwrap();
    assert!(reply.text.starts_with("```python\ndef add("), "{:?}", reply.text);
    let prompt = out.request_body["prompt"].as_str().unwrap();
    assert!(
        prompt.ends_with("<|im_start|>assistant\n```python\ndef add("),
        "the prefill follows the generation prompt: {prompt:?}"
    );
    assert_eq!(
        out.reply_body.unwrap()["text"].as_str().map(|t| format!("```python\ndef add({t}")),
        Some(reply.text.clone())
    );
}
