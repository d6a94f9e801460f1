//! External harnesses in the experiment model: `[harness]` keys, arms over
//! declared components, sweeps, the guard at load and at report time, the
//! plan, the manifest; and builtin experiments unchanged.

use crate::common;
use ablate::experiment::config::{Experiment, load_str};
use ablate::experiment::matrix::{ArmOrigin, ComparisonKind, ComparisonOrigin};
use ablate::experiment::{Component, HarnessKind};

use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const BASE: &str = r#"
[experiment]
name = "ext"
suite = "../tasks/core"
trials = 1
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

/// An external harness with no files (nothing to read from disk).
const HARNESS: &str = r#"
[harness]
kind = "external"
command = ["python3", "agent.py"]
components.feedback = [true, false]
components.loop_guard = [true, false]
components.context = ["map", "full"]
"#;

fn load(extra: &str) -> Result<Experiment, ablate::InputError> {
    load_str(Path::new("configs/x.toml"), &format!("{BASE}\n{extra}"))
}

fn external(arms_and_matrix: &str) -> Result<Experiment, ablate::InputError> {
    load(&format!("{HARNESS}\n{arms_and_matrix}"))
}

fn key_err(result: Result<Experiment, ablate::InputError>) -> (String, String) {
    let err = result.expect_err("an input error");
    let msg = err.to_string();
    assert!(msg.starts_with("configs/x.toml: key `"), "names the file and key: {msg}");
    (err.key.unwrap_or_default(), msg)
}

fn values(exp: &Experiment, arm: &str) -> Vec<(String, String)> {
    exp.arm(arm).unwrap_or_else(|| panic!("no arm {arm}")).component_values()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

#[test]
fn external_keys_with_the_builtin_harness_are_errors() {
    for (line, key) in [
        ("command = [\"x\"]", "harness.command"),
        ("files = []", "harness.files"),
        ("components.feedback = [true, false]", "harness.components"),
        ("runs_in = \"host\"", "harness.runs_in"),
    ] {
        for kind in ["", "kind = \"builtin\"\n"] {
            let (k, msg) = key_err(load(&format!("[harness]\n{kind}{line}\n[arms.a]\n")));
            assert_eq!(k, key, "{msg}");
            assert!(msg.contains("external"), "{msg}");
        }
    }
    let (k, msg) = key_err(load("[harness]\nkind = \"extrenal\"\n[arms.a]\n"));
    assert_eq!(k, "harness.kind", "{msg}");
    assert!(msg.contains("external"), "{msg}");
}

#[test]
fn the_hosted_tool_policy_is_the_gateways_and_only_an_external_harness_has_one() {
    let policy = |exp: &Experiment| match &exp.harness_kind {
        HarnessKind::External(h) => h.hosted_tools,
        other => panic!("external, not {other:?}"),
    };
    let omit = external("[arms.a]\n").unwrap();
    assert_eq!(policy(&omit), ablate::record::harness_kind::HostedTools::Omit, "the default");
    let refuse = external("[gateway]\nhosted_tools = \"refuse\"\n[arms.a]\n").unwrap();
    assert_eq!(policy(&refuse), ablate::record::harness_kind::HostedTools::Refuse);
    // Where it was written before, a refusal that says where it goes now.
    let moved = HARNESS
        .replace("kind = \"external\"\n", "kind = \"external\"\nhosted_tools = \"refuse\"\n");
    let (k, msg) = key_err(load(&format!("{moved}\n[arms.a]\n")));
    assert_eq!(k, "harness.hosted_tools", "{msg}");
    assert!(msg.contains("[gateway] hosted_tools"), "{msg}");
    // The builtin loop calls its model without a gateway.
    let (k, msg) = key_err(load("[gateway]\nhosted_tools = \"omit\"\n[arms.a]\n"));
    assert_eq!(k, "gateway.hosted_tools", "{msg}");
    // A value or a key the gateway does not know.
    let (k, msg) = key_err(external("[gateway]\nhosted_tools = \"run\"\n[arms.a]\n"));
    assert!(k.starts_with("gateway"), "{k}: {msg}");
    assert!(msg.contains("omit") && msg.contains("refuse"), "{msg}");
    let (k, msg) = key_err(external("[gateway]\nport = 1\n[arms.a]\n"));
    assert!(k.starts_with("gateway"), "{k}: {msg}");
}

#[test]
fn an_external_harness_needs_a_command_and_components() {
    let no_command = HARNESS.replace("command = [\"python3\", \"agent.py\"]\n", "");
    let (k, _) = key_err(load(&format!("{no_command}\n[arms.a]\n")));
    assert_eq!(k, "harness.command");
    for empty in ["command = []", "command = [\"\", \"x\"]"] {
        let (k, msg) = key_err(load(&format!(
            "{}\n[arms.a]\n",
            HARNESS.replace("command = [\"python3\", \"agent.py\"]", empty)
        )));
        assert_eq!(k, "harness.command", "{empty}: {msg}");
    }
    let (k, _) = key_err(load("[harness]\nkind = \"external\"\ncommand = [\"a\"]\n[arms.a]\n"));
    assert_eq!(k, "harness.components");
    let (k, _) = key_err(load(
        "[harness]\nkind = \"external\"\ncommand = [\"a\"]\ncomponents = {}\n[arms.a]\n",
    ));
    assert_eq!(k, "harness.components");
    // Where it runs on a container task: two places, and no other.
    let (k, msg) = key_err(load(&format!("{HARNESS}runs_in = \"vm\"\n[arms.a]\n")));
    assert_eq!(k, "harness.runs_in", "{msg}");
    assert!(msg.contains("container") && msg.contains("host"), "{msg}");
    // The builtin loop's constants do not apply.
    let (k, _) = key_err(load(&format!("{HARNESS}session_steps = 3\n[arms.a]\n")));
    assert_eq!(k, "harness.session_steps");
}

#[test]
fn declared_values_are_checked() {
    let cases: &[(&str, &str, &str)] = &[
        ("components.context = [\"map\"]", "harness.components.context", "at least two"),
        ("components.context = [\"map\", \"map\"]", "harness.components.context[1]", "twice"),
        ("components.context = [\"map\", 1]", "harness.components.context[1]", "one type"),
        (
            "components.context = [\"map\", 1.5]",
            "harness.components.context[1]",
            "not a boolean, a string or an integer",
        ),
        (
            "components.context = [[1], [2]]",
            "harness.components.context[0]",
            "not a boolean, a string or an integer",
        ),
        ("components.Context = [\"map\", \"full\"]", "harness.components.Context", "snake_case"),
        ("components.description = [\"a\", \"b\"]", "harness.components.description", "arm key"),
        ("components.context = \"map\"", "harness.components.context", "sequence"),
    ];
    for (line, key, says) in cases {
        let text = HARNESS.replace("components.context = [\"map\", \"full\"]", line);
        let (k, msg) = key_err(load(&format!("{text}\n[arms.a]\n")));
        assert_eq!(k, *key, "{line}: {msg}");
        assert!(msg.contains(says), "{line}: {msg}");
    }
}

#[test]
fn an_external_arm_sets_only_declared_components_to_declared_values() {
    let (k, msg) = key_err(external("[arms.a]\ntools = true\n"));
    assert_eq!(k, "arms.a.tools");
    assert!(msg.contains("feedback, loop_guard, context"), "lists the declared ones: {msg}");
    let (k, msg) = key_err(external("[arms.a]\ncontext = \"tiny\"\n"));
    assert_eq!(k, "arms.a.context");
    assert!(msg.contains(r#""map", "full""#), "lists the allowed values: {msg}");
    let (k, msg) = key_err(external("[arms.a]\nfeedback = \"true\"\n"));
    assert_eq!(k, "arms.a.feedback", "a string is not the boolean: {msg}");
    assert!(msg.contains("true, false"), "{msg}");
    let (k, msg) = key_err(external("[arms.a]\nbase = \"full\"\n"));
    assert_eq!(k, "arms.a.base");
    assert!(msg.contains("builtin"), "{msg}");
    let (k, _) = key_err(external("[arms.a]\ndescription = 3\n"));
    assert_eq!(k, "arms.a.description");
    // The budget stays experiment-level.
    let (k, msg) = key_err(external("[arms.a]\nmax_steps = 3\n"));
    assert_eq!(k, "arms.a.max_steps");
    assert!(msg.contains("experiment-level"), "{msg}");
}

#[test]
fn an_unset_component_takes_the_first_value_of_its_list() {
    let exp =
        external("[arms.a]\ndescription = \"only context set\"\ncontext = \"full\"\n[arms.b]\n")
            .unwrap();
    // Declared order, whatever order the arm sets them in.
    assert_eq!(
        values(&exp, "a"),
        pairs(&[("feedback", "true"), ("loop_guard", "true"), ("context", "full")])
    );
    assert_eq!(
        values(&exp, "b"),
        pairs(&[("feedback", "true"), ("loop_guard", "true"), ("context", "map")])
    );
    assert_eq!(exp.arm("a").unwrap().description, "only context set");
    assert!(exp.arm("a").unwrap().builtin_components().is_none());
    let HarnessKind::External(h) = &exp.harness_kind else { panic!("external") };
    assert_eq!(h.command, vec!["python3", "agent.py"]);
    assert_eq!(
        h.components.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        vec!["feedback", "loop_guard", "context"]
    );
    assert_eq!(h.components[2].values, vec![json!("map"), json!("full")]);
}

#[test]
fn builtin_component_values_are_the_builtin_names_and_values() {
    let exp =
        load("[arms.a]\nbase = \"full\"\ntools = false\nedit_format = \"first_fenced\"\n").unwrap();
    assert!(exp.harness_kind.is_builtin());
    let arm = exp.arm("a").unwrap();
    let c = arm.builtin_components().unwrap();
    let expect: Vec<(String, String)> =
        Component::ALL.iter().map(|&k| (k.name().to_string(), c.value(k))).collect();
    assert_eq!(arm.component_values(), expect);
    assert_eq!(
        arm.component_values(),
        pairs(&[
            ("feedback", "true"),
            ("loop_guard", "true"),
            ("tools", "false"),
            ("acceptance", "true"),
            ("progress_handoff", "true"),
            ("edit_format", "first_fenced"),
            ("instructions", "builtin"),
        ])
    );
}

#[test]
fn leave_one_out_changes_each_declared_component_to_each_other_value() {
    let exp = external("[arms.full]\nfeedback = true\nloop_guard = true\ncontext = \"map\"\n[matrix.leave_one_out]\nfrom = \"full\"\n").unwrap();
    let names: Vec<_> = exp.arms.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["full", "full-minus-feedback", "full-minus-loop-guard", "full-context-full"]
    );
    assert_eq!(
        values(&exp, "full-minus-feedback"),
        pairs(&[("feedback", "false"), ("loop_guard", "true"), ("context", "map")])
    );
    assert_eq!(
        values(&exp, "full-minus-loop-guard"),
        pairs(&[("feedback", "true"), ("loop_guard", "false"), ("context", "map")])
    );
    assert_eq!(
        values(&exp, "full-context-full"),
        pairs(&[("feedback", "true"), ("loop_guard", "true"), ("context", "full")])
    );
    assert_eq!(
        exp.arm("full-context-full").unwrap().origin,
        ArmOrigin::LeaveOneOut { from: "full".into(), component: "context".into() }
    );
    let got: Vec<_> = exp
        .comparisons
        .iter()
        .map(|c| (c.name.as_str(), c.control.as_str(), c.treatment.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("feedback: full vs full-minus-feedback", "full-minus-feedback", "full"),
            ("loop_guard: full vs full-minus-loop-guard", "full-minus-loop-guard", "full"),
            ("context: full vs full-context-full", "full-context-full", "full"),
        ]
    );
    for c in &exp.comparisons {
        assert_eq!(c.origin, ComparisonOrigin::LeaveOneOut);
        assert_eq!(c.differs.len(), 1);
    }
    assert_eq!(exp.comparisons[2].kind, ComparisonKind::Ablation { component: "context".into() });
    assert_eq!(
        (
            exp.comparisons[2].differs[0].control.as_str(),
            exp.comparisons[2].differs[0].treatment.as_str()
        ),
        ("full", "map")
    );
}

#[test]
fn add_one_in_from_a_base_arm_and_values_beyond_two() {
    let text = HARNESS.replace(
        "components.context = [\"map\", \"full\"]",
        "components.context = [\"map\", \"full\", \"Repo Map+\"]\ncomponents.retries = [0, 2, -1]",
    );
    let exp = load(&format!(
        "{text}\n[arms.bare]\nfeedback = false\nloop_guard = false\n[matrix.add_one_in]\nfrom = \"bare\"\ncomponents = [\"feedback\", \"context\", \"retries\"]\n"
    ))
    .unwrap();
    let names: Vec<_> = exp.arms.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "bare",
            "bare-plus-feedback",
            "bare-context-full",
            "bare-context-repo-map",
            "bare-retries-2",
            "bare-retries-neg1"
        ]
    );
    assert_eq!(
        values(&exp, "bare"),
        pairs(&[
            ("feedback", "false"),
            ("loop_guard", "false"),
            ("context", "map"),
            ("retries", "0")
        ])
    );
    assert_eq!(
        values(&exp, "bare-retries-neg1"),
        pairs(&[
            ("feedback", "false"),
            ("loop_guard", "false"),
            ("context", "map"),
            ("retries", "-1")
        ])
    );
    assert_eq!(exp.comparisons.len(), 5);
    for c in &exp.comparisons {
        assert_eq!(
            (c.control.as_str(), c.origin),
            ("bare", ComparisonOrigin::AddOneIn),
            "{}",
            c.name
        );
    }
    assert_eq!(exp.comparisons[2].name, "context: bare-context-repo-map vs bare");
    assert_eq!(exp.comparisons[2].differs[0].treatment, "Repo Map+");
    assert_eq!(exp.comparisons[4].kind, ComparisonKind::Ablation { component: "retries".into() });

    let (k, msg) = key_err(load(&format!(
        "{text}\n[arms.bare]\n[matrix.add_one_in]\nfrom = \"bare\"\ncomponents = [\"tools\"]\n"
    )));
    assert_eq!(k, "matrix.add_one_in.components[0]");
    assert!(msg.contains("feedback, loop_guard, context, retries"), "{msg}");
}

#[test]
fn sweeps_reuse_identical_arms_and_refuse_a_taken_name() {
    let exp =
        external("[arms.full]\n[arms.nofb]\nfeedback = false\n[matrix.leave_one_out]\nfrom = \"full\"\ncomponents = [\"feedback\", \"context\"]\n").unwrap();
    let names: Vec<_> = exp.arms.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, vec!["full", "nofb", "full-context-full"], "the declared arm is reused");
    assert_eq!(exp.comparisons[0].control, "nofb");
    let (k, msg) = key_err(external(
        "[arms.full]\n[arms.full-context-full]\nfeedback = false\n[matrix.leave_one_out]\nfrom = \"full\"\n",
    ));
    assert_eq!(k, "arms.full-context-full");
    assert!(msg.contains("taken by the sweep"), "{msg}");
}

#[test]
fn the_guard_compares_over_the_declared_components() {
    let (k, msg) = key_err(external(
        "[arms.a]\n[arms.b]\nfeedback = false\ncontext = \"full\"\n[[matrix.pairs]]\ncontrol = \"a\"\ntreatment = \"b\"\n",
    ));
    assert_eq!(k, "matrix.pairs[0]");
    assert!(
        msg.contains("differ in 2 components")
            && msg.contains("feedback (true vs false)")
            && msg.contains("context (map vs full)"),
        "{msg}"
    );
    let (_, msg) = key_err(external(
        "[arms.a]\n[arms.b]\n[[matrix.pairs]]\ncontrol = \"a\"\ntreatment = \"b\"\n",
    ));
    assert!(msg.contains("no component differs"), "{msg}");

    let exp = external(
        "[arms.a]\n[arms.b]\ncontext = \"full\"\n[arms.c]\nfeedback = false\nloop_guard = false\n[[matrix.pairs]]\ncontrol = \"a\"\ntreatment = \"b\"\n[[matrix.combined]]\ncontrol = \"c\"\ntreatment = \"a\"\n",
    )
    .unwrap();
    assert_eq!(exp.comparisons[0].kind, ComparisonKind::Ablation { component: "context".into() });
    assert_eq!(exp.comparisons[1].kind, ComparisonKind::Combined);
    let differ: Vec<_> = exp.comparisons[1].differs.iter().map(|d| d.component.as_str()).collect();
    assert_eq!(differ, vec!["feedback", "loop_guard"]);
}

/// A config folder with an agent folder and a config naming it.
fn agent_dir(agent: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("agents/my-agent")).unwrap();
    std::fs::write(dir.path().join("agents/my-agent/agent.py"), agent).unwrap();
    std::fs::write(dir.path().join("run.sh"), "python3 agent.py\n").unwrap();
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/suites/tiny");
    let text = format!(
        "{}\n{}files = [\"agents/my-agent/\", \"run.sh\"]\n[arms.full]\n[matrix.leave_one_out]\nfrom = \"full\"\n",
        BASE.replace("../tasks/core", &suite.display().to_string()),
        HARNESS
    );
    let cfg = dir.path().join("ext.toml");
    std::fs::write(&cfg, text).unwrap();
    (dir, cfg)
}

/// The files digest of agent_dir's harness, with agent.py = "print('a')\n" and "print('b')\n"
/// (python3 hashlib, as crates/core/src/digest.rs frames it): sha256 over "agents/my-agent/\0" + the folder's
/// tree digest + "\n" and "run.sh\0" + sha256("python3 agent.py\n") + "\n", the tree digest being
/// sha256 over "agent.py\0" + sha256(agent.py) + "\n".
const FILES_DIGEST_A: &str = "276d7abf2ef0caaddcbcfaaa7901d6ea17c582a154e92ed4dd89956449940c7d";
const FILES_DIGEST_B: &str = "209885a09ce067b945915a18c9a170d1c6ada395f12426ea9581145598ff7fd4";

#[test]
fn the_harness_files_are_part_of_the_config_digest_and_trial_ids() {
    let (dir, cfg) = agent_dir("print('a')\n");
    let a = ablate::experiment::config::load(&cfg).unwrap();
    let again = ablate::experiment::config::load(&cfg).unwrap();
    assert_eq!(a.config_digest(), again.config_digest());
    let HarnessKind::External(h) = &a.harness_kind else { panic!("external") };
    assert_eq!(h.files, vec!["agents/my-agent/", "run.sh"]);
    assert_eq!(h.files_digest, FILES_DIGEST_A);

    std::fs::write(dir.path().join("agents/my-agent/agent.py"), "print('b')\n").unwrap();
    let b = ablate::experiment::config::load(&cfg).unwrap();
    let HarnessKind::External(hb) = &b.harness_kind else { panic!("external") };
    assert_eq!(hb.files_digest, FILES_DIGEST_B);
    assert_ne!(a.config_digest(), b.config_digest(), "editing the agent changes the digest");
    let suite = ablate::suite::load(&a.suite_path).unwrap();
    let (pa, pb) =
        (ablate::plan::build(&a, &suite).unwrap(), ablate::plan::build(&b, &suite).unwrap());
    assert!(pa.trials.iter().zip(&pb.trials).all(|(x, y)| x.id != y.id), "and every trial id");

    std::fs::remove_file(dir.path().join("run.sh")).unwrap();
    let err = ablate::experiment::config::load(&cfg).unwrap_err();
    assert_eq!(err.key.as_deref(), Some("harness.files[1]"), "{err}");
}

/// The digest of a builtin experiment as computed before external harnesses
/// existed: the recorded experiment of a builtin config did not change.
#[test]
fn builtin_config_digests_are_unchanged() {
    // The experiment text as when the value was taken.
    let text = BASE
        .replace(
            "name = \"ext\"",
            "name = \"golden\"\ndescription = \"digest of a builtin experiment\"",
        )
        .replace("trials = 1", "tasks = [\"add-two\"]\ntrials = 2");
    let exp = load_str(
        Path::new("configs/x.toml"),
        &format!(
            "{text}\n[harness]\nsession_steps = 3\n\n[arms.bare]\ndescription = \"nothing on\"\n[arms.fb]\nfeedback = true\n[arms.ff]\nedit_format = \"first_fenced\"\n[arms.full]\nbase = \"full\"\n\n[matrix.leave_one_out]\nfrom = \"full\"\n\n[matrix.add_one_in]\nfrom = \"bare\"\ncomponents = [\"feedback\", \"tools\"]\n\n[[matrix.pairs]]\ncontrol = \"bare\"\ntreatment = \"ff\"\nname = \"edit format\"\n\n[[matrix.combined]]\ncontrol = \"bare\"\ntreatment = \"full\"\n"
        ),
    )
    .unwrap();
    assert_eq!(
        exp.config_digest(),
        "166bfde3bf43994c3c5962dc1abaaef8fbff79848423571295cc22d11b21e135"
    );
    assert_eq!(
        ablate::plan::trial_id(&exp.config_digest(), "add-two", "full-minus-tools", "m", 1),
        "bcf7feb66705bf3e"
    );
    let json = serde_json::to_value(&exp).unwrap();
    assert!(json.get("harness_kind").is_none(), "a builtin experiment records no harness_kind");
}

fn ablate_bin(args: &[&str]) -> (i32, String, String) {
    let out = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_ablate")).args(args).env("NO_COLOR", "1"),
        Duration::from_secs(60),
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn plan_prints_the_harness_the_arms_values_and_the_comparisons() {
    let (_dir, cfg) = agent_dir("print('a')\n");
    let (code, out, err) = ablate_bin(&["plan", cfg.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(
            r#"harness: external, command ["python3", "agent.py"], files agents/my-agent/, run.sh"#
        ),
        "{out}"
    );
    assert!(out.contains(r#"context              ["map", "full"]"#), "{out}");
    assert!(out.contains("full-context-full      feedback=on loop_guard=on context=full  [leave-one-out: full with context=full]"), "{out}");
    assert!(
        out.contains(
            "ablation  context            full vs full-context-full  (context: map vs full)"
        ),
        "{out}"
    );
    assert!(out.contains("2 tasks x 4 arms x 1 models x 1 trials = 8"), "{out}");

    let (code, out, _) = ablate_bin(&["plan", cfg.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let h = &v["experiment"]["harness_kind"];
    assert_eq!(h["kind"], "external");
    assert_eq!(h["components"][2], json!({"name": "context", "values": ["map", "full"]}));
    assert_eq!(
        v["experiment"]["arms"][0]["values"],
        json!({"feedback": true, "loop_guard": true, "context": "map"})
    );

    // A bad key exits 2 naming it.
    let text =
        std::fs::read_to_string(&cfg).unwrap().replace("[arms.full]", "[arms.full]\ntools = true");
    std::fs::write(&cfg, text).unwrap();
    let (code, _, err) = ablate_bin(&["plan", cfg.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("key `arms.full.tools`"), "{err}");
}

/// A synthetic run of an external experiment; the manifest carries the harness.
fn external_run(dir: &Path) -> PathBuf {
    let (_keep, cfg) = agent_dir("print('a')\n");
    let exp = ablate::experiment::config::load(&cfg).unwrap();
    let suite = ablate::suite::load(&exp.suite_path).unwrap();
    let plan = ablate::plan::build(&exp, &suite).unwrap();
    let run = dir.join("run");
    let rate = |_: &str, arm: &str| if arm == "full" { 0.9 } else { 0.2 };
    ablate_synth::write_run(&run, &exp, &suite, &plan, 3, rate).unwrap();
    run
}

#[test]
fn the_manifest_carries_the_external_harness_and_every_arms_values() {
    let dir = tempfile::tempdir().unwrap();
    let run = external_run(dir.path());
    let m: ablate::record::Manifest =
        serde_json::from_str(&std::fs::read_to_string(run.join("manifest.json")).unwrap()).unwrap();
    let HarnessKind::External(h) = m.harness_kind() else { panic!("external in the manifest") };
    assert_eq!(h.command, vec!["python3", "agent.py"]);
    assert_eq!(h.files, vec!["agents/my-agent/", "run.sh"]);
    assert_eq!(h.files_digest, FILES_DIGEST_A);
    assert!(m.prompt_digests.is_empty(), "no builtin prompt for an external harness");
    let arms = m.arms();
    assert_eq!(arms.len(), 4);
    // The JSON object sorts keys; the arms come back in the declared order.
    assert_eq!(arms[3].name, "full-context-full");
    assert_eq!(
        ablate::experiment::matrix::Arm::from_recorded(&arms[3]).unwrap().component_values(),
        pairs(&[("feedback", "true"), ("loop_guard", "true"), ("context", "full")])
    );
    assert_eq!(m.comparisons().len(), 3);
}

#[test]
fn report_reanalyses_external_ablations_and_refuses_an_edited_one() {
    let dir = tempfile::tempdir().unwrap();
    let run = external_run(dir.path());
    let (code, out, err) = ablate_bin(&["report", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("refused"), "{out}");
    let effects = std::fs::read_to_string(run.join("effects.csv")).unwrap();
    assert_eq!(effects.lines().count(), 1 + 3, "{effects}");
    assert!(effects.lines().any(|l| l.contains(",ablation,context,")), "{effects}");

    // Edit the recorded arm so that the context ablation's control differs in feedback too.
    let mpath = run.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&mpath).unwrap()).unwrap();
    for arm in m["experiment"]["arms"].as_array_mut().unwrap() {
        if arm["name"] == "full-context-full" {
            arm["values"]["feedback"] = json!(false);
        }
    }
    std::fs::write(&mpath, serde_json::to_string(&m).unwrap()).unwrap();
    let (code, out, _) = ablate_bin(&["report", run.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(
        out.contains("refused: not shown as an ablation") && out.contains("differ in 2 components"),
        "{out}"
    );
    assert!(
        out.contains("feedback (false vs true)") && out.contains("context (full vs map)"),
        "{out}"
    );
    let effects = std::fs::read_to_string(run.join("effects.csv")).unwrap();
    assert!(
        !effects.lines().any(|l| l.contains(",context,")),
        "not reported as an ablation: {effects}"
    );
    assert_eq!(effects.lines().count(), 1 + 2);
}
