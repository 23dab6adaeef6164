//! A stored entry's form, decided once: where a response is stored and how
//! its header fields change on the way in (the store plan), how a lookup
//! finds the entry for a request (the plain key, or a marker naming a
//! variant), and how an entry's fields change on the way out (served, as a
//! `304` to a conditional request, or updated by an origin's `304`). The
//! glue reads each message's fields once ([`HeaderList`]) and applies the
//! edits these rules return; it decides nothing about the form.
//!
//! A stored entry is the origin's response less the fields a proxy does
//! not pass on and the Worker's own namespace, with the fields the runtime
//! would read for freshness of its own moved into [`META_HEADER`] beside the
//! entry's freshness ([`EntryMeta`]), and a `Cache-Control` that only tells
//! the runtime how long to keep it.

use std::borrow::Cow;

use super::conditional::{not_modified, updated_by_304, NOT_MODIFIED_OMITS};
use super::freshness::StoredMeta;
use super::policy::{
    variant_key, vary_rule, EntryMeta, VaryRule, GENERATION_HEADER, HIDDEN_FROM_RUNTIME,
    INTERNAL_HEADER_PREFIX, META_HEADER, VARY_MARKER_HEADER,
};
use crate::header_list::HeaderList;
use crate::request::body_watch::fixed_length;
use crate::request::outbound::hop_by_hop_fields;

/// Changes to a message's header fields: the deletes first, then the sets
/// in order (a later set of a name wins).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderEdits {
    /// Names to delete.
    pub delete: Vec<String>,
    /// Names and values to set.
    pub set: Vec<(String, String)>,
}

impl HeaderEdits {
    /// `head` with these edits carried out as `Headers` does them: a delete
    /// takes every field of its name, a set replaces them with one (at
    /// the end; a later set of a name wins). What the glue does to a
    /// runtime `Headers`: the completion reads a `304`'s merge this way.
    pub fn applied_to(&self, head: &HeaderList) -> HeaderList {
        let mut joined = String::new();
        let mut push = |name: &str, value: &str| {
            // A value holding a `\n` is left out, as the runtime would refuse it.
            if value.contains('\n') {
                return;
            }
            if !joined.is_empty() {
                joined.push('\n');
            }
            joined.push_str(name);
            joined.push('\n');
            joined.push_str(value);
        };
        let edited = |name: &str| {
            self.delete.iter().any(|d| d == name) || self.set.iter().any(|(s, _)| s == name)
        };
        for (name, value) in head.fields().filter(|(n, _)| !edited(n)) {
            push(name, value);
        }
        for (i, (name, value)) in self.set.iter().enumerate() {
            if !self.set[i + 1..].iter().any(|(later, _)| later == name) {
                push(name, value);
            }
        }
        HeaderList::from_joined(joined)
    }
}

/// Where and how a response is stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StorePlan {
    /// The cache key it goes under (the URL, or its variant's key).
    pub key: String,
    /// What makes the response's fields the stored ones.
    pub edits: HeaderEdits,
    /// For a varying response, the marker stored under the plain URL after
    /// the variant (a bodiless `200` with these fields): it names the
    /// request fields the variants differ on and their generation.
    pub marker: Option<Vec<(String, String)>>,
    /// The body's declared length, when the runtime passes it through
    /// unchanged: the copy is kept only when it reached it.
    pub expected_len: Option<u64>,
}

/// The fields of a message the cache never keeps: those a proxy does not
/// pass on (RFC 9110 section 7.6.1) and anything in the Worker's namespace.
pub fn not_end_to_end(head: &HeaderList) -> Vec<&str> {
    let mut fields = hop_by_hop_fields(head);
    fields.extend(
        head.names()
            .filter(|n| n.starts_with(INTERNAL_HEADER_PREFIX)),
    );
    fields
}

/// How a response with fields `response`, answering a request with fields
/// `request` to `url`, is stored with freshness `meta` for `keep_secs`;
/// `generation` gives a varying response's generation (the one a lookup
/// found, or a new one). `None` when its `Vary` makes no usable key.
pub fn store_plan(
    url: &str,
    request: &HeaderList,
    response: &HeaderList,
    generation: impl FnOnce() -> String,
    meta: StoredMeta,
    keep_secs: u64,
) -> Option<StorePlan> {
    let (key, marker) = match vary_rule(response.get("vary").as_deref()) {
        VaryRule::Unstorable => return None,
        VaryRule::None => (url.to_string(), None),
        VaryRule::Headers(names) => {
            let generation = generation();
            let key = variant_key(url, &generation, &names, |n| {
                request.get(n).map(Cow::into_owned)
            })?;
            let marker = vec![
                (VARY_MARKER_HEADER.to_string(), names.join(",")),
                (GENERATION_HEADER.to_string(), generation),
                ("cache-control".to_string(), runtime_keep(keep_secs)),
            ];
            (key, Some(marker))
        }
    };
    let expected_len = fixed_length(
        response.get("content-length").as_deref(),
        response.get("content-encoding").as_deref(),
    );
    Some(StorePlan {
        key,
        edits: stored_edits(response, meta, keep_secs),
        marker,
        expected_len,
    })
}

/// What makes a response's fields the stored ones: end-to-end only, the
/// fields the runtime would judge freshness by moved into the entry's meta
/// with the core's freshness, no `Age` (folded into the initial age), and a
/// keep time for the runtime.
fn stored_edits(response: &HeaderList, meta: StoredMeta, keep_secs: u64) -> HeaderEdits {
    let dropped = not_end_to_end(response);
    let mut delete: Vec<String> = dropped.iter().map(|n| n.to_string()).collect();
    let mut entry_meta = EntryMeta {
        freshness: meta,
        hidden: Vec::new(),
    };
    for name in HIDDEN_FROM_RUNTIME {
        // One the `Connection` names was dropped as hop-by-hop.
        if let Some(value) = response.get(name).filter(|_| !dropped.contains(&name)) {
            delete.push(name.to_string());
            entry_meta
                .hidden
                .push((name.to_string(), value.into_owned()));
        }
    }
    if response.has("age") {
        delete.push("age".to_string());
    }
    HeaderEdits {
        delete,
        set: vec![
            (META_HEADER.to_string(), entry_meta.to_header()),
            ("cache-control".to_string(), runtime_keep(keep_secs)),
        ],
    }
}

/// The `Cache-Control` that tells the runtime how long to keep an entry.
fn runtime_keep(keep_secs: u64) -> String {
    format!("public, max-age={keep_secs}")
}

/// What a lookup does with what the plain URL holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupStep {
    /// The entry under the plain URL may answer (when its meta reads).
    Plain,
    /// The plain URL holds a marker: the variant under this key may answer.
    Variant(String),
    /// Nothing stored answers this request.
    Miss,
}

/// The step after finding `plain` (the fields of what the plain URL `url`
/// holds) for a request with fields `request`, and the generation of the
/// URL's variants when a marker names one (a store for this request reuses
/// it).
pub fn lookup_step(
    url: &str,
    plain: &HeaderList,
    request: &HeaderList,
) -> (LookupStep, Option<String>) {
    let marker = plain.get(VARY_MARKER_HEADER);
    let generation = marker
        .as_ref()
        .and_then(|_| plain.get(GENERATION_HEADER))
        .map(Cow::into_owned);
    match (marker, generation) {
        (Some(names), Some(generation)) => {
            let VaryRule::Headers(names) = vary_rule(Some(&names)) else {
                return (LookupStep::Miss, None);
            };
            let key = variant_key(url, &generation, &names, |n| {
                request.get(n).map(Cow::into_owned)
            });
            let step = key.map_or(LookupStep::Miss, LookupStep::Variant);
            (step, Some(generation))
        }
        // A marker of an older format: its variants cannot be told apart.
        (Some(_), None) => (LookupStep::Miss, None),
        // Never serve a varying response from the plain key (an entry
        // stored some other way): its variant is unknown.
        (None, _) => match vary_rule(plain.get("vary").as_deref()) {
            VaryRule::None => (LookupStep::Plain, None),
            _ => (LookupStep::Miss, None),
        },
    }
}

/// A stored entry's fields as stored, and its meta.
#[derive(Debug, Clone, PartialEq)]
pub struct EntryHead {
    /// The fields as stored (internal ones and all).
    pub stored: HeaderList,
    /// Its freshness and the origin's fields it keeps aside.
    pub meta: EntryMeta,
}

impl EntryHead {
    /// From the fields of what a lookup found; `None` without a meta this
    /// build reads (an entry stored by an older build is a miss).
    pub fn new(stored: HeaderList) -> Option<Self> {
        let meta = EntryMeta::from_header(&stored.get(META_HEADER)?)?;
        Some(Self { stored, meta })
    }

    /// A field as the origin sent it.
    pub fn header(&self, name: &str) -> Option<Cow<'_, str>> {
        if HIDDEN_FROM_RUNTIME.contains(&name) {
            return self.meta.hidden(name).map(Cow::Borrowed);
        }
        self.stored.get(name)
    }

    /// The fields that ask the origin whether the entry is still current
    /// (`If-None-Match`, `If-Modified-Since`); empty without a validator.
    pub fn validators(&self) -> Vec<(&'static str, String)> {
        let mut fields = Vec::new();
        if let Some(etag) = self.header("etag") {
            fields.push(("if-none-match", etag.into_owned()));
        }
        if let Some(modified) = self.header("last-modified") {
            fields.push(("if-modified-since", modified.into_owned()));
        }
        fields
    }

    /// Whether a client's conditional request (`request`) is answered `304`
    /// from this (fresh) entry: only an entry with a validator can.
    pub fn answers_not_modified(&self, request: &HeaderList) -> bool {
        if !self.meta.freshness.has_validator {
            return false;
        }
        let (inm, ims) = (
            request.get("if-none-match"),
            request.get("if-modified-since"),
        );
        (inm.is_some() || ims.is_some())
            && not_modified(
                inm.as_deref(),
                ims.as_deref(),
                self.header("etag").as_deref(),
                self.header("last-modified").as_deref(),
            )
    }

    /// What makes the stored fields the client's: the origin's fields
    /// restored, every internal one dropped, `Age` set (none: `Age` left
    /// out); `not_modified` for a bodiless `304`. Only the fields the meta
    /// says it hides are touched: each edit crosses into JavaScript, and
    /// this is the hit path.
    pub fn served_edits(&self, age_s: Option<u64>, not_modified: bool) -> HeaderEdits {
        let mut delete = vec![META_HEADER.to_string()];
        // The keep time the runtime was given goes; the origin's own
        // Cache-Control, if it had one, is set over it.
        if self.meta.hidden("cache-control").is_none() {
            delete.push("cache-control".to_string());
        }
        if not_modified {
            delete.extend(NOT_MODIFIED_OMITS.iter().map(|n| n.to_string()));
        }
        let mut set = self.meta.hidden.clone();
        match age_s {
            Some(age) => set.push(("age".to_string(), age.to_string())),
            None => delete.push("age".to_string()),
        }
        HeaderEdits { delete, set }
    }

    /// What makes the stored fields the response a `304` revalidation gives
    /// (RFC 9111 section 4.3.4): served without `Age`, then updated by the
    /// `304`'s end-to-end fields (`fresh`).
    pub fn merged_edits(&self, fresh: &HeaderList) -> HeaderEdits {
        let mut edits = self.served_edits(None, false);
        let dropped = not_end_to_end(fresh);
        let mut merged: Vec<&str> = Vec::new();
        for name in fresh.names() {
            // A field sent twice is one value, as `Headers.get` joins it.
            if dropped.contains(&name) || !updated_by_304(name) || merged.contains(&name) {
                continue;
            }
            merged.push(name);
            if let Some(value) = fresh.get(name) {
                edits.set.push((name.to_string(), value.into_owned()));
            }
        }
        edits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `edits` carried out on `list`, sorted (order is the runtime's business).
    fn applied(list: &HeaderList, edits: &HeaderEdits) -> Vec<(String, String)> {
        let mut fields: Vec<(String, String)> = (edits.applied_to(list).fields())
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        fields.sort();
        fields
    }

    /// `response` stored plainly with `meta`, as a lookup finds it.
    fn stored(response: &HeaderList, meta: StoredMeta) -> EntryHead {
        let plan =
            store_plan(URL, &HeaderList::EMPTY, response, String::new, meta, 30).expect("storable");
        EntryHead::new(plan.edits.applied_to(response)).expect("its meta reads")
    }

    fn list(fields: &[(String, String)]) -> HeaderList {
        HeaderList::from_pairs(fields.iter().map(|(n, v)| (n.as_str(), v.as_str())))
    }

    fn meta(has_validator: bool) -> StoredMeta {
        StoredMeta {
            response_time_s: 1_000.0,
            initial_age_s: 5.0,
            lifetime_s: 60.0,
            stale_while_revalidate_s: 0.0,
            stale_if_error_s: 0.0,
            must_revalidate: false,
            has_validator,
        }
    }

    const URL: &str = "https://example.com/a?b=1";

    fn origin_response() -> HeaderList {
        HeaderList::from_pairs([
            ("content-type", "text/plain"),
            ("content-length", "5"),
            ("etag", "\"v1\""),
            ("cache-control", "max-age=60"),
            ("expires", "Thu, 01 Jan 2037 00:00:00 GMT"),
            ("age", "5"),
            ("connection", "x-trace"),
            ("x-trace", "hop"),
            ("keep-alive", "timeout=5"),
            ("x-hedgehog-vary", "planted"),
            ("set-cookie", "a=1"),
        ])
    }

    #[test]
    fn a_stored_entry_serves_the_origins_end_to_end_fields_and_a_fresh_age() {
        let response = origin_response();
        let plan = store_plan(
            URL,
            &HeaderList::EMPTY,
            &response,
            || unreachable!(),
            meta(true),
            90,
        )
        .expect("storable");
        assert_eq!((plan.key.as_str(), plan.marker.is_none()), (URL, true));
        assert_eq!(plan.expected_len, Some(5));
        let stored = list(&applied(&response, &plan.edits));
        // The runtime sees only the keep time; nothing it would judge
        // freshness by, nothing hop-by-hop, nothing of the Worker's.
        assert_eq!(
            stored.get("cache-control").as_deref(),
            Some("public, max-age=90")
        );
        for gone in [
            "expires",
            "age",
            "connection",
            "x-trace",
            "keep-alive",
            "x-hedgehog-vary",
        ] {
            assert!(!stored.has(gone), "{gone} stored");
        }
        let entry = EntryHead::new(stored).expect("its meta reads");
        assert_eq!(entry.meta.freshness, meta(true));
        assert_eq!(entry.header("cache-control").as_deref(), Some("max-age=60"));
        let served = applied(&entry.stored, &entry.served_edits(Some(7), false));
        let expected = applied(
            &HeaderList::from_pairs([
                ("content-type", "text/plain"),
                ("content-length", "5"),
                ("etag", "\"v1\""),
                ("cache-control", "max-age=60"),
                ("expires", "Thu, 01 Jan 2037 00:00:00 GMT"),
                ("set-cookie", "a=1"),
                ("age", "7"),
            ]),
            &HeaderEdits::default(),
        );
        assert_eq!(served, expected);
        // A 304 from the cache leaves out what describes the body.
        let not_modified = list(&applied(&entry.stored, &entry.served_edits(Some(7), true)));
        assert!(!not_modified.has("content-length") && not_modified.has("etag"));
    }

    #[test]
    fn without_its_own_cache_control_the_runtimes_keep_time_is_not_served() {
        let response = HeaderList::from_pairs([("etag", "\"v1\""), ("expires", "x")]);
        let entry = stored(&response, meta(true));
        let served = list(&applied(&entry.stored, &entry.served_edits(Some(0), false)));
        assert!(!served.has("cache-control") && !served.has("x-hedgehog-meta"));
        assert_eq!(served.get("expires").as_deref(), Some("x"));
    }

    #[test]
    fn a_hidden_field_the_connection_names_is_dropped_not_kept() {
        let response = HeaderList::from_pairs([("connection", "expires"), ("expires", "x")]);
        let entry = stored(&response, meta(false));
        assert!(entry.meta.hidden.is_empty());
        assert!(entry.header("expires").is_none());
    }

    #[test]
    fn a_varying_response_is_found_again_only_by_a_request_of_its_variant() {
        let response = HeaderList::from_pairs([("vary", "Accept-Encoding, accept")]);
        let gzip = HeaderList::from_pairs([("accept-encoding", "gzip"), ("accept", "*/*")]);
        let plan = store_plan(URL, &gzip, &response, || "g1".to_string(), meta(false), 30)
            .expect("storable");
        let marker = list(&plan.marker.clone().expect("a marker"));
        assert_eq!(
            marker.get("x-hedgehog-vary").as_deref(),
            Some("accept,accept-encoding")
        );
        assert_eq!(
            marker.get("cache-control").as_deref(),
            Some("public, max-age=30")
        );
        let (step, generation) = lookup_step(URL, &marker, &gzip);
        assert_eq!(step, LookupStep::Variant(plan.key.clone()));
        assert_eq!(generation.as_deref(), Some("g1"));
        let br = HeaderList::from_pairs([("accept-encoding", "br"), ("accept", "*/*")]);
        let (step, _) = lookup_step(URL, &marker, &br);
        assert!(matches!(step, LookupStep::Variant(key) if key != plan.key));
        // The generation a lookup found is the one a store reuses.
        let again = store_plan(URL, &gzip, &response, || "g1".to_string(), meta(false), 30);
        assert_eq!(again.map(|p| p.key), Some(plan.key));
    }

    #[test]
    fn what_no_key_can_tell_apart_is_neither_stored_nor_served() {
        let star = HeaderList::from_pairs([("vary", "*")]);
        let drawn = std::cell::Cell::new(false);
        let plan = store_plan(
            URL,
            &HeaderList::EMPTY,
            &star,
            || {
                drawn.set(true);
                String::new()
            },
            meta(false),
            30,
        );
        assert!(
            plan.is_none() && !drawn.get(),
            "Vary: * has no key, and draws no generation"
        );
        // An entry under the plain URL that varies (stored some other way).
        let plain = HeaderList::from_pairs([("vary", "accept"), ("x-hedgehog-meta", "2")]);
        assert_eq!(
            lookup_step(URL, &plain, &HeaderList::EMPTY),
            (LookupStep::Miss, None)
        );
        // A marker without a generation (an older format).
        let old = HeaderList::from_pairs([("x-hedgehog-vary", "accept")]);
        assert_eq!(
            lookup_step(URL, &old, &HeaderList::EMPTY),
            (LookupStep::Miss, None)
        );
        // A marker whose names no longer read.
        let bad =
            HeaderList::from_pairs([("x-hedgehog-vary", "*"), ("x-hedgehog-generation", "g")]);
        assert_eq!(
            lookup_step(URL, &bad, &HeaderList::EMPTY),
            (LookupStep::Miss, None)
        );
        let plain = HeaderList::from_pairs([("x-hedgehog-meta", "2")]);
        assert_eq!(
            lookup_step(URL, &plain, &HeaderList::EMPTY).0,
            LookupStep::Plain
        );
        assert!(
            EntryHead::new(plain).is_none(),
            "a meta this build cannot read is a miss"
        );
    }

    #[test]
    fn an_origins_304_updates_the_entry_but_not_its_body_fields() {
        let response = origin_response();
        let entry = stored(&response, meta(true));
        let fresh = HeaderList::from_pairs([
            ("cache-control", "max-age=120"),
            ("etag", "\"v1\""),
            ("x-new", "a"),
            ("x-new", "b"),
            ("content-length", "0"),
            ("set-cookie", "b=2"),
            ("connection", "x-new"),
            ("x-hedgehog-meta", "planted"),
        ]);
        let merged = list(&applied(&entry.stored, &entry.merged_edits(&fresh)));
        assert_eq!(merged.get("cache-control").as_deref(), Some("max-age=120"));
        assert_eq!(merged.get("content-length").as_deref(), Some("5"));
        assert_eq!(merged.get("set-cookie").as_deref(), Some("a=1"));
        assert!(
            !merged.has("x-new"),
            "named by the 304's Connection: hop-by-hop"
        );
        assert!(!merged.has("x-hedgehog-meta") && !merged.has("age"));
        let repeated = HeaderList::from_pairs([("x-new", "a"), ("x-new", "b")]);
        let merged = list(&applied(&entry.stored, &entry.merged_edits(&repeated)));
        assert_eq!(merged.get("x-new").as_deref(), Some("a, b"));
    }

    #[test]
    fn only_an_entry_with_a_validator_answers_a_conditional_request() {
        let response = HeaderList::from_pairs([
            ("etag", "W/\"v1\""),
            ("last-modified", "Tue, 01 Dec 2026 00:00:00 GMT"),
        ]);
        let stored = |validated| stored(&response, meta(validated));
        let entry = stored(true);
        assert_eq!(
            entry.validators(),
            vec![
                ("if-none-match", "W/\"v1\"".to_string()),
                (
                    "if-modified-since",
                    "Tue, 01 Dec 2026 00:00:00 GMT".to_string()
                )
            ]
        );
        let inm = HeaderList::from_pairs([("if-none-match", "\"v1\"")]);
        let other = HeaderList::from_pairs([("if-none-match", "\"v2\"")]);
        let ims = HeaderList::from_pairs([("if-modified-since", "Wed, 02 Dec 2026 00:00:00 GMT")]);
        assert!(entry.answers_not_modified(&inm) && entry.answers_not_modified(&ims));
        assert!(!entry.answers_not_modified(&other));
        assert!(!entry.answers_not_modified(&HeaderList::EMPTY));
        assert!(!stored(false).answers_not_modified(&inm));
    }
}
