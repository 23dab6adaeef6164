//! The aggregator's metrics text: the PoP's summed counts, each busy
//! route's latest delay, the probes' verdicts and the counts per Worker
//! version.

use crate::vec_map::VecMap;

use super::PopAggregate;
use crate::observe::exposition::{write_counts, write_route_delays, Exposition, Format, Kind};
use crate::observe::metrics::RouteMetrics;

impl PopAggregate {
    /// The PoP-scope metrics at `now_ms`: every isolate's pushed counters
    /// summed, and the PoP's own gauges (`budget_ratio`: the configured budget).
    pub fn metrics_text(
        &mut self,
        format: Format,
        pop: &str,
        budget_ratio: f64,
        now_ms: f64,
    ) -> String {
        let mut x = Exposition::new(format, &[("pop", pop)]);
        write_counts(&mut x, &self.counters.metrics);
        write_versions(&mut x, &self.versions);
        x.family("hedgehog_hedge_budget_ratio", Kind::Gauge, "The configured hedge budget: hedges allowed per eligible request (HEDGE_BUDGET_PERCENT / 100).");
        x.sample("hedgehog_hedge_budget_ratio", &[], budget_ratio);
        x.family("hedgehog_pop_hedge_ratio", Kind::Gauge, "Hedges per hedge-eligible request over the PoP's window (the budget holds this under HEDGE_BUDGET_PERCENT / 100).");
        x.sample("hedgehog_pop_hedge_ratio", &[], self.hedge_fraction(now_ms));
        x.family(
            "hedgehog_pop_eligible_requests",
            Kind::Gauge,
            "Hedge-eligible requests over the PoP's window.",
        );
        let eligible = self.counters.hedges.total(now_ms).0;
        x.sample("hedgehog_pop_eligible_requests", &[], eligible as f64);
        let rates = self.origin_rates(now_ms);
        x.family(
            "hedgehog_origin_5xx_ratio",
            Kind::Gauge,
            "Share of an origin's answers over the window that were 5xx or failures.",
        );
        for r in &rates {
            x.sample(
                "hedgehog_origin_5xx_ratio",
                &[("origin", &r.origin)],
                r.rate_5xx,
            );
        }
        self.write_probes(&mut x);
        self.write_latest_route_delays(&mut x, now_ms);
        x.family(
            "hedgehog_pop_pushes",
            Kind::Counter,
            "Pushes from isolates merged.",
        );
        x.sample(
            "hedgehog_pop_pushes_total",
            &[],
            self.counters.pushes as f64,
        );
        x.family(
            "hedgehog_pop_latency_keys",
            Kind::Gauge,
            "(origin, route) latency sketches held.",
        );
        x.sample("hedgehog_pop_latency_keys", &[], self.keys.len() as f64);
        x.finish()
    }

    /// The delay in force per (origin, route), as the isolates last
    /// reported it within the window.
    fn write_latest_route_delays(&mut self, x: &mut Exposition, now_ms: f64) {
        let window_ms = self.params.window.window_ms;
        self.route_delays
            .retain(|_, (_, at)| now_ms - *at <= window_ms);
        write_route_delays(x, self.route_delays.values().map(|(d, _)| d));
    }

    /// The active probes' families (nothing without probe results).
    fn write_probes(&self, x: &mut Exposition) {
        x.family("hedgehog_origin_probe_up", Kind::Gauge, "The active probes' verdict: 1 passing, 0 failing (2 failures in a row); absent before a verdict.");
        for (origin, r) in self.probes.records() {
            if let Some(up) = r.up {
                x.sample(
                    "hedgehog_origin_probe_up",
                    &[("origin", origin)],
                    f64::from(u8::from(up)),
                );
            }
        }
        x.family(
            "hedgehog_origin_probes",
            Kind::Counter,
            "Active health probes sent by this PoP's aggregator, by result.",
        );
        for (origin, r) in self.probes.records() {
            x.sample(
                "hedgehog_origin_probes_total",
                &[("origin", origin), ("result", "pass")],
                r.passed as f64,
            );
            x.sample(
                "hedgehog_origin_probes_total",
                &[("origin", origin), ("result", "fail")],
                r.failed as f64,
            );
        }
        x.family(
            "hedgehog_origin_probe_duration_seconds",
            Kind::Gauge,
            "How long the last probe of the origin took (to its answer, or its failure).",
        );
        for (origin, r) in self.probes.records() {
            if let Some(ms) = r.last_latency_ms {
                x.sample(
                    "hedgehog_origin_probe_duration_seconds",
                    &[("origin", origin)],
                    ms / 1000.0,
                );
            }
        }
    }
}

/// The counts of each Worker version that pushed, for comparing a rollout's
/// versions (the dashboard's version table reads them).
fn write_versions(x: &mut Exposition, versions: &VecMap<String, (RouteMetrics, f64)>) {
    if versions.is_empty() {
        return;
    }
    x.family("hedgehog_version_requests", Kind::Counter, "Requests that ran a race, by Worker version (the deployment's version id), since the aggregator started.");
    for (version, (m, _)) in versions {
        x.sample(
            "hedgehog_version_requests_total",
            &[("version", version)],
            m.requests as f64,
        );
    }
    x.family(
        "hedgehog_version_client_errors",
        Kind::Counter,
        "Requests answered with a 5xx or without any origin answer, by Worker version.",
    );
    for (version, (m, _)) in versions {
        let labels = [("version", version.as_str())];
        x.sample(
            "hedgehog_version_client_errors_total",
            &labels,
            m.client_errors as f64,
        );
    }
    x.family(
        "hedgehog_version_hedges",
        Kind::Counter,
        "Hedges sent, by Worker version and outcome (won, lost).",
    );
    for (version, (m, _)) in versions {
        for (i, outcome) in ["won", "lost"].iter().enumerate() {
            let n: u64 = m.hedges.iter().map(|by_outcome| by_outcome[i]).sum();
            let labels = [("version", version.as_str()), ("outcome", outcome)];
            x.sample("hedgehog_version_hedges_total", &labels, n as f64);
        }
    }
    x.family(
        "hedgehog_version_request_duration_seconds",
        Kind::Histogram,
        "Latency as clients saw it, by Worker version.",
    );
    for (version, (m, _)) in versions {
        let labels = [("version", version.as_str())];
        x.histogram(
            "hedgehog_version_request_duration_seconds",
            &labels,
            &m.duration.counts,
            m.duration.sum_s,
        );
    }
}
