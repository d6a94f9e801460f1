//! Reading a run folder for analysis: the manifest and a compact row per
//! planned trial, streamed from trials.jsonl: the last final attempt of each
//! trial is the one analysed, and no other attempt is kept: memory is 12
//! bytes a planned trial and a row (88 bytes) a trial with a final record.

use ablate_core::error::key_at;
use ablate_core::experiment::matrix::Arm;
use ablate_core::record::delivery::Delivery;
use ablate_core::record::{ManifestHead, TrialRecord, TrialStatus};
use serde::Deserialize;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// One attempt, as the analysis needs it. Names are indices into `RunData`'s tables.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    pub trial: u64,
    pub task: u32,
    pub arm: u32,
    pub model: u32,
    pub repeat: u32,
    pub attempt: u32,
    pub status: TrialStatus,
    /// What the trial left passes (the record's `graded_pass`; for older
    /// records, its status), whatever stopped it.
    pub graded_pass: bool,
    pub tests_passed: u32,
    pub tests_total: u32,
    pub steps: u32,
    pub tokens_input: u64,
    pub tokens_output: u64,
    pub working_seconds: f64,
    pub cost_usd: Option<f64>,
    /// The builtin harness's counters, in [`INCIDENTS`] order.
    pub incidents: [u32; 6],
    /// A container task's trial: what it ran on, as an id in `RunData::container_runs`.
    pub container: Option<u32>,
    /// Position of this attempt among the records read (0-based, file order).
    pub ordinal: u32,
}

impl Row {
    pub fn passed(&self) -> f64 {
        self.status.pass_value()
    }
    /// Passed when what the trial left passes, a timed-out or stopped trial
    /// too (Harbor's scoring: the reward counts). Policy violations never pass.
    pub(crate) fn graded_passed(&self) -> f64 {
        if self.status == TrialStatus::Passed
            || (self.graded_pass && self.status != TrialStatus::PolicyViolation)
        {
            1.0
        } else {
            0.0
        }
    }
    pub(crate) fn test_fraction(&self) -> f64 {
        if self.tests_total == 0 { 0.0 } else { self.tests_passed as f64 / self.tests_total as f64 }
    }
}

/// The fields of a trial record the analysis reads; the rest of each line
/// is skipped by serde without being kept.
#[derive(Deserialize)]
struct LightRecord {
    trial_id: String,
    task: String,
    arm: String,
    model: String,
    repeat: u32,
    attempt: u32,
    status: TrialStatus,
    #[serde(default)]
    graded_pass: Option<bool>,
    tests_passed: u32,
    tests_total: u32,
    steps: u32,
    tokens: ablate_core::record::Tokens,
    working_seconds: f64,
    #[serde(default)]
    cost_usd: Option<f64>,
    #[serde(default)]
    system_fingerprints: Vec<String>,
    #[serde(default)]
    delivery: Option<Delivery>,
    #[serde(default)]
    incidents: ablate_core::record::Incidents,
    #[serde(default)]
    grade: Option<LightGrade>,
    #[serde(default)]
    harness_command: Option<LightCommand>,
    #[serde(default)]
    container: Option<ablate_core::record::ContainerRun>,
}

/// A record's verifier rewards (reward.json's keys), all the loader reads of its grade.
#[derive(Deserialize, Default)]
struct LightGrade {
    #[serde(default)]
    verifier: Option<LightVerifier>,
}

#[derive(Deserialize, Default)]
struct LightVerifier {
    #[serde(default)]
    rewards: std::collections::BTreeMap<String, f64>,
}

/// An external harness's reported metrics, all the loader reads of its command.
#[derive(Deserialize, Default)]
struct LightCommand {
    #[serde(default)]
    metrics: std::collections::BTreeMap<String, f64>,
}

/// The builtin harness's counters, in `Row::incidents` order: outcomes under these names.
pub const INCIDENTS: [&str; 6] = [
    "tool_calls",
    "loop_guard_hits",
    "invalid_tool_calls",
    "unparsed_replies",
    "path_refusals",
    "refused_done",
];

/// What an arm's counted trials (for one model) show of their model calls.
#[derive(Debug, Clone, Default)]
pub struct ArmDelivery {
    pub trials: usize,
    /// Trials that got a model reply (a step, and tokens counted).
    pub reached_model: usize,
    /// Their delivery records merged (None: no trial has one).
    pub record: Option<Delivery>,
}

#[derive(Debug, Default)]
pub struct Names {
    pub list: Vec<String>,
    index: HashMap<String, u32>,
}

impl Names {
    pub fn id(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.list.len() as u32;
        self.list.push(name.to_string());
        self.index.insert(name.to_string(), i);
        i
    }
    pub fn get(&self, name: &str) -> Option<u32> {
        self.index.get(name).copied()
    }
    pub fn name(&self, i: u32) -> &str {
        &self.list[i as usize]
    }
}

pub struct RunData {
    pub dir: PathBuf,
    /// The manifest, its plan left out (its keys were used to read the records).
    pub manifest: ManifestHead,
    pub tasks: Names,
    pub arms: Names,
    /// Each arm as the experiment defines it, read back from the manifest through the component
    /// registry (`Arm::from_recorded`), in the manifest's order.
    pub arm_settings: Vec<Arm>,
    pub models: Names,
    /// The last final attempt of each trial: what the statistics use, in a
    /// canonical order (model, task, arm, repeat as the experiment lists
    /// them), so that sums come out bit for bit the same however the records
    /// were ordered in trials.jsonl (completion order, a resume, a merge).
    pub trials: Vec<Row>,
    /// Interrupted attempts (never analysed) by (model, arm).
    pub interrupted: std::collections::BTreeMap<(u32, u32), usize>,
    /// Records read (every attempt, the interrupted ones included).
    pub records: usize,
    /// (model, `system_fingerprint`) -> final attempts whose replies carried it.
    pub fingerprints: std::collections::BTreeMap<(u32, String), usize>,
    /// `Row::ordinal`s of the attempts the analysis counts (ascending).
    pub counted: Vec<u32>,
    /// Lines that could not be read (a torn last line included).
    pub unreadable_lines: Vec<usize>,
    /// (model, arm) -> what its counted trials' model calls asked and reached.
    pub delivery: std::collections::BTreeMap<(u32, u32), ArmDelivery>,
    /// The names of the metrics final attempts recorded: `reward.KEY` (a
    /// verifier's reward.json) and `harness.NAME` (an external harness's report).
    pub metric_names: Names,
    /// Row ordinal -> (metric, value) of the final attempts that recorded any.
    pub metrics: HashMap<u32, Vec<(u32, f64)>>,
    /// What container trials ran on (`ContainerRun::describe`), each once.
    pub container_runs: Names,
    /// The same, as recorded: `container_run_values[id]` is what `container_runs` names `id`.
    pub container_run_values: Vec<ablate_core::record::ContainerRun>,
}

impl RunData {
    /// The id of what a container trial ran on, the run added the first time it is seen.
    fn container_run_id(&mut self, run: &ablate_core::record::ContainerRun) -> u32 {
        let id = self.container_runs.id(&run.describe());
        if id as usize == self.container_run_values.len() {
            self.container_run_values.push(run.clone());
        }
        id
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: {message}")]
    Bad { path: PathBuf, message: String },
}

pub fn load(dir: &Path) -> Result<RunData, LoadError> {
    load_with(dir, None)
}

impl From<&TrialRecord> for LightRecord {
    fn from(r: &TrialRecord) -> Self {
        LightRecord {
            trial_id: r.trial_id.clone(),
            task: r.task.clone(),
            arm: r.arm.clone(),
            model: r.model.clone(),
            repeat: r.repeat,
            attempt: r.attempt,
            status: r.status,
            graded_pass: r.graded_pass,
            tests_passed: r.tests_passed,
            tests_total: r.tests_total,
            steps: r.steps,
            tokens: r.tokens,
            working_seconds: r.working_seconds,
            cost_usd: r.cost_usd,
            system_fingerprints: r.system_fingerprints.clone(),
            delivery: r.delivery.clone(),
            incidents: r.incidents,
            grade: r.grade.as_ref().map(|g| LightGrade {
                verifier: g.verifier.as_ref().map(|v| LightVerifier { rewards: v.rewards.clone() }),
            }),
            harness_command: r
                .harness_command
                .as_ref()
                .map(|c| LightCommand { metrics: c.metrics.clone() }),
            container: r.container.clone(),
        }
    }
}

/// Load a run; when `sink` is given, every full record is also handed to it
/// (one parse of trials.jsonl serves the analysis and the tidy CSV).
pub(crate) fn load_with(
    dir: &Path,
    mut sink: Option<&mut dyn FnMut(&TrialRecord)>,
) -> Result<RunData, LoadError> {
    let (mut data, plan_keys) = open_run(dir)?;
    let tpath = dir.join("trials.jsonl");
    let file = match std::fs::File::open(&tpath) {
        Ok(f) => Some(f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(LoadError::Bad { path: tpath, message: e.to_string() }),
    };
    let mut attempts = Attempts::new(plan_keys);
    if let Some(file) = file {
        attempts.read(&mut data, file, &tpath, &mut sink)?;
    }
    if let Some((line, id)) = attempts.unplanned.first {
        let n = attempts.unplanned.count;
        let records = if n == 1 { "record is" } else { "records are" };
        return Err(LoadError::Bad {
            path: tpath,
            message: format!(
                "{n} {records} not in this run's plan (the first at line {line}, trial id `{id}`): their trial id, task, arm, model or repeat matches no planned trial; refusing to analyse records of another run"
            ),
        });
    }
    attempts.finish(&mut data);
    Ok(data)
}

/// A run's manifest, read into an empty [`RunData`] with its names in the
/// experiment's order, and its plan's keys (taken out of the manifest).
fn open_run(dir: &Path) -> Result<(RunData, Vec<u64>), LoadError> {
    let mpath = dir.join("manifest.json");
    let head = ablate_core::record::ManifestHead::read(dir).map_err(|e| {
        let message = match &e.key {
            Some(key) => format!("key `{key}`: {}", e.message),
            None => e.message.clone(),
        };
        LoadError::Bad { path: mpath.clone(), message }
    })?;
    let mut manifest = head;
    let plan_keys = std::mem::take(&mut manifest.plan).0;
    let arm_settings = manifest
        .arms()
        .iter()
        .enumerate()
        .map(|(i, a)| {
            Arm::from_recorded(a).map_err(|e| {
                let key = key_at(&format!("experiment.arms[{i}].components"), e.path());
                LoadError::Bad {
                    path: mpath.clone(),
                    message: format!("key `{key}`: not a manifest ablate can read: {}", e.inner()),
                }
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut data = RunData {
        dir: dir.to_path_buf(),
        manifest,
        tasks: Names::default(),
        arms: Names::default(),
        arm_settings,
        models: Names::default(),
        trials: Vec::new(),
        interrupted: Default::default(),
        records: 0,
        fingerprints: Default::default(),
        counted: Vec::new(),
        unreadable_lines: Vec::new(),
        delivery: Default::default(),
        metric_names: Names::default(),
        metrics: HashMap::new(),
        container_runs: Names::default(),
        container_run_values: Vec::new(),
    };
    // Names in the experiment's order first, so tables list them as it does.
    let selected: Vec<String> = data.manifest.experiment.tasks.clone();
    for (task, _) in &data.manifest.suite.tasks {
        if selected.is_empty() || selected.contains(task) {
            data.tasks.id(task);
        }
    }
    for m in &data.manifest.models {
        data.models.id(&m.name);
    }
    for a in &data.arm_settings {
        data.arms.id(&a.name);
    }
    Ok((data, plan_keys))
}

/// Where a planned trial's last final attempt is not yet read (`Attempts::slot_of`).
const NONE: u32 = u32::MAX;

/// The attempts of trials.jsonl as they are read: the last final attempt of
/// each planned trial, and what does not belong to the plan.
struct Attempts {
    plan_keys: Vec<u64>,
    unplanned: Unplanned,
    // Per planned trial (at its key's position), where its last final attempt
    // is in `rows` (NONE: not yet read); rows grow with the final records.
    slot_of: Vec<u32>,
    rows: Vec<Row>,
    // Delivery records of final attempts, by ordinal (few trials carry one of any size).
    deliveries: HashMap<u32, Delivery>,
}

impl Attempts {
    fn new(plan_keys: Vec<u64>) -> Attempts {
        let slot_of = vec![NONE; plan_keys.len()];
        Attempts {
            plan_keys,
            unplanned: Unplanned::default(),
            slot_of,
            rows: Vec::new(),
            deliveries: HashMap::new(),
        }
    }

    /// Every line of trials.jsonl, each record handed to `sink` too; a line
    /// that does not parse is noted in `data.unreadable_lines`.
    fn read(
        &mut self,
        data: &mut RunData,
        file: std::fs::File,
        tpath: &Path,
        sink: &mut Option<&mut dyn FnMut(&TrialRecord)>,
    ) -> Result<(), LoadError> {
        let reader = BufReader::with_capacity(1 << 20, file);
        for (i, line) in reader.split(b'\n').enumerate() {
            let line = line.map_err(|e| LoadError::Bad {
                path: tpath.to_path_buf(),
                message: e.to_string(),
            })?;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let parsed = match sink.as_mut() {
                Some(sink) => serde_json::from_slice::<TrialRecord>(&line).map(|full| {
                    sink(&full);
                    LightRecord::from(&full)
                }),
                None => serde_json::from_slice::<LightRecord>(&line),
            };
            match parsed {
                Ok(r) => self.record(data, i + 1, r),
                Err(_) => data.unreadable_lines.push(i + 1),
            }
        }
        Ok(())
    }

    /// One record read at `line`: counted, and kept when it is its planned
    /// trial's last final attempt so far.
    fn record(&mut self, data: &mut RunData, line: usize, mut r: LightRecord) {
        let ordinal = data.records as u32;
        data.records += 1;
        let Ok(slot) = self.plan_keys.binary_search(&ablate_core::record::plan_key(
            &r.trial_id,
            &r.task,
            &r.arm,
            &r.model,
            r.repeat,
        )) else {
            self.unplanned.count += 1;
            self.unplanned.first.get_or_insert((line, r.trial_id));
            return;
        };
        let (model, arm) = (data.models.id(&r.model), data.arms.id(&r.arm));
        if r.status.is_final() {
            for fp in std::mem::take(&mut r.system_fingerprints) {
                *data.fingerprints.entry((model, fp)).or_default() += 1;
            }
        }
        if !r.status.is_final() {
            if r.status == TrialStatus::Interrupted {
                *data.interrupted.entry((model, arm)).or_default() += 1;
            }
            return;
        }
        if let Some(d) = r.delivery.take() {
            self.deliveries.insert(ordinal, d);
        }
        let metrics = record_metrics(&mut data.metric_names, &r);
        if !metrics.is_empty() {
            data.metrics.insert(ordinal, metrics);
        }
        let row = final_row(data, &r, model, arm, ordinal);
        // The last final attempt counts (the first of equal attempts).
        match self.slot_of[slot] {
            NONE => {
                self.slot_of[slot] = self.rows.len() as u32;
                self.rows.push(row);
            }
            k if self.rows[k as usize].attempt < r.attempt => self.rows[k as usize] = row,
            _ => {}
        }
    }

    /// The kept rows into `data`: the ordinals counted, the rows in canonical
    /// order, each arm's deliveries (the plan's keys freed first).
    fn finish(self, data: &mut RunData) {
        let Attempts { plan_keys, slot_of, mut rows, deliveries, .. } = self;
        drop((plan_keys, slot_of));
        data.counted = rows.iter().map(|r| r.ordinal).collect();
        data.counted.sort_unstable();
        rows.sort_unstable_by_key(|r| (r.model, r.task, r.arm, r.repeat, r.trial));
        data.delivery = arm_deliveries(&rows, &deliveries);
        data.trials = rows;
    }
}

/// The row of a final attempt, its names as ids in `data`'s tables.
fn final_row(data: &mut RunData, r: &LightRecord, model: u32, arm: u32, ordinal: u32) -> Row {
    Row {
        trial: ablate_core::record::trial_number(&r.trial_id),
        task: data.tasks.id(&r.task),
        arm,
        model,
        repeat: r.repeat,
        attempt: r.attempt,
        status: r.status,
        graded_pass: r.graded_pass.unwrap_or(r.status == TrialStatus::Passed),
        tests_passed: r.tests_passed,
        tests_total: r.tests_total,
        steps: r.steps,
        tokens_input: r.tokens.input,
        tokens_output: r.tokens.output,
        working_seconds: r.working_seconds,
        cost_usd: r.cost_usd,
        incidents: {
            let i = r.incidents;
            [
                i.tool_calls,
                i.loop_guard_hits,
                i.invalid_tool_calls,
                i.unparsed_replies,
                i.path_refusals,
                i.refused_done,
            ]
        },
        container: r.container.as_ref().map(|c| data.container_run_id(c)),
        ordinal,
    }
}

/// A record's metrics beside the builtin counters: its verifier's rewards as
/// `reward.KEY`, its harness's reported metrics as `harness.NAME`.
fn record_metrics(names: &mut Names, r: &LightRecord) -> Vec<(u32, f64)> {
    let rewards = r.grade.as_ref().and_then(|g| g.verifier.as_ref()).map(|v| &v.rewards);
    let reported = r.harness_command.as_ref().map(|c| &c.metrics);
    let mut out = Vec::new();
    for (prefix, values) in [("reward", rewards), ("harness", reported)] {
        for (k, v) in values.into_iter().flatten() {
            out.push((names.id(&format!("{prefix}.{k}")), *v));
        }
    }
    out
}

/// Each (model, arm)'s counted trials: how many reached the model, and their
/// delivery records merged.
fn arm_deliveries(
    rows: &[Row],
    deliveries: &HashMap<u32, Delivery>,
) -> std::collections::BTreeMap<(u32, u32), ArmDelivery> {
    let mut out: std::collections::BTreeMap<(u32, u32), ArmDelivery> = Default::default();
    for r in rows {
        let a = out.entry((r.model, r.arm)).or_default();
        a.trials += 1;
        if r.steps > 0 && r.tokens_input + r.tokens_output > 0 {
            a.reached_model += 1;
        }
        if let Some(d) = deliveries.get(&r.ordinal) {
            a.record.get_or_insert_with(Delivery::default).merge(d);
        }
    }
    out
}

/// Records that do not belong to the plan: how many, and the first (line, trial id).
#[derive(Default)]
struct Unplanned {
    count: usize,
    first: Option<(usize, String)>,
}
