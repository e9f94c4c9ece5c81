//! The usage ledger's SQLite writer: a batch of usage events, as the core hands it out, stored
//! by the core itself in the control plane's SQLite database (its schema and SQL are the control
//! plane's). With SQLite the ledger runs in the gateway's process, on the CPU the request path
//! uses: binding each row's values through the interpreter and parsing the batch into Python
//! objects first cost about as much as SQLite's own work (bench/README.md).
//!
//! - `rows.rs`: a batch's JSON read into rows of column values, borrowed from the text.
//! - `sqlite.rs`: SQLite through the library the process already loaded (never a second copy).
//! - `timestamps.rs`: times in the text form the control plane stores, as SQLite formats them.
//! - `rollup.rs`: the new rows' rollups, summed as they are inserted.
//! - `writer.rs`: one batch, one transaction: insert, then the rollups of the new rows.

pub mod rollup;
pub mod rows;
pub mod sqlite;
pub mod timestamps;
pub mod writer;

pub use rollup::RollupSpec;
pub use rows::{Fields, Scalar};
pub use sqlite::{DbError, Library};
pub use writer::{LedgerWriter, Statements, Stored, WriteError};
