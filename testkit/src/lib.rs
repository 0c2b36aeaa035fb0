//! Test support for cronguard: a real `redis-server`, or a real PostgreSQL server, on a free
//! loopback port, which a test can pause (SIGSTOP), resume, kill and restart. It is always
//! stopped by its process id.
//!
//! When `redis-server` is missing, [`RedisServer::start`] returns `None` and says so on the
//! terminal, past the test harness's output capture, so a developer without Redis can run the
//! rest of the suite and still sees what it skipped; in CI (`CI` or
//! `CRONGUARD_TESTS_REQUIRE_REDIS` set) it panics instead, so a missing server never passes
//! silently. [`require_program`] does the same for any program a test needs.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod certs;
mod logs;
#[cfg(unix)]
mod postgres;
mod redis_cluster;
mod redis_sentinel;
mod redis_tls;
mod stall_proxy;
pub use logs::Logs;
#[cfg(unix)]
pub use postgres::{PgBouncer, PostgresServer, PostgresTls};
pub use redis_cluster::RedisCluster;
pub use redis_sentinel::RedisSentinel;
pub use redis_tls::{ClientAuth, RedisTls};
pub use stall_proxy::StallProxy;

/// A `redis-server` process of one test.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
    /// The port of the primary this server replicates.
    replica_of: Option<u16>,
}

pub(crate) fn required() -> bool {
    std::env::var_os("CRONGUARD_TESTS_REQUIRE_REDIS").is_some() || in_ci()
}

/// Whether this is a CI run (`CI` set to anything but empty, `false` or `0`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Whether `program` can be run (`program --version`). When it cannot: with `required` (CI) a
/// panic that names the package to install; otherwise `false`, after a `SKIPPED` line written
/// straight to the terminal's stderr — once per program and process — so that it shows in the
/// output of `cargo test` even though the harness captures what tests print.
pub fn require_program(program: &str, what: &str, install: &str, required: bool) -> bool {
    if Command::new(program).arg("--version").output().is_ok() {
        return true;
    }
    report_missing(program, what, install, required)
}

/// Says that `program` is missing: with `required` (CI) a panic that names the package to
/// install; otherwise a `SKIPPED` line on the terminal's stderr, once per program and process.
/// Always `false`.
pub(crate) fn report_missing(program: &str, what: &str, install: &str, required: bool) -> bool {
    use std::collections::BTreeSet;
    use std::sync::Mutex;
    static ANNOUNCED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let msg = format!("`{program}` is not installed: {what} cannot run; install it ({install})");
    if required {
        panic!("{msg} (required in CI)");
    }
    let first = ANNOUNCED
        .lock()
        .map(|mut seen| seen.insert(program.to_owned()))
        .unwrap_or(true);
    if first {
        // Not `eprintln!`: the test harness captures that, and the notice would only show for a
        // failing test.
        let _ = writeln!(std::io::stderr(), "\nSKIPPED: {msg}");
    }
    false
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("the loopback interface has a free port")
}

impl RedisServer {
    /// Starts `redis-server` on a free loopback port with no persistence, and waits until it
    /// answers `PING`. `None` when `redis-server` is not installed (outside CI).
    pub fn start() -> Option<RedisServer> {
        Self::start_with(None)
    }

    /// Starts a `redis-server` that replicates `primary` (`--replicaof`), and waits until it is in
    /// sync. `None` when `redis-server` is not installed (outside CI).
    pub fn start_replica_of(primary: &RedisServer) -> Option<RedisServer> {
        let replica = Self::start_with(Some(primary.port))?;
        let until = Instant::now() + Duration::from_secs(10);
        while !replica.in_sync() || !primary.replicated_a_write() {
            assert!(
                Instant::now() < until,
                "the replica on port {} did not sync with its primary within 10 s",
                replica.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(replica)
    }

    /// Whether this replica's link to its primary is up (`master_link_status:up`).
    pub fn in_sync(&self) -> bool {
        self.info_replication().contains("master_link_status:up")
    }

    /// Whether a write to this server reaches a replica within 100 ms (`SET`, then `WAIT 1 100`
    /// on the same connection).
    fn replicated_a_write(&self) -> bool {
        let Ok(mut child) = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
        else {
            return false;
        };
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(b"SET cronguard-testkit:replicated 1\nWAIT 1 100\n");
        }
        child
            .wait_with_output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).lines().nth(1) == Some("1"))
    }

    /// `INFO replication`, empty when the server does not answer.
    pub fn info_replication(&self) -> String {
        Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["INFO", "replication"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    fn start_with(replica_of: Option<u16>) -> Option<RedisServer> {
        if !require_program(
            "redis-server",
            "the tests of the Redis guard",
            "e.g. `apt-get install redis-server` or `brew install redis`",
            required(),
        ) {
            return None;
        }
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("cronguard-redis-{port}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch dir for redis-server");
        let mut server = RedisServer {
            port,
            dir,
            child: None,
            replica_of,
        };
        server.spawn();
        Some(server)
    }

    fn spawn(&mut self) {
        let replica_of = self
            .replica_of
            .map(|port| {
                vec![
                    "--replicaof".to_owned(),
                    "127.0.0.1".to_owned(),
                    port.to_string(),
                ]
            })
            .unwrap_or_default();
        let child = Command::new("redis-server")
            .args(&replica_of)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "yes",
                // A replica syncs at once instead of after the default 5 s.
                "--repl-diskless-sync-delay",
                "0",
            ])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&self) {
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if self.ping() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "redis-server on port {} did not answer PING within 10 s",
            self.port
        );
    }

    /// Whether the server answers `PING` within 200 ms.
    pub fn ping(&self) -> bool {
        let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.port).into();
        let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
        let mut buf = [0u8; 7];
        s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .map(Child::id)
            .expect("the server is running")
    }

    fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {sig} {} failed", self.pid());
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws a paused server (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// Kills the server (SIGKILL); its data is lost.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a fresh, empty server on the same port (after [`kill`](Self::kill), or killing it).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if self.child.is_some() {
            // A paused server must be thawed to die cleanly.
            let _ = Command::new("kill")
                .args(["-CONT", &self.pid().to_string()])
                .status();
        }
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Polls `check` every 50 ms until it holds, for what gives no signal to wait on (an HTTP
/// page, a browser); panics after `timeout`.
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let until = Instant::now() + timeout;
    while Instant::now() < until {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out after {timeout:?} waiting for {what}");
}
