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
