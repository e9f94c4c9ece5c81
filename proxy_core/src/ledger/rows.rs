//! A batch of usage events (the JSON array `Core.drain_usage` hands out, or any array of the
//! same shape) read into rows of scalar values, one per column, in the order of the caller's
//! field list, borrowing the batch's text wherever a string needs no unescaping.
//!
//! The values keep their JSON kind, as the control plane's own path binds them after a
//! `json.loads`: integers, floats, text, null, and booleans as 0 or 1 (how SQLite stores them).
//! A batch that does not fit (not an array, an item that is not an object, a value that is an
//! object or an array, an integer beyond 64 bits, a required field missing) is refused whole:
//! the caller then takes the path that splits a batch and keeps the events at fault apart.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::json_str::JsonStr;

/// One column's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar<'a> {
    Null,
    Int(i64),
    Float(f64),
    Text(Cow<'a, str>),
}

/// The columns a row holds, in order, and the value of each that events of an earlier release
/// may lack (`None`: every event must carry it).
#[derive(Debug, Clone)]
pub struct Fields {
    names: Vec<String>,
    defaults: Vec<Option<Scalar<'static>>>,
    seq: Option<usize>,
}

impl Fields {
    pub fn new(names: Vec<String>, defaults: Vec<(String, Scalar<'static>)>) -> Result<Self, String> {
        let mut slots: Vec<Option<Scalar<'static>>> = vec![None; names.len()];
        for (name, value) in defaults {
            let at =
                names.iter().position(|n| *n == name).ok_or_else(|| format!("a default for `{name}`, not a field"))?;
            slots[at] = Some(value);
        }
        let seq = names.iter().position(|n| n == "seq");
        Ok(Self { names, defaults: slots, seq })
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The index of the field `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// The index of `key`, trying `guess` first: the core writes its fields in one order, so
    /// the next key is nearly always the one after the last.
    fn index(&self, key: &str, guess: usize) -> Option<usize> {
        if self.names.get(guess).is_some_and(|n| n == key) {
            return Some(guess);
        }
        self.names.iter().position(|n| n == key)
    }
}

/// The rows of a batch, flat (`fields.len()` values per row), and its highest `seq`.
#[derive(Debug, Default)]
pub struct Rows<'a> {
    pub values: Vec<Scalar<'a>>,
    pub count: usize,
    pub last_seq: Option<i64>,
}

impl<'a> Rows<'a> {
    pub fn row(&self, index: usize, width: usize) -> &[Scalar<'a>] {
        &self.values[index * width..(index + 1) * width]
    }
}

/// Fewer bytes than an event of the core's takes (its 34 keys alone take about 500): the room
/// for a batch's rows is reserved from its length at once. Grown by doubling from 64 events, the
/// rows of a 5000-event batch (4 MiB) were copied seven times, each time onto fresh pages the
/// kernel zeroed: about 3% of the ledger's CPU (bench/README.md). An estimate too high reserves
/// address space the rows never touch; one too low (a batch of small objects) grows as before.
const EVENT_BYTES_AT_LEAST: usize = 384;

/// Reads `batch` into rows of `fields`; an error says why the batch was refused.
pub fn read_batch<'a>(batch: &'a [u8], fields: &Fields) -> Result<Rows<'a>, String> {
    let mut de = serde_json::Deserializer::from_slice(batch);
    let events = batch.len() / EVENT_BYTES_AT_LEAST + 1;
    let rows = de.deserialize_seq(BatchVisitor { fields, events }).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(rows)
}

struct BatchVisitor<'f> {
    fields: &'f Fields,
    /// The events the batch may hold, about (see `EVENT_BYTES_AT_LEAST`).
    events: usize,
}

impl<'de> Visitor<'de> for BatchVisitor<'_> {
    type Value = Rows<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON array of usage events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Rows<'de>, A::Error> {
        let width = self.fields.len();
        let mut rows = Rows { values: Vec::with_capacity(self.events * width), count: 0, last_seq: None };
        // Which of the fields the event at hand carried: one buffer for the whole batch.
        let mut present = vec![false; width];
        while seq
            .next_element_seed(EventSeed { fields: self.fields, rows: &mut rows, present: &mut present })?
            .is_some()
        {}
        Ok(rows)
    }
}

/// One event, appended to `rows`.
struct EventSeed<'f, 'r, 'de> {
    fields: &'f Fields,
    rows: &'r mut Rows<'de>,
    present: &'r mut [bool],
}

impl<'de> DeserializeSeed<'de> for EventSeed<'_, '_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EventSeed<'_, '_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a usage event (a JSON object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let fields = self.fields;
        // The event's row, in place at the end of the rows: a null where it carries nothing.
        let base = self.rows.values.len();
        self.rows.values.resize(base + fields.len(), Scalar::Null);
        self.present.fill(false);
        let mut next = 0;
        while let Some(JsonStr(key)) = map.next_key::<JsonStr<'de>>()? {
            match fields.index(&key, next) {
                Some(at) => {
                    self.rows.values[base + at] = map.next_value()?;
                    self.present[at] = true;
                    next = at + 1;
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let event = self.rows.count;
        let row = &mut self.rows.values[base..];
        if let Some(Scalar::Int(seq)) = fields.seq.filter(|at| self.present[*at]).map(|at| &row[at]) {
            self.rows.last_seq = Some(self.rows.last_seq.map_or(*seq, |last| last.max(*seq)));
        }
        let mut missing = Vec::new();
        for (at, carried) in self.present.iter().enumerate() {
            if *carried {
                continue;
            }
            match &fields.defaults[at] {
                Some(value) => row[at] = value.clone(),
                None => missing.push(fields.names[at].as_str()),
            }
        }
        if !missing.is_empty() {
            return Err(de::Error::custom(format!("event {event} lacks fields: {}", missing.join(", "))));
        }
        self.rows.count += 1;
        Ok(())
    }
}

impl<'de> Deserialize<'de> for Scalar<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ScalarVisitor)
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string, number, boolean or null (a column's value)")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Null)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Int(i64::from(v)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Int(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar<'de>, E> {
        i64::try_from(v).map(Scalar::Int).map_err(|_| E::custom(format!("{v} is beyond a 64-bit integer column")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Float(v))
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Text(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Text(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Scalar<'de>, E> {
        Ok(Scalar::Text(Cow::Owned(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> Fields {
        let names = ["request_id", "seq", "stream", "ttft_ms", "tags"].map(String::from).to_vec();
        Fields::new(names, vec![("tags".into(), Scalar::Text("{}".into()))]).expect("fields")
    }

    #[test]
    fn values_keep_their_json_kind_in_the_fields_order() {
        let batch =
            br#"[{"seq":7,"request_id":"r1","stream":true,"ttft_ms":1.5,"tags":"{\"a\":\"b\"}","extra":{"x":[1]}},
                         {"request_id":"r\u00e92","seq":3,"stream":false,"ttft_ms":null},
                         {"request_id":"r3","seq":4,"stream":false,"ttft_ms":2,"tags":null}]"#;
        let f = fields();
        let rows = read_batch(batch, &f).expect("read");
        assert_eq!(rows.count, 3);
        assert_eq!(rows.last_seq, Some(7));
        assert_eq!(
            rows.row(0, f.len()),
            &[
                Scalar::Text("r1".into()),
                Scalar::Int(7),
                Scalar::Int(1),
                Scalar::Float(1.5),
                Scalar::Text(r#"{"a":"b"}"#.into()),
            ]
        );
        // An escaped string is unescaped; a field of an earlier release takes its default (the
        // event before carried it: nothing of one event's row stays for the next).
        assert_eq!(
            rows.row(1, f.len()),
            &[Scalar::Text("ré2".into()), Scalar::Int(3), Scalar::Int(0), Scalar::Null, Scalar::Text("{}".into())]
        );
        // A null the event carries is its value, not the default's place.
        assert_eq!(rows.row(2, f.len())[4], Scalar::Null);
        assert!(matches!(&rows.row(0, f.len())[0], Scalar::Text(Cow::Borrowed(_))), "unescaped text is borrowed");
    }

    #[test]
    fn a_batch_that_does_not_fit_is_refused_with_its_reason() {
        let f = fields();
        let cases: [(&[u8], &str); 6] = [
            (br#"{"seq":1}"#, "array"),
            (br#"[1]"#, "usage event"),
            (br#"[{"request_id":"r","seq":1,"stream":true}]"#, "event 0 lacks fields: ttft_ms"),
            (br#"[{"request_id":{"a":1},"seq":1,"stream":true,"ttft_ms":1}]"#, "column's value"),
            (br#"[{"request_id":"r","seq":18446744073709551615,"stream":true,"ttft_ms":1}]"#, "64-bit"),
            (br#"[{"request_id":"r","seq":1,"stream":true,"ttft_ms":1}] x"#, "trailing"),
        ];
        for (batch, why) in cases {
            let error = read_batch(batch, &f).expect_err("refused");
            assert!(error.contains(why), "{why}: {error}");
        }
    }

    #[test]
    fn a_repeated_key_keeps_its_last_value_and_an_empty_batch_has_no_rows() {
        let f = fields();
        let rows = read_batch(br#"[{"request_id":"a","request_id":"b","seq":1,"stream":true,"ttft_ms":1}]"#, &f)
            .expect("read");
        assert_eq!(rows.row(0, f.len())[0], Scalar::Text("b".into()));
        let empty = read_batch(b"[]", &f).expect("read");
        assert_eq!((empty.count, empty.last_seq), (0, None));
    }
}
