//! Opening a connection for the HTTP/1.1 client: the name resolved off the runtime's threads,
//! every address checked by the member's reach, each tried in turn within the connect timeout,
//! TCP_NODELAY and keep-alive set, and the time it took stamped on it.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use crate::upstream::error::UpstreamError;
use crate::upstream::reach::{not_allowed, reachable, Reach};
use crate::upstream::ConnectTiming;

/// As hyper's connector set it (`set_keepalive`): a dead peer is found within minutes, not hours.
const TCP_KEEPALIVE: Duration = Duration::from_secs(60);

fn failed(detail: impl ToString) -> UpstreamError {
    UpstreamError::Connect { timed_out: false, detail: detail.to_string() }
}

fn timed_out(timeout: Duration) -> UpstreamError {
    UpstreamError::Connect { timed_out: true, detail: format!("no connection within {} ms", timeout.as_millis()) }
}

async fn addresses(
    host: &str,
    reach: &Reach,
    deadline: tokio::time::Instant,
    timeout: Duration,
) -> Result<Vec<SocketAddr>, UpstreamError> {
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = literal.parse::<IpAddr>() {
        if let Some(why) = reach.refusal(ip) {
            return Err(failed(not_allowed(why)));
        }
        return Ok(vec![SocketAddr::new(ip, reach.port)]);
    }
    let resolved = tokio::time::timeout_at(deadline, tokio::net::lookup_host((literal, reach.port)))
        .await
        .map_err(|_| timed_out(timeout))?
        .map_err(|e| failed(format!("resolving {literal}: {e}")))?;
    let allowed = reachable(reach, resolved).map_err(failed)?;
    if allowed.is_empty() {
        return Err(failed(format!("{literal} resolved to no address")));
    }
    Ok(allowed)
}

/// Connects to `host:port`, the port of the request's own URL (the guard checks that port).
pub async fn connect(
    host: &str,
    port: u16,
    reach: &Reach,
    timeout: Duration,
) -> Result<(TcpStream, ConnectTiming), UpstreamError> {
    let started = Instant::now();
    let deadline = tokio::time::Instant::from_std(started) + timeout;
    let reach = Reach { port, ..reach.clone() };
    let addrs = addresses(host, &reach, deadline, timeout).await?;
    let mut last = None;
    for (tried, address) in addrs.iter().enumerate() {
        // Each address gets an equal share of what is left, as hyper's connector gives it.
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let share = left / (addrs.len() - tried) as u32;
        match tokio::time::timeout(share, TcpStream::connect(address)).await {
            Ok(Ok(stream)) => {
                stream.set_nodelay(true).map_err(failed)?;
                let keepalive = socket2::TcpKeepalive::new().with_time(TCP_KEEPALIVE);
                socket2::SockRef::from(&stream).set_tcp_keepalive(&keepalive).map_err(failed)?;
                let finished = Instant::now();
                return Ok((stream, ConnectTiming { finished, took: finished.saturating_duration_since(started) }));
            }
            Ok(Err(e)) => last = Some(failed(format!("{address}: {e}"))),
            Err(_) => last = Some(timed_out(timeout)),
        }
    }
    Err(last.unwrap_or_else(|| timed_out(timeout)))
}
