//! Chooses the primary origin and the hedge target.
//!
//! The primary is the first origin in configuration order that admits the
//! request: configuration order is the operator's preference (a primary
//! region, then fallbacks), and keeping one primary keeps that origin's cache
//! warm. The hedge goes to another origin that admits it, preferring one in a
//! different zone (a failure domain the primary's trouble is less likely to
//! share); with no such peer it goes to the primary itself on a new request,
//! if configured, or nowhere.
//!
//! Admission is the caller's, as in `select_with(accept)`: the pool does not
//! know why an origin is refused (degraded, hedging stopped, or the primary).

/// A hedge target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HedgeTarget {
    /// Another origin, by index.
    Peer(usize),
    /// The primary again, on a new request.
    SameOrigin,
}

/// The primary: the first origin that `admit` accepts, or the first origin
/// when none does (every origin degraded: trying the preferred one beats
/// refusing the request).
pub fn choose_primary(origin_count: usize, mut admit: impl FnMut(usize) -> bool) -> usize {
    (0..origin_count).find(|&i| admit(i)).unwrap_or(0)
}

/// The hedge target for `primary`, given each origin's zone. `admit` is asked
/// about peers in preference order (other zone first, then configuration
/// order) and may claim a slot, so it is called only until one accepts.
pub fn choose_hedge(
    primary: usize,
    zones: &[Option<&str>],
    same_origin_allowed: bool,
    mut admit: impl FnMut(usize) -> bool,
) -> Option<HedgeTarget> {
    let primary_zone = zones.get(primary).copied().flatten();
    let other_zone = |i: usize| match (primary_zone, zones[i]) {
        (Some(p), Some(z)) => p != z,
        // Unknown zones count as the same failure domain.
        _ => false,
    };
    let peers = (0..zones.len()).filter(|&i| i != primary);
    let preferred = peers.clone().filter(|&i| other_zone(i));
    let rest = peers.filter(|&i| !other_zone(i));
    if let Some(peer) = preferred.chain(rest).find(|&i| admit(i)) {
        return Some(HedgeTarget::Peer(peer));
    }
    same_origin_allowed.then_some(HedgeTarget::SameOrigin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primary_is_the_first_admitted_origin() {
        assert_eq!(choose_primary(3, |_| true), 0);
        assert_eq!(choose_primary(3, |i| i != 0), 1);
        assert_eq!(
            choose_primary(3, |_| false),
            0,
            "all degraded: the preferred one"
        );
    }

    #[test]
    fn hedges_prefer_another_zone() {
        let zones = [Some("eu"), Some("eu"), Some("us")];
        assert_eq!(
            choose_hedge(0, &zones, true, |_| true),
            Some(HedgeTarget::Peer(2))
        );
    }

    #[test]
    fn a_refused_peer_is_skipped() {
        let zones = [Some("eu"), Some("eu"), Some("us")];
        assert_eq!(
            choose_hedge(0, &zones, true, |i| i != 2),
            Some(HedgeTarget::Peer(1))
        );
    }

    #[test]
    fn no_admitted_peer_falls_back_to_the_same_origin_or_nothing() {
        let zones = [Some("eu"), Some("us")];
        assert_eq!(
            choose_hedge(0, &zones, true, |_| false),
            Some(HedgeTarget::SameOrigin)
        );
        assert_eq!(choose_hedge(0, &zones, false, |_| false), None);
        assert_eq!(
            choose_hedge(0, &[Some("eu")], true, |_| true),
            Some(HedgeTarget::SameOrigin)
        );
    }

    #[test]
    fn admit_is_asked_only_until_a_peer_accepts() {
        let zones = [None, None, None, None];
        let mut asked = Vec::new();
        let target = choose_hedge(1, &zones, true, |i| {
            asked.push(i);
            i == 2
        });
        assert_eq!(target, Some(HedgeTarget::Peer(2)));
        assert_eq!(asked, vec![0, 2]);
    }
}
