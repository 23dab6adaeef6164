//! An origin serving a leg: its arrival, a free worker or the queue, the
//! answer on its way back, and the worker freed for the next in line.

use super::{Event, Sim};
use crate::race::Leg;
use crate::sim::origin::Job;

impl Sim<'_> {
    pub(super) fn at_origin(&mut self, req: u32, leg: u8) {
        let l = self.requests[req as usize].legs[leg as usize];
        if l.aborted {
            return; // aborted in flight: it never reached the origin
        }
        let origin = &mut self.origins[l.origin as usize];
        if origin.has_free_worker() {
            self.start_job(l.origin, (req, leg));
        } else {
            origin.queue.push_back((req, leg));
        }
    }

    fn start_job(&mut self, origin: u8, (req, leg): Job) {
        let now = self.now;
        let attempt = self.requests[req as usize].legs[leg as usize].attempt;
        let o = &mut self.origins[origin as usize];
        o.busy += 1;
        let service = o.serve(now, &mut o.draws(req, attempt));
        let rtt = o.spec.rtt_ms;
        let queues = o.spec.workers.is_some();
        let done = now + service.duration_ms;
        let status = self.origin_status(req, service.status, now);
        let r = &mut self.requests[req as usize];
        let l = &mut r.legs[leg as usize];
        l.started_ms = Some(now);
        l.status = status;
        // Only an origin with a worker limit ever queues; FIFO: legs start
        // in the order they arrived, so the list stays sorted.
        if queues {
            let arrived = l.sent_ms + rtt / 2.0;
            self.result.tape.queue_waits[usize::from(origin)].push((arrived, now - arrived));
        }
        l.answered_ms = Some(done + rtt / 2.0);
        if leg == 0 && attempt == 0 && l.origin == r.primary.origin {
            r.primary = *l;
        }
        self.schedule(done, Event::WorkerFree { origin });
        self.schedule(done + rtt / 2.0, Event::Answer { req, leg });
    }

    pub(super) fn worker_free(&mut self, origin: u8) {
        let o = &mut self.origins[origin as usize];
        o.busy = o.busy.saturating_sub(1);
        // An aborted request leaves the queue; one in service keeps its worker.
        while let Some(job) = self.origins[origin as usize].queue.pop_front() {
            if !self.requests[job.0 as usize].legs[job.1 as usize].aborted {
                self.start_job(origin, job);
                break;
            }
        }
    }

    pub(super) fn answer(&mut self, req: u32, leg: u8) {
        let r = &self.requests[req as usize];
        let l = r.legs[leg as usize];
        if l.aborted || r.race.is_none() {
            return;
        }
        let measured = r.measured;
        if self.waits_for_loop(req, Event::Answer { req, leg }) {
            return;
        }
        if measured {
            self.result.origin_work_ms += l.started_ms.map_or(0.0, |s| self.now - s);
        }
        let status = l.status;
        let leg = if leg == 0 { Leg::Primary } else { Leg::Hedge };
        self.on_race(req, |h, s, now| h.leg_finished(s, leg, Ok(status), now));
    }
}
