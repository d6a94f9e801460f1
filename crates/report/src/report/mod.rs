//! Reports: statistics (`stats`, pure functions), the analysis of a run
//! (`analysis`), and its renderings (`terminal`, `export`, `html`, sharing
//! `format`, and `warnings`, the analysis's warnings and notes with their
//! words; `summary`, the counts at the end of a run). `live` is the run's
//! reporter that keeps the exports current while trials finish.

pub mod analysis;
pub mod budget_lines;
pub mod cells;
pub mod cost_lines;
pub mod design_lines;
pub mod export;
pub mod format;
pub mod html;
pub mod interval;
pub mod live;
pub mod load;
pub mod power;
pub mod rows;
pub mod stats;
pub mod stopping;
pub mod summary;
pub mod terminal;
pub mod warnings;

use std::path::{Path, PathBuf};

/// Why a run folder could not be reported. `NotARun` and `Load` are bad input
/// (the folder or a record the user pointed at, named once); `Write` is a
/// failure to write the exports into a good folder.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{} has no manifest.json: not a run folder (nothing was written)", dir.display())]
    NotARun { dir: PathBuf },
    /// A record or the manifest does not read (the error names its file).
    #[error(transparent)]
    Load(#[from] load::LoadError),
    #[error("cannot write the exports in {}: {source}", dir.display())]
    Write {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Load a run folder, analyse it and write every export into it. Writes
/// nothing into a folder without a manifest.json, nor when the records do not
/// load (records outside the plan among them). The caller holds the folder's
/// lock (`record::lock`): the run that writes it, or `ablate report`.
pub fn report_dir(dir: &Path) -> Result<analysis::Report, ReportError> {
    report_dir_with(dir, |_| ()).map(|(report, ())| report)
}

/// `report_dir`, also giving `with` the rows it read (once, for the analysis
/// and whatever else the caller draws from them).
pub(crate) fn report_dir_with<T>(
    dir: &Path,
    with: impl FnOnce(&load::RunData) -> T,
) -> Result<(analysis::Report, T), ReportError> {
    require_manifest(dir)?;
    let failed = |source: std::io::Error| ReportError::Write { dir: dir.to_path_buf(), source };
    let mut csv = export::TrialsCsv::create(dir).map_err(failed)?;
    let data = match load::load_with(dir, Some(&mut |r| csv.push(r))) {
        Ok(data) => data,
        Err(e) => {
            csv.discard();
            return Err(e.into());
        }
    };
    let drawn = with(&data);
    let report = analysis::analyse(&data);
    csv.finish(dir, &data, &report).map_err(failed)?;
    export::write_derived(dir, &report).map_err(failed)?;
    Ok((report, drawn))
}

/// Load and analyse a run folder without writing anything into it; `margin`
/// (`ablate report --margin`) in place of the experiment's own when given.
pub fn analyse_dir(dir: &Path, margin: Option<f64>) -> Result<analysis::Report, ReportError> {
    require_manifest(dir)?;
    let mut data = load::load(dir)?;
    if margin.is_some() {
        // `ablate report --margin`: in place of the experiment's own.
        data.manifest.experiment.margin = margin;
    }
    Ok(analysis::analyse(&data))
}

/// A run folder has a manifest.json; anything else is refused before a file is written.
pub fn require_manifest(dir: &Path) -> Result<(), ReportError> {
    match std::fs::metadata(dir.join("manifest.json")) {
        Ok(m) if m.is_file() => Ok(()),
        _ => Err(ReportError::NotARun { dir: dir.to_path_buf() }),
    }
}
