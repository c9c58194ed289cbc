//! The one place MAIA builds HTTP clients (the model endpoint, WebFetch,
//! MCP over HTTP), so they agree on what they have in common:
//!
//! - a `maia/VERSION` user agent (callers may add a purpose);
//! - loopback hosts (`localhost`, `127.0.0.0/8`, `::1`, bracketed or not)
//!   are reached directly, never through a proxy from the environment;
//! - one TLS configuration for the whole process: the platform's trusted
//!   roots are read once, when the first client is built, not once per
//!   client (reading and parsing them costs milliseconds and a few hundred
//!   kilobytes, and every session, login check and WebFetch builds one);
//! - without a process-wide rustls crypto provider (the `maia` binary
//!   installs one; library tests may not) a private `ring` configuration
//!   with no trusted roots keeps plain HTTP working; HTTPS then cannot
//!   verify any certificate, and callers say so.
//!
//! Callers add what is theirs: timeouts, redirect policy, pooling.

use std::sync::{Arc, OnceLock};

/// Why a client could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cannot configure TLS: {0}")]
    Tls(String),
}

/// Whether `host` (as in a URL, IPv6 possibly bracketed) is this machine.
pub fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether HTTPS can verify certificates in this process.
pub fn tls_available() -> bool {
    rustls::crypto::CryptoProvider::get_default().is_some()
}

/// A client builder for requests to `host`, with MAIA's common settings;
/// `purpose` is added to the user agent (`maia/0.1.0 (WebFetch)`).
pub fn builder(
    host: Option<&str>,
    purpose: Option<&str>,
) -> Result<reqwest::ClientBuilder, SetupError> {
    let agent = match purpose {
        Some(purpose) => format!("maia/{} ({purpose})", env!("CARGO_PKG_VERSION")),
        None => format!("maia/{}", env!("CARGO_PKG_VERSION")),
    };
    let mut builder = reqwest::Client::builder().user_agent(agent);
    if host.is_some_and(is_loopback) {
        builder = builder.no_proxy();
    }
    let tls = match rustls::crypto::CryptoProvider::get_default() {
        Some(provider) => shared_tls(provider)?,
        None => fallback_tls()?,
    };
    Ok(builder.tls_backend_preconfigured(tls))
}

/// The process's TLS client configuration for a WebSocket (`wss://`): the
/// same verifier, ALPN offering HTTP/1.1 only (a WebSocket upgrade is an
/// HTTP/1.1 request).
pub fn websocket_tls() -> Result<rustls::ClientConfig, SetupError> {
    let mut config = match rustls::crypto::CryptoProvider::get_default() {
        Some(provider) => shared_tls(provider)?,
        None => fallback_tls()?,
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The TLS configuration of every client once a provider is installed:
/// the platform's verifier (what reqwest would build for each client),
/// built once. ALPN offers HTTP/2 then HTTP/1.1, as reqwest does.
fn shared_tls(
    provider: &Arc<rustls::crypto::CryptoProvider>,
) -> Result<rustls::ClientConfig, SetupError> {
    static SHARED: OnceLock<Result<rustls::ClientConfig, String>> = OnceLock::new();
    let build = || -> Result<rustls::ClientConfig, String> {
        let verifier =
            rustls_platform_verifier::Verifier::new(provider.clone()).map_err(|e| e.to_string())?;
        let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    };
    SHARED.get_or_init(build).clone().map_err(SetupError::Tls)
}

/// The private TLS configuration used when no provider is installed.
fn fallback_tls() -> Result<rustls::ClientConfig, SetupError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SetupError::Tls(e.to_string()))?
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for host in [
            "localhost",
            "LOCALHOST",
            "127.0.0.1",
            "127.8.9.1",
            "::1",
            "[::1]",
        ] {
            assert!(is_loopback(host), "{host}");
        }
        for host in [
            "example.com",
            "10.0.0.1",
            "localhost.example.com",
            "[::2]",
            "",
        ] {
            assert!(!is_loopback(host), "{host}");
        }
    }

    #[test]
    fn builds_without_a_process_provider() {
        assert!(
            builder(Some("127.0.0.1"), Some("test"))
                .unwrap()
                .build()
                .is_ok()
        );
    }
}
