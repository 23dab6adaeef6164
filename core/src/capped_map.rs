//! A map with a fixed maximum size whose entries expire when idle: the one
//! bound on every per-key table the core keeps (estimator routes, route stats,
//! the aggregator's keys, the PoP client's delta and answers), so that no
//! request stream, however many distinct keys it makes up, grows memory.
//!
//! A full map makes room by forgetting every entry idle for `idle_ms`; when
//! none is, the new key is simply not tracked (the caller falls back, e.g. to
//! its per-origin figure) rather than evicting a live one.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

#[derive(Debug, Clone)]
struct Entry<V> {
    value: V,
    last_used_ms: f64,
}

/// A map of at most `max_len` entries; an entry not used for `idle_ms` may be
/// forgotten.
#[derive(Debug, Clone)]
pub struct CappedMap<K, V> {
    max_len: usize,
    idle_ms: f64,
    entries: HashMap<K, Entry<V>>,
}

// === impl CappedMap ===

impl<K: Hash + Eq + Clone, V> CappedMap<K, V> {
    /// An empty map holding at most `max_len` entries, each forgettable once
    /// idle for `idle_ms` (infinite: never).
    pub fn new(max_len: usize, idle_ms: f64) -> Self {
        Self {
            max_len,
            idle_ms,
            entries: HashMap::new(),
        }
    }

    /// The value for `key`, marked used at `now_ms`.
    pub fn get_mut<Q>(&mut self, key: &Q, now_ms: f64) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let entry = self.entries.get_mut(key)?;
        entry.last_used_ms = entry.last_used_ms.max(now_ms);
        Some(&mut entry.value)
    }

    /// Takes `key`'s value out.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.entries.remove(key).map(|entry| entry.value)
    }

    /// The value for `key`, without marking it used.
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.entries.get(key).map(|entry| &entry.value)
    }

    /// When `key` was last used.
    pub fn last_used_ms<Q>(&self, key: &Q) -> Option<f64>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.entries.get(key).map(|entry| entry.last_used_ms)
    }

    /// Whether `key` is held.
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.entries.contains_key(key)
    }

    /// The value for `key`, created with `make` if there is room (after
    /// forgetting idle entries); marked used at `now_ms`. `None` when the map
    /// is full of live entries.
    pub fn get_or_insert_with(
        &mut self,
        key: K,
        now_ms: f64,
        make: impl FnOnce() -> V,
    ) -> Option<&mut V> {
        if !self.entries.contains_key(&key) {
            if self.entries.len() >= self.max_len {
                self.drop_idle(now_ms);
            }
            if self.entries.len() >= self.max_len {
                return None;
            }
        }
        let entry = self.entries.entry(key).or_insert_with(|| Entry {
            value: make(),
            last_used_ms: now_ms,
        });
        entry.last_used_ms = entry.last_used_ms.max(now_ms);
        Some(&mut entry.value)
    }

    /// Puts `value` under `key` as last used at `last_used_ms` (restoring
    /// stored state); refused, and `false`, when the map is full of live
    /// entries at `now_ms`.
    pub fn restore(&mut self, key: K, value: V, last_used_ms: f64, now_ms: f64) -> bool {
        if !self.entries.contains_key(&key) && self.entries.len() >= self.max_len {
            self.drop_idle(now_ms);
            if self.entries.len() >= self.max_len {
                return false;
            }
        }
        self.entries.insert(
            key,
            Entry {
                value,
                last_used_ms,
            },
        );
        true
    }

    /// Forgets every entry idle for `idle_ms` at `now_ms`.
    pub fn drop_idle(&mut self, now_ms: f64) {
        let idle_ms = self.idle_ms;
        self.entries
            .retain(|_, entry| now_ms - entry.last_used_ms < idle_ms);
    }

    /// Forgets every entry idle for `idle_ms` at `now_ms`; returns their keys
    /// (for a caller that must delete them from storage too).
    pub fn forget_idle(&mut self, now_ms: f64) -> Vec<K> {
        let idle_ms = self.idle_ms;
        let forgotten: Vec<K> = self
            .entries
            .iter()
            .filter(|(_, entry)| now_ms - entry.last_used_ms >= idle_ms)
            .map(|(key, _)| key.clone())
            .collect();
        for key in &forgotten {
            self.entries.remove(key);
        }
        forgotten
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.entries.iter().map(|(key, entry)| (key, &entry.value))
    }

    /// Every value, mutable, in no particular order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.entries.values_mut().map(|entry| &mut entry.value)
    }

    /// Takes every entry out, leaving the map empty.
    pub fn drain(&mut self) -> impl Iterator<Item = (K, V)> + '_ {
        self.entries.drain().map(|(key, entry)| (key, entry.value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_map_refuses_new_keys_while_every_entry_is_live() {
        let mut map = CappedMap::new(2, 1_000.0);
        assert!(map.get_or_insert_with("a", 0.0, || 1).is_some());
        assert!(map.get_or_insert_with("b", 500.0, || 2).is_some());
        assert!(map.get_or_insert_with("c", 900.0, || 3).is_none());
        assert_eq!(map.len(), 2);
        // An existing key is still served when the map is full.
        assert_eq!(map.get_or_insert_with("a", 900.0, || 9).copied(), Some(1));
    }

    #[test]
    fn a_full_map_forgets_idle_entries_to_make_room() {
        let mut map = CappedMap::new(2, 1_000.0);
        map.get_or_insert_with("a", 0.0, || 1);
        map.get_or_insert_with("b", 600.0, || 2);
        // At 1,000 ms "a" has been idle a whole second, "b" has not.
        assert_eq!(map.get_or_insert_with("c", 1_000.0, || 3).copied(), Some(3));
        assert!(!map.contains_key("a"));
        assert!(map.contains_key("b"));
    }

    #[test]
    fn use_keeps_an_entry_alive() {
        let mut map = CappedMap::new(1, 1_000.0);
        map.get_or_insert_with("a", 0.0, || 1);
        assert!(map.get_mut("a", 900.0).is_some());
        map.drop_idle(1_500.0);
        assert!(map.contains_key("a"));
        assert_eq!(map.forget_idle(1_900.0), vec!["a"]);
    }

    #[test]
    fn restore_keeps_the_stored_last_use_and_the_cap() {
        let mut map = CappedMap::new(1, 1_000.0);
        assert!(map.restore("a", 1, 100.0, 500.0));
        assert_eq!(map.last_used_ms("a"), Some(100.0));
        assert!(!map.restore("b", 2, 500.0, 500.0));
        assert!(map.restore("b", 2, 1_200.0, 1_200.0));
        assert!(!map.contains_key("a"));
    }
}
