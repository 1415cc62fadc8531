//! The daemons' small HTTP/1 endpoint (`/metrics`, `/status`, a few POSTs): one request per
//! connection, answered by the daemon's handler; and the blocking client the command line and
//! the harnesses use to reach it ([`http_get`], [`http_request`]).

use std::future::Future;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub struct Response {
    pub status: &'static str,
    pub kind: &'static str,
    pub body: String,
}

impl Response {
    pub fn ok(kind: &'static str, body: String) -> Response {
        Response {
            status: "200 OK",
            kind,
            body,
        }
    }

    pub fn text(status: &'static str, body: impl Into<String>) -> Response {
        Response {
            status,
            kind: "text/plain",
            body: body.into(),
        }
    }

    /// The daemon is stopping (its event loop no longer answers).
    pub fn stopping() -> Response {
        Response::text("503 Service Unavailable", "stopping\n")
    }
}

pub const JSON: &str = "application/json";
pub const PROMETHEUS: &str = "text/plain; version=0.0.4";

/// HTTP connections open at once (control and metrics: few clients).
pub const HTTP_CONNECTIONS: usize = 64;
/// Time a client has to send its request's head.
pub const HTTP_HEAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves `handler(method, path)` on `listener` for as long as the daemon runs.
pub async fn serve<F, Fut>(listener: TcpListener, handler: F)
where
    F: Fn(String, String) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Response> + Send,
{
    // Few connections at once, each with its request's head within the time limit; when all
    // are taken, a new one takes the slot of the oldest still sending its head.
    let admission = crate::limits::Admission::new(crate::limits::Limits {
        connection_bytes: 64 << 10,
        connection_requests: 1,
        total_bytes: 64 * (64 << 10),
        connections: HTTP_CONNECTIONS,
    });
    let mut refused = 0;
    loop {
        let (mut stream, _, mut budget) =
            crate::limits::accept_admitted(&listener, &admission, "http", &mut refused).await;
        let handler = handler.clone();
        tokio::spawn(async move {
            let mut request = Vec::new();
            let head = budget.handshake(HTTP_HEAD_TIMEOUT, async {
                let mut chunk = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 8192 {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return false,
                        Ok(n) => request.extend_from_slice(&chunk[..n]),
                    }
                }
                true
            });
            match head.await {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => {
                    tracing::debug!(error = %e, "http connection closed");
                    return;
                }
            }
            let line = String::from_utf8_lossy(&request);
            let mut words = line.split_whitespace();
            let method = words.next().unwrap_or("").to_string();
            let path = words.next().unwrap_or("").to_string();
            let r = handler(method, path).await;
            let head = format!(
                "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                r.status,
                r.kind,
                r.body.len()
            );
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(r.body.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}

/// Serves `/metrics` and `/status` on `addr` for a daemon whose event loop answers a report
/// request: `request(json, reply)` makes the event that asks it. Returns the bound address.
pub async fn serve_reports<E: Send + 'static>(
    addr: &str,
    events: tokio::sync::mpsc::Sender<E>,
    request: fn(bool, tokio::sync::oneshot::Sender<String>) -> E,
) -> anyhow::Result<std::net::SocketAddr> {
    use anyhow::Context;
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr} for /metrics"))?;
    let local = listener.local_addr()?;
    tokio::spawn(serve(listener, move |_method: String, path: String| {
        let events = events.clone();
        async move {
            let json = match path.as_str() {
                "/status" => true,
                "/metrics" => false,
                _ => return Response::text("404 Not Found", "try /metrics or /status\n"),
            };
            let (reply, answer) = tokio::sync::oneshot::channel();
            let _ = events.send(request(json, reply)).await;
            match answer.await {
                Ok(body) => Response::ok(if json { JSON } else { PROMETHEUS }, body),
                Err(_) => Response::stopping(),
            }
        }
    }));
    Ok(local)
}

/// Appends one Prometheus gauge.
pub fn gauge(out: &mut String, name: &str, help: &str, value: impl std::fmt::Display) {
    out.push_str(&format!(
        "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n"
    ));
}

/// `GET path` from a daemon's HTTP address.
pub fn http_get(addr: SocketAddr, path: &str) -> Result<String> {
    http_request(addr, "GET", path)
}

/// `METHOD path` to a daemon's HTTP address; the body of a 200 answer.
pub fn http_request(addr: SocketAddr, method: &str, path: &str) -> Result<String> {
    let mut stream =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).with_context(|| {
            format!("cannot reach {addr} (is the daemon running with its HTTP endpoint there?)")
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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// More silent connections than the endpoint has slots (a scan, a flood of half-open
    /// sockets) do not keep a client out: it takes the slot of the oldest, at once.
    #[tokio::test]
    async fn silent_connections_never_keep_a_client_out() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve(listener, |_m: String, _p: String| async {
            Response::ok(JSON, "{}".into())
        }));
        let mut silent = Vec::new();
        for _ in 0..HTTP_CONNECTIONS + 6 {
            silent.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let started = std::time::Instant::now();
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /status HTTP/1.1\r\n\r\n").await.unwrap();
        let mut answer = String::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(5),
            s.read_to_string(&mut answer),
        )
        .await
        .expect("answered")
        .unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "waited {:?}",
            started.elapsed()
        );
        // The oldest silent one gave its slot up: closed.
        let mut byte = [0u8; 1];
        let first =
            tokio::time::timeout(std::time::Duration::from_secs(5), silent[0].read(&mut byte))
                .await
                .expect("closed, not left open");
        assert!(matches!(first, Ok(0) | Err(_)));
    }
}
