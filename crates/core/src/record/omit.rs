//! Leaving out of a trace line what earlier lines of the trace already hold
//! (docs/records.md, "traces"): shared by the builtin agent loop and the
//! gateway of external harnesses.

use super::RequestOmits;
use crate::digest::sha256_hex;

/// What the trace lines of the current session already hold.
#[derive(Default)]
pub(crate) struct TracedSoFar {
    /// Leading messages of the next request that earlier lines hold.
    pub messages: usize,
    /// The previous request's `tools`.
    pub tools: Option<serde_json::Value>,
    /// The previous request's rendered prompt (local provider).
    pub prompt: Option<String>,
}

impl TracedSoFar {
    /// The request body for the trace and what it leaves out: the leading
    /// messages earlier lines hold, `tools` equal to the previous step's, and
    /// the previous step's prompt when this one extends it.
    pub fn request(
        &mut self,
        mut body: serde_json::Value,
    ) -> (serde_json::Value, Option<RequestOmits>) {
        use serde_json::Value;
        let mut omits = RequestOmits::default();
        if let Some(Value::Array(list)) = body.get_mut("messages") {
            let n = self.messages.min(list.len());
            if n > 0 {
                let earlier: Vec<Value> = list.drain(..n).collect();
                omits.messages = n;
                omits.sha256 = Some(sha256_hex(
                    serde_json::to_string(&earlier).unwrap_or_default().as_bytes(),
                ));
            }
        }
        if let Some(Value::String(prompt)) = body.get_mut("prompt") {
            let full = std::mem::take(prompt);
            match self.prompt.as_deref() {
                Some(prev) if !prev.is_empty() && full.starts_with(prev) => {
                    omits.prompt_bytes = prev.len();
                    omits.sha256 = Some(sha256_hex(prev.as_bytes()));
                    *prompt = full[prev.len()..].to_string();
                }
                _ => *prompt = full.clone(),
            }
            self.prompt = Some(full);
        }
        if let Some(map) = body.as_object_mut() {
            match map.get("tools") {
                Some(t) if self.tools.as_ref() == Some(t) => {
                    map.remove("tools");
                    omits.tools = true;
                }
                Some(t) => self.tools = Some(t.clone()),
                None => {}
            }
        }
        let any = omits.messages > 0 || omits.prompt_bytes > 0 || omits.tools;
        (body, any.then_some(omits))
    }
}

/// Whether `v` holds the string `s` as one of its values.
pub(crate) fn holds_string(v: &serde_json::Value, s: &str) -> bool {
    match v {
        serde_json::Value::String(x) => x == s,
        serde_json::Value::Array(a) => a.iter().any(|x| holds_string(x, s)),
        serde_json::Value::Object(o) => o.values().any(|x| holds_string(x, s)),
        _ => false,
    }
}
