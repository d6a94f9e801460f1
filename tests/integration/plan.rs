//! Plan counts, id stability, seed pairing, interleaving, shard partition.

use ablate::experiment::config::{Experiment, load_str};
use ablate::plan::{self, Shard};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

fn tiny_suite() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/suites/tiny")
}

fn experiment(trials: u32, seed: u64, models: usize) -> Experiment {
    let mut text = format!(
        "[experiment]\nname = \"p\"\nsuite = \"{}\"\ntrials = {trials}\nseed = {seed}\n\n[budget]\nmax_steps = 3\nmax_output_tokens_per_step = 10\nmax_total_tokens = 100\nmax_working_seconds = 5\n",
        tiny_suite().display()
    );
    for i in 0..models {
        text.push_str(&format!("\n[[models]]\nname = \"m{i}\"\nprovider = \"ollama\"\nmodel = \"x\"\nendpoint = \"http://127.0.0.1:9\"\ntemperature = 0.3\n"));
    }
    text.push_str(
        "\n[arms.bare]\n[arms.full]\nbase = \"full\"\n[matrix.leave_one_out]\nfrom = \"full\"\n",
    );
    load_str(Path::new("/tmp/p.toml"), &text).unwrap()
}

fn build(exp: &Experiment) -> plan::Plan {
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    plan::build(exp, &suite).unwrap()
}

#[test]
fn count_is_tasks_times_arms_times_models_times_trials() {
    let exp = experiment(3, 1, 2);
    let p = build(&exp);
    assert_eq!(exp.arms.len(), 7);
    assert_eq!(p.trials.len(), 2 * 7 * 2 * 3);
    let ids: HashSet<_> = p.trials.iter().map(|t| t.id.clone()).collect();
    assert_eq!(ids.len(), p.trials.len(), "ids are unique");
    let orders: Vec<u32> = p.trials.iter().map(|t| t.order).collect();
    assert_eq!(orders, (0..p.trials.len() as u32).collect::<Vec<_>>());
}

#[test]
fn ids_are_stable_and_change_with_the_experiment() {
    let a = build(&experiment(2, 1, 1));
    let b = build(&experiment(2, 1, 1));
    assert_eq!(a, b, "same config, same plan");
    let key = |p: &plan::Plan| {
        p.trials
            .iter()
            .map(|t| ((t.task.clone(), t.arm.clone(), t.repeat), t.id.clone()))
            .collect::<HashMap<_, _>>()
    };
    let c = build(&experiment(2, 2, 1));
    let (ka, kc) = (key(&a), key(&c));
    assert!(ka.iter().all(|(k, id)| kc[k] != *id), "a different experiment gives different ids");
    // The first 16 hex digits of sha256 over "config\0d\n" "task\0t\n" "arm\0a\n" "model\0m\n"
    // "repeat\0<r>\n" (digest_parts' framing; python3 hashlib).
    assert_eq!(plan::trial_id("d", "t", "a", "m", 0), "06727043e6da21a0");
    assert_eq!(plan::trial_id("d", "t", "a", "m", 1), "f5322a33bdd3fa01");
}

#[test]
fn seed_depends_only_on_task_and_repeat() {
    let p = build(&experiment(3, 42, 2));
    let mut by_pair: HashMap<(String, u32), HashSet<u64>> = HashMap::new();
    for t in &p.trials {
        by_pair.entry((t.task.clone(), t.repeat)).or_default().insert(t.seed);
    }
    assert_eq!(by_pair.len(), 2 * 3);
    assert!(by_pair.values().all(|s| s.len() == 1), "same seed in every arm and model");
    let distinct: HashSet<u64> = by_pair.values().flatten().copied().collect();
    assert_eq!(distinct.len(), 6, "different (task, repeat) get different seeds");
    // The first 14 hex digits of sha256 over "seed\0<s>\n" "task\0t\n" "repeat\00\n", as an
    // integer, masked to 53 bits (python3 hashlib: int(h[:14], 16) & (2**53 - 1)).
    assert_eq!(plan::trial_seed(1, "t", 0), 1945913720971296);
    assert_eq!(plan::trial_seed(2, "t", 0), 7784686960970987);
}

#[test]
fn order_interleaves_arms_in_a_seeded_random_order() {
    let exp = experiment(4, 5, 1);
    let p = build(&exp);
    let arms = exp.arms.len();
    // Every consecutive block of `arms` trials holds each arm once.
    for block in p.trials.chunks(arms) {
        let set: HashSet<_> = block.iter().map(|t| t.arm.as_str()).collect();
        assert_eq!(set.len(), arms);
    }
    // Not the declaration order everywhere, and a different seed reorders.
    let declared: Vec<_> = exp.arms.iter().map(|a| a.name.clone()).collect();
    assert!(
        p.trials
            .chunks(arms)
            .any(|b| b.iter().map(|t| t.arm.clone()).collect::<Vec<_>>() != declared)
    );
    let q = build(&experiment(4, 6, 1));
    assert_ne!(
        p.trials.iter().map(|t| (&t.task, &t.arm, t.repeat)).collect::<Vec<_>>(),
        q.trials.iter().map(|t| (&t.task, &t.arm, t.repeat)).collect::<Vec<_>>()
    );
}

#[test]
fn shards_partition_the_plan() {
    let p = build(&experiment(3, 9, 2));
    for n in 1..=5u32 {
        let mut seen: HashMap<String, u32> = HashMap::new();
        for k in 1..=n {
            let shard: Shard = format!("{k}/{n}").parse().unwrap();
            let part = p.shard(Some(shard));
            // Round robin by position in the plan: shard k of n holds orders k-1, k-1+n, ...
            let orders: Vec<u32> = part.iter().map(|t| t.order).collect();
            assert_eq!(
                orders,
                (k - 1..p.trials.len() as u32).step_by(n as usize).collect::<Vec<_>>(),
                "shard {k}/{n}"
            );
            for t in part {
                *seen.entry(t.id).or_default() += 1;
            }
        }
        assert_eq!(seen.len(), p.trials.len(), "every trial in some shard (n={n})");
        assert!(seen.values().all(|&c| c == 1), "no trial in two shards (n={n})");
    }
    for bad in ["0/3", "4/3", "x/2", "3", "1/0"] {
        assert_eq!(
            bad.parse::<Shard>().unwrap_err().to_string(),
            format!("invalid shard `{bad}`: use K/N with 1 <= K <= N, e.g. --shard 2/4")
        );
    }
}

#[test]
fn unknown_task_in_config_names_the_key() {
    let mut exp = experiment(1, 1, 1);
    exp.tasks = vec!["add-two".into(), "nope".into()];
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let err = plan::build(&exp, &suite).unwrap_err();
    assert_eq!(err.key.as_deref(), Some("experiment.tasks[1]"));
    assert!(err.to_string().contains("add-two, is-even"), "{err}");
}

#[test]
fn a_sequential_design_runs_task_by_task_in_a_seeded_order_and_refuses_a_fixed_budget() {
    let mut exp = experiment(3, 1, 2);
    let fixed = build(&exp);
    exp.sequential = Some(Default::default());
    let seq = build(&exp);
    // The same trials (ids hash the resolved experiment, so they differ from the fixed design's), task by task:
    // every trial of the first task before any of the second.
    assert_eq!(seq.trials.len(), fixed.trials.len());
    let per_task = 7 * 2 * 3;
    let first = &seq.trials[0].task;
    assert!(
        seq.trials[..per_task].iter().all(|t| &t.task == first),
        "one task's trials come together"
    );
    assert!(seq.trials[per_task..].iter().all(|t| &t.task != first));
    // Each (model, repeat) block holds every arm.
    for block in seq.trials.chunks(7) {
        let arms: HashSet<&str> = block.iter().map(|t| t.arm.as_str()).collect();
        assert_eq!(arms.len(), 7);
        assert!(block.iter().all(|t| t.model == block[0].model
            && t.repeat == block[0].repeat
            && t.task == block[0].task));
    }
    // The fixed design's order is the interleaved one, as before.
    assert_ne!(fixed.trials[..per_task].iter().map(|t| &t.task).collect::<HashSet<_>>().len(), 1);
    // The task order follows the seed: over seeds, both tasks come first.
    let firsts: HashSet<String> = (1..12)
        .map(|seed| {
            let mut e = experiment(1, seed, 1);
            e.sequential = Some(Default::default());
            build(&e).trials[0].task.clone()
        })
        .collect();
    assert_eq!(firsts.len(), 2);

    // A budget of the sequential design in a fixed one: refused, naming the key.
    let text = |extra: &str| {
        format!(
            "[experiment]\nname = \"p\"\nsuite = \"{}\"\ntrials = 1\nseed = 1\n{extra}\n[budget]\nmax_steps = 3\nmax_output_tokens_per_step = 10\nmax_total_tokens = 100\nmax_working_seconds = 5\n\n[[models]]\nname = \"m\"\nprovider = \"ollama\"\nmodel = \"x\"\nendpoint = \"http://127.0.0.1:9\"\ntemperature = 0.3\n\n[arms.bare]\n",
            tiny_suite().display()
        )
    };
    let err =
        load_str(Path::new("/tmp/p.toml"), &text("max_tasks = 10\n")).unwrap_err().to_string();
    assert!(err.contains("experiment.max_tasks") && err.contains("sequential"), "{err}");
    let err =
        load_str(Path::new("/tmp/p.toml"), &text("design = \"sequential\"\nmax_trials = 0\n"))
            .unwrap_err()
            .to_string();
    assert!(err.contains("experiment.max_trials"), "{err}");
    let err = load_str(Path::new("/tmp/p.toml"), &text("design = \"adaptive\"\n"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("experiment.design"), "{err}");
    let ok = load_str(Path::new("/tmp/p.toml"), &text("design = \"sequential\"\nmax_tasks = 1\n"))
        .unwrap();
    assert_eq!(ok.sequential.unwrap().max_tasks, Some(1));
    // The budgets of money and running time: sequential only, positive and finite.
    for (extra, key) in [
        ("max_seconds = 60\n", "experiment.max_seconds"),
        ("max_cost_usd = 1.0\n", "experiment.max_cost_usd"),
        ("design = \"sequential\"\nmax_seconds = 0\n", "experiment.max_seconds"),
        ("design = \"sequential\"\nmax_seconds = nan\n", "experiment.max_seconds"),
        ("design = \"sequential\"\nmax_seconds = 1e12\n", "experiment.max_seconds"),
        ("design = \"sequential\"\nmax_cost_usd = -1.0\n", "experiment.max_cost_usd"),
        ("design = \"sequential\"\nmax_cost_usd = inf\n", "experiment.max_cost_usd"),
        // The model has no prices.
        ("design = \"sequential\"\nmax_cost_usd = 5.0\n", "models[0].price"),
    ] {
        let err = load_str(Path::new("/tmp/p.toml"), &text(extra)).unwrap_err().to_string();
        assert!(err.contains(key), "{extra}: {err}");
    }
    let ok =
        load_str(Path::new("/tmp/p.toml"), &text("design = \"sequential\"\nmax_seconds = 90.5\n"))
            .unwrap();
    assert_eq!(ok.sequential.unwrap().max_seconds, Some(90.5));
}

/// `ablate plan` says what the verdicts decide on when the experiment names a primary outcome,
/// and nothing of it otherwise.
#[test]
fn the_plan_states_a_primary_outcome() {
    let mut exp = experiment(1, 1, 1);
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let text = plan::render::render(&exp, &suite, &build(&exp), None);
    assert!(!text.contains("primary outcome"), "{text}");
    exp.primary = Some("tests_passed".into());
    let text = plan::render::render(&exp, &suite, &build(&exp), None);
    assert!(
        text.contains(
            "primary outcome: tests_passed (the verdicts decide on it, a score in [0, 1])"
        ),
        "{text}"
    );
}
