//! The metrics as text a Prometheus-compatible scraper takes: OpenMetrics
//! 1.0 when the scraper asks for it (`Accept: application/openmetrics-text`),
//! the Prometheus text format 0.0.4 otherwise. Names follow the Prometheus
//! conventions: a `hedgehog_` prefix, base units (seconds), `_total` on
//! counters.

use super::metrics::{MetricCounts, RouteMetrics, BUCKETS_S, LEGS, LEG_OUTCOMES, SERVED};
use crate::admission::payoff::CAUSES;
use crate::pop::push::RouteDelayReport;

/// Which text format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `application/openmetrics-text; version=1.0.0`.
    OpenMetrics,
    /// `text/plain; version=0.0.4`.
    Prometheus,
}

impl Format {
    /// The format an `Accept` header asks for.
    pub fn from_accept(accept: Option<&str>) -> Self {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Self::OpenMetrics,
            _ => Self::Prometheus,
        }
    }

    /// Its `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Self::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// A metric family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (samples end in `_total`).
    Counter,
    /// Goes up and down.
    Gauge,
    /// Buckets, count and sum.
    Histogram,
    /// Constant 1 with labels that describe (samples end in `_info`).
    Info,
}

/// Writes families and samples; [`Exposition::finish`] gives the text.
#[derive(Debug)]
pub struct Exposition {
    format: Format,
    out: String,
    /// Labels every sample carries (the isolate's id, say), already written.
    common: String,
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A number as both formats write it (`+Inf`, `NaN`; `1.0` style floats).
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        // Rounded to the nanosecond: sums of milliseconds / 1000 otherwise
        // print as 0.10300000000000004.
        format!("{:?}", (v * 1e9).round() / 1e9)
    }
}

impl Exposition {
    /// Empty; every sample carries `common` labels (name, value).
    pub fn new(format: Format, common: &[(&str, &str)]) -> Self {
        let common = common
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
            .collect::<Vec<_>>()
            .join(",");
        Self {
            format,
            out: String::with_capacity(8 * 1024),
            common,
        }
    }

    /// Starts the family `name` (without `_total` or `_info`).
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let (type_name, kind_name) = match (self.format, kind) {
            (Format::Prometheus, Kind::Counter) => (format!("{name}_total"), "counter"),
            (Format::Prometheus, Kind::Info) => (format!("{name}_info"), "gauge"),
            (_, Kind::Counter) => (name.to_string(), "counter"),
            (_, Kind::Gauge) => (name.to_string(), "gauge"),
            (_, Kind::Histogram) => (name.to_string(), "histogram"),
            (Format::OpenMetrics, Kind::Info) => (name.to_string(), "info"),
        };
        self.out.push_str(&format!(
            "# HELP {type_name} {}\n# TYPE {type_name} {kind_name}\n",
            help.replace('\\', "\\\\").replace('\n', "\\n")
        ));
    }

    /// One sample: the full sample name, its labels and value.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        let mut first = true;
        let mut open = |out: &mut String| {
            out.push(if first { '{' } else { ',' });
            first = false;
        };
        if !self.common.is_empty() {
            open(&mut self.out);
            self.out.push_str(&self.common);
        }
        for (k, v) in labels {
            open(&mut self.out);
            self.out.push_str(&format!("{k}=\"{}\"", escape(v)));
        }
        if !first {
            self.out.push('}');
        }
        self.out.push(' ');
        self.out.push_str(&number(value));
        self.out.push('\n');
    }

    /// A gauge family with its one unlabelled sample.
    pub fn gauge(&mut self, name: &str, help: &str, value: f64) {
        self.family(name, Kind::Gauge, help);
        self.sample(name, &[], value);
    }

    /// The samples of a histogram with `counts` per bucket of [`BUCKETS_S`]
    /// (+Inf last) and `sum_s`.
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], counts: &[u64], sum_s: f64) {
        let mut cumulative = 0u64;
        for (i, c) in counts.iter().enumerate() {
            cumulative += c;
            let le = BUCKETS_S
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |b| format!("{b:?}"));
            let mut with_le: Vec<(&str, &str)> = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&format!("{name}_bucket"), &with_le, cumulative as f64);
        }
        self.sample(&format!("{name}_count"), labels, cumulative as f64);
        self.sample(&format!("{name}_sum"), labels, sum_s);
    }

    /// The text (OpenMetrics ends with `# EOF`).
    pub fn finish(mut self) -> String {
        if self.format == Format::OpenMetrics {
            self.out.push_str("# EOF\n");
        }
        self.out
    }
}

/// How a family of [`COUNT_FAMILIES`] reads its samples from the counts.
#[derive(Clone, Copy)]
enum Read {
    /// One sample per route: this number of its counts.
    Route(fn(&RouteMetrics) -> f64),
    /// Per route, cause (delay, stall, failure) and outcome (won, lost).
    RouteHedges,
    /// Per route and how its requests were answered.
    RouteServed,
    /// Per origin, leg (primary, hedge) and outcome.
    OriginLegs,
    /// Per reason a race sent no hedge.
    Skips,
    /// One number for the whole scope.
    ThirdAttempts,
    /// A histogram per route: the client's latency.
    RouteDuration,
    /// A histogram per origin and leg: time to the origin's answer.
    OriginLegDuration,
    /// A histogram per origin: the hedge delay of its races.
    HedgeDelay,
}

/// The counted facts of [`MetricCounts`], one family each, in the order
/// they are written: name, kind, help and how its samples are read.
const COUNT_FAMILIES: [(&str, Kind, &str, Read); 12] = [
    ("hedgehog_requests", Kind::Counter, "Requests that ran a race (proxied, or a background refresh; not served from the cache), by route.", Read::Route(|r| r.requests as f64)),
    ("hedgehog_served", Kind::Counter, "Requests by route and how they were answered: origin (a race), stale-if-error (a stale copy for a failed race), hit, coalesced, stale-while-revalidate (from the cache), refresh (a background refresh, no client).", Read::RouteServed),
    ("hedgehog_client_errors", Kind::Counter, "Requests answered with a 5xx or without any origin answer, by route.", Read::Route(|r| r.client_errors as f64)),
    ("hedgehog_hedges", Kind::Counter, "Hedges sent, by route, cause (delay, stall, failure) and outcome (won: its answer was served; lost).", Read::RouteHedges),
    ("hedgehog_origin_legs", Kind::Counter, "Origin requests, by origin, leg (primary, hedge) and outcome (won, lost, aborted, shed, failed).", Read::OriginLegs),
    ("hedgehog_hedge_skips", Kind::Counter, "Races that sent no hedge, by reason (as in Server-Timing hedge-skip).", Read::Skips),
    ("hedgehog_third_attempts", Kind::Counter, "Third attempts sent after the primary and the hedge both failed fast.", Read::ThirdAttempts),
    ("hedgehog_origin_work_seconds", Kind::Counter, "Origin time spent on the legs of each route's races.", Read::Route(|r| r.origin_s)),
    ("hedgehog_wasted_origin_work_seconds", Kind::Counter, "Origin time spent on legs cut short (losers, timeouts), by route.", Read::Route(|r| r.wasted_origin_s)),
    ("hedgehog_request_duration_seconds", Kind::Histogram, "Latency the client saw, from arrival to the answer's headers, by route.", Read::RouteDuration),
    ("hedgehog_origin_leg_duration_seconds", Kind::Histogram, "Time to each origin's answer, per leg that got one, by leg (primary, hedge).", Read::OriginLegDuration),
    ("hedgehog_hedge_delay_seconds", Kind::Histogram, "The hedge delay of each race, by its primary origin.", Read::HedgeDelay),
];

/// The counter and histogram families of `counts` (both scopes have them),
/// as the table of count families lists them.
pub fn write_counts(x: &mut Exposition, counts: &MetricCounts) {
    for (name, kind, help, read) in COUNT_FAMILIES {
        x.family(name, kind, help);
        let total = format!("{name}_total");
        match read {
            Read::Route(value) => {
                for (route, r) in &counts.routes {
                    x.sample(&total, &[("route", route)], value(r));
                }
            }
            Read::RouteHedges => {
                for (route, r) in &counts.routes {
                    for (cause, by_outcome) in CAUSES.iter().zip(r.hedges) {
                        for (outcome, n) in ["won", "lost"].iter().zip(by_outcome) {
                            let labels = [
                                ("route", route.as_str()),
                                ("cause", cause.as_str()),
                                ("outcome", outcome),
                            ];
                            x.sample(&total, &labels, n as f64);
                        }
                    }
                }
            }
            Read::RouteServed => {
                // Only the ways a route was answered at all: six lines per
                // route would mostly be zeros.
                for (route, r) in &counts.routes {
                    for (how, n) in SERVED.iter().zip(r.served).filter(|(_, n)| *n > 0) {
                        x.sample(&total, &[("route", route), ("how", how)], n as f64);
                    }
                }
            }
            Read::OriginLegs => {
                for (origin, o) in &counts.origins {
                    for (leg, by_outcome) in LEGS.iter().zip(o.legs) {
                        for (outcome, n) in LEG_OUTCOMES.iter().zip(by_outcome) {
                            let labels = [
                                ("origin", origin.as_str()),
                                ("leg", leg),
                                ("outcome", outcome),
                            ];
                            x.sample(&total, &labels, n as f64);
                        }
                    }
                }
            }
            Read::Skips => {
                for (reason, n) in &counts.hedge_skips {
                    x.sample(&total, &[("reason", reason)], *n as f64);
                }
            }
            Read::ThirdAttempts => x.sample(&total, &[], counts.third_attempts as f64),
            Read::RouteDuration => {
                for (route, r) in &counts.routes {
                    let h = &r.duration;
                    x.histogram(name, &[("route", route)], &h.counts, h.sum_s);
                }
            }
            Read::OriginLegDuration => {
                for (origin, o) in &counts.origins {
                    for (leg, h) in LEGS.iter().zip(&o.leg_duration) {
                        x.histogram(
                            name,
                            &[("origin", origin), ("leg", leg)],
                            &h.counts,
                            h.sum_s,
                        );
                    }
                }
            }
            Read::HedgeDelay => {
                for (origin, o) in &counts.origins {
                    let h = &o.hedge_delay;
                    x.histogram(name, &[("origin", origin)], &h.counts, h.sum_s);
                }
            }
        }
    }
}

/// The route gauges: each (primary, route)'s delay in force and, with a
/// delay by predicted benefit, its predicted hedge share and tails (the
/// isolate's own now, or in the PoP scope what its isolates last reported).
pub fn write_route_delays<'a>(
    x: &mut Exposition,
    reports: impl Iterator<Item = &'a RouteDelayReport> + Clone,
) {
    x.family("hedgehog_route_hedge_delay_seconds", Kind::Gauge, "The hedge delay a request on the route would get now, by primary origin (in the PoP scope, the latest an isolate reported).");
    for d in reports.clone() {
        let labels = [
            ("origin", d.origin.as_str()),
            ("route", d.route.as_str()),
            ("basis", d.basis.as_str()),
        ];
        x.sample(
            "hedgehog_route_hedge_delay_seconds",
            &labels,
            d.delay_ms / 1000.0,
        );
    }
    x.family(
        "hedgehog_route_predicted_hedge_ratio",
        Kind::Gauge,
        "With a delay by predicted benefit: the share of requests expected to be hedged.",
    );
    for d in reports.clone() {
        if let Some(share) = d.predicted_share {
            x.sample(
                "hedgehog_route_predicted_hedge_ratio",
                &[("origin", &d.origin), ("route", &d.route)],
                share,
            );
        }
    }
    x.family("hedgehog_route_predicted_tail_seconds", Kind::Gauge, "With a delay by predicted benefit: the mean of the slowest 1% predicted with hedging (hedged=true) and without.");
    for d in reports {
        for (hedged, tail) in [("true", d.predicted_tail_ms), ("false", d.unhedged_tail_ms)] {
            if let Some(ms) = tail {
                x.sample(
                    "hedgehog_route_predicted_tail_seconds",
                    &[
                        ("origin", &d.origin),
                        ("route", &d.route),
                        ("hedged", hedged),
                    ],
                    ms / 1000.0,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped_and_numbers_canonical() {
        let mut x = Exposition::new(Format::OpenMetrics, &[("isolate", "a\"b")]);
        x.family("hedgehog_x", Kind::Gauge, "help");
        x.sample("hedgehog_x", &[("route", "/a\\b\nc")], 0.25);
        x.sample("hedgehog_x", &[], f64::INFINITY);
        x.sample("hedgehog_x", &[], 3.0);
        let text = x.finish();
        assert!(
            text.contains(r#"hedgehog_x{isolate="a\"b",route="/a\\b\nc"} 0.25"#),
            "{text}"
        );
        assert!(text.contains("} +Inf\n"), "{text}");
        assert!(text.contains("} 3\n"), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn counters_are_named_as_each_format_wants() {
        let mut om = Exposition::new(Format::OpenMetrics, &[]);
        om.family("hedgehog_requests", Kind::Counter, "h");
        let mut prom = Exposition::new(Format::Prometheus, &[]);
        prom.family("hedgehog_requests", Kind::Counter, "h");
        assert!(om.finish().contains("# TYPE hedgehog_requests counter\n"));
        let prom = prom.finish();
        assert!(prom.contains("# TYPE hedgehog_requests_total counter\n"));
        assert!(!prom.contains("# EOF"));
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_end_at_inf() {
        let mut x = Exposition::new(Format::Prometheus, &[]);
        let mut counts = vec![0; BUCKETS_S.len() + 1];
        counts[0] = 2;
        counts[3] = 1;
        counts[BUCKETS_S.len()] = 1;
        x.histogram("h", &[], &counts, 1.5);
        let text = x.finish();
        assert!(text.contains("h_bucket{le=\"0.005\"} 2\n"), "{text}");
        assert!(text.contains("h_bucket{le=\"0.05\"} 3\n"), "{text}");
        assert!(text.contains("h_bucket{le=\"30.0\"} 3\n"), "{text}");
        assert!(text.contains("h_bucket{le=\"+Inf\"} 4\n"), "{text}");
        assert!(text.contains("h_count 4\nh_sum 1.5\n"), "{text}");
    }
}
