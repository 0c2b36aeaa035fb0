//! Runnable examples of cronguard live in `examples/`; run one with `cargo run --example NAME`.
