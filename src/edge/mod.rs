//! The Worker layer: a router that hands each request to its handler, and
//! the proxy pipeline, which converts the request into the core's inputs,
//! does the I/O (cache, body, race, store) and turns the core's outputs
//! into the client's response.
//!
//! Modules: [`isolate`] holds the isolate's [`Isolate`], [`proxy`] is the
//! pipeline, [`cache`] and [`coalesce`] serve from the cache and share
//! concurrent misses, [`leg`] sends one origin request, [`race`] runs the
//! race, [`request_body`] reads a body that may be sent twice, [`reply`]
//! builds responses, [`operator`] (stats, metrics) and [`websocket`] are the other routes;
//! [`clock`] (the clock and ids), [`client`] and [`env_vars`] are leaves. It works on `web_sys` types directly:
//! the conversions into `worker::Request`/`Response` parse and copy more
//! than a proxy needs on its hot path.
//!
//! [`Isolate`]: hedgehog_core::isolate::Isolate

mod analytics;
mod body_watch;
mod cache;
mod check;
mod client;
mod clock;
mod coalesce;
mod connections;
mod env_vars;
mod exchange;
mod fixed_length_body;
mod head;
mod isolate;
mod leg;
mod operator;
mod panic;
mod pop;
mod proxy;
mod race;
mod refresh;
mod reply;
mod request_body;
mod request_log;
mod websocket;

use worker::{console_error, event, web_sys, Context, Env};

use hedgehog_core::edge::{Intake, RequestHead};
use reply::Failure;

/// Every request: the isolate accepts it, and its route's handler answers.
#[event(fetch)]
async fn fetch(req: web_sys::Request, env: Env, ctx: Context) -> worker::Result<web_sys::Response> {
    panic::install_hook();
    #[cfg(feature = "test-panic")]
    panic::test_trigger(&req.headers()).await;
    let start_ms = clock::now_ms();
    let isolate = match isolate::get(&env, start_ms) {
        Ok(isolate) => isolate,
        Err(errors) => {
            for e in errors.iter() {
                console_error!("hedgehog-edge: invalid configuration: {e}");
            }
            return Failure::Config(&errors).response("");
        }
    };
    let (url, method, headers) = (req.url(), req.method(), req.headers());
    let fields = head::read(&headers);
    let head = RequestHead {
        url: &url,
        method: &method,
        has_body: req.body().is_some(),
        headers: &fields,
    };
    let intake = isolate.borrow_mut().accept(&head, start_ms);
    match intake {
        Intake::Refused {
            message,
            request_id,
        } => Failure::BadRequest(message).response(&request_id),
        Intake::Operator { page, request_id } => {
            operator::respond(page, &isolate, &env, &req, &request_id).await
        }
        Intake::WebSocket {
            request_id,
            url,
            strip_authorization,
        } => websocket::pass_through(&req, &url, &request_id, strip_authorization).await,
        Intake::Proxy(exchange, first) => {
            let connections = connections::Connections::new();
            let client = client::Client {
                req: &req,
                url: &url,
                headers: &headers,
                head: &fields,
                connections: &connections,
            };
            // Boxed: inline, its state is laid out beside this future's own
            // (measured: 4 KB held a request through the race; boxed, 2.9 KB
            // of heap in all, 2.7 KB before the pipeline).
            Box::pin(proxy::run(client, &env, &ctx, &isolate, *exchange, first)).await
        }
    }
}
