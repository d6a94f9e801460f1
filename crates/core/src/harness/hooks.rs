//! What each builtin component does in the builtin loops: its hook.
//!
//! A component is declared once in `experiment::components` (its key, values and doc); what it
//! does when an arm turns it on is its `Hook` here. A loop asks the arm's hooks at the points it
//! offers and carries out what they say; it tests no component's flag. Each loop gives a point
//! its own meaning (docs/harbor.md lists the terminal loop's):
//!
//! | point | `agent` (Python tasks) | `terminal` (container tasks) |
//! |---|---|---|
//! | `session_note` | added to a session's first message | the same |
//! | `refuses_repeats` | an edit equal to an earlier one is not written | a command equal to the last one is not run |
//! | `reports_results` | the checks run after each edit, their summary sent | a command's output tail is sent, not only its exit code |
//! | `guards_done` | a "done" stands only when the checks pass | a "done" waits for one verification turn |
//!
//! `tools`, `edit_format` and `instructions` have no hook: they shape every request and reply
//! (what is offered, how a reply is read, what is said), and the loops read their values.

use crate::experiment::{Component, Components};

/// What a loop tells a hook at a session's start.
pub(crate) trait SessionFacts {
    /// The session starting: 1 for the first.
    fn session(&self) -> u32;
    /// What the trial did so far and how it went, as the loop summarises it.
    fn progress(&self) -> String;
}

/// A component's behaviour at each point of a builtin loop; by default it does nothing there.
pub(crate) trait Hook: Sync {
    /// Text added to a session's first message.
    fn session_note(&self, _facts: &dyn SessionFacts) -> Option<String> {
        None
    }
    /// A submission that repeats an earlier one is refused, and the model told so.
    fn refuses_repeats(&self) -> bool {
        false
    }
    /// The outcome of what the model did is sent back to it.
    fn reports_results(&self) -> bool {
        false
    }
    /// The model's "done" does not end the trial at once.
    fn guards_done(&self) -> bool {
        false
    }
}

/// `feedback`.
struct Feedback;
impl Hook for Feedback {
    fn reports_results(&self) -> bool {
        true
    }
}

/// `loop_guard`.
struct LoopGuard;
impl Hook for LoopGuard {
    fn refuses_repeats(&self) -> bool {
        true
    }
}

/// `acceptance`.
struct Acceptance;
impl Hook for Acceptance {
    fn guards_done(&self) -> bool {
        true
    }
}

/// `progress_handoff`: from the second session on, the progress so far.
struct ProgressHandoff;
impl Hook for ProgressHandoff {
    fn session_note(&self, facts: &dyn SessionFacts) -> Option<String> {
        (facts.session() > 1).then(|| facts.progress())
    }
}

/// The hook of component `c` when `on` sets it; None for a component without one. The match
/// names every component, so a new one cannot be left out.
fn hook(c: Component, on: &Components) -> Option<&'static dyn Hook> {
    match c {
        Component::Feedback => on.feedback.then_some(&Feedback),
        Component::LoopGuard => on.loop_guard.then_some(&LoopGuard),
        Component::Acceptance => on.acceptance.then_some(&Acceptance),
        Component::ProgressHandoff => on.progress_handoff.then_some(&ProgressHandoff),
        Component::Tools | Component::EditFormat | Component::Instructions => None,
        #[cfg(test)]
        Component::Reminder => on.reminder.then_some(&super::reminder::Reminder),
    }
}

/// The hooks an arm turns on, in the canonical order of their components.
pub struct Hooks(Vec<&'static dyn Hook>);

impl Hooks {
    pub fn of(components: &Components) -> Hooks {
        Hooks(Component::ALL.iter().filter_map(|&c| hook(c, components)).collect())
    }

    /// Every hook's note for a session's first message, in order.
    pub(crate) fn session_notes(&self, facts: &dyn SessionFacts) -> Vec<String> {
        self.0.iter().filter_map(|h| h.session_note(facts)).collect()
    }

    /// A session's first message with every hook's note after it, each after a blank line.
    pub(crate) fn add_session_notes(&self, first: &mut String, facts: &dyn SessionFacts) {
        for note in self.session_notes(facts) {
            first.push_str("\n\n");
            first.push_str(&note);
        }
    }

    pub(crate) fn refuse_repeats(&self) -> bool {
        self.0.iter().any(|h| h.refuses_repeats())
    }

    pub(crate) fn report_results(&self) -> bool {
        self.0.iter().any(|h| h.reports_results())
    }

    pub(crate) fn guard_done(&self) -> bool {
        self.0.iter().any(|h| h.guards_done())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Facts(u32);
    impl SessionFacts for Facts {
        fn session(&self) -> u32 {
            self.0
        }
        fn progress(&self) -> String {
            "so far".into()
        }
    }

    #[test]
    fn bare_turns_on_no_hook_and_full_one_per_on_off_component() {
        let bare = Hooks::of(&Components::bare());
        assert!(!bare.refuse_repeats() && !bare.report_results() && !bare.guard_done());
        assert!(bare.session_notes(&Facts(2)).is_empty());
        let full = Hooks::of(&Components::full());
        assert!(full.refuse_repeats() && full.report_results() && full.guard_done());
        // progress_handoff from the second session, then the test build's reminder.
        assert_eq!(full.session_notes(&Facts(1)), [super::super::reminder::TEXT]);
        assert_eq!(full.session_notes(&Facts(2)), ["so far", super::super::reminder::TEXT]);
        // One component off turns off its point alone.
        let c = Components { loop_guard: false, ..Components::full() };
        let h = Hooks::of(&c);
        assert!(!h.refuse_repeats() && h.report_results() && h.guard_done());
    }
}
