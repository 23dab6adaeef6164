//! The configuration check behind `npm run check`: reads a JSON object of
//! Worker vars (name -> string) on stdin and runs the Worker's own parser
//! over it, strictly (every invalid key is reported, as the Worker would log
//! it), printing `{"errors": [{"key", "reason"}], "origins": [{"name", "url"}]}`.
//!
//! cargo run -q -p hedgehog-core --example check_config < vars.json

use std::collections::BTreeMap;
use std::io::Read;

use hedgehog_core::config;

fn main() {
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("check_config: cannot read stdin: {e}");
        std::process::exit(2);
    }
    let raw: BTreeMap<String, serde_json::Value> = match serde_json::from_str(&input) {
        Ok(vars) => vars,
        Err(e) => {
            eprintln!("check_config: expected a JSON object of vars on stdin: {e}");
            std::process::exit(2);
        }
    };
    // Wrangler passes non-string vars as JSON; the Worker reads them as text.
    let vars: BTreeMap<String, String> = raw
        .into_iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => (k, s),
            other => (k, other.to_string()),
        })
        .collect();
    let (errors, origins) = match config::parse(&vars) {
        Ok(params) => (Vec::new(), params.origins),
        Err(errors) => {
            // What the Worker would run on, for the origin checks.
            let origins = config::parse_lenient(&vars)
                .map(|(p, _)| p.origins)
                .unwrap_or_default();
            (errors, origins)
        }
    };
    let out = serde_json::json!({
        "errors": errors
            .iter()
            .map(|e| serde_json::json!({ "key": e.key, "reason": e.reason }))
            .collect::<Vec<_>>(),
        "origins": origins
            .iter()
            .map(|o| serde_json::json!({ "name": o.name, "url": o.base_url }))
            .collect::<Vec<_>>(),
    });
    println!("{out}");
}
