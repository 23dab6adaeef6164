//! The Worker's clock and random hex (a span, a cache generation): leaves
//! every other module may use. Request and trace ids are the isolate's.

use worker::js_sys;

/// Milliseconds since the epoch (`Date.now()`; `std::time` panics on wasm).
pub(crate) fn now_ms() -> f64 {
    js_sys::Date::now()
}

/// `words` random 32-bit words as lowercase hex (never all zero, which
/// trace context forbids).
pub(crate) fn random_hex(words: usize) -> String {
    use std::fmt::Write;
    let mut id = String::with_capacity(words * 8);
    for i in 0..words {
        let mut word = (js_sys::Math::random() * f64::from(u32::MAX)) as u32;
        if i == 0 && word == 0 {
            word = 1;
        }
        let _ = write!(id, "{word:08x}");
    }
    id
}
