//! Config errors name the file and key; the single-factor guard; sweeps.

use ablate::experiment::config::load_str;
use ablate::experiment::matrix::{ComparisonKind, ComparisonOrigin};
use ablate::experiment::{Component, Components};
use std::path::Path;

const BASE: &str = r#"
[experiment]
name = "t"
suite = "../tasks/core"
trials = 2
seed = 7

[budget]
max_steps = 4
max_output_tokens_per_step = 100
max_total_tokens = 1000
max_working_seconds = 30

[[models]]
provider = "openai"
model = "m"
endpoint = "http://127.0.0.1:1"
temperature = 0.5
"#;

fn load(extra: &str) -> Result<ablate::experiment::config::Experiment, ablate::InputError> {
    load_str(Path::new("configs/x.toml"), &format!("{BASE}\n{extra}"))
}

#[test]
fn guard_rejects_two_differing_components_and_names_them() {
    let err = load(
        r#"
[arms.a]
[arms.b]
feedback = true
tools = true
[[matrix.pairs]]
control = "a"
treatment = "b"
"#,
    )
    .unwrap_err();
    let msg = err.to_string();
    assert_eq!(err.key.as_deref(), Some("matrix.pairs[0]"));
    assert!(msg.starts_with("configs/x.toml: key `matrix.pairs[0]`"), "{msg}");
    assert!(msg.contains("differ in 2 components"), "{msg}");
    assert!(
        msg.contains("feedback (false vs true)") && msg.contains("tools (false vs true)"),
        "{msg}"
    );
    assert!(msg.contains("`b vs a`"), "names the comparison: {msg}");
}

#[test]
fn guard_rejects_no_differing_component() {
    let err = load("[arms.a]\n[arms.b]\n[[matrix.pairs]]\ncontrol = \"a\"\ntreatment = \"b\"\n")
        .unwrap_err();
    assert!(err.to_string().contains("no component differs"), "{err}");
}

#[test]
fn guard_accepts_exactly_one_differing_component() {
    let exp = load("[arms.a]\n[arms.b]\nloop_guard = true\n[[matrix.pairs]]\ncontrol = \"a\"\ntreatment = \"b\"\n").unwrap();
    assert_eq!(exp.comparisons.len(), 1);
    assert_eq!(
        exp.comparisons[0].kind,
        ComparisonKind::Ablation { component: Component::LoopGuard.name().to_string() }
    );
}

#[test]
fn combined_comparison_may_differ_in_several() {
    let exp = load("[arms.bare]\n[arms.full]\nbase = \"full\"\n[[matrix.combined]]\ncontrol = \"bare\"\ntreatment = \"full\"\n").unwrap();
    assert_eq!(exp.comparisons[0].kind, ComparisonKind::Combined);
    // The boolean components `full` switches on; edit_format and instructions stay as in bare.
    let differs: Vec<&str> =
        exp.comparisons[0].differs.iter().map(|d| d.component.as_str()).collect();
    assert_eq!(differs, ["feedback", "loop_guard", "tools", "acceptance", "progress_handoff"]);
}

#[test]
fn leave_one_out_switches_each_component_off_in_turn() {
    let exp =
        load("[arms.full]\nbase = \"full\"\n[matrix.leave_one_out]\nfrom = \"full\"\n").unwrap();
    assert_eq!(exp.arms.len(), 6);
    assert_eq!(exp.comparisons.len(), 5);
    for c in &exp.comparisons {
        assert_eq!(c.treatment, "full");
        assert_eq!(c.origin, ComparisonOrigin::LeaveOneOut);
        let ComparisonKind::Ablation { component } = &c.kind else { panic!("not an ablation") };
        let control = exp.arm(&c.control).unwrap();
        let component = Component::parse(component).unwrap();
        assert_eq!(control.builtin_components().unwrap().value(component), "false");
        assert_eq!(control.settings.diff(&exp.arm("full").unwrap().settings).len(), 1);
    }
}

#[test]
fn add_one_in_switches_each_component_on_and_reuses_identical_arms() {
    let exp = load("[arms.bare]\n[arms.fb]\nfeedback = true\n[matrix.add_one_in]\nfrom = \"bare\"\ncomponents = [\"feedback\", \"tools\"]\n").unwrap();
    let names: Vec<_> = exp.arms.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, vec!["bare", "fb", "bare-plus-tools"], "the feedback arm is reused");
    assert_eq!(exp.comparisons[0].treatment, "fb");
    assert_eq!(exp.comparisons[1].treatment, "bare-plus-tools");
    assert!(exp.comparisons.iter().all(|c| c.control == "bare"));
}

#[test]
fn unknown_component_lists_the_valid_names() {
    let err =
        load("[arms.bare]\n[matrix.add_one_in]\nfrom = \"bare\"\ncomponents = [\"feedbak\"]\n")
            .unwrap_err();
    assert_eq!(err.key.as_deref(), Some("matrix.add_one_in.components[0]"));
    let msg = err.to_string();
    assert!(msg.contains("feedbak") && msg.contains("feedback, loop_guard, tools, acceptance, progress_handoff, edit_format, instructions"), "{msg}");

    let err = load("[arms.a]\nfeedbak = true\n").unwrap_err();
    assert_eq!(err.key.as_deref(), Some("arms.a.feedbak"));
    assert!(err.to_string().contains("loop_guard"), "lists valid keys: {err}");
}

#[test]
fn an_arm_cannot_override_the_budget() {
    let err = load("[arms.a]\nmax_steps = 20\n").unwrap_err();
    assert_eq!(err.key.as_deref(), Some("arms.a.max_steps"));
    assert!(err.to_string().contains("experiment-level"), "{err}");
}

#[test]
fn type_and_value_errors_name_the_key() {
    let err =
        load_str(Path::new("c.toml"), &BASE.replace("trials = 2", "trials = \"two\"")).unwrap_err();
    assert_eq!(err.key.as_deref(), Some("experiment.trials"));
    assert!(err.file.ends_with("c.toml"));
    let err = load_str(
        Path::new("c.toml"),
        &format!("{}\n[arms.a]\n", BASE.replace("temperature = 0.5", "temperature = 5.0")),
    )
    .unwrap_err();
    assert_eq!(err.key.as_deref(), Some("models[0].temperature"));
    let err = load_str(
        Path::new("c.toml"),
        &format!("{}\nbogus = 1\n[arms.a]\n", BASE.replace("[budget]", "[budget]\nmax_stepz = 1")),
    )
    .unwrap_err();
    assert_eq!(err.key.as_deref(), Some("budget.max_stepz"), "{err}");
    for bad in ["0.0", "1.5", "-0.05"] {
        let err = load_str(
            Path::new("c.toml"),
            &format!(
                "{}\n[arms.a]\n",
                BASE.replace("seed = 7", &format!("seed = 7\nmargin = {bad}"))
            ),
        )
        .unwrap_err();
        assert_eq!(err.key.as_deref(), Some("experiment.margin"), "{bad}: {err}");
    }
    let ok = load_str(
        Path::new("c.toml"),
        &format!("{}\n[arms.a]\n", BASE.replace("seed = 7", "seed = 7\nmargin = 0.05")),
    )
    .unwrap();
    assert_eq!(ok.margin, Some(0.05));
    let err = load("[arms.a]\n[matrix.leave_one_out]\nfrom = \"nope\"\n").unwrap_err();
    assert_eq!(err.key.as_deref(), Some("matrix.leave_one_out.from"));
    assert!(err.to_string().contains("arms: a"), "{err}");
}

#[test]
fn shipped_configs_load() {
    let row = |kind: &str, control: &str, treatment: &str, differs: &str| {
        (kind.to_string(), control.to_string(), treatment.to_string(), differs.to_string())
    };
    // (kind, control, treatment, the components that differ), as each config's [arms] and [matrix] declare them.
    let mut ablate_toml: Vec<_> =
        ["feedback", "loop_guard", "tools", "acceptance", "progress_handoff"]
            .iter()
            .map(|c| {
                row(
                    &format!("ablation {c}"),
                    &format!("full-minus-{}", c.replace('_', "-")),
                    "full",
                    c,
                )
            })
            .collect();
    ablate_toml.push(row(
        "combined",
        "bare",
        "full",
        "feedback loop_guard tools acceptance progress_handoff",
    ));
    let expected = [
        ("configs/core.toml", ablate_toml),
        // The harness against the model at its best: four components at once, the same prompt.
        (
            "configs/ablate.toml",
            vec![row(
                "combined",
                "bare",
                "harness",
                "feedback loop_guard acceptance progress_handoff",
            )],
        ),
        // Add-one-in from the bare arm, two of its components, and EvalPlus's prompt as a pair.
        (
            "configs/humaneval-components.toml",
            vec![
                row("ablation feedback", "bare", "bare-plus-feedback", "feedback"),
                row("ablation acceptance", "bare", "bare-plus-acceptance", "acceptance"),
                row("ablation instructions", "bare", "evalplus", "instructions"),
            ],
        ),
        (
            "configs/seed-demo.toml",
            vec![row("combined", "bare", "harness", "feedback loop_guard tools")],
        ),
        // bare keeps the EvalPlus instructions, full the builtin prompt.
        (
            "configs/humaneval.toml",
            vec![row(
                "combined",
                "bare",
                "full",
                "feedback loop_guard tools acceptance progress_handoff instructions",
            )],
        ),
        // Two prompt files, nothing else: the protocol's effect is an ablation of `instructions`.
        (
            "configs/humaneval-protocols.toml",
            vec![row("ablation instructions", "evalplus", "qwen", "instructions")],
        ),
        // bare vs full at each of three step budgets.
        (
            "configs/budget.toml",
            ["1", "2", "4"]
                .iter()
                .map(|n| {
                    row(
                        "combined",
                        &format!("bare-at-{n}-steps"),
                        &format!("full-at-{n}-steps"),
                        "feedback loop_guard tools acceptance progress_handoff",
                    )
                })
                .collect(),
        ),
    ];
    for (cfg, want) in expected {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(cfg);
        let exp = ablate::experiment::config::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let got: Vec<_> = exp
            .comparisons
            .iter()
            .map(|c| {
                let kind = match &c.kind {
                    ComparisonKind::Ablation { component } => format!("ablation {component}"),
                    ComparisonKind::Combined => "combined".to_string(),
                };
                let differs =
                    c.differs.iter().map(|d| d.component.as_str()).collect::<Vec<_>>().join(" ");
                row(&kind, &c.control, &c.treatment, &differs)
            })
            .collect();
        assert_eq!(got, want, "{cfg}");
    }
}

/// Every duration, amount and size is finite and in range: `inf`, `nan` and
/// `1e300` are valid TOML floats that used to pass and then panic when turned
/// into a Duration.
#[test]
fn durations_amounts_and_sizes_out_of_range_name_the_key() {
    let budget = "max_working_seconds = 30";
    let model = "temperature = 0.5";
    let cases: &[(&str, &str, &str)] = &[
        (budget, "max_working_seconds = inf", "budget.max_working_seconds"),
        (budget, "max_working_seconds = nan", "budget.max_working_seconds"),
        (budget, "max_working_seconds = 1e300", "budget.max_working_seconds"),
        (budget, "max_working_seconds = -5", "budget.max_working_seconds"),
        (budget, "max_working_seconds = 604801", "budget.max_working_seconds"),
        (budget, "max_working_seconds = 30\nmax_cost_usd = inf", "budget.max_cost_usd"),
        (budget, "max_working_seconds = 30\nmax_cost_usd = nan", "budget.max_cost_usd"),
        (
            model,
            "temperature = 0.5\nrequest_timeout_seconds = inf",
            "models[0].request_timeout_seconds",
        ),
        (
            model,
            "temperature = 0.5\nrequest_timeout_seconds = nan",
            "models[0].request_timeout_seconds",
        ),
        (
            model,
            "temperature = 0.5\nrequest_timeout_seconds = 86401",
            "models[0].request_timeout_seconds",
        ),
        (model, "temperature = nan", "models[0].temperature"),
        (model, "temperature = 0.5\ntop_p = nan", "models[0].top_p"),
        (
            model,
            "temperature = 0.5\nretry = { backoff = \"exponential\", max_attempts = 3, base_ms = 10, max_ms = 86400001 }",
            "models[0].retry.max_ms",
        ),
        (
            model,
            "temperature = 0.5\nretry = { backoff = \"exponential\", max_attempts = 101, base_ms = 10, max_ms = 20 }",
            "models[0].retry.max_attempts",
        ),
        (
            model,
            "temperature = 0.5\nprice = { input_per_mtok = nan, output_per_mtok = 1.0 }",
            "models[0].price.input_per_mtok",
        ),
        (
            model,
            "temperature = 0.5\nprice = { input_per_mtok = 1.0, output_per_mtok = inf }",
            "models[0].price.output_per_mtok",
        ),
        (
            model,
            "temperature = 0.5\nprice = { input_per_mtok = 1.0, output_per_mtok = 1.0, cached_input_per_mtok = -1.0 }",
            "models[0].price.cached_input_per_mtok",
        ),
        (model, "temperature = 0.5\nmax_response_bytes = 0", "models[0].max_response_bytes"),
        (
            model,
            "temperature = 0.5\nmax_response_bytes = 268435457",
            "models[0].max_response_bytes",
        ),
    ];
    for (from, to, key) in cases {
        let text = format!("{}\n[arms.a]\n", BASE.replace(from, to));
        let err = load_str(Path::new("c.toml"), &text).expect_err(to);
        assert_eq!(err.key.as_deref(), Some(*key), "{to}: {err}");
        assert!(err.to_string().starts_with("c.toml: key "), "{err}");
    }
    // The bounds themselves are accepted: 7 days, 1 day, 256 MiB.
    let edge = BASE.replace(budget, "max_working_seconds = 604800").replace(
        model,
        "temperature = 0.5\nrequest_timeout_seconds = 86400\nmax_response_bytes = 268435456",
    );
    let exp = load_str(Path::new("c.toml"), &format!("{edge}\n[arms.a]\n")).unwrap();
    assert_eq!(exp.budget.max_working_seconds, 604800.0);
    assert_eq!(exp.models[0].max_response_bytes, 268_435_456);
    // Unset, the reply cap is 8 MiB, and it is part of the recorded experiment.
    let exp = load("[arms.a]\n").unwrap();
    assert_eq!(exp.models[0].max_response_bytes, 8 * 1024 * 1024);
    assert_eq!(
        serde_json::to_value(&exp).unwrap()["models"][0]["max_response_bytes"],
        serde_json::json!(8388608)
    );
}

/// An instructions `.toml` is read at load: its own errors name the prompt file and its key;
/// its bytes are digested like any prompt file.
#[test]
fn an_instructions_toml_is_checked_at_load_and_digested() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("x.toml");
    let prompt = dir.path().join("card.toml");
    let text = format!("{BASE}\n[arms.a]\ninstructions = \"card.toml\"\n")
        .replace("../tasks/core", "tasks");
    std::fs::write(&prompt, "user_template = \"Solve:\\n{code}\\n\"\nassistant_prefx = \"x\"\n")
        .unwrap();
    let err = load_str(&cfg, &text).unwrap_err();
    assert!(
        err.file.ends_with("card.toml") && err.key.as_deref() == Some("assistant_prefx"),
        "{err}"
    );
    std::fs::write(&prompt, "system = \"S\"\nuser_template = \"nothing of the task\"\n").unwrap();
    let err = load_str(&cfg, &text).unwrap_err();
    assert!(
        err.file.ends_with("card.toml") && err.key.as_deref() == Some("user_template"),
        "{err}"
    );
    std::fs::write(&prompt, "user_template = \"Solve:\\n{code}\\n\"\n").unwrap();
    let exp = load_str(&cfg, &text).unwrap_or_else(|e| panic!("{e}"));
    // `printf 'user_template = "Solve:\\n{code}\\n"\n' | sha256sum`: the file's bytes as written above.
    assert_eq!(
        exp.prompt_digests["card.toml"],
        "ef9469b95db2c8605c8a398180bf962b3d3f0dca7366a34854ebdec9ff45d3fa"
    );
}

/// configs/README.md documents every builtin component on the commented line of the arm example:
/// `# <name> = <its bare value>  # <the doc the component declares>`, and the presets' defaults
/// there agree with `bare` and `full`.
#[test]
fn configs_readme_documents_every_component_as_declared() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/README.md"))
            .unwrap();
    let (bare, full) = (Components::bare(), Components::full());
    for &c in Component::ALL {
        let value = bare.value(c);
        let toml_value = match value.as_str() {
            "true" | "false" => value.clone(),
            _ if c == Component::Instructions => "\"prompts/x.md\"".to_string(),
            _ => format!("{value:?}"),
        };
        let line = readme
            .lines()
            .find(|l| l.starts_with(&format!("# {} = ", c.name())))
            .unwrap_or_else(|| panic!("configs/README.md has no line `# {} = ...`", c.name()));
        let (setting, doc) = line[2..].split_once(" # ").unwrap();
        assert_eq!(setting.trim(), format!("{} = {toml_value}", c.name()), "{line}");
        assert_eq!(doc.trim(), c.doc(), "{line}");
        // The presets' sentence names exactly the components `full` turns on.
        let sentence = readme.split("`full` = `bare` with ").nth(1).unwrap();
        let sentence = sentence[..sentence.find(" on.").unwrap()].replace('\n', " ");
        let named = sentence.split([',', ' ']).any(|w| w == c.name());
        assert_eq!(named, full.value(c) == "true", "{sentence}: {}", c.name());
    }
}

#[test]
fn the_manifest_writes_a_builtin_arms_components_in_the_registrys_order() {
    // A JSON value sorts its keys; the manifest keeps the order configs/README.md lists them in.
    let exp = ablate::experiment::config::load(Path::new("configs/core.toml")).unwrap();
    let text = serde_json::to_string(&exp.recorded()).unwrap();
    let components = &text[text.find("\"components\":{").expect("a builtin arm")..];
    let components = &components[..components.find('}').unwrap()];
    let at = |k: &str| components.find(&format!("\"{k}\":")).expect(k);
    // The order: the commented settings of configs/README.md's `[arms.bare]` example.
    let readme = std::fs::read_to_string("configs/README.md").unwrap();
    let example = &readme[readme.find("[arms.bare]").unwrap()..];
    let example = &example[..example.find("\n\n").unwrap()];
    let order: Vec<&str> = example
        .lines()
        .filter_map(|l| l.strip_prefix("# ")?.split_once(" = ").map(|(k, _)| k.trim()))
        .collect();
    assert_eq!(order.len(), 7, "{example}");
    assert!(order.windows(2).all(|w| at(w[0]) < at(w[1])), "{order:?} in {components}");
}

/// `[experiment] primary`: the outcomes a verdict can decide on are accepted (pass_rate is the
/// default and recorded as none), with either design; anything else is refused naming the key.
#[test]
fn a_primary_outcome_is_checked_at_load() {
    let with = |primary: &str, extra: &str| {
        load_str(
            Path::new("c.toml"),
            &format!(
                "{}\n[arms.a]\n",
                BASE.replace("seed = 7", &format!("seed = 7\nprimary = \"{primary}\"\n{extra}"))
            ),
        )
    };
    for (primary, recorded) in [
        ("pass_rate", None),
        ("tests_passed", Some("tests_passed")),
        ("reward.accuracy", Some("reward.accuracy")),
        ("harness.solved-fraction", Some("harness.solved-fraction")),
    ] {
        let e = with(primary, "").unwrap();
        assert_eq!(e.primary.as_deref(), recorded, "{primary}");
        assert_eq!(e.recorded().primary.as_deref(), recorded, "{primary}");
    }
    for bad in ["loop_guard_hits", "reward.", "harness.a b", "tokens"] {
        let err = with(bad, "").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("experiment.primary"), "{bad}: {err}");
        assert!(err.to_string().contains("reward.KEY"), "{err}");
    }
    let e = with("tests_passed", "design = \"sequential\"\nmax_tasks = 4").unwrap();
    assert_eq!(e.primary.as_deref(), Some("tests_passed"));
}

#[test]
fn a_budget_sweep_repeats_every_arm_and_comparison_at_each_level() {
    let exp = load(
        "[arms.bare]\n[arms.fb]\nfeedback = true\n[[matrix.pairs]]\ncontrol = \"bare\"\ntreatment = \"fb\"\n[matrix.budget]\nmax_total_tokens = [4000, 8000]\n",
    )
    .unwrap();
    let names: Vec<_> = exp.arms.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        ["bare-at-4000-tokens", "bare-at-8000-tokens", "fb-at-4000-tokens", "fb-at-8000-tokens"]
    );
    // Each arm runs at its level, the other keys as [budget] has them.
    let b = exp.arm("fb-at-8000-tokens").unwrap().budget_under(&exp.budget);
    assert_eq!((b.max_total_tokens, b.max_steps, b.max_working_seconds), (8000, 4, 30.0));
    let pairs: Vec<(&str, &str, &str)> = exp
        .comparisons
        .iter()
        .map(|c| (c.name.as_str(), c.control.as_str(), c.treatment.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("fb vs bare at 4000 tokens", "bare-at-4000-tokens", "fb-at-4000-tokens"),
            ("fb vs bare at 8000 tokens", "bare-at-8000-tokens", "fb-at-8000-tokens"),
        ]
    );
    assert!(exp.comparisons.iter().all(|c| c.budget.as_ref().unwrap().of == "fb vs bare"));
    // Arms at different levels are not compared: the guard refuses them by their budgets.
    let (a, b) = (exp.arm("bare-at-4000-tokens").unwrap(), exp.arm("fb-at-8000-tokens").unwrap());
    let err = ablate::experiment::matrix::guard("x", a, b).unwrap_err().to_string();
    assert!(err.contains("at 4000 tokens") && err.contains("at 8000 tokens"), "{err}");
    // A config without a sweep keeps its digest: the arms write no budget.
    let plain = load("[arms.bare]\n").unwrap();
    assert!(!serde_json::to_string(&plain).unwrap().contains("budget\":{\"of"));
}

#[test]
fn a_bad_budget_sweep_is_refused_naming_the_key() {
    let arms = "[arms.bare]\n[arms.fb]\nfeedback = true\n";
    for (sweep, key, says) in [
        ("[matrix.budget]\n", "matrix.budget", "name one budget key"),
        (
            "[matrix.budget]\nmax_steps = [2, 4]\nmax_total_tokens = [1, 2]\n",
            "matrix.budget",
            "varies one key",
        ),
        ("[matrix.budget]\nmax_tokens = [2, 4]\n", "matrix.budget.max_tokens", "no budget key"),
        ("[matrix.budget]\nmax_steps = 4\n", "matrix.budget.max_steps", "list of levels"),
        ("[matrix.budget]\nmax_steps = [4]\n", "matrix.budget.max_steps", "2 to 20"),
        ("[matrix.budget]\nmax_steps = [4, 2]\n", "matrix.budget.max_steps[1]", "increasing"),
        ("[matrix.budget]\nmax_steps = [2, 2.5]\n", "matrix.budget.max_steps[1]", "whole number"),
        ("[matrix.budget]\nmax_steps = [0, 2]\n", "matrix.budget.max_steps[0]", "from 1 to"),
        (
            "[matrix.budget]\nmax_cost_usd = [1e-300, 1]\n",
            "matrix.budget.max_cost_usd[0]",
            "from 0.001",
        ),
        ("[matrix.budget]\nmax_cost_usd = [0.1, 0.2]\n", "models[0].price", "no price"),
        (
            "[arms.bare-at-2-steps]\n[matrix.budget]\nmax_steps = [2, 3]\n",
            "arms.bare-at-2-steps",
            "taken",
        ),
    ] {
        let err = load(&format!("{arms}{sweep}")).unwrap_err();
        assert_eq!(err.key.as_deref(), Some(key), "{sweep}: {err}");
        assert!(err.to_string().contains(says), "{sweep}: {err}");
    }
    let err = load(&format!("{arms}[matrix.budget]\nmax_working_seconds = [10, 20.5]\n"))
        .map(|e| e.arms.len());
    assert_eq!(err.unwrap(), 4, "seconds may be fractions");
    let whole = load(&format!("{arms}[matrix.budget]\nmax_steps = [2.0, 4]\n")).unwrap();
    assert_eq!(whole.arms[0].name, "bare-at-2-steps", "a whole float is a whole number");
    // Written in the config, the sequential design is refused with a sweep when the plan is made.
    let sequential = BASE.replace("seed = 7", "seed = 7\ndesign = \"sequential\"");
    let exp = load_str(
        Path::new("configs/x.toml"),
        &format!("{sequential}\n{arms}[[matrix.pairs]]\ncontrol = \"bare\"\ntreatment = \"fb\"\n[matrix.budget]\nmax_steps = [2, 4]\n"),
    )
    .unwrap();
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let err = ablate::plan::build(&exp, &suite).unwrap_err();
    assert_eq!(err.key.as_deref(), Some("matrix.budget"));
    assert!(err.to_string().contains("sequential design"), "{err}");
}

#[test]
fn an_arms_container_resources_are_ablated_like_a_component() {
    let exp = load(
        "[arms.one]\nresources = { cpus = 1 }\n[arms.two]\nresources = { cpus = 2.5 }\n[arms.big]\nresources = { cpus = 2.5, memory_mb = 8192 }\n[[matrix.pairs]]\ncontrol = \"one\"\ntreatment = \"two\"\n[[matrix.pairs]]\ncontrol = \"two\"\ntreatment = \"big\"\n",
    )
    .unwrap();
    let kinds: Vec<(String, String, String)> = exp
        .comparisons
        .iter()
        .map(|c| {
            let d = &c.differs[0];
            (format!("{:?}", c.kind), d.control.clone(), d.treatment.clone())
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("Ablation { component: \"resources.cpus\" }".into(), "1".into(), "2.5".into()),
            (
                "Ablation { component: \"resources.memory_mb\" }".into(),
                "the task's".into(),
                "8192".into()
            ),
        ]
    );
    // A leave-one-out from an arm that sets resources keeps them in every arm it makes.
    let exp = load(
        "[arms.full]\nbase = \"full\"\nresources = { pids = 64 }\n[matrix.leave_one_out]\nfrom = \"full\"\n",
    )
    .unwrap();
    assert!(exp.arms.iter().all(|a| a.resources.pids == Some(64)));
    assert!(exp.comparisons.iter().all(|c| c.differs.len() == 1));
    // An arm without resources writes none: every config's digest stays as it was.
    assert!(!serde_json::to_string(&load("[arms.a]\n").unwrap()).unwrap().contains("resources"));
}

#[test]
fn bad_resources_are_refused_naming_the_key() {
    for (arm, key, says) in [
        ("resources = {}", "arms.a.resources", "sets no resource"),
        ("resources = { cpu = 1 }", "arms.a.resources.cpu", "unknown field `cpu`"),
        ("resources = { cpus = 0 }", "arms.a.resources.cpus", "from 0.01 to 1024"),
        ("resources = { cpus = \"2\" }", "arms.a.resources.cpus", "invalid type"),
        ("resources = { memory_mb = 8 }", "arms.a.resources.memory_mb", "16 MB"),
        ("resources = { pids = 1 }", "arms.a.resources.pids", "from 16"),
    ] {
        let err = load(&format!("[arms.a]\n{arm}\n")).unwrap_err();
        assert_eq!(err.key.as_deref(), Some(key), "{arm}: {err}");
        assert!(err.to_string().contains(says), "{arm}: {err}");
    }
}

#[test]
fn resources_on_a_python_task_are_refused_naming_the_arm_and_the_task() {
    let exp = load("[arms.a]\n[arms.b]\nresources = { cpus = 2 }\n").unwrap();
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let err = ablate::plan::build(&exp, &suite).unwrap_err();
    assert_eq!(err.key.as_deref(), Some("arms.b.resources"), "{err}");
    assert!(err.to_string().contains("is a Python task"), "{err}");
}

/// What the config cannot see is refused when the plan is made: the sequential design set by
/// `--until-decided` after the config was checked, and a working-time level above a task's own
/// agent timeout (tasks/terminal's backup-archive: 300 s), which would make two levels alike.
#[test]
fn a_budget_sweep_the_plan_cannot_run_as_drawn_is_refused() {
    let mut exp = load("[arms.a]\n[matrix.budget]\nmax_steps = [2, 4]\n").unwrap();
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    exp.sequential = Some(Default::default());
    let err = ablate::plan::build(&exp, &suite).unwrap_err();
    assert_eq!(err.key.as_deref(), Some("matrix.budget"), "{err}");
    assert!(err.to_string().contains("sequential design"), "{err}");
    let text = BASE
        .replace("../tasks/core", "../tasks/terminal")
        .replace("trials = 2", "trials = 1\ntasks = [\"backup-archive\"]");
    let exp = load_str(
        Path::new("configs/x.toml"),
        &format!("{text}\n[arms.a]\n[matrix.budget]\nmax_working_seconds = [60, 600]\n"),
    )
    .unwrap();
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let err = ablate::plan::build(&exp, &suite).unwrap_err();
    assert_eq!(err.key.as_deref(), Some("matrix.budget"), "{err}");
    assert!(err.to_string().contains("task `backup-archive`'s agent timeout of 300 s"), "{err}");
}

/// `[matrix.factorial]` over three builtin components from `bare`: the full 2^3 design, eight
/// arms (bare itself reused for the run with every factor low), each factor bare (low) or full
/// (high); the plan shows the design.
#[test]
fn a_full_factorial_adds_one_arm_per_run() {
    let exp = load(
        r#"
[arms.bare]
[matrix.factorial]
from = "bare"
components = ["feedback", "tools", "acceptance"]
"#,
    )
    .unwrap();
    let d = exp.factorial.as_ref().unwrap();
    assert_eq!(d.runs.len(), 8);
    assert_eq!(exp.arms.len(), 8);
    assert_eq!(d.runs[0].arm, "bare");
    assert_eq!(d.runs[3].arm, "bare-plus-feedback-tools");
    assert_eq!(d.runs[7].arm, "bare-plus-feedback-tools-acceptance");
    let arm = exp.arms.iter().find(|a| a.name == "bare-plus-feedback-tools").unwrap();
    let c = arm.builtin_components().unwrap();
    assert!(c.feedback && c.tools && !c.acceptance && !c.loop_guard);
    assert!(exp.comparisons.is_empty());
}

/// A fraction: 2^(4-1) with the documented generator (the fourth factor = the product of the
/// first three) has 8 runs; in each, loop_guard is on exactly when an even number of the other
/// three are off. A fraction of resolution III is refused, naming the key and the word.
#[test]
fn a_fraction_follows_its_generator_and_resolution_three_is_refused() {
    let exp = load(
        r#"
[arms.bare]
[matrix.factorial]
from = "bare"
components = ["feedback", "tools", "acceptance", "loop_guard"]
fraction = 1
"#,
    )
    .unwrap();
    let d = exp.factorial.as_ref().unwrap();
    assert_eq!(d.runs.len(), 8);
    for r in &d.runs {
        let low = r.high[..3].iter().filter(|h| !**h).count();
        assert_eq!(r.high[3], low % 2 == 0, "{r:?}");
    }
    let err = load(
        r#"
[arms.bare]
[matrix.factorial]
from = "bare"
components = ["feedback", "tools", "acceptance"]
generators = ["acceptance = feedback * tools"]
"#,
    )
    .unwrap_err();
    assert_eq!(err.key.as_deref(), Some("matrix.factorial"));
    let msg = err.to_string();
    assert!(msg.contains("resolution III") && msg.contains("feedback·tools·acceptance"), "{msg}");
    for (body, key, words) in [
        (
            "from = \"nope\"\ncomponents = [\"feedback\", \"tools\"]",
            "matrix.factorial.from",
            "no arm named `nope`",
        ),
        (
            "from = \"bare\"\ncomponents = [\"feedback\", \"edit_format\"]",
            "matrix.factorial.components[1]",
            "in both presets",
        ),
        (
            "from = \"bare\"\ncomponents = [\"feedback\", \"nope\"]",
            "matrix.factorial.components[1]",
            "no component named `nope`",
        ),
        (
            "from = \"bare\"\ncomponents = [\"feedback\", \"tools\", \"acceptance\"]\nfraction = 1",
            "matrix.factorial.fraction",
            "no documented 2^(3-1)",
        ),
    ] {
        let err = load(&format!("[arms.bare]\n[matrix.factorial]\n{body}\n")).unwrap_err();
        assert_eq!(err.key.as_deref(), Some(key), "{err}");
        assert!(err.to_string().contains(words), "{err}");
    }
}
