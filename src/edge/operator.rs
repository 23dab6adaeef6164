//! The operator's pages beside the proxy, served only when a token is
//! configured: the stats (this isolate, JSON) and the metrics (OpenMetrics
//! or Prometheus text; this isolate, or the PoP from its aggregator with
//! `?scope=pop`), both behind the bearer token; and the dashboard, a page
//! that asks for the token and reads the metrics.

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::LocalBoxFuture;
use futures::FutureExt;

use worker::js_sys::{ArrayBuffer, WebAssembly};
use worker::wasm_bindgen::JsCast;
use worker::{web_sys, Env, Method};

use super::clock::now_ms;
use super::env_vars::{ASSETS_BINDING, POP_BINDING};
use super::isolate::Shared;
use super::pop::colo;
use super::pop::link::ask;
use super::reply::{self, Failure};
use hedgehog_core::edge::{Format, OperatorPage};

/// The dashboard: one self-contained page (uPlot and the page's script and
/// styles inline; `node scripts/build-dashboard.mjs` writes it), a static
/// asset of the Worker (`[assets]` in wrangler.toml) rather than 64 KB of the
/// wasm every cold start loads. It holds no data: it asks for the token and
/// reads the metrics, so it is served without one (only where a token is
/// configured).
const DASHBOARD_ASSET: &str = "https://assets.invalid/dashboard.html";

/// Only its own inline script and styles, requests to this origin only.
const DASHBOARD_CSP: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
     connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn wasm_memory_bytes() -> f64 {
    worker::wasm_bindgen::memory()
        .dyn_into::<WebAssembly::Memory>()
        .ok()
        .and_then(|m| m.buffer().dyn_into::<ArrayBuffer>().ok())
        .map_or(0.0, |b| f64::from(b.byte_length()))
}

/// The answer to a request for `page`, as a boxed future made out of line:
/// inlined, its states (the PoP's exchange) would grow the proxy's own.
#[inline(never)]
pub(crate) fn respond<'a>(
    page: OperatorPage,
    shared: &'a Shared,
    env: &'a Env,
    req: &'a web_sys::Request,
    request_id: &'a str,
) -> LocalBoxFuture<'a, worker::Result<web_sys::Response>> {
    respond_to(page, shared, env, req, request_id).boxed_local()
}

async fn respond_to(
    page: OperatorPage,
    shared: &Shared,
    env: &Env,
    req: &web_sys::Request,
    request_id: &str,
) -> worker::Result<web_sys::Response> {
    let headers = req.headers();
    let header = |name: &str| headers.get(name).ok().flatten();
    let params = Rc::clone(shared.borrow().params());
    if page == OperatorPage::Dashboard {
        if req.method() != "GET" {
            return Failure::MethodNotAllowed("GET").response(request_id);
        }
        return dashboard(env, request_id).await;
    }
    let presented = header("authorization");
    let accepted = params.stats.accepts(presented.as_deref());
    if !accepted {
        return Failure::Unauthorized.response(request_id);
    }
    if req.method() != "GET" {
        return Failure::MethodNotAllowed("GET").response(request_id);
    }
    match page {
        OperatorPage::Stats { pop: true } => {
            let name = colo(req).unwrap_or_else(|| params.pop.fallback_name.clone());
            match pop_ask(env, &name, "stats", "application/json").await {
                Ok(text) => reply::text_response(200, &text, "application/json"),
                Err(message) => {
                    worker::console_warn!("hedgehog-edge: PoP stats: {message}");
                    Failure::Unavailable("pop_stats_unavailable", "the PoP aggregator did not answer (is POP_AGGREGATOR bound?); this isolate's stats are at this path without ?scope=pop").response(request_id)
                }
            }
        }
        OperatorPage::Stats { pop: false } => {
            let mut body = shared.borrow_mut().stats(wasm_memory_bytes(), now_ms());
            // A fact of the glue's, like the memory: the platform's
            // six-connection limit (src/edge/connections.rs).
            body["connections_waiting_max"] = super::connections::isolate_peak().into();
            let mut text = serde_json::to_string(&body)?;
            // Each (origin, route key)'s latency over the window, for the advisor.
            shared
                .borrow_mut()
                .latency_export(now_ms())
                .append_to(&mut text);
            reply::text_response(200, &text, "application/json")
        }
        OperatorPage::Metrics { pop: false } => {
            let format = Format::from_accept(header("accept").as_deref());
            let text = shared.borrow_mut().metrics_text(format, now_ms());
            reply::text_response(200, &text, format.content_type())
        }
        OperatorPage::Dashboard => dashboard(env, request_id).await,
        OperatorPage::Endpoints => {
            let (stats, metrics) = params.stats.sibling_paths();
            let body = serde_json::json!({ "stats": stats, "metrics": metrics });
            reply::json_response(200, &body, &[("cache-control", "no-store")])
        }
        OperatorPage::Metrics { pop: true } => {
            let format = Format::from_accept(header("accept").as_deref());
            let name = colo(req).unwrap_or_else(|| params.pop.fallback_name.clone());
            let accept = match format {
                Format::OpenMetrics => "application/openmetrics-text",
                Format::Prometheus => "text/plain",
            };
            match pop_ask(env, &name, "metrics", accept).await {
                Ok(text) => reply::text_response(200, &text, format.content_type()),
                Err(message) => {
                    worker::console_warn!("hedgehog-edge: PoP metrics: {message}");
                    Failure::Unavailable("pop_metrics_unavailable", "the PoP aggregator did not answer (is POP_AGGREGATOR bound?); the isolate's own metrics are at this path without ?scope=pop").response(request_id)
                }
            }
        }
    }
}

/// The dashboard's page from the assets binding, with the page's own
/// headers (its CSP above all); a clear 503 when the binding is missing.
async fn dashboard(env: &Env, request_id: &str) -> worker::Result<web_sys::Response> {
    let asset = match env.assets(ASSETS_BINDING) {
        Ok(assets) => assets
            .fetch(DASHBOARD_ASSET, None)
            .await
            .map(web_sys::Response::from),
        Err(e) => Err(e),
    };
    match asset {
        Ok(page) if page.status() == 200 => reply::page_response(page.body(), DASHBOARD_CSP),
        // Anyone may ask for the page: a missing asset is logged once per
        // isolate, not once per request (each line is billed).
        Ok(page) => {
            warn_once(&format!("dashboard asset: status {}", page.status()));
            Failure::Unavailable("dashboard_unavailable", "the dashboard page is not among the Worker's assets (wrangler.toml [assets], dashboard/dist)").response(request_id)
        }
        Err(e) => {
            warn_once(&format!("dashboard asset: {e}"));
            Failure::Unavailable("dashboard_unavailable", "the dashboard needs the ASSETS binding (wrangler.toml [assets]); the stats and metrics do not").response(request_id)
        }
    }
}

/// Logs `message` as a warning, the first time in this isolate only.
fn warn_once(message: &str) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        worker::console_warn!("hedgehog-edge: {message} (said once per isolate)");
    }
}

/// The aggregator named `name`'s answer to GET `path` (its metrics text or
/// its stats JSON), as text.
async fn pop_ask(env: &Env, name: &str, path: &str, accept: &str) -> Result<String, String> {
    let namespace = (env.durable_object(POP_BINDING)).map_err(|e| format!("no binding: {e}"))?;
    let (status, bytes) = ask(&namespace, name, Method::Get, path, None, Some(accept)).await?;
    let text = String::from_utf8(bytes).map_err(|e| format!("not text: {e}"))?;
    if status != 200 {
        // At most 300 characters, cut on a character (a byte offset can split one).
        let end = text.char_indices().nth(300).map_or(text.len(), |(i, _)| i);
        return Err(format!("status {status}: {}", &text[..end]));
    }
    Ok(text)
}
