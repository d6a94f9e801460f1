//! A model call's delivery record (`record::delivery`): each model-facing
//! field as the harness asked for it and as the provider's request carried it
//! to the model. Every key of a request takes one of four paths: forwarded
//! (asked and reached alike), fixed by the experiment (sampling, the output
//! cap, the seed, the model), refused by name before any model call, or
//! recorded here as asked and not reached (the keys the gateway drops).

use super::wire::Asked;
use crate::model::{ChatRequest, Message, ModelClient, Role, ToolSpec};
use crate::record::delivery::{Delivery, FIXED, shown, text_shown};
use serde_json::Value;

/// Keys that carry bookkeeping (session and cache ids, client metadata) that
/// differs in every session and asks nothing of the model: recorded by
/// presence only, so two arms never differ in them by chance.
pub(crate) const BOOKKEEPING: [&str; 10] = [
    "prompt_cache_key",
    "client_metadata",
    "user",
    "metadata",
    "safety_identifier",
    "service_tier",
    "store",
    "include",
    "stream_options",
    "keep_alive",
];

/// A call the gateway forwarded: what the harness asked (`asked`, read from
/// `body`) and what the provider's request (`sent`) carried to the model.
pub fn observe(
    asked: &Asked,
    body: &Value,
    sent: &ChatRequest,
    client: &dyn ModelClient,
    model: &str,
) -> Delivery {
    let mut d = Delivery::default();
    d.note("system", system(&asked.messages), system(&sent.messages));
    d.note("tools", body.get("tools").filter(|t| !t.is_null()).map(shown), tools(&sent.tools));
    d.note("model", asked.model.as_ref().map(shown), Some(model.to_string()));
    d.note(
        "temperature",
        asked.temperature.as_ref().map(shown),
        Some(sent.temperature.to_string()),
    );
    d.note("top_p", asked.top_p.as_ref().map(shown), Some(sent.top_p.to_string()));
    d.note("max_tokens", asked.max_tokens.as_ref().map(|(_, v)| shown(v)), Some(FIXED.into()));
    d.note("seed", asked.seed.as_ref().map(shown), Some(FIXED.into()));
    note_forwarded(&mut d, &asked_view(asked), sent, client);
    for key in &asked.ignored {
        let value = body.pointer(&format!("/{}", key.replace('.', "/")));
        let asked = match value {
            _ if BOOKKEEPING.contains(&key.as_str()) => value.map(|_| "(set)".to_string()),
            v => v.map(shown),
        };
        d.note(key, asked, None);
    }
    if let Some(v) = body.get("parallel_tool_calls").filter(|v| !v.is_null()) {
        d.note("parallel_tool_calls", Some(shown(v)), None);
    }
    d
}

/// A call of the builtin loop: asked is what it sent, less what the provider
/// does not carry to the model.
pub(crate) fn of_request(sent: &ChatRequest, client: &dyn ModelClient) -> Delivery {
    let mut d = Delivery::default();
    d.note("system", system(&sent.messages), system(&sent.messages));
    d.note("tools", tools(&sent.tools), tools(&sent.tools));
    note_forwarded(&mut d, sent, sent, client);
    d
}

/// The settings forwarded as asked: stop strings, tool choice, response
/// format, and the part of the reasoning setting the provider carries.
fn note_forwarded(d: &mut Delivery, asked: &ChatRequest, sent: &ChatRequest, c: &dyn ModelClient) {
    let stop = |r: &ChatRequest| (!r.stop.is_empty()).then(|| shown(&serde_json::json!(r.stop)));
    d.note("stop", stop(asked), stop(sent));
    let choice = |r: &ChatRequest| shown(&r.tool_choice.openai());
    d.note("tool_choice", Some(choice(asked)), Some(choice(sent)));
    let format = |r: &ChatRequest| r.response_format.as_ref().map(|f| shown(&f.openai()));
    d.note("response_format", format(asked), format(sent));
    let reached = sent.reasoning.as_ref().and_then(|r| c.delivers_reasoning(r));
    d.note(
        "reasoning",
        asked.reasoning.as_ref().map(ToString::to_string),
        reached.map(|r| r.to_string()),
    );
}

/// The forwarded settings of `asked` in the provider-neutral form, for `note_forwarded`.
fn asked_view(asked: &Asked) -> ChatRequest {
    ChatRequest {
        stop: asked.stop.clone(),
        tool_choice: asked.tool_choice.clone(),
        response_format: asked.response_format.clone(),
        reasoning: asked.reasoning.clone(),
        ..ChatRequest::default()
    }
}

/// The system messages' text (None: there is none).
fn system(messages: &[Message]) -> Option<String> {
    let texts: Vec<&str> =
        messages.iter().filter(|m| m.role == Role::System).map(|m| m.content.as_str()).collect();
    (!texts.is_empty()).then(|| text_shown(&texts.join("\n")))
}

fn tools(tools: &[ToolSpec]) -> Option<String> {
    let specs: Vec<Value> = tools.iter().map(|t| serde_json::json!(t.as_function())).collect();
    (!specs.is_empty()).then(|| shown(&Value::Array(specs)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::adapter::read_request;
    use crate::gateway::wire::Api;
    use crate::model::{BoxFuture, CallOutcome, Reasoning};
    use serde_json::json;

    /// A provider that carries every effort (as OpenAI's chat API does), or none.
    struct Provider(bool);
    impl ModelClient for Provider {
        fn chat<'a>(&'a self, _: &'a ChatRequest, _: String) -> BoxFuture<'a, CallOutcome> {
            unreachable!()
        }
        fn identity(&self) -> BoxFuture<'_, Result<Option<String>, crate::model::ModelError>> {
            unreachable!()
        }
        fn delivers_reasoning(&self, r: &Reasoning) -> Option<Reasoning> {
            self.0.then(|| r.clone())
        }
    }

    fn seen(body: Value, provider: bool) -> Delivery {
        let asked = read_request(Api::Responses, &body).unwrap();
        let sent = ChatRequest {
            messages: asked.messages.clone(),
            tools: asked.tools.clone(),
            temperature: 0.0,
            top_p: 1.0,
            reasoning: asked.reasoning.clone(),
            ..ChatRequest::default()
        };
        observe(&asked, &body, &sent, &Provider(provider), "qwen")
    }

    #[test]
    fn an_effort_the_provider_drops_is_asked_and_not_reached() {
        let body = json!({"model": "gpt-5", "input": "hi", "reasoning": {"effort": "high", "summary": "auto"},
            "prompt_cache_key": "0199-a", "temperature": 0.7, "parallel_tool_calls": true});
        let d = seen(body.clone(), false);
        let f = |k: &str| {
            let s = &d.fields[k];
            (
                s.asked.iter().cloned().collect::<Vec<_>>(),
                s.reached.iter().cloned().collect::<Vec<_>>(),
            )
        };
        let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(f("reasoning"), (v(&["effort=high"]), v(&["(not set)"])));
        assert_eq!(f("reasoning.summary"), (v(&["auto"]), v(&["(not set)"])));
        // A session id is kept by presence only.
        assert_eq!(f("prompt_cache_key"), (v(&["(set)"]), v(&["(not set)"])));
        assert_eq!(f("temperature"), (v(&["0.7"]), v(&["0"])));
        assert_eq!(f("model"), (v(&["gpt-5"]), v(&["qwen"])));
        assert_eq!(f("parallel_tool_calls"), (v(&["true"]), v(&["(not set)"])));
        let d = seen(body, true);
        assert_eq!(d.fields["reasoning"].reached.iter().next().unwrap(), "effort=high");
    }
}
