//! Runnable examples of cronguard live in `examples/`; run one with `cargo run --example NAME`.
//! The HTTP example is the package `http-probes/` beside them, so that the others build without
//! an HTTP server.
//!
//! This library holds the example code that tests exercise too: the guard of the `custom_guard`
//! example.

pub mod memory_guard;
