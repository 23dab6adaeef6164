//! Random ids for requests, traces and spans, drawn in the isolate from a
//! seed it got once: an id costs no call into JavaScript (four
//! `Math.random` calls each, before). Ids name and correlate; nothing
//! relies on their being unguessable.

use std::fmt::Write;

/// A stream of random ids (splitmix64 over a seeded state).
#[derive(Debug, Clone)]
pub struct IdSource {
    state: u64,
}

impl IdSource {
    /// A stream for `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform draw in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `words` random 64-bit words as lowercase hex, never all zero (trace
    /// context forbids an all-zero trace or span id).
    pub fn hex(&mut self, words: usize) -> String {
        let mut id = String::with_capacity(words * 16);
        for i in 0..words {
            let word = match self.next_u64() {
                0 if i == 0 => 1,
                w => w,
            };
            let _ = write!(id, "{word:016x}");
        }
        id
    }

    /// A request or trace id: 128 bits.
    pub fn id(&mut self) -> String {
        self.hex(2)
    }

    /// A span id: 64 bits.
    pub fn span(&mut self) -> String {
        self.hex(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_their_lengths_and_do_not_repeat() {
        let mut ids = IdSource::new(7);
        let drawn: std::collections::HashSet<String> = (0..10_000).map(|_| ids.id()).collect();
        assert_eq!(drawn.len(), 10_000);
        assert!(drawn.iter().all(|id| id.len() == 32
            && id
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())));
        assert_eq!(ids.span().len(), 16);
        // Another seed, another stream.
        assert_ne!(IdSource::new(8).id(), IdSource::new(7).id());
        let draws: Vec<f64> = (0..1000).map(|_| ids.uniform()).collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)));
        let mean = draws.iter().sum::<f64>() / 1000.0;
        assert!((mean - 0.5).abs() < 0.05, "{mean}");
    }
}
