//! Reports: statistics (`stats`, pure functions), the analysis of a run
//! (`analysis`), and its renderings (`terminal`, `export`, `html`).

pub mod analysis;
pub mod export;
pub mod html;
pub mod load;
pub mod power;
pub mod stats;
pub mod synth;
pub mod terminal;

use std::path::Path;

/// Load a run folder, analyse it and write every export into it.
pub fn report_dir(dir: &Path) -> Result<analysis::Report, String> {
    let failed = |e: std::io::Error| format!("cannot write the exports in {}: {e}", dir.display());
    let mut csv = export::TrialsCsv::create(dir).map_err(failed)?;
    let data = load::load_with(dir, Some(&mut |r| csv.push(r))).map_err(|e| e.to_string())?;
    csv.finish(dir).map_err(failed)?;
    let report = analysis::analyse(&data);
    export::write_derived(dir, &report).map_err(failed)?;
    Ok(report)
}
