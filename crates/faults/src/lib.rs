//! Faults for real processes, beside SIGKILL and SIGSTOP: a TCP proxy ([`LinkProxy`]) in front
//! of a server that passes the bytes of every connection through it, or pauses them (held,
//! in order, until resumed: a link stalled past a lease), delays them, or cuts every connection
//! (both ends see the link drop); and a device that fails on demand ([`FaultyDevice`], in
//! `device`: nbdkit's `error` and `delay` filters, mounted by nbdfuse).

mod device;

pub use device::FaultyDevice;

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

/// What the proxy does with the bytes it is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// Forwards them at once.
    Pass,
    /// Holds them (neither direction moves) until the link passes again.
    Paused,
    /// Forwards each read's bytes after this long.
    Delayed(Duration),
}

struct State {
    target: SocketAddr,
    link: Mutex<Link>,
    changed: Condvar,
    /// Streams of the live connections (both sides), for `cut`.
    streams: Mutex<Vec<TcpStream>>,
    stopping: AtomicBool,
    connections: AtomicU64,
    bytes: AtomicU64,
    cuts: AtomicU64,
}

/// A TCP proxy on a loopback port in front of `target`.
pub struct LinkProxy {
    addr: SocketAddr,
    state: Arc<State>,
}

impl LinkProxy {
    /// Listens on a free loopback port, forwarding every connection to `target`.
    pub fn start(target: SocketAddr) -> io::Result<LinkProxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            target,
            link: Mutex::new(Link::Pass),
            changed: Condvar::new(),
            streams: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
            connections: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            cuts: AtomicU64::new(0),
        });
        let s = state.clone();
        thread::Builder::new()
            .name("link-proxy".into())
            .spawn(move || accept(listener, s))?;
        Ok(LinkProxy { addr, state })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn set(&self, link: Link) {
        *self.state.link.lock().expect("link") = link;
        self.state.changed.notify_all();
    }

    pub fn link(&self) -> Link {
        *self.state.link.lock().expect("link")
    }

    /// Closes every connection through the proxy (new ones are accepted).
    pub fn cut(&self) {
        let streams = std::mem::take(&mut *self.state.streams.lock().expect("streams"));
        for s in streams {
            let _ = s.shutdown(Shutdown::Both);
        }
        self.state.cuts.fetch_add(1, Ordering::Relaxed);
        self.state.changed.notify_all();
    }

    /// Pauses the link for `d` from another thread, then lets it pass.
    pub fn pause_for(&self, d: Duration) -> thread::JoinHandle<()> {
        self.set(Link::Paused);
        let state = self.state.clone();
        thread::spawn(move || {
            thread::sleep(d);
            *state.link.lock().expect("link") = Link::Pass;
            state.changed.notify_all();
        })
    }

    /// Connections accepted, bytes passed on (counted as they are written), cuts.
    pub fn figures(&self) -> (u64, u64, u64) {
        (
            self.state.connections.load(Ordering::Relaxed),
            self.state.bytes.load(Ordering::Relaxed),
            self.state.cuts.load(Ordering::Relaxed),
        )
    }
}

impl Drop for LinkProxy {
    fn drop(&mut self) {
        self.state.stopping.store(true, Ordering::SeqCst);
        self.set(Link::Pass);
        self.cut();
        // Wakes the accept loop.
        let _ = TcpStream::connect(self.addr);
    }
}

fn accept(listener: TcpListener, state: Arc<State>) {
    for client in listener.incoming() {
        if state.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        let Ok(server) = TcpStream::connect(state.target) else {
            // The server is down: so is the link.
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        state.connections.fetch_add(1, Ordering::Relaxed);
        let clones = (
            client.try_clone(),
            server.try_clone(),
            client.try_clone(),
            server.try_clone(),
        );
        let (Ok(c2), Ok(s2), Ok(c3), Ok(s3)) = clones else {
            continue;
        };
        state.streams.lock().expect("streams").extend([c3, s3]);
        for (from, to) in [(client, server), (s2, c2)] {
            let st = state.clone();
            let _ = thread::Builder::new()
                .name("link-pump".into())
                .spawn(move || pump(from, to, st));
        }
    }
}

/// Copies `from` to `to` as the link allows, until either side closes.
fn pump(mut from: TcpStream, mut to: TcpStream, state: Arc<State>) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        // What was read waits while the link is paused (what is not read waits in the
        // kernel's buffers, then in the sender's).
        let delay = {
            let mut link = state.link.lock().expect("link");
            while *link == Link::Paused && !state.stopping.load(Ordering::SeqCst) {
                link = state.changed.wait(link).expect("link");
            }
            match *link {
                Link::Delayed(d) => Some(d),
                _ => None,
            }
        };
        if let Some(d) = delay {
            thread::sleep(d);
        }
        state.bytes.fetch_add(n as u64, Ordering::Relaxed);
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// An echo server; returns its address.
    fn echo() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        thread::spawn(move || {
            for s in l.incoming().flatten() {
                thread::spawn(move || {
                    let mut r = s.try_clone().unwrap();
                    let mut w = s;
                    let _ = io::copy(&mut r, &mut w);
                });
            }
        });
        addr
    }

    fn round_trip(s: &mut TcpStream, msg: &[u8]) -> io::Result<Vec<u8>> {
        s.write_all(msg)?;
        let mut back = vec![0u8; msg.len()];
        s.read_exact(&mut back)?;
        Ok(back)
    }

    #[test]
    fn passes_pauses_delays_and_cuts() {
        let proxy = LinkProxy::start(echo()).unwrap();
        let mut s = TcpStream::connect(proxy.addr()).unwrap();
        assert_eq!(round_trip(&mut s, b"hello").unwrap(), b"hello");

        // Paused: nothing comes back until the link passes again, then all of it, in order.
        let resume = proxy.pause_for(Duration::from_millis(400));
        let started = Instant::now();
        assert_eq!(round_trip(&mut s, b"held").unwrap(), b"held");
        assert!(
            started.elapsed() >= Duration::from_millis(350),
            "{:?}",
            started.elapsed()
        );
        resume.join().unwrap();

        proxy.set(Link::Delayed(Duration::from_millis(100)));
        let started = Instant::now();
        assert_eq!(round_trip(&mut s, b"slow").unwrap(), b"slow");
        assert!(started.elapsed() >= Duration::from_millis(190));
        proxy.set(Link::Pass);

        // Cut: the connection drops; a new one works.
        proxy.cut();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert!(round_trip(&mut s, b"gone").is_err());
        let mut s = TcpStream::connect(proxy.addr()).unwrap();
        assert_eq!(round_trip(&mut s, b"again").unwrap(), b"again");
        let (connections, bytes, cuts) = proxy.figures();
        assert_eq!((connections, cuts), (2, 1));
        assert!(bytes >= 2 * (5 + 4 + 4 + 5) as u64);
    }
}
