//! Long-lived state keyed by id, which compiled snapshots reference: upstream clients (and their
//! connection pools), member health, limiter buckets, admission gates and metric series. A config
//! swap reuses what still exists, so counters, buckets, queues and in-flight counts are not reset;
//! entries the new snapshot no longer references are dropped (requests still holding them keep
//! them alive until they end).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::admission::PoolGate;
use crate::limits::{LimitState, QuotaState};
use crate::metrics::Metrics;
use crate::routing::{MemberState, PoolState};
use crate::stats::Windows;
use crate::upstream::{AddressGuard, ClientSettings, UpstreamClient};

use super::model::AdmissionConfig;

/// One kind of state: what the snapshot in force uses, and what the next one will.
struct Table<K, V> {
    current: HashMap<K, Arc<V>>,
    next: HashMap<K, Arc<V>>,
}

impl<K: std::hash::Hash + Eq + Clone, V> Default for Table<K, V> {
    fn default() -> Self {
        Self { current: HashMap::new(), next: HashMap::new() }
    }
}

impl<K: std::hash::Hash + Eq + Clone, V> Table<K, V> {
    fn get_or_make<E>(&mut self, key: &K, make: impl FnOnce() -> Result<V, E>) -> Result<Arc<V>, E> {
        if let Some(v) = self.next.get(key) {
            return Ok(v.clone());
        }
        let value = match self.current.get(key) {
            Some(v) => v.clone(),
            None => Arc::new(make()?),
        };
        self.next.insert(key.clone(), value.clone());
        Ok(value)
    }

    fn commit(&mut self) {
        self.current = std::mem::take(&mut self.next);
    }

    fn abandon(&mut self) {
        self.next.clear();
    }

    /// A partial compilation: keep what the snapshot in force uses, add what is new.
    fn commit_partial(&mut self, forget: &[String])
    where
        K: std::borrow::Borrow<str>,
    {
        for key in forget {
            self.current.remove(key.as_str());
        }
        let next = std::mem::take(&mut self.next);
        self.current.extend(next);
    }
}

#[derive(Default)]
struct Tables {
    clients: Table<(String, ClientSettings), UpstreamClient>,
    members: Table<String, MemberState>,
    limits: Table<String, LimitState>,
    quotas: Table<String, QuotaState>,
    route_windows: Table<String, Windows>,
    gates: Table<String, PoolGate>,
    pools: Table<String, PoolState>,
}

pub struct Registry {
    pub metrics: Arc<Metrics>,
    /// What upstream connections may reach; shared by every client.
    pub guard: Arc<AddressGuard>,
    tables: Mutex<Tables>,
}

/// One compilation's access to the registry; nothing changes until `commit`.
pub struct Lease<'a> {
    registry: &'a Registry,
    tables: std::sync::MutexGuard<'a, Tables>,
    /// Gates whose admission settings change, applied only if the snapshot is.
    reconfigure: Vec<(Arc<PoolGate>, AdmissionConfig)>,
    /// Limiter and quota states of removed keys (partial commits only).
    forget: Vec<String>,
    committed: bool,
}

type Never = std::convert::Infallible;

fn infallible<V>(v: Result<V, Never>) -> V {
    match v {
        Ok(v) => v,
        Err(never) => match never {},
    }
}

impl Registry {
    pub fn new(metrics: Arc<Metrics>, guard: Arc<AddressGuard>) -> Self {
        Self { metrics, guard, tables: Mutex::new(Tables::default()) }
    }

    /// Start a compilation; compilations are serialized by this lease.
    pub fn lease(&self) -> Lease<'_> {
        Lease {
            registry: self,
            tables: self.tables.lock().unwrap_or_else(PoisonError::into_inner),
            reconfigure: Vec::new(),
            forget: Vec::new(),
            committed: false,
        }
    }
}

impl Lease<'_> {
    pub fn metrics(&self) -> &Metrics {
        &self.registry.metrics
    }

    pub fn client(&mut self, member_key: &str, settings: ClientSettings) -> Result<Arc<UpstreamClient>, rustls::Error> {
        let guard = self.registry.guard.clone();
        self.tables.clients.get_or_make(&(member_key.to_string(), settings), || UpstreamClient::new(settings, guard))
    }

    pub fn member_state(&mut self, member_key: &str) -> Arc<MemberState> {
        infallible(self.tables.members.get_or_make(&member_key.to_string(), || Ok(MemberState::default())))
    }

    /// Limiter state of a key (`key/ID`) or tenant (`tenant/ID`).
    pub fn route_windows(&mut self, alias: &str) -> Arc<Windows> {
        infallible(self.tables.route_windows.get_or_make(&alias.to_string(), || Ok(Windows::default())))
    }

    /// Quota use of a key (`key/ID`) or tenant (`tenant/ID`).
    pub fn quota_state(&mut self, scope_key: String) -> Arc<QuotaState> {
        infallible(self.tables.quotas.get_or_make(&scope_key, || Ok(QuotaState::default())))
    }

    pub fn limit_state(&mut self, scope_key: String) -> Arc<LimitState> {
        infallible(self.tables.limits.get_or_make(&scope_key, || Ok(LimitState::default())))
    }

    pub fn pool_state(&mut self, pool_id: &str) -> Arc<PoolState> {
        infallible(self.tables.pools.get_or_make(&pool_id.to_string(), || Ok(PoolState::default())))
    }

    /// The pool's admission gate; an existing one is reconfigured in place on commit.
    pub fn gate(&mut self, pool_id: &str, config: &AdmissionConfig) -> Arc<PoolGate> {
        let gate =
            infallible(self.tables.gates.get_or_make(&pool_id.to_string(), || Ok(PoolGate::new(config.clone()))));
        if *gate.config() != *config {
            self.reconfigure.push((gate.clone(), config.clone()));
        }
        gate
    }

    /// Drop a key's limiter and quota state when a partial commit removes the key.
    pub fn forget(&mut self, scope_key: &str) {
        self.forget.push(scope_key.to_string());
    }

    /// Commit a key change: everything in force stays, new states are added, removed keys' go.
    pub fn commit_partial(mut self) {
        let forget = std::mem::take(&mut self.forget);
        let t = &mut *self.tables;
        t.limits.commit_partial(&forget);
        t.quotas.commit_partial(&forget);
        self.committed = true;
    }

    /// Keep what the new snapshot uses and drop the rest.
    pub fn commit(mut self) {
        let t = &mut *self.tables;
        t.clients.commit();
        t.members.commit();
        t.limits.commit();
        t.quotas.commit();
        t.route_windows.commit();
        t.gates.commit();
        t.pools.commit();
        for (gate, config) in self.reconfigure.drain(..) {
            gate.reconfigure(config);
        }
        self.committed = true;
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if !self.committed {
            let t = &mut *self.tables;
            t.clients.abandon();
            t.members.abandon();
            t.limits.abandon();
            t.quotas.abandon();
            t.route_windows.abandon();
            t.gates.abandon();
            t.pools.abandon();
        }
    }
}
