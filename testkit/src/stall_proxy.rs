//! A TCP proxy on a free loopback port in front of a real server, which a test can stall: while
//! stalled, what clients send is held (not lost) and reaches the server once the proxy flows
//! again. A request sent during a stall therefore gets no answer in time, and takes effect late —
//! a lost reply, made on purpose.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddrV4, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread;

/// The proxy; it stops accepting when dropped (open connections end with their clients).
#[derive(Debug)]
pub struct StallProxy {
    port: u16,
    gate: Arc<Gate>,
}

#[derive(Debug, Default)]
struct Gate {
    stalled: Mutex<bool>,
    changed: Condvar,
}

impl Gate {
    /// Returns once the proxy flows.
    fn wait_open(&self) {
        let mut stalled = self.stalled.lock().unwrap_or_else(PoisonError::into_inner);
        while *stalled {
            stalled = self
                .changed
                .wait(stalled)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn set(&self, stalled: bool) {
        *self.stalled.lock().unwrap_or_else(PoisonError::into_inner) = stalled;
        self.changed.notify_all();
    }
}

impl StallProxy {
    /// Forwards a free loopback port to `127.0.0.1:target`.
    pub fn start(target: u16) -> StallProxy {
        let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))
            .expect("the loopback interface has a free port");
        let port = listener.local_addr().expect("a bound address").port();
        let gate = Arc::new(Gate::default());
        let accept_gate = Arc::clone(&gate);
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect((Ipv4Addr::LOCALHOST, target)) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (Ok(client_r), Ok(server_w)) = (client.try_clone(), server.try_clone()) else {
                    continue;
                };
                let gate = Arc::clone(&accept_gate);
                thread::spawn(move || copy(client_r, server_w, Some(&gate)));
                thread::spawn(move || copy(server, client, None));
            }
        });
        StallProxy { port, gate }
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Holds everything clients send from now on, until [`StallProxy::flow`].
    pub fn stall(&self) {
        self.gate.set(true);
    }

    /// Delivers what was held, and everything after it.
    pub fn flow(&self) {
        self.gate.set(false);
    }
}

impl Drop for StallProxy {
    fn drop(&mut self) {
        self.flow();
    }
}

/// Copies `from` to `to` until either side closes; with a gate, each chunk waits for it to open.
fn copy(mut from: TcpStream, mut to: TcpStream, gate: Option<&Gate>) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some(gate) = gate {
            gate.wait_open();
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
