//! The isolate's pipeline, call by call, on a clock the test sets.

use crate::vec_map::VecMap;

use super::*;
use crate::config::OperatorPage;
use crate::header_list::HeaderList;
use crate::observe::metrics::Served;
use crate::race::{Leg, RaceEvent};
use crate::request::coalesce::FlightState;

fn isolate(extra: &[(&str, &str)]) -> Isolate {
    let mut vars: VecMap<String, String> = VecMap::new();
    vars.insert(
        "HEDGE_ORIGINS".into(),
        r#"[{"name":"a","url":"http://a"},{"name":"b","url":"http://b"}]"#.into(),
    );
    vars.insert("HEDGE_STATS_TOKEN".into(), "0123456789abcdef".into());
    for (k, v) in extra {
        vars.insert(k.to_string(), v.to_string());
    }
    Isolate::new(crate::config::parse(&vars).expect("valid"), false, 0.0, 1)
}

fn head<'a>(url: &'a str, method: &'a str, headers: &'a HeaderList) -> RequestHead<'a> {
    RequestHead {
        url,
        method,
        has_body: false,
        headers,
    }
}

static NO_HEADERS: HeaderList = HeaderList::EMPTY;

fn proxy(intake: Intake) -> Exchange {
    proxy_step(intake).0
}

/// A proxied request and its first step.
fn proxy_step(intake: Intake) -> (Exchange, Step) {
    match intake {
        Intake::Proxy(exchange, first) => (*exchange, first),
        other => panic!("not proxied: {other:?}"),
    }
}

/// The plan of `exchange` (for `url`), whose first step is `first`: a
/// lookup finds nothing.
fn plan_of(iso: &mut Isolate, exchange: &Exchange, first: Step, url: &str) -> RacePlan {
    let step = match first {
        Step::LookUp { .. } => iso.found(exchange, None, &NO_HEADERS, url, false),
        other => other,
    };
    match step {
        Step::Race { plan, .. } => plan,
        other => panic!("no race: {other:?}"),
    }
}

#[test]
fn an_uncacheable_get_is_planned_at_admission_and_completes_in_five_calls() {
    let mut iso = isolate(&[("HEDGE_CACHE", "false")]);
    let (exchange, first) =
        proxy_step(iso.accept(&head("https://e/api/x", "GET", &NO_HEADERS), 0.0));
    let Step::Race { plan, stale: None } = first else {
        panic!("planned without another call: {first:?}");
    };
    let (mut race, primary) = iso.start(plan, &exchange, 0.0);
    assert_eq!(primary.url, "http://a/api/x");
    assert!(
        primary.traceparent.starts_with("00-"),
        "{}",
        primary.traceparent
    );
    let answered = RaceEvent::Answered(Leg::Primary, Ok(200));
    assert_eq!(
        iso.handle(&exchange, &mut race, answered, 30.0).end,
        Some(RaceEnd::Won(Leg::Primary))
    );
    let answer = Answer {
        status: Some(200),
        headers: &NO_HEADERS,
        request: &NO_HEADERS,
        generation: None,
        stale_if_error: None,
        revalidated: None,
        analytics: false,
    };
    let done = iso.complete(&exchange, &race, &answer, "https://e/api/x", 30.0);
    assert_eq!((done.x_hedge, done.status), ("none", 200));
    assert!(done.store.is_none() && done.rescue.is_none() && done.invalidate.is_empty());
    // After the race: the flight released (no store), the response, its
    // log line (no PoP bound: no push).
    use AfterRace::*;
    assert_eq!(done.after_race, [Store, Respond, Log]);
    assert!(done.server_timing.starts_with("origin;dur=30.0;desc=\""));
    assert!(done.server_timing.ends_with("total;dur=30.0"));
}

#[test]
fn refused_requests_reach_neither_cache_nor_origin() {
    let mut iso = isolate(&[]);
    let cl = HeaderList::from_pairs([("content-length", "12x")]);
    for (url, header) in [
        ("https://evil.invalid/x", &NO_HEADERS),
        ("https://e/x", &cl),
    ] {
        assert!(matches!(
            iso.accept(&head(url, "GET", header), 0.0),
            Intake::Refused { .. }
        ));
    }
}

#[test]
fn the_stats_path_and_websockets_are_routed_apart() {
    let mut iso = isolate(&[]);
    let page = |iso: &mut Isolate, url: &str| match iso.accept(&head(url, "GET", &NO_HEADERS), 0.0)
    {
        Intake::Operator { page, .. } => Some(page),
        _ => None,
    };
    assert_eq!(
        page(&mut iso, "https://e/__hedge/stats"),
        Some(OperatorPage::Stats { pop: false })
    );
    assert_eq!(
        page(&mut iso, "https://e/__hedge/stats?scope=pop"),
        Some(OperatorPage::Stats { pop: true })
    );
    assert_eq!(
        page(&mut iso, "https://e/__hedge/metrics"),
        Some(OperatorPage::Metrics { pop: false })
    );
    assert_eq!(
        page(&mut iso, "https://e/__hedge/metrics?x=1&scope=pop"),
        Some(OperatorPage::Metrics { pop: true })
    );
    assert_eq!(
        page(&mut iso, "https://e/__hedge/dashboard"),
        Some(OperatorPage::Dashboard)
    );
    assert_eq!(page(&mut iso, "https://e/__hedge/metricsx"), None);
    assert_eq!(page(&mut iso, "https://e/other/metrics"), None);
    let mut no_token = isolate(&[("HEDGE_STATS_TOKEN", "")]);
    assert_eq!(
        page(&mut no_token, "https://e/__hedge/metrics"),
        None,
        "no token: proxied"
    );
    let upgrade = HeaderList::from_pairs([("upgrade", "websocket")]);
    match iso.accept(&head("https://e/ws?x=1", "GET", &upgrade), 0.0) {
        Intake::WebSocket { url, .. } => assert!(url.ends_with("/ws?x=1"), "{url}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_get_with_a_body_is_drained_and_refused_by_its_length() {
    let mut iso = isolate(&[]);
    let cl = HeaderList::from_pairs([("content-length", "5")]);
    let mut with_body = head("https://e/x", "GET", &cl);
    with_body.has_body = true;
    let (mut exchange, first) = proxy_step(iso.accept(&with_body, 0.0));
    assert_eq!(exchange.body, BodyPlan::Drain { refuse: true });
    assert!(matches!(first, Step::ReadBody), "{first:?}");
    // Read (a refusal is the driver's): then what a bodiless GET does
    // first, on a route not yet known to store a probe of the cache.
    let next = iso.body_read(&mut exchange, None);
    assert!(
        matches!(next, Step::LookUp { coalesced: false }),
        "{next:?}"
    );
}

#[test]
fn identical_misses_coalesce_only_once_the_route_answered_storably() {
    let mut iso = isolate(&[]);
    let accept = |iso: &mut Isolate, url: &str, method: &str, now: f64| {
        proxy(iso.accept(&head(url, method, &NO_HEADERS), now))
    };
    let alone = accept(&mut iso, "https://e/r/x", "GET", 0.0);
    assert_eq!(alone.role, Role::Alone, "an unknown route is not coalesced");
    assert!(
        alone.look_up_cache,
        "the first request on a route probes the cache"
    );
    iso.learn_storable(&alone.route.key, true);
    assert!(matches!(
        accept(&mut iso, "https://e/r/x", "GET", 1.0).role,
        Role::Leader(_)
    ));
    assert!(matches!(
        accept(&mut iso, "https://e/r/x", "GET", 2.0).role,
        Role::Waiter(_)
    ));
    iso.learn_storable(&alone.route.key, false);
    assert_eq!(
        accept(&mut iso, "https://e/r/y", "GET", 3.0).role,
        Role::Alone
    );
    let uncacheable = accept(&mut iso, "https://e/r/x", "POST", 4.0);
    assert_eq!(uncacheable.role, Role::Alone);
    assert!(!uncacheable.look_up_cache);
}

#[test]
fn before_its_race_a_waiter_polls_its_flight_and_reads_what_the_leader_stored() {
    use super::Step::{LookUp, Race, Wait};
    let mut iso = isolate(&[]);
    let url = "https://e/r/x";
    let accept =
        |iso: &mut Isolate, now: f64| proxy_step(iso.accept(&head(url, "GET", &NO_HEADERS), now));
    let (first, step) = accept(&mut iso, 0.0);
    assert!(
        matches!(step, LookUp { coalesced: false }),
        "a probe: {step:?}"
    );
    iso.learn_storable(&first.route.key, true);
    let (leader, step) = accept(&mut iso, 1.0);
    assert!(matches!(step, LookUp { coalesced: false }), "{step:?}");
    let (waiter, step) = accept(&mut iso, 2.0);
    assert!(matches!(step, Wait { ms } if ms == 1.0), "{step:?}");
    let Role::Leader(id) = leader.role else {
        panic!("{:?}", leader.role);
    };
    let polled =
        |iso: &mut Isolate, polls: u32, now: f64| iso.flight_polled(&waiter, url, polls, now);
    assert!(matches!(polled(&mut iso, 1, 3.0), Wait { ms } if ms == 2.0));
    assert!(matches!(polled(&mut iso, 5, 30.0), Wait { ms } if ms == 16.0));
    // The leader's answer is stored: the waiter reads it.
    iso.coalescer.stored(url, id);
    assert!(matches!(
        polled(&mut iso, 6, 40.0),
        LookUp { coalesced: true }
    ));
    // Released without a store: as if it had come alone.
    let (leader, _) = accept(&mut iso, 50.0);
    let (waiter, _) = accept(&mut iso, 51.0);
    let Role::Leader(id) = leader.role else {
        panic!("{:?}", leader.role);
    };
    iso.flight_released(url, id);
    let next = iso.flight_polled(&waiter, url, 1, 52.0);
    match waiter.look_up_cache {
        true => assert!(matches!(next, LookUp { coalesced: false }), "{next:?}"),
        false => assert!(matches!(next, Race { stale: None, .. }), "{next:?}"),
    }
    // Uncacheable: straight to the race.
    let (_, step) = proxy_step(iso.accept(&head(url, "POST", &NO_HEADERS), 60.0));
    assert!(matches!(step, Race { stale: None, .. }), "{step:?}");
}

#[test]
fn a_refresh_is_its_own_request_ended_by_the_same_completion() {
    let mut iso = isolate(&[("HEDGE_LOG_LEVEL", "info")]);
    let url = "https://e/page/1";
    let conditionals = ["if-none-match", "if-modified-since", "if-match", "if-range"];
    let fields = HeaderList::from_pairs(
        conditionals
            .iter()
            .map(|name| (*name, "x"))
            .chain([("accept", "*/*"), ("connection", "close")]),
    );
    let client = proxy(iso.accept(&head(url, "GET", &fields), 0.0));
    let Refresh {
        exchange: refresh,
        plan,
        ..
    } = iso
        .begin_refresh(url, &client, &fields, Vec::new(), 10.0)
        .expect("the first refresh of a key is claimed");
    assert!(
        iso.begin_refresh(url, &client, &fields, Vec::new(), 10.0)
            .is_none(),
        "one refresh per key at a time"
    );
    assert!(refresh.refresh && refresh.method == "GET" && refresh.route == client.route);
    assert_ne!(refresh.request_id, client.request_id, "its own id");
    assert_eq!(refresh.trace.flags, "00");
    // It asks about the stored entry, not the client's own question.
    let drops = |e: &Exchange, name: &str| e.dropped_headers.iter().any(|n| n == name);
    for name in conditionals {
        assert!(drops(&refresh, name), "{name}");
        assert!(
            !drops(&client, name),
            "{name}: the client's own request keeps it"
        );
    }
    assert!(!drops(&refresh, "accept") && drops(&refresh, "connection"));
    assert!(drops(&client, "connection"));
    let (mut race, _) = iso.start(plan, &refresh, 10.0);
    let failed = RaceEvent::Answered(Leg::Primary, Ok(503));
    iso.handle(&refresh, &mut race, failed, 30.0);
    let header = HeaderList::from_pairs([("cache-control", "max-age=60")]);
    let answer = Answer {
        status: Some(503),
        headers: &header,
        request: &NO_HEADERS,
        generation: None,
        stale_if_error: None,
        revalidated: None,
        analytics: false,
    };
    let done = iso.complete(&refresh, &race, &answer, url, 40.0);
    iso.end_refresh(url);
    assert!(done.store.is_none(), "a 5xx is never stored");
    assert!(done.push.is_none(), "a refresh sends no push");
    // The same steps as a client's, in a refresh's order: no response, its
    // log line first, its unread answer cancelled.
    use AfterRace::*;
    assert_eq!(done.after_race, [Log, Store, Discard]);
    let line = done.record.line.expect("logged at info");
    assert!(line.contains("\"refresh\":true"), "{line}");
    // The line has the status and the bill its completion gave it: no
    // further call back into the isolate writes it.
    assert!(line.contains("\"status\":503") && line.contains("\"level\":\"error\""));
    assert_eq!(done.status, 503);
    assert!(done.record.error && done.record.point.is_none());
    let stats = iso.stats(0.0, 50.0);
    let route = &stats["routes"][0];
    assert_eq!(route["route"], client.route.key.as_str());
    assert_eq!(route["requests"], 1, "counted like any race: {stats}");
    assert_eq!(route["errors"], 0, "no client saw the failure");
    // The page and the metrics read one counter.
    let text = iso.metrics_text(crate::observe::exposition::Format::Prometheus, 50.0);
    let label = format!("route=\"{}\"", client.route.key);
    let requests = (text.lines())
        .find(|l| l.starts_with("hedgehog_requests_total{") && l.contains(&label))
        .unwrap_or_else(|| panic!("no requests line for {label}: {text}"));
    assert!(requests.ends_with(" 1"), "{requests}");
    let error = &stats["recent_errors"][0];
    assert_eq!(error["status"], 503);
    assert_eq!(
        error["what"],
        "a background refresh failed; the stale copy stays"
    );
    assert!(
        iso.begin_refresh(url, &client, &fields, Vec::new(), 60.0)
            .is_some(),
        "claimable again once over"
    );
}

/// A cacheable GET of `url` raced and answered at `now_ms` with a storable
/// 200 of `length` bytes.
fn stored_answer(
    iso: &mut Isolate,
    url: &str,
    length: &str,
    now_ms: f64,
) -> (Exchange, Completion) {
    let (exchange, first) = proxy_step(iso.accept(&head(url, "GET", &NO_HEADERS), now_ms));
    let plan = plan_of(iso, &exchange, first, url);
    let fields =
        HeaderList::from_pairs([("cache-control", "max-age=60"), ("content-length", length)]);
    let done = race_to(iso, &exchange, plan, url, 200, (200, &fields), now_ms);
    (exchange, done)
}

#[test]
fn a_store_holds_its_declared_length_until_its_copy_is_put_and_only_a_whole_copy_ends_the_flight() {
    let mut iso = isolate(&[("HEDGE_TUNING", r#"{"max_held_body_bytes":100}"#)]);
    let url = "https://e/r/x";
    let (first, done) = stored_answer(&mut iso, url, "60", 0.0);
    let (_, ticket) = done.store.expect("a storable answer is stored");
    assert_eq!(iso.held_bodies.held(), 60, "claimed at completion");
    // A second copy in flight would pass the cap: not stored, and the route
    // learns its latest answer was not storable (no coalescing).
    let (_, over) = stored_answer(&mut iso, "https://e/r/y", "60", 2.0);
    assert!(over.store.is_none());
    assert_eq!(iso.held_bodies.held(), 60);
    assert!(!iso.cache_routes.should_coalesce(&first.route.key));
    // The copy came out short: taken out again, and its bytes given back.
    let short = CopyEnd {
        put: true,
        bytes: 59,
        ended: true,
        ..CopyEnd::default()
    };
    assert!(!iso.copy_stored(&ticket, short, false));
    assert_eq!(iso.held_bodies.held(), 0);
    // A leader's whole copy ends its flight as stored: waiters read it.
    iso.learn_storable(&first.route.key, true);
    let (leader, done) = stored_answer(&mut iso, url, "60", 10.0);
    let Role::Leader(id) = leader.role else {
        panic!("a known route's miss leads a flight: {:?}", leader.role);
    };
    let (_, ticket) = done.store.expect("stored");
    let whole = CopyEnd { bytes: 60, ..short };
    assert_eq!(iso.coalescer.state(url, id, 12.0), FlightState::Pending);
    assert!(iso.copy_stored(&ticket, whole, true), "kept");
    assert_eq!(
        iso.coalescer.state(url, id, 12.0),
        FlightState::Pending,
        "a varying answer's flight waits for its marker"
    );
    iso.marker_stored(&ticket);
    assert_eq!(iso.coalescer.state(url, id, 12.0), FlightState::Stored);
    assert_eq!(iso.held_bodies.held(), 0);
}

#[test]
fn the_isolate_says_how_an_entry_serves_or_which_fields_revalidate_it() {
    use crate::cache::entry::EntryHead;
    use crate::cache::freshness::StoredMeta;
    use crate::cache::policy::EntryMeta;
    let mut iso = isolate(&[]);
    let entry = |lifetime_s: f64| EntryHead {
        stored: HeaderList::from_pairs([("etag", "\"v1\""), ("content-length", "5")]),
        meta: EntryMeta {
            freshness: StoredMeta {
                response_time_s: 0.0,
                initial_age_s: 0.0,
                lifetime_s,
                stale_while_revalidate_s: 0.0,
                stale_if_error_s: 0.0,
                must_revalidate: false,
                has_validator: true,
            },
            hidden: Vec::new(),
        },
    };
    let url = "https://e/r/x";
    let plain = proxy(iso.accept(&head(url, "GET", &NO_HEADERS), 1_000.0));
    let Step::Serve(ServeEntry {
        age_s,
        how,
        not_modified,
        edits,
        refresh: None,
    }) = iso.found(&plain, Some(&entry(60.0)), &NO_HEADERS, url, false)
    else {
        panic!("a fresh entry serves");
    };
    assert_eq!((age_s, how, not_modified), (1, Served::Hit, false));
    assert!(edits.set.contains(&("age".to_string(), "1".to_string())));
    // The client's own validator matches: a bodiless 304.
    let inm = HeaderList::from_pairs([("if-none-match", "\"v1\"")]);
    let asking = proxy(iso.accept(&head(url, "GET", &inm), 1_000.0));
    let Step::Serve(ServeEntry {
        not_modified: true,
        edits,
        ..
    }) = iso.found(&asking, Some(&entry(60.0)), &inm, url, false)
    else {
        panic!("a matching conditional request gets a 304");
    };
    assert!(edits.delete.iter().any(|n| n == "content-length"));
    // Too stale: the legs revalidate it, unless the client asks its own question.
    let stale = iso.found(&plain, Some(&entry(0.0)), &NO_HEADERS, url, false);
    let Step::Race {
        stale: Some(stale), ..
    } = stale
    else {
        panic!("raced, asking about it: {stale:?}");
    };
    let validators = vec![("if-none-match", "\"v1\"".to_string())];
    assert_eq!(
        *stale,
        StaleEntry {
            if_error: false,
            validators
        }
    );
    let own = iso.found(&asking, Some(&entry(0.0)), &inm, url, false);
    assert!(matches!(own, Step::Race { stale: Some(s), .. } if s.validators.is_empty()));
}

#[test]
fn an_entry_served_ends_its_leaders_flight_and_one_stale_while_revalidate_serve_claims_the_refresh()
{
    use crate::cache::entry::EntryHead;
    use crate::cache::freshness::StoredMeta;
    use crate::cache::policy::EntryMeta;
    let mut iso = isolate(&[]);
    let url = "https://e/r/x";
    // Stale for 5 s of its 60 of stale-while-revalidate.
    let entry = EntryHead {
        stored: HeaderList::from_pairs([("etag", "\"v1\"")]),
        meta: EntryMeta {
            freshness: StoredMeta {
                response_time_s: 0.0,
                initial_age_s: 0.0,
                lifetime_s: 10.0,
                stale_while_revalidate_s: 60.0,
                stale_if_error_s: 0.0,
                must_revalidate: false,
                has_validator: true,
            },
            hidden: Vec::new(),
        },
    };
    let first = proxy(iso.accept(&head(url, "GET", &NO_HEADERS), 0.0));
    iso.learn_storable(&first.route.key, true);
    let leader = proxy(iso.accept(&head(url, "GET", &NO_HEADERS), 15_000.0));
    let Role::Leader(id) = leader.role else {
        panic!("a known storable route coalesces: {:?}", leader.role);
    };
    let Step::Serve(ServeEntry {
        how: Served::StaleWhileRevalidate,
        refresh: Some(refresh),
        ..
    }) = iso.found(&leader, Some(&entry), &NO_HEADERS, url, false)
    else {
        panic!("served stale, refreshed");
    };
    assert!(refresh.exchange.refresh, "accepted, planned");
    let asks = vec![("if-none-match", "\"v1\"".to_string())];
    assert_eq!(refresh.validators, asks, "it asks about the served entry");
    assert_eq!(iso.coalescer.state(url, id, 15_001.0), FlightState::Stored);
    // The next request is served stale too, but the refresh is claimed.
    let next = proxy(iso.accept(&head(url, "GET", &NO_HEADERS), 15_010.0));
    let again = iso.found(&next, Some(&entry), &NO_HEADERS, url, false);
    assert!(
        matches!(again, Step::Serve(ServeEntry { refresh: None, .. })),
        "{again:?}"
    );
    iso.end_refresh(url);
    let later = proxy(iso.accept(&head(url, "GET", &NO_HEADERS), 15_020.0));
    let claimed = iso.found(&later, Some(&entry), &NO_HEADERS, url, false);
    assert!(matches!(
        claimed,
        Step::Serve(ServeEntry {
            refresh: Some(_),
            ..
        })
    ));
}

/// Races `exchange` (for `url`, under `plan`) to an answer of `leg_status` from its
/// primary at `now_ms` and completes it with the answer's status and
/// fields.
fn race_to(
    iso: &mut Isolate,
    exchange: &Exchange,
    plan: RacePlan,
    url: &str,
    leg_status: u16,
    answer: (u16, &HeaderList),
    now_ms: f64,
) -> Completion {
    let answer = Answer {
        status: Some(answer.0),
        headers: answer.1,
        request: &NO_HEADERS,
        generation: None,
        stale_if_error: None,
        revalidated: None,
        analytics: false,
    };
    race_to_answer(iso, exchange, plan, url, leg_status, &answer, now_ms)
}

/// [`race_to`] with the whole answer as the glue hands it in.
fn race_to_answer(
    iso: &mut Isolate,
    exchange: &Exchange,
    plan: RacePlan,
    url: &str,
    leg_status: u16,
    answer: &Answer<'_>,
    now_ms: f64,
) -> Completion {
    let (mut race, _) = iso.start(plan, exchange, now_ms);
    let answered = RaceEvent::Answered(Leg::Primary, Ok(leg_status));
    iso.handle(exchange, &mut race, answered, now_ms + 5.0);
    iso.complete(exchange, &race, answer, url, now_ms + 5.0)
}

#[test]
fn an_entry_goes_stale_is_revalidated_and_a_304_makes_it_fresh_again_on_the_test_clock() {
    use crate::cache::entry::EntryHead;
    let mut iso = isolate(&[]);
    let url = "https://e/r/x";
    let accept = |iso: &mut Isolate, now_ms: f64| {
        proxy_step(iso.accept(&head(url, "GET", &NO_HEADERS), now_ms))
    };
    // t = 0: a miss; the origin's answer is stored for 10 s.
    let origin = HeaderList::from_pairs([
        ("cache-control", "max-age=10"),
        ("etag", "\"v1\""),
        ("content-length", "5"),
        ("x-kind", "first"),
    ]);
    let (miss, first) = accept(&mut iso, 0.0);
    let plan = plan_of(&mut iso, &miss, first, url);
    let done = race_to(&mut iso, &miss, plan, url, 200, (200, &origin), 0.0);
    let (plan, ticket) = done.store.expect("stored");
    let whole = CopyEnd {
        put: true,
        bytes: 5,
        ended: true,
        ..CopyEnd::default()
    };
    assert!(iso.copy_stored(&ticket, whole, false));
    let entry = EntryHead::new(plan.edits.applied_to(&origin)).expect("its meta reads");
    // t = 5 s: fresh, served at its age.
    let (hit, _) = accept(&mut iso, 5_000.0);
    let served = iso.found(&hit, Some(&entry), &NO_HEADERS, url, false);
    assert!(
        matches!(served, Step::Serve(ServeEntry { age_s: 5, .. })),
        "{served:?}"
    );
    // t = 20 s: stale; the legs ask the origin with its validator.
    let (later, _) = accept(&mut iso, 20_000.0);
    let Step::Race {
        plan,
        stale: Some(stale),
    } = iso.found(&later, Some(&entry), &NO_HEADERS, url, false)
    else {
        panic!("stale after its 10 s");
    };
    let validators = vec![("if-none-match", "\"v1\"".to_string())];
    assert_eq!(stale.validators, validators);
    // The origin answers 304 with a new lifetime: the entry, merged, is what
    // the client gets and what is stored again.
    let not_modified =
        HeaderList::from_pairs([("cache-control", "max-age=60"), ("etag", "\"v1\"")]);
    let answer = Answer {
        status: Some(304),
        headers: &not_modified,
        request: &NO_HEADERS,
        generation: None,
        stale_if_error: None,
        revalidated: Some((200, &entry)),
        analytics: false,
    };
    let done = race_to_answer(&mut iso, &later, plan, url, 304, &answer, 20_000.0);
    assert_eq!(done.status, 200, "the client gets the entry");
    let merged = (done.merged.as_ref())
        .expect("merged")
        .applied_to(&entry.stored);
    assert_eq!(
        merged.get("x-kind").as_deref(),
        Some("first"),
        "the entry's own fields stay"
    );
    assert_eq!(merged.get("content-length").as_deref(), Some("5"));
    assert_eq!(done.body_length, Some(5), "the entry's body, declared");
    use AfterRace::*;
    assert_eq!(done.after_race, [Merge, Store, Respond, Log]);
    let (plan, ticket) = done.store.expect("the merged entry is stored again");
    assert!(iso.copy_stored(&ticket, whole, false));
    let renewed = EntryHead::new(plan.edits.applied_to(&merged)).expect("meta");
    assert_eq!(
        renewed.header("cache-control").as_deref(),
        Some("max-age=60")
    );
    // t = 50 s: fresh again, 30 s old.
    let (after, _) = accept(&mut iso, 50_000.0);
    let served = iso.found(&after, Some(&renewed), &NO_HEADERS, url, false);
    assert!(
        matches!(served, Step::Serve(ServeEntry { age_s: 30, .. })),
        "{served:?}"
    );
}

#[test]
fn a_stale_entry_stands_in_for_a_5xx_at_its_current_age() {
    use crate::cache::entry::EntryHead;
    let mut iso = isolate(&[]);
    let url = "https://e/r/x";
    let origin = HeaderList::from_pairs([("cache-control", "max-age=10, stale-if-error=600")]);
    let (first, step) = proxy_step(iso.accept(&head(url, "GET", &NO_HEADERS), 0.0));
    let plan = plan_of(&mut iso, &first, step, url);
    let done = race_to(&mut iso, &first, plan, url, 200, (200, &origin), 0.0);
    let (plan, _) = done.store.expect("stored");
    let entry = EntryHead::new(plan.edits.applied_to(&origin)).expect("meta");
    // 100 s later the origin fails: the entry answers, 100 s old.
    let later = proxy(iso.accept(&head(url, "GET", &NO_HEADERS), 100_000.0));
    let Step::Race {
        plan,
        stale: Some(stale),
    } = iso.found(&later, Some(&entry), &NO_HEADERS, url, false)
    else {
        panic!("stale: raced");
    };
    assert!(stale.if_error, "allowed to stand in for an error");
    let (mut race, _) = iso.start(plan, &later, 100_000.0);
    iso.handle(
        &later,
        &mut race,
        RaceEvent::Answered(Leg::Primary, Ok(503)),
        100_005.0,
    );
    let failed = HeaderList::from_pairs([("retry-after", "1")]);
    let answer = Answer {
        status: Some(503),
        headers: &failed,
        request: &NO_HEADERS,
        generation: None,
        stale_if_error: Some((200, &entry)),
        revalidated: None,
        analytics: false,
    };
    let done = iso.complete(&later, &race, &answer, url, 100_005.0);
    assert_eq!((done.status, done.x_hedge), (200, "stale"));
    let edits = done.rescue.expect("the stale entry stands in");
    assert!(
        edits.set.contains(&("age".to_string(), "100".to_string())),
        "{edits:?}"
    );
    assert!(done.store.is_none(), "a 5xx is never stored");
}
