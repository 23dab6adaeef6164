//! What a panic does. A panic aborts the wasm instance: every request in
//! flight in this isolate is lost with it, and workers-rs starts a new
//! instance (fresh state) for the next request. workers-rs installs its own
//! panic hook at start-up, which logs the message with its location and a
//! JavaScript stack and marks the instance for re-initialisation; this adds
//! one step after it: the Worker's JavaScript entry (`src/entry.mjs`) is told,
//! so the clients of the lost requests get a 500 with their request id
//! instead of waiting for the runtime to give up on a promise that will never
//! settle.

use std::sync::Once;

use worker::js_sys::{Function, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};

/// The global function the JavaScript entry defines to hear of a panic.
const ON_PANIC: &str = "__hedgehogOnPanic";

/// Chains the notice after the hook workers-rs installed (once per instance).
pub(crate) fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let workers_rs_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            workers_rs_hook(info);
            let global = worker::js_sys::global();
            if let Ok(notify) = Reflect::get(&global, &JsValue::from_str(ON_PANIC)) {
                if let Some(notify) = notify.dyn_ref::<Function>() {
                    let _ = notify.call1(&JsValue::NULL, &JsValue::from_str(&info.to_string()));
                }
            }
        }));
    });
}

/// Test builds only: `x-hedgehog-test-panic: now` panics in the first poll of
/// the request, `later` after an await (the harder case: the panic happens
/// in a callback, not under the runtime's call into `fetch`).
#[cfg(feature = "test-panic")]
pub(crate) async fn test_trigger(headers: &worker::web_sys::Headers) {
    match headers
        .get("x-hedgehog-test-panic")
        .ok()
        .flatten()
        .as_deref()
    {
        Some("now") => panic!("test panic (now)"),
        Some("later") => {
            worker::Delay::from(std::time::Duration::from_millis(1)).await;
            panic!("test panic (later)")
        }
        _ => {}
    }
}
