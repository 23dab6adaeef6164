//! `npm run check`'s entry into the Worker: the configuration parser that
//! ships, called from Node on the built module (`scripts/check-config.mjs`),
//! so what the check accepts is exactly what the deployed Worker runs: the
//! vars are read from the object the way the Worker reads its `env`, and
//! parsed by the same code. worker-build also makes every exported function
//! an RPC method of the Worker's entrypoint, callable only by Workers bound
//! to it; it reads nothing but its argument.

use serde::Serialize;
use worker::wasm_bindgen;
use worker::wasm_bindgen::prelude::wasm_bindgen;
use worker::wasm_bindgen::JsValue;

use super::env_vars;
use hedgehog_core::edge::{parse_config, parse_config_lenient, SECRET_KEYS};

#[derive(Serialize)]
struct Problem<'a> {
    key: &'a str,
    reason: &'a str,
}

#[derive(Serialize)]
struct OriginJson<'a> {
    name: &'a str,
    url: &'a str,
}

#[derive(Serialize)]
struct CheckJson<'a> {
    errors: Vec<Problem<'a>>,
    origins: Vec<OriginJson<'a>>,
    secrets: &'static [&'static str],
}

/// Parses the `HEDGE_*` vars of `vars` (an object of bindings, as wrangler
/// would bind them) strictly and answers `{"errors": [{key, reason}],
/// "origins": [{name, url}], "secrets": [names]}`: every invalid key, the
/// origins the Worker would run on, and the keys that must be secrets.
#[wasm_bindgen]
#[allow(unreachable_pub)] // exported to JavaScript, not to Rust
pub fn check_config(vars: JsValue) -> String {
    let vars = env_vars::vars_of(&vars);
    let (errors, origins) = match parse_config(&vars) {
        Ok(params) => (Vec::new(), params.origins),
        Err(errors) => {
            let origins = parse_config_lenient(&vars)
                .map(|(p, _)| p.origins)
                .unwrap_or_default();
            (errors, origins)
        }
    };
    let out = CheckJson {
        errors: (errors.iter())
            .map(|e| Problem {
                key: &e.key,
                reason: &e.reason,
            })
            .collect(),
        origins: (origins.iter())
            .map(|o| OriginJson {
                name: &o.name,
                url: &o.base_url,
            })
            .collect(),
        secrets: SECRET_KEYS,
    };
    serde_json::to_string(&out).unwrap_or_default()
}
