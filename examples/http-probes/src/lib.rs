//! The HTTP endpoints of the `http_probes` example (`cargo run --example http_probes`), a library
//! so that its tests exercise them too.

pub mod http;
