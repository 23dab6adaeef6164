//! The background refresh of a stale entry served under
//! `stale-while-revalidate` (RFC 5861): one origin fetch per key at a time
//! (the isolate's claim), run with `ctx.waitUntil` after the client already
//! has the stale copy, conditional when the entry has a validator; its answer
//! (or the entry updated by a `304`) replaces the stored one.

use std::rc::Rc;

use worker::{console_warn, web_sys, AnalyticsEngineDataset, Context, Env};

use super::cache::{self, Entry, StoreTarget};
use super::client::Client;
use super::connections::Connections;
use super::isolate::{self, Shared};
use super::leg::{self, OutboundBody, OutboundRequest};
use super::race::{self, Asked, Outcome, RaceReport};
use super::request_body::ClientBodyFault;
use super::{analytics, request_log};
use hedgehog_core::edge::{Exchange, HeaderList, Refresh};

/// Runs `refresh`, the refresh of `entry` (served stale to `client`'s
/// request) the isolate accepted, in the background.
pub(crate) fn spawn(
    ctx: &Context,
    env: &Env,
    shared: &Shared,
    client: Client<'_>,
    refresh: Refresh,
    entry: &Entry,
) {
    let Refresh {
        exchange: refresh,
        plan,
    } = refresh;
    let url = client.url.to_string();
    let claim = RefreshClaim {
        isolate: Shared::clone(shared),
        url: url.clone(),
    };
    let headers = match outbound_headers(client.headers, &refresh, entry) {
        Ok(headers) => headers,
        Err(e) => {
            console_warn!("hedgehog-edge: could not build a refresh: {e}");
            return;
        }
    };
    let request_headers = client.head.clone();
    let dataset = analytics::dataset(env);
    let shared = Shared::clone(shared);
    // The same invocation: its subrequests count against the client's six.
    let connections = Rc::clone(client.connections);
    ctx.wait_until(async move {
        let _claim = claim;
        let mut outbound = OutboundRequest {
            method: refresh.method.clone(),
            headers,
            body: OutboundBody::Empty,
            client_body: ClientBodyFault::default(),
        };
        // Nobody waits on this request: nothing aborts it but the timeout.
        let Ok(never) = web_sys::AbortController::new() else {
            return;
        };
        let signal = never.signal();
        let report = race::run(
            &shared,
            plan,
            &refresh,
            &mut outbound,
            &signal,
            &connections,
        )
        .await;
        let Ok(report) = report else {
            return;
        };
        let ended = End {
            shared: &shared,
            url: &url,
            request_headers: &request_headers,
            connections: &connections,
            dataset: dataset.as_ref(),
        };
        ended.complete(&refresh, report).await;
    });
}

/// What a refresh needs once its race is over.
struct End<'a> {
    shared: &'a Shared,
    url: &'a str,
    request_headers: &'a HeaderList,
    connections: &'a Rc<Connections>,
    dataset: Option<&'a AnalyticsEngineDataset>,
}

impl End<'_> {
    /// The isolate's completion, as for a client's request (counts, the
    /// recent errors, the log line, what the cache keeps), then the store of
    /// the answer or of the entry a `304` updated.
    async fn complete(&self, refresh: &Exchange, mut report: RaceReport) {
        let mut entry = None;
        if let Outcome::Won(response) = &report.outcome {
            if response.status() == 304 {
                // The stored body is read again: the client's copy used the
                // first. Gone from the cache meanwhile (a write, an
                // eviction): the bare 304 is still counted and logged, and
                // stores nothing (304 is not a stored status).
                let found = cache::lookup(self.url, self.request_headers, self.connections).await;
                entry = found.entry;
            }
        }
        let asked = Asked {
            url: self.url,
            head: self.request_headers,
            generation: None,
            stale_if_error: None,
            revalidated: (entry.as_ref()).map(|e| (e.stored.status(), &e.head)),
        };
        let mut done = report.complete(self.shared, refresh, asked, self.dataset.is_some());
        request_log::write(std::mem::take(&mut done.record), self.dataset);
        // The entry the 304 updated is what the cache keeps (never the bare 304).
        if let Some(entry) = &entry {
            if let Err(e) = report.take_merged(&done, entry, self.shared) {
                console_warn!("hedgehog-edge: could not rebuild a refreshed entry: {e:?}");
                return;
            }
        }
        let kept = report.kept_response();
        let (Some(plan), Some(response)) = (done.store, kept) else {
            return;
        };
        let target = StoreTarget {
            url: self.url,
            isolate: self.shared,
            plan,
            leader: None,
        };
        let task = cache::store_task(target, response, self.connections);
        if let Some(body) = response.body() {
            // The stored copy is a tee of it; this branch is not read.
            let _ = body.cancel();
        }
        if let Some(task) = task {
            task.await;
        }
    }
}

/// The refresh's request headers: the client's (less hop-by-hop ones), and
/// the entry's validators so an unchanged entry costs the origin a 304.
fn outbound_headers(
    client: &web_sys::Headers,
    exchange: &Exchange,
    entry: &Entry,
) -> worker::Result<web_sys::Headers> {
    let headers = leg::outbound_headers(client, exchange)?;
    cache::set_fields(&headers, &entry.head.validators())?;
    Ok(headers)
}

/// Ends the isolate's claim on the key however the refresh ends.
struct RefreshClaim {
    isolate: Shared,
    url: String,
}

impl Drop for RefreshClaim {
    fn drop(&mut self) {
        isolate::try_with(&self.isolate, |i| i.end_refresh(&self.url));
    }
}
