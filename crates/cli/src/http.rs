//! A minimal HTTP client for a volume server's metrics address (`/metrics`, `/status`, and
//! the cache's control endpoints).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

/// `GET path` from a volume server's metrics address.
pub fn http_get(addr: SocketAddr, path: &str) -> Result<String> {
    http_request(addr, "GET", path)
}

/// `METHOD path` to a volume server's metrics address; the body of a 200 answer.
pub fn http_request(addr: SocketAddr, method: &str, path: &str) -> Result<String> {
    let mut stream =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).with_context(|| {
            format!("cannot reach {addr} (is `volume serve --metrics {addr}` running?)")
        })?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("{addr}: malformed HTTP response"))?;
    if !head.starts_with("HTTP/1.1 200") {
        let status = head.lines().next().unwrap_or("no status line");
        let body = body.trim();
        if body.is_empty() {
            bail!("{addr}{path}: {status}");
        }
        bail!("{body} ({addr}: {status})");
    }
    Ok(body.to_string())
}
