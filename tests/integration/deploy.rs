//! deploy/k8s: the manifests parse, and the fields that make a sharded run
//! correct agree with each other (shard count, index wiring, shared volume,
//! model Service). They are not run on a cluster here.

use crate::common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// deploy/k8s/run.sh waits with `kubectl wait --timeout=-1s`: every bash here has a deadline.
const LIMIT: Duration = Duration::from_secs(30);

fn k8s(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/k8s").join(name)
}

/// Every document of a YAML stream, as JSON values.
fn docs(text: &str) -> Vec<Value> {
    use serde::Deserialize;
    serde_norway::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn load(name: &str) -> Vec<Value> {
    docs(&std::fs::read_to_string(k8s(name)).unwrap())
}

fn env(container: &Value, name: &str) -> String {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("env {name}"))["value"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The claim behind the volume mounted at `mount`.
fn claim_at(pod: &Value, mount: &str) -> String {
    let c = &pod["containers"][0];
    let vol = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == mount)
        .unwrap_or_else(|| panic!("a mount at {mount}"))["name"]
        .clone();
    let v = pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == vol).unwrap();
    v["persistentVolumeClaim"]["claimName"].as_str().unwrap().to_string()
}

/// What the container's `bash -c` runs for index `i`, with the shard runner replaced by echo.
fn shard_command(job: &Value, index: u32) -> String {
    let c = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["command"], serde_json::json!(["bash", "-c"]));
    let script = c["args"][0].as_str().unwrap().replace("exec /ablate/deploy/shard-run.sh", "echo");
    let out = common::output_within(
        Command::new("bash")
            .args(["-c", &script])
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .env("SHARDS", env(c, "SHARDS"))
            .env("RUN_ID", env(c, "RUN_ID")),
        LIMIT,
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn check_shards_job(job: &Value, n: u32, run_id: &str) {
    assert_eq!(job["kind"], "Job");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    assert_eq!(spec["completions"], n, "completions = N");
    assert_eq!(spec["parallelism"], n, "parallelism = N");
    assert_eq!(spec["template"]["spec"]["restartPolicy"], "Never");
    // JOB_COMPLETION_INDEX 0..N-1 becomes --shard 1/N .. N/N, with one config, results folder and id.
    let shards: Vec<String> = (0..n).map(|i| shard_command(job, i)).collect();
    let expected: Vec<String> =
        (1..=n).map(|k| format!("{k} {n} /config/experiment.toml /results {run_id}")).collect();
    assert_eq!(shards, expected);
    let pod = &spec["template"]["spec"];
    assert_eq!(claim_at(pod, "/results"), "ablate-results");
    // The config path in the command is the mounted ConfigMap.
    let config = pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "config").unwrap();
    assert_eq!(config["configMap"]["name"], "ablate-experiment");
    assert!(
        pod["containers"][0]["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["mountPath"] == "/config" && m["name"] == "config")
    );
}

fn check_merge_job(job: &Value, n: u32, run_id: &str) {
    let pod = &job["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!((env(c, "SHARDS"), env(c, "RUN_ID")), (n.to_string(), run_id.to_string()));
    assert_eq!(
        claim_at(pod, "/results"),
        "ablate-results",
        "the merge reads the claim the shards write"
    );
    // The folders it merges are the ones the shards write.
    let script = c["args"][0].as_str().unwrap().replace("exec ablate", "echo ablate");
    let out = common::output_within(
        Command::new("bash")
            .args(["-c", &script])
            .env("SHARDS", n.to_string())
            .env("RUN_ID", run_id),
        LIMIT,
    );
    let folders: Vec<String> =
        (1..=n).map(|k| format!("/results/{run_id}-shard-{k}-of-{n}")).collect();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        format!("ablate merge -o /results/{run_id} {}", folders.join(" "))
    );
}

#[test]
fn the_indexed_job_the_merge_and_the_storage_agree() {
    let jobs = load("shards-job.yaml");
    assert_eq!(jobs.len(), 1);
    check_shards_job(&jobs[0], 4, "experiment");
    check_merge_job(&load("merge-job.yaml")[0], 4, "experiment");
    let storage = load("storage.yaml");
    let pvc = storage
        .iter()
        .find(|d| d["kind"] == "PersistentVolumeClaim" && d["metadata"]["name"] == "ablate-results")
        .unwrap();
    assert_eq!(
        pvc["spec"]["accessModes"],
        serde_json::json!(["ReadWriteMany"]),
        "every shard pod and the merge mount it"
    );
}

#[test]
fn the_model_service_selects_the_server_and_its_port() {
    let docs = load("model-server.yaml");
    let deploy = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let service = docs.iter().find(|d| d["kind"] == "Service").unwrap();
    let labels = &deploy["spec"]["template"]["metadata"]["labels"];
    for (k, v) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&labels[k], v, "the Service selects the server's pods");
    }
    let port = &service["spec"]["ports"][0];
    let container_ports =
        deploy["spec"]["template"]["spec"]["containers"][0]["ports"].as_array().unwrap();
    let target = container_ports
        .iter()
        .find(|p| p["name"] == port["targetPort"])
        .expect("the targetPort names a container port");
    assert_eq!(target["containerPort"], 8080);
    assert_eq!(service["metadata"]["name"], "ablate-model");
}

#[test]
fn run_sh_sets_the_shard_count_and_id_in_both_jobs() {
    // A kubectl that keeps what it is asked to apply.
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("kubectl");
    let log = dir.path().join("applied");
    std::fs::create_dir(&log).unwrap();
    std::fs::write(
        &bin,
        format!(
            "#!/bin/sh\nif [ \"$1\" = apply ]; then cat > {}/$(date +%s%N).yaml; fi\nexit 0\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", dir.path().display(), std::env::var("PATH").unwrap());
    let out = common::output_within(
        Command::new("bash").arg(k8s("run.sh")).args(["7", "big-run"]).env("PATH", path),
        LIMIT,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut applied: Vec<PathBuf> =
        std::fs::read_dir(&log).unwrap().map(|e| e.unwrap().path()).collect();
    applied.sort();
    assert_eq!(applied.len(), 2, "the shards, then the merge");
    check_shards_job(&docs(&std::fs::read_to_string(&applied[0]).unwrap())[0], 7, "big-run");
    check_merge_job(&docs(&std::fs::read_to_string(&applied[1]).unwrap())[0], 7, "big-run");
}
