//! One batch of usage events into SQLite in one transaction, without the interpreter: the rows
//! read from the batch's JSON (`rows.rs`) are bound straight to the control plane's own insert
//! statement, the new ones summed into rollups (`rollup.rs`) as they go, and the sums added to
//! the rollup table with the control plane's upsert.
//!
//! The SQL is the caller's (`control/usage/writer.py` owns the schema): an insert with one
//! parameter per field, in the fields' order, and one more, the batch's clock (`recorded_at`);
//! an upsert with one parameter per rollup column. The event's `started_at` (unix seconds) is
//! bound as the text the control plane stores (`timestamps.rs`), the rest as they are.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::rollup::{Rollup, RollupSpec, Sums};
use super::rows::{read_batch, Fields, Rows, Scalar};
use super::sqlite::{Connection, DbError, Library, Statement};
use super::timestamps::{format_millis, unix_millis};

/// The caller's SQL.
#[derive(Debug, Clone)]
pub struct Statements {
    /// Run once on the new connection (PRAGMAs: WAL, busy timeout, synchronous).
    pub setup: Vec<String>,
    /// One parameter per field, then the batch's clock; inserts a row or ignores it (a
    /// replayed event).
    pub insert: String,
    /// One parameter per rollup column (`Rollup::parameters`): adds one bucket's sums.
    pub rollup: String,
}

/// What one batch stored: rows inserted (new), events read, the highest `seq`, and how many
/// times the CPU was given up between slices of rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    pub inserted: u64,
    pub events: usize,
    pub last_seq: Option<i64>,
    pub pauses: u64,
}

#[derive(Debug)]
pub enum WriteError {
    /// The batch or a value in it cannot be stored as it is: the same batch fails again.
    Refused(String),
    /// The database failed (busy past its timeout, I/O): the batch may be retried.
    Database(DbError),
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Refused(why) => write!(f, "the batch cannot be stored as it is: {why}"),
            Self::Database(e) => write!(f, "the database failed: {e}"),
        }
    }
}

impl From<DbError> for WriteError {
    fn from(e: DbError) -> Self {
        if e.refused_values() {
            Self::Refused(e.to_string())
        } else {
            Self::Database(e)
        }
    }
}

/// A connection and its prepared statements, held from one batch to the next.
pub struct LedgerWriter {
    // Statements first: dropped (finalized) before the connection closes.
    insert: Statement,
    upsert: Statement,
    conn: Connection,
    fields: Fields,
    rollup: Rollup,
    started_at: usize,
}

impl LedgerWriter {
    pub fn open(
        lib: Arc<Library>,
        path: &str,
        sql: &Statements,
        fields: Fields,
        rollup: &RollupSpec,
    ) -> Result<Self, DbError> {
        let misfit = |message: String| DbError { code: 21, message };
        let rollup = Rollup::new(rollup, &fields).map_err(misfit)?;
        let started_at = fields.position("started_at").ok_or_else(|| misfit("no `started_at` field".into()))?;
        let mut conn = Connection::open(lib, path)?;
        for statement in &sql.setup {
            conn.exec(statement)?;
        }
        let insert = conn.prepare(&sql.insert)?;
        expect_parameters(&insert, fields.len() + 1, "the insert")?;
        let upsert = conn.prepare(&sql.rollup)?;
        expect_parameters(&upsert, rollup.parameters(), "the rollup")?;
        Ok(Self { insert, upsert, conn, fields, rollup, started_at })
    }

    /// Stores `batch` (a JSON array of events) in one transaction. `pause`, called after every
    /// `slice` rows, lets the caller give up the CPU between them (see `control/usage/writer.py`).
    pub fn write(&mut self, batch: &[u8], slice: usize, pause: &mut dyn FnMut()) -> Result<Stored, WriteError> {
        let rows = read_batch(batch, &self.fields).map_err(WriteError::Refused)?;
        let mut stored = Stored { inserted: 0, events: rows.count, last_seq: rows.last_seq, pauses: 0 };
        if rows.count == 0 {
            return Ok(stored);
        }
        self.conn.exec("BEGIN IMMEDIATE")?;
        let mut pauses = 0;
        let mut counted = || {
            pauses += 1;
            pause();
        };
        let written = self.write_rows(&rows, slice, &mut counted);
        stored.pauses = pauses;
        match written.and_then(|inserted| self.conn.exec("COMMIT").map(|()| inserted).map_err(WriteError::from)) {
            Ok(inserted) => {
                stored.inserted = inserted;
                Ok(stored)
            }
            Err(e) => {
                // Nothing of the batch stays; a failed rollback leaves nothing open either
                // (SQLite ends the transaction itself on the errors that make it fail).
                let _ = self.conn.exec("ROLLBACK");
                Err(e)
            }
        }
    }

    fn write_rows(&mut self, rows: &Rows<'_>, slice: usize, pause: &mut dyn FnMut()) -> Result<u64, WriteError> {
        let width = self.fields.len();
        let recorded_at = format_millis(now_millis());
        let recorded_at = Scalar::Text(Cow::Borrowed(std::str::from_utf8(&recorded_at).unwrap_or_default()));
        let mut sums = Sums::new(&self.rollup);
        let mut inserted = 0u64;
        for index in 0..rows.count {
            if index > 0 && slice > 0 && index % slice == 0 {
                pause();
            }
            let row = rows.row(index, width);
            let started = match &row[self.started_at] {
                Scalar::Float(seconds) => unix_millis(*seconds),
                #[allow(clippy::cast_precision_loss)] // a unix second: far below 2^53
                Scalar::Int(seconds) => unix_millis(*seconds as f64),
                _ => None,
            };
            // Outside SQLite's dates or not a time: the batch goes to the caller's other path.
            let started = started.ok_or_else(|| {
                WriteError::Refused(format!("event {index}: `started_at` is not a time: {:?}", row[self.started_at]))
            })?;
            let text = format_millis(started);
            let started_text = Scalar::Text(Cow::Borrowed(std::str::from_utf8(&text).unwrap_or_default()));
            let result = bind_row(&mut self.insert, row, self.started_at, &started_text)
                .and_then(|()| self.insert.bind(width + 1, &recorded_at))
                .and_then(|()| self.insert.step());
            self.insert.reset();
            result.map_err(|e| refused_row(e, index))?;
            if self.conn.changes() > 0 {
                inserted += 1;
                sums.add(row, started.div_euclid(1000))
                    .map_err(|why| WriteError::Refused(format!("event {index}: {why}")))?;
            }
        }
        for (granularity, bucket, group, counters) in sums.rows().map_err(WriteError::Refused)? {
            let result = bind_rollup_row(&mut self.upsert, granularity, bucket, &group, &counters)
                .and_then(|()| self.upsert.step());
            self.upsert.reset();
            result?;
        }
        Ok(inserted)
    }
}

/// Now, in unix milliseconds: the batch's `recorded_at` (SQLite's `'now'` has the same
/// precision).
fn now_millis() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Binds `row`, with `replacement` in place of its value at `replaced`.
fn bind_row(
    statement: &mut Statement,
    row: &[Scalar<'_>],
    replaced: usize,
    replacement: &Scalar<'_>,
) -> Result<(), DbError> {
    for (at, value) in row.iter().enumerate() {
        statement.bind(at + 1, if at == replaced { replacement } else { value })?;
    }
    Ok(())
}

/// Binds one rollup row: granularity, bucket, the group's values, the counters.
fn bind_rollup_row(
    statement: &mut Statement,
    granularity: &str,
    bucket: i64,
    group: &[&str],
    counters: &[i64],
) -> Result<(), DbError> {
    statement.bind(1, &Scalar::Text(Cow::Borrowed(granularity)))?;
    statement.bind(2, &Scalar::Int(bucket))?;
    for (at, value) in group.iter().enumerate() {
        statement.bind(3 + at, &Scalar::Text(Cow::Borrowed(value)))?;
    }
    for (at, value) in counters.iter().enumerate() {
        statement.bind(3 + group.len() + at, &Scalar::Int(*value))?;
    }
    Ok(())
}

/// A row's error, naming the event when the database refused its values.
fn refused_row(e: DbError, index: usize) -> WriteError {
    match WriteError::from(e) {
        WriteError::Refused(why) => WriteError::Refused(format!("event {index}: {why}")),
        other => other,
    }
}

fn expect_parameters(statement: &Statement, expected: usize, what: &str) -> Result<(), DbError> {
    if statement.parameters() == expected {
        Ok(())
    } else {
        Err(DbError {
            code: 25,
            message: format!("{what} takes {} parameters, not the {expected} expected", statement.parameters()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::sqlite::Step;

    const SCHEMA: &str =
        "CREATE TABLE IF NOT EXISTS usage_records (id INTEGER PRIMARY KEY, request_id TEXT NOT NULL UNIQUE, \
         seq INTEGER, key_id TEXT NOT NULL, status INTEGER, outcome TEXT, tokens INTEGER NOT NULL CHECK (tokens >= 0), \
         started_at TEXT NOT NULL, tags TEXT, recorded_at TEXT NOT NULL); \
         CREATE TABLE IF NOT EXISTS rollups (granularity TEXT, bucket INTEGER, key_id TEXT, requests INTEGER, \
         tokens INTEGER, errors INTEGER, PRIMARY KEY (granularity, bucket, key_id));";

    fn statements() -> Statements {
        Statements {
            setup: vec!["PRAGMA journal_mode=WAL".into(), "PRAGMA busy_timeout=2000".into(), SCHEMA.into()],
            insert: "INSERT INTO usage_records (request_id, seq, key_id, status, outcome, tokens, started_at, tags, \
                     recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (request_id) DO NOTHING"
                .into(),
            rollup: "INSERT INTO rollups VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (granularity, bucket, key_id) \
                     DO UPDATE SET requests = requests + excluded.requests, tokens = tokens + excluded.tokens, \
                     errors = errors + excluded.errors"
                .into(),
        }
    }

    fn fields() -> Fields {
        let names = ["request_id", "seq", "key_id", "status", "outcome", "tokens", "started_at", "tags"]
            .map(String::from)
            .to_vec();
        Fields::new(names, vec![("tags".into(), Scalar::Null)]).expect("fields")
    }

    fn spec() -> RollupSpec {
        RollupSpec {
            granularities: vec![("minute".into(), 60), ("hour".into(), 3600)],
            group: vec!["key_id".into()],
            sums: vec!["tokens".into()],
            error_outcomes: vec!["timeout".into()],
        }
    }

    fn writer(path: &str) -> LedgerWriter {
        let lib = Library::system().expect("the system's libsqlite3.so.0 (Debian's libsqlite3-0)");
        LedgerWriter::open(lib, path, &statements(), fields(), &spec()).expect("open")
    }

    fn count(w: &mut LedgerWriter, sql: &str) -> i64 {
        let mut s = w.conn.prepare(sql).expect("prepare");
        assert_eq!(s.step().expect("step"), Step::Row);
        s.column_i64(0)
    }

    fn event(id: &str, seq: i64, tokens: i64) -> String {
        format!(
            r#"{{"request_id":"{id}","seq":{seq},"key_id":"k","status":200,"outcome":"complete","tokens":{tokens},"started_at":1796300000.25}}"#
        )
    }

    #[test]
    fn a_batch_is_inserted_once_and_rolled_up_once() {
        let dir = tempfile_dir();
        let mut w = writer(&format!("{dir}/ledger.db"));
        let batch = format!("[{},{},{}]", event("a", 1, 10), event("b", 2, 20), event("c", 3, 30));
        let mut pauses = 0;
        let stored = w.write(batch.as_bytes(), 2, &mut || pauses += 1).expect("write");
        assert_eq!(stored, Stored { inserted: 3, events: 3, last_seq: Some(3), pauses: 1 });
        assert_eq!(pauses, 1, "one pause between two slices of two rows");
        // The same batch again (a replay): nothing new, nothing counted twice.
        let again = w.write(batch.as_bytes(), 0, &mut || {}).expect("write");
        assert_eq!(again, Stored { inserted: 0, events: 3, last_seq: Some(3), pauses: 0 });
        assert_eq!(count(&mut w, "SELECT count(*) FROM usage_records"), 3);
        assert_eq!(count(&mut w, "SELECT sum(tokens) FROM rollups WHERE granularity = 'hour'"), 60);
        assert_eq!(count(&mut w, "SELECT sum(requests) FROM rollups WHERE granularity = 'minute'"), 3);
        assert_eq!(
            count(&mut w, "SELECT count(*) FROM usage_records WHERE started_at = '2026-12-03 12:13:20.250000'"),
            3,
            "the start time is stored as the control plane's text"
        );
        assert_eq!(count(&mut w, "SELECT count(*) FROM usage_records WHERE recorded_at > '2026-01-01'"), 3);
    }

    #[test]
    fn the_rollups_hold_each_bucket_and_the_errors_of_the_new_rows_only() {
        let dir = tempfile_dir();
        let mut w = writer(&format!("{dir}/ledger.db"));
        let late = r#"{"request_id":"t","seq":9,"key_id":"k","status":200,"outcome":"timeout","tokens":1,"started_at":1796303999.9996}"#;
        let failed =
            r#"{"request_id":"f","seq":8,"key_id":"j","status":502,"outcome":"x","tokens":2,"started_at":1796300000}"#;
        let batch = format!("[{},{late},{failed}]", event("a", 1, 10));
        assert_eq!(w.write(batch.as_bytes(), 0, &mut || {}).expect("write").inserted, 3);
        // A replay among new rows: only the new one is added.
        let again = format!("[{},{}]", event("a", 1, 10), event("b", 2, 20));
        assert_eq!(w.write(again.as_bytes(), 0, &mut || {}).expect("write").inserted, 1);
        // Half a millisecond before the hour rounds into it, as the stored text says.
        let minute = "SELECT requests * 1000000 + tokens * 1000 + errors FROM rollups WHERE granularity = 'minute'";
        assert_eq!(count(&mut w, &format!("{minute} AND bucket = 1796304000 AND key_id = 'k'")), 1_001_001);
        assert_eq!(count(&mut w, &format!("{minute} AND bucket = 1796299980 AND key_id = 'k'")), 2_030_000);
        assert_eq!(count(&mut w, &format!("{minute} AND bucket = 1796299980 AND key_id = 'j'")), 1_002_001);
        let hour = "SELECT sum(requests), sum(tokens), sum(errors) FROM rollups WHERE granularity = 'hour'";
        assert_eq!(count(&mut w, hour), 4);
        assert_eq!(
            count(&mut w, "SELECT count(*) FROM usage_records WHERE started_at = '2026-12-03 13:20:00.000000'"),
            1
        );
    }

    #[test]
    fn a_start_that_is_not_a_time_refuses_the_batch() {
        let dir = tempfile_dir();
        let mut w = writer(&format!("{dir}/ledger.db"));
        for bad in ["-5", "\"yesterday\"", "null", "1e300"] {
            let event = format!(
                r#"{{"request_id":"a","seq":1,"key_id":"k","status":200,"outcome":"complete","tokens":1,"started_at":{bad}}}"#
            );
            match w.write(format!("[{event}]").as_bytes(), 0, &mut || {}) {
                Err(WriteError::Refused(why)) => assert!(why.contains("event 0: `started_at`"), "{why}"),
                other => panic!("refused expected for {bad}, got {other:?}"),
            }
        }
        assert_eq!(count(&mut w, "SELECT count(*) FROM usage_records"), 0);
    }

    #[test]
    fn a_refused_value_rolls_the_whole_batch_back_and_names_the_event() {
        let dir = tempfile_dir();
        let mut w = writer(&format!("{dir}/ledger.db"));
        let batch = format!("[{},{}]", event("a", 1, 10), event("b", 2, -1));
        match w.write(batch.as_bytes(), 0, &mut || {}) {
            Err(WriteError::Refused(why)) => assert!(why.contains("event 1") && why.contains("CHECK"), "{why}"),
            other => panic!("refused expected, got {other:?}"),
        }
        assert_eq!(count(&mut w, "SELECT count(*) FROM usage_records"), 0);
        // The connection is usable after the rollback.
        let ok = w.write(format!("[{}]", event("a", 1, 10)).as_bytes(), 0, &mut || {}).expect("write");
        assert_eq!(ok.inserted, 1);
    }

    #[test]
    fn a_busy_database_is_a_database_error_not_a_refusal() {
        let dir = tempfile_dir();
        let path = format!("{dir}/ledger.db");
        let mut w = writer(&path);
        let mut other = Connection::open(Library::system().expect("lib"), &path).expect("open");
        other.exec("PRAGMA busy_timeout=0; BEGIN IMMEDIATE").expect("hold the write lock");
        let mut fast = writer(&path);
        fast.conn.exec("PRAGMA busy_timeout=0").expect("pragma");
        match fast.write(format!("[{}]", event("a", 1, 10)).as_bytes(), 0, &mut || {}) {
            Err(WriteError::Database(e)) => assert_eq!(e.code & 0xff, 5, "SQLITE_BUSY: {e}"),
            other => panic!("busy expected, got {other:?}"),
        }
        other.exec("ROLLBACK").expect("release");
        assert_eq!(w.write(format!("[{}]", event("a", 1, 10)).as_bytes(), 0, &mut || {}).expect("write").inserted, 1);
    }

    #[test]
    fn statements_of_the_wrong_shape_are_refused_at_open() {
        let dir = tempfile_dir();
        let lib = Library::system().expect("lib");
        let mut sql = statements();
        sql.insert = "INSERT INTO usage_records (request_id) VALUES (?)".into();
        let error =
            LedgerWriter::open(lib, &format!("{dir}/ledger.db"), &sql, fields(), &spec()).err().expect("refused");
        assert!(error.message.contains("takes 1 parameters, not the 9"), "{error}");
    }

    #[test]
    fn a_library_that_is_not_loaded_is_not_loaded_by_asking() {
        let error = Library::of_loaded("libsqlite-that-does-not-exist.so.9").err().expect("not loaded");
        assert!(error.contains("not loaded"), "{error}");
    }

    /// A fresh directory, removed with everything in it when dropped.
    struct TempDir(std::path::PathBuf);

    impl std::fmt::Display for TempDir {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}", self.0.display())
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn tempfile_dir() -> TempDir {
        let dir = std::env::temp_dir().join(format!("sluicegate-ledger-{}-{}", std::process::id(), fastrand::u64(..)));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}
