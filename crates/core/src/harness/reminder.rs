//! `reminder`: a component of the test build only, added as ARCHITECTURE.md's "Adding a
//! component" says (its line in `builtin_components!`, its hook in `hooks::hook`, this file), to
//! show that nothing else needs to change: the config reads its key, the sweeps ablate it, the
//! records carry it, and the loop runs its hook.

use super::hooks::{Hook, SessionFacts};

/// What the reminder adds to each session's first message.
pub const TEXT: &str = "Reminder: send the whole file in one fenced block.";

pub struct Reminder;

impl Hook for Reminder {
    fn session_note(&self, _facts: &dyn SessionFacts) -> Option<String> {
        Some(TEXT.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::instructions::ArmPrompts;
    use crate::experiment::matrix::ComparisonKind;
    use crate::experiment::{Component, Components};
    use crate::harness::agent::tests::{experiment, first_request};

    #[test]
    fn the_config_reads_its_key_and_the_sweeps_ablate_it() {
        let exp = experiment(
            "[arms.full]\nbase = \"full\"\n\n[arms.on]\nreminder = true\n\n[matrix.leave_one_out]\nfrom = \"full\"\n",
        );
        let arm = |name: &str| {
            exp.arms.iter().find(|a| a.name == name).unwrap().settings.builtin().unwrap().clone()
        };
        assert_eq!(arm("on"), Components { reminder: true, ..Components::bare() });
        assert!(arm("full").reminder, "the full preset turns it on");
        // Leave-one-out from full: one arm per component full and bare set apart, this one too.
        let minus = arm("full-minus-reminder");
        assert_eq!(minus, Components { reminder: false, ..Components::full() });
        let cmp = exp.comparisons.iter().find(|c| c.control == "full-minus-reminder").unwrap();
        assert!(matches!(cmp.kind, ComparisonKind::Ablation { .. }));
        assert_eq!(cmp.differs.len(), 1);
        assert_eq!(
            (cmp.differs[0].component.as_str(), cmp.differs[0].control.as_str()),
            ("reminder", "false")
        );
        assert_eq!(Component::parse("reminder").unwrap(), Component::Reminder);
        assert!(Components::bare().summary().ends_with("reminder=off"));
    }

    /// The first request's task message of a trial of `components` on add-two.
    async fn task_message(components: &Components) -> String {
        let (messages, _) = first_request(&ArmPrompts::builtin(), components).await;
        messages.last().unwrap().content.clone()
    }

    #[tokio::test]
    async fn the_loop_runs_its_hook_when_the_arm_turns_it_on() {
        let on = task_message(&Components { reminder: true, ..Components::bare() }).await;
        let off = task_message(&Components::bare()).await;
        assert_eq!(on, format!("{off}\n\n{TEXT}"));
        assert!(!off.contains(TEXT));
    }
}
