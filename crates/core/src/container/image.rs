//! A container task's image: built from its `environment/` once per task
//! digest and cached by the engine under `ablate-task-<id>:<digest>`, or the
//! image `[environment].docker_image` names when the engine has it.

use super::Engine;
pub use crate::record::design::PullPolicy;
pub use crate::record::{BaseImage, TaskImage};
use crate::suite::Task;
use crate::suite::harbor::{ContainerTask, ImageSource};
use std::time::Duration;

/// Why a task has no image.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error(
        "the image `{name}` ([environment].docker_image) is not on this machine, and environment/ holds no Dockerfile to build it from"
    )]
    Missing { name: String },
    #[error("environment/Dockerfile does not build ({why}); the build's output is in {log}")]
    Build { why: String, log: String },
    #[error(
        "environment/Dockerfile builds on `{name}`, which this machine's engine does not have, and the pull policy is `never`: load or build it first, or set pull = \"missing\" under [experiment]"
    )]
    BaseMissing { name: String },
    #[error("the container engine failed: {0}")]
    Engine(String),
}

/// The tag ablate gives a task's image: its id and the first 16 hex digits of
/// its digest (the digest covers environment/, so any change builds anew).
pub fn tag(task: &Task) -> String {
    format!("ablate-task-{}:{}", task.id, &task.digest[..16.min(task.digest.len())])
}

/// How images are built: when their bases are pulled, and a CA bundle the
/// build's steps see.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuildOptions<'a> {
    pub pull: PullPolicy,
    pub ca_bundle: Option<&'a std::path::Path>,
}

/// Where the CA bundle is mounted in a build: Debian's and Ubuntu's bundle, which apt,
/// OpenSSL and Python's ssl read.
pub(crate) const BUILD_CA_PATH: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The task's image, built when the engine does not have it, its base images
/// pulled as `opts.pull` says. The build's output goes to `log`.
pub async fn ensure(
    engine: &Engine,
    (task, spec): (&Task, &ContainerTask),
    log: &std::path::Path,
    opts: BuildOptions<'_>,
) -> Result<TaskImage, ImageError> {
    let pull = opts.pull;
    let context = match &spec.image {
        ImageSource::Named { name, fallback } => {
            if let Some(id) = engine.image_id(name).await {
                return Ok(TaskImage {
                    task: task.id.clone(),
                    name: name.clone(),
                    id,
                    built: false,
                    bases: Vec::new(),
                });
            }
            match fallback {
                Some(dir) => dir.clone(),
                None => return Err(ImageError::Missing { name: name.clone() }),
            }
        }
        ImageSource::Build { context } => context.clone(),
    };
    let name = tag(task);
    let dockerfile = std::fs::read_to_string(context.join("Dockerfile")).unwrap_or_default();
    let mut bases = present_bases(engine, &dockerfile, pull).await?;
    if let Some(id) = engine.image_id(&name).await {
        return Ok(TaskImage { task: task.id.clone(), name, id, built: false, bases });
    }
    let mut args = build_args(engine, &name, pull);
    let _pip_conf = match opts.ca_bundle {
        Some(bundle) => Some(ca_mounts(engine, bundle, &mut args)?),
        None => None,
    };
    args.extend([
        "-f".into(),
        context.join("Dockerfile").display().to_string(),
        context.display().to_string(),
    ]);
    let timeout = Duration::from_secs_f64(spec.build_timeout_sec);
    let out = engine
        .command(&args, timeout, 1 << 20, None)
        .await
        .map_err(|e| ImageError::Engine(e.to_string()))?;
    if let Some(parent) = log.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let _ = std::fs::write(
        log,
        format!("$ {} {}\n{}\n{}", engine.program, args.join(" "), out.stdout, out.stderr),
    );
    if !out.ok() {
        return Err(ImageError::Build { why: out.why(), log: log.display().to_string() });
    }
    let id = engine
        .image_id(&name)
        .await
        .ok_or_else(|| ImageError::Engine(format!("the build of {name} left no image")))?;
    // The bases as the build used them (a pulled one has an id now).
    for b in &mut bases {
        b.id = engine.image_id(&b.name).await;
    }
    Ok(TaskImage { task: task.id.clone(), name, id, built: true, bases })
}

/// The images `dockerfile` builds on, with the engine's id of each; with
/// `never`, one the engine lacks is refused by name.
async fn present_bases(
    engine: &Engine,
    dockerfile: &str,
    pull: PullPolicy,
) -> Result<Vec<BaseImage>, ImageError> {
    let mut bases = Vec::new();
    for base in base_images(dockerfile) {
        let id = engine.image_id(&base).await;
        if id.is_none() && pull == PullPolicy::Never {
            return Err(ImageError::BaseMissing { name: base });
        }
        bases.push(BaseImage { name: base, id });
    }
    Ok(bases)
}

/// `build` with the engine's own network and the pull policy.
fn build_args(engine: &Engine, name: &str, pull: PullPolicy) -> Vec<String> {
    // The engine's own build network, never the host's: a Dockerfile reaches
    // the outside (a package mirror) but not a service on the host's loopback.
    let network = match engine.kind {
        super::EngineKind::Podman => "private",
        super::EngineKind::Docker => "default",
    };
    let mut args: Vec<String> =
        vec!["build".into(), format!("--network={network}"), "-t".into(), name.to_string()];
    // Podman takes the policy as it is; docker pulls a missing base by itself, and `--pull`
    // makes it ask for a newer one (never: every base was found before).
    match (engine.kind, pull) {
        (super::EngineKind::Podman, p) => args.push(format!("--pull={}", p.name())),
        (super::EngineKind::Docker, PullPolicy::Always) => args.push("--pull".into()),
        (super::EngineKind::Docker, _) => {}
    }
    args
}

/// The build's mounts of a CA bundle (podman's `build --volume`: mounts are
/// never committed to the image): the bundle over the image's, and a pip.conf
/// pointing pip at it. The pip.conf's file lives as long as what is returned.
fn ca_mounts(
    engine: &Engine,
    bundle: &std::path::Path,
    args: &mut Vec<String>,
) -> Result<tempfile::NamedTempFile, ImageError> {
    if engine.kind != super::EngineKind::Podman {
        return Err(ImageError::Engine(
            "build_ca_bundle mounts the bundle into the build, which only podman's build does (docker's build mounts no files)".into(),
        ));
    }
    let pip = tempfile::NamedTempFile::new().map_err(|e| ImageError::Engine(e.to_string()))?;
    std::fs::write(pip.path(), format!("[global]\ncert = {BUILD_CA_PATH}\n"))
        .map_err(|e| ImageError::Engine(e.to_string()))?;
    args.extend([
        "--volume".into(),
        format!("{}:{BUILD_CA_PATH}:ro", bundle.display()),
        "--volume".into(),
        format!("{}:/etc/pip.conf:ro", pip.path().display()),
    ]);
    Ok(pip)
}

/// A failed build's log, kept in `dir` as `<task>.log`: where it is, or why it could not be kept.
pub(crate) fn keep_log(dir: &std::path::Path, task: &str, text: &str) -> String {
    let path = dir.join(format!("{task}.log"));
    match std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, text)) {
        Ok(()) => path.display().to_string(),
        Err(e) => format!("not kept ({}: {e})", path.display()),
    }
}

/// The images a Dockerfile builds on: each `FROM`'s image, not a stage an
/// earlier `FROM ... AS name` made, nor `scratch`; each once, in order. A
/// `FROM` that names its image through a build argument (`${BASE}`) is kept
/// as written (it is looked up, and missing, as that name).
pub(crate) fn base_images(dockerfile: &str) -> Vec<String> {
    let mut stages: Vec<String> = Vec::new();
    let mut bases: Vec<String> = Vec::new();
    for line in logical_lines(dockerfile) {
        let mut words = line.split_whitespace();
        if !words.next().is_some_and(|w| w.eq_ignore_ascii_case("FROM")) {
            continue;
        }
        let rest: Vec<&str> = words.filter(|w| !w.starts_with("--")).collect();
        let Some(image) = rest.first().map(|s| s.to_string()) else { continue };
        if let [_, as_kw, name, ..] = rest.as_slice()
            && as_kw.eq_ignore_ascii_case("AS")
        {
            stages.push(name.to_ascii_lowercase());
        }
        let is_stage =
            stages[..stages.len().saturating_sub(1)].contains(&image.to_ascii_lowercase());
        if image != "scratch" && !is_stage && !bases.contains(&image) {
            bases.push(image);
        }
    }
    bases
}

/// A Dockerfile's instructions: continuation lines joined, comments and blank lines left out.
fn logical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for raw in text.lines() {
        let line = raw.trim();
        if current.is_empty() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_images_a_dockerfile_builds_on() {
        let text = "# syntax=docker/dockerfile:1\nARG V=1\nFROM --platform=linux/amd64 python:3.12-slim AS build\nRUN pip install \\\n  x\nFROM build AS test\nFROM scratch\nfrom localhost/ablate-base:bookworm\nFROM python:3.12-slim\nCOPY --from=build /a /a\n";
        assert_eq!(base_images(text), ["python:3.12-slim", "localhost/ablate-base:bookworm"]);
        assert_eq!(base_images("FROM ${BASE}\n"), ["${BASE}"]);
        assert!(base_images("RUN true\n").is_empty());
    }
}
