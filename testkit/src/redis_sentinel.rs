//! A Redis Sentinel deployment of one test: a primary, one replica (`--replicaof`) and three
//! `redis-server --sentinel` processes that monitor the primary as `mymaster`, all on free
//! loopback ports, with the sentinels' configuration files in a temporary folder. A test can
//! kill or freeze (SIGSTOP) the primary and wait for the sentinels to promote the replica. Every
//! process is stopped by its process id when the value is dropped.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{free_port, require_program, required};

/// The name the sentinels monitor the primary under.
pub const MASTER_NAME: &str = "mymaster";

/// A primary, a replica and three sentinels (see the module documentation).
#[derive(Debug)]
pub struct RedisSentinel {
    dir: PathBuf,
    /// The data nodes by port: the first is the primary at start.
    nodes: Vec<(u16, Option<Child>)>,
    sentinels: Vec<(u16, Option<Child>)>,
    /// The port of the primary the sentinels named last ([`wait_for_new_primary`]).
    ///
    /// [`wait_for_new_primary`]: RedisSentinel::wait_for_new_primary
    primary: u16,
}

/// A reply of a Redis server, as far as these tests read them.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Text(String),
    Nil,
    Int(i64),
    Error(String),
    Array(Vec<Reply>),
}

impl Reply {
    fn text(&self) -> Option<&str> {
        match self {
            Reply::Text(s) => Some(s),
            _ => None,
        }
    }
}

fn read_reply(reader: &mut impl BufRead) -> Option<Reply> {
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let line = line.trim_end_matches(['\r', '\n']);
    let (kind, rest) = line.split_at_checked(1)?;
    Some(match kind {
        "+" => Reply::Text(rest.to_owned()),
        "-" => Reply::Error(rest.to_owned()),
        ":" => Reply::Int(rest.parse().ok()?),
        "$" => {
            let len: i64 = rest.parse().ok()?;
            if len < 0 {
                return Some(Reply::Nil);
            }
            let mut buf = vec![0u8; usize::try_from(len).ok()? + 2];
            std::io::Read::read_exact(reader, &mut buf).ok()?;
            buf.truncate(buf.len() - 2);
            Reply::Text(String::from_utf8_lossy(&buf).into_owned())
        }
        "*" => {
            let len: i64 = rest.parse().ok()?;
            if len < 0 {
                return Some(Reply::Nil);
            }
            let mut items = Vec::new();
            for _ in 0..len {
                items.push(read_reply(reader)?);
            }
            Reply::Array(items)
        }
        _ => return None,
    })
}

/// Sends `args` as one command to 127.0.0.1:`port` and reads the reply, within 500 ms.
fn command(port: u16, args: &[&str]) -> Option<Reply> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(300)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    stream
        .set_write_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    let mut out = format!("*{}\r\n", args.len());
    for arg in args {
        out.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    stream.write_all(out.as_bytes()).ok()?;
    read_reply(&mut BufReader::new(stream))
}

/// Whether the node on `port` answers `ROLE` with `master`.
fn is_master(port: u16) -> bool {
    matches!(command(port, &["ROLE"]), Some(Reply::Array(items)) if items.first().and_then(Reply::text) == Some("master"))
}

fn wait_until(what: &str, within: Duration, mut ready: impl FnMut() -> bool) {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if ready() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{what} within {within:?}");
}

fn stop(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        // A frozen process must be thawed to die cleanly.
        let _ = Command::new("kill")
            .args(["-CONT", &c.id().to_string()])
            .status();
        let _ = c.kill();
        let _ = c.wait();
    }
}

impl RedisSentinel {
    /// Starts the primary, the replica and the sentinels, and waits until the replica is in sync
    /// and every sentinel knows the replica and the two other sentinels (a failover needs both),
    /// which takes a few seconds. `None` when `redis-server` is not installed (outside CI).
    pub fn start() -> Option<RedisSentinel> {
        if !require_program(
            "redis-server",
            "the tests of the Redis guard through Sentinel",
            "e.g. `apt-get install redis-server` or `brew install redis`",
            required(),
        ) {
            return None;
        }
        let primary = free_port();
        let dir = std::env::temp_dir().join(format!(
            "cronguard-redis-sentinel-{primary}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("a scratch dir for the sentinels");
        let mut this = RedisSentinel {
            dir,
            nodes: Vec::new(),
            sentinels: Vec::new(),
            primary,
        };
        let replica = free_port();
        this.spawn_node(primary, None);
        this.spawn_node(replica, Some(primary));
        wait_until(
            "the replica is in sync",
            Duration::from_secs(10),
            || matches!(command(replica, &["INFO", "replication"]), Some(Reply::Text(info)) if info.contains("master_link_status:up")),
        );
        for _ in 0..3 {
            let port = free_port();
            let conf = this.dir.join(format!("sentinel-{port}.conf"));
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                     sentinel resolve-hostnames no\nsentinel announce-ip 127.0.0.1\n\
                     sentinel monitor {MASTER_NAME} 127.0.0.1 {primary} 2\n\
                     sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                     sentinel failover-timeout {MASTER_NAME} 3000\n",
                    dir = this.dir.display()
                ),
            )
            .expect("writes a sentinel configuration");
            let child = Command::new("redis-server")
                .arg(&conf)
                .arg("--sentinel")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server --sentinel starts");
            this.sentinels.push((port, Some(child)));
        }
        let ports: Vec<u16> = this.sentinels.iter().map(|(p, _)| *p).collect();
        wait_until(
            "every sentinel knows the replica and the other sentinels",
            Duration::from_secs(20),
            || {
                ports.iter().all(|&port| {
                    let count = |what: &str| match command(port, &["SENTINEL", what, MASTER_NAME]) {
                        Some(Reply::Array(items)) => items.len(),
                        _ => 0,
                    };
                    count("replicas") >= 1 && count("sentinels") >= 2
                })
            },
        );
        Some(this)
    }

    fn spawn_node(&mut self, port: u16, replica_of: Option<u16>) {
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(primary) = replica_of {
            cmd.args(["--replicaof", "127.0.0.1", &primary.to_string()]);
        }
        let child = cmd.spawn().expect("redis-server starts");
        self.nodes.push((port, Some(child)));
        wait_until(
            &format!("redis-server on port {port} answers"),
            Duration::from_secs(10),
            || command(port, &["PING"]).is_some(),
        );
    }

    /// `redis+sentinel://127.0.0.1:<s1>,127.0.0.1:<s2>,127.0.0.1:<s3>/mymaster`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|(port, _)| format!("127.0.0.1:{port}"))
            .collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", hosts.join(","))
    }

    /// The ports of the sentinels.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|(p, _)| *p).collect()
    }

    /// The port of the current primary (as of the start or the last
    /// [`wait_for_new_primary`](Self::wait_for_new_primary)).
    pub fn primary_port(&self) -> u16 {
        self.primary
    }

    fn primary_child(&self) -> Option<&Child> {
        self.nodes
            .iter()
            .find(|(port, _)| *port == self.primary)
            .and_then(|(_, child)| child.as_ref())
    }

    /// The process id of the current primary.
    pub fn primary_pid(&self) -> u32 {
        self.primary_child()
            .map(Child::id)
            .expect("the primary runs")
    }

    fn signal_primary(&self, sig: &str) {
        let pid = self.primary_pid().to_string();
        let status = Command::new("kill")
            .args([sig, &pid])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {sig} {pid} failed");
    }

    /// Kills the current primary (SIGKILL).
    pub fn kill_primary(&mut self) {
        let primary = self.primary;
        if let Some((_, child)) = self.nodes.iter_mut().find(|(port, _)| *port == primary) {
            stop(child);
        }
    }

    /// Freezes the current primary (SIGSTOP): connections stay open, nothing answers.
    pub fn pause_primary(&self) {
        self.signal_primary("-STOP");
    }

    /// Thaws the node that was the primary when [`pause_primary`](Self::pause_primary) froze it
    /// (SIGCONT); after a failover the sentinels make it a replica of the new primary.
    pub fn resume(&self, port: u16) {
        if let Some(child) = self
            .nodes
            .iter()
            .find(|(p, _)| *p == port)
            .and_then(|(_, child)| child.as_ref())
        {
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
        }
    }

    /// Waits until the node on `port` says it is a replica (`ROLE`); `false` at `deadline`.
    pub fn wait_for_replica(&self, port: u16, deadline: Instant) -> bool {
        while Instant::now() < deadline {
            if matches!(command(port, &["ROLE"]), Some(Reply::Array(items)) if items.first().and_then(Reply::text) == Some("slave"))
            {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// The primary the sentinels name now, when one of them answers.
    pub fn named_primary(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|(port, _)| {
            match command(*port, &["SENTINEL", "get-master-addr-by-name", MASTER_NAME])? {
                Reply::Array(items) => items.get(1)?.text()?.parse().ok(),
                _ => None,
            }
        })
    }

    /// Waits until the sentinels name another primary than the current one and that node says it
    /// is a master; returns its port (and makes it the current primary), or `None` at `deadline`.
    pub fn wait_for_new_primary(&mut self, deadline: Instant) -> Option<u16> {
        let old = self.primary;
        while Instant::now() < deadline {
            if let Some(port) = self.named_primary().filter(|p| *p != old) {
                if is_master(port) {
                    self.primary = port;
                    return Some(port);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        for (_, child) in self.sentinels.iter_mut().chain(self.nodes.iter_mut()) {
            stop(child);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
