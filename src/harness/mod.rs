//! The harness: the components an arm sets and the agent loop that applies them.

pub mod components;

pub use components::{Component, ComponentDiff, Components, EditFormat, Instructions};
