//! The PoP aggregator in the simulator: an isolate's push when its
//! schedule says so, the aggregator's push limit and merge, the reply.

use super::{Event, Sim};
use crate::pop::link::origin_rates;
use crate::pop::push::Push;

impl Sim<'_> {
    /// After a response went out, an isolate pushes if its schedule says so.
    pub(super) fn maybe_push(&mut self, isolate: u32) {
        if self.params.aggregator_rtt_ms.is_none() {
            return;
        }
        let now = self.now;
        let hedger = self.isolates[isolate as usize].hedger_mut();
        if !hedger.pop.push_due(now) {
            return;
        }
        let quantile = hedger.params().delay.quantile;
        let push = hedger.pop.take_push(now, quantile, &self.origin_names);
        self.send_push(isolate, push);
    }

    /// `isolate`'s `push` goes out to the aggregator now.
    pub(super) fn send_push(&mut self, isolate: u32, push: Push) {
        let Some(rtt) = self.params.aggregator_rtt_ms else {
            return;
        };
        let now = self.now;
        let bytes = push.encode().len();
        let id = self.pushes.len() as u32;
        self.pushes.push((isolate, Some(push), bytes, None));
        self.schedule(now + rtt / 2.0, Event::PushArrives { push: id });
    }

    pub(super) fn push_arrives(&mut self, id: u32) {
        let now = self.now;
        let rtt = self.params.aggregator_rtt_ms.unwrap_or(0.0);
        let (Some(aggregate), Some(slot)) =
            (self.aggregator.as_mut(), self.pushes.get_mut(id as usize))
        else {
            return;
        };
        let Some(push) = slot.1.take() else {
            return;
        };
        if !self.push_limiter.try_take(now) {
            // Shed: the isolate hears a failure and backs off.
            self.result.pushes_shed += 1;
            let isolate = slot.0;
            self.isolates[isolate as usize]
                .hedger_mut()
                .pop
                .push_failed(now + rtt / 2.0);
            return;
        }
        let (reply, _touched) = aggregate.apply(&push, slot.2, now);
        slot.3 = Some(reply);
        self.result.pushes += 1;
        self.schedule(now + rtt / 2.0, Event::ReplyArrives { push: id });
    }

    pub(super) fn reply_arrives(&mut self, id: u32) {
        let now = self.now;
        let Some((isolate, _, bytes, reply)) = self.pushes.get_mut(id as usize) else {
            return;
        };
        let Some(reply) = reply.take() else {
            return;
        };
        let hedger = self.isolates[*isolate as usize].hedger_mut();
        hedger
            .pop
            .push_succeeded(&reply, *bytes, now, &self.origin_names);
        let rates = origin_rates(&reply, &self.origin_names);
        hedger.gate.note_pop_rates(&rates, now);
    }
}
