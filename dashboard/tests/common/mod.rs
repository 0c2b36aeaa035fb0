//! What the dashboard's tests share: a scheduler whose jobs misfire on purpose, the dashboard
//! mounted under `/ops` on a loopback listener, and a small HTTP/1.1 client.

#![allow(dead_code)] // each test file uses part of it

pub use cronguard_testkit::eventually;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use cronguard::{Cronguard, Job, Overlap, Schedule};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An error that is markup, to prove what jobs report is escaped.
pub const NASTY: &str = r#"<img src=x onerror="alert(1)">&'q'"#;
/// A job that fails with [`NASTY`].
pub const FAILING: &str = "failing";
/// A job whose first run blocks past the next fires' grace: they wait in its queue and misfire.
pub const SLOW: &str = "reports::slow";
/// A job that runs quickly, for pause and run now.
pub const TICK: &str = "tick";

/// Starts a scheduler with [`FAILING`], [`SLOW`] and [`TICK`].
pub async fn scheduler() -> Cronguard {
    let first = Arc::new(AtomicBool::new(true));
    let slow = Job::new(
        SLOW,
        Schedule::every(Duration::from_millis(300)).expect("valid"),
    )
    .overlap(Overlap::Queue)
    .misfire_grace(Duration::from_millis(100))
    .run(move |_| {
        let first = Arc::clone(&first);
        async move {
            // Fires of 600 ms and 900 ms wait for this run and cannot start within 100 ms.
            if first.swap(false, Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(1200)).await;
            }
        }
    });
    let tick = Job::new(
        TICK,
        Schedule::every(Duration::from_millis(200)).expect("valid"),
    )
    .run(|_| async {});
    let failing = Job::new(
        FAILING,
        Schedule::every(Duration::from_millis(300)).expect("valid"),
    )
    .run(|_| async { Err::<(), String>(NASTY.to_owned()) });
    cronguard::builder()
        .registered_jobs(false)
        .job(slow)
        .job(tick)
        .job(failing)
        .start()
        .await
        .expect("starts")
}

/// Serves `app` on a free loopback port.
pub async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A response: status code, head (status line and headers) and body.
pub struct Reply {
    pub code: u16,
    pub head: String,
    pub body: String,
}

impl Reply {
    /// The value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// One HTTP/1.1 request; `form` is sent as `application/x-www-form-urlencoded`.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    form: Option<&str>,
) -> Reply {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (name, value) in headers {
        req.push_str(&format!("{name}: {value}\r\n"));
    }
    let body = form.unwrap_or("");
    if form.is_some() {
        req.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(req.as_bytes()).await.expect("sends");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("reads");
    let (head, body) = response
        .split_once("\r\n\r\n")
        .map(|(h, b)| (h.to_owned(), b.to_owned()))
        .unwrap_or((response.clone(), String::new()));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    Reply { code, head, body }
}

/// Percent-encodes a form value.
pub fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
