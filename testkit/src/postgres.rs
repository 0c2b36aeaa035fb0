//! A real PostgreSQL server in a temporary folder (`initdb`, then `postgres` on a free loopback
//! port), which a test can pause (SIGSTOP of every server process), resume, kill and restart. It
//! is always stopped by its process id (and those of the processes it started), never by port
//! or name. [`PostgresTls`] is one that accepts only TLS connections, with a test CA.

use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{ExtendedKeyUsagePurpose, Issuer};

use crate::certs::{ca, leaf, write};
use crate::{free_port, ClientAuth};

/// A PostgreSQL server of one test: trust authentication for user `postgres` on 127.0.0.1.
#[derive(Debug)]
pub struct PostgresServer {
    port: u16,
    dir: PathBuf,
    bin: PathBuf,
    child: Option<Child>,
    /// `-c name=value` settings beyond the defaults (TLS).
    settings: Vec<String>,
}

fn required() -> bool {
    std::env::var_os("CRONGUARD_TESTS_REQUIRE_POSTGRES").is_some() || crate::in_ci()
}

/// The folder of `initdb` and `postgres`: on the `PATH`, else Debian's
/// `/usr/lib/postgresql/<version>/bin` (the newest).
fn bin_dir() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("initdb").is_file() && dir.join("postgres").is_file() {
                // `/usr/local/bin/initdb` may be a link into the folder that holds `pg_isready`.
                let real = std::fs::canonicalize(dir.join("initdb"))
                    .ok()
                    .and_then(|p| p.parent().map(Path::to_path_buf))
                    .filter(|d| d.join("pg_isready").is_file());
                return Some(real.unwrap_or(dir));
            }
        }
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").is_file())
        .collect();
    versions.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    versions.pop()
}

/// `initdb` and `postgres` refuse to run as root: as root, they run as user `postgres`.
fn as_server_user(program: &Path) -> Command {
    if is_root() {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=postgres", "--regid=postgres", "--clear-groups"])
            .arg(program);
        cmd
    } else {
        Command::new(program)
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

fn postgres_owner() -> Option<(u32, u32)> {
    let id = |flag: &str| {
        Command::new("id")
            .args([flag, "postgres"])
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse::<u32>().ok())
    };
    Some((id("-u")?, id("-g")?))
}

impl PostgresServer {
    /// Makes a fresh cluster and starts it on a free loopback port; waits until it accepts
    /// connections. `None` when PostgreSQL is not installed (outside CI).
    pub fn start() -> Option<PostgresServer> {
        let mut server = Self::init()?;
        server.spawn();
        Some(server)
    }

    /// Makes a fresh cluster in a scratch folder of its own, not started.
    fn init() -> Option<PostgresServer> {
        let Some(bin) = bin_dir() else {
            crate::report_missing(
                "initdb",
                "the tests of the PostgreSQL guard",
                "e.g. `apt-get install postgresql` or `brew install postgresql`",
                required(),
            );
            return None;
        };
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("cronguard-pg-{port}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch dir for PostgreSQL");
        if is_root() {
            let (uid, gid) = postgres_owner()
                .expect("running as root, a `postgres` user is needed to run PostgreSQL");
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).expect("chown the scratch dir");
        }
        let status = as_server_user(&bin.join("initdb"))
            .arg("-D")
            .arg(dir.join("data"))
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("initdb runs");
        assert!(status.success(), "initdb failed in {}", dir.display());
        Some(PostgresServer {
            port,
            dir,
            bin,
            child: None,
            settings: Vec::new(),
        })
    }

    fn spawn(&mut self) {
        let child = as_server_user(&self.bin.join("postgres"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-p", &self.port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!("unix_socket_directories={}", self.dir.display()))
            .args(["-c", "fsync=off", "-c", "full_page_writes=off"])
            .args(["-c", "track_functions=all", "-c", "max_connections=200"])
            .args(self.settings.iter().flat_map(|s| ["-c", s.as_str()]))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("postgres starts");
        self.child = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&self) {
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "PostgreSQL on port {} did not accept connections within 30 s",
            self.port
        );
    }

    /// Whether the server accepts TCP connections.
    pub fn reachable(&self) -> bool {
        let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.port).into();
        TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id of the postmaster.
    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .map(Child::id)
            .expect("the server is running")
    }

    /// Signals the postmaster, then every process it started (each backend runs in a session
    /// of its own, so a process group does not reach them).
    fn signal_all(&self, sig: &str) {
        signal_tree(self.pid(), sig);
    }

    /// Freezes every server process (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&self) {
        self.signal_all("-STOP");
    }

    /// Thaws a paused server (SIGCONT).
    pub fn resume(&self) {
        self.signal_all("-CONT");
    }

    /// Kills every server process (SIGKILL). The data stays on disk: [`restart`](Self::restart)
    /// recovers it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal_tree(child.id(), "-KILL");
            signal_tree(child.id(), "-CONT");
            let _ = child.wait();
            // Backends die with the group; wait until the port is free again.
            let until = Instant::now() + Duration::from_secs(10);
            while self.reachable() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// Kills the server and starts it again on the same port and data (crash recovery).
    pub fn restart(&mut self) {
        self.kill();
        // A killed postmaster leaves its pid file and shared memory; postgres clears them.
        self.spawn();
    }
}

/// The processes whose parent is `pid`, from `/proc`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat"))
                .ok()
                .and_then(|stat| {
                    // `pid (comm) state ppid ...`: the command may hold spaces and parentheses.
                    let rest = &stat[stat.rfind(')')? + 1..];
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// Sends `sig` to `pid` and then to its children.
fn signal_tree(pid: u32, sig: &str) {
    let mut targets = vec![pid];
    targets.extend(children(pid));
    let mut cmd = Command::new("kill");
    cmd.arg(sig).arg("--");
    for target in &targets {
        cmd.arg(target.to_string());
    }
    let _ = cmd.stdout(Stdio::null()).stderr(Stdio::null()).status();
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A PostgreSQL server of one test that accepts only TLS connections on 127.0.0.1
/// (`hostnossl … reject` in `pg_hba.conf`), for user `postgres`: `trust` over TLS, or, with
/// [`ClientAuth::Required`], a client certificate of the test CA whose common name is
/// `postgres` (`cert`). Its certificate, of a test CA made at start (`rcgen`), names `localhost`
/// and `127.0.0.1`.
#[derive(Debug)]
pub struct PostgresTls {
    server: PostgresServer,
    tls: PathBuf,
}

impl PostgresTls {
    /// Makes the test CA and the certificates, a fresh cluster with `ssl = on`, and starts it on
    /// a free loopback port; waits until it accepts connections. `None` when PostgreSQL is not
    /// installed (outside CI).
    pub fn start(auth: ClientAuth) -> Option<PostgresTls> {
        let mut server = PostgresServer::init()?;
        let tls = server.dir.join("tls");
        std::fs::create_dir_all(&tls).expect("a folder for the test certificates");
        let (ca_params, ca_key, ca_pem) = ca("cronguard test CA");
        let issuer = Issuer::new(ca_params, ca_key);
        let (server_pem, server_key) = leaf(
            &issuer,
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        // `cert` authentication takes the common name as the user.
        let (client_pem, client_key) =
            leaf(&issuer, &["postgres"], ExtendedKeyUsagePurpose::ClientAuth);
        let (_, _, other_ca_pem) = ca("another CA");
        write(&tls, "ca.pem", &ca_pem);
        write(&tls, "server.pem", &server_pem);
        write(&tls, "server.key", &server_key);
        write(&tls, "client.pem", &client_pem);
        write(&tls, "client.key", &client_key);
        write(&tls, "other-ca.pem", &other_ca_pem);
        // The server refuses a key that others can read, or that is not its user's.
        std::fs::set_permissions(
            tls.join("server.key"),
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .expect("chmod the server key");
        if is_root() {
            let (uid, gid) = postgres_owner().expect("a `postgres` user to run PostgreSQL");
            for name in ["", "ca.pem", "server.pem", "server.key"] {
                std::os::unix::fs::chown(tls.join(name), Some(uid), Some(gid))
                    .expect("chown the server's certificate files");
            }
        }
        let method = match auth {
            ClientAuth::No => "trust",
            ClientAuth::Required => "cert",
        };
        std::fs::write(
            server.dir.join("data").join("pg_hba.conf"),
            format!(
                "local all all trust\n\
                 hostnossl all all 127.0.0.1/32 reject\n\
                 hostssl all all 127.0.0.1/32 {method}\n"
            ),
        )
        .expect("writes pg_hba.conf");
        server.settings = vec![
            "ssl=on".to_owned(),
            format!("ssl_cert_file={}", tls.join("server.pem").display()),
            format!("ssl_key_file={}", tls.join("server.key").display()),
        ];
        if auth == ClientAuth::Required {
            server
                .settings
                .push(format!("ssl_ca_file={}", tls.join("ca.pem").display()));
        }
        server.spawn();
        Some(PostgresTls { server, tls })
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres?sslmode=<sslmode>`.
    pub fn url(&self, sslmode: &str) -> String {
        format!("{}?sslmode={sslmode}", self.server.url())
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.server.port
    }

    /// The PEM file of the test CA that signed the server's and the client's certificates.
    pub fn ca_file(&self) -> PathBuf {
        self.tls.join("ca.pem")
    }

    /// The PEM file of a CA that signed nothing of this server.
    pub fn other_ca_file(&self) -> PathBuf {
        self.tls.join("other-ca.pem")
    }

    /// The PEM file of a client certificate of the test CA for user `postgres`.
    pub fn client_cert(&self) -> PathBuf {
        self.tls.join("client.pem")
    }

    /// The PEM file of the client certificate's key.
    pub fn client_key(&self) -> PathBuf {
        self.tls.join("client.key")
    }
}

/// A PgBouncer in **transaction** pooling mode in front of a [`PostgresServer`], on a free
/// loopback port: each transaction may run on another server connection, so anything that
/// depends on a session (named prepared statements, advisory locks, `SET`) breaks behind it.
#[derive(Debug)]
pub struct PgBouncer {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl PgBouncer {
    /// Starts `pgbouncer` for `server`'s `postgres` database (found in `/usr/sbin`, `/usr/bin` or
    /// `/usr/local/bin`). `None` when PgBouncer is not
    /// installed (outside CI).
    pub fn start(server: &PostgresServer) -> Option<PgBouncer> {
        let bin = [
            "/usr/sbin/pgbouncer",
            "/usr/bin/pgbouncer",
            "/usr/local/bin/pgbouncer",
        ]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file());
        let Some(bin) = bin else {
            crate::report_missing(
                "pgbouncer",
                "the test of the PostgreSQL guard behind PgBouncer",
                "e.g. `apt-get install pgbouncer` or `brew install pgbouncer`",
                required(),
            );
            return None;
        };
        let port = free_port();
        let dir = server.dir.join(format!("pgbouncer-{port}"));
        std::fs::create_dir_all(&dir).expect("a folder for pgbouncer");
        let config = format!(
            "[databases]\npostgres = host=127.0.0.1 port={pg} dbname=postgres user=postgres\n\n\
             [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
             auth_type = trust\nauth_file = {dir}/users.txt\npool_mode = transaction\n\
             max_client_conn = 200\ndefault_pool_size = 4\n\
             ignore_startup_parameters = extra_float_digits,options\nlogfile = {dir}/pgbouncer.log\n",
            pg = server.port,
            dir = dir.display(),
        );
        std::fs::write(dir.join("pgbouncer.ini"), config).expect("pgbouncer.ini");
        std::fs::write(dir.join("users.txt"), "\"postgres\" \"\"\n").expect("users.txt");
        if is_root() {
            let (uid, gid) = postgres_owner().expect("a `postgres` user to run pgbouncer");
            for path in [
                dir.clone(),
                dir.join("pgbouncer.ini"),
                dir.join("users.txt"),
            ] {
                std::os::unix::fs::chown(&path, Some(uid), Some(gid)).expect("chown");
            }
        }
        let child = as_server_user(&bin)
            .arg(dir.join("pgbouncer.ini"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("pgbouncer starts");
        let bouncer = PgBouncer {
            port,
            dir,
            child: Some(child),
        };
        let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port).into();
        let until = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(
                Instant::now() < until,
                "pgbouncer on port {port} did not listen within 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(bouncer)
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`, through the bouncer.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
