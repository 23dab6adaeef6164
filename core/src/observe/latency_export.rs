//! The latency an isolate (or a PoP's aggregator) holds, as the stats page
//! gives it to the advisor (`npm run advise`): each (origin, route key)'s
//! sketch over the window, completed and censored counts per bucket, with
//! the setting in force and the share of requests hedged. Every leg leaves
//! one sample (an answer, or a censored time when it was cut short), so a
//! route's request rate is its keys' samples over the window, less the
//! hedges.
//!
//! Only the operator page writes it, off the request path: a key is about
//! 200 buckets of three numbers, so a PoP's 40 keys are tens of KB.

use serde::{Deserialize, Serialize};

use crate::pop::push::KeyDelta;

/// Everything the advisor reads. Its keys are the push's own (one more
/// page that writes them costs the Worker little code).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LatencyExport {
    /// The time the sketches cover, seconds (the window, or less in a
    /// young isolate).
    pub window_s: f64,
    /// Legs beyond the first per request, recently (hedges, retries).
    pub hedge_share: f64,
    /// `HEDGE_BUDGET_PERCENT` in force.
    pub budget_percent: f64,
    /// `HEDGE_POLICY` in force (`tail-aware`, `fixed-quantile`).
    pub policy: String,
    /// Per (origin, route key): `[bucket index, completed, censored]` (see
    /// [`crate::estimation::sketch::bucket_index`]), in index order.
    pub keys: Vec<KeyDelta>,
}

impl LatencyExport {
    /// Adds itself as the last field, `"latency"`, of the JSON object
    /// `object` (a page serialized already: it is written with the push's
    /// serializer, not through the page's `serde_json::Value`).
    pub fn append_to(&self, object: &mut String) {
        let Ok(json) = serde_json::to_string(self) else {
            return;
        };
        if object.ends_with('}') {
            object.pop();
            let empty = object.ends_with('{');
            object.push_str(if empty {
                "\"latency\":"
            } else {
                ",\"latency\":"
            });
            object.push_str(&json);
            object.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimation::sketch::{LatencySketch, Sample};

    #[test]
    fn the_page_reads_back_as_it_was_written() {
        let mut sketch = LatencySketch::new();
        for v in [3.0, 40.0, 41.0, 900.0] {
            sketch.record(Sample::Completed(v));
        }
        sketch.record(Sample::Censored(120.0));
        let export = LatencyExport {
            window_s: 60.0,
            hedge_share: 0.07,
            budget_percent: 10.0,
            policy: "tail-aware".into(),
            keys: vec![KeyDelta::new("a \"quoted\"", "/api", &sketch)],
        };
        for page in ["{}", r#"{"keys":3}"#] {
            let mut text = page.to_string();
            export.append_to(&mut text);
            let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
            let back: LatencyExport = serde_json::from_value(v["latency"].clone()).expect("export");
            assert_eq!(back.keys[0].origin, "a \"quoted\"");
            assert_eq!(back.keys[0].sketch(), sketch);
            assert_eq!((back.window_s, back.hedge_share), (60.0, 0.07));
            assert_eq!(back.policy, "tail-aware");
        }
    }
}
