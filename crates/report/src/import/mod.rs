//! Runs made by other tools, brought in as ablate run folders: Harbor job
//! folders (`harbor`) and Inspect eval logs (`inspect`). Each reader turns
//! its source into [`ImportedTrial`]s; this module forms the arms (the agent
//! identities), derives the components (the identity fields that differ
//! between arms), checks every comparison with the single-factor guard, and
//! writes `manifest.json` and `trials.jsonl` in ablate's own format, so
//! `report`, `gate`, `baseline save` and `export` read the folder like any
//! run. The mapping is documented in docs/import.md.
//!
//! Nothing is half-written: the folder is written beside its final place and
//! renamed into it. The same sources (and map) give the same folder, byte for
//! byte: nothing in it depends on when or where the import ran.

pub mod harbor;
pub mod inspect;
pub mod map;

use crate::report::analysis::StatusCounts;
use ablate_core::error::InputError;
use ablate_core::experiment::components::ComponentValue;
use ablate_core::experiment::matrix::{
    Arm, ArmOrigin, Comparison, ComparisonKind, ComparisonOrigin, guard, slugify,
};
use ablate_core::experiment::{ArmSettings, HarnessKind};
use ablate_core::plan::TrialSpec;
pub use ablate_core::record::imported::{ImportFacts, ImportedFrom, SourceFacts, Tool};
use ablate_core::record::{
    EndReason, FORMAT_VERSION, HostFacts, Manifest, ModelIdentity, RecordedExperiment, SuiteFacts,
    Tokens, TrialRecord, TrialStatus,
};
use indexmap::IndexMap;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use map::ImportMap;

/// Version of the importers' mapping, recorded in the manifest; part of the
/// run's digest, so a changed mapping makes other trial ids.
pub(crate) const IMPORTER_VERSION: u32 = 1;

/// Without a map's `[[comparisons]]`, every pair of arms is compared when
/// there are at most this many pairs; beyond that, only the pairs that differ
/// in one component (the ablations).
pub(crate) const MAX_AUTO_PAIRS: usize = 15;

/// Bytes of one JSON file of a Harbor job (config.json, lock.json, result.json).
pub(crate) const JSON_FILE_CAP: u64 = 64 << 20;
/// Bytes of one Inspect log on disk, and of all an `.eval` archive's members decompressed.
pub(crate) const LOG_CAP: u64 = 1 << 30;

/// Why a source file was not read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not a regular file (a FIFO, a device or a socket is never read)")]
    NotRegular,
    #[error("{size} bytes, over the {cap} an import reads")]
    TooLarge { size: u64, cap: u64 },
}

/// A source file read whole, when it is a regular file of at most `cap`
/// bytes: opening never blocks (a FIFO), and nothing larger is read.
pub(crate) fn read_bounded(path: &Path, cap: u64) -> Result<Vec<u8>, ReadError> {
    use std::io::Read as _;
    let (file, meta) = ablate_core::digest::open_regular(path, true).map_err(|e| {
        if e.kind() == std::io::ErrorKind::InvalidInput {
            ReadError::NotRegular
        } else {
            ReadError::Io(e)
        }
    })?;
    if meta.len() > cap {
        return Err(ReadError::TooLarge { size: meta.len(), cap });
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    file.take(cap + 1).read_to_end(&mut out)?;
    if out.len() as u64 > cap {
        return Err(ReadError::TooLarge { size: out.len() as u64, cap });
    }
    Ok(out)
}

/// A count a source gives: absent is 0; anything but a whole number from 0
/// up is refused naming the field (a negative count is no count).
pub fn count(v: Option<&Value>) -> Result<u64, String> {
    match v {
        None | Some(Value::Null) => Ok(0),
        Some(x) => x.as_u64().ok_or_else(|| format!("{x} is not a count (a whole number from 0)")),
    }
}

/// A cost a source gives: absent is None; a negative or non-finite one is refused.
pub fn cost(v: Option<&Value>) -> Result<Option<f64>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(x) => match x.as_f64() {
            Some(c) if c.is_finite() && c >= 0.0 => Ok(Some(c)),
            _ => Err(format!("{x} is not a cost (a number from 0)")),
        },
    }
}

/// One trial as a reader found it, before the arms are formed.
#[derive(Debug, Clone)]
pub struct ImportedTrial {
    pub from: ImportedFrom,
    /// The input (folder or file) as given: errors name `input/from.file`.
    pub input: PathBuf,
    pub task: String,
    /// The task's own checksum (Harbor) or the digest of its input and target (Inspect).
    pub task_digest: String,
    /// The agent's identity: the fields an arm is made of, in a fixed order.
    pub identity: IndexMap<String, ComponentValue>,
    pub model: String,
    /// A fixed repeat number (Inspect's epoch - 1); None: numbered in `sort_key` order.
    pub repeat: Option<u32>,
    pub sort_key: String,
    pub status: TrialStatus,
    pub end_reason: EndReason,
    pub graded_pass: Option<bool>,
    pub steps: u32,
    pub tokens: Tokens,
    pub cost_usd: Option<f64>,
    pub working_seconds: f64,
    pub wall_seconds: f64,
    pub started_at: String,
    pub finished_at: String,
    pub error: Option<String>,
}

impl ImportedTrial {
    pub fn path(&self) -> PathBuf {
        if self.from.file.is_empty() {
            self.input.clone()
        } else {
            self.input.join(&self.from.file)
        }
    }

    /// A trial the source shows started and never finished (`interrupted`):
    /// nothing measured, `error` saying why.
    #[allow(clippy::too_many_arguments)]
    pub fn unfinished(
        from: ImportedFrom,
        input: PathBuf,
        task: String,
        task_digest: String,
        identity: IndexMap<String, ComponentValue>,
        model: String,
        repeat: Option<u32>,
        error: String,
    ) -> ImportedTrial {
        ImportedTrial {
            sort_key: from.id.clone(),
            from,
            input,
            task,
            task_digest,
            identity,
            model,
            repeat,
            status: TrialStatus::Interrupted,
            end_reason: EndReason::Interrupted,
            graded_pass: None,
            steps: 0,
            tokens: Tokens::default(),
            cost_usd: None,
            working_seconds: 0.0,
            wall_seconds: 0.0,
            started_at: String::new(),
            finished_at: String::new(),
            error: Some(error),
        }
    }
}

/// What the reader found, for the writer.
pub struct Read {
    pub tool: Tool,
    pub trials: Vec<ImportedTrial>,
    pub sources: Vec<SourceFacts>,
    pub tool_versions: Vec<String>,
    /// A name for the experiment from the sources (job or task name).
    pub name: String,
    /// The identity field arms are named after first (`agent`, `solver`).
    pub name_field: &'static str,
    pub pass_rule: String,
    /// The budget the sources state (time, tokens), zero where they say nothing.
    pub budget: ablate_core::experiment::config::Budget,
}

/// `ablate import harbor|inspect`.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    pub tool: Tool,
    pub inputs: Vec<PathBuf>,
    pub out: PathBuf,
    pub map: Option<PathBuf>,
    pub force: bool,
}

/// What was written.
#[derive(Debug, Clone)]
pub struct Imported {
    pub trials: usize,
    pub tasks: usize,
    pub arms: Vec<String>,
    pub comparisons: Vec<Comparison>,
    /// How many trials ended in each status.
    pub statuses: StatusCounts,
    /// What the components' fields say: fields named as one component, and
    /// components whose fields change together (perfectly aliased).
    pub notes: Vec<String>,
}

pub fn import(opts: &ImportOptions) -> Result<Imported, InputError> {
    let map = ImportMap::load(opts.map.as_deref())?;
    // Checked before anything is read: a refused output costs no reading.
    let existing = check_output(&opts.out, opts.force)?;
    let read = match opts.tool {
        Tool::Harbor => harbor::read(&opts.inputs, &map)?,
        Tool::Inspect => inspect::read(&opts.inputs, &map)?,
    };
    if read.trials.is_empty() {
        let first = opts.inputs.first().cloned().unwrap_or_default();
        return Err(InputError::new(
            first,
            format!("no {} trial found in the inputs", read.tool.name()),
        ));
    }
    let run = assemble(read, &map, &run_id(&opts.out))?;
    let imported = Imported {
        trials: run.records.len(),
        tasks: run.manifest.suite.tasks.len(),
        arms: run.manifest.experiment.arms.iter().map(|a| a.name.clone()).collect(),
        comparisons: run.manifest.experiment.comparisons.clone(),
        statuses: StatusCounts::of(run.records.iter().map(|r| r.status), None),
        notes: run.manifest.imported.as_ref().map(alias_notes).unwrap_or_default(),
    };
    write_folder(&opts.out, existing, &run)?;
    Ok(imported)
}

fn run_id(out: &Path) -> String {
    out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "imported".into())
}

/// A run folder's contents, ready to write.
pub(crate) struct Assembled {
    pub manifest: Manifest,
    pub records: Vec<TrialRecord>,
}

/// Form arms, components, comparisons and the plan from what was read.
pub(crate) fn assemble(read: Read, map: &ImportMap, run_id: &str) -> Result<Assembled, InputError> {
    let mapfile = map.file();
    let Read { tool, trials, sources, tool_versions, name, name_field, pass_rule, budget } = read;
    let mut formed = form(&trials, map, &mapfile, name_field, tool)?;
    let config_digest = config_digest(tool, &sources, map);
    let suite = suite_facts(tool, &formed.tasks);
    let created_at = trials
        .iter()
        .map(|t| t.started_at.as_str())
        .filter(|s| !s.is_empty())
        .min()
        .unwrap_or("")
        .to_string();
    let (specs, records) = formed.plan(trials, run_id, &config_digest);
    let experiment = formed.experiment(map, name, tool);
    let Formed { components, model, .. } = formed;
    let manifest = Manifest {
        format: FORMAT_VERSION,
        run_id: run_id.to_string(),
        tool: "ablate".into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        created_at,
        config_path: map.path.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
        config_file_digest: map.sha256.clone().unwrap_or_default(),
        config_digest,
        experiment,
        suite,
        prompt_digests: Vec::new(),
        host: HostFacts::default(),
        models: vec![ModelIdentity { name: model, identity: None, served: None, engine: None }],
        budget,
        experiment_seed: 0,
        shard: None,
        merged: None,
        containers: None,
        sequential: None,
        imported: Some(ImportFacts {
            tool,
            importer_version: IMPORTER_VERSION,
            tool_versions,
            sources,
            map: map
                .path
                .as_ref()
                .zip(map.sha256.as_ref())
                .map(|(p, s)| (p.display().to_string(), s.clone())),
            pass_rule,
            shared: components.shared,
            components: components.fields,
            aliased: components.aliased,
            moving_together: components.moving_together,
        }),
        planned_trials: specs.len(),
        plan: specs,
    };
    Ok(Assembled { manifest, records })
}

/// The run formed from the trials read, before its records are written.
struct Formed {
    /// Each task's checksum (empty: unknown) and the trial it was first seen in.
    tasks: BTreeMap<String, (String, PathBuf)>,
    components: Components,
    arms: Vec<Arm>,
    arm_names: Vec<String>,
    /// Each trial's arm, as an index into `arms`.
    arm_of: Vec<usize>,
    comparisons: Vec<Comparison>,
    /// The model axis: the one model, or `mixed` when arms differ in it (then it is a component).
    model: String,
    /// The trials (indices) in (task, arm, sort key) order.
    order: Vec<usize>,
    /// Each trial's repeat.
    repeats: Vec<u32>,
}

/// The tasks, components, arms, comparisons, model axis and repeats of the trials read; `name_field`
/// is the identity field arms are named after first (else the tool's name).
fn form(
    trials: &[ImportedTrial],
    map: &ImportMap,
    mapfile: &Path,
    name_field: &str,
    tool: Tool,
) -> Result<Formed, InputError> {
    let tasks = task_digests(trials)?;
    let components = Components::of(trials, map, mapfile)?;
    let found = TrialArms::of(trials, &components.fields);
    let derived = found.derived_names(trials, &components.fields, name_field, tool);
    let arm_names = arm_names(&derived, map, mapfile)?;
    let arms = found.arms(&arm_names);
    let comparisons = comparisons(&arms, map, mapfile)?;
    let models: Vec<&str> = {
        let mut m: Vec<&str> = trials.iter().map(|t| t.model.as_str()).collect();
        m.sort_unstable();
        m.dedup();
        m
    };
    let model = if models.len() == 1 { models[0].to_string() } else { "mixed".to_string() };
    let (order, repeats) = number_repeats(trials, &found.of, &arm_names)?;
    Ok(Formed {
        tasks,
        components,
        arms,
        arm_names,
        arm_of: found.of,
        comparisons,
        model,
        order,
        repeats,
    })
}

/// Tasks: one checksum each (an unfinished trial's may be unknown: empty).
fn task_digests(
    trials: &[ImportedTrial],
) -> Result<BTreeMap<String, (String, PathBuf)>, InputError> {
    let mut tasks: BTreeMap<String, (String, PathBuf)> = BTreeMap::new();
    for t in trials {
        match tasks.get(&t.task) {
            Some((digest, first))
                if !digest.is_empty() && !t.task_digest.is_empty() && *digest != t.task_digest =>
            {
                return Err(InputError::new(
                    t.path(),
                    format!(
                        "task `{}` has checksum {} here and {} in {}: these are two versions of the task, and their trials do not pair; import the runs of one version",
                        t.task,
                        t.task_digest,
                        digest,
                        first.display()
                    ),
                ));
            }
            Some((digest, _)) if !digest.is_empty() || t.task_digest.is_empty() => {}
            _ => {
                tasks.insert(t.task.clone(), (t.task_digest.clone(), t.path()));
            }
        }
    }
    Ok(tasks)
}

/// A trial's value of an identity field (null when it has none).
fn field_value(t: &ImportedTrial, f: &str) -> ComponentValue {
    t.identity.get(f).cloned().unwrap_or(ComponentValue::Null)
}

/// Components: the identity fields whose value is not the same in every trial.
struct Components {
    /// Component name -> the field it is derived from.
    fields: IndexMap<String, String>,
    /// The fields every trial shares, with their value.
    shared: IndexMap<String, ComponentValue>,
    /// Component name -> the other fields the map names as that component.
    aliased: IndexMap<String, Vec<String>>,
    /// Components (named apart) whose fields change together in every trial.
    moving_together: Vec<Vec<String>>,
}

impl Components {
    /// The trials' components, named as the map names their fields; a field the map names
    /// that no source has, or fields named as one component that do not change together,
    /// are refused.
    fn of(
        trials: &[ImportedTrial],
        map: &ImportMap,
        mapfile: &Path,
    ) -> Result<Components, InputError> {
        let mut fields: Vec<String> = Vec::new();
        for t in trials {
            for k in t.identity.keys() {
                if !fields.contains(k) {
                    fields.push(k.clone());
                }
            }
        }
        let (varying, shared): (Vec<String>, Vec<String>) = fields
            .iter()
            .cloned()
            .partition(|f| trials.iter().any(|t| field_value(t, f) != field_value(&trials[0], f)));
        let shared: IndexMap<String, ComponentValue> =
            shared.iter().map(|f| (f.clone(), field_value(&trials[0], f))).collect();
        for field in map.raw.components.keys() {
            if !fields.contains(field) {
                return Err(InputError::at(
                    mapfile,
                    format!("components.\"{field}\""),
                    format!("no such field in the sources; fields: {}", fields.join(", ")),
                ));
            }
        }
        let component_name =
            |f: &str| map.raw.components.get(f).cloned().unwrap_or_else(|| f.to_string());
        // Fields the map names as one component must change together in every trial (aliased).
        let mut component_fields: IndexMap<String, String> = IndexMap::new();
        let mut aliased: IndexMap<String, Vec<String>> = IndexMap::new();
        for f in &varying {
            let c = component_name(f);
            let Some(first) = component_fields.get(&c) else {
                component_fields.insert(c, f.clone());
                continue;
            };
            if let Some(why) = apart(trials, first, f, &field_value) {
                return Err(InputError::at(
                    mapfile,
                    format!("components.\"{f}\""),
                    format!(
                        "`{first}` and `{f}` are both named `{c}` but do not change together: {why}"
                    ),
                ));
            }
            aliased.entry(c).or_default().push(f.clone());
        }
        let moving_together = moving_together(trials, &component_fields, &field_value);
        Ok(Components { fields: component_fields, shared, aliased, moving_together })
    }
}

/// Arms: one per distinct setting of the components, in order of first appearance.
struct TrialArms {
    /// Each arm's setting of the components.
    settings: Vec<IndexMap<String, ComponentValue>>,
    /// Each trial's arm, as an index into `settings`.
    of: Vec<usize>,
}

impl TrialArms {
    fn of(trials: &[ImportedTrial], component_fields: &IndexMap<String, String>) -> TrialArms {
        let settings_of = |t: &ImportedTrial| -> IndexMap<String, ComponentValue> {
            component_fields.iter().map(|(c, f)| (c.clone(), field_value(t, f))).collect()
        };
        let mut arm_settings: Vec<IndexMap<String, ComponentValue>> = Vec::new();
        let mut arm_of: Vec<usize> = Vec::with_capacity(trials.len());
        for t in trials {
            let s = settings_of(t);
            let i = match arm_settings.iter().position(|a| *a == s) {
                Some(i) => i,
                None => {
                    arm_settings.push(s);
                    arm_settings.len() - 1
                }
            };
            arm_of.push(i);
        }
        TrialArms { settings: arm_settings, of: arm_of }
    }

    /// Each arm's name as derived: its first trial's `name_field` (else the tool's name), then
    /// its components' values (a boolean's name when true), made unique with `-2`, `-3`, ...
    fn derived_names(
        &self,
        trials: &[ImportedTrial],
        component_fields: &IndexMap<String, String>,
        name_field: &str,
        tool: Tool,
    ) -> Vec<String> {
        let base_value = |i: usize| -> String {
            let t = &trials[self.of.iter().position(|&a| a == i).expect("an arm has a trial")];
            match t.identity.get(name_field) {
                Some(v) if !v.is_null() => slugify(&ablate_core::experiment::value_text(v)),
                _ => tool.name().to_string(),
            }
        };
        let base_component =
            component_fields.iter().find(|(_, f)| f.as_str() == name_field).map(|(c, _)| c.clone());
        let mut derived: Vec<String> = Vec::new();
        for (i, s) in self.settings.iter().enumerate() {
            let mut name = base_value(i);
            for (c, v) in s {
                // A boolean says its component's name when true and nothing when false.
                let part = match v {
                    ComponentValue::Bool(true) => slugify(c.rsplit('.').next().unwrap_or(c)),
                    ComponentValue::Bool(false) => continue,
                    other => slugify(&ablate_core::experiment::value_text(other)),
                };
                if Some(c) != base_component.as_ref() {
                    name.push('-');
                    name.push_str(&part);
                }
            }
            let mut unique = name.clone();
            let mut k = 2;
            while derived.contains(&unique) {
                unique = format!("{name}-{k}");
                k += 1;
            }
            derived.push(unique);
        }
        derived
    }

    /// The arms, named `names`.
    fn arms(&self, names: &[String]) -> Vec<Arm> {
        self.settings
            .iter()
            .zip(names)
            .map(|(s, n)| Arm {
                name: n.clone(),
                description: String::new(),
                settings: ArmSettings::External(s.clone()),
                origin: ArmOrigin::Declared,
                budget: None,
                resources: Default::default(),
            })
            .collect()
    }
}

/// The arms' names: the derived ones, renamed as the map's `[arms]` says; a map's arm that
/// was not derived, or two arms of one name, are refused.
fn arm_names(
    derived: &[String],
    map: &ImportMap,
    mapfile: &Path,
) -> Result<Vec<String>, InputError> {
    for from in map.raw.arms.keys() {
        if !derived.contains(from) {
            return Err(InputError::at(
                mapfile,
                format!("arms.\"{from}\""),
                format!("no arm derived by that name; derived arms: {}", derived.join(", ")),
            ));
        }
    }
    let arm_names: Vec<String> =
        derived.iter().map(|d| map.raw.arms.get(d).cloned().unwrap_or_else(|| d.clone())).collect();
    for (i, n) in arm_names.iter().enumerate() {
        if arm_names[..i].contains(n) {
            return Err(InputError::at(
                mapfile,
                "arms",
                format!("two arms would both be named `{n}`"),
            ));
        }
    }
    Ok(arm_names)
}

/// Repeats: Inspect's epochs as given; Harbor's trials numbered in name order. The trials
/// (indices) in (task, arm, sort key) order, and each one's repeat; the same repeat of a
/// task in an arm twice is refused.
fn number_repeats(
    trials: &[ImportedTrial],
    arm_of: &[usize],
    arm_names: &[String],
) -> Result<(Vec<usize>, Vec<u32>), InputError> {
    let mut order: Vec<usize> = (0..trials.len()).collect();
    order.sort_by(|&a, &b| {
        (&trials[a].task, arm_of[a], &trials[a].sort_key).cmp(&(
            &trials[b].task,
            arm_of[b],
            &trials[b].sort_key,
        ))
    });
    let mut repeats: Vec<u32> = vec![0; trials.len()];
    let mut seen: BTreeMap<(String, usize, u32), PathBuf> = BTreeMap::new();
    let mut next: BTreeMap<(String, usize), u32> = BTreeMap::new();
    for &i in &order {
        let t = &trials[i];
        let r = match t.repeat {
            Some(r) => r,
            None => {
                let n = next.entry((t.task.clone(), arm_of[i])).or_default();
                *n += 1;
                *n - 1
            }
        };
        if let Some(first) = seen.insert((t.task.clone(), arm_of[i], r), t.path()) {
            return Err(InputError::new(
                t.path(),
                format!(
                    "{} of task `{}` in arm `{}` is also in {}: the same trial twice (import each log once)",
                    t.from.id,
                    t.task,
                    arm_names[arm_of[i]],
                    first.display()
                ),
            ));
        }
        repeats[i] = r;
    }
    Ok((order, repeats))
}

/// The run's digest: what was read, how, and the map.
fn config_digest(tool: Tool, sources: &[SourceFacts], map: &ImportMap) -> String {
    let mut parts: Vec<(String, String)> = vec![
        ("tool".into(), tool.name().into()),
        ("importer_version".into(), IMPORTER_VERSION.to_string()),
    ];
    for s in sources {
        parts.push(("source".into(), s.sha256.clone()));
    }
    if let Some(sha) = &map.sha256 {
        parts.push(("map".into(), sha.clone()));
    }
    ablate_core::digest::digest_parts(parts.iter().map(|(a, b)| (a.as_str(), b.as_str())))
}

/// The suite of an import: its tasks with their checksums, and their digest.
fn suite_facts(tool: Tool, tasks: &BTreeMap<String, (String, PathBuf)>) -> SuiteFacts {
    let task_list: Vec<(String, String)> =
        tasks.iter().map(|(k, (d, _))| (k.clone(), d.clone())).collect();
    let suite_digest =
        ablate_core::digest::digest_parts(task_list.iter().map(|(k, d)| (k.as_str(), d.as_str())));
    SuiteFacts {
        name: format!("{}-import", tool.name()),
        version: String::new(),
        path: String::new(),
        digest: suite_digest,
        tasks: task_list,
        grading: Default::default(),
        source: None,
    }
}

impl Formed {
    /// The plan and the records of the trials (taken), in (task, arm, repeat) order.
    fn plan(
        &self,
        mut trials: Vec<ImportedTrial>,
        run_id: &str,
        config_digest: &str,
    ) -> (Vec<TrialSpec>, Vec<TrialRecord>) {
        let (arm_of, repeats, model) = (&self.arm_of, &self.repeats, &self.model);
        let mut specs: Vec<TrialSpec> = Vec::with_capacity(trials.len());
        let mut records: Vec<TrialRecord> = Vec::with_capacity(trials.len());
        let task_index: BTreeMap<&str, usize> =
            self.tasks.keys().enumerate().map(|(i, k)| (k.as_str(), i)).collect();
        let mut order = self.order.clone();
        order.sort_by_key(|&i| (task_index[trials[i].task.as_str()], arm_of[i], repeats[i]));
        let mut taken: Vec<Option<ImportedTrial>> = trials.drain(..).map(Some).collect();
        for (n, &i) in order.iter().enumerate() {
            let t = taken[i].take().expect("each trial once");
            let arm = self.arm_names[arm_of[i]].clone();
            let id = ablate_core::plan::trial_id(config_digest, &t.task, &arm, model, repeats[i]);
            let spec = TrialSpec {
                id,
                order: n as u32,
                task: t.task.clone(),
                arm,
                model: model.clone(),
                repeat: repeats[i],
                seed: 0,
            };
            let mut r = TrialRecord::blank(
                run_id,
                &spec,
                1,
                t.status,
                t.end_reason.clone(),
                t.started_at.clone(),
            );
            r.tests_total = 1;
            r.tests_passed = u32::from(t.graded_pass == Some(true));
            r.graded_pass = t.graded_pass;
            r.steps = t.steps;
            r.sessions = u32::from(t.steps > 0);
            r.tokens = t.tokens;
            r.working_seconds = t.working_seconds;
            r.wall_seconds = t.wall_seconds;
            r.cost_usd = t.cost_usd;
            r.error = t.error.clone();
            r.finished_at = t.finished_at.clone();
            r.imported = Some(t.from);
            specs.push(spec);
            records.push(r);
        }
        (specs, records)
    }

    /// The experiment as the manifest records it (its comparisons taken).
    fn experiment(&mut self, map: &ImportMap, name: String, tool: Tool) -> RecordedExperiment {
        let max_repeat = self.repeats.iter().copied().max().unwrap_or(0);
        let mut experiment = RecordedExperiment {
            name: map.raw.name.clone().unwrap_or(name),
            tasks: self.tasks.keys().cloned().collect(),
            trials: max_repeat + 1,
            seed: map.raw.seed.unwrap_or(0),
            alpha: map.raw.alpha.unwrap_or(0.05),
            margin: map.raw.margin,
            primary: None,
            sequential: None,
            arms: self.arms.iter().map(Arm::recorded).collect(),
            comparisons: std::mem::take(&mut self.comparisons),
            factorial: None,
            harness_kind: HarnessKind::Imported(ablate_core::experiment::ImportedHarness {
                tool: tool.name().to_string(),
                components: self.components.fields.keys().cloned().collect(),
            }),
            rest: serde_json::Map::new(),
        };
        experiment.rest.insert("models".into(), serde_json::json!([self.model]));
        experiment
    }
}

/// The import's words on aliased fields (`Imported::notes`).
fn alias_notes(facts: &ablate_core::record::imported::ImportFacts) -> Vec<String> {
    let quoted = |v: &[String]| v.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ");
    let mut notes: Vec<String> = facts
        .aliased
        .iter()
        .map(|(c, others)| {
            format!(
                "component `{c}`: fields `{}`, {} change together in every trial (one component, as the map names them)",
                facts.components[c],
                quoted(others)
            )
        })
        .collect();
    for group in &facts.moving_together {
        notes.push(format!(
            "components {} always change together (perfectly aliased): a comparison of them is combined, not an ablation; to compare them as one, name their fields one component in the map (docs/import.md)",
            quoted(group)
        ));
    }
    notes
}

/// Why fields `f` and `g` are not one component: two trials where one
/// changes and the other does not (None: their values pair one to one).
fn apart(
    trials: &[ImportedTrial],
    f: &str,
    g: &str,
    value: &impl Fn(&ImportedTrial, &str) -> ComponentValue,
) -> Option<String> {
    let mut pairs: Vec<(ComponentValue, ComponentValue, PathBuf)> = Vec::new();
    for t in trials {
        let (a, b) = (value(t, f), value(t, g));
        for (pa, pb, at) in &pairs {
            if (*pa == a) != (*pb == b) {
                let text = ablate_core::experiment::value_text;
                return Some(format!(
                    "`{f}` = {} with `{g}` = {} in {}, but `{f}` = {} with `{g}` = {} in {}",
                    text(pa),
                    text(pb),
                    at.display(),
                    text(&a),
                    text(&b),
                    t.path().display()
                ));
            }
        }
        if !pairs.iter().any(|(pa, _, _)| *pa == a) {
            pairs.push((a, b, t.path()));
        }
    }
    None
}

/// Groups of components (named apart) whose fields change together in every
/// trial: perfectly aliased, so no comparison can tell them apart.
fn moving_together(
    trials: &[ImportedTrial],
    components: &IndexMap<String, String>,
    value: &impl Fn(&ImportedTrial, &str) -> ComponentValue,
) -> Vec<Vec<String>> {
    let mut groups: Vec<Vec<String>> = Vec::new();
    for (c, f) in components {
        let found =
            groups.iter_mut().find(|g| apart(trials, &components[&g[0]], f, value).is_none());
        match found {
            Some(g) => g.push(c.clone()),
            None => groups.push(vec![c.clone()]),
        }
    }
    groups.retain(|g| g.len() > 1);
    groups
}

/// The comparisons: the map's, or every pair of arms (only the single-factor
/// pairs when there are more than [`MAX_AUTO_PAIRS`]). Each goes through the
/// single-factor guard: one differing component makes an ablation, more a
/// combined comparison. In a generated pair the control is the arm seen
/// first, or the one with the component off when it is a boolean.
fn comparisons(
    arms: &[Arm],
    map: &ImportMap,
    mapfile: &Path,
) -> Result<Vec<Comparison>, InputError> {
    let make = |control: &Arm, treatment: &Arm, name: Option<String>| -> Option<Comparison> {
        let differs = control.diff(treatment);
        let (kind, origin, default_name) = match guard("", control, treatment) {
            Ok(component) => {
                let named = format!("{component}: {} vs {}", treatment.name, control.name);
                (ComparisonKind::Ablation { component }, ComparisonOrigin::Pair, named)
            }
            Err(_) if differs.is_empty() => return None,
            Err(_) => {
                let named = format!("{} vs {} (combined)", treatment.name, control.name);
                (ComparisonKind::Combined, ComparisonOrigin::Combined, named)
            }
        };
        Some(Comparison {
            name: name.unwrap_or(default_name),
            control: control.name.clone(),
            treatment: treatment.name.clone(),
            kind,
            origin,
            differs,
            budget: None,
        })
    };
    if !map.raw.comparisons.is_empty() {
        let names = arms.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ");
        let mut out = Vec::new();
        for (i, c) in map.raw.comparisons.iter().enumerate() {
            let find = |field: &str, name: &str| {
                arms.iter().find(|a| a.name == name).ok_or_else(|| {
                    InputError::at(
                        mapfile,
                        format!("comparisons[{i}].{field}"),
                        format!("no arm named `{name}`; arms: {names}"),
                    )
                })
            };
            let (control, treatment) =
                (find("control", &c.control)?, find("treatment", &c.treatment)?);
            let comparison = make(control, treatment, c.name.clone()).ok_or_else(|| {
                InputError::at(
                    mapfile,
                    format!("comparisons[{i}]"),
                    format!(
                        "`{}` and `{}` are the same arm; nothing to compare",
                        c.control, c.treatment
                    ),
                )
            })?;
            out.push(comparison);
        }
        return Ok(out);
    }
    let pairs = arms.len() * arms.len().saturating_sub(1) / 2;
    let mut out = Vec::new();
    for (i, a) in arms.iter().enumerate() {
        for b in &arms[i + 1..] {
            let differs = a.settings.diff(&b.settings);
            if pairs > MAX_AUTO_PAIRS && differs.len() != 1 {
                continue;
            }
            let b_is_on = differs.len() == 1
                && b.settings.external().and_then(|v| v.get(&differs[0].component))
                    == Some(&ComponentValue::Bool(true));
            let a_is_on = differs.len() == 1
                && a.settings.external().and_then(|v| v.get(&differs[0].component))
                    == Some(&ComponentValue::Bool(true));
            let (control, treatment) = if a_is_on && !b_is_on { (b, a) } else { (a, b) };
            out.extend(make(control, treatment, None));
        }
    }
    Ok(out)
}

/// The output folder must not exist, or be empty; `--force` replaces an
/// imported run folder, and nothing else.
fn check_output(out: &Path, force: bool) -> Result<bool, InputError> {
    match std::fs::symlink_metadata(out) {
        Ok(m) if m.is_dir() => {
            let empty = std::fs::read_dir(out)
                .map_err(|e| InputError::new(out, format!("cannot list the output folder: {e}")))?
                .next()
                .is_none();
            if empty {
                return Ok(true);
            }
            if !force {
                return Err(InputError::new(
                    out,
                    "the output folder exists and is not empty (--force replaces a folder an earlier import wrote)",
                ));
            }
            let imported = ablate_core::record::ManifestHead::read(out)
                .map(|m| m.imported.is_some())
                .unwrap_or(false);
            if !imported {
                return Err(InputError::new(
                    out,
                    "refusing to replace a folder that is not an imported run (its manifest.json has no `imported`)",
                ));
            }
            Ok(true)
        }
        Ok(_) => Err(InputError::new(out, "exists and is not a folder")),
        Err(_) => Ok(false),
    }
}

/// Write the run into a temporary folder beside `out`, check that it loads as
/// a run, then move it into place.
fn write_folder(out: &Path, existing: bool, run: &Assembled) -> Result<(), InputError> {
    use std::io::Write;
    let io =
        |path: &Path, what: &str, e: std::io::Error| InputError::new(path, format!("{what}: {e}"));
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)
        .map_err(|e| io(&parent, "cannot create the output's parent folder", e))?;
    let tmp = tempfile::Builder::new()
        .prefix(".ablate-import-")
        .tempdir_in(&parent)
        .map_err(|e| io(&parent, "cannot create a temporary folder", e))?;
    let root = tmp.path();
    run.manifest.write(root).map_err(|e| io(&root.join("manifest.json"), "cannot write", e))?;
    let tpath = root.join("trials.jsonl");
    let file = std::fs::File::create(&tpath).map_err(|e| io(&tpath, "cannot write", e))?;
    let mut w = std::io::BufWriter::new(file);
    for r in &run.records {
        serde_json::to_writer(&mut w, r).map_err(|e| io(&tpath, "cannot write", e.into()))?;
        w.write_all(b"\n").map_err(|e| io(&tpath, "cannot write", e))?;
    }
    w.into_inner()
        .map_err(|e| io(&tpath, "cannot write", e.into_error()))?
        .sync_all()
        .map_err(|e| io(&tpath, "cannot write", e))?;
    // What was written must load as a run; a failure here is a bug of the importer.
    let data = crate::report::load::load(root)
        .map_err(|e| InputError::new(out, format!("the imported run does not load: {e}")))?;
    if data.records != run.records.len() || !data.unreadable_lines.is_empty() {
        return Err(InputError::new(
            out,
            format!(
                "the imported run reads back {} of its {} records",
                data.records,
                run.records.len()
            ),
        ));
    }
    ablate_core::suite::import::move_into_place(tmp.keep(), out, &parent, existing, "run")
}

/// A source's value as a component value: text and booleans as they are, a
/// whole number as an integer whether written `0` or `0.0` (so equal settings
/// make one arm), other numbers as they are, lists and tables as their compact
/// JSON text.
pub(crate) fn component_value(v: &serde_json::Value) -> ComponentValue {
    use serde_json::Value;
    match v {
        Value::Array(_) | Value::Object(_) => Value::String(v.to_string()),
        Value::Number(n) => match n.as_f64() {
            Some(x) if x.fract() == 0.0 && x.abs() < 9.0e15 => Value::from(x as i64),
            _ => v.clone(),
        },
        other => other.clone(),
    }
}

/// sha256 over files read from a folder: each path relative to it, NUL, the
/// file's sha256, newline, in path order (the shape of `digest::tree_digest`).
pub(crate) fn folder_digest(files: &[(String, String)]) -> String {
    let mut sorted: Vec<(&str, &str)> =
        files.iter().map(|(rel, sha)| (rel.as_str(), sha.as_str())).collect();
    sorted.sort_unstable();
    ablate_core::digest::digest_parts(sorted)
}

/// Seconds between two ISO 8601 / RFC 3339 times as Python writes them
/// (`2025-01-02T03:04:05.123456`, with or without `Z` / `+00:00`); None when
/// either does not read.
pub(crate) fn seconds_between(start: &str, end: &str) -> Option<f64> {
    let d = epoch_seconds(end)? - epoch_seconds(start)?;
    (d.is_finite() && d >= 0.0).then_some(d)
}

/// Seconds since 1970 of an ISO 8601 time (naive times are taken as UTC).
pub(crate) fn epoch_seconds(s: &str) -> Option<f64> {
    let s = s.trim();
    let (date, rest) = s.split_once(['T', ' '])?;
    let mut d = date.split('-');
    let (y, mo, da): (i64, i64, i64) =
        (d.next()?.parse().ok()?, d.next()?.parse().ok()?, d.next()?.parse().ok()?);
    if d.next().is_some() || !(1..=12).contains(&mo) || !(1..=31).contains(&da) {
        return None;
    }
    let (clock, offset) = match rest.find(['Z', 'z', '+', '-']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let mut c = clock.split(':');
    let (h, mi): (i64, i64) = (c.next()?.parse().ok()?, c.next()?.parse().ok()?);
    let sec: f64 = c.next().unwrap_or("0").parse().ok()?;
    if !(1..=9999).contains(&y)
        || !(0..=24).contains(&h)
        || !(0..=59).contains(&mi)
        || !(0.0..61.0).contains(&sec)
    {
        return None;
    }
    let off_seconds = match offset {
        "" | "Z" | "z" => 0,
        o => {
            let sign = if o.starts_with('-') { -1 } else { 1 };
            let (oh, om) = o[1..].split_once(':').unwrap_or((&o[1..], "0"));
            let (oh, om): (i64, i64) = (oh.parse().ok()?, om.parse().ok()?);
            if !(0..=23).contains(&oh) || !(0..=59).contains(&om) {
                return None;
            }
            sign * (oh * 3600 + om * 60)
        }
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if mo > 2 { mo - 3 } else { mo + 9 }) + 2) / 5 + da - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + mi * 60 - off_seconds) as f64 + sec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(
        file: &str,
        task: &str,
        digest: &str,
        identity: &[(&str, ComponentValue)],
        status: TrialStatus,
    ) -> ImportedTrial {
        ImportedTrial {
            from: ImportedFrom {
                file: file.into(),
                id: file.into(),
                detail: serde_json::Value::Null,
            },
            input: PathBuf::from("in"),
            task: task.into(),
            task_digest: digest.into(),
            identity: identity.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
            model: "m".into(),
            repeat: None,
            sort_key: file.into(),
            status,
            end_reason: EndReason::ModelDone,
            graded_pass: Some(status == TrialStatus::Passed),
            steps: 0,
            tokens: Tokens::default(),
            cost_usd: None,
            working_seconds: 0.0,
            wall_seconds: 0.0,
            started_at: "2025-01-01T00:00:00Z".into(),
            finished_at: "2025-01-01T00:01:00Z".into(),
            error: None,
        }
    }

    fn read(trials: Vec<ImportedTrial>) -> Read {
        Read {
            tool: Tool::Harbor,
            trials,
            sources: vec![SourceFacts {
                path: "in".into(),
                kind: "folder".into(),
                sha256: "0".repeat(64),
                files: 1,
            }],
            tool_versions: Vec::new(),
            name: "job".into(),
            name_field: "agent",
            pass_rule: String::new(),
            budget: ablate_core::experiment::config::Budget {
                max_steps: 0,
                max_output_tokens_per_step: 0,
                max_total_tokens: 0,
                max_working_seconds: 0.0,
                max_cost_usd: None,
            },
        }
    }

    fn v(x: impl Into<serde_json::Value>) -> ComponentValue {
        x.into()
    }

    #[test]
    fn the_fields_that_differ_are_the_components_and_the_guard_labels_each_pair() {
        let a = [("agent", v("x")), ("model", v("m")), ("kwargs.t", v(0.0)), ("kwargs.k", v(1))];
        let b = [("agent", v("x")), ("model", v("m")), ("kwargs.t", v(0.7)), ("kwargs.k", v(1))];
        let c = [("agent", v("x")), ("model", v("m")), ("kwargs.t", v(0.7)), ("kwargs.k", v(2))];
        let mut trials = Vec::new();
        for (i, id) in [&a, &b, &c].into_iter().enumerate() {
            for task in ["t1", "t2"] {
                for r in 0..2 {
                    trials.push(trial(
                        &format!("{i}/{task}-{r}"),
                        task,
                        &format!("d-{task}"),
                        id,
                        TrialStatus::Passed,
                    ));
                }
            }
        }
        let run = assemble(read(trials), &ImportMap::default(), "r").unwrap();
        let e = &run.manifest.experiment;
        let names: Vec<&str> = e.arms.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["x-0-0-1", "x-0-7-1", "x-0-7-2"]);
        assert_eq!(
            run.manifest.imported.as_ref().unwrap().shared.keys().collect::<Vec<_>>(),
            ["agent", "model"]
        );
        // a-b: kwargs.t alone; b-c: kwargs.k alone; a-c: both.
        let kinds: Vec<(String, String, Option<String>)> = e
            .comparisons
            .iter()
            .map(|c| {
                let component = match &c.kind {
                    ComparisonKind::Ablation { component } => Some(component.clone()),
                    ComparisonKind::Combined => None,
                };
                (c.control.clone(), c.treatment.clone(), component)
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("x-0-0-1".into(), "x-0-7-1".into(), Some("kwargs.t".into())),
                ("x-0-0-1".into(), "x-0-7-2".into(), None),
                ("x-0-7-1".into(), "x-0-7-2".into(), Some("kwargs.k".into())),
            ]
        );
        // Repeats numbered per (task, arm) in name order; 12 records, all attempt 1, ids unique.
        assert_eq!(run.records.len(), 12);
        let mut ids: Vec<&str> = run.records.iter().map(|r| r.trial_id.as_str()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 12);
        assert!(run.records.iter().all(|r| r.attempt == 1 && r.repeat < 2));
        assert_eq!(run.manifest.created_at, "2025-01-01T00:00:00Z");
    }

    #[test]
    fn a_task_with_two_checksums_is_refused_naming_both_trials() {
        let id = [("agent", v("x"))];
        let trials = vec![
            trial("job-a/t1__1/result.json", "t1", "aaa", &id, TrialStatus::Passed),
            trial("job-b/t1__2/result.json", "t1", "bbb", &id, TrialStatus::Failed),
        ];
        let e = assemble(read(trials), &ImportMap::default(), "r").err().unwrap();
        let text = e.to_string();
        assert!(
            text.contains("job-b/t1__2/result.json") && text.contains("job-a/t1__1/result.json"),
            "{text}"
        );
        assert!(text.contains("aaa") && text.contains("bbb"), "{text}");
    }

    #[test]
    fn a_boolean_component_puts_the_arm_without_it_on_the_control_side() {
        let on = [("agent", v("x")), ("kwargs.hint", v(true))];
        let off = [("agent", v("x")), ("kwargs.hint", v(false))];
        let trials = vec![
            trial("1", "t", "d", &on, TrialStatus::Passed),
            trial("2", "t", "d", &off, TrialStatus::Failed),
        ];
        let run = assemble(read(trials), &ImportMap::default(), "r").unwrap();
        let c = &run.manifest.experiment.comparisons[0];
        assert_eq!((c.control.as_str(), c.treatment.as_str()), ("x", "x-hint"));
    }

    #[test]
    fn the_map_renames_and_chooses_comparisons_through_the_guard() {
        let a = [("agent", v("x")), ("kwargs.t", v(0.0)), ("kwargs.k", v(1))];
        let b = [("agent", v("x")), ("kwargs.t", v(0.7)), ("kwargs.k", v(2))];
        let trials = vec![
            trial("1", "t", "d", &a, TrialStatus::Passed),
            trial("2", "t", "d", &b, TrialStatus::Failed),
        ];
        let mut map = ImportMap::default();
        map.raw.components.insert("kwargs.t".into(), "temperature".into());
        map.raw.arms.insert("x-0-7-2".into(), "hot".into());
        map.raw.comparisons.push(map::RawComparison {
            control: "x-0-0-1".into(),
            treatment: "hot".into(),
            name: None,
        });
        let run = assemble(read(trials), &map, "r").unwrap();
        let c = &run.manifest.experiment.comparisons[0];
        assert_eq!(
            c.kind,
            ComparisonKind::Combined,
            "two components differ: not an ablation, whatever the map asks"
        );
        assert_eq!(
            c.differs.iter().map(|d| d.component.as_str()).collect::<Vec<_>>(),
            ["temperature", "kwargs.k"]
        );
        map.raw.comparisons[0].treatment = "nope".into();
        let trials = vec![
            trial("1", "t", "d", &a, TrialStatus::Passed),
            trial("2", "t", "d", &b, TrialStatus::Failed),
        ];
        let e = assemble(read(trials), &map, "r").err().unwrap();
        assert_eq!(e.key.as_deref(), Some("comparisons[0].treatment"));
    }

    /// Inspect's usual pattern: a task hands its argument to its solver, so two fields always
    /// change together. Named apart, they are reported as aliased and their comparison is
    /// combined; the map may name both as one component, which makes it an ablation; two
    /// fields that do not change together are refused under one name, naming both trials.
    #[test]
    fn fields_that_change_together_may_be_one_component() {
        let a = [("agent", v("x")), ("task_args.variant", v("a")), ("scripted.variant", v("a"))];
        let b = [("agent", v("x")), ("task_args.variant", v("b")), ("scripted.variant", v("b"))];
        let trials = || {
            vec![
                trial("1", "t", "d", &a, TrialStatus::Passed),
                trial("2", "t", "d", &b, TrialStatus::Failed),
            ]
        };
        let run = assemble(read(trials()), &ImportMap::default(), "r").unwrap();
        assert_eq!(run.manifest.experiment.comparisons[0].kind, ComparisonKind::Combined);
        let facts = run.manifest.imported.as_ref().unwrap();
        assert_eq!(facts.moving_together, [vec!["task_args.variant", "scripted.variant"]]);
        assert!(alias_notes(facts)[0].contains("perfectly aliased"), "{:?}", alias_notes(facts));

        let mut map = ImportMap::default();
        map.raw.components.insert("task_args.variant".into(), "variant".into());
        map.raw.components.insert("scripted.variant".into(), "variant".into());
        let run = assemble(read(trials()), &map, "r").unwrap();
        let c = &run.manifest.experiment.comparisons[0];
        assert_eq!(c.kind, ComparisonKind::Ablation { component: "variant".into() });
        let facts = run.manifest.imported.as_ref().unwrap();
        assert_eq!(facts.aliased["variant"], ["scripted.variant"]);
        assert!(facts.moving_together.is_empty());

        // The solver's field the same in both: not one component.
        let b2 = [("agent", v("x")), ("task_args.variant", v("b")), ("scripted.variant", v("a"))];
        let c2 = [("agent", v("x")), ("task_args.variant", v("b")), ("scripted.variant", v("c"))];
        let trials = vec![
            trial("1", "t", "d", &a, TrialStatus::Passed),
            trial("2", "t", "d", &b2, TrialStatus::Failed),
            trial("3", "t", "d", &c2, TrialStatus::Failed),
        ];
        let e = assemble(read(trials), &map, "r").err().unwrap();
        assert_eq!(e.key.as_deref(), Some("components.\"scripted.variant\""));
        assert!(e.to_string().contains("do not change together"), "{e}");
    }

    #[test]
    fn iso_times_read_as_python_writes_them() {
        // `datetime(2025, 3, 1, 12, 0, 30, 250000, tzinfo=timezone.utc).timestamp()` = 1740830430.25
        assert_eq!(epoch_seconds("2025-03-01T12:00:30.250000Z"), Some(1_740_830_430.25));
        assert_eq!(epoch_seconds("2025-03-01T12:00:30.25+00:00"), Some(1_740_830_430.25));
        assert_eq!(epoch_seconds("2025-03-01T14:00:30.25+02:00"), Some(1_740_830_430.25));
        assert_eq!(epoch_seconds("2025-03-01T12:00:30.25"), Some(1_740_830_430.25));
        // 1970-01-01 is day 0; 2000-02-29 exists (a leap year of the 400 rule).
        assert_eq!(epoch_seconds("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(
            epoch_seconds("2000-03-01T00:00:00Z").unwrap()
                - epoch_seconds("2000-02-28T00:00:00Z").unwrap(),
            2.0 * 86_400.0
        );
        assert_eq!(seconds_between("2025-03-01T12:00:00Z", "2025-03-01T12:01:30.5Z"), Some(90.5));
        assert_eq!(epoch_seconds("yesterday"), None);
        assert_eq!(epoch_seconds("2025-13-01T00:00:00"), None);
        assert_eq!(epoch_seconds("99999999999999999-01-01T00:00:00Z"), None);
        assert_eq!(epoch_seconds("2025-01-01T99999999999999999:00:00Z"), None);
    }
}
