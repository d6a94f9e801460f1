//! `ablate merge`: the shard folders of one experiment (`ablate run --shard
//! K/N`, one folder each) put back together as one run folder, which
//! `report`, `gate`, `export` and `run --resume` read like any run.
//!
//! The shards must be of one experiment: equal config digest, suite digest,
//! shard count and model identities, distinct indices covering 1..N, and every
//! planned trial with a final record (in the sequential design, every trial
//! the shard's own rule still needs: one it skipped, its comparisons decided
//! or its budget spent, is not missing). What is missing is named (shards, and
//! trials without a final record); `allow_partial` merges what exists and the
//! manifest says so (`merged.partial`). Nothing is written before every check
//! has passed, and the output is built under a temporary name and renamed
//! into place, so a failed merge leaves no folder.
//!
//! Records and traces are copied line by line (memory does not grow with the
//! trial count beyond the set of finished trial ids); each record's `run_id`
//! becomes the merged run's, everything else is kept byte for byte in meaning.

use super::design::{Shard, TrialSpec};
use super::lock::{LockError, RunLock};
use super::{Manifest, ModelIdentity, TrialRecord, now_rfc3339};
use crate::error::InputError;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Where a merged run came from (`manifest.merged`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedFrom {
    /// The shard count N of the experiment.
    pub shard_count: u32,
    /// True when shards or trials were missing (`--allow-partial`).
    pub partial: bool,
    /// Indices (1-based) of the shards that were not given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_shards: Vec<u32>,
    /// Planned trials of the given shards that have no final record.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unfinished_trials: usize,
    pub shards: Vec<MergedShard>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One shard folder that went into a merge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedShard {
    pub shard: Shard,
    pub run_id: String,
    pub hostname: String,
    pub created_at: String,
    pub records: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error(transparent)]
    Input(#[from] InputError),
    /// A shard is still being written (or resumed) by a run.
    #[error("{0}; merge it once that run has ended")]
    Lock(#[from] LockError),
    #[error("{}", .0.join("\n"))]
    Incomplete(Vec<String>),
    #[error("cannot write {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
}

pub struct MergeOptions {
    /// The merged run folder; it must not exist. Its name is the run id.
    pub out: PathBuf,
    pub shards: Vec<PathBuf>,
    pub allow_partial: bool,
}

#[derive(Debug)]
pub struct MergeSummary {
    pub dir: PathBuf,
    pub run_id: String,
    pub shard_count: u32,
    pub planned: usize,
    pub records: usize,
    /// What is missing (empty for a complete merge): said on stderr.
    pub missing: Vec<String>,
    /// The merged folder's lock: held while the caller writes the report.
    pub lock: RunLock,
}

/// What one shard holds, read and checked before anything is written.
struct ShardIn {
    dir: PathBuf,
    manifest: Manifest,
    shard: Shard,
    _lock: RunLock,
}

/// How many unfinished trials a message names before it says "and n more".
const NAMED: usize = 10;

pub fn merge(opts: &MergeOptions) -> Result<MergeSummary, MergeError> {
    let out_name = opts.out.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
    super::folder::check_run_id(&out_name)
        .map_err(|e| InputError::at(&opts.out, "-o", e.to_string()))?;
    if opts.shards.is_empty() {
        return Err(InputError::at(&opts.out, "SHARD_DIR", "no shard folders given").into());
    }

    // Read and lock every shard; check they are parts of one experiment.
    let mut shards = read_shards(&opts.shards)?;
    check_one_experiment(&shards)?;
    let count = shards[0].shard.count;
    let given: HashSet<u32> = shards.iter().map(|s| s.shard.index).collect();
    let missing_shards: Vec<u32> = (1..=count).filter(|k| !given.contains(k)).collect();

    let (mut missing, unfinished_trials) = what_is_missing(&shards, &missing_shards, count)?;
    if !missing.is_empty() && !opts.allow_partial {
        missing.push("nothing was merged; --allow-partial merges what exists".into());
        return Err(MergeError::Incomplete(missing));
    }

    // Write under a temporary name, rename into place at the end.
    let tmp = temporary_folder(&opts.out, &out_name)?;
    let copied = copy_shards(tmp.path(), &mut shards, &out_name)?;

    let mut manifest = shards[0].manifest.clone();
    manifest.run_id = out_name.clone();
    manifest.created_at = now_rfc3339();
    manifest.shard = None;
    manifest.planned_trials = copied.plan.len();
    manifest.plan = copied.plan;
    manifest.merged = Some(MergedFrom {
        shard_count: count,
        partial: !missing.is_empty(),
        missing_shards,
        unfinished_trials,
        shards: copied.shards,
    });
    manifest.write(tmp.path()).map_err(io(tmp.path()))?;

    // Into place: rename fails if `out` appeared meanwhile (a non-empty folder).
    let tmp = tmp.keep();
    if let Err(source) = std::fs::rename(&tmp, &opts.out) {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(MergeError::Io { path: opts.out.clone(), source });
    }
    let lock = RunLock::acquire(&opts.out)?;
    Ok(MergeSummary {
        dir: opts.out.clone(),
        run_id: out_name,
        shard_count: count,
        planned: manifest.planned_trials,
        records: copied.records,
        missing,
        lock,
    })
}

/// An error for an I/O failure on `path`.
fn io(path: &Path) -> impl Fn(std::io::Error) -> MergeError + use<> {
    let path = path.to_path_buf();
    move |source| MergeError::Io { path: path.clone(), source }
}

/// Read and lock each shard folder, in the order given: each a shard, no index twice.
fn read_shards(dirs: &[PathBuf]) -> Result<Vec<ShardIn>, MergeError> {
    let mut shards: Vec<ShardIn> = Vec::new();
    for dir in dirs {
        let path = dir.join("manifest.json");
        let manifest: Manifest = Manifest::read(dir)?;
        let Some(shard) = manifest.shard else {
            return Err(InputError::at(
                &path,
                "shard",
                "this run is not a shard (it was run without --shard K/N)",
            )
            .into());
        };
        if let Some(other) = shards.iter().find(|o| o.shard.index == shard.index) {
            return Err(InputError::at(
                &path,
                "shard.index",
                format!(
                    "shard {shard} is given twice: {} and {}",
                    other.dir.display(),
                    dir.display()
                ),
            )
            .into());
        }
        let lock = RunLock::acquire(dir)?;
        shards.push(ShardIn { dir: dir.clone(), manifest, shard, _lock: lock });
    }
    Ok(shards)
}

/// Check every shard is of the first's experiment: config and suite digests, shard count,
/// record format and model identities.
fn check_one_experiment(shards: &[ShardIn]) -> Result<(), MergeError> {
    let first = &shards[0];
    for s in &shards[1..] {
        let path = s.dir.join("manifest.json");
        let differs = |key: &str, a: &str, b: &str| -> MergeError {
            InputError::at(
                &path,
                key,
                format!(
                    "`{b}` differs from `{a}` in {}: the shards are not parts of one experiment",
                    first.dir.join("manifest.json").display()
                ),
            )
            .into()
        };
        if s.manifest.config_digest != first.manifest.config_digest {
            return Err(differs(
                "config_digest",
                &first.manifest.config_digest,
                &s.manifest.config_digest,
            ));
        }
        if s.manifest.suite.digest != first.manifest.suite.digest {
            return Err(differs(
                "suite.digest",
                &first.manifest.suite.digest,
                &s.manifest.suite.digest,
            ));
        }
        if s.shard.count != first.shard.count {
            return Err(differs(
                "shard.count",
                &first.shard.count.to_string(),
                &s.shard.count.to_string(),
            ));
        }
        if s.manifest.format != first.manifest.format {
            return Err(differs(
                "format",
                &first.manifest.format.to_string(),
                &s.manifest.format.to_string(),
            ));
        }
        if let Some(why) = identity_difference(&first.manifest.models, &s.manifest.models) {
            return Err(InputError::at(
                &path,
                "models",
                format!(
                    "{why} than in {}: the shards ran different models",
                    first.dir.join("manifest.json").display()
                ),
            )
            .into());
        }
    }
    Ok(())
}

/// What is missing, said line by line: the shards not given, then each given shard's
/// planned trials without a final record; with the count of those trials.
fn what_is_missing(
    shards: &[ShardIn],
    missing_shards: &[u32],
    count: u32,
) -> Result<(Vec<String>, usize), MergeError> {
    let mut missing: Vec<String> = Vec::new();
    if !missing_shards.is_empty() {
        let list =
            missing_shards.iter().map(|k| format!("{k}/{count}")).collect::<Vec<_>>().join(", ");
        missing.push(format!("missing shards: {list} (their trials are not in the merged plan)"));
    }
    let mut unfinished_trials = 0;
    for s in shards {
        if let Some((n, message)) = unfinished(s)? {
            unfinished_trials += n;
            missing.push(message);
        }
    }
    Ok((missing, unfinished_trials))
}

/// Which of a shard's planned trials have no final record (one pass over its records; a
/// trial its sequential rule skipped is not missing): how many, and the line naming them.
fn unfinished(s: &ShardIn) -> Result<Option<(usize, String)>, MergeError> {
    let trials_path = s.dir.join("trials.jsonl");
    let plan: HashSet<u64> = s.manifest.plan.iter().map(TrialSpec::plan_key).collect();
    let (finished, unplanned) = final_trials(&trials_path, &plan)?;
    if unplanned > 0 {
        return Err(
            InputError::new(&trials_path, format!("{unplanned} records are not in this shard's plan; refusing to merge a folder that mixes runs")).into()
        );
    }
    let skipped = sequential_skips(&s.manifest, &trials_path)?;
    let unfinished: Vec<&TrialSpec> = s
        .manifest
        .plan
        .iter()
        .filter(|t| {
            !finished.contains(&t.id)
                && skipped.as_ref().is_none_or(|m| m.needs(&t.task, &t.arm, &t.model))
        })
        .collect();
    if unfinished.is_empty() {
        return Ok(None);
    }
    let named = unfinished
        .iter()
        .take(NAMED)
        .map(|t| format!("{} ({} / {} / {} / r{})", t.id, t.task, t.arm, t.model, t.repeat))
        .collect::<Vec<_>>()
        .join(", ");
    let more = if unfinished.len() > NAMED {
        format!(" and {} more", unfinished.len() - NAMED)
    } else {
        String::new()
    };
    Ok(Some((
        unfinished.len(),
        format!(
            "shard {} ({}) is incomplete: {} of {} planned trials have no final record: {named}{more} (finish it with ablate run CONFIG --resume {})",
            s.shard,
            s.dir.display(),
            unfinished.len(),
            s.manifest.plan.len(),
            s.dir.display()
        ),
    )))
}

/// The temporary folder the merge is written in, beside `out` (which must not exist).
fn temporary_folder(out: &Path, out_name: &str) -> Result<tempfile::TempDir, MergeError> {
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if out.exists() {
        return Err(InputError::at(
            out,
            "-o",
            format!("{} exists; choose a new folder", out.display()),
        )
        .into());
    }
    std::fs::create_dir_all(parent)
        .map_err(|source| MergeError::Io { path: parent.to_path_buf(), source })?;
    tempfile::Builder::new()
        .prefix(&format!(".{out_name}.merging-"))
        .tempdir_in(parent)
        .map_err(|source| MergeError::Io { path: parent.to_path_buf(), source })
}

/// What the shards' folders gave the merged one.
struct Copied {
    records: usize,
    shards: Vec<MergedShard>,
    /// Every shard's plan, in the experiment's order.
    plan: Vec<TrialSpec>,
}

/// Copy the shards' records, attempts and traces into `out`, in shard order.
fn copy_shards(out: &Path, shards: &mut [ShardIn], out_name: &str) -> Result<Copied, MergeError> {
    let traces = out.join("traces");
    std::fs::create_dir(&traces).map_err(io(&traces))?;
    let trials_path = out.join("trials.jsonl");
    let attempts_path = out.join("attempts.jsonl");
    let mut trials = BufWriter::new(std::fs::File::create(&trials_path).map_err(io(&trials_path))?);
    let mut attempts = std::fs::File::create(&attempts_path).map_err(io(&attempts_path))?;
    let mut records = 0usize;
    let mut merged_shards = Vec::new();
    let mut plan: Vec<TrialSpec> = Vec::new();
    shards.sort_by_key(|s| s.shard.index);
    for s in shards.iter() {
        let n =
            copy_records(&s.dir.join("trials.jsonl"), out_name, &mut trials).map_err(
                |e| match e {
                    CopyError::Read(source) => {
                        MergeError::Io { path: s.dir.join("trials.jsonl"), source }
                    }
                    CopyError::Write(source) => {
                        MergeError::Io { path: trials_path.clone(), source }
                    }
                },
            )?;
        records += n;
        let from = s.dir.join("attempts.jsonl");
        if from.exists() {
            let mut r = std::fs::File::open(&from).map_err(io(&from))?;
            std::io::copy(&mut r, &mut attempts).map_err(io(&attempts_path))?;
        }
        copy_traces(&s.dir.join("traces"), &traces)?;
        merged_shards.push(MergedShard {
            shard: s.shard,
            run_id: s.manifest.run_id.clone(),
            hostname: s.manifest.host.hostname.clone(),
            created_at: s.manifest.created_at.clone(),
            records: n,
        });
        plan.extend(s.manifest.plan.iter().cloned());
    }
    trials
        .into_inner()
        .map_err(|e| e.into_error())
        .and_then(|f| f.sync_all())
        .map_err(io(&trials_path))?;
    attempts.sync_all().map_err(io(&attempts_path))?;
    plan.sort_by_key(|t| t.order);
    Ok(Copied { records, shards: merged_shards, plan })
}

/// Copy a shard's trace files (when it has a traces folder) into `traces`.
fn copy_traces(from_traces: &Path, traces: &Path) -> Result<(), MergeError> {
    if from_traces.is_dir() {
        for entry in std::fs::read_dir(from_traces).map_err(io(from_traces))? {
            let entry = entry.map_err(io(from_traces))?;
            // Regular files only: a link in a results folder is never followed.
            if entry.file_type().map_err(io(&entry.path()))?.is_file() {
                std::fs::copy(entry.path(), traces.join(entry.file_name()))
                    .map_err(io(&entry.path()))?;
            }
        }
    }
    Ok(())
}

/// The first difference of model identities between two shards, if any.
fn identity_difference(a: &[ModelIdentity], b: &[ModelIdentity]) -> Option<String> {
    let names = |m: &[ModelIdentity]| {
        m.iter().map(|m| (m.name.clone(), m.identity.clone())).collect::<BTreeMap<_, _>>()
    };
    let (a, b) = (names(a), names(b));
    for (name, id) in &b {
        match a.get(name) {
            None => return Some(format!("model `{name}` is in this shard and not")),
            Some(other) if other != id => {
                let show = |i: &Option<String>| i.clone().unwrap_or_else(|| "none".into());
                return Some(format!(
                    "model `{name}` has identity `{}` here and `{}`",
                    show(id),
                    show(other)
                ));
            }
            _ => {}
        }
    }
    a.keys()
        .find(|n| !b.contains_key(*n))
        .map(|n| format!("model `{n}` is missing here and present"))
}

/// A sequential shard's own rule replayed from its records (None for a
/// fixed design): a planned trial it no longer `needs` was skipped by the
/// rule (its comparisons decided, or a budget spent), not left unfinished.
fn sequential_skips(
    manifest: &Manifest,
    trials: &Path,
) -> Result<Option<crate::sequential::Monitor>, MergeError> {
    let models: Vec<String> = manifest.models.iter().map(|m| m.name.clone()).collect();
    let Some(mut monitor) = manifest.sequential_monitor(&models, false) else { return Ok(None) };
    super::jsonl::for_each::<TrialRecord>(trials, |r| {
        super::feed_monitor(&mut monitor, &r);
    })
    .map_err(|source| MergeError::Io { path: trials.to_path_buf(), source })?;
    Ok(Some(monitor))
}

/// Ids of the trials with a final record in a trials.jsonl (missing file:
/// none), and how many records are not of the shard's plan.
fn final_trials(path: &Path, plan: &HashSet<u64>) -> Result<(HashSet<String>, usize), MergeError> {
    let mut done = HashSet::new();
    let mut unplanned = 0;
    let Some(reader) = open_lines(path)? else { return Ok((done, 0)) };
    for line in reader.split(b'\n') {
        let line = line.map_err(|source| MergeError::Io { path: path.to_path_buf(), source })?;
        let Ok(l) = serde_json::from_slice::<super::RecordKey>(&line) else { continue };
        if !plan.contains(&l.plan_key()) {
            unplanned += 1;
        } else if l.status.is_final() {
            done.insert(l.trial_id);
        }
    }
    Ok((done, unplanned))
}

enum CopyError {
    Read(std::io::Error),
    Write(std::io::Error),
}

/// Copy every readable record of `from`, with the merged run id; lines that
/// do not parse (a torn tail) are left behind, as the report leaves them.
fn copy_records(from: &Path, run_id: &str, to: &mut impl Write) -> Result<usize, CopyError> {
    let mut n = 0;
    let file = match std::fs::File::open(from) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(CopyError::Read(e)),
    };
    for line in BufReader::with_capacity(1 << 20, file).split(b'\n') {
        let line = line.map_err(CopyError::Read)?;
        let Ok(mut record) = serde_json::from_slice::<TrialRecord>(&line) else { continue };
        record.run_id = run_id.to_string();
        serde_json::to_writer(&mut *to, &record).map_err(|e| CopyError::Write(e.into()))?;
        to.write_all(b"\n").map_err(CopyError::Write)?;
        n += 1;
    }
    Ok(n)
}

fn open_lines(path: &Path) -> Result<Option<BufReader<std::fs::File>>, MergeError> {
    match std::fs::File::open(path) {
        Ok(f) => Ok(Some(BufReader::with_capacity(1 << 20, f))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(MergeError::Io { path: path.to_path_buf(), source }),
    }
}
