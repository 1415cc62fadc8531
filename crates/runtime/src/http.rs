//! The daemons' small HTTP/1 endpoint (`/metrics`, `/status`, a few POSTs): one request per
//! connection, answered by the daemon's handler.

use std::future::Future;

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

/// Serves `handler(method, path)` on `listener` for as long as the daemon runs.
pub async fn serve<F, Fut>(listener: TcpListener, handler: F)
where
    F: Fn(String, String) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Response> + Send,
{
    loop {
        let (mut stream, _) = crate::limits::accept(&listener, "http").await;
        let handler = handler.clone();
        tokio::spawn(async move {
            let mut request = Vec::new();
            let mut chunk = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 8192 {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => request.extend_from_slice(&chunk[..n]),
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
