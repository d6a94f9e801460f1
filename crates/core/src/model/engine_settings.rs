//! Settings of the embedded model's engine (the `local` provider) that shape
//! speed, not the experiment. The command line gives them as `ablate run`
//! flags, each also read from its ABLATE_LOCAL_* environment variable (the
//! root package's `flags::EngineFlags`). Unset means the engine's default
//! (`model::local::LocalOptions`).

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineSettings {
    /// CPU threads while generating, and for prompts unless --local-batch-threads [default: every core]
    pub threads: Option<u64>,
    /// CPU threads while evaluating a prompt [default: --local-threads]
    pub batch_threads: Option<u64>,
    /// Conversations kept in the KV cache at once [default: 8]
    pub slots: Option<u64>,
    /// Sequences decoded together (continuous batching; 1 = one at a time, bit-reproducible) [default: 4]
    pub batch: Option<u64>,
    /// Reuse the KV cache of a common prompt prefix (on/off) [default: on]
    pub prefix_cache: Option<bool>,
    /// Also read tool calls written as a JSON object in a code fence (on/off) [default: off]
    pub fenced_tool_calls: Option<bool>,
    /// A Jinja chat template file, run instead of the GGUF's own template
    pub template: Option<std::path::PathBuf>,
    /// Keep llama.cpp's own log on stderr (on/off) [default: off]
    pub log: Option<bool>,
}
