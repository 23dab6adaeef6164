//! The background refresh of a stale entry served under
//! `stale-while-revalidate` (RFC 5861): one origin fetch per key at a time
//! (the isolate's claim), run with `ctx.waitUntil` after the client already
//! has the stale copy, conditional when the entry has a validator, through
//! the same race, completion and steps after it as a client's request
//! ([`super::exchange::after_race`]).

use std::rc::Rc;

use worker::wasm_bindgen::{JsCast, JsValue};
use worker::{console_warn, web_sys, Context};

use super::client::Client;
use super::exchange::{after_race, outbound, Io, Miss};
use super::isolate::{self, Shared};
use super::race;
use hedgehog_core::edge::Refresh;

/// Runs `refresh`, the refresh of the entry served stale to the request
/// `io` serves, the isolate accepted, in the background.
pub(crate) fn spawn(io: Io<'_>, refresh: Refresh) {
    let client = io.client;
    let claim = RefreshClaim {
        isolate: Shared::clone(io.isolate),
        url: client.url.to_string(),
    };
    // What it reads of the client's request, its own: the future outlives
    // this call.
    let req = <web_sys::Request as Clone>::clone(client.req);
    let headers = <web_sys::Headers as Clone>::clone(client.headers);
    let head = client.head.clone();
    // The same invocation: its subrequests count against the client's six.
    let connections = Rc::clone(client.connections);
    // The invocation's own context, a second handle to it.
    let ctx = Context::new(JsValue::clone(io.ctx.as_ref()).unchecked_into());
    let env = io.env.clone();
    let shared = Shared::clone(io.isolate);
    io.ctx.wait_until(async move {
        let client = Client {
            req: &req,
            url: &claim.url,
            headers: &headers,
            head: &head,
            connections: &connections,
        };
        let io = Io {
            client,
            env: &env,
            ctx: &ctx,
            isolate: &shared,
        };
        run(io, refresh).await;
        drop(claim);
    });
}

/// Runs a background refresh the isolate accepted (asking with the served
/// entry's validators) through the same race and completion as a client's
/// request; nobody reads its answer but the cache.
async fn run(io: Io<'_>, refresh: Refresh) {
    let Refresh {
        exchange,
        plan,
        validators,
    } = refresh;
    let miss = Miss::new(None, validators);
    let (mut outbound, miss) = match outbound(io.client, &exchange, Default::default(), miss) {
        Ok(built) => built,
        Err(e) => {
            console_warn!("hedgehog-edge: could not build a refresh: {e}");
            return;
        }
    };
    // Nobody waits on this request: nothing aborts it but the timeout.
    let Ok(never) = web_sys::AbortController::new() else {
        return;
    };
    let connections = io.client.connections;
    let signal = never.signal();
    let raced = race::run(
        io.isolate,
        plan,
        &exchange,
        &mut outbound,
        &signal,
        connections,
    );
    let Ok(report) = raced.await else {
        return;
    };
    // The same steps as a client's, in the refresh's order: the log line,
    // the cache, the unread answer cancelled, the store awaited (its claim
    // on the key holds until the entry is replaced).
    if let Err(e) = after_race(io, &exchange, report, miss).await {
        console_warn!("hedgehog-edge: could not rebuild a refreshed entry: {e:?}");
    }
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
