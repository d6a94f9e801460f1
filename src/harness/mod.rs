//! The harness: the components an arm sets and the agent loop that applies them.

pub mod agent;
pub mod components;
pub mod edit;
pub mod prompts;
pub mod tools;

pub use components::{Component, ComponentDiff, Components, EditFormat, Instructions};
