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
    use crate::experiment::config::{Experiment, load_str};
    use crate::experiment::matrix::ComparisonKind;
    use crate::experiment::{Component, Components};
    use crate::harness::agent::{TrialContext, run_agent};
    use crate::model::{BoxFuture, CallOutcome, ChatRequest, Message, ModelClient, ModelError};
    use crate::record::Tokens;
    use crate::sandbox::Sandbox;
    use std::sync::Mutex;

    fn experiment(arms: &str) -> Experiment {
        let root = crate::repo_root().join("tests/fixtures/suites/tiny");
        let text = format!(
            "[experiment]\nname = \"r\"\nsuite = \"{}\"\ntrials = 1\nseed = 1\n\n[budget]\nmax_steps = 4\nmax_output_tokens_per_step = 100\nmax_total_tokens = 10000\nmax_working_seconds = 60\n\n[[models]]\nname = \"m\"\nprovider = \"openai\"\nmodel = \"m\"\nendpoint = \"http://127.0.0.1:1\"\ntemperature = 0.0\n\n{arms}",
            root.display()
        );
        load_str(&root.join("exp.toml"), &text).unwrap()
    }

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

    /// Answers DONE and keeps each request's messages.
    struct Recorder(Mutex<Vec<Vec<Message>>>);

    impl ModelClient for Recorder {
        fn chat<'a>(
            &'a self,
            req: &'a ChatRequest,
            operation_id: String,
        ) -> BoxFuture<'a, CallOutcome> {
            self.0.lock().unwrap().push(req.messages.clone());
            Box::pin(async move {
                CallOutcome::scripted(
                    operation_id,
                    "DONE",
                    Tokens { input: 1, output: 1, cached: 0 },
                )
            })
        }

        fn identity(&self) -> BoxFuture<'_, Result<Option<String>, ModelError>> {
            Box::pin(async { Ok(None) })
        }
    }

    /// The first request's task message of a trial of `components` on add-two.
    async fn task_message(components: &Components) -> String {
        let exp = experiment("[arms.b]\n");
        let task = crate::suite::load(&exp.suite_path).unwrap().task("add-two").unwrap().clone();
        let sandbox = Sandbox::create(&task).unwrap();
        let client = Recorder(Mutex::new(Vec::new()));
        let prompts = crate::experiment::instructions::ArmPrompts::builtin();
        let ctx = TrialContext {
            trial_id: "t",
            attempt: 1,
            task: &task,
            components,
            instructions: &prompts,
            budget: &exp.budget,
            settings: &exp.harness,
            model: &exp.models[0],
            client: &client,
            seed: 1,
        };
        run_agent(&ctx, &sandbox, &mut |_| {}).await;
        let first = client.0.lock().unwrap()[0].clone();
        first.last().unwrap().content.clone()
    }

    #[tokio::test]
    async fn the_loop_runs_its_hook_when_the_arm_turns_it_on() {
        let on = task_message(&Components { reminder: true, ..Components::bare() }).await;
        let off = task_message(&Components::bare()).await;
        assert_eq!(on, format!("{off}\n\n{TEXT}"));
        assert!(!off.contains(TEXT));
    }
}
