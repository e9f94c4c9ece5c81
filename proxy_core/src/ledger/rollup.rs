//! The rollups of a batch's new rows, summed in the core as the rows are inserted, then added to
//! the rollup table with one upsert per bucket and group. Summing them in SQL from the rows
//! just inserted read every row back and parsed its start time again: about 1.5 us of the
//! ledger's CPU per event, against a hash-map update here (bench/README.md).
//!
//! What is summed is the caller's (`control/usage/writer.py`): the granularities (name and
//! seconds), the fields a rollup row is per (tenant, key, model), the fields summed, and the
//! outcomes counted as errors with any `status` of 400 or more. A row counts `1` request, each
//! summed field, and `1` error or `0`, in that order after the granularity, the bucket and the
//! group: the upsert's parameters. Only rows the insert actually added are counted (a replayed
//! event is not counted twice).

use std::collections::{BTreeMap, HashMap};

use super::rows::{Fields, Scalar};

/// What the rollups are made of, by field name.
#[derive(Debug, Clone)]
pub struct RollupSpec {
    /// Each granularity's name (the upsert's first parameter) and length in seconds; each a
    /// multiple of the shortest.
    pub granularities: Vec<(String, i64)>,
    /// The fields a rollup row is per, text in every event.
    pub group: Vec<String>,
    /// The fields summed, integers in every event.
    pub sums: Vec<String>,
    /// The `outcome`s counted as errors (besides a `status` of 400 or more).
    pub error_outcomes: Vec<String>,
}

/// A spec resolved against the fields: column indexes.
#[derive(Debug, Clone)]
pub struct Rollup {
    granularities: Vec<(String, i64)>,
    base: i64,
    group: Vec<usize>,
    sums: Vec<(usize, String)>,
    status: usize,
    outcome: usize,
    error_outcomes: Vec<String>,
}

impl Rollup {
    pub fn new(spec: &RollupSpec, fields: &Fields) -> Result<Self, String> {
        let at = |name: &str| fields.position(name).ok_or_else(|| format!("the rollup's `{name}` is not a field"));
        let base = spec.granularities.iter().map(|(_, s)| *s).min().ok_or("the rollup has no granularity")?;
        if base <= 0 || spec.granularities.iter().any(|(_, s)| s % base != 0) {
            return Err(format!("granularities must be positive multiples of the shortest: {:?}", spec.granularities));
        }
        Ok(Self {
            granularities: spec.granularities.clone(),
            base,
            group: spec.group.iter().map(|n| at(n)).collect::<Result<_, _>>()?,
            sums: spec.sums.iter().map(|n| at(n).map(|i| (i, n.clone()))).collect::<Result<_, _>>()?,
            status: at("status")?,
            outcome: at("outcome")?,
            error_outcomes: spec.error_outcomes.clone(),
        })
    }

    /// The upsert's parameters: granularity, bucket, the group, then the counters.
    pub fn parameters(&self) -> usize {
        2 + self.group.len() + self.counters()
    }

    fn counters(&self) -> usize {
        self.sums.len() + 2
    }
}

/// One rollup row: granularity, bucket, the group's values, the counters.
pub type RollupRow<'r> = (&'r str, i64, Vec<&'r str>, Vec<i64>);

/// The counters of one batch's new rows per shortest bucket and group.
pub struct Sums<'r> {
    rollup: &'r Rollup,
    by_base: HashMap<(i64, Vec<&'r str>), Vec<i64>>,
}

impl<'r> Sums<'r> {
    pub fn new(rollup: &'r Rollup) -> Self {
        Self { rollup, by_base: HashMap::new() }
    }

    /// Counts an inserted row that started at `second` (unix). An error names the field whose
    /// value the rollup cannot count (the caller's other path then takes the batch).
    pub fn add(&mut self, row: &'r [Scalar<'_>], second: i64) -> Result<(), String> {
        let r = self.rollup;
        let mut group = Vec::with_capacity(r.group.len());
        for &at in &r.group {
            match &row[at] {
                Scalar::Text(text) => group.push(text.as_ref()),
                other => return Err(format!("a rollup group value that is not text: {other:?}")),
            }
        }
        let bucket = second.div_euclid(r.base) * r.base;
        let counters = self.by_base.entry((bucket, group)).or_insert_with(|| vec![0; r.counters()]);
        counters[0] += 1;
        for (slot, (at, name)) in counters[1..].iter_mut().zip(&r.sums) {
            let value = match &row[*at] {
                Scalar::Int(v) => *v,
                other => return Err(format!("`{name}` is not an integer: {other:?}")),
            };
            *slot = slot.checked_add(value).ok_or_else(|| format!("the sum of `{name}` overflows"))?;
        }
        let error = matches!(row[r.status], Scalar::Int(status) if status >= 400)
            || matches!(&row[r.outcome], Scalar::Text(o) if r.error_outcomes.iter().any(|e| e == o));
        if let Some(last) = counters.last_mut() {
            *last += i64::from(error);
        }
        Ok(())
    }

    /// Every granularity's rows: (granularity, bucket, group, counters), ordered. An error when
    /// a coarser bucket's sum overflows (as SQL's `sum` refuses it).
    pub fn rows(&self) -> Result<Vec<RollupRow<'r>>, String> {
        let r = self.rollup;
        let mut out: BTreeMap<(usize, i64, Vec<&'r str>), Vec<i64>> = BTreeMap::new();
        for ((base_bucket, group), counters) in &self.by_base {
            for (g, (name, seconds)) in r.granularities.iter().enumerate() {
                let bucket = base_bucket.div_euclid(*seconds) * seconds;
                let into = out.entry((g, bucket, group.clone())).or_insert_with(|| vec![0; counters.len()]);
                for (sum, value) in into.iter_mut().zip(counters) {
                    *sum = sum.checked_add(*value).ok_or_else(|| format!("a sum per {name} overflows"))?;
                }
            }
        }
        Ok(out
            .into_iter()
            .map(|((g, bucket, group), counters)| (r.granularities[g].0.as_str(), bucket, group, counters))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> Fields {
        let names = ["key_id", "model", "status", "outcome", "tokens"].map(String::from).to_vec();
        Fields::new(names, vec![]).expect("fields")
    }

    fn rollup() -> Rollup {
        let spec = RollupSpec {
            granularities: vec![("minute".into(), 60), ("hour".into(), 3600)],
            group: vec!["key_id".into(), "model".into()],
            sums: vec!["tokens".into()],
            error_outcomes: vec!["timeout".into()],
        };
        Rollup::new(&spec, &fields()).expect("rollup")
    }

    fn row(key: &str, status: i64, outcome: &str, tokens: i64) -> Vec<Scalar<'static>> {
        vec![
            Scalar::Text(key.to_owned().into()),
            Scalar::Text("m".into()),
            Scalar::Int(status),
            Scalar::Text(outcome.to_owned().into()),
            Scalar::Int(tokens),
        ]
    }

    #[test]
    fn rows_are_summed_per_bucket_and_group_with_errors_counted() {
        let r = rollup();
        let rows = [row("a", 200, "complete", 10), row("a", 200, "timeout", 5), row("b", 502, "x", 1)];
        let mut sums = Sums::new(&r);
        sums.add(&rows[0], 3599).expect("add");
        sums.add(&rows[1], 3600).expect("add");
        sums.add(&rows[2], 3601).expect("add");
        assert_eq!(
            sums.rows().expect("rows"),
            vec![
                ("minute", 3540, vec!["a", "m"], vec![1, 10, 0]),
                ("minute", 3600, vec!["a", "m"], vec![1, 5, 1]),
                ("minute", 3600, vec!["b", "m"], vec![1, 1, 1]),
                ("hour", 0, vec!["a", "m"], vec![1, 10, 0]),
                ("hour", 3600, vec!["a", "m"], vec![1, 5, 1]),
                ("hour", 3600, vec!["b", "m"], vec![1, 1, 1]),
            ]
        );
        assert_eq!(r.parameters(), 2 + 2 + 3);
    }

    #[test]
    fn a_value_the_rollup_cannot_count_is_refused() {
        let r = rollup();
        let mut floats = row("a", 200, "complete", 0);
        floats[4] = Scalar::Float(1.5);
        let mut null_key = row("a", 200, "complete", 0);
        null_key[0] = Scalar::Null;
        let big = [row("a", 200, "complete", i64::MAX), row("a", 200, "complete", 1)];
        let mut sums = Sums::new(&r);
        assert!(sums.add(&floats, 0).expect_err("refused").contains("`tokens` is not an integer"));
        assert!(sums.add(&null_key, 0).expect_err("refused").contains("not text"));
        sums.add(&big[0], 0).expect("add");
        assert!(sums.add(&big[1], 0).expect_err("refused").contains("overflows"));
        // Two minutes each within the limit, their hour beyond it.
        let mut hourly = Sums::new(&r);
        hourly.add(&big[0], 0).expect("add");
        hourly.add(&big[1], 60).expect("add");
        assert!(hourly.rows().expect_err("refused").contains("a sum per hour overflows"));
    }

    #[test]
    fn a_spec_that_does_not_fit_the_fields_is_refused() {
        let mut spec = RollupSpec {
            granularities: vec![("minute".into(), 60), ("odd".into(), 90)],
            group: vec!["key_id".into()],
            sums: vec![],
            error_outcomes: vec![],
        };
        assert!(Rollup::new(&spec, &fields()).expect_err("refused").contains("multiples"));
        spec.granularities = vec![("minute".into(), 60)];
        spec.group = vec!["tenant".into()];
        assert!(Rollup::new(&spec, &fields()).expect_err("refused").contains("`tenant` is not a field"));
    }
}
