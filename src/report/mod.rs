//! Reports: statistics (`stats`, pure functions), the analysis of a run
//! (`analysis`), and its renderings (`terminal`, `export`, `html`, sharing
//! `format`; `summary`, the counts at the end of a run). `live` is the run's
//! reporter that keeps the exports current while trials finish.

pub mod analysis;
pub mod export;
pub mod format;
pub mod html;
pub mod live;
pub mod load;
pub mod power;
pub mod rows;
pub mod stats;
pub mod summary;
pub mod terminal;

use std::path::Path;

/// Load a run folder, analyse it and write every export into it. Writes
/// nothing into a folder without a manifest.json, nor when the records do not
/// load (records outside the plan among them). The caller holds the folder's
/// lock (`record::lock`): the run that writes it, or `ablate report`.
pub fn report_dir(dir: &Path) -> Result<analysis::Report, String> {
    report_dir_with(dir, |_| ()).map(|(report, ())| report)
}

/// `report_dir`, also giving `with` the rows it read (once, for the analysis
/// and whatever else the caller draws from them).
pub fn report_dir_with<T>(dir: &Path, with: impl FnOnce(&load::RunData) -> T) -> Result<(analysis::Report, T), String> {
    require_manifest(dir)?;
    let failed = |e: std::io::Error| format!("cannot write the exports in {}: {e}", dir.display());
    let mut csv = export::TrialsCsv::create(dir).map_err(failed)?;
    let data = match load::load_with(dir, Some(&mut |r| csv.push(r))) {
        Ok(data) => data,
        Err(e) => {
            csv.discard();
            return Err(e.to_string());
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
pub fn analyse_dir(dir: &Path, margin: Option<f64>) -> Result<analysis::Report, String> {
    require_manifest(dir)?;
    let mut data = load::load(dir).map_err(|e| e.to_string())?;
    if margin.is_some() {
        // `ablate report --margin`: in place of the experiment's own.
        data.manifest.experiment.margin = margin;
    }
    Ok(analysis::analyse(&data))
}

/// A run folder has a manifest.json; anything else is refused before a file is written.
pub fn require_manifest(dir: &Path) -> Result<(), String> {
    let path = dir.join("manifest.json");
    match std::fs::metadata(&path) {
        Ok(m) if m.is_file() => Ok(()),
        _ => Err(format!("{} has no manifest.json: not a run folder (nothing was written)", dir.display())),
    }
}
