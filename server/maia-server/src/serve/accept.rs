//! The accept loop on TCP, plain or TLS, and the gate every connection
//! passes until it shows a token.
//!
//! A connection that has not yet made an authorized request is
//! *waiting*: it is closed when it has not within the header timeout
//! (`--header-timeout`), and at most `--max-unauthenticated` connections
//! wait at once: a new one closes the oldest waiting. So connections that
//! never finish a request (idle, or headers that never end) neither use up
//! the daemon's file descriptors nor keep an authorized client out: that
//! client's request arrives with its connection and takes it out of the
//! gate at once. An authorized connection is never closed by the gate.
//! Each connection is served by hyper-util's HTTP/1.1 + HTTP/2 builder
//! with upgrades (for the WebSocket), as `axum::serve` serves it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

/// How long a client may take over its TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// How long the loop waits after a failed accept (out of descriptors)
/// before it accepts again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The connections waiting to show a token, by arrival.
pub struct Gate {
    cap: usize,
    timeout: Duration,
    waiting: Mutex<(u64, BTreeMap<u64, CancellationToken>)>,
}

/// One connection's place in the gate; every request of the connection
/// carries it (an extension) so that an authorized one lets it through.
#[derive(Clone)]
pub struct Admitted {
    id: u64,
    gate: Arc<Gate>,
}

impl Gate {
    pub fn new(cap: usize, timeout: Duration) -> Arc<Gate> {
        Arc::new(Gate {
            cap: cap.max(1),
            timeout,
            waiting: Mutex::new((0, BTreeMap::new())),
        })
    }

    fn table(&self) -> std::sync::MutexGuard<'_, (u64, BTreeMap<u64, CancellationToken>)> {
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new connection: its place, and what closes it (the oldest
    /// waiting ones are closed when there are more than the cap).
    fn enter(self: &Arc<Self>) -> (Admitted, CancellationToken) {
        let close = CancellationToken::new();
        let mut table = self.table();
        let (next, waiting) = &mut *table;
        let id = *next;
        *next += 1;
        waiting.insert(id, close.clone());
        while waiting.len() > self.cap {
            let Some((_, oldest)) = waiting.pop_first() else {
                break;
            };
            tracing::debug!("too many connections without a token: the oldest is closed");
            oldest.cancel();
        }
        let admitted = Admitted {
            id,
            gate: self.clone(),
        };
        (admitted, close)
    }
}

impl Admitted {
    /// The connection made an authorized request: the gate lets it be.
    pub fn authorized(&self) {
        self.gate.table().1.remove(&self.id);
    }

    fn waiting(&self) -> bool {
        self.gate.table().1.contains_key(&self.id)
    }
}

/// Serves `router` on `listener` (over TLS with `tls`) until `stop`
/// completes, every connection through `gate`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Option<TlsAcceptor>,
    router: axum::Router,
    gate: Arc<Gate>,
    stop: impl std::future::Future<Output = ()>,
) {
    let mut builder = Builder::new(TokioExecutor::new());
    // The CONNECT protocol, for WebSockets over HTTP/2.
    builder.http2().enable_connect_protocol();
    tokio::pin!(stop);
    loop {
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut stop => return,
        };
        let _ = tcp.set_nodelay(true);
        let (admitted, close) = gate.enter();
        let (tls, builder, timeout) = (tls.clone(), builder.clone(), gate.timeout);
        let service =
            TowerToHyperService::new(router.clone().layer(axum::Extension(admitted.clone())));
        tokio::spawn(async move {
            let served = async {
                let result = match tls {
                    Some(acceptor) => {
                        let stream =
                            match tokio::time::timeout(HANDSHAKE, acceptor.accept(tcp)).await {
                                Ok(Ok(stream)) => stream,
                                Ok(Err(e)) => return tracing::debug!("TLS handshake failed: {e}"),
                                Err(_) => return tracing::debug!("TLS handshake timed out"),
                            };
                        builder
                            .serve_connection_with_upgrades(TokioIo::new(stream), service)
                            .await
                    }
                    None => {
                        builder
                            .serve_connection_with_upgrades(TokioIo::new(tcp), service)
                            .await
                    }
                };
                if let Err(e) = result {
                    tracing::debug!("a connection ended: {e}");
                }
            };
            let deadline = async {
                tokio::time::sleep(timeout).await;
                if admitted.waiting() {
                    tracing::debug!("a connection showed no token in time: closed");
                } else {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                () = served => {}
                () = close.cancelled() => {}
                () = deadline => {}
            }
            admitted.authorized();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_waiting_connection_makes_room_and_an_authorized_one_leaves() {
        let gate = Gate::new(2, Duration::from_secs(10));
        let (first, first_closed) = gate.enter();
        let (second, second_closed) = gate.enter();
        second.authorized();
        let (_third, third_closed) = gate.enter();
        assert!(!first_closed.is_cancelled() && first.waiting());
        let (_fourth, _) = gate.enter();
        assert!(first_closed.is_cancelled(), "the oldest waiting stayed");
        assert!(
            !second_closed.is_cancelled(),
            "an authorized one was closed"
        );
        assert!(!third_closed.is_cancelled());
    }
}
