//! The smallest workers-rs proxy: the client's method, headers and body to
//! `ORIGIN` + path and query, the origin's response back as it is. The lab
//! measures it beside the JavaScript pass-through and hedgehog-edge.

use worker::{event, web_sys, Context, Env};
use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;

#[event(fetch)]
async fn fetch(req: web_sys::Request, env: Env, _ctx: Context) -> worker::Result<web_sys::Response> {
    let origin = env.var("ORIGIN")?.to_string();
    let url = req.url();
    // Path and query: everything from the first '/' after "scheme://host".
    let rest = url.splitn(4, '/').nth(3).unwrap_or("");
    let init = web_sys::RequestInit::new();
    init.set_method(&req.method());
    init.set_headers(&req.headers());
    if let Some(body) = req.body() {
        init.set_body(&body);
    }
    let outbound = web_sys::Request::new_with_str_and_init(&format!("{origin}/{rest}"), &init)?;
    let global: web_sys::WorkerGlobalScope = worker::js_sys::global().unchecked_into();
    let response = JsFuture::from(global.fetch_with_request(&outbound)).await?;
    Ok(response.dyn_into::<web_sys::Response>()?)
}
