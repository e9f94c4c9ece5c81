//! Long-lived state keyed by id, which compiled snapshots reference: upstream clients (and their
//! connection pools), member state and metric series. A config swap reuses what still exists, so
//! counters, pools and in-flight counts are not reset; entries no longer referenced are dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::metrics::Metrics;
use crate::proxy::upstream::{ClientSettings, UpstreamClient};
use crate::routing::MemberState;

type ClientKey = (String, ClientSettings);

#[derive(Default)]
struct Tables {
    clients: HashMap<ClientKey, Arc<UpstreamClient>>,
    members: HashMap<String, Arc<MemberState>>,
}

pub struct Registry {
    pub metrics: Arc<Metrics>,
    tables: Mutex<Tables>,
}

/// What one compilation takes from (and gives back to) the registry.
pub struct Lease<'a> {
    registry: &'a Registry,
    old: Tables,
    next: Tables,
}

impl Registry {
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            metrics,
            tables: Mutex::new(Tables::default()),
        }
    }

    /// Start a compilation. Nothing changes in the registry until `Lease::commit`.
    pub fn lease(&self) -> Lease<'_> {
        let tables = self.tables.lock().unwrap_or_else(PoisonError::into_inner);
        Lease {
            registry: self,
            old: Tables {
                clients: tables.clients.clone(),
                members: tables.members.clone(),
            },
            next: Tables::default(),
        }
    }
}

impl Lease<'_> {
    pub fn metrics(&self) -> &Metrics {
        &self.registry.metrics
    }

    pub fn client(
        &mut self,
        member_key: &str,
        settings: ClientSettings,
    ) -> Result<Arc<UpstreamClient>, rustls::Error> {
        let key = (member_key.to_string(), settings);
        if let Some(client) = self.next.clients.get(&key) {
            return Ok(client.clone());
        }
        let client = match self.old.clients.get(&key) {
            Some(client) => client.clone(),
            None => Arc::new(UpstreamClient::new(settings)?),
        };
        self.next.clients.insert(key, client.clone());
        Ok(client)
    }

    pub fn member_state(&mut self, member_key: &str) -> Arc<MemberState> {
        if let Some(state) = self.next.members.get(member_key) {
            return state.clone();
        }
        let state = self
            .old
            .members
            .get(member_key)
            .cloned()
            .unwrap_or_default();
        self.next
            .members
            .insert(member_key.to_string(), state.clone());
        state
    }

    /// Keep what the new snapshot uses and drop the rest.
    pub fn commit(self) {
        let mut tables = self
            .registry
            .tables
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *tables = self.next;
    }
}
