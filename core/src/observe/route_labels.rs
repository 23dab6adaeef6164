//! Which route keys get a label of their own in the stats and metrics.
//!
//! Configured routes (`HEDGE_ROUTES` names) always
//! keep theirs. Other keys (the leading path segments of whatever clients
//! send) share [`MAX_UNCONFIGURED_LABELS`] labels: a key holds one while it
//! is used, and one idle for [`LABEL_IDLE_MS`] gives its place up, its counts
//! folded into [`OTHER_ROUTE`] by the caller. So a scanner's thousand first
//! segments cost the configured routes nothing, and cost ordinary keys their
//! labels only while the scan goes on.

/// The route label of requests whose key has no label of its own.
pub const OTHER_ROUTE: &str = "_other";
/// Most labels held for keys no operator configured.
pub const MAX_UNCONFIGURED_LABELS: usize = 64;
/// A key unused this long gives its label up when another needs it.
pub const LABEL_IDLE_MS: f64 = 600_000.0;

/// The labels in use (see the module docs).
#[derive(Debug)]
pub struct RouteLabels {
    /// A few dozen at most: a list is smaller in the Worker than a set.
    configured: Vec<String>,
    /// Each unconfigured label and when it was last used: a list searched
    /// in order (64 short strings) is smaller in the Worker than a map.
    unconfigured: Vec<(String, f64)>,
}

// === impl RouteLabels ===

impl RouteLabels {
    /// Labels for `configured` keys always, and for at most
    /// [`MAX_UNCONFIGURED_LABELS`] others at a time.
    pub fn new(configured: impl IntoIterator<Item = String>) -> Self {
        Self {
            configured: configured.into_iter().collect(),
            unconfigured: Vec::new(),
        }
    }

    /// The label `key` is counted under at `now_ms`: itself, or
    /// [`OTHER_ROUTE`] while every unconfigured label is in use. The second
    /// value lists labels that gave their place up now (idle ones): the
    /// caller folds their counts into [`OTHER_ROUTE`]. No allocation for a
    /// key that already has its label.
    pub fn label(&mut self, key: String, now_ms: f64) -> (String, Vec<String>) {
        if key == OTHER_ROUTE || self.configured.contains(&key) {
            return (key, Vec::new());
        }
        if let Some((_, used)) = self.unconfigured.iter_mut().find(|(k, _)| *k == key) {
            *used = now_ms;
            return (key, Vec::new());
        }
        let mut gone = Vec::new();
        if self.unconfigured.len() >= MAX_UNCONFIGURED_LABELS {
            let mut kept = Vec::with_capacity(self.unconfigured.len());
            for (label, used) in self.unconfigured.drain(..) {
                if now_ms - used >= LABEL_IDLE_MS {
                    gone.push(label);
                } else {
                    kept.push((label, used));
                }
            }
            self.unconfigured = kept;
        }
        if self.unconfigured.len() >= MAX_UNCONFIGURED_LABELS {
            return (OTHER_ROUTE.to_string(), gone);
        }
        self.unconfigured.push((key.clone(), now_ms));
        (key, gone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_labels_survive_a_scanner_and_idle_ones_give_way() {
        let mut labels = RouteLabels::new(["api".to_string()]);
        for i in 0..1_000 {
            let (label, gone) = labels.label(format!("/scan{i}"), f64::from(i));
            assert!(gone.is_empty());
            let expected = if i < 64 {
                format!("/scan{i}")
            } else {
                OTHER_ROUTE.into()
            };
            assert_eq!(label, expected);
        }
        assert_eq!(
            labels.label("api".into(), 1_000.0).0,
            "api",
            "configured: always"
        );
        assert_eq!(
            labels.label("/scan3".into(), 1_000.0).0,
            "/scan3",
            "held while in use"
        );
        // Ten minutes on, the scan is over: a new key takes an idle label.
        let later = 64.0 + LABEL_IDLE_MS;
        let (label, gone) = labels.label("/products".into(), later);
        assert_eq!(label, "/products");
        assert_eq!(gone.len(), 63, "the idle scan labels are given up");
        assert!(
            !gone.contains(&"/scan3".to_string()),
            "not idle long enough yet"
        );
        assert_eq!(labels.label(OTHER_ROUTE.into(), later).0, OTHER_ROUTE);
    }
}
