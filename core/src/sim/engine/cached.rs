//! The shared cache in the simulator: a request's way through it as the
//! Worker's glue takes it (`src/edge/proxy.rs`, `cache.rs`, `refresh.rs`),
//! on the virtual clock. The isolate accepts the request; a waiter polls its
//! flight; a lookup reads what the cache holds; the isolate judges the entry
//! (served, stale within `stale-while-revalidate` with a background refresh,
//! or stale: revalidated with its validators); an origin's `304` is merged
//! into the entry; the isolate's completion says what is stored. Every
//! decision is the isolate's; this module carries them out, as the glue does.
//!
//! What is not modelled: the store's copy takes no time (waiters find the
//! entry as soon as the race ends), and the refresh's second read of the
//! entry on a `304` costs nothing.

use std::collections::HashMap;

use super::{Event, Sim};
use crate::cache::entry::{lookup_step, EntryHead, LookupStep, StorePlan};
use crate::header_list::HeaderList;
use crate::isolate::{
    Answer, CopyEnd, Exchange, Intake, Isolate, Refresh, RequestHead, ServeEntry, Step,
};
use crate::observe::metrics::Served;
use crate::pop::push::Push;
use crate::race::{RaceEnd, RaceState};
use crate::request::coalesce::Role;
use crate::sim::cacheable::CacheSpec;
use crate::sim::rng::Rng;

/// The runtime's cache: what it holds under each key, until its keep time
/// (the `max-age` of the stored `Cache-Control`) runs out.
#[derive(Debug, Default)]
pub(super) struct RuntimeCache {
    held: HashMap<String, (u16, HeaderList, f64)>,
}

impl RuntimeCache {
    fn get(&self, key: &str, now_ms: f64) -> Option<(u16, &HeaderList)> {
        let (status, fields, until_ms) = self.held.get(key)?;
        (now_ms < *until_ms).then_some((*status, fields))
    }

    fn put(&mut self, key: String, status: u16, fields: HeaderList, now_ms: f64) {
        let keep_s = (fields.get("cache-control"))
            .and_then(|c| {
                let at = c.find("max-age=")? + "max-age=".len();
                c[at..].split(',').next()?.trim().parse::<f64>().ok()
            })
            .unwrap_or(0.0);
        self.held
            .insert(key, (status, fields, now_ms + keep_s * 1000.0));
    }

    /// What a lookup finds for `url` (a request with `request`'s fields):
    /// the entry's status and fields, and the generation a marker names.
    fn lookup(
        &self,
        url: &str,
        request: &HeaderList,
        now_ms: f64,
    ) -> (Option<(u16, EntryHead)>, Option<String>) {
        let Some((status, plain)) = self.get(url, now_ms) else {
            return (None, None);
        };
        let (step, generation) = lookup_step(url, plain, request);
        let found = match step {
            LookupStep::Plain => Some((status, plain.clone())),
            LookupStep::Variant(key) => (self.get(&key, now_ms)).map(|(s, f)| (s, f.clone())),
            LookupStep::Miss => None,
        };
        let entry = found.and_then(|(status, fields)| Some((status, EntryHead::new(fields)?)));
        (entry, generation)
    }
}

/// What the cache side of the simulator counts over a run (warm-up
/// included): how the isolates served requests, by their own counters, and
/// what the origins and the cache saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheCounts {
    /// Requests by how the isolates say they were served (their metrics:
    /// origin, stale-if-error, hit, coalesced, stale-while-revalidate,
    /// refresh).
    pub served: [u64; 6],
    /// Background refreshes whose race ended (counted by the simulator).
    pub refreshes_ended: u64,
    /// Races that asked an origin with a stored entry's validators.
    pub revalidations: u64,
    /// ... answered `304` and merged into the entry.
    pub not_modified: u64,
    /// Entries the cache took.
    pub stores: u64,
    /// Looked-up requests for a URL within its `max-age` (less the `Date`'s
    /// one-second resolution) of the request whose `304` renewed it: (served
    /// fresh from the cache, not).
    pub after_renewal: (u64, u64),
}

/// A request's part in the cache: its exchange, the URL and which key it
/// is, and the stale entry its race revalidates.
#[derive(Debug)]
pub(super) struct CachedRequest {
    exchange: Exchange,
    url: String,
    key: usize,
    /// The stale entry the race revalidates: its status and fields, and
    /// whether it may stand in for a failure.
    stale: Option<(u16, EntryHead, bool)>,
    /// The `If-None-Match` its legs send.
    if_none_match: Option<String>,
    /// The generation of the URL's variants its lookup found.
    generation: Option<String>,
    /// Flight polls so far (a waiter).
    polls: u32,
}

/// The cache's state in a run.
#[derive(Debug)]
pub(super) struct CacheSide {
    spec: CacheSpec,
    popularity: Vec<f64>,
    keys_rng: Rng,
    runtime: RuntimeCache,
    /// When the request whose `304` last renewed each URL was made.
    renewed_ms: HashMap<String, f64>,
    pub(super) counts: CacheCounts,
}

impl CacheSide {
    pub(super) fn new(spec: CacheSpec, seed: u64) -> Self {
        Self {
            popularity: spec.popularity(),
            spec,
            keys_rng: Rng::new(seed, 3),
            runtime: RuntimeCache::default(),
            renewed_ms: HashMap::new(),
            counts: CacheCounts::default(),
        }
    }

    /// The origin's answer request `c`'s race kept (its status as drawn and
    /// when the origin served it; `None`: no answer), as its legs asked.
    fn kept_answer(
        &self,
        c: &CachedRequest,
        kept: Option<(u16, f64)>,
    ) -> (Option<u16>, HeaderList) {
        let Some((drawn, served_ms)) = kept else {
            return (None, HeaderList::EMPTY);
        };
        let inm = c.if_none_match.as_deref();
        let (status, fields) = self.spec.origin_answer(c.key, drawn, inm, served_ms);
        (Some(status), fields)
    }

    /// The entry request `c`'s legs asked about with its validators, when
    /// a `304` (`status`) answered them: the stale entry its race
    /// revalidated or (a refresh) the one the cache holds now, read again as
    /// the glue does (gone meanwhile: none, and the bare `304` stands).
    fn revalidated(
        &self,
        c: &CachedRequest,
        status: Option<u16>,
        now_ms: f64,
    ) -> Option<(u16, EntryHead)> {
        if status != Some(304) || c.if_none_match.is_none() {
            return None;
        }
        match &c.stale {
            Some((status, entry, _)) => Some((*status, entry.clone())),
            None => self.runtime.lookup(&c.url, &NO_FIELDS, now_ms).0,
        }
    }

    /// Puts an answer (`status`, `fields`) for `url` as the completion's
    /// `plan` says: under its key with its fields, and a varying answer's
    /// marker under the URL.
    fn store(&mut self, plan: StorePlan, status: u16, fields: &HeaderList, url: &str, now_ms: f64) {
        self.counts.stores += 1;
        let stored = plan.edits.applied_to(fields);
        self.runtime.put(plan.key, status, stored, now_ms);
        if let Some(marker) = plan.marker {
            let marker =
                HeaderList::from_pairs(marker.iter().map(|(n, v)| (n.as_str(), v.as_str())));
            self.runtime.put(url.to_string(), 200, marker, now_ms);
        }
    }
}

static NO_FIELDS: HeaderList = HeaderList::EMPTY;

/// The `If-None-Match` among a request's `validators` (the simulator's
/// origins answer by `ETag` alone).
fn if_none_match(validators: &[(&'static str, String)]) -> Option<String> {
    let inm = validators.iter().find(|(name, _)| *name == "if-none-match");
    inm.map(|(_, value)| value.clone())
}

impl Sim<'_> {
    /// A request for one of `route`'s URLs, taken up by `isolate`'s intake.
    pub(super) fn take_up_cached(&mut self, isolate: usize, route: usize, arrival_ms: f64) {
        let now = self.now;
        let Some(side) = self.cache.as_mut() else {
            return;
        };
        let u = side.keys_rng.uniform();
        let key = (side.popularity.partition_point(|&p| p < u)).min(side.spec.keys.max(1) - 1);
        let url = format!("http://edge.sim{}/k{key}", self.route_names[route]);
        let head = RequestHead {
            url: &url,
            method: "GET",
            has_body: false,
            headers: &NO_FIELDS,
        };
        let Intake::Proxy(exchange, first) = self.isolates[isolate].accept(&head, now) else {
            return; // the simulator's requests are all proxied
        };
        let id = self.new_request(isolate, arrival_ms);
        self.requests[id as usize].cached = Some(Box::new(CachedRequest {
            exchange: *exchange,
            url,
            key,
            stale: None,
            if_none_match: None,
            generation: None,
            polls: 0,
        }));
        self.carry_out(id, first);
    }

    /// Carries out request `req`'s next step, as the isolate said.
    fn carry_out(&mut self, req: u32, step: Step) {
        let lookup_ms = self.cache.as_ref().map_or(0.0, |s| s.spec.lookup_ms);
        match step {
            Step::ReadBody => {
                // The simulator's requests carry no body.
                let r = &mut self.requests[req as usize];
                let Some(c) = r.cached.as_mut() else {
                    return;
                };
                let next = self.isolates[r.isolate as usize].body_read(&mut c.exchange, None);
                self.carry_out(req, next);
            }
            Step::Wait { ms } => self.schedule(self.now + ms, Event::FlightPoll { req }),
            Step::LookUp { coalesced } => {
                self.schedule(self.now + lookup_ms, Event::CacheRead { req, coalesced })
            }
            Step::Serve(serve) => self.serve_entry(req, serve),
            Step::Race { plan, .. } => {
                if let (Some(side), Some(c)) = (
                    self.cache.as_mut(),
                    self.requests[req as usize].cached.as_ref(),
                ) {
                    side.counts.revalidations += u64::from(c.if_none_match.is_some());
                }
                self.begin_race(req, plan);
            }
        }
    }

    /// A waiter polls its flight: the isolate says what follows.
    pub(super) fn flight_poll(&mut self, req: u32) {
        let now = self.now;
        let r = &mut self.requests[req as usize];
        let Some(c) = r.cached.as_mut() else {
            return;
        };
        c.polls += 1;
        let iso = &mut self.isolates[r.isolate as usize];
        let next = iso.flight_polled(&c.exchange, &c.url, c.polls, now);
        self.carry_out(req, next);
    }

    /// The cache's answer to a lookup: the isolate says what it does for
    /// the request (a stale entry's validators go with the race).
    pub(super) fn cache_read(&mut self, req: u32, coalesced: bool) {
        let now = self.now;
        let (Some(side), Some(r)) = (self.cache.as_mut(), self.requests.get_mut(req as usize))
        else {
            return;
        };
        let Some(c) = r.cached.as_mut() else {
            return;
        };
        let (entry, generation) = side.runtime.lookup(&c.url, &NO_FIELDS, now);
        c.generation = generation;
        // Its `Date` is to the second: the renewed entry's age starts at up to 1 s.
        let fresh_for_ms = (side.spec.max_age_s as f64 - 1.0) * 1000.0;
        let renewed = (side.renewed_ms.get(&c.url)).is_some_and(|at| now - at < fresh_for_ms);
        let iso = &mut self.isolates[r.isolate as usize];
        let found = entry.as_ref().map(|(_, head)| head);
        let next = iso.found(&c.exchange, found, &NO_FIELDS, &c.url, coalesced);
        let fresh = matches!(&next, Step::Serve(s) if s.how != Served::StaleWhileRevalidate);
        side.counts.after_renewal.0 += u64::from(renewed && fresh);
        side.counts.after_renewal.1 += u64::from(renewed && !fresh);
        if let (
            Step::Race {
                stale: Some(stale), ..
            },
            Some((status, entry)),
        ) = (&next, entry)
        {
            c.if_none_match = if_none_match(&stale.validators);
            c.stale = Some((status, entry, stale.if_error));
        }
        self.carry_out(req, next);
    }

    /// Request `req` is answered from the cache; a background refresh it
    /// claimed starts.
    fn serve_entry(&mut self, req: u32, serve: ServeEntry) {
        if let Some(refresh) = serve.refresh {
            self.start_refresh(req, *refresh);
        }
        self.served_from_cache(req);
    }

    /// A background refresh of the stale entry request `req` was served
    /// from: a request of its own, raced with the entry's validator.
    fn start_refresh(&mut self, req: u32, refresh: Refresh) {
        let r = &self.requests[req as usize];
        let isolate = r.isolate as usize;
        let Some(c) = r.cached.as_ref() else {
            return;
        };
        let (url, key) = (c.url.clone(), c.key);
        let id = self.new_request(isolate, self.now);
        self.requests[id as usize].cached = Some(Box::new(CachedRequest {
            exchange: refresh.exchange,
            url,
            key,
            stale: None,
            if_none_match: if_none_match(&refresh.validators),
            generation: None,
            polls: 0,
        }));
        let race = Step::Race {
            plan: refresh.plan,
            stale: None,
        };
        self.carry_out(id, race);
    }

    /// The status an origin answers leg `leg` of request `req` with, served
    /// at `at_ms` (`status` as its draws say): a `304` when the leg asked
    /// with the representation's current `ETag`.
    pub(super) fn origin_status(&self, req: u32, status: u16, at_ms: f64) -> u16 {
        let (Some(side), Some(c)) = (
            self.cache.as_ref(),
            self.requests[req as usize].cached.as_ref(),
        ) else {
            return status;
        };
        let inm = c.if_none_match.as_deref();
        side.spec.origin_answer(c.key, status, inm, at_ms).0
    }

    /// A cached request's race ended with `end`: the kept answer (with the
    /// entry its legs revalidated, which a `304` updates) goes through the
    /// isolate's completion, whose store, flight and refresh effects are
    /// carried out here. The status the client is answered, and whether it
    /// was a refresh.
    pub(super) fn complete_cached(
        &mut self,
        req: u32,
        race: &RaceState,
        end: RaceEnd,
    ) -> (u16, bool) {
        let now = self.now;
        let (Some(side), Some(r)) = (self.cache.as_mut(), self.requests.get_mut(req as usize))
        else {
            return (502, false);
        };
        let Some(c) = r.cached.as_mut() else {
            return (502, false);
        };
        let kept = (end.kept_leg().map(|leg| r.legs[leg.index()]))
            .and_then(|l| Some((l.status, l.started_ms?)));
        let (status, fields) = side.kept_answer(c, kept);
        let revalidated = side.revalidated(c, status, now);
        let stale_if_error = (c.stale.as_ref())
            .filter(|(_, _, if_error)| *if_error)
            .map(|(s, entry, _)| (*s, entry));
        let answer = Answer {
            status,
            headers: &fields,
            request: &NO_FIELDS,
            generation: c.generation.as_deref(),
            stale_if_error,
            revalidated: revalidated.as_ref().map(|(s, entry)| (*s, entry)),
            analytics: false,
        };
        let iso = &mut self.isolates[r.isolate as usize];
        let done = iso.complete(&c.exchange, race, &answer, &c.url, now);
        // What the client got and a store keeps: the entry a 304 updated.
        let (status, fields) = match (&done.merged, &revalidated) {
            (Some(edits), Some((stored, entry))) => {
                side.counts.not_modified += 1;
                // Fresh for its lifetime from when the revalidation was asked.
                side.renewed_ms.insert(c.url.clone(), c.exchange.started_ms);
                (Some(*stored), edits.applied_to(&entry.stored))
            }
            _ => (status, fields),
        };
        let stored = match (done.store, status) {
            (Some((plan, ticket)), Some(status)) => {
                let varying = plan.marker.is_some();
                let bytes = plan.expected_len.unwrap_or(side.spec.body_bytes);
                side.store(plan, status, &fields, &c.url, now);
                // The copy takes no time here: whole, at once.
                let whole = CopyEnd {
                    put: true,
                    bytes,
                    ended: true,
                    ..CopyEnd::default()
                };
                let kept = iso.copy_stored(&ticket, whole, varying);
                if kept && varying {
                    iso.marker_stored(&ticket);
                }
                kept
            }
            _ => false,
        };
        if let (Role::Leader(id), false) = (c.exchange.role, stored) {
            iso.flight_released(&c.url, id);
        }
        let refresh = c.exchange.refresh;
        if refresh {
            iso.end_refresh(&c.url);
            side.counts.refreshes_ended += 1;
        }
        if let Some(push) = done.push.and_then(|bytes| Push::decode(&bytes).ok()) {
            let isolate = r.isolate;
            self.send_push(isolate, push);
        }
        (done.status, refresh)
    }

    /// Request `req` was answered from the cache now.
    fn served_from_cache(&mut self, req: u32) {
        let isolate = self.requests[req as usize].isolate as usize;
        let respond_ms = self.params.isolate_cpu.map_or(0.0, |c| c.respond_ms);
        self.spend(isolate, respond_ms);
        // No origin's primary: none is counted.
        if let Some(latency) = self.book_latency(req, false, usize::MAX) {
            self.result.unhedged.push((latency, "cache"));
        }
    }

    /// The isolates' own count of how they served requests.
    pub(super) fn served_counts(isolates: &[Isolate]) -> [u64; 6] {
        let mut served = [0; 6];
        for iso in isolates {
            for (sum, n) in served.iter_mut().zip(iso.served_counts()) {
                *sum += n;
            }
        }
        served
    }
}

#[cfg(test)]
mod tests {
    use crate::sim::engine::run;
    use crate::sim::engine::tests::{config, params};

    #[test]
    fn a_cacheable_origin_is_answered_from_the_cache_revalidated_by_304s_and_refreshed() {
        let p = params("cached-tail", 30.0);
        let r = run(&p, &config(&[])).expect("runs");
        let c = &r.cache;
        let [origin, stale_if_error, hit, coalesced, swr, refresh] = c.served;
        // Every request, a client's or a refresh, is counted once by how
        // the isolate served it; a refresh shows in its counters.
        assert_eq!(
            origin + stale_if_error + hit + coalesced + swr + refresh,
            r.simulated
        );
        assert!(refresh > 0 && refresh == c.refreshes_ended, "{c:?}");
        assert!(swr >= refresh, "a refresh follows a stale answer: {c:?}");
        // Popular URLs are answered from the cache; identical misses share.
        assert!(hit > r.simulated / 2, "{c:?}");
        assert!(coalesced > 0, "{c:?}");
        // Stale entries are revalidated with their ETag; an unchanged one
        // costs the origin a 304, merged into the entry, which is then
        // fresh again for its whole lifetime.
        assert!(c.not_modified > c.revalidations / 2, "{c:?}");
        let (fresh, not) = c.after_renewal;
        assert!(fresh > 1_000 && not == 0, "{c:?}");
        assert_eq!(r.errors, 0);
    }

    #[test]
    fn cached_requests_of_a_pop_push_their_counts_to_the_aggregator() {
        let mut p = params("cached-tail", 10.0);
        p.isolates = 4;
        p.aggregator_rtt_ms = Some(5.0);
        let r = run(&p, &config(&[])).expect("runs");
        // The completions' pushes (taken by the isolate, as in the Worker)
        // reach the aggregator.
        assert!(r.pushes > 10, "{} pushes", r.pushes);
        assert!(r.cache.served[2] > 0, "{:?}", r.cache);
    }
}
