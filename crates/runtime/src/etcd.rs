//! A client of etcd's v3 API through its JSON gateway (`POST /v3/kv/range` and the like, keys
//! and values base64 in JSON), blocking, over plain HTTP/1.1: the handful of calls the MDS needs
//! (ranges, transactions with comparisons, leases), no generated code and no build-time tools.
//!
//! Each call goes to the endpoint that answered last and moves on to the next endpoint when one
//! cannot be reached, times out or answers that it has no leader; it fails when none answers.
//! A transaction's comparisons are what make a write conditional — a deposed MDS's writes fail
//! there, on etcd's side, whatever its own clock says.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::{json, Value};

/// How an etcd call failed.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// No endpoint answered (each one's error, in order).
    #[error("no etcd endpoint answered: {0}")]
    Unreachable(String),
    /// etcd answered with an error (its message; e.g. a lease that is not found).
    #[error("etcd refused: {0}")]
    Refused(String),
    /// An answer that is not what the API says it is.
    #[error("etcd answer not understood: {0}")]
    Malformed(String),
}

pub type EtcdResult<T> = Result<T, EtcdError>;

/// One key's entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kv {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub create_revision: i64,
    pub mod_revision: i64,
    pub lease: i64,
}

/// A comparison of a transaction.
#[derive(Clone, Debug)]
pub enum Compare {
    /// The key's create revision equals this (0: the key does not exist).
    CreateRevision(Vec<u8>, i64),
    /// The key's value equals this.
    Value(Vec<u8>, Vec<u8>),
}

/// An operation of a transaction.
#[derive(Clone, Debug)]
pub enum Op {
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
        /// Bound to this lease (0: none).
        lease: i64,
    },
    /// Deletes `[key, end)` (`end` empty: the key alone).
    Delete {
        key: Vec<u8>,
        end: Vec<u8>,
    },
    Get {
        key: Vec<u8>,
    },
}

/// The end of the range of every key starting with `prefix` (etcd's convention).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

pub struct Etcd {
    endpoints: Vec<String>,
    /// The endpoint that answered last.
    current: usize,
    timeout: Duration,
}

impl Etcd {
    /// `endpoints`: `host:port` or `http://host:port`, tried in turn.
    pub fn new(endpoints: &[String], timeout: Duration) -> EtcdResult<Etcd> {
        let endpoints: Vec<String> = endpoints
            .iter()
            .map(|e| e.trim().trim_start_matches("http://").trim_end_matches('/'))
            .filter(|e| !e.is_empty())
            .map(str::to_string)
            .collect();
        if endpoints.is_empty() {
            return Err(EtcdError::Unreachable("no endpoint given".into()));
        }
        if let Some(bad) = endpoints.iter().find(|e| e.starts_with("https://")) {
            return Err(EtcdError::Unreachable(format!(
                "{bad}: TLS to etcd is not supported yet (give http:// endpoints)"
            )));
        }
        Ok(Etcd {
            endpoints,
            current: 0,
            timeout,
        })
    }

    /// The entry of `key`, if any.
    pub fn get(&mut self, key: &[u8]) -> EtcdResult<Option<Kv>> {
        let answer = self.call("/v3/kv/range", &json!({ "key": b64(key) }))?;
        Ok(kvs(&answer)?.into_iter().next())
    }

    /// Every entry whose key starts with `prefix`, in key order (fetched in pages).
    pub fn get_prefix(&mut self, prefix: &[u8]) -> EtcdResult<Vec<Kv>> {
        const PAGE: u64 = 1000;
        let end = prefix_end(prefix);
        let mut from = prefix.to_vec();
        let mut out = Vec::new();
        loop {
            let answer = self.call(
                "/v3/kv/range",
                &json!({ "key": b64(&from), "range_end": b64(&end), "limit": PAGE.to_string() }),
            )?;
            let page = kvs(&answer)?;
            let more = answer.get("more").and_then(Value::as_bool).unwrap_or(false);
            let Some(last) = page.last() else {
                return Ok(out);
            };
            from = last.key.clone();
            from.push(0);
            out.extend(page);
            if !more {
                return Ok(out);
            }
        }
    }

    /// Runs `success` if every comparison holds, else `failure`; whether they held, and the
    /// entries the `Get`s of the branch that ran found (one list per `Get`).
    pub fn txn(
        &mut self,
        compare: &[Compare],
        success: &[Op],
        failure: &[Op],
    ) -> EtcdResult<(bool, Vec<Vec<Kv>>)> {
        let compare: Vec<Value> = compare
            .iter()
            .map(|c| match c {
                Compare::CreateRevision(key, rev) => json!({
                    "key": b64(key), "target": "CREATE", "result": "EQUAL",
                    "create_revision": rev.to_string(),
                }),
                Compare::Value(key, value) => json!({
                    "key": b64(key), "target": "VALUE", "result": "EQUAL", "value": b64(value),
                }),
            })
            .collect();
        let ops = |ops: &[Op]| -> Vec<Value> {
            ops.iter()
                .map(|op| match op {
                    Op::Put { key, value, lease } => json!({ "request_put": {
                        "key": b64(key), "value": b64(value), "lease": lease.to_string(),
                    }}),
                    Op::Delete { key, end } if end.is_empty() => {
                        json!({ "request_delete_range": { "key": b64(key) } })
                    }
                    Op::Delete { key, end } => json!({ "request_delete_range": {
                        "key": b64(key), "range_end": b64(end),
                    }}),
                    Op::Get { key } => json!({ "request_range": { "key": b64(key) } }),
                })
                .collect()
        };
        let answer = self.call(
            "/v3/kv/txn",
            &json!({ "compare": compare, "success": ops(success), "failure": ops(failure) }),
        )?;
        let succeeded = answer
            .get("succeeded")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let mut found = Vec::new();
        for response in answer
            .get("responses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(range) = response.get("response_range") {
                found.push(kvs(range)?);
            }
        }
        Ok((succeeded, found))
    }

    /// A lease of `ttl_s` seconds; its id.
    pub fn grant(&mut self, ttl_s: u64) -> EtcdResult<i64> {
        let answer = self.call("/v3/lease/grant", &json!({ "TTL": ttl_s.to_string() }))?;
        int(&answer, "ID")
    }

    /// Renews `lease`: the seconds it now has (0 or less: it has expired).
    pub fn keep_alive(&mut self, lease: i64) -> EtcdResult<i64> {
        let answer = self.call("/v3/lease/keepalive", &json!({ "ID": lease.to_string() }))?;
        // A streamed answer: {"result": {...}}.
        let result = answer.get("result").unwrap_or(&answer);
        Ok(int(result, "TTL").unwrap_or(0))
    }

    /// Ends `lease` now (its keys go with it).
    pub fn revoke(&mut self, lease: i64) -> EtcdResult<()> {
        match self.call("/v3/lease/revoke", &json!({ "ID": lease.to_string() })) {
            Ok(_) => Ok(()),
            Err(EtcdError::Refused(m)) if m.contains("not found") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Posts `body` to `path` on the current endpoint, then on the others in turn.
    fn call(&mut self, path: &str, body: &Value) -> EtcdResult<Value> {
        let body = body.to_string();
        let mut errors = Vec::new();
        for k in 0..self.endpoints.len() {
            let i = (self.current + k) % self.endpoints.len();
            match post(&self.endpoints[i], path, &body, self.timeout) {
                Ok(answer) => match answer_error(&answer) {
                    None => {
                        self.current = i;
                        return Ok(answer);
                    }
                    // A member without a leader (or cut off from it) may still answer: another
                    // member may have one.
                    Some(m) if is_unavailable(&m) => {
                        errors.push(format!("{}: {m}", self.endpoints[i]))
                    }
                    Some(m) => return Err(EtcdError::Refused(m)),
                },
                Err(e) => errors.push(format!("{}: {e}", self.endpoints[i])),
            }
        }
        Err(EtcdError::Unreachable(errors.join("; ")))
    }
}

fn is_unavailable(message: &str) -> bool {
    [
        "no leader",
        "timed out",
        "unavailable",
        "leader changed",
        "not capable",
    ]
    .iter()
    .any(|m| message.contains(m))
}

/// The error an answer carries, if any (`{"error": ..., "message": ..., "code": ...}`).
fn answer_error(answer: &Value) -> Option<String> {
    let result = answer.get("result").unwrap_or(answer);
    for v in [answer, result] {
        if let Some(e) = v.get("error") {
            let m = e
                .get("message")
                .and_then(Value::as_str)
                .or_else(|| e.as_str())
                .unwrap_or("error");
            return Some(m.to_string());
        }
    }
    answer
        .get("code")
        .filter(|c| c.as_i64().is_some_and(|c| c != 0))
        .map(|_| {
            answer
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("error")
                .to_string()
        })
}

/// One HTTP/1.1 POST, the connection closed after it; the answer's JSON.
fn post(endpoint: &str, path: &str, body: &str, timeout: Duration) -> Result<Value, String> {
    let addr = endpoint
        .to_socket_addrs()
        .map_err(|e| format!("resolving: {e}"))?
        .next()
        .ok_or("resolves to no address")?;
    let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(timeout)).ok();
    stream.set_write_timeout(Some(timeout)).ok();
    stream.set_nodelay(true).ok();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {endpoint}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream);
    let body = read_response(&mut reader)?;
    // A streamed answer (keepalive) is one JSON object per line; the first is the answer.
    let first = body
        .split(|&b| b == b'\n')
        .find(|l| !l.iter().all(u8::is_ascii_whitespace))
        .unwrap_or(&[]);
    serde_json::from_slice(first).map_err(|e| format!("answer is not JSON: {e}"))
}

/// The body of an HTTP/1.1 response (any status: etcd's errors are JSON too), with a
/// `Content-Length`, chunked, or up to the end of the connection.
fn read_response(reader: &mut impl BufRead) -> Result<Vec<u8>, String> {
    const BODY_MAX: usize = 256 << 20;
    let mut line = String::new();
    reader
        .read_line(&mut line)
        .map_err(|e| format!("reading the status: {e}"))?;
    if !line.starts_with("HTTP/1.") {
        return Err(format!("not an HTTP answer: {:?}", line.trim_end()));
    }
    let mut length: Option<usize> = None;
    let mut chunked = false;
    loop {
        line.clear();
        let n = reader
            .read_line(&mut line)
            .map_err(|e| format!("reading the headers: {e}"))?;
        if n == 0 {
            return Err("the answer ends in its headers".into());
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').unwrap_or((header, ""));
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(value.parse().map_err(|_| "a bad Content-Length")?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.eq_ignore_ascii_case("chunked");
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            reader
                .read_line(&mut line)
                .map_err(|e| format!("reading a chunk: {e}"))?;
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| format!("a bad chunk size {:?}", line.trim()))?;
            if size == 0 {
                return Ok(body);
            }
            if body.len() + size > BODY_MAX {
                return Err("the answer is too large".into());
            }
            let at = body.len();
            body.resize(at + size, 0);
            reader
                .read_exact(&mut body[at..])
                .map_err(|e| format!("reading a chunk: {e}"))?;
            line.clear();
            reader.read_line(&mut line).map_err(|e| e.to_string())?;
            // A streamed answer's first object is all we need.
            if body.contains(&b'\n') {
                return Ok(body);
            }
        }
    }
    match length {
        Some(n) if n > BODY_MAX => Err("the answer is too large".into()),
        Some(n) => {
            body.resize(n, 0);
            reader
                .read_exact(&mut body)
                .map_err(|e| format!("reading the body: {e}"))?;
            Ok(body)
        }
        None => {
            reader
                .take(BODY_MAX as u64)
                .read_to_end(&mut body)
                .map_err(|e| format!("reading the body: {e}"))?;
            Ok(body)
        }
    }
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unb64(text: &str) -> EtcdResult<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| EtcdError::Malformed(format!("base64: {e}")))
}

/// An int64 field, which the gateway writes as a string (or leaves out when zero).
fn int(v: &Value, field: &str) -> EtcdResult<i64> {
    match v.get(field) {
        None => Ok(0),
        Some(Value::String(s)) => s
            .parse()
            .map_err(|_| EtcdError::Malformed(format!("{field}: {s:?}"))),
        Some(Value::Number(n)) => n
            .as_i64()
            .ok_or_else(|| EtcdError::Malformed(format!("{field}: {n}"))),
        Some(other) => Err(EtcdError::Malformed(format!("{field}: {other}"))),
    }
}

fn kvs(answer: &Value) -> EtcdResult<Vec<Kv>> {
    let Some(list) = answer.get("kvs") else {
        return Ok(Vec::new());
    };
    let list = list
        .as_array()
        .ok_or_else(|| EtcdError::Malformed("kvs is not a list".into()))?;
    list.iter()
        .map(|kv| {
            let text = |f: &str| kv.get(f).and_then(Value::as_str).unwrap_or("");
            Ok(Kv {
                key: unb64(text("key"))?,
                value: unb64(text("value"))?,
                create_revision: int(kv, "create_revision")?,
                mod_revision: int(kv, "mod_revision")?,
                lease: int(kv, "lease")?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ends_follow_etcds_convention() {
        assert_eq!(prefix_end(b"/a/"), b"/a0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff\xff"), vec![0]);
    }

    #[test]
    fn responses_are_read_with_a_length_chunked_or_to_the_end() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"a\":1}trailing";
        assert_eq!(read_response(&mut &plain[..]).unwrap(), b"{\"a\":1}");
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n";
        assert_eq!(read_response(&mut &chunked[..]).unwrap(), b"{\"a\":1}");
        let to_end = b"HTTP/1.0 200 OK\r\n\r\n{}";
        assert_eq!(read_response(&mut &to_end[..]).unwrap(), b"{}");
        for bad in [
            &b"SSH-2.0\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Le",
        ] {
            assert!(read_response(&mut &bad[..]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn errors_in_answers_are_found() {
        let grpc = json!({"error": "etcdserver: requested lease not found", "code": 5,
                          "message": "etcdserver: requested lease not found"});
        assert_eq!(
            answer_error(&grpc).as_deref(),
            Some("etcdserver: requested lease not found")
        );
        let streamed = json!({"error": {"grpc_code": 14, "message": "etcdserver: no leader"}});
        assert!(is_unavailable(&answer_error(&streamed).unwrap()));
        assert_eq!(answer_error(&json!({"header": {}, "kvs": []})), None);
        let list = json!({"kvs": [{"key": "YQ==", "value": "Yg==", "create_revision": "7"}]});
        let found = kvs(&list).unwrap();
        assert_eq!(found[0].key, b"a");
        assert_eq!(found[0].value, b"b");
        assert_eq!(found[0].create_revision, 7);
        assert_eq!(found[0].mod_revision, 0);
        assert!(kvs(&json!({"kvs": [{"key": "not base64!"}]})).is_err());
        assert!(kvs(&json!({"kvs": [{"key": "YQ==", "create_revision": "x"}]})).is_err());
    }
}
