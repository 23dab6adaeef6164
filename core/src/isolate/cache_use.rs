//! The isolate's part in the shared cache: what a stored entry may do for a
//! request, which routes store, what a write invalidates, the background
//! refreshes it runs and the coalesced flights it leads.

use super::complete::StoreTicket;
use super::step::Refresh;
use super::{intake, BodyPlan, Exchange, Isolate, MAX_REFRESHES};
use crate::header_list::HeaderList;
use crate::request::body_watch::body_whole;
use crate::request::coalesce::{FlightId, Role};
use crate::request::outbound::TraceContext;

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
    /// path on the same route, asking with the entry's `validators`, ended
    /// by [`Isolate::complete`] like any race.
    /// `None` when one is already running (a stale entry is refreshed once,
    /// however many requests it serves meanwhile) or too many are.
    pub(super) fn begin_refresh(
        &mut self,
        key: &str,
        client: &Exchange,
        client_head: &HeaderList,
        validators: Vec<(&'static str, String)>,
        now_ms: f64,
    ) -> Option<Refresh> {
        if self.refreshes.len() >= MAX_REFRESHES || self.refreshes.contains(key) {
            return None;
        }
        self.refreshes.insert(key.to_string());
        let plan = (self.hedger).plan_for(client.eligibility, &client.route, now_ms);
        let exchange = Exchange {
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
            body: BodyPlan::Empty,
            declared_length: None,
            strip_authorization: client.strip_authorization,
            started_ms: now_ms,
            refresh: true,
            dropped_headers: intake::dropped_headers(client_head, client.strip_authorization, true),
        };
        Some(Refresh {
            exchange,
            plan,
            validators,
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
