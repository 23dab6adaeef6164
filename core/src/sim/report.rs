//! Percentiles, the oracle bound and the report table (the lab's columns).

use super::engine::RunResult;
use super::hindsight::HindsightBound;
use super::percentile::percentile;

/// The best tail one hedge can give at an extra load, from independent legs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OracleBound {
    /// The hedge delay the oracle uses: the (1 - b) quantile, ms.
    pub delay_ms: f64,
    /// Its p99, ms.
    pub p99: f64,
    /// Its p99.9, ms.
    pub p999: f64,
}

/// The oracle at extra load `b` (0-1) from pass-through latencies: hedge at
/// d = F^-1(1 - b); T = min(X1, d + X2) has P(T > t) = S(t) S(t - d) past d.
/// The same computation as the lab's `oracle.mjs`.
pub fn oracle_bound(samples: &[f64], b: f64) -> OracleBound {
    let mut sorted = samples.to_vec();
    let d = percentile(&mut sorted, 1.0 - b);
    let n = sorted.len() as f64;
    let survival = |t: f64| (sorted.len() - sorted.partition_point(|&x| x <= t)) as f64 / n;
    let hedged = |t: f64| {
        if t < d {
            survival(t)
        } else {
            survival(t) * survival(t - d)
        }
    };
    let at = |q: f64| {
        let (mut lo, mut hi) = (0.0, sorted.last().copied().unwrap_or(0.0) + d);
        for _ in 0..60 {
            let mid = (lo + hi) / 2.0;
            if hedged(mid) <= 1.0 - q {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi
    };
    OracleBound {
        delay_ms: d,
        p99: at(0.99),
        p999: at(0.999),
    }
}

/// One configuration's figures, as the lab reports them.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Configuration name.
    pub name: String,
    /// Percentiles, ms.
    pub p50: f64,
    /// p90, ms.
    pub p90: f64,
    /// p99, ms.
    pub p99: f64,
    /// p99.9, ms.
    pub p999: f64,
    /// Extra origin requests, % of requests.
    pub extra_pct: f64,
    /// Hedges won, % of hedges.
    pub hedge_wins_pct: f64,
    /// Wasted origin work, % of all origin work.
    pub wasted_pct: f64,
    /// Share of legs each origin got, %.
    pub per_origin_pct: Vec<f64>,
    /// Client-visible errors.
    pub errors: u64,
    /// Measured requests.
    pub requests: u64,
    /// (latency ms, fraction) along the percentile curve, p0 to p99.99, for
    /// the plot.
    pub curve: Vec<(f64, f64)>,
}

impl Row {
    /// The row for `result`.
    pub fn from_result(name: &str, result: &RunResult) -> Self {
        let mut l = result.latencies_ms.clone();
        let pct = |a: f64, b: f64| if b > 0.0 { 100.0 * a / b } else { 0.0 };
        let legs: u64 = result.per_origin.iter().sum();
        Row {
            name: name.to_string(),
            p50: percentile(&mut l, 0.5),
            p90: percentile(&mut l, 0.9),
            p99: percentile(&mut l, 0.99),
            p999: percentile(&mut l, 0.999),
            extra_pct: pct(result.hedges as f64, result.requests as f64),
            hedge_wins_pct: pct(result.hedge_wins as f64, result.hedges as f64),
            wasted_pct: pct(result.wasted_ms, result.origin_work_ms),
            per_origin_pct: result
                .per_origin
                .iter()
                .map(|&n| pct(n as f64, legs as f64))
                .collect(),
            errors: result.errors,
            requests: result.requests,
            curve: curve(&mut l),
        }
    }

    /// The row as JSON (for the report's JSON file).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name, "p50_ms": self.p50, "p90_ms": self.p90, "p99_ms": self.p99,
            "p999_ms": self.p999, "extra_origin_requests_pct": self.extra_pct,
            "hedge_wins_pct": self.hedge_wins_pct, "wasted_origin_work_pct": self.wasted_pct,
            "per_origin_legs_pct": self.per_origin_pct, "errors": self.errors,
            "requests": self.requests, "curve": self.curve,
        })
    }
}

/// Points along the percentile curve, evenly spaced in nines (p0 to p99.99).
fn curve(sorted: &mut [f64]) -> Vec<(f64, f64)> {
    (0..=200)
        .map(|k| {
            let nines = 4.0 * f64::from(k) / 200.0;
            let f = 1.0 - 10f64.powf(-nines);
            (percentile(sorted, f.max(1e-9)), f)
        })
        .collect()
}

/// The rows as a markdown table with the lab's columns.
pub fn markdown_table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| configuration | p50 ms | p90 ms | p99 ms | p99.9 ms | extra origin req % | hedge wins % | wasted origin work % | legs per origin % | errors |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let per_origin: Vec<String> = r.per_origin_pct.iter().map(|p| format!("{p:.0}")).collect();
        let wins = if r.extra_pct > 0.0 {
            format!("{:.1}", r.hedge_wins_pct)
        } else {
            "-".into()
        };
        out.push_str(&format!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {:.1} | {} | {} |\n",
            r.name,
            r.p50,
            r.p90,
            r.p99,
            r.p999,
            r.extra_pct,
            wins,
            r.wasted_pct,
            per_origin.join(" / "),
            r.errors
        ));
    }
    out
}

/// One scenario's line of the summary: the pass-through, the previous
/// default (fixed p95), the default and the oracle at the default's load.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryLine {
    /// Scenario name.
    pub scenario: String,
    /// The pass-through's row.
    pub pass_through: Row,
    /// The fixed-quantile p95 row.
    pub fixed: Row,
    /// The default's row.
    pub default: Row,
    /// The oracle at the default's extra load.
    pub oracle: OracleBound,
    /// The best fixed (d, q) in hindsight for the default's own run, at its
    /// extra load.
    pub bound: HindsightBound,
}

impl SummaryLine {
    /// The default's p99 over the bound's.
    pub fn p99_to_bound(&self) -> f64 {
        self.default.p99 / self.bound.p99.latency_ms
    }

    /// The default's p99.9 over the bound's.
    pub fn p999_to_bound(&self) -> f64 {
        self.default.p999 / self.bound.p999.latency_ms
    }
}

/// The scenarios side by side (the table docs/lab.md keeps, generated).
pub fn summary_table(lines: &[SummaryLine]) -> String {
    let errors = |r: &Row| {
        if r.errors > 0 {
            format!(", {} errors", r.errors)
        } else {
            String::new()
        }
    };
    let mut out = String::from(
        "| scenario | pass-through p50 / p99 / p99.9 | fixed p95 (previous default) p50 / p99 / p99.9, extra | tail-aware (default) p50 / p99 / p99.9, extra, wasted work | oracle at the default's extra p99 / p99.9 | hindsight bound at the default's extra: p99 (d ms, q[, fastest origin]) / p99.9 (d ms, q[, fastest origin]) | default ÷ bound p99 / p99.9 | default p99 ÷ pass-through |\n|---|---|---|---|---|---|---|---|\n",
    );
    for l in lines {
        let (p, f, d) = (&l.pass_through, &l.fixed, &l.default);
        let point = |b: &super::hindsight::BoundPoint| {
            if b.delay_ms.is_finite() {
                let target = if b.to_fastest { ", fastest origin" } else { "" };
                format!(
                    "{:.1} ({:.1}, {:.2}{target})",
                    b.latency_ms, b.delay_ms, b.q
                )
            } else {
                format!("{:.1} (no hedge)", b.latency_ms)
            }
        };
        out.push_str(&format!(
            "| {} | {:.1} / {:.1} / {:.1}{} | {:.1} / {:.1} / {:.1}, {:.1}%{} | {:.1} / {:.1} / {:.1}, {:.1}%, {:.1}%{} | {:.1} / {:.1} | {} / {} | {:.2} / {:.2} | {:.2} |\n",
            l.scenario,
            p.p50, p.p99, p.p999, errors(p),
            f.p50, f.p99, f.p999, f.extra_pct, errors(f),
            d.p50, d.p99, d.p999, d.extra_pct, d.wasted_pct, errors(d),
            l.oracle.p99, l.oracle.p999,
            point(&l.bound.p99), point(&l.bound.p999),
            l.p99_to_bound(), l.p999_to_bound(),
            d.p99 / p.p99,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut xs: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&mut xs, 0.5), 50.0);
        assert_eq!(percentile(&mut xs, 0.99), 99.0);
        assert_eq!(percentile(&mut xs, 1.0), 100.0);
    }

    #[test]
    fn the_oracle_hedges_the_slowest_share() {
        // 98% at 10 ms, 2% at 1,000 ms: hedging the slowest 5% after the
        // 95th percentile (10 ms) leaves only both legs slow (0.04%).
        let xs: Vec<f64> = (0..10_000)
            .map(|i| if i % 50 == 0 { 1_000.0 } else { 10.0 })
            .collect();
        let o = oracle_bound(&xs, 0.05);
        assert_eq!(o.delay_ms, 10.0);
        assert!(o.p99 <= 20.0 + 1e-6, "{o:?}");
    }
}
