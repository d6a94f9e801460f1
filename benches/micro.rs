//! Micro-benchmarks (criterion): the sampler's pick over a Qwen2.5-sized
//! vocabulary (151,936 tokens), `t_quantile`, and load + analyse of a
//! synthetic run of about 10k trial records.
//!
//! make bench-micro   (cargo bench --no-default-features --bench micro)

use ablate::model::sampling::TokenSampler;
use ablate::report::{analysis, load, stats};
use ablate_synth as synth;
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::Path;

/// Qwen2.5's vocabulary size.
const VOCAB: usize = 151_936;

/// Logits shaped like a language model's: a few strong candidates over a long low tail.
fn logits() -> Vec<f32> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    (0..VOCAB)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let noise = (state >> 40) as f32 / (1u64 << 24) as f32; // [0, 1)
            if i % 9973 == 0 { 18.0 + 4.0 * noise } else { 4.0 * noise - 2.0 }
        })
        .collect()
}

fn sampler(c: &mut Criterion) {
    let logits = logits();
    let mut group = c.benchmark_group("sampler pick, 151936 tokens");
    for (name, temperature, top_p) in
        [("greedy", 0.0, 1.0), ("t 0.7", 0.7, 1.0), ("t 0.7 top-p 0.95", 0.7, 0.95)]
    {
        let mut s = TokenSampler::new(temperature, top_p, 7);
        group.bench_function(name, |b| b.iter(|| s.pick(black_box(&logits))));
    }
    group.finish();
}

fn quantiles(c: &mut Criterion) {
    let mut group = c.benchmark_group("t_quantile");
    for df in [4.0, 99.0, 1e6] {
        group.bench_function(format!("p 0.975, df {df}"), |b| {
            b.iter(|| stats::t_quantile(black_box(0.975), black_box(df)))
        });
    }
    group.finish();
}

fn load_and_analyse(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/core.toml");
    let mut exp = ablate::experiment::config::load(&cfg).unwrap();
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let per_repeat = ablate::plan::build(&exp, &suite).unwrap().trials.len() / exp.trials as usize;
    exp.trials = 10_000usize.div_ceil(per_repeat) as u32;
    let plan = ablate::plan::build(&exp, &suite).unwrap();
    let run = dir.path().join("run");
    let n = synth::write_run(
        &run,
        &exp,
        &suite,
        &plan,
        1,
        |_, arm| if arm == "bare" { 0.3 } else { 0.6 },
    )
    .unwrap();
    let mut group = c.benchmark_group("report");
    group.sample_size(20);
    group.bench_function(format!("load + analyse, {n} records"), |b| {
        b.iter(|| {
            let data = load::load(black_box(&run)).unwrap();
            analysis::analyse(&data)
        })
    });
    group.finish();
}

criterion_group!(benches, sampler, quantiles, load_and_analyse);
criterion_main!(benches);
