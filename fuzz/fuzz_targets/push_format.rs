//! The PoP push format on arbitrary bytes: decoding never panics; a body it
//! accepts merges into the aggregator without panicking and round-trips.
#![no_main]

use hedgehog_core::pop::aggregate::{PopAggregate, PopParams};
use hedgehog_core::pop::push::Push;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(push) = Push::decode(data) {
        let again = Push::decode(&push.encode()).expect("an accepted push re-encodes validly");
        assert_eq!(again, push);
        let mut pop = PopAggregate::new(PopParams::default());
        let (reply, _) = pop.apply(&push, data.len(), 1_000.0);
        assert_eq!(reply.keys.len(), push.keys.len());
    }
});
