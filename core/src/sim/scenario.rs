//! Named scenarios: the lab's (same models and parameters, so the two can
//! be compared) and the ones the lab cannot run at scale.

use super::cacheable::CacheSpec;
use super::origin::{Episode, LatencyModel, OriginSpec, StallSpec};

/// A scenario: what it models and its origins (the first is the primary).
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Its name on the command line.
    pub name: &'static str,
    /// What it models.
    pub description: &'static str,
    /// The origins, primary first.
    pub origins: Vec<OriginSpec>,
    /// Its answers are cacheable, and requests ask for these URLs (each
    /// request then goes through the isolate's cache use); `None`: every
    /// request is raced at the origins.
    pub cache: Option<CacheSpec>,
}

/// Every scenario's name but the cached one (`cached-tail`: its hits are
/// not races, so no hindsight bound replays it).
pub const SCENARIO_NAMES: &[&str] = &[
    "heavy-tail",
    "gc-pause",
    "bimodal-cache",
    "slow-origin",
    "fast-503",
    "overload",
    "cliff",
    "rare-stalls",
    "recovery",
    "overload-spell",
    "busy-isolate",
    "fast-503-both",
    "shedding-tail",
];

fn lognormal(median: f64, sigma: f64) -> LatencyModel {
    LatencyModel::Lognormal { median, sigma }
}

/// The lab's heavy tail: lognormal(40, 0.35), 2% of requests +800 ms.
fn heavy_tail() -> LatencyModel {
    LatencyModel::Spikes {
        base: Box::new(lognormal(40.0, 0.35)),
        p: 0.02,
        extra_ms: 800.0,
        extra_max_ms: 800.0,
    }
}

/// Loopback: the lab's origins are on this machine.
const LAB_RTT_MS: f64 = 0.3;

fn origin(latency: LatencyModel) -> OriginSpec {
    OriginSpec {
        latency,
        fast_failure: None,
        stalls: None,
        workers: None,
        rtt_ms: LAB_RTT_MS,
        episode: None,
    }
}

/// The scenario called `name`.
pub fn scenario(name: &str) -> Option<Scenario> {
    latency_shape(name)
        .or_else(|| failures_and_load(name))
        .or_else(|| spells(name))
        .or_else(|| cached(name))
}

/// The scenarios of latency shapes: tails, pauses, modes, a slow origin.
fn latency_shape(name: &str) -> Option<Scenario> {
    let s = match name {
        "heavy-tail" => Scenario {
            name: "heavy-tail",
            description: "lognormal median 40 ms sigma 0.35, plus 2% of requests +800 ms (packet loss, retransmits)",
            origins: vec![origin(heavy_tail()), origin(heavy_tail())],
            cache: None,
        },
        "gc-pause" => {
            let gc = OriginSpec {
                stalls: Some(StallSpec {
                    mean_interval_ms: 2_000.0,
                    min_ms: 150.0,
                    max_ms: 300.0,
                }),
                ..origin(lognormal(30.0, 0.25))
            };
            Scenario {
                name: "gc-pause",
                description: "lognormal median 30 ms sigma 0.25; each origin stops the world for 150-300 ms about every 2 s, stalling every request in flight",
                origins: vec![gc.clone(), gc],
                cache: None,
            }
        }
        "bimodal-cache" => {
            let bimodal = LatencyModel::Mixture {
                p: 0.85,
                a: Box::new(lognormal(8.0, 0.3)),
                b: Box::new(lognormal(150.0, 0.3)),
            };
            Scenario {
                name: "bimodal-cache",
                description: "origin cache: 85% hits lognormal(8 ms, 0.3), 15% misses lognormal(150 ms, 0.3)",
                origins: vec![origin(bimodal.clone()), origin(bimodal)],
                cache: None,
            }
        }
        "slow-origin" => Scenario {
            name: "slow-origin",
            description: "the primary is degraded (lognormal median 120 ms, sigma 0.5); the secondary is healthy heavy-tail",
            origins: vec![origin(lognormal(120.0, 0.5)), origin(heavy_tail())],
            cache: None,
        },
        "cliff" => {
            let cliff = LatencyModel::Mixture {
                p: 0.9,
                a: Box::new(lognormal(30.0, 0.25)),
                b: Box::new(lognormal(240.0, 0.15)),
            };
            Scenario {
                name: "cliff",
                description: "a cliff: 90% of requests lognormal(30 ms, 0.25), 10% about 8x slower, lognormal(240 ms, 0.15) (a slow code path, a cold shard)",
                origins: vec![origin(cliff.clone()), origin(cliff)],
                cache: None,
            }
        }
        "rare-stalls" => {
            let rare = LatencyModel::Spikes {
                base: Box::new(lognormal(40.0, 0.35)),
                p: 0.006,
                extra_ms: 200.0,
                extra_max_ms: 1_000.0,
            };
            Scenario {
                name: "rare-stalls",
                description: "rare long stalls: lognormal(40 ms, 0.35), 0.6% of requests +200 ms to +1 s (lock waits, a lost SYN)",
                origins: vec![origin(rare.clone()), origin(rare)],
                cache: None,
            }
        }
        _ => return None,
    };
    Some(s)
}

/// The scenario of cacheable answers: requests go through the isolate's
/// use of the cache.
fn cached(name: &str) -> Option<Scenario> {
    let s = match name {
        "cached-tail" => Scenario {
            name: "cached-tail",
            description: "heavy-tail origins whose answers are cacheable (max-age 10 s, stale-while-revalidate 10 s, an ETag that changes every 60 s), 2,000 URLs per route asked by popularity (Zipf 1), a cache read 2 ms",
            origins: vec![origin(heavy_tail()), origin(heavy_tail())],
            cache: Some(CacheSpec {
                keys: 2_000,
                zipf: 1.0,
                max_age_s: 10,
                stale_while_revalidate_s: 10,
                changes_every_s: 60.0,
                lookup_ms: 2.0,
                body_bytes: 4_096,
            }),
        },
        _ => return None,
    };
    Some(s)
}

/// The scenarios of failures and load: shedding, queueing origins, a busy
/// isolate.
fn failures_and_load(name: &str) -> Option<Scenario> {
    let s = match name {
        "fast-503" => Scenario {
            name: "fast-503",
            description: "the primary sheds 5% of requests with a 503 after 2 ms; otherwise both are heavy-tail",
            origins: vec![
                OriginSpec {
                    fast_failure: Some((0.05, 503, 2.0)),
                    ..origin(heavy_tail())
                },
                origin(heavy_tail()),
            ],
            cache: None,
        },
        "busy-isolate" => Scenario {
            name: "busy-isolate",
            description: "the isolate is the bottleneck: fast origins with spare capacity, lognormal(40 ms, 0.35) each; run it near the isolate's capacity (the lab's: --rate 650)",
            origins: vec![
                origin(lognormal(40.0, 0.35)),
                origin(lognormal(40.0, 0.35)),
            ],
            cache: None,
        },
        "overload" => {
            // 12 workers, lognormal(40, 0.35) service: about 290 requests/s
            // each at full use; at 250 rps to the primary it runs near capacity.
            let queued = OriginSpec {
                workers: Some(12),
                ..origin(heavy_tail())
            };
            Scenario {
                name: "overload",
                description: "both origins queue: 12 workers each, heavy-tail service; the primary near capacity",
                origins: vec![queued.clone(), queued],
                cache: None,
            }
        }
        "fast-503-both" => {
            let shedding = OriginSpec {
                fast_failure: Some((0.02, 503, 2.0)),
                ..origin(lognormal(40.0, 0.35))
            };
            Scenario {
                name: "fast-503-both",
                description: "both origins shed 2% of requests with a 503 after 2 ms, independently; otherwise lognormal(40 ms, 0.35)",
                origins: vec![shedding.clone(), shedding],
                cache: None,
            }
        }
        "shedding-tail" => {
            // Both origins heavy-tailed and both shedding: a hedge to the
            // peer meets the same 2% of fast 503s the primary does.
            let shedding = OriginSpec {
                fast_failure: Some((0.02, 503, 2.0)),
                ..origin(heavy_tail())
            };
            Scenario {
                name: "shedding-tail",
                description: "both origins heavy-tail (lognormal(40 ms, 0.35), 2% +800 ms) and each sheds 2% of requests with a 503 after 2 ms, independently",
                origins: vec![shedding.clone(), shedding],
                cache: None,
            }
        }
        _ => return None,
    };
    Some(s)
}

/// The scenarios of spells: an origin sick for a while, a slow dependency
/// for a while, and what follows.
fn spells(name: &str) -> Option<Scenario> {
    let s = match name {
        "recovery" => {
            // With the default 3 s warm-up the episode covers measured
            // seconds 12 to 27, so a 60 s run shows before, during and after.
            let sick = OriginSpec {
                episode: Some(Episode {
                    from_ms: 15_000.0,
                    until_ms: 30_000.0,
                    latency: lognormal(160.0, 0.5),
                    fast_failure: Some((0.2, 503, 2.0)),
                }),
                ..origin(heavy_tail())
            };
            Scenario {
                name: "recovery",
                description: "recovery: both heavy-tail; from 15 s to 30 s the primary turns slow (lognormal 160 ms, 0.5) and answers 20% of requests 503, then recovers",
                origins: vec![sick, origin(heavy_tail())],
                cache: None,
            }
        }
        "overload-spell" => {
            // 12 workers each; heavy-tail service keeps about half of them
            // busy at 200 rps spread over both (the +800 ms spikes hold one). From 15 s to 30 s a slow shared
            // dependency makes service 2.5x slower (lognormal 100 ms, about
            // 113 requests/s per origin at full use): both run near capacity
            // and every extra request queues. Then it passes.
            let spelled = OriginSpec {
                workers: Some(12),
                episode: Some(Episode {
                    from_ms: 15_000.0,
                    until_ms: 30_000.0,
                    latency: lognormal(100.0, 0.35),
                    fast_failure: None,
                }),
                ..origin(heavy_tail())
            };
            Scenario {
                name: "overload-spell",
                description: "overload spell: both origins 12 workers, heavy-tail service; from 15 to 30 s service is 2.5x slower (a slow shared dependency), running both near capacity, then it passes",
                origins: vec![spelled.clone(), spelled],
                cache: None,
            }
        }
        _ => return None,
    };
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_scenario_exists() {
        for name in SCENARIO_NAMES.iter().chain(&["cached-tail"]) {
            assert_eq!(scenario(name).map(|s| s.name), Some(*name));
        }
        assert!(scenario("nope").is_none());
    }
}
