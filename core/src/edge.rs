//! The core as the Worker's glue (`src/edge`) sees it: everything the glue
//! may name, in one place, so the boundary between I/O and decisions is
//! one list that a change to either side has to pass through. The glue
//! imports nothing from the core but this module.
//!
//! Grouped by what the glue does with it.

/// The isolate: a request's intake, cache use, race and completion, and
/// the operator pages' views.
pub use crate::isolate::{
    leg_lines, public_leg, AfterRace, Answer, BodyPlan, Completion, CopyEnd, Exchange, Intake,
    Isolate, LegRequest, RaceOrder, Refresh, RequestHead, ServeEntry, StaleEntry, Step,
    StoreTicket,
};

/// A request's or response's header fields, read from the runtime once.
pub use crate::header_list::HeaderList;

/// The ordered map the core's tables (and the configuration's variables) use.
pub use crate::vec_map::VecMap;

/// The configuration the isolate and the aggregator run on.
pub use crate::config::{
    defaults as default_config, parse as parse_config, parse_lenient as parse_config_lenient,
    ConfigError, OperatorPage, ProbeParams, SECRET_KEYS,
};

/// One race, carried out by the glue's driver.
pub use crate::race::{Leg, RaceEnd, RaceEvent, RacePlan, RaceState, INVALID_STATUS};

/// What a leg sends and what the client gets back: headers, ids, traces.
pub use crate::request::outbound::{HEDGE_ATTEMPT_HEADER, REQUEST_ID_HEADER};

/// A request body read, a response body watched, a coalesced flight led.
pub use crate::request::{
    body_watch::idle_message,
    coalesce::{FlightId, Role},
    eligibility::NotHedgeableReason,
};

/// The shared cache's entry form: its key and fields on the way in, the
/// lookup of a request's variant, its fields served or merged by a 304.
pub use crate::cache::entry::{lookup_step, EntryHead, HeaderEdits, LookupStep, StorePlan};

/// The log line, the metrics text's format, how a request was answered.
pub use crate::observe::{
    exposition::Format,
    metrics::Served,
    request_log::{DataPoint, LegLine, RequestRecord},
};

/// The PoP: the push and its reply, the aggregator in its Durable Object,
/// its upkeep and its probes.
pub use crate::pop::{
    aggregate::{PopAggregate, PopKey, PopParams},
    probes::{judge as judge_probe, ProbeResult},
    push::{ErrorReport, OriginRate, Push, PushReply},
    upkeep::{PushLimiter, SnapshotSchedule, SHED_ABOVE_PUSHES_PER_S, SHED_RETRY_AFTER_S},
};
