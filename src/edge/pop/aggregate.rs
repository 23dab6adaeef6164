//! The PoP aggregator Durable Object: one per PoP (named from `cf.colo`).
//! Merges isolates' pushes into [`PopAggregate`] in memory, writes what
//! changed to the object's SQLite storage at most once a minute (so an
//! eviction loses at most that, which the next pushes refill), forgets idle
//! keys from an alarm and, with `HEDGE_PROBE_PATH` set, probes every origin
//! from that alarm while the PoP has traffic.
//!
//! `POST /push` takes a push and answers with the PoP view (400 with a JSON
//! error for a bad body, which changes nothing; 503 `shed`, unread, past the
//! pushes per second it takes); `GET /stats` reports what it holds.

use std::cell::RefCell;

use serde::{Deserialize, Serialize};
use worker::{
    console_warn, durable_object, DurableObject, Env, Method, Request, Response, SqlStorage, State,
};

use super::probes::probe_all;
use crate::edge::clock::now_ms;
use crate::edge::env_vars::read_vars;
use hedgehog_core::edge::{
    default_config, parse_config_lenient, ErrorReport, Format, OriginRate, PopAggregate, PopKey,
    PopParams, ProbeParams, Push, PushLimiter, SnapshotSchedule, VecMap, SHED_ABOVE_PUSHES_PER_S,
    SHED_RETRY_AFTER_S,
};
// The `#[durable_object]` expansion names `wasm_bindgen` by its bare path.
use worker::wasm_bindgen;

/// The header an isolate names its PoP in when it asks for the metrics.
pub(crate) const POP_NAME_HEADER: &str = "x-hedge-pop";

/// How often the alarm sweeps idle keys (at most; less when idle time is shorter).
const SWEEP_EVERY_MS: f64 = 60_000.0;

/// The PoP aggregator (exported to the runtime as the class `PopAggregator`).
#[durable_object]
pub struct PopAggregator {
    state: State,
    params: PopParams,
    /// The configured hedge budget (HEDGE_BUDGET_PERCENT / 100), for the metrics.
    budget_ratio: f64,
    /// `HEDGE_POLICY` in force, for the advisor.
    policy: &'static str,
    /// The active probes' settings, and what they probe: (origin name, URL).
    probes: ProbeParams,
    probe_targets: Vec<(String, String)>,
    /// The configured route labels, kept whatever pushes bring.
    route_labels: Vec<String>,
    last_sweep_ms: RefCell<f64>,
    aggregate: RefCell<Option<PopAggregate>>,
    alarm_set: RefCell<bool>,
    push_limiter: RefCell<PushLimiter>,
    snapshot: RefCell<SnapshotSchedule>,
    /// Keys changed since the last snapshot.
    unsaved: RefCell<VecMap<PopKey, ()>>,
    /// Alarms run since the object started (each is a billed request).
    alarms: RefCell<u64>,
    /// Rows the storage API says it read and wrote since the object
    /// started (each `setAlarm()` is billed as one more row written).
    storage_rows: RefCell<StorageRows>,
}

/// Rows read and written as the storage API counts them (the cursor's
/// `rowsRead` / `rowsWritten`), and alarms set: what the bill counts.
#[derive(Debug, Default, Clone, Copy, Serialize)]
struct StorageRows {
    rows_read: u64,
    rows_written: u64,
    alarms_set: u64,
}

impl StorageRows {
    fn add(&mut self, cursor: &worker::SqlCursor) {
        self.rows_read += cursor.rows_read() as u64;
        self.rows_written += cursor.rows_written() as u64;
    }
}

impl std::fmt::Debug for PopAggregator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PopAggregator")
            .field("params", &self.params)
            .field("aggregate", &self.aggregate)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct KeyRow {
    origin: String,
    route: String,
    record: String,
}

#[derive(Deserialize)]
struct MetaRow {
    record: String,
}

#[derive(Serialize)]
struct ErrorJson<'a> {
    error: &'a str,
    message: String,
}

#[derive(Serialize)]
struct StatsJson {
    keys: usize,
    samples: u64,
    pushes: u64,
    push_bytes: u64,
    hedge_fraction: f64,
    /// Per-origin responses and 5xx rate over the window.
    origins: Vec<OriginRate>,
    /// The PoP's last errors, as isolates reported them, oldest first.
    recent_errors: Vec<ErrorReport>,
    /// Since this object started: pushes shed, storage rows written, alarms run.
    pushes_shed: u64,
    rows_written: u64,
    alarms: u64,
    /// The storage API's own counts since this object started.
    storage: StorageRows,
}

impl DurableObject for PopAggregator {
    fn new(state: State, env: Env) -> Self {
        // Same vars as the Worker, read the same lenient way; a
        // configuration the Worker rejects leaves the aggregator on its
        // defaults (the Worker pushes nothing then).
        let all = parse_config_lenient(&read_vars(&env))
            .map(|(p, _)| p)
            .unwrap_or_else(|_| default_config());
        let (params, budget_ratio) = (all.pop.aggregate, all.budget.percent / 100.0);
        let probes = all.pop.probes.clone();
        let probe_targets = match &probes.path {
            Some(path) => (all.origins.iter())
                .map(|o| (o.name.clone(), format!("{}{path}", o.base_url)))
                .collect(),
            None => Vec::new(),
        };
        Self {
            state,
            params,
            budget_ratio,
            policy: all.policy.as_str(),
            probes,
            probe_targets,
            route_labels: all.configured_route_labels(),
            last_sweep_ms: RefCell::new(0.0),
            aggregate: RefCell::new(None),
            alarm_set: RefCell::new(false),
            push_limiter: RefCell::new(PushLimiter::new(SHED_ABOVE_PUSHES_PER_S)),
            snapshot: RefCell::new(SnapshotSchedule::default()),
            unsaved: RefCell::new(VecMap::new()),
            alarms: RefCell::new(0),
            storage_rows: RefCell::new(StorageRows::default()),
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let path = req.path();
        match (req.method(), path.as_str()) {
            (Method::Post, "/push") => self.take_push(&mut req).await,
            (Method::Get, "/metrics") => {
                let now = worker::Date::now().as_millis() as f64;
                let accept = req.headers().get("accept").ok().flatten();
                let format = Format::from_accept(accept.as_deref());
                let pop = req
                    .headers()
                    .get(POP_NAME_HEADER)
                    .ok()
                    .flatten()
                    .unwrap_or_default();
                let text = self.with_aggregate(|_, aggregate| {
                    aggregate.metrics_text(format, &pop, self.budget_ratio, now)
                })?;
                text_response(text, format.content_type())
            }
            (Method::Get, "/stats") => {
                let now = worker::Date::now().as_millis() as f64;
                let stats = self.with_aggregate(|_, aggregate| StatsJson {
                    keys: aggregate.key_count(),
                    samples: aggregate.sample_count(now),
                    pushes: aggregate.pushes(),
                    push_bytes: aggregate.push_bytes(),
                    hedge_fraction: aggregate.hedge_fraction(now),
                    origins: aggregate.origin_rates(now),
                    recent_errors: aggregate.recent_errors().iter().cloned().collect(),
                    pushes_shed: self.push_limiter.borrow().shed,
                    rows_written: self.snapshot.borrow().rows_written,
                    alarms: *self.alarms.borrow(),
                    storage: *self.storage_rows.borrow(),
                })?;
                let mut text = serde_json::to_string(&stats)?;
                let latency = self.with_aggregate(|_, aggregate| {
                    aggregate.latency_export(self.budget_ratio * 100.0, self.policy, now)
                })?;
                // Each (origin, route key)'s latency over the window, for the advisor.
                latency.append_to(&mut text);
                text_response(text, "application/json")
            }
            _ => json(
                404,
                &ErrorJson {
                    error: "not_found",
                    message: format!(
                        "no {} {path} here; POST /push, GET /stats or GET /metrics",
                        req.method()
                    ),
                },
            ),
        }
    }

    async fn alarm(&self) -> worker::Result<Response> {
        let now = worker::Date::now().as_millis() as f64;
        *self.alarm_set.borrow_mut() = false;
        *self.alarms.borrow_mut() += 1;
        if self.snapshot.borrow().due(now) {
            self.with_aggregate(|sql, aggregate| self.save(sql, aggregate, now))?;
        }
        let probes_due = self.with_aggregate(|_, aggregate| aggregate.probes_due(now))?;
        if probes_due {
            self.with_aggregate(|_, aggregate| aggregate.probe_round_started(now))?;
            let results = probe_all(self.probe_targets.clone(), self.probes.timeout_ms).await;
            let done = worker::Date::now().as_millis() as f64;
            self.with_aggregate(|_, aggregate| {
                for (origin, result, latency_ms) in &results {
                    aggregate.probe_result(origin, *result, *latency_ms, done);
                }
            })?;
        }
        let sweep_due = now - *self.last_sweep_ms.borrow() >= self.sweep_every_ms();
        if !sweep_due {
            if self.with_aggregate(|_, aggregate| aggregate.probing(now))? {
                self.ensure_alarm().await;
            }
            return Response::ok("probed");
        }
        *self.last_sweep_ms.borrow_mut() = now;
        let remaining = self.with_aggregate(|sql, aggregate| {
            let mut deleted = 0;
            for (origin, route) in aggregate.sweep(now) {
                self.unsaved
                    .borrow_mut()
                    .remove(&(origin.clone(), route.clone()));
                match sql.exec(
                    "DELETE FROM pop_keys WHERE origin = ? AND route = ?",
                    vec![origin.into(), route.into()],
                ) {
                    Ok(cursor) => {
                        self.storage_rows.borrow_mut().add(&cursor);
                        deleted += 1;
                    }
                    Err(e) => console_warn!("hedgehog-edge aggregator: deleting a key: {e}"),
                }
            }
            self.snapshot.borrow_mut().rows_written += deleted;
            aggregate.key_count()
        })?;
        let probing = self.with_aggregate(|_, aggregate| aggregate.probing(now))?;
        if remaining > 0 || probing {
            self.ensure_alarm().await;
        }
        Response::ok("swept")
    }
}

impl PopAggregator {
    /// A push: shed when the aggregator is over its rate, refused when it
    /// does not decode, else merged and answered.
    async fn take_push(&self, req: &mut Request) -> worker::Result<Response> {
        if !self.push_limiter.borrow_mut().try_take(now_ms()) {
            // Unread: shedding costs next to nothing, so the queue
            // behind it drains.
            let mut response = json(
                503,
                &ErrorJson {
                    error: "shed",
                    message: format!(
                        "over {SHED_ABOVE_PUSHES_PER_S} pushes per second; push again later"
                    ),
                },
            )?;
            response
                .headers_mut()
                .set("retry-after", &SHED_RETRY_AFTER_S.to_string())?;
            return Ok(response);
        }
        let body = req.bytes().await?;
        let push = match Push::decode(&body) {
            Ok(push) => push,
            Err(e) => {
                console_warn!("hedgehog-edge aggregator: {e}");
                return json(
                    400,
                    &ErrorJson {
                        error: "invalid_push",
                        message: e.to_string(),
                    },
                );
            }
        };
        let now = worker::Date::now().as_millis() as f64;
        let reply = self.with_aggregate(|sql, aggregate| {
            let (reply, touched) = aggregate.apply(&push, body.len(), now);
            self.unsaved
                .borrow_mut()
                .extend(touched.into_iter().map(|key| (key, ())));
            if self.snapshot.borrow_mut().changed(now) {
                self.save(sql, aggregate, now);
            }
            reply
        })?;
        self.ensure_alarm().await;
        Response::from_bytes(reply.encode()).map(|r| r.with_status(200))
    }

    /// How often idle keys are swept.
    fn sweep_every_ms(&self) -> f64 {
        SWEEP_EVERY_MS.min(self.params.idle_ms)
    }

    /// Runs `f` on the state, loading it from storage on first use. Storage
    /// calls are synchronous, so no other request runs in between.
    fn with_aggregate<R>(
        &self,
        f: impl FnOnce(&SqlStorage, &mut PopAggregate) -> R,
    ) -> worker::Result<R> {
        let sql = self.state.storage().sql();
        let mut slot = self.aggregate.borrow_mut();
        if slot.is_none() {
            let mut rows = self.storage_rows.borrow_mut();
            let (aggregate, stored) = load(&sql, self.params, &mut rows)?;
            // Woken with stored state: the schedule goes on from it.
            if stored {
                *self.snapshot.borrow_mut() = SnapshotSchedule::resumed(now_ms());
            }
            *slot = Some(
                aggregate
                    .with_probes(self.probes.clone())
                    .with_route_labels(self.route_labels.clone(), now_ms()),
            );
        }
        let aggregate = slot.as_mut().ok_or("aggregate state missing")?;
        Ok(f(&sql, aggregate))
    }

    /// Writes the keys changed since the last snapshot and the counters.
    fn save(&self, sql: &SqlStorage, aggregate: &mut PopAggregate, now: f64) {
        let keys = std::mem::take(&mut *self.unsaved.borrow_mut());
        let rows = save(
            sql,
            aggregate,
            &keys,
            now,
            &mut self.storage_rows.borrow_mut(),
        );
        self.snapshot.borrow_mut().written(rows, now);
    }

    async fn ensure_alarm(&self) {
        if *self.alarm_set.borrow() {
            return;
        }
        let storage = self.state.storage();
        if matches!(storage.get_alarm().await, Ok(Some(_))) {
            *self.alarm_set.borrow_mut() = true;
            return;
        }
        let probe_every_ms = match self.probes.path {
            Some(_) => self.probes.interval_ms,
            None => f64::INFINITY,
        };
        let offset_ms = self.sweep_every_ms().min(probe_every_ms).max(1.0) as i64;
        self.storage_rows.borrow_mut().alarms_set += 1;
        match storage.set_alarm(offset_ms).await {
            Ok(()) => *self.alarm_set.borrow_mut() = true,
            Err(e) => console_warn!("hedgehog-edge aggregator: setting the alarm: {e}"),
        }
    }
}

/// The stored state, and whether there was any.
fn load(
    sql: &SqlStorage,
    params: PopParams,
    counted: &mut StorageRows,
) -> worker::Result<(PopAggregate, bool)> {
    let exec = |query: &str, counted: &mut StorageRows| {
        sql.exec(query, None).inspect(|cursor| counted.add(cursor))
    };
    exec(
        "CREATE TABLE IF NOT EXISTS pop_keys (origin TEXT NOT NULL, route TEXT NOT NULL, \
         record TEXT NOT NULL, PRIMARY KEY (origin, route))",
        counted,
    )?;
    exec(
        "CREATE TABLE IF NOT EXISTS pop_meta (name TEXT PRIMARY KEY, record TEXT NOT NULL)",
        counted,
    )?;
    let now = worker::Date::now().as_millis() as f64;
    let mut aggregate = PopAggregate::new(params);
    let rows: Vec<KeyRow> =
        exec("SELECT origin, route, record FROM pop_keys", counted)?.to_array()?;
    for row in rows {
        // A row that no longer parses is dropped rather than failing every push.
        if let Err(e) = aggregate.import_key((row.origin, row.route), &row.record, now) {
            console_warn!("hedgehog-edge aggregator: {e}");
        }
    }
    let meta: Vec<MetaRow> = exec(
        "SELECT record FROM pop_meta WHERE name = 'counters'",
        counted,
    )?
    .to_array()?;
    let stored = !meta.is_empty();
    if let Some(row) = meta.first() {
        if let Err(e) = aggregate.import_counters(&row.record, now) {
            console_warn!("hedgehog-edge aggregator: {e}");
        }
    }
    Ok((aggregate, stored))
}

/// Writes these keys and the counters; the rows written.
fn save(
    sql: &SqlStorage,
    aggregate: &mut PopAggregate,
    keys: &VecMap<PopKey, ()>,
    now: f64,
    counted: &mut StorageRows,
) -> u64 {
    let mut rows = 0;
    for key in keys.keys() {
        let Some(record) = aggregate.export_key(key, now) else {
            continue;
        };
        match sql.exec(
            "INSERT OR REPLACE INTO pop_keys (origin, route, record) VALUES (?, ?, ?)",
            vec![key.0.clone().into(), key.1.clone().into(), record.into()],
        ) {
            Ok(cursor) => {
                counted.add(&cursor);
                rows += 1;
            }
            Err(e) => console_warn!("hedgehog-edge aggregator: storing a key: {e}"),
        }
    }
    match sql.exec(
        "INSERT OR REPLACE INTO pop_meta (name, record) VALUES ('counters', ?)",
        vec![aggregate.export_counters().into()],
    ) {
        Ok(cursor) => {
            counted.add(&cursor);
            rows += 1;
        }
        Err(e) => console_warn!("hedgehog-edge aggregator: storing counters: {e}"),
    }
    rows
}

fn json<T: Serialize>(status: u16, body: &T) -> worker::Result<Response> {
    Ok(Response::from_json(body)?.with_status(status))
}

/// A 200 of `text` as `content_type`.
fn text_response(text: String, content_type: &str) -> worker::Result<Response> {
    let mut response = Response::ok(text)?;
    response.headers_mut().set("content-type", content_type)?;
    Ok(response)
}
