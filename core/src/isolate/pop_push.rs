//! The isolate's side of the PoP push: what goes in the next one (the PoP
//! client's delta, the metrics' difference, the busy routes' delays, the
//! errors since the last accepted one) and what its reply changes.

use super::{Isolate, DELAY_REPORT_CHANGE, DELAY_REPORT_REFRESH_MS};
use crate::estimation::delay_plan::RouteDelay;
use crate::pop::link::origin_rates;
use crate::pop::probes::STALE_AFTER_PROBES;
use crate::pop::push::{ErrorReport, PushReply, RouteDelayReport};

impl Isolate {
    /// The push that is due: the PoP client's delta, the metrics' difference
    /// since the last accepted push, each busy route's delay now and the
    /// errors since the last accepted push.
    pub(super) fn take_push(&mut self, now_ms: f64) -> Vec<u8> {
        let reports = self.route_delay_reports(now_ms);
        let route_delays = self.delay_reports_to_push(reports, now_ms);
        let quantile = self.params.delay.quantile;
        let mut push = (self.hedger.pop).take_push(now_ms, quantile, &self.origin_names);
        push.route_delays = route_delays;
        push.worker_version = self.version.to_string();
        let delta = self.metrics.minus(&self.metrics_pushed);
        if !delta.is_empty() {
            push.metrics = Some(delta);
            self.metrics_in_flight = Some(self.metrics.clone());
        }
        let since = self.errors_pushed_ms;
        push.errors = (self.recent_errors.iter())
            .filter(|e| e.at_ms > since)
            .map(|e| ErrorReport {
                at_ms: e.at_ms,
                route: e.route.clone(),
                status: e.status,
                what: e.what.to_string(),
                origin: e.origin.clone(),
            })
            .collect();
        self.errors_in_flight_ms = push.errors.last().map(|e| e.at_ms);
        push.encode()
    }

    /// The delay now of each (origin, route) with samples in the window,
    /// as a primary there would get it, for the PoP's dashboard.
    pub(super) fn route_delay_reports(&mut self, now_ms: f64) -> Vec<RouteDelayReport> {
        let mut reports = Vec::new();
        for (origin, route) in self.hedger.estimator.route_keys(now_ms) {
            let RouteDelay { choice, benefit } = self.hedger.route_delay(origin, &route, now_ms);
            let (Some(choice), Some(name)) = (choice, self.origin_names.get(origin)) else {
                continue;
            };
            reports.push(RouteDelayReport {
                origin: name.clone(),
                route,
                delay_ms: choice.delay_ms,
                basis: choice.basis.as_str().to_string(),
                predicted_share: benefit.map(|b| b.hedge_share),
                predicted_tail_ms: benefit.map(|b| b.tail_ms),
                unhedged_tail_ms: benefit.map(|b| b.unhedged_tail_ms),
            });
        }
        reports
    }

    /// Of `reports`, those that moved since they were last pushed (or were
    /// pushed over [`DELAY_REPORT_REFRESH_MS`] ago).
    fn delay_reports_to_push(
        &mut self,
        reports: Vec<RouteDelayReport>,
        now_ms: f64,
    ) -> Vec<RouteDelayReport> {
        let pushed = &mut self.delays_pushed;
        pushed.retain(|_, (_, _, at_ms)| now_ms - *at_ms < DELAY_REPORT_REFRESH_MS);
        reports
            .into_iter()
            .filter(|r| {
                let key = (r.origin.clone(), r.route.clone());
                let unchanged = pushed.get(&key).is_some_and(|(ms, basis, _)| {
                    *basis == r.basis && (r.delay_ms - ms).abs() <= DELAY_REPORT_CHANGE * ms
                });
                if !unchanged {
                    pushed.insert(key, (r.delay_ms, r.basis.clone(), now_ms));
                }
                !unchanged
            })
            .collect()
    }

    /// The PoP aggregator answered a push of `bytes` bytes.
    pub fn push_succeeded(&mut self, reply: &PushReply, bytes: usize, now_ms: f64) {
        let names = &self.origin_names;
        (self.hedger.pop).push_succeeded(reply, bytes, now_ms, names);
        (self.hedger.gate).note_pop_rates(&origin_rates(reply, names), now_ms);
        let verdicts: Vec<(usize, bool)> = (reply.probes.iter())
            .filter_map(|v| Some((names.iter().position(|n| *n == v.origin)?, v.up)))
            .collect();
        let probes = &self.params.pop.probes;
        let fresh_ms = STALE_AFTER_PROBES * probes.interval_ms + probes.timeout_ms;
        (self.hedger.gate).note_probes(&verdicts, fresh_ms, now_ms);
        if let Some(pushed) = self.metrics_in_flight.take() {
            self.metrics_pushed = pushed;
        }
        if let Some(at_ms) = self.errors_in_flight_ms.take() {
            self.errors_pushed_ms = at_ms;
        }
    }

    /// A push failed; how many have failed in a row.
    pub fn push_failed(&mut self, now_ms: f64) -> u32 {
        self.hedger.pop.push_failed(now_ms);
        self.metrics_in_flight = None;
        self.errors_in_flight_ms = None;
        self.hedger.pop.counts().failing_in_a_row
    }
}
