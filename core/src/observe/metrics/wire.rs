//! [`MetricCounts`] on the wire and in storage: flat lists of numbers per
//! route and per origin (serde's derived code for the nested maps and
//! arrays cost the Worker tens of KB).

use serde::{Deserialize, Serialize};

use super::{Histogram, MetricCounts, OriginMetrics, RouteMetrics, BUCKETS_S};

/// [`MetricCounts`] as pushed and stored: per route and per origin its
/// numbers in a fixed order (see `route_numbers` / `origin_numbers`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MetricsWire {
    routes: Vec<(String, Vec<WireNumber>)>,
    origins: Vec<(String, Vec<WireNumber>)>,
    skips: Vec<(String, u64)>,
    third_attempts: u64,
    /// Per route that counted any, its [`RouteMetrics::served`] (a list of
    /// its own: pushes from a version without it still decode).
    #[serde(default)]
    served: Vec<(String, Vec<u64>)>,
}

/// A number on the wire: whole numbers without a fraction (`51`, not
/// `51.0`) and seconds to the microsecond (`2.94`, not
/// `2.9399999999999995`): a push's metrics were a third of its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct WireNumber(f64);

impl From<f64> for WireNumber {
    fn from(x: f64) -> Self {
        WireNumber(if x.is_finite() {
            (x * 1e6).round() / 1e6
        } else {
            x
        })
    }
}

impl Serialize for WireNumber {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let x = self.0;
        if x.fract() == 0.0 && x.abs() < 9.0e15 {
            s.serialize_i64(x as i64)
        } else {
            s.serialize_f64(x)
        }
    }
}

/// Numbers per route on the wire: requests, client errors, 6 hedge
/// counts, wasted and all origin seconds, the duration's sum and buckets.
const ROUTE_NUMBERS: usize = 11 + BUCKETS_S.len() + 1;
/// Numbers per origin: 10 leg counts, then each histogram's sum and buckets
/// (primary legs' latency, hedge legs' latency, the hedge delay).
const ORIGIN_NUMBERS: usize = 10 + 3 * (1 + BUCKETS_S.len() + 1);

fn histogram_from(numbers: &[f64]) -> Histogram {
    Histogram {
        sum_s: numbers.first().copied().unwrap_or(f64::NAN),
        counts: numbers.iter().skip(1).map(|&n| n as u64).collect(),
    }
}

impl From<MetricCounts> for MetricsWire {
    fn from(m: MetricCounts) -> Self {
        let histogram = |out: &mut Vec<f64>, h: &Histogram| {
            out.push(h.sum_s);
            out.extend(h.counts.iter().map(|&c| c as f64));
        };
        let routes = (m.routes.iter())
            .map(|(name, r)| {
                let mut n = vec![r.requests as f64, r.client_errors as f64];
                n.extend(r.hedges.iter().flatten().map(|&c| c as f64));
                n.extend([r.wasted_origin_s, r.origin_s]);
                histogram(&mut n, &r.duration);
                (name.clone(), n.into_iter().map(WireNumber::from).collect())
            })
            .collect();
        let origins = (m.origins.iter())
            .map(|(name, o)| {
                let mut n: Vec<f64> = o.legs.iter().flatten().map(|&c| c as f64).collect();
                histogram(&mut n, &o.leg_duration[0]);
                histogram(&mut n, &o.leg_duration[1]);
                histogram(&mut n, &o.hedge_delay);
                (name.clone(), n.into_iter().map(WireNumber::from).collect())
            })
            .collect();
        let served = (m.routes.iter())
            .filter(|(_, r)| r.served.iter().any(|&n| n > 0))
            .map(|(name, r)| (name.clone(), r.served.to_vec()))
            .collect();
        MetricsWire {
            routes,
            origins,
            skips: m.hedge_skips.into_iter().collect(),
            third_attempts: m.third_attempts,
            served,
        }
    }
}

impl From<MetricsWire> for MetricCounts {
    /// Malformed lists give malformed counts, which [`MetricCounts::check`]
    /// refuses (a wrong length leaves a histogram of the wrong size).
    fn from(w: MetricsWire) -> Self {
        let mut m = MetricCounts::default();
        let numbers = |n: Vec<WireNumber>| -> Vec<f64> { n.into_iter().map(|w| w.0).collect() };
        for (name, n) in w.routes {
            let n = numbers(n);
            let mut hedges = [[0u64; 2]; 3];
            for (slot, v) in hedges.iter_mut().flatten().zip(n.iter().skip(2)) {
                *slot = *v as u64;
            }
            let at = |i: usize| n.get(i).copied().unwrap_or(f64::NAN);
            let duration = if n.len() == ROUTE_NUMBERS {
                histogram_from(&n[10..])
            } else {
                Histogram {
                    counts: Vec::new(),
                    sum_s: 0.0,
                }
            };
            m.routes.insert(
                name,
                RouteMetrics {
                    requests: at(0) as u64,
                    client_errors: at(1) as u64,
                    hedges,
                    wasted_origin_s: at(8),
                    origin_s: at(9),
                    duration,
                    served: [0; 6],
                },
            );
        }
        for (name, n) in w.origins {
            let n = numbers(n);
            let mut legs = [[0u64; 5]; 2];
            for (slot, v) in legs.iter_mut().flatten().zip(&n) {
                *slot = *v as u64;
            }
            let one = 1 + BUCKETS_S.len() + 1;
            let (leg_duration, hedge_delay) = if n.len() == ORIGIN_NUMBERS {
                let at = |k: usize| histogram_from(&n[10 + k * one..10 + (k + 1) * one]);
                ([at(0), at(1)], at(2))
            } else {
                let bad = Histogram {
                    counts: Vec::new(),
                    sum_s: 0.0,
                };
                ([bad.clone(), bad.clone()], bad)
            };
            m.origins.insert(
                name,
                OriginMetrics {
                    legs,
                    leg_duration,
                    hedge_delay,
                },
            );
        }
        // Inserted one by one: collecting into an ordered map could link in a sort.
        for (reason, n) in w.skips {
            m.hedge_skips.insert(reason, n);
        }
        m.third_attempts = w.third_attempts;
        for (name, n) in w.served {
            // Served counts of a route whose other counts did not come are
            // still counts: the route starts at zero.
            let Some(route) = m.route_mut(&name) else {
                continue;
            };
            for (slot, v) in route.served.iter_mut().zip(n) {
                *slot = v;
            }
        }
        m
    }
}
