//! What a run with container (Harbor) tasks sets up once: the engine, the
//! containers killed ablate processes left (removed, and said so), each task's
//! image (built when the engine lacks it, its build log kept), and what the
//! manifest records of them.

use super::RunError;
use crate::container::{self, Engine, EngineKind, image};
use crate::error::InputError;
use crate::experiment::config::Experiment;
use crate::record::{ContainerFacts, EngineFacts, TaskImage};
use crate::suite::harbor::{ContainerTask, NetworkMode};
use crate::suite::{Suite, Task, TaskKind};
use std::collections::HashMap;
use std::path::PathBuf;

pub struct ContainerSetup {
    pub engine: &'static Engine,
    /// Task id -> its image.
    pub images: HashMap<String, TaskImage>,
    /// Build logs of images built now (task id, log file in the scratch folder).
    pub logs: Vec<(String, PathBuf)>,
    /// Containers of killed ablate processes, removed.
    pub swept: Vec<String>,
    /// The variables of ablate's environment passed to containers (`pass_env`), set ones only.
    pub passed_env: std::collections::BTreeMap<String, String>,
}

/// The experiment's container tasks, each with its container settings.
pub(crate) fn container_tasks<'a>(
    exp: &Experiment,
    suite: &'a Suite,
) -> Vec<(&'a Task, &'a ContainerTask)> {
    let selected = suite.tasks.iter().filter(|t| exp.tasks.is_empty() || exp.tasks.contains(&t.id));
    selected
        .filter_map(|t| match &t.kind {
            TaskKind::Python => None,
            TaskKind::Container(c) => Some((t, c.as_ref())),
        })
        .collect()
}

/// Engine, leftovers, images; None when the experiment has no container task.
pub async fn setup(
    exp: &Experiment,
    suite: &Suite,
    choice: Option<EngineKind>,
    results: &std::path::Path,
) -> Result<Option<ContainerSetup>, RunError> {
    let tasks = container_tasks(exp, suite);
    if tasks.is_empty() {
        return Ok(None);
    }
    for &(t, c) in &tasks {
        if c.network == NetworkMode::Public && !exp.allow_network {
            return Err(InputError::at(
                t.toml_path(),
                "environment.network_mode",
                format!(
                    "task `{}` runs with a public network (Harbor's default when task.toml says neither network_mode nor allow_internet = false); \
                     set allow_network = true under [experiment] in {} to allow it, or network_mode = \"no-network\" in the task",
                    t.id,
                    exp.config_path.display()
                ),
            )
            .into());
        }
    }
    let passed_env = exp.passed_env(suite)?;
    let engine = container::init(choice)?;
    let swept = container::sweep::remove_leftovers(engine).await?;
    let scratch = crate::sandbox::scratch::dir().map_err(|e| RunError::Setup(e.to_string()))?;
    let mut images = HashMap::new();
    let mut logs = Vec::new();
    for (t, c) in tasks {
        let log = scratch.join(format!("build-{}.log", t.id));
        let opts =
            image::BuildOptions { pull: exp.pull, ca_bundle: exp.build_ca_bundle.as_deref() };
        match image::ensure(engine, (t, c), &log, opts).await {
            Ok(img) => {
                if img.built {
                    logs.push((t.id.clone(), log));
                }
                images.insert(t.id.clone(), img);
            }
            Err(e @ image::ImageError::Missing { .. }) => {
                return Err(InputError::at(
                    t.toml_path(),
                    "environment.docker_image",
                    e.to_string(),
                )
                .into());
            }
            Err(e @ image::ImageError::BaseMissing { .. }) => {
                let dockerfile = t.dir.join("environment").join("Dockerfile");
                return Err(InputError::new(dockerfile, format!("task `{}`: {e}", t.id)).into());
            }
            Err(image::ImageError::Build { why, log }) => {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let tail = crate::sandbox::process::tail(&text, 2000).to_string();
                let kept = image::keep_log(&results.join("build-logs"), &t.id, &text);
                return Err(InputError::new(
                    t.dir.join("environment").join("Dockerfile"),
                    format!(
                        "task `{}`: the image does not build ({why}); its log is {}:\n{tail}",
                        t.id, kept
                    ),
                )
                .into());
            }
            Err(e) => return Err(RunError::Setup(format!("task `{}`: {e}", t.id))),
        }
    }
    Ok(Some(ContainerSetup { engine, images, logs, swept, passed_env }))
}

/// What the manifest records.
pub fn facts(setup: &ContainerSetup, exp: &Experiment, suite: &Suite) -> ContainerFacts {
    let mut images: Vec<TaskImage> = setup.images.values().cloned().collect();
    images.sort_by(|a, b| a.task.cmp(&b.task));
    let tasks = container_tasks(exp, suite)
        .into_iter()
        .map(|(t, c)| {
            // The task's own limits; an arm's `resources` override them in its trials.
            let l = container::trial::limits(c, &suite.containers, &Default::default());
            let mut v = serde_json::to_value(c).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("task".into(), serde_json::json!(t.id));
                o.insert(
                    "limits".into(),
                    serde_json::json!({"cpus": l.cpus, "memory_mb": l.memory_mb, "pids": l.pids}),
                );
            }
            v
        })
        .collect();
    ContainerFacts {
        engine: EngineFacts {
            kind: setup.engine.program.clone(),
            program: setup.engine.program.clone(),
            version: setup.engine.version.clone(),
        },
        images,
        reward_threshold: suite.containers.reward_threshold,
        reward_rule: container::trial::REWARD_RULE.to_string(),
        allow_network: exp.allow_network,
        pass_env: setup
            .passed_env
            .iter()
            .map(|(k, v)| (k.clone(), crate::digest::sha256_hex(v.as_bytes())))
            .collect(),
        tasks,
    }
}

/// On resume: every task's image must be the one the run started with.
pub(crate) fn check_images(
    manifest_path: &std::path::Path,
    recorded: Option<&ContainerFacts>,
    now: &ContainerSetup,
) -> Result<(), RunError> {
    let Some(recorded) = recorded else { return Ok(()) };
    let mut changes = Vec::new();
    for was in &recorded.images {
        match now.images.get(&was.task) {
            Some(img) if img.id == was.id => {}
            Some(img) => changes.push(format!(
                "task `{}`'s image was {} and is {} now",
                was.task,
                short(&was.id),
                short(&img.id)
            )),
            None => changes.push(format!("task `{}` has no image now", was.task)),
        }
    }
    if changes.is_empty() {
        return Ok(());
    }
    Err(InputError::at(
        manifest_path,
        "containers.images",
        format!("{}; resuming would mix two environments in one run", changes.join("; ")),
    )
    .into())
}

fn short(id: &str) -> &str {
    let id = id.strip_prefix("sha256:").unwrap_or(id);
    &id[..12.min(id.len())]
}
