//! The gateway's HTTP server: one connection task per client, the router (a
//! path and a method to a route), the credential in any form a client sends it,
//! the model-listing endpoints, and the response helpers every handler shares.

use super::http::{Resp, json_response, respond};
use super::meter::TrialMeter;
use super::wire::{self, Api, BadRequest};
use super::{
    EXEC_PATH, MAX_REQUEST_BYTES, OLLAMA_VERSION, anthropic, chat, embeddings, exec, gemini,
};
use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Serve `meter`'s trial on `listener` until this future is dropped (or its
/// task aborted); open connections end with it.
pub async fn serve(listener: tokio::net::TcpListener, meter: Arc<TrialMeter>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            // Out of descriptors and the like: pause rather than spin.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let meter = meter.clone();
        connections.spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let meter = meter.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(meter, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                .await;
        });
    }
}

enum Route {
    Chat(Api),
    /// A Gemini call, and the model its path names.
    Gemini(Api, String),
    GeminiCount(String),
    Models,
    Model(String),
    Tags,
    Show,
    Ps,
    Version,
    Root,
    Exec,
    CountTokens,
    Embeddings(embeddings::EmbedApi),
    NotFound,
}

/// `/k/<key>/rest` -> (Some(key), "/rest"); other paths are left as they are.
pub(super) fn split_key(path: &str) -> (Option<&str>, &str) {
    if let Some(after) = path.strip_prefix("/k/") {
        return match after.find('/') {
            Some(i) => (Some(&after[..i]), &after[i..]),
            None => (Some(after), "/"),
        };
    }
    (None, path)
}

/// Equal strings, in time independent of where they differ.
pub(super) fn same_key(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The credential a request presents, in any of the forms the SDKs send:
/// `Authorization: Bearer` (any case), `x-api-key` (Anthropic), `api-key` (Azure).
pub(super) fn presented_keys(h: &hyper::HeaderMap) -> Vec<&str> {
    let mut keys = Vec::new();
    for v in h.get_all(hyper::header::AUTHORIZATION) {
        if let Ok(v) = v.to_str()
            && let Some((scheme, key)) = v.trim().split_once(char::is_whitespace)
            && scheme.eq_ignore_ascii_case("bearer")
        {
            keys.push(key.trim());
        }
    }
    for name in ["x-api-key", "api-key", "x-goog-api-key"] {
        keys.extend(h.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::trim));
    }
    keys
}

pub(super) async fn handle(meter: Arc<TrialMeter>, req: Request<Incoming>) -> Resp {
    let full_path = req.uri().path().to_string();
    let (path_key, path) = split_key(&full_path);
    let path = path.trim_end_matches('/');
    let path = if path.is_empty() { "/" } else { path };
    let authorized =
        path_key.is_some_and(|k| same_key(k, &meter.key)) || presents_key(&req, &meter);
    let route = route_of(req.method(), path, meter.exec.get().is_some());
    // The API whose error form a refusal takes.
    let api = match &route {
        Route::Chat(api) | Route::Gemini(api, _) => *api,
        Route::GeminiCount(_) => Api::Gemini,
        _ if path.starts_with("/v1/messages") => Api::Anthropic,
        _ if path.starts_with("/api/") => Api::Ollama,
        _ => Api::OpenAi,
    };
    let (method, shown_path) = (req.method().clone(), path.to_string());
    let shown = format!("{method} {shown_path}");
    // Reading the body of a chat call even when refused: the trace holds it.
    let body = match Limited::new(req.into_body(), MAX_REQUEST_BYTES).collect().await {
        Ok(b) => Ok(b.to_bytes()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => Err(true),
        Err(_) => Err(false),
    };
    // Chat calls are traced (refused ones too) by their handler.
    let m = meter.clone();
    match route {
        Route::Chat(api) => {
            return spawned(api, chat::chat_request(m, api, None, authorized, body, shown)).await;
        }
        Route::Gemini(api, model) => {
            let call = chat::chat_request(m, api, Some(model), authorized, body, shown);
            return spawned(api, call).await;
        }
        _ => {}
    }
    // Every other request refused is traced too: a harness that only ever
    // calls an endpoint the gateway lacks shows it in the trace.
    let refused = |status: StatusCode, kind: &str, message: String| -> Resp {
        let v = wire::error_body(api, kind, &message, None);
        meter.trace_refusal(&method, &shown_path, &body, v.clone());
        json_response(status, &v)
    };
    if !authorized {
        return refused(StatusCode::UNAUTHORIZED, "unauthorized", "missing or wrong key".into());
    }
    match route {
        Route::Exec => spawned(api, exec::exec_request(m, body)).await,
        Route::Embeddings(e) => {
            spawned(api, embeddings::embeddings_request(m, e, body, shown)).await
        }
        route => match answered_here(&meter, route, &body) {
            Ok(resp) => resp,
            Err(Refused::NotFound(None)) => refused(
                StatusCode::NOT_FOUND,
                "not_found",
                format!(
                    "no such endpoint: {shown} (docs/external-harness.md lists the gateway's endpoints)"
                ),
            ),
            Err(Refused::NotFound(Some(m))) => refused(StatusCode::NOT_FOUND, "not_found", m),
            Err(Refused::Bad(m)) => refused(StatusCode::BAD_REQUEST, "invalid_request_error", m),
        },
    }
}

/// Whether the request presents the trial's key in a header or (Google's
/// clients) as the `key` query parameter.
fn presents_key(req: &Request<Incoming>, meter: &TrialMeter) -> bool {
    let query_key =
        req.uri().query().and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("key=")));
    query_key.is_some_and(|k| same_key(k, &meter.key))
        || presented_keys(req.headers()).iter().any(|k| same_key(k, &meter.key))
}

/// The route of a method and a path (the key prefix removed). The exec
/// endpoint exists only where `exec_open`.
fn route_of(method: &Method, path: &str, exec_open: bool) -> Route {
    if let Some((model, m)) = gemini::route(path).filter(|_| method == Method::POST) {
        return match m {
            gemini::Method::Generate => Route::Gemini(Api::Gemini, model),
            gemini::Method::Stream => Route::Gemini(Api::GeminiStream, model),
            gemini::Method::CountTokens => Route::GeminiCount(model),
        };
    }
    match (method, path) {
        (&Method::POST, "/v1/chat/completions" | "/chat/completions") => Route::Chat(Api::OpenAi),
        (&Method::POST, "/v1/responses" | "/responses") => Route::Chat(Api::Responses),
        (&Method::POST, "/v1/messages") => Route::Chat(Api::Anthropic),
        (&Method::POST, "/v1/messages/count_tokens") => Route::CountTokens,
        (&Method::POST, "/v1/completions" | "/completions") => Route::Chat(Api::Completions),
        (&Method::POST, "/api/chat") => Route::Chat(Api::Ollama),
        (&Method::POST, "/api/generate") => Route::Chat(Api::Generate),
        (&Method::POST, "/v1/embeddings" | "/embeddings") => {
            Route::Embeddings(embeddings::EmbedApi::OpenAi)
        }
        (&Method::POST, "/api/embed") => Route::Embeddings(embeddings::EmbedApi::Ollama),
        (&Method::POST, "/api/embeddings") => Route::Embeddings(embeddings::EmbedApi::OllamaLegacy),
        (&Method::GET, "/v1/models" | "/models") => Route::Models,
        (&Method::GET, p) if p.starts_with("/v1/models/") => {
            Route::Model(p["/v1/models/".len()..].to_string())
        }
        (&Method::GET, "/api/tags") => Route::Tags,
        (&Method::POST, "/api/show") => Route::Show,
        (&Method::GET, "/api/ps") => Route::Ps,
        (&Method::GET, "/api/version") => Route::Version,
        (&Method::GET | &Method::HEAD, "/") => Route::Root,
        (&Method::POST, EXEC_PATH) if exec_open => Route::Exec,
        _ => Route::NotFound,
    }
}

/// A handler run in its own task: a harness hanging up mid-call does not
/// cancel a call the model is already answering; it is still counted and traced.
async fn spawned(api: Api, handler: impl Future<Output = Resp> + Send + 'static) -> Resp {
    match tokio::spawn(handler).await {
        Ok(resp) => resp,
        Err(e) => {
            let message = format!("the gateway failed: {e}");
            let v = wire::error_body(api, "internal_error", &message, None);
            json_response(StatusCode::INTERNAL_SERVER_ERROR, &v)
        }
    }
}

/// Why a request answered here is refused: no such endpoint (or model), or a bad body.
enum Refused {
    NotFound(Option<String>),
    Bad(String),
}

/// The endpoints answered without a model call: the model lists, Ollama's
/// show, ps and version, the token counts.
fn answered_here(
    meter: &TrialMeter,
    route: Route,
    body: &Result<Bytes, bool>,
) -> Result<Resp, Refused> {
    let name = &meter.model.name;
    let context = meter.model.context_tokens;
    let details = json!({"parent_model": "", "format": "gguf", "family": "gateway", "families": ["gateway"], "parameter_size": "", "quantization_level": ""});
    let ok = |v: &Value| Ok(json_response(StatusCode::OK, v));
    match route {
        Route::Models => ok(&json!({"object": "list", "data": [model_object(name)]})),
        Route::Model(id) => {
            let ours = id == *name
                || id == meter.model.model
                || id.strip_suffix(":latest") == Some(name.as_str());
            if !ours {
                let m = format!("the model `{id}` does not exist; this trial's model is `{name}`");
                return Err(Refused::NotFound(Some(m)));
            }
            ok(&model_object(&id))
        }
        Route::Tags => ok(
            &json!({"models": [{"name": name, "model": name, "modified_at": "1970-01-01T00:00:00Z", "size": 0, "digest": "", "details": details}]}),
        ),
        Route::Show => {
            let mut info = json!({"general.architecture": "gateway"});
            if let Some(n) = context {
                info["gateway.context_length"] = json!(n);
            }
            let parameters = context.map(|n| format!("num_ctx {n}")).unwrap_or_default();
            ok(
                &json!({"modelfile": "", "parameters": parameters, "template": "{{ .Tools }}", "details": details,
                "model_info": info, "capabilities": ["completion", "tools"], "modified_at": "1970-01-01T00:00:00Z"}),
            )
        }
        Route::Ps => {
            let mut m = json!({"name": name, "model": name, "size": 0, "digest": "", "details": details, "expires_at": "2100-01-01T00:00:00Z", "size_vram": 0});
            if let Some(n) = context {
                m["context_length"] = json!(n);
            }
            ok(&json!({"models": [m]}))
        }
        Route::CountTokens => {
            ok(&count_tokens(body, anthropic::count_tokens).map_err(Refused::Bad)?)
        }
        Route::GeminiCount(model) => {
            ok(&count_tokens(body, |v| gemini::count_tokens(v, &model)).map_err(Refused::Bad)?)
        }
        Route::Version => ok(&json!({"version": OLLAMA_VERSION})),
        Route::Root => Ok(respond(StatusCode::OK, "text/plain", "Ollama is running")),
        Route::Chat(_)
        | Route::Gemini(..)
        | Route::Exec
        | Route::Embeddings(_)
        | Route::NotFound => Err(Refused::NotFound(None)),
    }
}

/// A token count of a request body (`count`: the API's); Err is the message of a 400.
pub(super) fn count_tokens(
    body: &Result<Bytes, bool>,
    count: impl FnOnce(&Value) -> Result<Value, BadRequest>,
) -> Result<Value, String> {
    let v = body.as_ref().ok().and_then(|b| super::http::bounded_json(b).ok());
    count(&v.ok_or("the request body is not JSON")?).map_err(|e| e.to_string())
}

pub(super) fn model_object(id: &str) -> Value {
    json!({"id": id, "object": "model", "created": 0, "owned_by": "ablate"})
}
