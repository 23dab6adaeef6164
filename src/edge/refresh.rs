//! The background refresh of a stale entry served under
//! `stale-while-revalidate` (RFC 5861): one origin fetch per key at a time
//! (the isolate's claim), run with `ctx.waitUntil` after the client already
//! has the stale copy, conditional when the entry has a validator; its answer
//! (or the entry updated by a `304`) replaces the stored one.

use std::rc::Rc;

use worker::{console_warn, web_sys, Context};

use super::cache::{self, Entry, StoreTarget};
use super::client::Client;
use super::clock::{new_id, now_ms};
use super::connections::Connections;
use super::isolate::{self, Shared};
use super::leg::{self, OutboundBody, OutboundRequest};
use super::race::{self, Outcome, Target};
use super::request_body::ClientBodyFault;
use hedgehog_core::cache::policy::response_freshness;
use hedgehog_core::isolate::Admission;
use hedgehog_core::request::outbound::TraceContext;

/// Starts the refresh of `entry` (served stale to `client`'s request) in
/// the background, unless one for the key runs already.
pub(crate) fn spawn(
    ctx: &Context,
    shared: &Shared,
    client: Client<'_>,
    admission: &Admission,
    entry: &Entry,
) {
    let url = client.url.to_string();
    let Some(plan) = shared.borrow_mut().begin_refresh(&url, admission, now_ms()) else {
        return;
    };
    let claim = RefreshClaim { url: url.clone() };
    let headers = match outbound_headers(client.headers, admission, entry) {
        Ok(headers) => headers,
        Err(e) => {
            console_warn!("hedgehog-edge: could not build a refresh: {e}");
            return;
        }
    };
    let Ok(request_headers) = web_sys::Headers::new_with_headers(client.headers) else {
        return;
    };
    let (path, query) = (admission.path.clone(), admission.query.clone());
    let shared = Shared::clone(shared);
    // The same invocation: its subrequests count against the client's six.
    let connections = Rc::clone(client.connections);
    ctx.wait_until(async move {
        let _claim = claim;
        let mut outbound = OutboundRequest {
            method: "GET".to_string(),
            headers,
            body: OutboundBody::Empty,
            trace: TraceContext {
                trace_id: new_id(),
                flags: "00".to_string(),
            },
            client_body: ClientBodyFault::default(),
        };
        let target = Target {
            path: &path,
            query: query.as_deref(),
        };
        // Nobody waits on this request: nothing aborts it but the timeout.
        let Ok(never) = web_sys::AbortController::new() else {
            return;
        };
        let started_ms = now_ms();
        let signal = never.signal();
        let report = race::run(&shared, plan, &target, &mut outbound, &signal, &connections).await;
        let Ok(report) = report else {
            return;
        };
        let Outcome::Won(response) = &report.outcome else {
            return;
        };
        store(
            &shared,
            &url,
            &request_headers,
            response,
            started_ms,
            &connections,
        )
        .await;
    });
}

/// Stores the refresh's answer (or the entry updated by a `304`).
async fn store(
    shared: &Shared,
    url: &str,
    request_headers: &web_sys::Headers,
    response: &web_sys::Response,
    started_ms: f64,
    connections: &Rc<Connections>,
) {
    let updated;
    let response = if response.status() == 304 {
        // The stored body is read again: the client's copy used the first.
        let found = cache::lookup(url, request_headers, connections).await;
        match found.entry.map(|entry| cache::updated_by(&entry, response)) {
            Some(Ok(response)) => {
                updated = response;
                &updated
            }
            _ => return,
        }
    } else {
        response
    };
    let headers = response.headers();
    let header = |name: &str| headers.get(name).ok().flatten();
    let fresh = response_freshness(response.status(), &header, started_ms, now_ms())
        .filter(|_| shared.borrow().may_store(url, started_ms));
    let Some((meta, keep_secs)) = fresh else {
        return;
    };
    let target = StoreTarget {
        url,
        request_headers,
        generation: None,
        meta,
        keep_secs,
    };
    let task = cache::store_task(target, response, connections, || {});
    if let Some(body) = response.body() {
        // The stored copy is a tee of it; this branch is not read.
        let _ = body.cancel();
    }
    if let Some(task) = task {
        task.await;
    }
}

/// The refresh's request headers: the client's (less hop-by-hop ones), and
/// the entry's validators so an unchanged entry costs the origin a 304.
fn outbound_headers(
    client: &web_sys::Headers,
    admission: &Admission,
    entry: &Entry,
) -> worker::Result<web_sys::Headers> {
    let headers = leg::outbound_headers(client, admission)?;
    entry.add_validators(&headers)?;
    Ok(headers)
}

/// Ends the isolate's claim on the key however the refresh ends.
struct RefreshClaim {
    url: String,
}

impl Drop for RefreshClaim {
    fn drop(&mut self) {
        isolate::with(|isolate| isolate.end_refresh(&self.url));
    }
}
