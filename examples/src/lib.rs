//! Runnable examples of cronguard live in `examples/`; run one with `cargo run --example NAME`.
//!
//! This library holds the example code that tests exercise too: the HTTP endpoints of the
//! `http_probes` example, and the guard of the `custom_guard` example.

pub mod http;
pub mod memory_guard;
