//! The command line's flags for settings the library holds as plain types
//! (clap is this package's; the core crate has none): the embedded model's
//! engine settings (`--local-*`, each also its ABLATE_LOCAL_* environment
//! variable), the container engine (`--engine`, ABLATE_ENGINE) and the
//! export's table (`--table`).

use ablate_core::container::EngineKind;
use ablate_core::model::EngineSettings;
use clap::Parser;

const HEADING: &str = "Embedded model (local provider)";

// `model::EngineSettings` as flags of `ablate run`, shown in its `--help` (a plain
// comment: a doc comment here would become help text).
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineFlags {
    /// CPU threads while generating, and for prompts unless --local-batch-threads [default: every core]
    #[arg(long = "local-threads", env = "ABLATE_LOCAL_THREADS", value_name = "N", hide_env_values = true, value_parser = count(), help_heading = HEADING)]
    pub threads: Option<u64>,
    /// CPU threads while evaluating a prompt [default: --local-threads]
    #[arg(long = "local-batch-threads", env = "ABLATE_LOCAL_BATCH_THREADS", value_name = "N", hide_env_values = true, value_parser = count(), help_heading = HEADING)]
    pub batch_threads: Option<u64>,
    /// Conversations kept in the KV cache at once [default: 8]
    #[arg(long = "local-slots", env = "ABLATE_LOCAL_SLOTS", value_name = "N", hide_env_values = true, value_parser = count(), help_heading = HEADING)]
    pub slots: Option<u64>,
    /// Sequences decoded together (continuous batching; 1 = one at a time, bit-reproducible) [default: 4]
    #[arg(long = "local-batch", env = "ABLATE_LOCAL_BATCH", value_name = "N", hide_env_values = true, value_parser = count(), help_heading = HEADING)]
    pub batch: Option<u64>,
    /// Reuse the KV cache of a common prompt prefix (on/off) [default: on]
    #[arg(long = "local-prefix-cache", env = "ABLATE_LOCAL_PREFIX_CACHE", value_name = "ON", hide_env_values = true, value_parser = clap::builder::BoolishValueParser::new(), help_heading = HEADING)]
    pub prefix_cache: Option<bool>,
    /// Also read tool calls written as a JSON object in a code fence (on/off) [default: off]
    #[arg(long = "local-fenced-tool-calls", env = "ABLATE_LOCAL_FENCED_TOOL_CALLS", value_name = "ON", hide_env_values = true, value_parser = clap::builder::BoolishValueParser::new(), help_heading = HEADING)]
    pub fenced_tool_calls: Option<bool>,
    /// A Jinja chat template file, run instead of the GGUF's own template
    #[arg(long = "local-template", env = "ABLATE_LOCAL_TEMPLATE", value_name = "FILE", hide_env_values = true, help_heading = HEADING)]
    pub template: Option<std::path::PathBuf>,
    /// Keep llama.cpp's own log on stderr (on/off) [default: off]
    #[arg(long = "local-log", env = "ABLATE_LOCAL_LOG", value_name = "ON", hide_env_values = true, value_parser = clap::builder::BoolishValueParser::new(), help_heading = HEADING)]
    pub log: Option<bool>,
}

fn count() -> clap::builder::RangedU64ValueParser<u64> {
    clap::value_parser!(u64).range(1..=1024)
}

impl EngineFlags {
    /// The settings the flags give.
    pub fn settings(self) -> EngineSettings {
        EngineSettings {
            threads: self.threads,
            batch_threads: self.batch_threads,
            slots: self.slots,
            batch: self.batch,
            prefix_cache: self.prefix_cache,
            fenced_tool_calls: self.fenced_tool_calls,
            template: self.template,
            log: self.log,
        }
    }

    /// The settings from the ABLATE_LOCAL_* environment variables alone
    /// (benchmarks and library callers without a command line).
    pub fn from_env() -> Result<EngineSettings, clap::Error> {
        #[derive(Parser)]
        #[command(no_binary_name = true)]
        struct EnvOnly {
            #[command(flatten)]
            flags: EngineFlags,
        }
        EnvOnly::try_parse_from(std::iter::empty::<String>()).map(|e| e.flags.settings())
    }
}

/// `--engine`'s values: the container engines (`container::EngineKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineArg {
    Docker,
    Podman,
}

impl From<EngineArg> for EngineKind {
    fn from(e: EngineArg) -> Self {
        match e {
            EngineArg::Docker => EngineKind::Docker,
            EngineArg::Podman => EngineKind::Podman,
        }
    }
}

/// `--table`'s values: the export's tables (`export::Table`).
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum TableArg {
    Trials,
    Arms,
    Effects,
}

impl From<TableArg> for ablate_report::export::Table {
    fn from(t: TableArg) -> Self {
        match t {
            TableArg::Trials => ablate_report::export::Table::Trials,
            TableArg::Arms => ablate_report::export::Table::Arms,
            TableArg::Effects => ablate_report::export::Table::Effects,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Parser)]
    #[command(no_binary_name = true)]
    struct Flags {
        #[command(flatten)]
        settings: EngineFlags,
    }

    #[test]
    fn flags_parse_and_bad_values_are_refused() {
        let s = Flags::try_parse_from([
            "--local-threads",
            "3",
            "--local-prefix-cache",
            "off",
            "--local-template",
            "chat.jinja",
        ])
        .unwrap()
        .settings;
        assert_eq!(
            (s.threads, s.prefix_cache, s.template.as_deref()),
            (Some(3), Some(false), Some(std::path::Path::new("chat.jinja")))
        );
        let s = Flags::try_parse_from(["--local-fenced-tool-calls", "1", "--local-log", "no"])
            .unwrap()
            .settings;
        assert_eq!((s.fenced_tool_calls, s.log), (Some(true), Some(false)));
        for bad in [
            ["--local-threads", "0"],
            ["--local-slots", "1025"],
            ["--local-batch", "x"],
            ["--local-log", "maybe"],
        ] {
            assert!(Flags::try_parse_from(bad).is_err(), "{bad:?} accepted");
        }
    }
}
