//! `HEDGE_ROUTES`: per-route policy. A JSON list of
//! `{prefix, name?, mode?, static_delay_ms?, policy?, methods?, budget_percent?, origins?, timeout_ms?, cache?}`;
//! the longest `prefix` a request's path starts with picks its route policy,
//! and anything the policy leaves unset is the global value.

use serde::Deserialize;

use super::reader::Reader;
use crate::estimation::delay_policy::HedgePolicy;
use crate::request::route_key::match_path;

/// Most route policies.
pub(super) const MAX_ROUTE_POLICIES: usize = 64;
/// Longest route policy name (it is a metrics label).
const MAX_NAME_BYTES: usize = 64;

/// How a route hedges, when its policy says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RouteMode {
    /// Never hedged (costs what `HEDGE_MODE=off` costs).
    Off,
    /// The global adaptive delay (the global policy).
    Adaptive,
    /// A fixed delay.
    Static {
        /// The delay, ms.
        delay_ms: f64,
    },
}

/// One route's policy.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutePolicy {
    /// Paths starting with this take the policy, both as
    /// [`match_path`] spells them (the prefix is normalised when parsed).
    pub prefix: String,
    /// Its name: the route key its latency, stats and metrics are kept under.
    pub name: String,
    /// How it hedges (`None`: the global mode).
    pub mode: Option<RouteMode>,
    /// How its adaptive delay is chosen (`None`: `HEDGE_POLICY`): by
    /// predicted benefit (tail-aware) or at the quantile (fixed-quantile).
    /// The primary choice, stall hedges and the guards stay global.
    pub policy: Option<HedgePolicy>,
    /// Methods hedged without an idempotency key (`None`: `HEDGE_METHODS`).
    pub methods: Option<Vec<String>>,
    /// Its own hedge budget, in its own bucket (`None`: the global bucket).
    pub budget_percent: Option<f64>,
    /// The origins it may use, as indices (`None`: all).
    pub origins: Option<Vec<usize>>,
    /// Its race timeout (`None`: `HEDGE_TIMEOUT_MS`).
    pub timeout_ms: Option<f64>,
    /// Whether its GETs use the cache (`None`: `HEDGE_CACHE`).
    pub cache: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteSpec {
    prefix: String,
    name: Option<String>,
    mode: Option<String>,
    static_delay_ms: Option<f64>,
    policy: Option<String>,
    methods: Option<Vec<String>>,
    budget_percent: Option<f64>,
    origins: Option<Vec<String>>,
    timeout_ms: Option<f64>,
    cache: Option<bool>,
}

/// The route policy for `path`: the longest matching prefix, both as
/// [`match_path`] spells them (no spelling of a path escapes its policy).
pub fn route_policy<'a>(routes: &'a [RoutePolicy], path: &str) -> Option<(usize, &'a RoutePolicy)> {
    let path = match_path(path);
    routes
        .iter()
        .enumerate()
        .filter(|(_, r)| path.starts_with(r.prefix.as_str()))
        .max_by_key(|(_, r)| r.prefix.len())
}

// === impl Reader ===

impl Reader<'_> {
    /// `HEDGE_ROUTES` against the configured origins' names; `methods`
    /// checks a method list as `HEDGE_METHODS` does.
    pub(super) fn routes(
        &mut self,
        origin_names: &[&str],
        methods: fn(&str) -> Result<Vec<String>, String>,
    ) -> Vec<RoutePolicy> {
        const KEY: &str = "HEDGE_ROUTES";
        let Some(raw) = self.raw(KEY).map(str::trim).filter(|r| !r.is_empty()) else {
            return Vec::new();
        };
        let specs: Vec<RouteSpec> = match serde_json::from_str(raw) {
            Ok(specs) => specs,
            Err(e) => {
                self.fail(KEY, format!("not a JSON array of {{prefix, name?, mode?, static_delay_ms?, policy?, methods?, budget_percent?, origins?, timeout_ms?, cache?}}: {e}"));
                return Vec::new();
            }
        };
        if specs.len() > MAX_ROUTE_POLICIES {
            self.fail(
                KEY,
                format!("{} routes; at most {MAX_ROUTE_POLICIES}", specs.len()),
            );
            return Vec::new();
        }
        let mut routes: Vec<RoutePolicy> = Vec::new();
        for (i, spec) in specs.into_iter().enumerate() {
            match route(i, spec, origin_names, methods, &routes) {
                Ok(r) => routes.push(r),
                Err(e) => {
                    self.fail(KEY, e);
                    return Vec::new();
                }
            }
        }
        routes
    }
}

fn route(
    i: usize,
    spec: RouteSpec,
    origin_names: &[&str],
    methods: fn(&str) -> Result<Vec<String>, String>,
    earlier: &[RoutePolicy],
) -> Result<RoutePolicy, String> {
    let at = |what: String| format!("route {i} ({:?}): {what}", spec.prefix);
    let prefix = spec.prefix.trim().to_string();
    if !prefix.starts_with('/') || prefix.contains(['?', '#', ' ']) {
        return Err(at(
            "prefix must be a path starting with '/', without query or fragment".into(),
        ));
    }
    let name = spec
        .name
        .map_or_else(|| prefix.clone(), |n| n.trim().to_string());
    let name_ok = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name.bytes().all(|b| b.is_ascii_graphic());
    if !name_ok {
        return Err(at(format!(
            "name {name:?} must be 1-{MAX_NAME_BYTES} printable characters without spaces"
        )));
    }
    // Matched as paths are: normalised once here, not on every request.
    let prefix = match_path(&prefix).into_owned();
    if earlier.iter().any(|r| r.prefix == prefix) {
        return Err(at("the same prefix twice".into()));
    }
    if earlier.iter().any(|r| r.name == name) {
        return Err(at(format!("the name {name:?} twice")));
    }
    let mode = mode_of(spec.mode.as_deref(), spec.static_delay_ms).map_err(at)?;
    let policy = policy_of(spec.policy.as_deref()).map_err(at)?;
    let methods = match spec.methods {
        None => None,
        Some(list) => Some(methods(&list.join(",")).map_err(|e| at(format!("methods: {e}")))?),
    };
    if let Some(b) = spec.budget_percent {
        if !(0.0..=100.0).contains(&b) {
            return Err(at(format!("budget_percent {b} is not in 0 to 100")));
        }
    }
    let origins = match spec.origins {
        None => None,
        Some(names) if names.is_empty() => {
            return Err(at("origins must name at least one origin".into()))
        }
        Some(names) => {
            let mut indices = Vec::new();
            for n in &names {
                match origin_names.iter().position(|o| o == n) {
                    Some(k) if !indices.contains(&k) => indices.push(k),
                    Some(_) => return Err(at(format!("origin {n:?} twice"))),
                    None => return Err(at(format!("origin {n:?} is not in HEDGE_ORIGINS"))),
                }
            }
            Some(indices)
        }
    };
    if let Some(t) = spec.timeout_ms {
        if !(1.0..=600_000.0).contains(&t) {
            return Err(at(format!("timeout_ms {t} is not in 1 to 600000")));
        }
    }
    Ok(RoutePolicy {
        prefix,
        name,
        mode,
        policy,
        methods,
        budget_percent: spec.budget_percent,
        origins,
        timeout_ms: spec.timeout_ms,
        cache: spec.cache,
    })
}

/// A route's `mode` and `static_delay_ms`, checked together.
fn mode_of(mode: Option<&str>, static_delay_ms: Option<f64>) -> Result<Option<RouteMode>, String> {
    match (mode.map(str::trim), static_delay_ms) {
        (None, None) => Ok(None),
        (Some("off"), None) => Ok(Some(RouteMode::Off)),
        (Some("adaptive"), None) => Ok(Some(RouteMode::Adaptive)),
        (Some("static"), Some(d)) if (0.0..=60_000.0).contains(&d) => {
            Ok(Some(RouteMode::Static { delay_ms: d }))
        }
        (Some("static"), _) => Err("mode static needs static_delay_ms, 0 to 60000".into()),
        (_, Some(_)) => Err("static_delay_ms goes with mode \"static\" only".into()),
        (Some(other), None) => Err(format!(
            "mode {other:?}: off, adaptive or static (retry and the policy are global)"
        )),
    }
}

/// A route's `policy`.
fn policy_of(policy: Option<&str>) -> Result<Option<HedgePolicy>, String> {
    match policy.map(str::trim) {
        None => Ok(None),
        Some("tail-aware") => Ok(Some(HedgePolicy::TailAware)),
        Some("fixed-quantile") => Ok(Some(HedgePolicy::FixedQuantile)),
        Some(other) => Err(format!("policy {other:?}: tail-aware or fixed-quantile")),
    }
}

#[cfg(test)]
mod tests {
    use crate::vec_map::VecMap;

    use super::*;

    fn parse(routes: &str) -> Result<crate::config::Params, Vec<crate::config::ConfigError>> {
        let mut vars = VecMap::new();
        vars.insert(
            "HEDGE_ORIGINS".to_string(),
            r#"[{"name":"a","url":"http://a"},{"name":"b","url":"http://b"}]"#.to_string(),
        );
        vars.insert("HEDGE_ROUTES".to_string(), routes.to_string());
        crate::config::parse(&vars)
    }

    fn error(routes: &str) -> String {
        match parse(routes) {
            Ok(_) => panic!("{routes} was accepted"),
            Err(errors) => (errors.iter().map(|e| format!("{}: {}", e.key, e.reason)))
                .collect::<Vec<_>>()
                .join("; "),
        }
    }

    #[test]
    fn a_full_route_policy_parses_and_the_longest_prefix_wins() {
        let p = parse(
            r#"[{"prefix":"/api","name":"api","methods":["GET"],"budget_percent":5,"origins":["b"],"timeout_ms":3000,"cache":false},
                {"prefix":"/api/slow","mode":"static","static_delay_ms":250},
                {"prefix":"/static","mode":"off"}]"#,
        )
        .expect("valid");
        assert_eq!(p.routes.len(), 3);
        assert_eq!(p.routes[0].origins, Some(vec![1]));
        assert_eq!(
            p.routes[1].name, "/api/slow",
            "the prefix names it by default"
        );
        assert_eq!(
            route_policy(&p.routes, "/api/slow/x").map(|(i, _)| i),
            Some(1)
        );
        assert_eq!(route_policy(&p.routes, "/api/x").map(|(i, _)| i), Some(0));
        assert_eq!(route_policy(&p.routes, "/other"), None);
        for spelling in ["/API/slow/x", "/%61pi/slow/x", "/api//slow/x", "//Api/Slow"] {
            assert_eq!(
                route_policy(&p.routes, spelling).map(|(i, _)| i),
                Some(1),
                "{spelling} escapes no policy"
            );
        }
        assert_eq!(
            p.route_eligibility[0].as_ref().map(|e| e.methods.clone()),
            Some(vec!["GET".to_string()])
        );
        assert!(p.route_eligibility[1].is_none());
        assert!(parse("").expect("empty is none").routes.is_empty());
    }

    #[test]
    fn bad_route_policies_are_refused_with_what_is_wrong() {
        for (routes, says) in [
            ("{", "not a JSON array"),
            (r#"[{"prefix":"api"}]"#, "starting with '/'"),
            (r#"[{"prefix":"/a","budget":5}]"#, "unknown field"),
            (
                r#"[{"prefix":"/a"},{"prefix":"/a"}]"#,
                "the same prefix twice",
            ),
            (
                r#"[{"prefix":"/a","name":"x"},{"prefix":"/b","name":"x"}]"#,
                "twice",
            ),
            (
                r#"[{"prefix":"/a","mode":"retry"}]"#,
                "off, adaptive or static",
            ),
            (
                r#"[{"prefix":"/a","mode":"static"}]"#,
                "needs static_delay_ms",
            ),
            (
                r#"[{"prefix":"/a","static_delay_ms":5}]"#,
                "with mode \"static\"",
            ),
            (r#"[{"prefix":"/a","methods":["POST"]}]"#, "not idempotent"),
            (
                r#"[{"prefix":"/a","budget_percent":150}]"#,
                "not in 0 to 100",
            ),
            (
                r#"[{"prefix":"/a","origins":["z"]}]"#,
                "not in HEDGE_ORIGINS",
            ),
            (r#"[{"prefix":"/a","origins":[]}]"#, "at least one origin"),
            (r#"[{"prefix":"/a","timeout_ms":0}]"#, "not in 1 to 600000"),
            (
                r#"[{"prefix":"/a","policy":"fast"}]"#,
                "tail-aware or fixed-quantile",
            ),
            (r#"[{"prefix":"/a","name":"has space"}]"#, "printable"),
        ] {
            let e = error(routes);
            assert!(e.contains(says), "{routes}: {e}");
            assert!(e.contains("HEDGE_ROUTES") || e.contains("route"), "{e}");
        }
    }
}
