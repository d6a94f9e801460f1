//! A container task's image: built from its `environment/` once per task
//! digest and cached by the engine under `ablate-task-<id>:<digest>`, or the
//! image `[environment].docker_image` names when the engine has it.

use super::Engine;
pub use crate::record::TaskImage;
use crate::suite::Task;
use crate::suite::harbor::ImageSource;
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
    #[error("the container engine failed: {0}")]
    Engine(String),
}

/// The tag ablate gives a task's image: its id and the first 16 hex digits of
/// its digest (the digest covers environment/, so any change builds anew).
pub fn tag(task: &Task) -> String {
    format!("ablate-task-{}:{}", task.id, &task.digest[..16.min(task.digest.len())])
}

/// The task's image, built when the engine does not have it. The build's
/// output goes to `log` (a file in the run folder).
pub async fn ensure(
    engine: &Engine,
    task: &Task,
    log: &std::path::Path,
) -> Result<TaskImage, ImageError> {
    let spec = task
        .container
        .as_ref()
        .ok_or_else(|| ImageError::Engine(format!("task `{}` is not a container task", task.id)))?;
    let context = match &spec.image {
        ImageSource::Named { name, fallback } => {
            if let Some(id) = engine.image_id(name).await {
                return Ok(TaskImage {
                    task: task.id.clone(),
                    name: name.clone(),
                    id,
                    built: false,
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
    if let Some(id) = engine.image_id(&name).await {
        return Ok(TaskImage { task: task.id.clone(), name, id, built: false });
    }
    // The engine's own build network, never the host's: a Dockerfile reaches
    // the outside (a package mirror) but not a service on the host's loopback.
    let network = match engine.kind {
        super::EngineKind::Podman => "private",
        super::EngineKind::Docker => "default",
    };
    let mut args: Vec<String> =
        vec!["build".into(), format!("--network={network}"), "-t".into(), name.clone()];
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
    Ok(TaskImage { task: task.id.clone(), name, id, built: true })
}
