//! sluicegate's bench tools: the simulated model server (`sluicegate sim`) and the load generator
//! (`sluicegate bench`). They are the yardstick the gateway is measured and its ledger checked
//! against, so they share no code with it: their own accept loop, request reading, token estimate
//! and stream reading. The Python extension exposes them; nothing on the gateway's path uses them.

#![forbid(unsafe_code)]

pub mod cli;
pub mod dist;
pub mod endpoint;
pub mod loadgen;
pub mod server;
pub mod sim;
