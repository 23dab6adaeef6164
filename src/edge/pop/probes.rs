//! The aggregator's active health probes: one GET of `HEDGE_PROBE_PATH` on
//! every origin, at once, each with its own timeout and abort signal. The
//! verdicts are the core's ([`hedgehog_core::pop::probes`]).

use std::time::Duration;

use futures::future::{join_all, select, Either};
use futures::FutureExt;
use worker::js_sys;
use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{web_sys, Delay};

use hedgehog_core::edge::{judge_probe, ProbeResult};

/// Marks a probe so an origin can tell it from user traffic.
const PROBE_HEADER: &str = "x-hedge-probe";

/// Probes every `(origin name, URL)` and says what each got and how long it
/// took (ms).
pub(crate) async fn probe_all(
    targets: Vec<(String, String)>,
    timeout_ms: f64,
) -> Vec<(String, ProbeResult, f64)> {
    join_all(targets.into_iter().map(|(name, url)| async move {
        let started = worker::Date::now().as_millis() as f64;
        let status = probe(&url, timeout_ms).await;
        let elapsed = worker::Date::now().as_millis() as f64 - started;
        (name, judge_probe(status), elapsed)
    }))
    .await
}

/// The status `url` answered within `timeout_ms` (`None`: no answer).
async fn probe(url: &str, timeout_ms: f64) -> Option<u16> {
    let controller = web_sys::AbortController::new().ok()?;
    let init = web_sys::RequestInit::new();
    init.set_method("GET");
    let headers = web_sys::Headers::new().ok()?;
    headers.set(PROBE_HEADER, "true").ok()?;
    headers.set("user-agent", "hedgehog-edge-probe").ok()?;
    init.set_headers(&headers);
    init.set_redirect(web_sys::RequestRedirect::Manual);
    init.set_signal(Some(&controller.signal()));
    let request = web_sys::Request::new_with_str_and_init(url, &init).ok()?;
    let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    let answer = JsFuture::from(global.fetch_with_request(&request));
    let timer = Delay::from(Duration::from_millis(timeout_ms.max(1.0) as u64));
    let status = match select(answer.boxed_local(), timer).await {
        Either::Left((Ok(value), _)) => value.dyn_into::<web_sys::Response>().ok().map(|r| {
            // The body is not read: cancel it so the connection is freed.
            if let Some(body) = r.body() {
                let _ = body.cancel();
            }
            r.status()
        }),
        Either::Left((Err(_), _)) => None,
        Either::Right(_) => None,
    };
    // An unanswered probe is cut off, not left holding a connection.
    controller.abort();
    status
}
