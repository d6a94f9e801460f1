//! A builtin agent's model calls under the trial's budget: what every builtin
//! loop shares (the one for Python tasks in `agent`, the one for container
//! tasks in `terminal`). It asks the model within what is left of the budget,
//! counts tokens, waits and fingerprints, and says when a limit is reached.

use crate::experiment::config::{Budget, ModelSpec};
use crate::model::{ChatReply, ChatRequest, Message, ModelClient, ModelError, ToolSpec};
use crate::record::delivery::Delivery;
use crate::record::omit::{TracedSoFar, holds_string};
use crate::record::{BudgetLimit, EndReason, Incidents, TokenSource, Tokens, TraceStep};
use std::time::{Duration, Instant};

/// What a trial's model calls need to know.
#[derive(Clone, Copy)]
pub struct CallContext<'a> {
    pub trial_id: &'a str,
    pub attempt: u32,
    pub budget: &'a Budget,
    pub model: &'a ModelSpec,
    pub client: &'a dyn ModelClient,
    pub seed: u64,
    /// The arm's prompt file: the text the assistant's turn starts with, and the stop sequences.
    pub prefill: Option<&'a str>,
    pub stop: &'a [String],
}

/// What a builtin loop measured, in the record's terms.
#[derive(Debug, Clone)]
pub struct AgentOutcome {
    pub end_reason: EndReason,
    pub steps: u32,
    pub sessions: u32,
    pub tokens: Tokens,
    /// Calls whose tokens were estimated (no usable usage from the provider).
    pub tokens_estimated_calls: u32,
    /// Time of the loop minus rate-limit waits.
    pub working: Duration,
    pub wait: Duration,
    pub cost_usd: Option<f64>,
    pub incidents: Incidents,
    pub error: Option<String>,
    /// OpenAI system fingerprints seen in replies.
    pub fingerprints: Vec<String>,
    /// What the model calls asked and what reached the model (None: not recorded).
    pub delivery: Option<Delivery>,
}

pub struct Calls<'a> {
    ctx: CallContext<'a>,
    start: Instant,
    wait: Duration,
    tokens: Tokens,
    estimated_calls: u32,
    fingerprints: Vec<String>,
    delivery: Delivery,
}

impl<'a> Calls<'a> {
    pub fn new(ctx: CallContext<'a>) -> Calls<'a> {
        Calls {
            ctx,
            start: Instant::now(),
            wait: Duration::ZERO,
            tokens: Tokens::default(),
            estimated_calls: 0,
            fingerprints: Vec::new(),
            delivery: Delivery::default(),
        }
    }

    /// Time of the loop so far, less the waits the client reported.
    pub fn working(&self) -> Duration {
        self.start.elapsed().saturating_sub(self.wait)
    }

    pub fn tokens(&self) -> Tokens {
        self.tokens
    }

    /// The limit that stops the loop before its next call (`steps` calls made), if any.
    pub(crate) fn budget_stop(&self, steps: u32) -> Option<BudgetLimit> {
        let b = self.ctx.budget;
        if steps >= b.max_steps {
            return Some(BudgetLimit::Steps);
        }
        if self.tokens.total() >= b.max_total_tokens {
            return Some(BudgetLimit::TotalTokens);
        }
        if self.working().as_secs_f64() >= b.max_working_seconds {
            return Some(BudgetLimit::WorkingSeconds);
        }
        if let (Some(max), Some(c)) =
            (b.max_cost_usd, self.tokens.cost(self.ctx.model.price.as_ref()))
            && c >= max
        {
            return Some(BudgetLimit::Cost);
        }
        None
    }

    /// What is left of the budget after `steps` calls: steps, tokens, seconds.
    pub(crate) fn remaining(&self, steps: u32) -> (u32, u64, f64) {
        let b = self.ctx.budget;
        (
            b.max_steps.saturating_sub(steps),
            b.max_total_tokens.saturating_sub(self.tokens.total()),
            (b.max_working_seconds - self.working().as_secs_f64()).max(0.0),
        )
    }

    /// Ask the model, within what is left of the budget. The step's trace line
    /// and the reply; or the line, the error and how it ends the trial.
    pub(crate) async fn call_model(
        &mut self,
        messages: &[Message],
        tool_specs: &[ToolSpec],
        steps: u32,
        sessions: u32,
        in_trace: &mut TracedSoFar,
    ) -> Result<(TraceStep, ChatReply), (TraceStep, String, EndReason)> {
        let ctx = self.ctx;
        let remaining_time = Duration::from_secs_f64(
            (ctx.budget.max_working_seconds - self.working().as_secs_f64()).max(0.0),
        );
        let model_timeout = Duration::from_secs_f64(ctx.model.request_timeout_seconds);
        let limited_by_budget = remaining_time < model_timeout;
        let remaining_tokens = ctx.budget.max_total_tokens.saturating_sub(self.tokens.total());
        let request = ChatRequest {
            messages: messages.to_vec(),
            tools: tool_specs.to_vec(),
            max_tokens: (ctx.budget.max_output_tokens_per_step as u64).min(remaining_tokens).max(1)
                as u32,
            temperature: ctx.model.temperature,
            top_p: ctx.model.top_p,
            seed: ctx.seed,
            timeout: remaining_time.min(model_timeout),
            prefill: ctx.prefill.map(str::to_string),
            stop: ctx.stop.to_vec(),
            ..ChatRequest::default()
        };
        let operation_id = format!("{}-{}-s{}", ctx.trial_id, ctx.attempt, steps);
        self.delivery.merge(&crate::gateway::delivered::of_request(&request, ctx.client));
        let outcome = ctx.client.chat(&request, operation_id).await;
        self.wait += outcome.wait;
        let mut step = TraceStep {
            request_attempts: outcome.attempts,
            reply: outcome.reply_body.clone(),
            latency_ms: outcome.latency.as_millis() as u64,
            rate_limit_wait_ms: outcome.wait.as_millis() as u64,
            ..TraceStep::blank(
                ctx.trial_id,
                ctx.attempt,
                steps,
                sessions,
                outcome.operation_id.clone(),
            )
        };
        (step.request, step.request_omits) = in_trace.request(outcome.request_body);
        let reply = match outcome.result {
            Ok(r) => r,
            Err(e) => {
                step.error = Some(e.to_string());
                let end = match e {
                    ModelError::Timeout(_) if limited_by_budget => {
                        EndReason::Budget { limit: BudgetLimit::WorkingSeconds }
                    }
                    ModelError::Timeout(_) => EndReason::RequestTimeout,
                    _ => EndReason::ProviderError,
                };
                return Err((step, e.to_string(), end));
            }
        };
        self.tokens.add(reply.usage);
        step.tokens = reply.usage;
        step.tokens_counted = reply.token_source;
        if reply.token_source == TokenSource::Estimated {
            self.estimated_calls += 1;
        }
        step.notes.extend(reply.usage_note.clone());
        // The text is kept apart only when the reply body does not hold it as is.
        if !reply.text.is_empty()
            && !step.reply.as_ref().is_some_and(|b| holds_string(b, &reply.text))
        {
            step.reply_text = Some(reply.text.clone());
        }
        step.finish_reason = reply.finish_reason.clone();
        reply.note_fingerprint(&mut self.fingerprints);
        Ok((step, reply))
    }

    /// The loop's outcome once it has ended.
    pub fn outcome(
        self,
        end_reason: EndReason,
        steps: u32,
        sessions: u32,
        incidents: Incidents,
        error: Option<String>,
    ) -> AgentOutcome {
        AgentOutcome {
            end_reason,
            steps,
            sessions,
            tokens: self.tokens,
            tokens_estimated_calls: self.estimated_calls,
            working: self.working(),
            wait: self.wait,
            cost_usd: self.tokens.cost(self.ctx.model.price.as_ref()),
            incidents,
            error,
            fingerprints: self.fingerprints,
            delivery: Some(self.delivery),
        }
    }
}
