//! The daemons' small HTTP/1 endpoint (`/metrics`, `/status`, a few POSTs): one request per
//! connection, answered by the daemon's handler; and the blocking client the command line and
//! the harnesses use to reach it ([`http_get`], [`http_request`]).
//!
//! With a [`ControlToken`], a request must carry `Authorization: Bearer TOKEN` unless it is a
//! `GET` from a loopback address (reading `/metrics` and `/status` on the machine itself);
//! [`admit`] decides.

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

/// The shortest control token accepted (bytes): 128 bits of hex.
pub const TOKEN_BYTES_MIN: usize = 32;

/// A daemon's control token: a shared secret clients present as `Authorization: Bearer …`.
#[derive(Clone)]
pub struct ControlToken(std::sync::Arc<str>);

impl std::fmt::Debug for ControlToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ControlToken(…)")
    }
}

impl ControlToken {
    /// A token from its text: one line (surrounding white space ignored) of at least
    /// [`TOKEN_BYTES_MIN`] visible ASCII characters, none of them white space.
    pub fn parse(text: &str) -> Result<ControlToken, String> {
        let t = text.trim();
        if t.lines().count() > 1 {
            return Err("a control token is one line".into());
        }
        if t.len() < TOKEN_BYTES_MIN {
            return Err(format!(
                "a control token has at least {TOKEN_BYTES_MIN} characters (this one {}); e.g. `openssl rand -hex 32`",
                t.len()
            ));
        }
        if !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("a control token is visible ASCII without spaces".into());
        }
        Ok(ControlToken(t.into()))
    }

    /// Reads a token file ([`ControlToken::parse`]).
    pub fn read(path: &std::path::Path) -> Result<ControlToken> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the control token {}", path.display()))?;
        ControlToken::parse(&text).map_err(|e| anyhow!("{}: {e}", path.display()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is the token, in time that does not depend on where they differ.
    fn matches(&self, presented: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), presented.as_bytes());
        let mut diff = (a.len() != b.len()) as u8;
        for (i, x) in a.iter().enumerate() {
            diff |= x ^ b.get(i).copied().unwrap_or(!x);
        }
        diff == 0
    }
}

/// Whether a request may reach the handler: with no token every request may (the daemon
/// listens on loopback then); with one, a `GET` from a loopback peer may, anything else must
/// carry the token (`authorization`: the `Authorization` header's value).
pub fn admit(
    token: Option<&ControlToken>,
    method: &str,
    peer: std::net::IpAddr,
    authorization: Option<&str>,
) -> Result<(), Response> {
    let Some(token) = token else {
        return Ok(());
    };
    if method == "GET" && peer.is_loopback() {
        return Ok(());
    }
    match authorization.and_then(|v| v.strip_prefix("Bearer ")) {
        None => Err(Response::text(
            "401 Unauthorized",
            "this endpoint needs the daemon's control token: Authorization: Bearer TOKEN\n",
        )),
        Some(presented) if token.matches(presented.trim()) => Ok(()),
        Some(_) => Err(Response::text("403 Forbidden", "wrong control token\n")),
    }
}

/// The value of header `name` (case-insensitive) in a request's head.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.split("\r\n").skip(1).find_map(|line| {
        let (k, v) = line.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Serves `handler(method, path)` on `listener` for as long as the daemon runs; with a
/// `token`, requests are admitted as [`admit`] says.
pub async fn serve<F, Fut>(listener: TcpListener, token: Option<ControlToken>, handler: F)
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
        let (mut stream, peer, mut budget) =
            crate::limits::accept_admitted(&listener, &admission, "http", &mut refused).await;
        let handler = handler.clone();
        let token = token.clone();
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
            let authorization = header(&line, "authorization");
            let r = match admit(token.as_ref(), &method, peer.ip(), authorization) {
                Ok(()) => handler(method, path).await,
                Err(refused) => {
                    tracing::warn!(%peer, %method, %path, status = refused.status, "http request refused");
                    refused
                }
            };
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
    tokio::spawn(serve(
        listener,
        None,
        move |_method: String, path: String| {
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
        },
    ));
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

/// The environment variable naming the file of the control token that the client commands
/// (`pool create-volume`, `pool add-array`…) present.
pub const TOKEN_FILE_ENV: &str = "CORDILLERA_CONTROL_TOKEN_FILE";

/// `METHOD path` to a daemon's HTTP address; the body of a 200 answer. The control token in
/// the file `CORDILLERA_CONTROL_TOKEN_FILE` names, if set, goes with it.
pub fn http_request(addr: SocketAddr, method: &str, path: &str) -> Result<String> {
    let token = match std::env::var_os(TOKEN_FILE_ENV) {
        Some(path) if !path.is_empty() => Some(ControlToken::read(std::path::Path::new(&path))?),
        _ => None,
    };
    http_request_with(addr, method, path, token.as_ref())
}

/// [`http_request`] presenting a control token.
pub fn http_request_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&ControlToken>,
) -> Result<String> {
    let authorization = token.map_or(String::new(), |t| {
        format!("Authorization: Bearer {}\r\n", t.as_str())
    });
    let mut stream =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).with_context(|| {
            format!("cannot reach {addr} (is the daemon running with its HTTP endpoint there?)")
        })?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{authorization}Content-Length: 0\r\nConnection: close\r\n\r\n"
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
        tokio::spawn(serve(listener, None, |_m: String, _p: String| async {
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

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn tokens_are_long_single_lines_of_visible_ascii() {
        assert!(ControlToken::parse(&format!("  {TOKEN}\n")).is_ok());
        assert!(ControlToken::parse("short")
            .unwrap_err()
            .contains("at least 32"));
        assert!(
            ControlToken::parse(&format!("{TOKEN} {TOKEN}")).is_err(),
            "a space"
        );
        assert!(
            ControlToken::parse(&format!("{TOKEN}\n{TOKEN}")).is_err(),
            "two lines"
        );
        let t = ControlToken::parse(TOKEN).unwrap();
        assert!(t.matches(TOKEN));
        assert!(!t.matches(&TOKEN[..31]), "a prefix");
        assert!(!t.matches(&format!("{TOKEN}0")), "longer");
        assert!(!format!("{t:?}").contains(TOKEN), "Debug hides the token");
    }

    #[test]
    fn with_a_token_only_loopback_reads_go_without_it() {
        let t = ControlToken::parse(TOKEN).unwrap();
        let local: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        let remote: std::net::IpAddr = "10.0.0.7".parse().unwrap();
        let bearer = format!("Bearer {TOKEN}");
        assert!(admit(None, "POST", remote, None).is_ok(), "no token: open");
        assert!(admit(Some(&t), "GET", local, None).is_ok());
        let status = |r: Result<(), Response>| r.err().map(|e| e.status);
        assert_eq!(
            status(admit(Some(&t), "GET", remote, None)),
            Some("401 Unauthorized")
        );
        assert_eq!(
            status(admit(Some(&t), "POST", local, None)),
            Some("401 Unauthorized")
        );
        let wrong = format!("Bearer {}", TOKEN.replace('0', "1"));
        assert_eq!(
            status(admit(Some(&t), "POST", local, Some(&wrong))),
            Some("403 Forbidden")
        );
        assert!(admit(Some(&t), "POST", remote, Some(&bearer)).is_ok());
        assert!(admit(Some(&t), "GET", remote, Some(&bearer)).is_ok());
    }

    /// Over a socket: a POST without the token is refused before the handler runs; with it,
    /// answered; the client sends it with `http_request_with`.
    #[test]
    fn a_post_without_the_token_never_reaches_the_handler() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let calls = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let token = ControlToken::parse(TOKEN).unwrap();
        let counted = calls.clone();
        runtime.spawn(serve(
            listener,
            Some(token.clone()),
            move |_m: String, _p: String| {
                let counted = counted.clone();
                async move {
                    counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Response::ok(JSON, "{}".into())
                }
            },
        ));
        let e = http_request(addr, "POST", "/gear").unwrap_err();
        assert!(e.to_string().contains("401"), "{e}");
        let wrong = ControlToken::parse(&TOKEN.replace('a', "b")).unwrap();
        let e = http_request_with(addr, "POST", "/gear", Some(&wrong)).unwrap_err();
        assert!(e.to_string().contains("403"), "{e}");
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
        assert_eq!(
            http_request_with(addr, "POST", "/gear", Some(&token)).unwrap(),
            "{}"
        );
        assert_eq!(http_get(addr, "/status").unwrap(), "{}", "a loopback read");
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}
