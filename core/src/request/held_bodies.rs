//! Request bodies held in memory so the hedge can resend them, capped per
//! isolate.
//!
//! One body is capped by `HEDGE_TUNING.max_body_bytes`, but many at once could still
//! exhaust an isolate's memory (150 concurrent 1 MiB uploads are 150 MiB, over
//! a Worker's 128 MB). Bytes are claimed as they are read; a body whose next
//! chunk does not fit is forwarded once, streamed, and not hedged. Nothing
//! the client sent is lost either way.

/// Bytes of request bodies held for replay in one isolate.
#[derive(Debug, Clone)]
pub struct HeldBodies {
    cap: u64,
    held: u64,
    peak: u64,
}

// === impl HeldBodies ===

impl HeldBodies {
    /// Nothing held; at most `cap` bytes at once.
    pub fn new(cap: u64) -> Self {
        Self {
            cap,
            held: 0,
            peak: 0,
        }
    }

    /// Claims `bytes` more if they fit under the cap; returns whether they did.
    pub fn try_hold(&mut self, bytes: u64) -> bool {
        match self.held.checked_add(bytes) {
            Some(total) if total <= self.cap => {
                self.held = total;
                self.peak = self.peak.max(total);
                true
            }
            _ => false,
        }
    }

    /// Gives back `bytes` claimed earlier (a request done with its body).
    pub fn release(&mut self, bytes: u64) {
        self.held = self.held.saturating_sub(bytes);
    }

    /// Bytes held now.
    pub fn held(&self) -> u64 {
        self.held
    }

    /// Most bytes ever held at once (for stats).
    pub fn peak(&self) -> u64 {
        self.peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_held_up_to_the_cap_and_released() {
        let mut held = HeldBodies::new(3 << 20);
        let mib = 1 << 20;
        assert!(held.try_hold(mib));
        assert!(held.try_hold(mib));
        assert!(held.try_hold(mib));
        assert!(!held.try_hold(1), "the cap is full");
        held.release(mib);
        assert!(held.try_hold(mib), "room again once one is done");
        assert_eq!(held.peak(), 3 << 20);
    }

    #[test]
    fn a_hundred_and_fifty_concurrent_uploads_never_pass_the_cap() {
        let cap = 16 << 20;
        let mut held = HeldBodies::new(cap);
        // 150 uploads of 1 MiB arriving in 64 KiB chunks, interleaved.
        let mut claimed = [0u64; 150];
        let mut streamed = [false; 150];
        for _chunk in 0..16 {
            for (i, c) in claimed.iter_mut().enumerate() {
                if streamed[i] {
                    continue;
                }
                if held.try_hold(64 << 10) {
                    *c += 64 << 10;
                } else {
                    // Over the cap: this one is streamed once, its prefix released.
                    streamed[i] = true;
                    held.release(*c);
                    *c = 0;
                }
                assert!(held.held() <= cap);
            }
        }
        assert!(held.peak() <= cap);
        assert_eq!(claimed.iter().filter(|&&c| c == 1 << 20).count(), 16);
    }

    #[test]
    fn an_absurd_claim_does_not_overflow() {
        let mut held = HeldBodies::new(u64::MAX);
        assert!(held.try_hold(u64::MAX));
        assert!(!held.try_hold(1));
    }
}
