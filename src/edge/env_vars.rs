//! What the Worker reads of its environment: the `HEDGE_*` vars as text
//! (for the core's parser) and whether the PoP aggregator is bound.

use hedgehog_core::edge::VecMap;

use worker::js_sys::{self, JsString, Object, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::Env;

/// The Durable Object binding of the PoP aggregator (optional).
pub(crate) const POP_BINDING: &str = "POP_AGGREGATOR";
/// The Worker's static assets (the dashboard page), `[assets]` in wrangler.toml.
pub(crate) const ASSETS_BINDING: &str = "ASSETS";

/// Whether the aggregator binding is configured.
pub(crate) fn pop_bound(env: &Env) -> bool {
    env.durable_object(POP_BINDING).is_ok()
}

/// Every `HEDGE_*` var as text. Structured vars (a TOML table or array in
/// `[vars]`) arrive as objects and are turned back into JSON.
pub(crate) fn read_vars(env: &Env) -> VecMap<String, String> {
    vars_of(env.as_ref())
}

/// [`read_vars`] of any object of bindings (the check passes one in).
pub(crate) fn vars_of(env_value: &JsValue) -> VecMap<String, String> {
    let mut vars = VecMap::new();
    let Some(object) = env_value.dyn_ref::<Object>() else {
        return vars;
    };
    for key in Object::keys(object).iter().filter_map(|k| k.as_string()) {
        if !key.starts_with("HEDGE_") {
            continue;
        }
        let Ok(value) = Reflect::get(object, &JsValue::from_str(&key)) else {
            continue;
        };
        let text = match value.as_string() {
            Some(s) => Some(s),
            None => js_sys::JSON::stringify(&value)
                .ok()
                .map(|s: JsString| String::from(s)),
        };
        if let Some(text) = text {
            vars.insert(key, text);
        }
    }
    vars
}
