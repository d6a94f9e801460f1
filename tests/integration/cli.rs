//! The real binary, run as a user would.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn ablate(args: &[&str]) -> (i32, String, String) {
    common::code_and_output(
        Command::new(env!("CARGO_BIN_EXE_ablate"))
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR")),
        Duration::from_secs(60),
    )
}

#[test]
fn suite_check_passes_on_a_good_suite_and_prints_count_and_digest() {
    let (code, out, err) = ablate(&["suite", "check", "tests/fixtures/suites/tiny"]);
    assert_eq!(code, 0, "{out}{err}");
    let digest = ablate::suite::load(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/suites/tiny"
    )))
    .unwrap()
    .digest;
    assert!(out.contains(&"2 tasks ok; suite tiny".to_string()), "{out}");
    assert!(out.contains(&digest), "{out}");
    assert!(
        out.contains("add-two") && out.contains("stub 0/6") && out.contains("solution 6/6"),
        "{out}"
    );
}

#[test]
fn suite_check_names_each_broken_task_and_fails() {
    let (code, out, _) = ablate(&["suite", "check", "tests/fixtures/suites/broken"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAIL bad-solution")
            && out.contains("solution passes 5 of 6")
            && out.contains("test_zero"),
        "{out}"
    );
    assert!(out.contains("FAIL stub-passes") && out.contains("stub passes 1 of 6"), "{out}");
    assert!(out.contains("ok   good-add"), "{out}");
    assert!(out.contains("2 of 3 tasks have problems: bad-solution, stub-passes"), "{out}");
}

#[test]
fn suite_check_on_a_broken_task_file_names_file_and_key() {
    let dir = tempfile::tempdir().unwrap();
    ablate::sandbox::copy_tree(
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/suites/tiny")),
        dir.path(),
    )
    .unwrap();
    let toml = dir.path().join("is-even/task.toml");
    let text = std::fs::read_to_string(&toml)
        .unwrap()
        .replace("parser = \"unittest\"", "parser = \"nose\"");
    std::fs::write(&toml, text).unwrap();
    let (code, out, _) = ablate(&["suite", "check", dir.path().to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("is-even/task.toml: key `check.parser`"), "{out}");
    assert!(out.contains("ok   add-two"), "the other task is still checked: {out}");
}

#[test]
fn plan_prints_arms_comparisons_and_count() {
    let (code, out, err) = ablate(&["plan", "configs/seed-demo.toml"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("trials: 1 tasks x 2 arms x 2 models x 5 trials = 20"), "{out}");
    assert!(out.contains("combined") && out.contains("not attributable"), "{out}");
    let (code, out, err) = ablate(&["plan", "configs/core.toml"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("ablation  feedback"), "{out}");
    assert!(out.contains("full-minus-tools"), "{out}");
}

#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    // `ablate plan ... | head -0`: the reading end is closed before ablate writes a line.
    let mut child = Command::new(env!("CARGO_BIN_EXE_ablate"))
        .args(["plan", "configs/core.toml"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
}

#[test]
fn plan_json_shard_and_usage_errors() {
    let (code, out, _) = ablate(&["plan", "configs/seed-demo.toml", "--json", "--shard", "1/4"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["trials"].as_array().unwrap().len(), 5);
    let (code, _, err) = ablate(&["plan", "configs/seed-demo.toml", "--shard", "5/4"]);
    assert_eq!(code, 2, "{err}");

    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("bad.toml");
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/configs/seed-demo.toml"))
            .unwrap();
    std::fs::write(&cfg, text.replace("[arms.harness]", "[arms.harness]\nfeedbak = true")).unwrap();
    let (code, _, err) = ablate(&["plan", cfg.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("bad.toml: key `arms.harness.feedbak`"), "{err}");
}

#[test]
fn run_with_an_unreachable_endpoint_stops_before_any_trial() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("x.toml");
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/configs/seed-demo.toml"))
            .unwrap()
            .replace("../tasks/core", concat!(env!("CARGO_MANIFEST_DIR"), "/tasks/core"))
            .replace("http://localhost:11434", "http://127.0.0.1:9");
    std::fs::write(&cfg, text).unwrap();
    let results = dir.path().join("results");
    let (code, _, err) =
        ablate(&["run", cfg.to_str().unwrap(), "--results", results.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("setup failed: model `qwen2.5:7b`: cannot reach http://127.0.0.1:9"),
        "{err}"
    );
    assert!(
        !results.exists() || std::fs::read_dir(&results).unwrap().next().is_none(),
        "no run folder is left"
    );
}

fn ablate_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ablate"));
    cmd.args(args).envs(env.iter().copied()).current_dir(env!("CARGO_MANIFEST_DIR"));
    let out = common::output_within(&mut cmd, Duration::from_secs(60));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn without_bubblewrap_candidate_code_runs_only_when_the_user_opts_in() {
    let missing = [("ABLATE_BWRAP", "/nonexistent/bwrap")];
    let (code, out, err) = ablate_env(&["suite", "check", "tests/fixtures/suites/tiny"], &missing);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("no sandbox for candidate code")
            && err.contains("apt-get install bubblewrap), or pass --unsandboxed to run"),
        "{err}"
    );
    let (code, out, err) =
        ablate_env(&["suite", "check", "tests/fixtures/suites/tiny", "--unsandboxed"], &missing);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("WITHOUT a sandbox"), "{err}");
    assert!(out.contains("solution 6/6"), "{out}");
}

#[test]
fn a_check_command_the_grader_cannot_run_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    ablate::sandbox::copy_tree(
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/suites/tiny")),
        dir.path(),
    )
    .unwrap();
    let toml = dir.path().join("is-even/task.toml");
    let text = std::fs::read_to_string(&toml).unwrap().replace(
        "command = [\"python3\", \"-m\", \"unittest\"",
        "command = [\"sh\", \"-c\", \"echo OK\"",
    );
    std::fs::write(&toml, text).unwrap();
    let (code, out, _) = ablate(&["suite", "check", dir.path().to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("is-even/task.toml: key `check.command`") && out.contains("own runner"),
        "{out}"
    );
}

#[test]
fn a_python_the_sandbox_cannot_read_is_refused_before_anything_runs() {
    // A venv in a folder only root may enter: the jail's uid cannot read it, so checks would run
    // another interpreter. `suite check` refuses at once (exit 2), naming it and what to do.
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path().join("venv");
    let made = common::output_within(
        std::process::Command::new("/usr/bin/python3")
            .args(["-m", "venv", "--without-pip"])
            .arg(&venv),
        Duration::from_secs(60),
    );
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let python = venv.join("bin/python");
    let suite = common::fixture("tiny");
    let run = |python: &std::path::Path| {
        ablate(&["--python", python.to_str().unwrap(), "suite", "check", suite.to_str().unwrap()])
    };
    // Readable by everyone (under the host's /tmp, which the jail replaces by its own): it works.
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap();
    let (code, out, err) = run(&python);
    assert_eq!(code, 0, "{out}{err}");
    std::fs::set_permissions(&venv, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let (code, out, err) = run(&python);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains(&format!(
            "the Python that runs the checks, {}, does not work in the sandbox as outside",
            python.display()
        )),
        "{err}"
    );
    assert!(
        err.contains("cannot start sys.executable")
            && err.contains("or name another with --python"),
        "{err}"
    );
    assert!(out.is_empty(), "nothing ran: {out}");
}

#[test]
fn a_harness_python_the_sandbox_cannot_use_is_refused_naming_the_key() {
    // The harness's venv readable by root only: the run stops before any trial (exit 2), naming
    // `harness.python` and what to do.
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path().join("venv");
    let made = common::output_within(
        std::process::Command::new("/usr/bin/python3")
            .args(["-m", "venv", "--without-pip"])
            .arg(&venv),
        Duration::from_secs(60),
    );
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    std::fs::set_permissions(&venv, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let config = dir.path().join("x.toml");
    std::fs::write(
        &config,
        format!(
            "[experiment]\nname = \"x\"\nsuite = \"{}\"\ntrials = 1\nseed = 1\n[budget]\nmax_steps = 2\nmax_output_tokens_per_step = 10\n\
             max_total_tokens = 100\nmax_working_seconds = 10\n[[models]]\nname = \"m\"\nprovider = \"openai\"\nmodel = \"m\"\n\
             endpoint = \"http://127.0.0.1:9\"\ntemperature = 0.0\n[harness]\nkind = \"external\"\ncommand = [\"python3\", \"-c\", \"pass\"]\n\
             python = \"{}\"\ncomponents.x = [true, false]\n[arms.a]\n",
            common::fixture("tiny").display(),
            venv.join("bin/python").display()
        ),
    )
    .unwrap();
    let (code, out, err) = ablate(&[
        "run",
        config.to_str().unwrap(),
        "--results",
        dir.path().join("r").to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("key `harness.python`")
            && err.contains("does not start in the sandbox as outside"),
        "{err}"
    );
    assert!(
        !dir.path().join("r").exists()
            || std::fs::read_dir(dir.path().join("r")).unwrap().next().is_none(),
        "nothing was recorded"
    );
}

#[test]
fn bad_inputs_are_refused_naming_the_file_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = common::fixture("tiny");
    let config = |extra_experiment: &str, rest: &str| {
        format!(
            "[experiment]\nname = \"x\"\nsuite = \"{}\"\ntrials = 1\nseed = 1\n{extra_experiment}\n[budget]\nmax_steps = 2\nmax_output_tokens_per_step = 10\n\
             max_total_tokens = 100\nmax_working_seconds = 10\n\n[[models]]\nname = \"m\"\nprovider = \"openai\"\nmodel = \"m\"\nendpoint = \"http://127.0.0.1:9\"\n\
             temperature = 0.0\n{rest}\n[arms.a]\n",
            tiny.display()
        )
    };
    let write = |name: &str, text: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let refused = |args: &[&str]| {
        let (code, out, err) = ablate(args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        err
    };
    // A count far past what a run can hold: refused before anything is planned.
    let p = write("trials.toml", config("", "").replace("trials = 1", "trials = 4000000000"));
    let err = refused(&["plan", &p]);
    assert!(
        err.contains(&format!("{p}: key `experiment.trials`: 4000000000 is more than 100000")),
        "{err}"
    );
    // A suite that is not there: named as the config's key, not as a missing suite.toml.
    let p = write(
        "nosuite.toml",
        config("", "").replace(&tiny.display().to_string(), "/nonexistent/suite"),
    );
    let err = refused(&["plan", &p]);
    assert!(
        err.contains(&format!("{p}: key `experiment.suite`: no task suite at /nonexistent/suite")),
        "{err}"
    );
    // A key given twice.
    let p = write("dup.toml", config("name = \"y\"", ""));
    let err = refused(&["plan", &p]);
    assert!(
        err.contains(&format!(
            "{p}: key `experiment.name`: invalid TOML at line 6, column 1: duplicate key"
        )),
        "{err}"
    );
    // An external harness whose program is a path of this machine the sandbox does not show.
    let host_program = dir.path().join("agent.sh");
    std::fs::write(&host_program, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&host_program, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap();
    let p = write(
        "ext.toml",
        config("", &format!("[harness]\nkind = \"external\"\ncommand = [\"{}\"]\ncomponents.mode = [\"a\", \"b\"]\n", host_program.display()))
            .replace("[arms.a]\n", "[arms.a]\nmode = \"a\"\n"),
    );
    let err = refused(&["run", &p, "--results", dir.path().join("results").to_str().unwrap()]);
    assert!(
        err.contains(&format!(
            "{p}: key `harness.command`: `{}` cannot be run in the sandbox",
            host_program.display()
        )),
        "{err}"
    );
    assert!(
        !dir.path().join("results").exists()
            || std::fs::read_dir(dir.path().join("results")).unwrap().next().is_none(),
        "nothing was recorded"
    );
    // A task whose tests/ is a link, and one whose editable file would stand for a grader module.
    let suite = dir.path().join("suite");
    ablate::sandbox::copy_tree(&tiny, &suite).unwrap();
    std::fs::remove_dir_all(suite.join("is-even")).unwrap();
    let tests = suite.join("add-two/tests");
    std::fs::rename(&tests, suite.join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(suite.join("elsewhere"), &tests).unwrap();
    let (code, out, err) = ablate(&["suite", "check", suite.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains(&format!("{}: `tests` is a symbolic link", tests.display())), "{out}");
    std::fs::remove_file(&tests).unwrap();
    std::fs::rename(suite.join("elsewhere"), &tests).unwrap();
    for sub in ["workspace", "solution"] {
        std::fs::rename(
            suite.join(format!("add-two/{sub}/add.py")),
            suite.join(format!("add-two/{sub}/unittest.py")),
        )
        .unwrap();
    }
    let task_toml = suite.join("add-two/task.toml");
    std::fs::write(
        &task_toml,
        std::fs::read_to_string(&task_toml)
            .unwrap()
            .replace("editable = [\"add.py\"]", "editable = [\"unittest.py\"]"),
    )
    .unwrap();
    let (_, out, _) = ablate(&["suite", "check", suite.to_str().unwrap()]);
    assert!(
        out.contains(&format!("{}: key `editable[0]`: `unittest.py` would stand for the standard module `unittest` the grader imports", task_toml.display())),
        "{out}"
    );
    // suite import of a problem whose file is named like a grader module.
    let src = write("p.jsonl", "{\"id\": \"p1\", \"prompt\": \"write f\", \"file\": \"unittest.py\", \"entry_point\": \"f\", \"solution\": \"def f():\\n    return 1\\n\", \"asserts\": [\"assert f() == 1\"]}\n".into());
    let err = refused(&[
        "suite",
        "import",
        "jsonl",
        &src,
        "-o",
        dir.path().join("imported").to_str().unwrap(),
    ]);
    assert!(
        err.contains(
            "`unittest.py` would stand for the standard module `unittest` the grader imports"
        ),
        "{err}"
    );
    assert!(err.contains("file"), "{err}");
    assert!(!dir.path().join("imported").exists());
}

#[test]
fn plan_says_before_the_run_what_cannot_reach_the_model_and_a_context_too_small_for_agents() {
    let dir = tempfile::tempdir().unwrap();
    let suite = common::fixture("tiny");
    let harness = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/harnesses/probe");
    let mut cfg = common::Cfg::new(&suite, "openai", "http://127.0.0.1:9", "[arms.a]\n");
    let top = format!(
        "[harness]\nkind = \"external\"\ncommand = [\"python3\", \"{{harness}}/probe.py\"]\nfiles = [\"{}\"]\ncomponents.mode = [\"echo\", \"late\"]\n",
        harness.display()
    );
    cfg.top_extra = &top;
    cfg.model_extra = "context_tokens = 4096\nreasoning = false\n";
    let config = cfg.write(dir.path());
    let (code, out, err) = ablate(&["plan", config.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    // Codex CLI's first prompt (about 6.2k tokens) cannot fit; the endpoint ignores reasoning.
    assert!(
        out.contains("context 4096 tokens: the CLI agents' first prompts are about 6.2k"),
        "{out}"
    );
    assert!(
        out.contains("cannot reach it: reasoning settings (effort, thinking budget, on/off)"),
        "{out}"
    );
}
