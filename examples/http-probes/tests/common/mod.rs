//! What the HTTP example's tests share: the example's router on a loopback port, a plain HTTP
//! `GET`, and a bounded wait for a condition.

pub use cronguard_testkit::eventually;
use std::net::{Ipv4Addr, SocketAddr};

use cronguard::Monitor;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Serves the example's router on a free loopback port.
pub async fn serve(monitor: Monitor, prometheus: PrometheusHandle) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("bound");
    let app = cronguard_example_http_probes::http::router(monitor, prometheus);
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// `GET path` over HTTP/1.1: the status code and the body.
pub async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("sends");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("reads");
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}
