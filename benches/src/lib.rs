//! Benchmarks of cronguard; see the `benches/` targets of this package.
#![forbid(unsafe_code)]
