//! The pool's HTTP endpoint: `/status`, `/metrics` and the control plane's requests
//! (`POST /volumes`, `/arrays`, member replacement and scrubs) routed to the server, and the
//! query strings they carry (percent-encoded `name=value` pairs). Its clients' side is
//! [`super::control`].

use std::sync::Arc;

use super::{CreateVolume, PoolServer};
use crate::http::{self, Response};

/// Serves `/status`, `/metrics`, `POST /volumes?…` and `POST /arrays?path=…[&disk_bytes=…]`
/// (`path`: a device, or comma-separated member devices).
/// A query's `name=value` pairs (values percent-decoded); names outside `known` are refused.
fn query_map(
    query: &str,
    known: &[&str],
) -> Result<std::collections::HashMap<String, String>, String> {
    let mut out = std::collections::HashMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if !known.contains(&k) {
            return Err(format!(
                "unknown parameter {k:?} (known: {})",
                known.join(", ")
            ));
        }
        out.insert(k.to_string(), percent_decode(v));
    }
    Ok(out)
}

/// The pool's control plane and `/status`, `/metrics`; with `token`, every request but a
/// loopback `GET` must carry it ([`http::admit`]).
pub async fn serve_http(
    server: Arc<PoolServer>,
    listener: tokio::net::TcpListener,
    token: Option<http::ControlToken>,
) {
    http::serve(listener, token, move |method: String, path: String| {
        let server = server.clone();
        async move {
            let (route, query) = path.split_once('?').unwrap_or((path.as_str(), ""));
            let (route, query) = (route.to_string(), query.to_string());
            let work = tokio::task::spawn_blocking(move || -> Response {
                let bad = |e: String| Response::text("400 Bad Request", format!("{e}\n"));
                match (method.as_str(), route.as_str()) {
                    ("GET", "/status") => Response::ok(
                        http::JSON,
                        serde_json::to_string_pretty(&server.status()).expect("status"),
                    ),
                    ("GET", "/metrics") => Response::ok(http::PROMETHEUS, server.metrics()),
                    ("POST", "/volumes") => match CreateVolume::from_query(&query)
                        .and_then(|c| server.create_volume(&c))
                    {
                        Ok(c) => Response::ok(http::JSON, serde_json::to_string_pretty(&c).expect("json")),
                        Err(e) => bad(e),
                    },
                    ("POST", "/arrays") => {
                        let mut path = None;
                        let mut disk_bytes = None;
                        for pair in query.split('&').filter(|p| !p.is_empty()) {
                            match pair.split_once('=') {
                                Some(("path", p)) => path = Some(percent_decode(p)),
                                Some(("disk_bytes", b)) => match b.parse() {
                                    Ok(b) => disk_bytes = Some(b),
                                    Err(_) => return bad(format!("disk_bytes={b}: not a number")),
                                },
                                _ => return bad(format!("unknown parameter {pair:?}")),
                            }
                        }
                        let Some(path) = path else {
                            return bad("POST /arrays needs path=".into());
                        };
                        // Several comma-separated paths: the new array's members.
                        let paths: Vec<std::path::PathBuf> =
                            path.split(',').map(std::path::PathBuf::from).collect();
                        match server.add_array(&paths, disk_bytes) {
                            Ok(started) => Response::ok(
                                http::JSON,
                                serde_json::json!({
                                    "array": path,
                                    "restriping": started,
                                    "not_restriped": server.status().not_restriped,
                                })
                                .to_string(),
                            ),
                            Err(e) => bad(e),
                        }
                    }
                    ("POST", "/replace-member") => {
                        let q = match query_map(&query, &["array", "member", "path"]) {
                            Ok(q) => q,
                            Err(e) => return bad(e),
                        };
                        let (Some(a), Some(m), Some(p)) = (q.get("array"), q.get("member"), q.get("path")) else {
                            return bad("POST /replace-member needs array=, member= and path=".into());
                        };
                        let (Ok(a), Ok(m)) = (a.parse::<usize>(), m.parse::<usize>()) else {
                            return bad("array= and member= are numbers".into());
                        };
                        match server.replace_member(a, m, std::path::Path::new(p)) {
                            Ok(()) => Response::ok(
                                http::JSON,
                                serde_json::json!({"array": a, "member": m, "path": p, "rebuilding": true}).to_string(),
                            ),
                            Err(e) => bad(e),
                        }
                    }
                    ("POST", "/scrub") => {
                        let q = match query_map(&query, &["array", "repair"]) {
                            Ok(q) => q,
                            Err(e) => return bad(e),
                        };
                        let Some(Ok(a)) = q.get("array").map(|a| a.parse::<usize>()) else {
                            return bad("POST /scrub needs array=N".into());
                        };
                        let repair = q.get("repair").is_some_and(|r| r == "1" || r == "true");
                        match server.scrub(a, repair) {
                            Ok(r) => Response::ok(
                                http::JSON,
                                serde_json::json!({
                                    "array": a,
                                    "rows": r.rows,
                                    "mismatched": r.mismatched,
                                    "repaired": r.repaired,
                                    "degraded": r.degraded,
                                })
                                .to_string(),
                            ),
                            Err(e) => bad(e),
                        }
                    }
                    _ => Response::text(
                        "404 Not Found",
                        "GET /status, GET /metrics, POST /volumes?name=&size=&policy=, POST /arrays?path=, POST /replace-member?array=&member=&path=, POST /scrub?array=[&repair=1]\n",
                    ),
                }
            });
            work.await.unwrap_or_else(|_| Response::stopping())
        }
    })
    .await
}

/// Paths in queries are percent-encoded by the client (`/`, spaces…).
pub fn percent_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub fn percent_decode(s: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 3 <= bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
