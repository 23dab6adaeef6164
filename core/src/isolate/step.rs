//! What an exchange does before its race, one step at a time: read the
//! client's body, wait on a coalesced flight, look in the cache, then serve
//! what it holds or race. The order is the isolate's; a driver (the Worker's
//! glue, the simulator) carries out each [`Step`] and hands back what it
//! found, which returns the next.

use super::{BodyPlan, Exchange, Isolate};
use crate::cache::conditional::is_conditional;
use crate::cache::entry::{EntryHead, HeaderEdits};
use crate::cache::freshness::Verdict;
use crate::header_list::HeaderList;
use crate::observe::metrics::Served;
use crate::race::RacePlan;
use crate::request::coalesce::{poll_interval_ms, FlightState, Role};
use crate::request::eligibility::NotHedgeableReason;

/// What an exchange does next; the driver carries it out and comes back
/// with what it found.
#[derive(Debug)]
pub enum Step {
    /// Read the client's body as [`Exchange::body`] says, then
    /// [`Isolate::body_read`].
    ReadBody,
    /// Wait on the coalesced flight this request joined, then
    /// [`Isolate::flight_polled`].
    Wait {
        /// How long, ms.
        ms: f64,
    },
    /// Read the cache, then [`Isolate::found`]. `coalesced`: the flight
    /// this request waited on stored what is found.
    LookUp {
        /// After a flight that stored it.
        coalesced: bool,
    },
    /// Answer with the entry found.
    Serve(ServeEntry),
    /// Send the race's legs under `plan`.
    Race {
        /// The race's plan.
        plan: RacePlan,
        /// The entry found, too stale to serve (boxed: rare).
        stale: Option<Box<StaleEntry>>,
    },
}

/// An entry the cache answers a request with.
#[derive(Debug)]
pub struct ServeEntry {
    /// Its age, seconds.
    pub age_s: u64,
    /// Fresh, after a coalesced wait, or stale while it is refreshed
    /// ([`Served::StaleWhileRevalidate`]: start `refresh`).
    pub how: Served,
    /// A bodiless `304`: the client's conditional request matched it.
    pub not_modified: bool,
    /// What makes its stored fields the client's.
    pub edits: HeaderEdits,
    /// The background refresh to run, when this request claimed it (one
    /// per key at a time, within [`super::MAX_REFRESHES`]); its end is
    /// [`Isolate::end_refresh`].
    pub refresh: Option<Box<Refresh>>,
}

/// A background refresh, accepted as an exchange of its own and planned.
#[derive(Debug)]
pub struct Refresh {
    /// The refresh's exchange.
    pub exchange: Exchange,
    /// Its race's plan.
    pub plan: RacePlan,
    /// The fields that ask about the served entry (`If-None-Match`, ...):
    /// a `304` then renews it.
    pub validators: Vec<(&'static str, String)>,
}

/// An entry too stale to serve: the race's legs ask the origin with its
/// validators (none when the client's request is conditional itself: the
/// origin answers the client's own question).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleEntry {
    /// It may stand in for a failure (`stale-if-error`).
    pub if_error: bool,
    /// The fields that revalidate it (`If-None-Match`, ...).
    pub validators: Vec<(&'static str, String)>,
}

/// What a request with coalescing `role` does before its race, unplanned:
/// `None` means race.
fn before_race(role: Role, look_up_cache: bool) -> Option<Step> {
    match role {
        Role::Waiter(_) => Some(Step::Wait {
            ms: poll_interval_ms(0),
        }),
        _ if look_up_cache => Some(Step::LookUp { coalesced: false }),
        _ => None,
    }
}

impl Isolate {
    /// What an exchange just accepted does first: read its body, or what
    /// follows it ([`Isolate::body_read`]).
    pub(super) fn first_step(&mut self, exchange: &Exchange) -> Step {
        match exchange.body {
            BodyPlan::Empty => self.after_body(exchange, exchange.role),
            _ => Step::ReadBody,
        }
    }

    /// The client's body was read; `streamed` when it outgrew a cap and
    /// goes once, streamed, never hedged. What the exchange does next.
    pub fn body_read(
        &mut self,
        exchange: &mut Exchange,
        streamed: Option<NotHedgeableReason>,
    ) -> Step {
        if let Some(reason) = streamed {
            exchange.not_hedgeable(reason);
        }
        self.after_body(exchange, exchange.role)
    }

    /// Wait, look up or race, as a request in `role` does (planned for its
    /// arrival time when it races).
    fn after_body(&mut self, exchange: &Exchange, role: Role) -> Step {
        before_race(role, exchange.look_up_cache).unwrap_or_else(|| self.race(exchange, None))
    }

    /// Race `exchange` (planned for its arrival time), asking about `stale`.
    fn race(&mut self, exchange: &Exchange, stale: Option<StaleEntry>) -> Step {
        let plan =
            (self.hedger).plan_for(exchange.eligibility, &exchange.route, exchange.started_ms);
        Step::Race {
            plan,
            stale: stale.map(Box::new),
        }
    }

    /// What a waiter does after its `polls`-th poll (from 1) of its flight
    /// for `url` at `now_ms`: wait on, read what the leader stored, or go
    /// on as if it had come alone (nothing shared, or another variant).
    pub fn flight_polled(
        &mut self,
        exchange: &Exchange,
        url: &str,
        polls: u32,
        now_ms: f64,
    ) -> Step {
        let Role::Waiter(id) = exchange.role else {
            return self.after_body(exchange, exchange.role);
        };
        match self.coalescer.state(url, id, now_ms) {
            FlightState::Pending => Step::Wait {
                ms: poll_interval_ms(polls),
            },
            FlightState::Stored | FlightState::Unknown => Step::LookUp { coalesced: true },
            FlightState::Released => self.after_body(exchange, Role::Alone),
        }
    }

    /// What the cache's `entry` (`None`: it holds nothing) does for the
    /// accepted request for `url`, whose fields are `request` (`coalesced`:
    /// found after waiting on a flight that stored it): serve it, or race
    /// (asking about it when it is too stale to serve). An entry that may be
    /// served counts as a storable answer and as a request answered from the
    /// cache, ends a leader's flight as stored, and, stale within
    /// `stale-while-revalidate`, claims its refresh.
    pub fn found(
        &mut self,
        exchange: &Exchange,
        entry: Option<&EntryHead>,
        request: &HeaderList,
        url: &str,
        coalesced: bool,
    ) -> Step {
        let (Some(entry), Some(directives)) = (entry, exchange.cache.as_ref()) else {
            return self.race(exchange, None);
        };
        let freshness = &entry.meta.freshness;
        // The request's arrival time: one clock read less on the hit path.
        let (age_s, refresh) = match freshness.verdict(directives, exchange.started_ms / 1000.0) {
            Verdict::Fresh { age_s } => (age_s, false),
            Verdict::StaleWhileRevalidate { age_s } => (age_s, true),
            Verdict::Stale { serve_on_error, .. } => {
                let validators = match is_conditional(request) {
                    true => Vec::new(),
                    false => entry.validators(),
                };
                let stale = StaleEntry {
                    if_error: serve_on_error,
                    validators,
                };
                return self.race(exchange, Some(stale));
            }
        };
        self.cache_routes.learn(&exchange.route.key);
        let how = match () {
            _ if refresh => Served::StaleWhileRevalidate,
            _ if coalesced => Served::Coalesced,
            _ => Served::Hit,
        };
        self.metrics.served_from_cache(&exchange.route.key, how);
        // Waiters can use what is stored at once.
        if let Role::Leader(id) = exchange.role {
            self.coalescer.stored(url, id);
        }
        // Accepted as of its client's arrival: one clock read less.
        let refresh = (refresh)
            .then(|| {
                let validators = entry.validators();
                self.begin_refresh(url, exchange, request, validators, exchange.started_ms)
            })
            .flatten();
        let not_modified = how == Served::Hit && entry.answers_not_modified(request);
        Step::Serve(ServeEntry {
            age_s,
            how,
            not_modified,
            edits: entry.served_edits(Some(age_s), not_modified),
            refresh: refresh.map(Box::new),
        })
    }
}
