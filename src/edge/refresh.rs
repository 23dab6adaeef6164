//! The background refresh of a stale entry served under
//! `stale-while-revalidate` (RFC 5861): one origin fetch per key at a time
//! (the Hedger's claim), run with `ctx.waitUntil` after the client already
//! has the stale copy, conditional when the entry has a validator; its answer
//! (or the entry updated by a `304`) replaces the stored one.

use std::cell::RefCell;
use std::rc::Rc;

use worker::{console_warn, web_sys, Context};

use super::cache::{self, Entry, StoreTarget};
use super::leg::{self, OutboundBody, OutboundRequest};
use super::race::{self, Outcome, Target};
use super::{now_ms, random_hex};
use hedgehog_core::hedger::Hedger;
use hedgehog_core::request::eligibility::Eligibility;
use hedgehog_core::request::outbound::TraceContext;

/// What a refresh needs from the request that served the stale copy.
#[derive(Debug)]
pub(crate) struct Refresh<'a> {
    pub(crate) ctx: &'a Context,
    pub(crate) hedger: &'a Rc<RefCell<Hedger>>,
    /// The cache key (the request URL).
    pub(crate) url: &'a str,
    pub(crate) path: &'a str,
    pub(crate) query: Option<&'a str>,
    pub(crate) route: &'a str,
    pub(crate) client_headers: &'a web_sys::Headers,
    pub(crate) request_id: &'a str,
    pub(crate) decision: Eligibility,
    /// The stale entry (for its validators).
    pub(crate) entry: &'a Entry,
}

/// Starts the refresh in the background, unless one for the key runs already.
pub(crate) fn spawn(refresh: Refresh<'_>) {
    if !refresh.hedger.borrow_mut().begin_refresh(refresh.url) {
        return;
    }
    let hedger = Rc::clone(refresh.hedger);
    let url = refresh.url.to_string();
    let claim = RefreshClaim {
        hedger: Rc::clone(&hedger),
        url: url.clone(),
    };
    let headers = match outbound_headers(&refresh) {
        Ok(headers) => headers,
        Err(e) => {
            console_warn!("hedgehog-edge: could not build a refresh: {e}");
            return;
        }
    };
    let request_headers = match web_sys::Headers::new_with_headers(refresh.client_headers) {
        Ok(h) => h,
        Err(_) => return,
    };
    let (path, query) = (refresh.path.to_string(), refresh.query.map(str::to_string));
    let plan = hedger
        .borrow_mut()
        .plan(refresh.decision, refresh.route, now_ms());
    refresh.ctx.wait_until(async move {
        let _claim = claim;
        let mut outbound = OutboundRequest {
            method: "GET".to_string(),
            headers,
            body: OutboundBody::Empty,
            trace: TraceContext {
                trace_id: random_hex(4),
                flags: "00".to_string(),
            },
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
        let report = race::run(
            &hedger,
            plan,
            &target,
            &mut outbound,
            &never.signal(),
            now_ms,
        )
        .await;
        let Ok(report) = report else {
            return;
        };
        let Outcome::Won(_, response) = &report.outcome else {
            return;
        };
        let updated;
        let response = if response.status() == 304 {
            // The stored body is read again: the client's copy used the first.
            let found = cache::lookup(&url, &request_headers).await;
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
        let fresh = cache::freshness_of(response, started_ms, now_ms())
            .filter(|_| hedger.borrow().may_store(&url, started_ms));
        let Some((meta, keep_secs)) = fresh else {
            return;
        };
        let target = StoreTarget {
            url: &url,
            request_headers: &request_headers,
            generation: None,
            meta,
            keep_secs,
        };
        let task = cache::store_task(target, response, || {});
        if let Some(body) = response.body() {
            // The stored copy is a tee of it; this branch is not read.
            let _ = body.cancel();
        }
        if let Some(task) = task {
            task.await;
        }
    });
}

/// The refresh's request headers: the client's (less hop-by-hop ones), and
/// the entry's validators so an unchanged entry costs the origin a 304.
fn outbound_headers(refresh: &Refresh<'_>) -> worker::Result<web_sys::Headers> {
    let headers = leg::outbound_headers(refresh.client_headers, refresh.request_id)?;
    refresh.entry.add_validators(&headers)?;
    Ok(headers)
}

/// Ends the Hedger's claim on the key however the refresh ends.
struct RefreshClaim {
    hedger: Rc<RefCell<Hedger>>,
    url: String,
}

impl Drop for RefreshClaim {
    fn drop(&mut self) {
        if let Ok(mut hedger) = self.hedger.try_borrow_mut() {
            hedger.end_refresh(&self.url);
        }
    }
}
