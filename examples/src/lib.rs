//! Runnable examples of cronguard live in `examples/`; run one with `cargo run --example NAME`.
//!
//! This library holds the one piece of example code that tests exercise too: the HTTP endpoints
//! of the `http_probes` example.

pub mod http;
