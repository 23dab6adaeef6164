//! Configuration: the Worker's `HEDGE_*` vars parsed and checked into [`Params`].
//!
//! Every key is optional except `HEDGE_ORIGINS`. Parsing never panics and
//! never falls back silently: every bad key is reported with the reason, and an
//! unknown `HEDGE_*` key is an error too (a typo would otherwise be ignored).

//!
//! `keys.rs` declares every key once (default, range, meaning); `reader.rs`
//! reads them and collects the problems; `origins.rs` checks the origins and
//! their URLs; `parts.rs` holds each part's own reader (`DelayParams::read`
//! and so on), which [`parse`] composes.

mod bearer;
mod keys;
mod origins;
mod parts;
mod reader;
mod routes;

use crate::vec_map::VecMap;
use std::fmt;

use crate::admission::budget::BudgetParams;
use crate::admission::health::HealthParams;
use crate::admission::hedge_gate::{GateParams, RouteScope};
use crate::admission::origin_load::OriginLoadParams;
use crate::admission::payoff::GuardParams;
pub use crate::estimation::delay_policy::HedgePolicy;
use crate::estimation::delay_policy::{DelayParams, HedgeMode};
use crate::estimation::estimator::EstimatorParams;
use crate::observe::request_log::LogLevel;
use crate::pop::aggregate::PopParams;
use crate::pop::link::PopLinkParams;
pub use crate::pop::probes::ProbeParams;
use crate::request::coalesce::CoalesceParams;
use crate::request::eligibility::EligibilityParams;
use crate::request::outbound::upstream_url;
use crate::request::route_key::RouteKeyParams;
pub use keys::{replacement, Key, Range, KEYS, REMOVED, TUNING};

/// Keys that hold a secret: set with `wrangler secret put`, never in `[vars]`
/// (a var is stored in the deployed script's settings in clear text).
pub const SECRET_KEYS: &[&str] = &["HEDGE_STATS_TOKEN"];
pub use origins::Origin;
use reader::Reader;
pub use routes::{route_policy, RouteMode, RoutePolicy};

/// The whole parsed configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Origins in order of preference.
    pub origins: Vec<Origin>,
    /// How hedge delays are chosen.
    pub mode: HedgeMode,
    /// Tail-aware (the default) or the fixed-quantile policy kept for comparison.
    pub policy: HedgePolicy,
    /// Primary choice and stall detection.
    pub origin_load: OriginLoadParams,
    /// Delay choice settings.
    pub delay: DelayParams,
    /// Hedge budget settings.
    pub budget: BudgetParams,
    /// Which requests may be hedged.
    pub eligibility: EligibilityParams,
    /// Most request-body bytes held for replay at once per isolate.
    pub max_held_body_bytes: u64,
    /// How paths map to route keys.
    pub route_keys: RouteKeyParams,
    /// Latency window and key cap.
    pub estimator: EstimatorParams,
    /// Longest wait for response headers from the origins, in milliseconds.
    pub timeout_ms: f64,
    /// Longest silence inside a winner's body before it is cut; `None`: no limit.
    pub body_idle_timeout_ms: Option<f64>,
    /// Origin health and the 5xx-adaptive budget.
    pub health: HealthParams,
    /// With no healthy peer, hedge to the primary itself on a new request.
    pub same_origin_hedge: bool,
    /// Serve and store cacheable GET responses through the Cache API.
    pub cache: bool,
    /// Coalescing of identical concurrent cacheable misses.
    pub coalesce: CoalesceParams,
    /// The PoP aggregate (used when the `POP_AGGREGATOR` binding exists).
    pub pop: PopConfig,
    /// The stats endpoint.
    pub stats: StatsParams,
    /// Which requests get a JSON log line.
    pub log_level: LogLevel,
    /// Percent of successful requests written to Analytics Engine.
    pub analytics_sample_percent: f64,
    /// Per-route policies (`HEDGE_ROUTES`), with each one's eligibility
    /// rules when it sets its own methods.
    pub routes: Vec<RoutePolicy>,
    /// The eligibility rules of each route policy, by index (`None`: the global ones).
    pub route_eligibility: Vec<Option<EligibilityParams>>,
    /// The isolate-busy rule, cutting hedges that do not pay, third attempts.
    pub guards: GuardParams,
}

impl Params {
    /// Where a leg to origin `origin` goes for the client's `path` and
    /// `query`: the one rule for a race's legs and a WebSocket's upgrade
    /// (empty for an origin that is not configured).
    pub fn origin_url(&self, origin: usize, path: &str, query: Option<&str>) -> String {
        (self.origins.get(origin))
            .map_or_else(String::new, |o| upstream_url(&o.base_url, path, query))
    }

    /// The route labels an operator configured (route policy names): they
    /// always keep their label.
    pub fn configured_route_labels(&self) -> Vec<String> {
        self.routes.iter().map(|r| r.name.clone()).collect()
    }
}

/// Where the stats endpoint is and who may read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsParams {
    /// Request path that serves the stats; its siblings `metrics` and
    /// `dashboard` serve the metrics and the dashboard.
    pub path: String,
    /// The one hostname the pages answer on (lowercase), when the operator
    /// gave one (`HEDGE_STATS_PATH = "ops.example.com/__hedge/stats"`):
    /// on any other host the path is proxied like any other. Lets the pages
    /// sit behind Cloudflare Access on their own hostname.
    pub host: Option<String>,
    /// The bearer tokens accepted: one, or two while rotating. None leaves
    /// the pages unserved (the path is proxied like any other).
    pub tokens: Vec<Secret>,
    /// Every token `HEDGE_STATS_TOKEN` names, even when it was refused: an
    /// `Authorization` carrying one never reaches an origin.
    pub withheld: Vec<Secret>,
}

impl StatsParams {
    /// The operator page a request for `host` and `path` names, if any
    /// (only with a token set, and only on the operator's host if given).
    pub fn page(&self, host: &str, path: &str, query: Option<&str>) -> Option<OperatorPage> {
        // An empty path: the location was unreadable, and the pages are off.
        if self.tokens.is_empty()
            || self.path.is_empty()
            || self.host.as_deref().is_some_and(|h| h != host)
        {
            return None;
        }
        let pop = query.is_some_and(|q| q.split('&').any(|kv| kv == "scope=pop"));
        if path == self.path {
            return Some(OperatorPage::Stats { pop });
        }
        let parent = self.path.rsplit_once('/').map_or("", |(p, _)| p);
        let sibling = path.strip_prefix(parent)?.strip_prefix('/')?;
        match sibling {
            "metrics" => Some(OperatorPage::Metrics { pop }),
            "dashboard" if query.is_some_and(|q| q.split('&').any(|kv| kv == "endpoints")) => {
                Some(OperatorPage::Endpoints)
            }
            "dashboard" => Some(OperatorPage::Dashboard),
            _ => None,
        }
    }

    /// Where the dashboard reads from: the stats and metrics paths, as
    /// the Worker serves them (the page never builds a URL of its own).
    pub fn sibling_paths(&self) -> (String, String) {
        let parent = self.path.rsplit_once('/').map_or("", |(p, _)| p);
        (self.path.clone(), format!("{parent}/metrics"))
    }

    /// Whether `authorization` opens the pages: it carries an accepted
    /// token (one, or two while rotating).
    pub fn accepts(&self, authorization: Option<&str>) -> bool {
        any_bearer(&self.tokens, authorization)
    }

    /// Whether an `Authorization` header value carries any word of the
    /// token setting (accepted or not): such a header never reaches an origin.
    pub fn carries_token(&self, authorization: &str) -> bool {
        any_bearer(&self.withheld, Some(authorization))
    }
}

/// Whether `authorization` is `Bearer <one of tokens>`: every token is
/// compared, each in constant time, so the time taken says nothing of which.
fn any_bearer(tokens: &[Secret], authorization: Option<&str>) -> bool {
    (tokens.iter()).fold(false, |hit, t| {
        bearer::bearer_matches(authorization, t.expose()) | hit
    })
}

/// The operator's pages, beside the stats path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorPage {
    /// The stats (JSON); `pop`: the aggregator's (`?scope=pop`).
    Stats {
        /// `?scope=pop`: the aggregator's view.
        pop: bool,
    },
    /// The metrics (OpenMetrics / Prometheus text); `pop` for the PoP scope.
    Metrics {
        /// `?scope=pop`: the aggregator's merged counters.
        pop: bool,
    },
    /// The live dashboard (a page with no data in it: it asks for the
    /// token and reads the metrics).
    Dashboard,
    /// Where the dashboard reads from (`<dashboard>?endpoints`, JSON): the
    /// page asks the Worker rather than build an operator URL itself.
    Endpoints,
}

/// A secret value: compared, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The secret's text, for comparison only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// Settings of the PoP aggregate, both sides.
#[derive(Debug, Clone, PartialEq)]
pub struct PopConfig {
    /// The isolate's push schedule.
    pub link: PopLinkParams,
    /// The aggregator's limits.
    pub aggregate: PopParams,
    /// Longest wait for a push's reply.
    pub timeout_ms: f64,
    /// Aggregator name without `cf.colo`.
    pub fallback_name: String,
    /// The aggregator's active health probes.
    pub probes: ProbeParams,
}

/// One problem with one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The offending key.
    pub key: String,
    /// What is wrong and what is accepted.
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.reason)
    }
}

/// Every key at its declared default, with one origin named "a" (for tests,
/// examples and parts used alone: the one place defaults come from is `KEYS`).
pub fn defaults() -> Params {
    let vars = VecMap::from([(
        "HEDGE_ORIGINS".to_string(),
        r#"[{"name":"a","url":"https://a.example"}]"#.to_string(),
    )]);
    match parse(&vars) {
        Ok(params) => params,
        // Unreachable while every default lies in its range (a test checks that).
        Err(errors) => panic!("the declared defaults do not parse: {errors:?}"),
    }
}

/// Keys whose refusal their own part handles by turning something off,
/// never by taking the declared default: an unreadable operator location
/// must not serve the pages on every host, and a refused token setting must
/// still keep its words from the origins.
const FAIL_CLOSED_KEYS: &[&str] = &["HEDGE_STATS_PATH", "HEDGE_STATS_TOKEN"];

/// What a Worker runs on: [`parse`], except that only an unusable
/// `HEDGE_ORIGINS` (or an internal error) refuses the configuration. Any
/// other invalid or unknown key takes its declared default and is returned
/// with the configuration, to be logged and shown, so one typo'd key does
/// not turn every request into a 500. Keys that conflict with each other
/// fall back together.
pub fn parse_lenient(
    vars: &VecMap<String, String>,
) -> Result<(Params, Vec<ConfigError>), Vec<ConfigError>> {
    let fatal = |errors: &[ConfigError]| {
        errors
            .iter()
            .any(|e| e.key == "HEDGE_ORIGINS" || e.reason.starts_with("internal"))
    };
    // A HEDGE_TUNING that does not read leaves every field at its default.
    let (mut vars, mut reported) = reader::spread_tuning(vars);
    // Each round drops the keys found wrong; a key that only conflicts with
    // another's default shows up in the next round. Every round drops at
    // least one key, so there are at most as many rounds as keys. An error
    // no drop can resolve (a key required by another, such as the static
    // mode's delay) leaves the configuration as read: each part falls back
    // on its own (the static mode without a delay runs adaptive), so the
    // Worker still runs.
    for _ in 0..=vars.len() {
        let (params, errors) = parse_all(&vars);
        if errors.is_empty() {
            return Ok((params, reported));
        }
        if fatal(&errors) {
            reported.extend(errors);
            return Err(reported);
        }
        let before = vars.len();
        for e in &errors {
            if !FAIL_CLOSED_KEYS.contains(&e.key.as_str()) {
                vars.remove(&e.key);
            }
        }
        let dropped = vars.len() < before;
        for e in errors {
            if !reported.contains(&e) {
                reported.push(e);
            }
        }
        if !dropped {
            return Ok((params, reported));
        }
    }
    Err(reported)
}

/// Parses the `HEDGE_*` vars; on failure, every problem found.
pub fn parse(vars: &VecMap<String, String>) -> Result<Params, Vec<ConfigError>> {
    let (vars, mut errors) = reader::spread_tuning(vars);
    let (params, more) = parse_all(&vars);
    errors.extend(more);
    match errors.is_empty() {
        true => Ok(params),
        false => Err(errors),
    }
}

/// The configuration as read, every bad key at its fallback, and the
/// problems found.
fn parse_all(vars: &VecMap<String, String>) -> (Params, Vec<ConfigError>) {
    let mut r = Reader::new(vars);
    r.unknown_keys();
    let origins = r.origins();
    let mode = parts::mode(&mut r);
    let delay = DelayParams::read(&mut r);
    let budget = BudgetParams::read(&mut r);
    let eligibility = EligibilityParams::read(&mut r);
    let max_held_body_bytes = r.integer("HEDGE_TUNING.max_held_body_bytes");
    let route_keys = RouteKeyParams::read(&mut r);
    let estimator = EstimatorParams::read(&mut r);
    let timeout_ms = r.number("HEDGE_TIMEOUT_MS");
    let policy = parts::policy(&mut r);
    let origin_load = OriginLoadParams::read(&mut r, policy, timeout_ms);
    let body_idle_timeout_ms = Some(r.number("HEDGE_BODY_IDLE_TIMEOUT_MS")).filter(|ms| *ms > 0.0);
    let health = HealthParams::read(&mut r, estimator.window, timeout_ms);
    let pop = PopConfig::read(&mut r, estimator.window);
    let stats = StatsParams::read(&mut r);
    let log_level = parts::log_level(&mut r);
    let analytics_sample_percent = r.number("HEDGE_ANALYTICS_SAMPLE_PERCENT");
    let same_origin_hedge = r.boolean("HEDGE_TUNING.same_origin_hedge");
    let cache = r.boolean("HEDGE_CACHE");
    let coalesce = CoalesceParams::read(&mut r, cache);
    let guards = parts::guards(&mut r, policy, mode);
    let names: Vec<&str> = origins.iter().map(|o| o.name.as_str()).collect();
    let routes = r.routes(&names, parts::methods);
    let route_eligibility = (routes.iter())
        .map(|route| {
            (route.methods.clone()).map(|methods| EligibilityParams {
                methods,
                ..eligibility.clone()
            })
        })
        .collect();
    let params = Params {
        origins,
        mode,
        delay,
        policy,
        origin_load,
        budget,
        eligibility,
        max_held_body_bytes,
        route_keys,
        estimator,
        timeout_ms,
        body_idle_timeout_ms,
        health,
        same_origin_hedge,
        cache,
        coalesce,
        pop,
        stats,
        log_level,
        analytics_sample_percent,
        guards,
        routes,
        route_eligibility,
    };
    (params, r.errors)
}

impl Params {
    /// The hedge gate's part of the configuration.
    pub fn gate(&self) -> GateParams {
        GateParams {
            budget: self.budget,
            health: self.health,
            zones: self.origins.iter().map(|o| o.zone.clone()).collect(),
            same_origin_hedge: self.same_origin_hedge,
            avoid_poor_peers: self.policy == HedgePolicy::TailAware,
            origin_load: self.origin_load,
            // An isolate passes its own (`Hedger::new`).
            seed: 1,
            routes: (self.routes.iter())
                .map(|r| RouteScope {
                    origins: r.origins.clone(),
                    budget_percent: r.budget_percent,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_key_other_than_the_origins_falls_back_to_its_default() {
        let mut vars = VecMap::from([(
            "HEDGE_ORIGINS".to_string(),
            r#"[{"name":"a","url":"https://a.example"}]"#.to_string(),
        )]);
        vars.insert("HEDGE_BUDGET_PERCENT".into(), "150".into());
        vars.insert("HEDGE_QUANTIL".into(), "p99".into());
        vars.insert("HEDGE_STATS_TOKEN".into(), "short".into());
        let (params, errors) = parse_lenient(&vars).expect("runs on defaults");
        assert_eq!(params.budget.percent, defaults().budget.percent);
        assert!(params.stats.tokens.is_empty());
        let mut keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["HEDGE_BUDGET_PERCENT", "HEDGE_QUANTIL", "HEDGE_STATS_TOKEN"]
        );
        // Keys in conflict: both fall back, and the result parses cleanly.
        vars.insert(
            "HEDGE_TUNING".into(),
            r#"{"5xx_reduce_rate":0.5,"5xx_stop_rate":0.1}"#.into(),
        );
        let (params, errors) = parse_lenient(&vars).expect("runs on defaults");
        assert!(params.health.stop_above_5xx_rate >= params.health.reduce_above_5xx_rate);
        assert!(errors.iter().any(|e| e.key.starts_with("HEDGE_TUNING.5xx")));
        // Only one of the pair set, in conflict with the other's default:
        // the one set falls back, not the whole configuration.
        vars.insert("HEDGE_TUNING".into(), r#"{"5xx_reduce_rate":0.5}"#.into());
        let (params, errors) = parse_lenient(&vars).expect("runs on defaults");
        assert_eq!(params.health, defaults().health);
        assert!(errors
            .iter()
            .any(|e| e.key == "HEDGE_TUNING.5xx_reduce_rate"));
    }

    #[test]
    fn unusable_origins_still_refuse_the_configuration() {
        let vars = VecMap::from([
            ("HEDGE_ORIGINS".to_string(), "[]".to_string()),
            ("HEDGE_BUDGET_PERCENT".to_string(), "150".to_string()),
        ]);
        let errors = parse_lenient(&vars).expect_err("no origin to proxy to");
        assert!(errors.iter().any(|e| e.key == "HEDGE_ORIGINS"));
        assert!(parse_lenient(&VecMap::new()).is_err());
    }

    fn vars(pairs: &[(&str, &str)]) -> VecMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const ORIGINS: (&str, &str) = (
        "HEDGE_ORIGINS",
        r#"[{"name":"a","url":"http://127.0.0.1:8081/"},{"name":"b","url":"https://b.example/v1","zone":"eu"}]"#,
    );

    fn keys_of(errors: &[ConfigError]) -> Vec<&str> {
        errors.iter().map(|e| e.key.as_str()).collect()
    }

    #[test]
    fn defaults_apply_when_only_origins_are_set() {
        let params = parse(&vars(&[ORIGINS])).expect("valid");
        assert_eq!(params.origins.len(), 2);
        assert_eq!(params.origins[0].base_url, "http://127.0.0.1:8081");
        assert_eq!(params.origins[1].zone.as_deref(), Some("eu"));
        assert_eq!(params.mode, HedgeMode::Adaptive);
        assert_eq!(params.delay.quantile, 0.95);
        assert_eq!(params.budget.percent, 12.0);
        assert_eq!(params.eligibility.methods, vec!["GET", "HEAD"]);
        assert_eq!(
            params.eligibility.idempotency_header, None,
            "keyed hedging of other methods is opt-in"
        );
        assert_eq!(params.budget.floor_per_sec, 0.0, "no per-isolate floor");
        assert_eq!(params.max_held_body_bytes, 16 << 20);
        assert_eq!(params.timeout_ms, 30_000.0);
        assert_eq!(
            params.body_idle_timeout_ms, None,
            "no body limit unless asked"
        );
    }

    #[test]
    fn a_body_idle_timeout_is_on_only_above_zero() {
        let on = parse(&vars(&[ORIGINS, ("HEDGE_BODY_IDLE_TIMEOUT_MS", "1500")])).expect("valid");
        assert_eq!(on.body_idle_timeout_ms, Some(1_500.0));
        let off = parse(&vars(&[ORIGINS, ("HEDGE_BODY_IDLE_TIMEOUT_MS", "0")])).expect("valid");
        assert_eq!(off.body_idle_timeout_ms, None);
        let errors =
            parse(&vars(&[ORIGINS, ("HEDGE_BODY_IDLE_TIMEOUT_MS", "-1")])).expect_err("invalid");
        assert_eq!(keys_of(&errors), vec!["HEDGE_BODY_IDLE_TIMEOUT_MS"]);
    }

    #[test]
    fn missing_origins_is_named() {
        let errors = parse(&vars(&[])).expect_err("invalid");
        assert_eq!(keys_of(&errors), vec!["HEDGE_ORIGINS"]);
    }

    #[test]
    fn every_bad_key_is_reported_at_once() {
        let errors = parse(&vars(&[
            ORIGINS,
            ("HEDGE_TUNING", r#"{"quantile":"p10"}"#),
            ("HEDGE_BUDGET_PERCENT", "lots"),
            ("HEDGE_METHODS", "GET,POST"),
            ("HEDGE_TYPO_KEY", "1"),
        ]))
        .expect_err("invalid");
        let keys = keys_of(&errors);
        for key in [
            "HEDGE_TUNING.quantile",
            "HEDGE_BUDGET_PERCENT",
            "HEDGE_METHODS",
            "HEDGE_TYPO_KEY",
        ] {
            assert!(keys.contains(&key), "{key} missing from {keys:?}");
        }
        let methods = errors
            .iter()
            .find(|e| e.key == "HEDGE_METHODS")
            .expect("present");
        assert!(
            methods.reason.contains("POST is not idempotent"),
            "{}",
            methods.reason
        );
    }

    #[test]
    fn quantile_accepts_both_notations() {
        for (raw, q) in [("p99", 0.99), ("0.9", 0.9), ("P99.9", 0.999)] {
            let tuning = format!(r#"{{"quantile":"{raw}"}}"#);
            let params = parse(&vars(&[ORIGINS, ("HEDGE_TUNING", &tuning)])).expect(raw);
            assert!((params.delay.quantile - q).abs() < 1e-12, "{raw}");
        }
    }

    #[test]
    fn static_mode_requires_its_delay() {
        let errors = parse(&vars(&[ORIGINS, ("HEDGE_MODE", "static")])).expect_err("invalid");
        assert_eq!(keys_of(&errors), vec!["HEDGE_STATIC_DELAY_MS"]);
        let params = parse(&vars(&[
            ORIGINS,
            ("HEDGE_MODE", "static"),
            ("HEDGE_STATIC_DELAY_MS", "10"),
        ]))
        .expect("valid");
        assert_eq!(params.mode, HedgeMode::Static { delay_ms: 10.0 });
    }

    #[test]
    fn an_unset_key_another_requires_never_refuses_a_running_worker() {
        // Nothing to drop resolves it: the Worker runs, adaptive, and says why.
        let (params, errors) =
            parse_lenient(&vars(&[ORIGINS, ("HEDGE_MODE", "static")])).expect("runs");
        assert_eq!(params.mode, HedgeMode::Adaptive);
        assert_eq!(keys_of(&errors), vec!["HEDGE_STATIC_DELAY_MS"]);
    }

    #[test]
    fn retry_mode_defaults_to_a_one_second_timeout() {
        let params = parse(&vars(&[ORIGINS, ("HEDGE_MODE", "retry")])).expect("valid");
        assert_eq!(
            params.mode,
            HedgeMode::Retry {
                timeout_ms: 1_000.0
            }
        );
    }

    #[test]
    fn tuning_fields_read_as_keys_and_each_bad_one_is_named() {
        let tuning = r#"{"cold_delay_ms":40,"cut_unpaid":false,"quantile":"p99"}"#;
        let params = parse(&vars(&[ORIGINS, ("HEDGE_TUNING", tuning)])).expect("valid");
        assert_eq!(params.delay.cold_delay_ms, 40.0);
        assert!((params.delay.quantile - 0.99).abs() < 1e-12);
        let bad = r#"{"cold_delay_ms":-1, "cold_delay" : 5,"window_secs":"x"}"#;
        let errors = parse(&vars(&[ORIGINS, ("HEDGE_TUNING", bad)])).expect_err("invalid");
        let mut keys = keys_of(&errors);
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "HEDGE_TUNING.cold_delay",
                "HEDGE_TUNING.cold_delay_ms",
                "HEDGE_TUNING.window_secs"
            ]
        );
        // Not a flat object of scalars: named, and every field at its default.
        for raw in [
            "[1]",
            r#"{"window_secs":[1]}"#,
            r#"{"cold_delay_ms":40,}"#,
            r#"{"cold_delay_ms":null}"#,
            r#"{"quantile":"p\u0039"}"#,
            r#"{"cold_delay_ms":40} x"#,
        ] {
            let (params, errors) =
                parse_lenient(&vars(&[ORIGINS, ("HEDGE_TUNING", raw)])).expect("runs");
            assert_eq!(keys_of(&errors), vec!["HEDGE_TUNING"], "{raw}");
            assert_eq!(params.delay, defaults().delay, "{raw}");
        }
        let spaced = parse(&vars(&[ORIGINS, ("HEDGE_TUNING", " { } ")])).expect("empty object");
        assert_eq!(spaced.delay, defaults().delay);
    }

    #[test]
    fn a_removed_key_is_named_with_its_replacement_and_never_stops_traffic() {
        let set = [
            ORIGINS,
            ("HEDGE_COLD_DELAY_MS", "40"),
            ("HEDGE_ROUTE_PREFIXES", r#"["/api"]"#),
            ("HEDGE_POP_MAX_KEYS", "10"),
        ];
        let errors = parse(&vars(&set)).expect_err("a check reports them");
        let reason = |key: &str| (errors.iter().find(|e| e.key == key)).map(|e| e.reason.clone());
        let cold = reason("HEDGE_COLD_DELAY_MS").expect("named");
        assert!(
            cold.contains(r#"HEDGE_TUNING = {"cold_delay_ms""#),
            "{cold}"
        );
        let prefixes = reason("HEDGE_ROUTE_PREFIXES").expect("named");
        assert!(prefixes.contains("HEDGE_ROUTES"), "{prefixes}");
        assert!(reason("HEDGE_POP_MAX_KEYS")
            .expect("named")
            .contains("constant"));
        // The Worker runs on, its value ignored, each one reported once.
        let (params, errors) = parse_lenient(&vars(&set)).expect("runs");
        assert_eq!(params.delay, defaults().delay);
        assert_eq!(errors.len(), 3);
        for (key, _) in REMOVED {
            assert!(replacement(key).is_some(), "{key}");
        }
        assert_eq!(replacement("HEDGE_BUDGET_PERCENT"), None);
    }

    #[test]
    fn bad_origin_entries_are_explained() {
        let cases = [
            (r#"{"name":"a"}"#, "not a JSON array"),
            ("[]", "at least one origin"),
            (r#"[{"name":"a","url":"ftp://x"}]"#, "http:// or https://"),
            (r#"[{"name":"a","url":"http://u:p@x"}]"#, "credentials"),
            (r#"[{"name":"a","url":"http://x/?q=1"}]"#, "query"),
            (r#"[{"name":"a","url":"http://x:99999"}]"#, "port"),
            (r#"[{"name":"a","url":"http://"}]"#, "host"),
            (
                r#"[{"name":"a","url":"http://x"},{"name":"a","url":"http://y"}]"#,
                "duplicate",
            ),
            (r#"[{"name":"a b","url":"http://x"}]"#, "name"),
            (
                r#"[{"name":"a","url":"http://x","weight":3}]"#,
                "unknown field",
            ),
        ];
        for (raw, needle) in cases {
            let errors = parse(&vars(&[("HEDGE_ORIGINS", raw)])).expect_err(raw);
            assert_eq!(errors[0].key, "HEDGE_ORIGINS");
            assert!(
                errors[0].reason.contains(needle),
                "{raw}: {}",
                errors[0].reason
            );
        }
    }

    #[test]
    fn ipv6_origins_are_accepted() {
        let params = parse(&vars(&[(
            "HEDGE_ORIGINS",
            r#"[{"name":"a","url":"http://[::1]:8080"}]"#,
        )]))
        .expect("valid");
        assert_eq!(params.origins[0].base_url, "http://[::1]:8080");
    }

    #[test]
    fn every_declared_default_is_in_its_own_range() {
        for key in KEYS.iter().chain(TUNING) {
            let ok = match key.range {
                Range::Number { min, max } => key
                    .default
                    .parse::<f64>()
                    .map_or(key.default == "none", |v| (min..=max).contains(&v)),
                Range::Whole { min, max } => key
                    .default
                    .parse::<u64>()
                    .is_ok_and(|v| (min..=max).contains(&v)),
                Range::Flag => matches!(key.default, "true" | "false"),
                Range::Text => true,
            };
            assert!(
                ok,
                "{}: default {:?} vs {:?}",
                key.name, key.default, key.range
            );
        }
    }

    #[test]
    fn every_key_read_is_declared_once() {
        // Parsing the defaults reads every key; an undeclared read is an error.
        assert!(parse(&vars(&[ORIGINS])).is_ok());
        let mut names: Vec<&str> = KEYS.iter().chain(TUNING).map(|k| k.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(
            names.len(),
            KEYS.len() + TUNING.len(),
            "a key is declared twice"
        );
        // Each one a setting a user has a reason to set (issue 32's bound).
        assert!(KEYS.len() <= 20, "{} settings", KEYS.len());
    }

    #[test]
    fn every_key_is_documented_in_the_readme() {
        let readme = include_str!("../../../README.md");
        for Key { name: key, .. } in KEYS {
            assert!(
                readme.contains(&format!("`{key}`")),
                "{key} missing from README.md"
            );
        }
        let tuning = include_str!("../../../docs/tuning.md");
        for Key { name: key, .. } in TUNING {
            let field = key.trim_start_matches("HEDGE_TUNING.");
            assert!(
                tuning.contains(&format!("`{field}`")),
                "{field} missing from docs/tuning.md"
            );
        }
    }

    #[test]
    fn empty_idempotency_header_disables_it() {
        let params = parse(&vars(&[ORIGINS, ("HEDGE_IDEMPOTENCY_HEADER", "")])).expect("valid");
        assert_eq!(params.eligibility.idempotency_header, None);
    }

    #[test]
    fn every_text_default_comes_from_the_key_table() {
        // Setting each text key to its declared default changes nothing:
        // the parser reads an absent key's default from KEYS, not from a
        // second copy in the code.
        let base = parse(&vars(&[ORIGINS])).expect("valid");
        for key in KEYS.iter().chain(TUNING).filter(|k| k.range == Range::Text) {
            if matches!(key.default, "required" | "none") {
                continue;
            }
            let tuning = (key.name.strip_prefix("HEDGE_TUNING."))
                .map(|field| format!(r#"{{"{field}":"{}"}}"#, key.default));
            let set = match &tuning {
                Some(object) => ("HEDGE_TUNING", object.as_str()),
                None => (key.name, key.default),
            };
            let set = parse(&vars(&[ORIGINS, set])).unwrap_or_else(|e| {
                panic!(
                    "{}: its default {:?} does not parse: {e:?}",
                    key.name, key.default
                )
            });
            assert_eq!(
                set, base,
                "{}: the declared default {:?} is not what an absent key gets",
                key.name, key.default
            );
        }
    }

    #[test]
    fn operator_pages_take_an_optional_host_and_one_or_two_tokens() {
        let t1 = "first-token-0123456789";
        let t2 = "second-token-0123456789";
        let p = parse(&vars(&[
            ORIGINS,
            ("HEDGE_STATS_TOKEN", &format!("{t1} {t2}")),
        ]))
        .expect("two tokens");
        let exposed: Vec<&str> = p.stats.tokens.iter().map(Secret::expose).collect();
        assert_eq!(exposed, [t1, t2]);
        assert_eq!(p.stats.host, None);
        assert!(p
            .stats
            .page("api.example.com", "/__hedge/metrics", None)
            .is_some());

        let ops = parse(&vars(&[
            ORIGINS,
            ("HEDGE_STATS_TOKEN", t1),
            ("HEDGE_STATS_PATH", "Ops.Example.com/__hedge/stats"),
        ]))
        .expect("a host and a path");
        assert_eq!(ops.stats.host.as_deref(), Some("ops.example.com"));
        assert_eq!(ops.stats.path, "/__hedge/stats");
        let page = |host| ops.stats.page(host, "/__hedge/stats", None);
        assert_eq!(
            page("ops.example.com"),
            Some(OperatorPage::Stats { pop: false })
        );
        assert_eq!(page("api.example.com"), None, "proxied on any other host");

        for (key, value) in [
            (
                "HEDGE_STATS_TOKEN",
                format!("{t1},{t2},third-token-0123456789"),
            ),
            ("HEDGE_STATS_TOKEN", format!("{t1} short")),
            ("HEDGE_STATS_PATH", "ops.example.com".to_string()),
            ("HEDGE_STATS_PATH", "ops.example.com:8443/x".to_string()),
            ("HEDGE_STATS_PATH", "ftp://ops.example.com/x".to_string()),
        ] {
            let errors = parse(&vars(&[ORIGINS, (key, &value)])).expect_err(&value);
            assert_eq!(keys_of(&errors), [key], "{value}");
            assert!(
                errors.iter().all(|e| !e.reason.contains("token-0123")),
                "no token echoed"
            );
        }
    }

    #[test]
    fn a_host_lock_in_any_spelling_holds_and_an_unreadable_one_turns_the_pages_off() {
        let t1 = "first-token-0123456789";
        for spelling in [
            "https://Ops.Example.com/__hedge/stats",
            "http://ops.example.com:80/__hedge/stats",
            "ops.example.com:443/__hedge/stats",
            "//ops.example.com/__hedge/stats",
        ] {
            let p = parse(&vars(&[
                ORIGINS,
                ("HEDGE_STATS_TOKEN", t1),
                ("HEDGE_STATS_PATH", spelling),
            ]))
            .expect(spelling);
            assert_eq!(
                p.stats.host.as_deref(),
                Some("ops.example.com"),
                "{spelling}"
            );
            assert_eq!(p.stats.path, "/__hedge/stats", "{spelling}");
            assert!(p
                .stats
                .page("api.example.com", "/__hedge/stats", None)
                .is_none());
        }
        for unreadable in ["ops.example.com", "ops.example.com:8443/__hedge/stats"] {
            let v = vars(&[
                ORIGINS,
                ("HEDGE_STATS_TOKEN", t1),
                ("HEDGE_STATS_PATH", unreadable),
            ]);
            let (p, errors) = parse_lenient(&v).expect("the Worker runs");
            assert_eq!(keys_of(&errors), ["HEDGE_STATS_PATH"], "{unreadable}");
            for host in ["ops.example.com", "api.example.com"] {
                for path in ["/__hedge/stats", "/__hedge/metrics", "/__hedge/dashboard"] {
                    assert_eq!(
                        p.stats.page(host, path, None),
                        None,
                        "{unreadable}: {host}{path}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_dashboard_asks_the_worker_where_its_siblings_are() {
        let p = parse(&vars(&[
            ORIGINS,
            ("HEDGE_STATS_TOKEN", "first-token-0123456789"),
            ("HEDGE_STATS_PATH", "/ops/hedge-stats"),
        ]))
        .expect("a path of its own");
        let page = |path, query| p.stats.page("edge.test", path, query);
        assert_eq!(
            page("/ops/dashboard", Some("endpoints")),
            Some(OperatorPage::Endpoints)
        );
        assert_eq!(page("/ops/dashboard", None), Some(OperatorPage::Dashboard));
        assert_eq!(
            page("/ops/stats", None),
            None,
            "what the page used to build"
        );
        assert_eq!(
            p.stats.sibling_paths(),
            ("/ops/hedge-stats".to_string(), "/ops/metrics".to_string())
        );
    }

    #[test]
    fn every_word_of_the_token_setting_is_withheld_even_when_refused() {
        let (t1, t2, t3) = (
            "first-token-0123456789",
            "second-token-0123456789",
            "third-token-0123456789",
        );
        let v = vars(&[ORIGINS, ("HEDGE_STATS_TOKEN", &format!("{t1} {t2},{t3}"))]);
        let (p, errors) = parse_lenient(&v).expect("the Worker runs");
        assert_eq!(keys_of(&errors), ["HEDGE_STATS_TOKEN"]);
        assert!(p.stats.tokens.is_empty(), "three tokens: the pages are off");
        for t in [t1, t2, t3] {
            assert!(p.stats.carries_token(&format!("Bearer {t}")), "{t}");
        }
        assert!(!p.stats.carries_token("Bearer someone-elses-token-000"));
        assert!(!p.stats.carries_token(&format!("Basic {t1}")));
    }
}
