//! A hostile HTTP target: raw TCP, so that it can send what no HTTP library would produce
//! (absurd headers, broken framing, endless, lying or inflating bodies, or nothing at all).
//!
//! One path per misbehaviour (see [`answer`]); any other path is a `404`. Every connection
//! carries one request and is closed after the answer. The server counts requests per path and
//! records, per request, the request's headers and a summary of what it answered.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Request heads longer than this are not read further (the agent sends a few hundred bytes).
const MAX_REQUEST_HEAD: usize = 64 * 1024;
/// No connection is held open longer than this, whatever the client does.
const MAX_CONNECTION_TIME: Duration = Duration::from_secs(60);
/// Size of the gzip bomb once inflated.
const BOMB_INFLATED_BYTES: usize = 200 * 1024 * 1024;
/// Chunk size of the endless bodies.
const CHUNK: usize = 16 * 1024;

/// One request as the server saw it, and what it answered.
#[derive(Debug, Clone)]
pub struct Served {
    /// Header names (lower-cased) and values, as received.
    pub headers: Vec<(String, String)>,
    /// A one-line summary of the answer.
    pub answer: String,
}

impl Served {
    pub fn has_header(&self, name: &str) -> bool {
        self.headers.iter().any(|(n, _)| n == name)
    }
}

type Log = Arc<Mutex<HashMap<String, Vec<Served>>>>;

/// The running server; it stops with the test's runtime.
pub struct HostileServer {
    addr: SocketAddr,
    log: Log,
}

impl HostileServer {
    /// Binds 127.0.0.1:0 and serves every misbehaviour (it first compresses the gzip bomb,
    /// which takes a moment).
    pub async fn start() -> anyhow::Result<HostileServer> {
        let bomb: Arc<[u8]> = tokio::task::spawn_blocking(gzip_bomb).await??.into();
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let log = Log::default();
        let served = log.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (log, bomb) = (served.clone(), bomb.clone());
                tokio::spawn(async move {
                    let _ =
                        tokio::time::timeout(MAX_CONNECTION_TIME, serve(stream, &log, &bomb)).await;
                });
            }
        });
        Ok(HostileServer { addr, log })
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Requests received on `path` so far.
    pub fn hits(&self, path: &str) -> usize {
        self.log.lock().unwrap().get(path).map_or(0, Vec::len)
    }

    /// Every request received on `path`, oldest first, with what it was answered.
    pub fn served(&self, path: &str) -> Vec<Served> {
        self.log
            .lock()
            .unwrap()
            .get(path)
            .cloned()
            .unwrap_or_default()
    }
}

/// What the server sends back.
enum Answer {
    /// A well-framed response; `Content-Length` is added.
    Full {
        status: &'static str,
        headers: Vec<Header>,
        body: Vec<u8>,
    },
    /// A head (with the headers given, framing included), these body bytes, then close.
    Truncated {
        status: &'static str,
        headers: Vec<Header>,
        body: &'static [u8],
    },
    /// Bytes that are not HTTP at all, then close.
    Raw(&'static [u8]),
    /// A chunked body of `a`s that never ends (until the client goes away), starting with
    /// `first`.
    Endless { first: &'static str },
    /// A head announcing `length` bytes, then one `.` every `every`.
    Trickle { length: usize, every: Duration },
    /// Nothing: the request is read and never answered.
    Silence,
}

type Header = (String, Vec<u8>);

fn header(name: &str, value: impl AsRef<[u8]>) -> Header {
    (name.to_string(), value.as_ref().to_vec())
}

fn full(status: &'static str, headers: Vec<Header>, body: &[u8]) -> Answer {
    Answer::Full {
        status,
        headers,
        body: body.to_vec(),
    }
}

/// The answer to the `nth` request (1 for the first) on `path`.
fn answer(path: &str, nth: usize, request: &Served, bomb: &[u8]) -> Answer {
    const OK: &str = "200 OK";
    const TOO_MANY: &str = "429 Too Many Requests";
    const UNAVAILABLE: &str = "503 Service Unavailable";
    let ok_body = b"ok";
    match path {
        "/healthy" => full(OK, vec![], ok_body),
        "/retry-after-huge" => full(
            TOO_MANY,
            vec![header("Retry-After", "18446744073709551615")],
            b"",
        ),
        "/retry-after-date-far" => full(
            TOO_MANY,
            vec![header("Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT")],
            b"",
        ),
        "/retry-after-garbage" => full(TOO_MANY, vec![header("Retry-After", "banana")], b""),
        "/unavailable-with-retry-after" => full(UNAVAILABLE, vec![header("Retry-After", "5")], b""),
        "/unavailable" => full(UNAVAILABLE, vec![], b""),
        "/ratelimit-headers-absurd" => full(
            OK,
            vec![
                header("X-RateLimit-Limit", "100"),
                header("X-RateLimit-Remaining", "0"),
                header("X-RateLimit-Reset", "18446744073709551615"),
                header("RateLimit-Reset", "-5"),
            ],
            ok_body,
        ),
        "/bad-status" => full("999 Weird", vec![], ok_body),
        "/garbage" => Answer::Raw(b"hello, I am not http\r\n\r\n"),
        "/huge-header" => full(OK, vec![header("X-Huge", vec![b'h'; 256 * 1024])], ok_body),
        "/many-headers" => full(
            OK,
            (0..2000)
                .map(|i| header(&format!("X-Filler-{i}"), "x"))
                .collect(),
            ok_body,
        ),
        "/invalid-utf8-header" => full(OK, vec![header("X-Weird", [b'o', 0xFF, 0xFE])], ok_body),
        "/endless" | "/endless-plain" => Answer::Endless { first: "" },
        "/endless-with-keyword" => Answer::Endless { first: "needle" },
        "/gzip-bomb" => full(OK, vec![header("Content-Encoding", "gzip")], bomb),
        "/slow-body" | "/slow-body-plain" => Answer::Trickle {
            length: 1000,
            every: Duration::from_millis(500),
        },
        "/slow-headers" => Answer::Silence,
        "/content-length-lie" | "/content-length-lie-plain" => Answer::Truncated {
            status: OK,
            headers: vec![header("Content-Length", "100000")],
            body: b"needle....",
        },
        "/redirect-loop" => full("302 Found", vec![header("Location", "/redirect-loop")], b""),
        "/conditional-lie" => {
            if request.has_header("if-none-match") || request.has_header("if-modified-since") {
                full("304 Not Modified", vec![header("ETag", "\"v1\"")], b"")
            } else {
                full(
                    OK,
                    vec![
                        header("ETag", "\"v1\""),
                        header("Last-Modified", "Wed, 21 Oct 2015 07:28:00 GMT"),
                    ],
                    b"bad",
                )
            }
        }
        "/flip-then-limited" => match nth {
            1 | 4 => full(OK, vec![], ok_body),
            3 | 5 => full("500 Internal Server Error", vec![], b""),
            _ => full(TOO_MANY, vec![header("Retry-After", "1")], b""),
        },
        _ => full("404 Not Found", vec![], b""),
    }
}

impl Answer {
    /// One line saying what was sent (header values shortened).
    fn summary(&self) -> String {
        let headers = |headers: &[Header]| -> String {
            if headers.len() > 4 {
                return format!(" + {} headers", headers.len());
            }
            headers
                .iter()
                .map(|(name, value)| {
                    let value = String::from_utf8_lossy(value);
                    let short: String = value.chars().take(40).collect();
                    let more = if value.len() > short.len() { "…" } else { "" };
                    format!(" + {name}: {short}{more}")
                })
                .collect()
        };
        match self {
            Answer::Full {
                status,
                headers: h,
                body,
            } => format!("{status}{}, {} body bytes", headers(h), body.len()),
            Answer::Truncated {
                status,
                headers: h,
                body,
            } => format!(
                "{status}{}, then {} bytes and close",
                headers(h),
                body.len()
            ),
            Answer::Raw(bytes) => format!("raw {:?}", String::from_utf8_lossy(bytes)),
            Answer::Endless { first } => format!("200 OK, chunked, endless, first {first:?}"),
            Answer::Trickle { length, every } => {
                format!("200 OK, Content-Length {length}, one byte every {every:?}")
            }
            Answer::Silence => "nothing".into(),
        }
    }
}

async fn serve(mut stream: TcpStream, log: &Log, bomb: &[u8]) -> std::io::Result<()> {
    let Some((path, headers)) = read_head(&mut stream).await? else {
        return Ok(());
    };
    let mut request = Served {
        headers,
        answer: String::new(),
    };
    let answer = {
        let mut log = log.lock().unwrap();
        let served = log.entry(path.clone()).or_default();
        let answer = answer(&path, served.len() + 1, &request, bomb);
        request.answer = answer.summary();
        served.push(request);
        answer
    };
    send(&mut stream, answer).await
}

/// Reads one request head: its path (without the query) and headers; `None` if the client
/// closed before finishing it.
async fn read_head(
    stream: &mut TcpStream,
) -> std::io::Result<Option<(String, Vec<(String, String)>)>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        if buf.len() > MAX_REQUEST_HEAD {
            return Ok(None);
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]);
    let mut lines = head.split("\r\n");
    let target = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .unwrap_or("/");
    let path = target.split('?').next().unwrap_or("/").to_string();
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    Ok(Some((path, headers)))
}

fn head(status: &str, headers: &[Header]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\n").into_bytes();
    for (name, value) in headers {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    out
}

/// One chunk of a chunked body.
fn chunked(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

async fn send(stream: &mut TcpStream, answer: Answer) -> std::io::Result<()> {
    match answer {
        Answer::Full {
            status,
            mut headers,
            body,
        } => {
            headers.push(header("Content-Length", body.len().to_string()));
            stream.write_all(&head(status, &headers)).await?;
            stream.write_all(&body).await?;
        }
        Answer::Truncated {
            status,
            headers,
            body,
        } => {
            stream.write_all(&head(status, &headers)).await?;
            stream.write_all(body).await?;
        }
        Answer::Raw(bytes) => stream.write_all(bytes).await?,
        Answer::Endless { first } => {
            let headers = [header("Transfer-Encoding", "chunked")];
            stream.write_all(&head("200 OK", &headers)).await?;
            let mut opening = first.as_bytes().to_vec();
            opening.resize(CHUNK, b'a');
            stream.write_all(&chunked(&opening)).await?;
            let next = chunked(&[b'a'; CHUNK]);
            loop {
                // Fails once the client has gone away.
                stream.write_all(&next).await?;
            }
        }
        Answer::Trickle { length, every } => {
            let headers = [header("Content-Length", length.to_string())];
            stream.write_all(&head("200 OK", &headers)).await?;
            for _ in 0..length {
                tokio::time::sleep(every).await;
                stream.write_all(b".").await?;
            }
        }
        Answer::Silence => {
            // Hold the connection until the client gives up.
            let mut sink = [0u8; 1024];
            while stream.read(&mut sink).await? > 0 {}
        }
    }
    stream.shutdown().await
}

/// `BOMB_INFLATED_BYTES` zeros, gzipped (about 200 KB).
fn gzip_bomb() -> std::io::Result<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let zeros = vec![0u8; 1024 * 1024];
    for _ in 0..BOMB_INFLATED_BYTES / zeros.len() {
        encoder.write_all(&zeros)?;
    }
    encoder.finish()
}
