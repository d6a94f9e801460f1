//! Per-trial overhead of a trial's environment, the container against the
//! bubblewrap jail, on this machine: `make bench-environments`.
//!
//! Container (tasks/terminal/hello-file, its image already built): create and
//! start the trial's container, one `exec` round trip (`true`), the verifier
//! (tests copied in, `bash /tests/test.sh`, reward read), remove. Jail
//! (tasks/core/is-prime): the trial's workspace made, one jailed process
//! (`/bin/true`) as a command runs, the final grading (a fresh copy, the
//! grader's runner with its canaries, 9 tests), removed. Each ROUNDS times
//! (default 15), alternating; prints the median and the spread of each step.

use ablate::container::trial::{Spec, TrialContainer};
use ablate::sandbox::Sandbox;
use ablate::suite::TaskKind;
use std::path::Path;
use std::time::{Duration, Instant};

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn row(name: &str, v: &mut [f64]) {
    let (lo, hi) = (
        v.iter().cloned().fold(f64::INFINITY, f64::min),
        v.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
    );
    println!(
        "{name:<34} {:>9.1} ms   (min {:.1}, max {:.1})",
        1000.0 * median(v),
        1000.0 * lo,
        1000.0 * hi
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(15);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    ablate::sandbox::isolation::init(false, None).expect("bubblewrap");
    let engine = ablate::container::init(None).expect("a container engine");
    let terminal = ablate::suite::load(&root.join("tasks/terminal")).unwrap();
    let hello = terminal.task("hello-file").unwrap();
    let TaskKind::Container(hello_container) = &hello.kind else {
        panic!("hello-file is a container task")
    };
    let image = ablate::container::image::ensure(
        engine,
        (hello, hello_container),
        &std::env::temp_dir().join("ablate-bench-build.log"),
        Default::default(),
    )
    .await
    .expect("the image");
    let core = ablate::suite::load(&root.join("tasks/core")).unwrap();
    let prime = core.task("is-prime").unwrap();
    let (mut c_start, mut c_exec, mut c_verify, mut c_remove, mut c_total) =
        (vec![], vec![], vec![], vec![], vec![]);
    let (mut j_create, mut j_exec, mut j_grade, mut j_remove, mut j_total) =
        (vec![], vec![], vec![], vec![], vec![]);
    for i in 0..rounds {
        // Container.
        let t0 = Instant::now();
        let spec = Spec {
            task: hello,
            container: hello_container,
            image_id: &image.id,
            settings: &terminal.containers,
            resources: Default::default(),
            trial_id: "bench",
            attempt: i as u32 + 1,
            binds: vec![],
            env: vec![],
            passed_env: &Default::default(),
        };
        let c = TrialContainer::start(engine, &spec).await.expect("start");
        let t1 = Instant::now();
        let out = c.exec(&["true".into()], None, &[], Duration::from_secs(30), 4096, None).await;
        assert_eq!(out.exit_code, Some(0));
        let t2 = Instant::now();
        let v = c.verify(hello, 1.0).await;
        assert!(v.error.is_none() && v.reward == Some(0.0), "{v:?}");
        let t3 = Instant::now();
        c.remove().await.expect("remove");
        let t4 = Instant::now();
        for (v, d) in [
            (&mut c_start, t1 - t0),
            (&mut c_exec, t2 - t1),
            (&mut c_verify, t3 - t2),
            (&mut c_remove, t4 - t3),
            (&mut c_total, t4 - t0),
        ] {
            v.push(d.as_secs_f64());
        }
        // Jail.
        let t0 = Instant::now();
        let sandbox = Sandbox::create(prime).expect("sandbox");
        let t1 = Instant::now();
        let iso = ablate::sandbox::isolation::current().unwrap();
        let confine = ablate::sandbox::process::Confinement {
            isolation: iso,
            jail: ablate::sandbox::isolation::Jail::of(sandbox.path(), sandbox.uid()),
            limits: Default::default(),
        };
        sandbox.hand_over().unwrap();
        let out = ablate::sandbox::process::run_limited(
            &["/bin/true".to_string()],
            sandbox.path(),
            &[],
            Duration::from_secs(30),
            4096,
            Some(&confine),
            None,
        )
        .await
        .unwrap();
        assert_eq!(out.exit_code, Some(0));
        let t2 = Instant::now();
        let g = ablate::grader::grade(&sandbox, prime).await.expect("grade");
        assert_eq!(g.check.passed, 0);
        let t3 = Instant::now();
        drop(sandbox);
        let t4 = Instant::now();
        for (v, d) in [
            (&mut j_create, t1 - t0),
            (&mut j_exec, t2 - t1),
            (&mut j_grade, t3 - t2),
            (&mut j_remove, t4 - t3),
            (&mut j_total, t4 - t0),
        ] {
            v.push(d.as_secs_f64());
        }
    }
    println!("{} rounds, {} {} (median, min, max)", rounds, engine.program, engine.version);
    row("container: create + start", &mut c_start);
    row("container: exec round trip", &mut c_exec);
    row("container: verify", &mut c_verify);
    row("container: remove", &mut c_remove);
    row("container: per trial", &mut c_total);
    row("jail: workspace made", &mut j_create);
    row("jail: one jailed command", &mut j_exec);
    row("jail: final grading", &mut j_grade);
    row("jail: removed", &mut j_remove);
    row("jail: per trial", &mut j_total);
}
