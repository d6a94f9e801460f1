//! The harness: the agent loop that applies an arm's components
//! (`experiment::components`), or an external harness's trial (`external`).

pub mod agent;
pub mod calls;
pub mod edit;
pub mod external;
pub mod hooks;
pub mod prompts;
#[cfg(test)]
mod reminder;
pub mod terminal;
pub mod tools;
