//! The Worker's clock: a leaf every other module may use. Ids (request,
//! trace, span, a cache generation) are the isolate's.

use worker::js_sys;

/// Milliseconds since the epoch (`Date.now()`; `std::time` panics on wasm).
pub(crate) fn now_ms() -> f64 {
    js_sys::Date::now()
}
