//! Runnable examples of cronguard live in `examples/`; run one with `cargo run --example NAME`.
//! The HTTP example is the package `http-probes/` beside them, so that the others build without
//! an HTTP server.
