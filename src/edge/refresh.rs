//! The background refresh of a stale entry served under
//! `stale-while-revalidate` (RFC 5861): one origin fetch per key at a time
//! (the isolate's claim), run with `ctx.waitUntil` after the client already
//! has the stale copy, conditional when the entry has a validator, through
//! the proxy's own race and completion ([`proxy::refresh`]).

use std::rc::Rc;

use worker::wasm_bindgen::{JsCast, JsValue};
use worker::{web_sys, Context};

use super::cache::Entry;
use super::client::Client;
use super::isolate::{self, Shared};
use super::proxy::{self, Io};
use hedgehog_core::edge::Refresh;

/// Runs `refresh`, the refresh of `entry` (served stale to the request
/// `io` serves) the isolate accepted, in the background.
pub(crate) fn spawn(io: Io<'_>, refresh: Refresh, entry: &Entry) {
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
    let validators = entry.head.validators();
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
        proxy::refresh(io, refresh, validators).await;
        drop(claim);
    });
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
