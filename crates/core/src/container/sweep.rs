//! Containers that a killed ablate process left: each of ablate's containers
//! carries the name of its process's scratch folder (`ablate.scratch`); one
//! whose folder is gone or no longer locked belongs to no live process and is
//! removed. Containers of live ablate processes are never touched.

use super::trial::LABEL_SCRATCH;
use super::{ContainerError, Engine, EngineKind};
use std::time::Duration;

/// Remove the containers of ablate processes that are gone; returns their names.
pub(crate) async fn remove_leftovers(engine: &Engine) -> Result<Vec<String>, ContainerError> {
    let format = match engine.kind {
        EngineKind::Docker => format!("{{{{.Names}}}}\t{{{{.Label \"{LABEL_SCRATCH}\"}}}}"),
        EngineKind::Podman => format!("{{{{.Names}}}}\t{{{{index .Labels \"{LABEL_SCRATCH}\"}}}}"),
    };
    let args = vec![
        "ps".into(),
        "-a".into(),
        "--filter".into(),
        format!("label={LABEL_SCRATCH}"),
        "--format".into(),
        format,
    ];
    let out = engine.command(&args, Duration::from_secs(60), 1 << 20, None).await?;
    if !out.ok() {
        return Err(ContainerError::Failed { what: "cannot list containers".into(), output: out });
    }
    let mut removed = Vec::new();
    for line in out.stdout.lines() {
        let Some((name, scratch)) = line.split_once('\t') else { continue };
        if crate::sandbox::scratch::is_live(scratch.trim()) {
            continue;
        }
        if engine.remove(name.trim()).await.is_ok() {
            removed.push(name.trim().to_string());
        }
    }
    Ok(removed)
}
