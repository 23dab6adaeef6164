//! Configuration parsing on arbitrary `KEY=value` lines: never panics, and
//! either yields origins or names at least one bad key.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let vars: BTreeMap<String, String> = text
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    match hedgehog_core::config::parse(&vars) {
        Ok(params) => assert!(!params.origins.is_empty()),
        Err(errors) => assert!(!errors.is_empty()),
    }
});
