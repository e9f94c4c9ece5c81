//! Labelled series, created when a config snapshot is compiled (never on the request path) and
//! kept across swaps so counters do not reset. The hot path holds `Arc`s to its series.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

pub type LabelValues = Box<[Arc<str>]>;

pub struct Family<T> {
    pub label_names: &'static [&'static str],
    series: Mutex<BTreeMap<LabelValues, Arc<T>>>,
}

impl<T> Family<T> {
    pub fn new(label_names: &'static [&'static str]) -> Self {
        Self { label_names, series: Mutex::new(BTreeMap::new()) }
    }

    pub fn get_or_create(&self, values: &[&str], make: impl FnOnce() -> T) -> Arc<T> {
        debug_assert_eq!(values.len(), self.label_names.len());
        let key: LabelValues = values.iter().map(|v| Arc::<str>::from(*v)).collect();
        let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        series.entry(key).or_insert_with(|| Arc::new(make())).clone()
    }

    /// The series of `values` if it exists, else a new one while fewer than `bound` exist, else
    /// the series of `overflow` (created at once, outside the bound): a label whose values come
    /// from tenants' ids stays within `bound + 1` series for the process's life.
    pub fn get_or_create_bounded(
        &self,
        values: &[&str],
        bound: usize,
        overflow: &[&str],
        make: impl Fn() -> T,
    ) -> Arc<T> {
        let key: LabelValues = values.iter().map(|v| Arc::<str>::from(*v)).collect();
        let other: LabelValues = overflow.iter().map(|v| Arc::<str>::from(*v)).collect();
        let mut series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = series.get(&key) {
            return found.clone();
        }
        let named = series.len() - usize::from(series.contains_key(&other));
        let key = if named < bound && key != other { key } else { other };
        series.entry(key).or_insert_with(|| Arc::new(make())).clone()
    }

    /// A consistent list of the series for export, in label order.
    pub fn collect(&self) -> Vec<(LabelValues, Arc<T>)> {
        let series = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        series.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }
}
