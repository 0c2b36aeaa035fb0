//! A `redis-server` that speaks only TLS, on a free loopback port, with a test CA made by the
//! test (`rcgen`): a server certificate for `127.0.0.1` and `localhost`, a client certificate for
//! `tls-auth-clients yes`, and a second CA that trusts nothing of this server.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::certs::{ca, leaf, write};
use crate::{free_port, require_program, required};
use rcgen::{ExtendedKeyUsagePurpose, Issuer};

/// A TLS-only `redis-server` of one test, with the files of its test CA in a temporary folder.
#[derive(Debug)]
pub struct RedisTls {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

/// Whether clients must show a certificate of the test CA: Redis's `tls-auth-clients`, or
/// PostgreSQL's `cert` authentication in `pg_hba.conf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// `tls-auth-clients no`; PostgreSQL: `trust` over TLS.
    No,
    /// `tls-auth-clients yes`: [`RedisTls::client_cert`] and [`RedisTls::client_key`];
    /// PostgreSQL: `cert` over TLS, [`PostgresTls::client_cert`](crate::PostgresTls::client_cert)
    /// (its common name is the user, `postgres`).
    Required,
}

impl RedisTls {
    /// Makes a test CA and the certificates, starts `redis-server` with only a TLS port on a free
    /// loopback port, and waits until it accepts TLS connections. `None` when `redis-server` is
    /// not installed (outside CI). Panics when this `redis-server` was built without TLS.
    pub fn start(auth: ClientAuth) -> Option<RedisTls> {
        if !require_program(
            "redis-server",
            "the tests of the Redis guard over TLS",
            "e.g. `apt-get install redis-server` or `brew install redis`",
            required(),
        ) {
            return None;
        }
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("cronguard-redis-tls-{port}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch dir for redis-server");

        let (ca_params, ca_key, ca_pem) = ca("cronguard test CA");
        let issuer = Issuer::new(ca_params, ca_key);
        let (server_pem, server_key) = leaf(
            &issuer,
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client_pem, client_key) = leaf(
            &issuer,
            &["cronguard-client"],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        let (_, _, other_ca_pem) = ca("another CA");
        write(&dir, "ca.pem", &ca_pem);
        write(&dir, "server.pem", &server_pem);
        write(&dir, "server.key", &server_key);
        write(&dir, "client.pem", &client_pem);
        write(&dir, "client.key", &client_key);
        write(&dir, "other-ca.pem", &other_ca_pem);

        let child = Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--tls-cert-file")
            .arg(dir.join("server.pem"))
            .arg("--tls-key-file")
            .arg(dir.join("server.key"))
            .arg("--tls-ca-cert-file")
            .arg(dir.join("ca.pem"))
            .args([
                "--tls-auth-clients",
                if auth == ClientAuth::Required {
                    "yes"
                } else {
                    "no"
                },
            ])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("redis-server starts");
        let mut server = RedisTls {
            port,
            dir,
            child: Some(child),
        };
        server.wait_ready();
        Some(server)
    }

    /// Waits until the port accepts connections; a server built without TLS exits at once
    /// instead, and this panics with what it said.
    fn wait_ready(&mut self) {
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    let mut said = String::new();
                    if let Some(mut err) = child.stderr.take() {
                        let _ = std::io::Read::read_to_string(&mut err, &mut said);
                    }
                    self.child = None;
                    panic!("redis-server with TLS exited ({status}); is it built with TLS? {said}");
                }
            }
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.port));
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "redis-server with TLS on port {} did not listen within 10 s",
            self.port
        );
    }

    /// `rediss://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}/", self.port)
    }

    /// The server's TLS port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The PEM file of the test CA that signed the server's and the client's certificates.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// The PEM file of a CA that signed nothing of this server.
    pub fn other_ca_file(&self) -> PathBuf {
        self.dir.join("other-ca.pem")
    }

    /// The PEM file of a client certificate of the test CA.
    pub fn client_cert(&self) -> PathBuf {
        self.dir.join("client.pem")
    }

    /// The PEM file of the client certificate's key.
    pub fn client_key(&self) -> PathBuf {
        self.dir.join("client.key")
    }
}

impl Drop for RedisTls {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
