//! One batch of usage events into SQLite in one transaction, without the interpreter: the rows
//! read from the batch's JSON (`rows.rs`) are bound straight to the control plane's own insert
//! statement, then its rollup statement runs over the rows just inserted.
//!
//! The SQL is the caller's (`control/usage/writer.py` owns the schema): an insert with one
//! parameter per field, in the fields' order; a query for the highest row id before the batch;
//! a rollup with that id as its one parameter. The writer only moves values.

use super::rows::{read_batch, Fields, Rows, Scalar};
use super::sqlite::{Connection, DbError, Library, Statement, Step};
use std::sync::Arc;

/// The caller's SQL.
#[derive(Debug, Clone)]
pub struct Statements {
    /// Run once on the new connection (PRAGMAs: WAL, busy timeout, synchronous).
    pub setup: Vec<String>,
    /// One parameter per field; inserts a row or ignores it (a replayed event).
    pub insert: String,
    /// One row, one integer: the highest row id before the batch's rows.
    pub high_water: String,
    /// One parameter, that id: adds the rows above it into the rollups.
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
    high_water: Statement,
    rollup: Statement,
    conn: Connection,
    fields: Fields,
}

impl LedgerWriter {
    pub fn open(lib: Arc<Library>, path: &str, sql: &Statements, fields: Fields) -> Result<Self, DbError> {
        let mut conn = Connection::open(lib, path)?;
        for statement in &sql.setup {
            conn.exec(statement)?;
        }
        let insert = conn.prepare(&sql.insert)?;
        expect_parameters(&insert, fields.len(), "the insert")?;
        let high_water = conn.prepare(&sql.high_water)?;
        expect_parameters(&high_water, 0, "the high-water query")?;
        let rollup = conn.prepare(&sql.rollup)?;
        expect_parameters(&rollup, 1, "the rollup")?;
        Ok(Self { insert, high_water, rollup, conn, fields })
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
        let before = match self.high_water.step() {
            Ok(Step::Row) => Ok(self.high_water.column_i64(0)),
            Ok(Step::Done) => Err(WriteError::Refused("the high-water query returned no row".into())),
            Err(e) => Err(e.into()),
        };
        self.high_water.reset();
        let before = before?;
        let width = self.fields.len();
        let mut inserted = 0u64;
        for index in 0..rows.count {
            if index > 0 && slice > 0 && index % slice == 0 {
                pause();
            }
            let result = bind_row(&mut self.insert, rows.row(index, width)).and_then(|()| self.insert.step());
            self.insert.reset();
            result.map_err(|e| refused_row(e, index))?;
            inserted += u64::try_from(self.conn.changes()).unwrap_or(0);
        }
        if inserted > 0 {
            let rolled = self.rollup.bind(1, &Scalar::Int(before)).and_then(|()| self.rollup.step());
            self.rollup.reset();
            rolled?;
        }
        Ok(inserted)
    }
}

fn bind_row(statement: &mut Statement, row: &[Scalar<'_>]) -> Result<(), DbError> {
    for (at, value) in row.iter().enumerate() {
        statement.bind(at + 1, value)?;
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

    const SCHEMA: &str =
        "CREATE TABLE IF NOT EXISTS usage_records (id INTEGER PRIMARY KEY, request_id TEXT NOT NULL UNIQUE, \
         seq INTEGER, tokens INTEGER NOT NULL CHECK (tokens >= 0), started_at TEXT, tags TEXT); \
         CREATE TABLE IF NOT EXISTS rollups (minute INTEGER PRIMARY KEY, requests INTEGER, tokens INTEGER);";

    fn statements() -> Statements {
        Statements {
            setup: vec!["PRAGMA journal_mode=WAL".into(), "PRAGMA busy_timeout=2000".into(), SCHEMA.into()],
            insert: "INSERT INTO usage_records (request_id, seq, tokens, started_at, tags) \
                     VALUES (?, ?, ?, strftime('%Y-%m-%d %H:%M:%f', ?, 'unixepoch'), ?) ON CONFLICT (request_id) DO NOTHING"
                .into(),
            high_water: "SELECT coalesce(max(id), 0) FROM usage_records".into(),
            rollup: "INSERT INTO rollups (minute, requests, tokens) \
                     SELECT CAST(strftime('%s', started_at) AS INTEGER) / 60 * 60, count(*), sum(tokens) \
                     FROM usage_records WHERE id > ? GROUP BY 1 \
                     ON CONFLICT (minute) DO UPDATE SET requests = requests + excluded.requests, tokens = tokens + excluded.tokens"
                .into(),
        }
    }

    fn fields() -> Fields {
        let names = ["request_id", "seq", "tokens", "started_at", "tags"].map(String::from).to_vec();
        Fields::new(names, vec![("tags".into(), Scalar::Null)]).expect("fields")
    }

    fn writer(path: &str) -> LedgerWriter {
        let lib = Library::system().expect("the system's libsqlite3.so.0 (Debian's libsqlite3-0)");
        LedgerWriter::open(lib, path, &statements(), fields()).expect("open")
    }

    fn count(w: &mut LedgerWriter, sql: &str) -> i64 {
        let mut s = w.conn.prepare(sql).expect("prepare");
        assert_eq!(s.step().expect("step"), Step::Row);
        s.column_i64(0)
    }

    fn event(id: &str, seq: i64, tokens: i64) -> String {
        format!(r#"{{"request_id":"{id}","seq":{seq},"tokens":{tokens},"started_at":1796300000.25}}"#)
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
        assert_eq!(count(&mut w, "SELECT sum(tokens) FROM rollups"), 60);
        assert_eq!(count(&mut w, "SELECT sum(requests) FROM rollups"), 3);
        assert_eq!(
            count(&mut w, "SELECT count(*) FROM usage_records WHERE started_at = '2026-12-03 12:13:20.250'"),
            3,
            "SQL functions in the insert see the bound values"
        );
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
        let error = LedgerWriter::open(lib, &format!("{dir}/ledger.db"), &sql, fields()).err().expect("refused");
        assert!(error.message.contains("takes 1 parameters, not the 5"), "{error}");
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
