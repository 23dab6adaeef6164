//! The isolate's one [`Isolate`], made from the configuration on its first
//! request and kept for its life.
//!
//! An isolate handles one request at a time between awaits, so a
//! `thread_local` `RefCell` is enough; borrows never span an await. It is
//! reached one way: through the [`Shared`] handle [`get`] gives a request,
//! which the request's guards and background tasks keep a clone of.

use std::cell::RefCell;
use std::rc::Rc;

use worker::js_sys::Reflect;
use worker::wasm_bindgen::JsValue;
use worker::Env;
use worker::{console_error, js_sys};

use super::env_vars::{pop_bound, read_vars};

use hedgehog_core::edge::{parse_config_lenient, ConfigError, Isolate};

/// The isolate, shared by its requests (each borrows it between awaits).
pub(crate) type Shared = Rc<RefCell<Isolate>>;

#[derive(Debug)]
enum State {
    Ready(Shared),
    Invalid(Rc<Vec<ConfigError>>),
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// The isolate, made from `env` on the first request; the configuration's
/// errors when it cannot run (no usable `HEDGE_ORIGINS`; any other invalid
/// key runs on its default and is logged once).
pub(crate) fn get(env: &Env, now_ms: f64) -> Result<Shared, Rc<Vec<ConfigError>>> {
    STATE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let state = slot.get_or_insert_with(|| match parse_config_lenient(&read_vars(env)) {
            Ok((params, errors)) => {
                // Said once per isolate, not per request; the stats page
                // lists them too.
                for e in &errors {
                    console_error!("hedgehog-edge: configuration, running on the default: {e}");
                }
                let mut isolate = Isolate::new(
                    params,
                    pop_bound(env),
                    now_ms,
                    // Each isolate draws its own primaries (no herding).
                    (js_sys::Math::random() * 9.007_199_254_740_991e15) as u64,
                );
                isolate.note_config_errors(errors);
                if let Some(version) = version_id(env) {
                    isolate.set_version(&version);
                }
                State::Ready(Rc::new(RefCell::new(isolate)))
            }
            Err(errors) => State::Invalid(Rc::new(errors)),
        });
        match state {
            State::Ready(isolate) => Ok(Rc::clone(isolate)),
            State::Invalid(errors) => Err(Rc::clone(errors)),
        }
    })
}

/// The binding of the Worker's version metadata (`[version_metadata]` in
/// `wrangler.toml`): `{ id, tag, timestamp }` of the version this isolate runs.
const VERSION_BINDING: &str = "CF_VERSION_METADATA";

/// The version id this isolate runs, when the binding is configured.
fn version_id(env: &Env) -> Option<String> {
    let env: &JsValue = env.as_ref();
    let metadata = Reflect::get(env, &JsValue::from_str(VERSION_BINDING)).ok()?;
    let id = Reflect::get(&metadata, &JsValue::from_str("id"))
        .ok()?
        .as_string()?;
    // An id is a UUID; anything else is cut to a label's worth.
    Some(
        id.chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .take(64)
            .collect(),
    )
    .filter(|id: &String| !id.is_empty())
}

/// Runs `f` on the isolate unless it is borrowed already: for a guard's
/// `Drop` and a background task's reply, which must never panic (a borrow
/// never spans an await, so only a bug can find it borrowed).
pub(crate) fn try_with<R>(isolate: &Shared, f: impl FnOnce(&mut Isolate) -> R) -> Option<R> {
    let mut isolate = isolate.try_borrow_mut().ok()?;
    Some(f(&mut isolate))
}
