//! The broker's HTTP endpoint (`/metrics`, `/readyz`) as a scraper or a kubelet probe sees it.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};

/// A free port on the loopback, for a broker's `metrics_address` or webhook. The port is free
/// when chosen, not held: so it comes from below the kernel's ephemeral range, which no
/// outgoing connection (the tests make hundreds) can take before the broker binds it, and is
/// never handed out twice by one process, for the tests that run at once.
pub fn free_address() -> SocketAddr {
    static HANDED_OUT: AtomicU32 = AtomicU32::new(0);
    let Some((low, span)) = below_ephemeral_range() else {
        return std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port");
    };
    // Each process starts elsewhere in the range: test binaries and benchmarks each pick.
    let start = std::process::id() % span;
    for _ in 0..span {
        let port = low + (start + HANDED_OUT.fetch_add(1, Ordering::Relaxed)) % span;
        let address = SocketAddr::from(([127, 0, 0, 1], port as u16));
        if std::net::TcpListener::bind(address).is_ok() {
            return address;
        }
    }
    panic!("no free port from {low} to {}", low + span)
}

/// The ports from 10000 up to the kernel's ephemeral range (`ip_local_port_range`), as the
/// first and how many; `None` when that range starts too low to leave any.
fn below_ephemeral_range() -> Option<(u32, u32)> {
    const LOW: u32 = 10_000;
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let ephemeral: u32 = range.split_whitespace().next()?.parse().ok()?;
    (ephemeral > LOW + 1_000).then(|| (LOW, ephemeral - LOW))
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

/// Waits until `/readyz` at `address` is not ready and names the `watch` failing, forbidden.
pub async fn readyz_forbidden(address: SocketAddr, watch: &str) {
    let why = super::eventually("/readyz failing", super::TIMEOUT, || async {
        let (status, body) = get(address, "/readyz").await;
        (status == 503 && body.contains(watch)).then_some(body)
    })
    .await;
    assert!(why.contains("forbidden"), "{why}");
}

/// Waits up to `timeout` until `/readyz` at `address` is ready.
pub async fn readyz_ready(address: SocketAddr, timeout: std::time::Duration) {
    super::eventually("/readyz ready again", timeout, || async {
        let (status, _) = get(address, "/readyz").await;
        (status == 200).then_some(())
    })
    .await;
}
