//! The broker's HTTP endpoint (`/metrics`, `/readyz`) as a scraper or a kubelet probe sees it.

use std::io::{Read, Write};
use std::net::SocketAddr;

/// A free port on the loopback, for a broker's `metrics_address`.
pub fn free_address() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
}

/// `GET path` from `address`: the status code and the body (status 0 when nothing answers).
/// On a blocking thread: the broker under test runs on the test's runtime.
pub async fn get(address: SocketAddr, path: &str) -> (u16, String) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: poolboy\r\nConnection: close\r\n\r\n");
    tokio::task::spawn_blocking(move || {
        let Ok(mut stream) = std::net::TcpStream::connect(address) else {
            return (0, String::new());
        };
        let mut response = String::new();
        if stream.write_all(request.as_bytes()).is_err()
            || stream.read_to_string(&mut response).is_err()
        {
            return (0, String::new());
        }
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        (status, body.to_owned())
    })
    .await
    .expect("the request thread")
}
