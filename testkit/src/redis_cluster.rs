//! A Redis Cluster of real `redis-server` processes on free loopback ports.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{free_port, require_program, required};

/// One node of a [`RedisCluster`].
#[derive(Debug)]
struct Node {
    port: u16,
    child: Option<Child>,
    paused: bool,
}

/// A Redis Cluster of one test: `redis-server` processes with `--cluster-enabled yes`, joined
/// by `redis-cli --cluster create`. Every process is killed on drop.
#[derive(Debug)]
pub struct RedisCluster {
    dir: PathBuf,
    nodes: Vec<Node>,
}

/// How long the cluster may take to form, fail over or answer.
const DEADLINE: Duration = Duration::from_secs(30);
/// Clusters started on fresh ports before a test gives up on forming one.
const START_ATTEMPTS: usize = 3;

impl RedisCluster {
    /// Starts `primaries * (1 + replicas_per_primary)` nodes and waits until every node says
    /// `cluster_state:ok` and every replica is in sync with its primary. `None` when
    /// `redis-server` or `redis-cli` is not installed (outside CI).
    pub fn start(primaries: usize, replicas_per_primary: usize) -> Option<RedisCluster> {
        for program in ["redis-server", "redis-cli"] {
            if !require_program(
                program,
                "the tests of the Redis guard on a Redis Cluster",
                "e.g. `apt-get install redis-server redis-tools` or `brew install redis`",
                required(),
            ) {
                return None;
            }
        }
        // A port found free can be taken by another test's process before a node binds it (or
        // its bus port, 10,000 above): such a cluster does not form, and a new one on other ports
        // is started.
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            match Self::try_start(primaries, replicas_per_primary) {
                Ok(cluster) => return Some(cluster),
                Err(why) => {
                    eprintln!("testkit: a Redis Cluster did not form, starting another: {why}");
                    failures.push(why);
                }
            }
        }
        panic!("no Redis Cluster formed in {START_ATTEMPTS} attempts: {failures:?}");
    }

    /// One attempt of [`start`](RedisCluster::start); its nodes are killed when it fails.
    fn try_start(primaries: usize, replicas_per_primary: usize) -> Result<RedisCluster, String> {
        let first = cluster_port(&[]);
        let dir = std::env::temp_dir().join(format!(
            "cronguard-redis-cluster-{first}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch dir for the cluster");
        let mut cluster = RedisCluster {
            dir,
            nodes: Vec::new(),
        };
        let count = primaries * (1 + replicas_per_primary);
        let mut ports = vec![first];
        while ports.len() < count {
            let port = cluster_port(&ports);
            ports.push(port);
        }
        for port in ports {
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--cluster-enabled", "yes"])
                .arg("--cluster-config-file")
                .arg(cluster.dir.join(format!("nodes-{port}.conf")))
                .args(["--cluster-node-timeout", "1000"])
                .args(["--save", "", "--appendonly", "no"])
                // A replica syncs at once instead of after the default 5 s.
                .args(["--repl-diskless-sync-delay", "0"])
                .arg("--dir")
                .arg(&cluster.dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server starts");
            cluster.nodes.push(Node {
                port,
                child: Some(child),
                paused: false,
            });
        }
        for node in &cluster.nodes {
            let answers = || cli(node.port, &["PING"]).is_some_and(|r| r.trim() == "PONG");
            if !holds_within(Duration::from_secs(10), answers) {
                return Err(format!("node {} did not answer PING", node.port));
            }
        }
        let addresses: Vec<String> = cluster
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let created = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args([
                "--cluster-replicas",
                &replicas_per_primary.to_string(),
                "--cluster-yes",
            ])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli runs");
        if !created.status.success() {
            let said = String::from_utf8_lossy(&created.stdout).to_string()
                + &String::from_utf8_lossy(&created.stderr);
            let tail: Vec<&str> = said.lines().rev().take(5).collect();
            return Err(format!(
                "redis-cli --cluster create failed ({}): {}",
                created.status,
                tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
            ));
        }
        cluster.wait_until_ok();
        let replicas = primaries * replicas_per_primary;
        wait_until("every replica is in sync", || {
            cluster
                .nodes
                .iter()
                .filter(|n| {
                    cli(n.port, &["INFO", "replication"])
                        .is_some_and(|i| i.contains("master_link_status:up"))
                })
                .count()
                == replicas
        });
        Ok(cluster)
    }

    /// `redis+cluster://127.0.0.1:<port>,...` with every node as a seed.
    pub fn url(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis+cluster://{}/", nodes.join(","))
    }

    /// The ports of every node.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// The process id of the node on `port`.
    pub fn pid(&self, port: u16) -> u32 {
        self.node(port)
            .child
            .as_ref()
            .map(Child::id)
            .expect("the node is running")
    }

    fn node(&self, port: u16) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.port == port)
            .expect("a node of this cluster")
    }

    fn node_mut(&mut self, port: u16) -> &mut Node {
        self.nodes
            .iter_mut()
            .find(|n| n.port == port)
            .expect("a node of this cluster")
    }

    /// A node that is running and not paused, to ask about the cluster.
    fn live_port(&self) -> u16 {
        self.nodes
            .iter()
            .find(|n| n.child.is_some() && !n.paused)
            .map(|n| n.port)
            .expect("a live node")
    }

    /// `redis-cli -p <port> <args>`'s output.
    pub fn cli(&self, port: u16, args: &[&str]) -> String {
        cli(port, args).unwrap_or_else(|| panic!("redis-cli -p {port} {args:?} failed"))
    }

    /// The slot of `key` (`CLUSTER KEYSLOT`).
    pub fn slot_of(&self, key: &str) -> u16 {
        self.cli(self.live_port(), &["CLUSTER", "KEYSLOT", key])
            .trim()
            .parse()
            .expect("a slot number")
    }

    /// The nodes as the live node sees them.
    fn topology(&self) -> Vec<Entry> {
        self.cli(self.live_port(), &["CLUSTER", "NODES"])
            .lines()
            .filter_map(Entry::parse)
            .collect()
    }

    /// The ports of the primaries that own slots.
    pub fn primaries(&self) -> Vec<u16> {
        let mut ports: Vec<u16> = self
            .topology()
            .into_iter()
            .filter(|e| e.primary && !e.failed && !e.slots.is_empty())
            .map(|e| e.port)
            .collect();
        ports.sort_unstable();
        ports
    }

    /// The port of the primary that owns `slot`.
    pub fn primary_of_slot(&self, slot: u16) -> Option<u16> {
        self.topology()
            .into_iter()
            .find(|e| e.primary && !e.failed && e.slots.iter().any(|r| r.contains(&slot)))
            .map(|e| e.port)
    }

    /// The port of the primary that owns `key`'s slot.
    pub fn primary_of(&self, key: &str) -> u16 {
        self.primary_of_slot(self.slot_of(key))
            .expect("a primary owns the slot")
    }

    /// The node id of the node on `port`.
    pub fn node_id(&self, port: u16) -> String {
        self.cli(port, &["CLUSTER", "MYID"]).trim().to_owned()
    }

    /// Kills the node on `port` (SIGKILL).
    pub fn kill(&mut self, port: u16) {
        let node = self.node_mut(port);
        if let Some(mut child) = node.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        node.paused = false;
    }

    /// Freezes the node on `port` (SIGSTOP): its connections stay open, nothing answers.
    pub fn pause(&mut self, port: u16) {
        signal(self.pid(port), "-STOP");
        self.node_mut(port).paused = true;
    }

    /// Thaws a paused node (SIGCONT).
    pub fn resume(&mut self, port: u16) {
        signal(self.pid(port), "-CONT");
        self.node_mut(port).paused = false;
    }

    /// Waits until another node owns `slot` (which the killed or paused primary on `old` owned)
    /// and the live nodes say `cluster_state:ok`; answers the new primary's port.
    pub fn wait_for_failover(&self, slot: u16, old: u16) -> u16 {
        let mut new = None;
        wait_until(
            &format!("a replica takes over slot {slot} from {old}"),
            || {
                new = self.primary_of_slot(slot).filter(|p| *p != old);
                new.is_some()
            },
        );
        self.wait_until_ok();
        new.expect("a new primary")
    }

    /// Waits until every running node says `cluster_state:ok`.
    pub fn wait_until_ok(&self) {
        for node in self.nodes.iter().filter(|n| n.child.is_some() && !n.paused) {
            wait_until(&format!("node {} says cluster_state:ok", node.port), || {
                cli(node.port, &["CLUSTER", "INFO"]).is_some_and(|i| i.contains("cluster_state:ok"))
            });
        }
    }

    /// Starts moving `slot` from the primary on `from` to the one on `to`
    /// (`CLUSTER SETSLOT ... IMPORTING` / `MIGRATING`); keys stay on `from` until
    /// [`migrate_keys`](Self::migrate_keys).
    pub fn begin_migration(&self, slot: u16, from: u16, to: u16) {
        let slot = slot.to_string();
        let (from_id, to_id) = (self.node_id(from), self.node_id(to));
        self.ok(to, &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &from_id]);
        self.ok(from, &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to_id]);
    }

    /// Moves every key of `slot` from `from` to `to` (`MIGRATE`).
    pub fn migrate_keys(&self, slot: u16, from: u16, to: u16) {
        let slot = slot.to_string();
        loop {
            let keys = self.cli(from, &["CLUSTER", "GETKEYSINSLOT", &slot, "100"]);
            let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
            if keys.is_empty() {
                return;
            }
            let port = to.to_string();
            let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
            args.extend(keys);
            self.ok(from, &args);
        }
    }

    /// Ends the move of `slot` to `to` (`CLUSTER SETSLOT ... NODE` on every primary).
    pub fn finish_migration(&self, slot: u16, from: u16, to: u16) {
        let slot = slot.to_string();
        let to_id = self.node_id(to);
        self.ok(to, &["CLUSTER", "SETSLOT", &slot, "NODE", &to_id]);
        self.ok(from, &["CLUSTER", "SETSLOT", &slot, "NODE", &to_id]);
        for port in self.primaries() {
            if port != to && port != from {
                let _ = cli(port, &["CLUSTER", "SETSLOT", &slot, "NODE", &to_id]);
            }
        }
    }

    /// Moves `slot` and its keys from the primary on `from` to the one on `to`.
    pub fn migrate_slot(&self, slot: u16, from: u16, to: u16) {
        self.begin_migration(slot, from, to);
        self.migrate_keys(slot, from, to);
        self.finish_migration(slot, from, to);
    }

    fn ok(&self, port: u16, args: &[&str]) {
        let reply = self.cli(port, args);
        assert!(
            reply.trim() == "OK",
            "redis-cli -p {port} {args:?} answered {reply}"
        );
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                // A paused server must be thawed to die cleanly.
                let _ = Command::new("kill")
                    .args(["-CONT", &child.id().to_string()])
                    .status();
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One line of `CLUSTER NODES`.
struct Entry {
    port: u16,
    primary: bool,
    failed: bool,
    slots: Vec<std::ops::RangeInclusive<u16>>,
}

impl Entry {
    /// `<id> <ip:port@cport> <flags> <primary> <ping> <pong> <epoch> <link> <slot>...`
    fn parse(line: &str) -> Option<Entry> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let address = fields.get(1)?;
        let port = address
            .split('@')
            .next()?
            .rsplit_once(':')?
            .1
            .parse()
            .ok()?;
        let flags = fields.get(2)?;
        let slots = fields
            .iter()
            .skip(8)
            .filter(|s| !s.starts_with('['))
            .filter_map(|s| match s.split_once('-') {
                Some((a, b)) => Some(a.parse().ok()?..=b.parse().ok()?),
                None => {
                    let n = s.parse().ok()?;
                    Some(n..=n)
                }
            })
            .collect();
        Some(Entry {
            port,
            primary: flags.contains("master"),
            failed: flags.contains("fail"),
            slots,
        })
    }
}

/// `redis-cli -p <port> <args>`'s output; `None` when it failed or took longer than 2 s (a
/// frozen node accepts the connection and never answers).
fn cli(port: u16, args: &[&str]) -> Option<String> {
    let mut child = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let output = child.wait_with_output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// A free loopback port for a cluster node: a node also listens on its port + 10,000 (the
/// cluster bus), so the port must be at most 55,535, its bus port free too, and neither may be
/// a port or a bus port of `taken`.
fn cluster_port(taken: &[u16]) -> u16 {
    loop {
        let port = free_port();
        let Some(bus) = port.checked_add(10_000) else {
            continue;
        };
        let clashes = taken.iter().any(|&t| {
            [t, t.saturating_add(10_000)]
                .iter()
                .any(|&u| u == port || u == bus)
        });
        let bus_free = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, bus)).is_ok();
        if port <= 55_535 && !clashes && bus_free {
            return port;
        }
    }
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill {sig} {pid} failed");
}

/// Polls `cond` every 50 ms until it holds, for at most [`DEADLINE`].
fn wait_until(what: &str, cond: impl FnMut() -> bool) {
    if !holds_within(DEADLINE, cond) {
        panic!("timed out after {DEADLINE:?} waiting until {what}");
    }
}

/// Polls `cond` every 50 ms until it holds (`true`), for at most `limit`.
fn holds_within(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}
