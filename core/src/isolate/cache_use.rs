//! The isolate's part in the shared cache: what a stored entry may do for a
//! request, which routes store, what a write invalidates, the background
//! refreshes it runs and the coalesced flights it leads.

use super::complete::StoreTicket;
use super::{intake, BodyPlan, EntryUse, Exchange, Isolate, MAX_REFRESHES};
use crate::cache::conditional::is_conditional;
use crate::cache::entry::EntryHead;
use crate::cache::freshness::Verdict;
use crate::header_list::HeaderList;
use crate::observe::metrics::Served;
use crate::request::body_watch::body_whole;
use crate::request::coalesce::{poll_interval_ms, FlightId, FlightState, Role};
use crate::request::outbound::TraceContext;

/// What an exchange does next before its race: the driver (the Worker's
/// glue, the simulator) carries it out and comes back with what it found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BeforeRace {
    /// Wait on the coalesced flight this request joined, then poll it
    /// ([`Isolate::flight_polled`]).
    Wait {
        /// How long, ms.
        ms: f64,
    },
    /// Read the cache, then judge what it holds ([`Isolate::judge_entry`];
    /// nothing there: race). `coalesced`: the flight stored what is found.
    LookUp {
        /// After a flight that stored it.
        coalesced: bool,
    },
    /// Nothing to wait for or look up: race.
    Race,
}

/// What a request with coalescing `role` does first ([`Exchange::before_race`]).
pub(super) fn first_step(role: Role, look_up_cache: bool) -> BeforeRace {
    match role {
        Role::Waiter(_) => BeforeRace::Wait {
            ms: poll_interval_ms(0),
        },
        _ if look_up_cache => BeforeRace::LookUp { coalesced: false },
        _ => BeforeRace::Race,
    }
}

/// How a store's copy went, as far as the cache read it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyEnd {
    /// The cache took the copy (`put` resolved); `false` when it refused,
    /// or when the copy could not be made at all.
    pub put: bool,
    /// Body bytes the copy passed.
    pub bytes: u64,
    /// The body failed mid-way.
    pub errored: bool,
    /// The body reached its end.
    pub ended: bool,
    /// A chunk did not fit under the held-body cap: the copy was cut there.
    pub over_cap: bool,
    /// The copy could not be made (no cache, or the runtime refused the
    /// copy): nothing was asked of the cache.
    pub refused: bool,
}

impl Isolate {
    /// What a waiter does after its `polls`-th poll (from 1) of its flight
    /// for `url` at `now_ms`: wait on, read what the leader stored, or go
    /// on as if it had come alone (nothing shared, or another variant).
    pub fn flight_polled(
        &self,
        exchange: &Exchange,
        url: &str,
        polls: u32,
        now_ms: f64,
    ) -> BeforeRace {
        let Role::Waiter(id) = exchange.role else {
            return exchange.before_race;
        };
        match self.coalescer.state(url, id, now_ms) {
            FlightState::Pending => BeforeRace::Wait {
                ms: poll_interval_ms(polls),
            },
            FlightState::Stored | FlightState::Unknown => BeforeRace::LookUp { coalesced: true },
            FlightState::Released => first_step(Role::Alone, exchange.look_up_cache),
        }
    }

    /// What the stored `entry` may do for the accepted request for `url`,
    /// whose fields are `request` (`coalesced`: found after waiting on a
    /// flight that stored it); an entry that may be served counts as a
    /// storable answer and as a request answered from the cache, ends a
    /// leader's flight as stored, and, stale within
    /// `stale-while-revalidate`, claims its refresh. `None` for a request
    /// the cache may not answer.
    pub fn judge_entry(
        &mut self,
        exchange: &Exchange,
        entry: &EntryHead,
        request: &HeaderList,
        url: &str,
        coalesced: bool,
    ) -> Option<EntryUse> {
        let directives = exchange.cache.as_ref()?;
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
                return Some(EntryUse::Stale {
                    if_error: serve_on_error,
                    validators,
                });
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
            .then(|| self.begin_refresh(url, exchange, request, exchange.started_ms))
            .flatten();
        let not_modified = how == Served::Hit && entry.answers_not_modified(request);
        Some(EntryUse::Serve {
            age_s,
            how,
            not_modified,
            edits: entry.served_edits(Some(age_s), not_modified),
            refresh: refresh.map(Box::new),
        })
    }

    /// The copy of `ticket`'s answer went as `end` says: its claimed bytes
    /// are given back. `true` when it stays; `false` when it must be taken
    /// out again (cut at the cap, or short: the runtime relays an origin's
    /// mid-body reset as an ordinary end). A plain entry kept ends its
    /// flight as stored (its waiters read it); a varying one's does once
    /// its marker is put too ([`Isolate::marker_stored`]).
    pub fn copy_stored(&mut self, ticket: &StoreTicket, end: CopyEnd, varying: bool) -> bool {
        self.held_bodies.release(ticket.held_bytes);
        if end.refused && !ticket.refresh {
            self.learn_storable(&ticket.route, false);
        }
        let whole = body_whole(ticket.expected_len, end.bytes, end.errored, end.ended);
        // A copy the cache refused holds nothing to take out; one cut at
        // the cap may have been kept short even though its put failed.
        let keep = !end.over_cap && (whole || !end.put);
        if keep && end.put && !varying {
            self.marker_stored(ticket);
        }
        keep
    }

    /// A varying answer's marker was put after its variant: the flight is stored.
    pub fn marker_stored(&mut self, ticket: &StoreTicket) {
        if let Some(id) = ticket.flight {
            self.coalescer.stored(&ticket.url, id);
        }
    }

    /// Whether a cacheable request on `route` was answered storably (a
    /// store the cache then refused counts as not).
    pub fn learn_storable(&mut self, route: &str, storable: bool) {
        if storable {
            self.cache_routes.learn(route);
        } else {
            self.cache_routes.learn_unstorable(route);
        }
    }

    /// A write to each of `urls` succeeded at `now_ms`: a fetch begun before
    /// it may not store its answer, and a coalesced flight for it takes no
    /// new waiters (they would get the answer from before the write).
    pub(super) fn invalidate(&mut self, urls: &[String], now_ms: f64) {
        for url in urls {
            self.invalidations.record(url, now_ms);
            self.coalescer.forget(url);
        }
    }

    /// Whether an answer for `url` requested at `requested_ms` may be
    /// stored: not when a write invalidated `url` since.
    pub(super) fn may_store(&self, url: &str, requested_ms: f64) -> bool {
        !self.invalidations.since(url, requested_ms)
    }

    /// Claims the background refresh of cache key `key`, served stale to
    /// `client`'s request (its fields `client_head`), and accepts it at `now_ms` as an exchange of its own
    /// (a new id and a new unsampled trace), planned: a GET of the same
    /// path on the same route, ended by [`Isolate::complete`] like any race.
    /// `None` when one is already running (a stale entry is refreshed once,
    /// however many requests it serves meanwhile) or too many are.
    pub fn begin_refresh(
        &mut self,
        key: &str,
        client: &Exchange,
        client_head: &HeaderList,
        now_ms: f64,
    ) -> Option<Exchange> {
        if self.refreshes.len() >= MAX_REFRESHES || self.refreshes.contains(key) {
            return None;
        }
        self.refreshes.insert(key.to_string());
        let plan = (self.hedger).plan_for(client.eligibility, &client.route, now_ms);
        Some(Exchange {
            request_id: self.ids.id(),
            trace: TraceContext {
                trace_id: self.ids.id(),
                flags: "00".to_string(),
            },
            method: "GET".to_string(),
            path: client.path.clone(),
            query: client.query.clone(),
            route: client.route.clone(),
            eligibility: client.eligibility,
            cache: client.cache,
            role: Role::Alone,
            look_up_cache: false,
            before_race: BeforeRace::Race,
            body: BodyPlan::Empty,
            declared_length: None,
            strip_authorization: client.strip_authorization,
            plan: Some(plan),
            started_ms: now_ms,
            refresh: true,
            dropped_headers: intake::dropped_headers(client_head, client.strip_authorization, true),
        })
    }

    /// The background refresh of `key` is over.
    pub fn end_refresh(&mut self, key: &str) {
        self.refreshes.remove(key);
    }

    /// The leader of flight `id` is done without storing (no effect once
    /// the flight is stored): waiters fetch for themselves.
    pub fn flight_released(&mut self, key: &str, id: FlightId) {
        self.coalescer.release(key, id);
    }
}
