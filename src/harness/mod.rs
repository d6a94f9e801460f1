//! The harness: the components an arm sets and the agent loop that applies
//! them; or an external harness that declares its own components (`kind`).

pub mod agent;
pub mod components;
pub mod edit;
pub mod external;
pub mod kind;
pub mod prompts;
pub mod tools;

pub use components::{ArmSettings, Component, ComponentDiff, ComponentValue, Components, EditFormat, Instructions, value_text};
pub use kind::{DeclaredComponent, ExternalHarness, HarnessKind};
