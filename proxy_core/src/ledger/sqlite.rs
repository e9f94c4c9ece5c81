//! SQLite, reached through the copy of the library the host process already loaded.
//!
//! The control plane's Python opens the same database file through its `sqlite3` module. Two
//! copies of SQLite in one process break its locking: POSIX advisory locks belong to the
//! process, and each copy keeps its own list of them, so closing a file in one copy drops the
//! locks the other holds. So the core links no SQLite of its own: it looks the functions up
//! (`dlsym`) in the library Python's `_sqlite3` module uses (given that module's path, opened
//! with `RTLD_NOLOAD`: never a second load), and gives up when they are not there (a Python
//! built with SQLite linked in statically and its symbols hidden); the caller then keeps its own
//! path. Tests that run without Python load the system's `libsqlite3.so.0`.
//!
//! This file is the crate's one SQLite `unsafe`: raw calls behind `Connection` and `Statement`,
//! whose methods are safe to call in any order (text is bound as `SQLITE_TRANSIENT`, copied by
//! SQLite; statements are finalized before their connection is closed, and `sqlite3_close_v2`
//! waits for any left).
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use super::rows::Scalar;

const SQLITE_OK: c_int = 0;
const SQLITE_ROW: c_int = 100;
const SQLITE_DONE: c_int = 101;
const SQLITE_OPEN_READWRITE: c_int = 0x2;
const SQLITE_OPEN_CREATE: c_int = 0x4;
const SQLITE_OPEN_FULLMUTEX: c_int = 0x0001_0000;
/// `SQLITE_TRANSIENT`: SQLite copies the bound text before the call returns.
const SQLITE_TRANSIENT: isize = -1;

type Db = c_void;
type Stmt = c_void;

/// The functions used, looked up once: the table's type and its lookup from one list.
macro_rules! sqlite_functions {
    ($($field:ident = $symbol:literal: fn($($arg:ty),*) -> $ret:ty;)*) => {
        struct Fns {
            $($field: unsafe extern "C" fn($($arg),*) -> $ret,)*
        }

        impl Fns {
            fn resolve(lookup: impl Fn(&str) -> Result<*mut c_void, String>) -> Result<Self, String> {
                Ok(Self {
                    // SAFETY: each symbol is SQLite's C function of that name, whose signature
                    // is the field's type (sqlite3.h, stable since 3.7).
                    $($field: unsafe {
                        std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) -> $ret>(lookup($symbol)?)
                    },)*
                })
            }
        }
    };
}

sqlite_functions! {
    libversion_number = "sqlite3_libversion_number": fn() -> c_int;
    threadsafe = "sqlite3_threadsafe": fn() -> c_int;
    open_v2 = "sqlite3_open_v2": fn(*const c_char, *mut *mut Db, c_int, *const c_char) -> c_int;
    close_v2 = "sqlite3_close_v2": fn(*mut Db) -> c_int;
    exec = "sqlite3_exec": fn(*mut Db, *const c_char, *const c_void, *mut c_void, *mut *mut c_char) -> c_int;
    prepare_v2 = "sqlite3_prepare_v2": fn(*mut Db, *const c_char, c_int, *mut *mut Stmt, *mut *const c_char) -> c_int;
    finalize = "sqlite3_finalize": fn(*mut Stmt) -> c_int;
    reset = "sqlite3_reset": fn(*mut Stmt) -> c_int;
    step = "sqlite3_step": fn(*mut Stmt) -> c_int;
    bind_parameter_count = "sqlite3_bind_parameter_count": fn(*mut Stmt) -> c_int;
    bind_null = "sqlite3_bind_null": fn(*mut Stmt, c_int) -> c_int;
    bind_int64 = "sqlite3_bind_int64": fn(*mut Stmt, c_int, i64) -> c_int;
    bind_double = "sqlite3_bind_double": fn(*mut Stmt, c_int, f64) -> c_int;
    bind_text = "sqlite3_bind_text": fn(*mut Stmt, c_int, *const c_char, c_int, isize) -> c_int;
    column_int64 = "sqlite3_column_int64": fn(*mut Stmt, c_int) -> i64;
    column_text = "sqlite3_column_text": fn(*mut Stmt, c_int) -> *const u8;
    column_bytes = "sqlite3_column_bytes": fn(*mut Stmt, c_int) -> c_int;
    changes = "sqlite3_changes": fn(*mut Db) -> c_int;
    errmsg = "sqlite3_errmsg": fn(*mut Db) -> *const c_char;
    extended_errcode = "sqlite3_extended_errcode": fn(*mut Db) -> c_int;
}

/// The SQLite library of this process.
pub struct Library {
    fns: Fns,
}

impl Library {
    /// The SQLite that the already loaded shared object `module` uses (itself or one of its
    /// dependencies). Never loads anything: `module` must be loaded already.
    pub fn of_loaded(module: &str) -> Result<Arc<Self>, String> {
        Self::open(module, libc::RTLD_NOW | libc::RTLD_NOLOAD)
    }

    /// The system's `libsqlite3.so.0`, loaded if it is not yet (for a process without Python).
    pub fn system() -> Result<Arc<Self>, String> {
        Self::open("libsqlite3.so.0", libc::RTLD_NOW)
    }

    fn open(name: &str, flags: c_int) -> Result<Arc<Self>, String> {
        let cname = CString::new(name).map_err(|_| format!("{name:?} holds a NUL byte"))?;
        // SAFETY: a valid C string; with RTLD_NOLOAD nothing new runs, and `libsqlite3` has no
        // initializers with effects beyond its own state. The handle is never closed.
        let handle = unsafe { libc::dlopen(cname.as_ptr(), flags) };
        if handle.is_null() {
            return Err(format!("{name} is not loaded in this process ({})", dl_error()));
        }
        let lookup = |symbol: &str| -> Result<*mut c_void, String> {
            let csym = CString::new(symbol).map_err(|_| format!("{symbol:?} holds a NUL byte"))?;
            // SAFETY: a live handle and a valid C string.
            let found = unsafe { libc::dlsym(handle, csym.as_ptr()) };
            if found.is_null() {
                Err(format!("{name} exports no {symbol} (SQLite linked in without its symbols?)"))
            } else {
                Ok(found)
            }
        };
        let fns = Fns::resolve(lookup)?;
        let library = Self { fns };
        // SAFETY: no arguments; reads compile-time constants of the library.
        if unsafe { (library.fns.threadsafe)() } == 0 {
            return Err(format!("{name}'s SQLite is built single-threaded"));
        }
        Ok(Arc::new(library))
    }

    /// `SQLITE_VERSION_NUMBER` of the library: 3040001 for 3.40.1.
    pub fn version(&self) -> i32 {
        // SAFETY: no arguments.
        unsafe { (self.fns.libversion_number)() }
    }
}

fn dl_error() -> String {
    // SAFETY: dlerror returns null or a C string valid until the next dl call on this thread.
    let message = unsafe { libc::dlerror() };
    if message.is_null() {
        return "no reason given".into();
    }
    // SAFETY: non-null, NUL-terminated (above).
    unsafe { CStr::from_ptr(message) }.to_string_lossy().into_owned()
}

/// An error SQLite reported: its extended result code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbError {
    pub code: i32,
    pub message: String,
}

impl DbError {
    /// The database refused the values (a constraint, a type, a size): the same values will be
    /// refused again, unlike a busy or failing database.
    pub fn refused_values(&self) -> bool {
        // SQLITE_TOOBIG, SQLITE_CONSTRAINT, SQLITE_MISMATCH, SQLITE_RANGE.
        matches!(self.code & 0xff, 18 | 19 | 20 | 25)
    }
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (SQLite code {})", self.message, self.code)
    }
}

impl std::error::Error for DbError {}

/// The last error of the connection `db` (live).
fn last_error(lib: &Library, db: NonNull<Db>) -> DbError {
    // SAFETY: a live connection; errmsg's text is copied before any other call on it.
    unsafe {
        let code = (lib.fns.extended_errcode)(db.as_ptr());
        let text = (lib.fns.errmsg)(db.as_ptr());
        let message = if text.is_null() { String::new() } else { CStr::from_ptr(text).to_string_lossy().into_owned() };
        DbError { code, message }
    }
}

/// One open database connection.
pub struct Connection {
    lib: Arc<Library>,
    db: NonNull<Db>,
}

// SAFETY: the library is threadsafe (checked at load) and the connection is opened with
// SQLITE_OPEN_FULLMUTEX, so it may move between threads; `&mut self` on every call that uses it
// keeps one caller at a time anyway. (Without that mutex a `Statement`, `Send` on its own,
// could run on one thread while its connection runs on another.)
unsafe impl Send for Connection {}

impl Connection {
    pub fn open(lib: Arc<Library>, path: &str) -> Result<Self, DbError> {
        let cpath =
            CString::new(path).map_err(|_| DbError { code: 21, message: "the path holds a NUL byte".into() })?;
        let mut db: *mut Db = ptr::null_mut();
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
        // SAFETY: valid C string and out pointer; a null VFS name picks the default.
        let rc = unsafe { (lib.fns.open_v2)(cpath.as_ptr(), &mut db, flags, ptr::null()) };
        let Some(db) = NonNull::new(db) else {
            return Err(DbError { code: rc, message: "SQLite could not allocate a connection".into() });
        };
        let conn = Self { lib, db };
        if rc != SQLITE_OK {
            return Err(conn.error());
        }
        Ok(conn)
    }

    fn error(&self) -> DbError {
        last_error(&self.lib, self.db)
    }

    fn check(&self, rc: c_int) -> Result<(), DbError> {
        if rc == SQLITE_OK {
            Ok(())
        } else {
            Err(self.error())
        }
    }

    /// Runs `sql` (one or more statements without parameters), discarding any rows.
    pub fn exec(&mut self, sql: &str) -> Result<(), DbError> {
        let csql = CString::new(sql).map_err(|_| DbError { code: 21, message: "the SQL holds a NUL byte".into() })?;
        // SAFETY: live connection, valid C string, no callback.
        let rc = unsafe {
            (self.lib.fns.exec)(self.db.as_ptr(), csql.as_ptr(), ptr::null(), ptr::null_mut(), ptr::null_mut())
        };
        self.check(rc)
    }

    pub fn prepare(&mut self, sql: &str) -> Result<Statement, DbError> {
        let len =
            c_int::try_from(sql.len()).map_err(|_| DbError { code: 18, message: "the SQL is too long".into() })?;
        let mut stmt: *mut Stmt = ptr::null_mut();
        // SAFETY: live connection; `sql` is read for `len` bytes (no NUL needed with a length).
        let rc = unsafe {
            (self.lib.fns.prepare_v2)(self.db.as_ptr(), sql.as_ptr().cast(), len, &mut stmt, ptr::null_mut())
        };
        self.check(rc)?;
        let stmt =
            NonNull::new(stmt).ok_or_else(|| DbError { code: 21, message: format!("no statement in {sql:?}") })?;
        // SAFETY: a live statement.
        let params = unsafe { (self.lib.fns.bind_parameter_count)(stmt.as_ptr()) };
        Ok(Statement { lib: self.lib.clone(), db: self.db, stmt, params })
    }

    /// Rows the last INSERT, UPDATE or DELETE changed.
    pub fn changes(&self) -> i64 {
        // SAFETY: a live connection.
        i64::from(unsafe { (self.lib.fns.changes)(self.db.as_ptr()) })
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // SAFETY: a live connection, closed once; close_v2 defers the close until statements
        // still open are finalized.
        unsafe { (self.lib.fns.close_v2)(self.db.as_ptr()) };
    }
}

/// A prepared statement of a `Connection` (it must not outlive it: the writer owning both drops
/// its statements first; `sqlite3_close_v2` makes the order safe either way).
pub struct Statement {
    lib: Arc<Library>,
    db: NonNull<Db>,
    stmt: NonNull<Stmt>,
    params: c_int,
}

// SAFETY: as `Connection`.
unsafe impl Send for Statement {}

/// What one step gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    Row,
    Done,
}

impl Statement {
    fn error(&self) -> DbError {
        last_error(&self.lib, self.db)
    }

    pub fn parameters(&self) -> usize {
        usize::try_from(self.params).unwrap_or(0)
    }

    /// Binds `value` to the 1-based parameter `index`.
    pub fn bind(&mut self, index: usize, value: &Scalar<'_>) -> Result<(), DbError> {
        let at = c_int::try_from(index).map_err(|_| DbError { code: 25, message: "parameter index".into() })?;
        let s = self.stmt.as_ptr();
        let f = &self.lib.fns;
        // SAFETY: a live statement; text is read for its length and copied (TRANSIENT).
        let rc = unsafe {
            match value {
                Scalar::Null => (f.bind_null)(s, at),
                Scalar::Int(v) => (f.bind_int64)(s, at, *v),
                Scalar::Float(v) => (f.bind_double)(s, at, *v),
                Scalar::Text(text) => match c_int::try_from(text.len()) {
                    Ok(len) => (f.bind_text)(s, at, text.as_ptr().cast(), len, SQLITE_TRANSIENT),
                    Err(_) => 18,
                },
            }
        };
        if rc == SQLITE_OK {
            Ok(())
        } else {
            Err(self.error())
        }
    }

    pub fn step(&mut self) -> Result<Step, DbError> {
        // SAFETY: a live statement.
        match unsafe { (self.lib.fns.step)(self.stmt.as_ptr()) } {
            SQLITE_ROW => Ok(Step::Row),
            SQLITE_DONE => Ok(Step::Done),
            _ => Err(self.error()),
        }
    }

    /// The integer in column `col` of the current row.
    pub fn column_i64(&self, col: usize) -> i64 {
        let col = c_int::try_from(col).unwrap_or(c_int::MAX);
        // SAFETY: a live statement; an out-of-range column reads as 0.
        unsafe { (self.lib.fns.column_int64)(self.stmt.as_ptr(), col) }
    }

    /// The text in column `col` of the current row (lossy where it is not UTF-8).
    pub fn column_text(&self, col: usize) -> String {
        let col = c_int::try_from(col).unwrap_or(c_int::MAX);
        // SAFETY: a live statement; the text (null for NULL) and its length are read before
        // any other call on the statement.
        unsafe {
            let text = (self.lib.fns.column_text)(self.stmt.as_ptr(), col);
            let len = usize::try_from((self.lib.fns.column_bytes)(self.stmt.as_ptr(), col)).unwrap_or(0);
            if text.is_null() {
                return String::new();
            }
            String::from_utf8_lossy(std::slice::from_raw_parts(text, len)).into_owned()
        }
    }

    /// Ready to run again (bindings kept; the next run rebinds them all).
    pub fn reset(&mut self) {
        // SAFETY: a live statement. Its return repeats the last step's error, reported there.
        unsafe { (self.lib.fns.reset)(self.stmt.as_ptr()) };
    }
}

impl Drop for Statement {
    fn drop(&mut self) {
        // SAFETY: a live statement, finalized once.
        unsafe { (self.lib.fns.finalize)(self.stmt.as_ptr()) };
    }
}
