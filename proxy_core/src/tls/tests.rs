//! Certificates made at test time (rcgen): the checks a pair must pass, and the data port over
//! real TLS connections on loopback (ALPN, a reload reaching new connections while an open one
//! carries on, handshake failures by reason).

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::cert::{load, CertError};
use super::*;
use crate::core::{Core, CoreOptions};
use crate::proxy::ServerSettings;
use crate::server::ConnSettings;

pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    pub fn new() -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        Ca { issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap() }
    }

    fn der(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }

    /// (chain PEM, key PEM, leaf DER) for `localhost`, valid until `not_after` (y, m, d).
    fn leaf(&self, not_after: (i32, u8, u8)) -> (String, String, CertificateDer<'static>) {
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, not_after.2);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem(), cert.der().clone())
    }
}

struct Files {
    dir: PathBuf,
}

impl Files {
    fn new(name: &str) -> Files {
        let dir = std::env::temp_dir().join(format!("sluicegate-tls-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Files { dir }
    }

    fn cert(&self) -> PathBuf {
        self.dir.join("fullchain.pem")
    }

    fn key(&self) -> PathBuf {
        self.dir.join("privkey.pem")
    }

    /// Written as ACME clients do: each file renamed into place whole.
    fn write(&self, cert: &str, key: &str) {
        for (path, text) in [(self.cert(), cert), (self.key(), key)] {
            let next = path.with_extension("new");
            std::fs::write(&next, text).unwrap();
            std::fs::rename(&next, &path).unwrap();
        }
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn provider() -> rustls::crypto::CryptoProvider {
    rustls::crypto::ring::default_provider()
}

fn now() -> i64 {
    crate::clock::unix_now() as i64
}

fn check(cert: &Path, key: &Path) -> Result<i64, CertError> {
    load(cert, key, &provider(), now()).map(|l| l.not_after)
}

#[test]
fn a_good_pair_loads_with_its_not_after() {
    let ca = Ca::new();
    let files = Files::new("good");
    let (chain, key, _) = ca.leaf((2040, 1, 2));
    files.write(&chain, &key);
    assert_eq!(check(&files.cert(), &files.key()).unwrap(), 2_209_075_200);
}

#[test]
fn bad_pairs_are_refused_with_their_reason() {
    let ca = Ca::new();
    let files = Files::new("bad");
    let (chain, key, _) = ca.leaf((2040, 1, 2));
    let (_, other_key, _) = ca.leaf((2040, 1, 2));
    let (expired, expired_key, _) = ca.leaf((2021, 1, 1));
    let reason = |cert: &str, key: &str| {
        files.write(cert, key);
        check(&files.cert(), &files.key()).err().map(|e| e.reason())
    };
    assert_eq!(reason(&chain, &other_key), Some("key_mismatch"));
    assert_eq!(reason("", &key), Some("no_certificate"));
    assert_eq!(reason("not a certificate at all", &key), Some("no_certificate"));
    assert_eq!(reason(&chain, ""), Some("no_key"));
    assert_eq!(reason(&chain, &key.replace("PRIVATE KEY-----\n", "PRIVATE KEY-----\n!!")), Some("bad_pem"));
    assert_eq!(reason(&expired, &expired_key), Some("expired"));
    let garbage = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    assert_eq!(reason(garbage, &key), Some("bad_certificate"));
    let missing = check(&files.dir.join("absent.pem"), &files.key()).err().map(|e| e.reason());
    assert_eq!(missing, Some("unreadable"));
    // A refusal names the file at fault and never carries key material.
    files.write(&chain, &other_key);
    let message = check(&files.cert(), &files.key()).unwrap_err().to_string();
    assert!(message.contains("privkey.pem") && !message.contains("BEGIN"), "{message}");
}

fn core_with_tls(files: &Files, header_timeout: Duration, watch_interval: Option<Duration>) -> Core {
    let conn = ConnSettings { header_read_timeout: header_timeout, ..ConnSettings::default() };
    Core::new(CoreOptions {
        workers: 1,
        settings: ServerSettings { conn, ..ServerSettings::default() },
        tls: Some(TlsSettings { cert_file: files.cert(), key_file: files.key(), watch_interval }),
        ..CoreOptions::default()
    })
    .unwrap()
}

/// The clients' own runtime: the core runs on its own, started and stopped from outside any.
fn clients() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn client(ca: &Ca, alpn: &[&[u8]]) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der()).unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

type Client = tokio_rustls::client::TlsStream<TcpStream>;

async fn connect(addr: std::net::SocketAddr, ca: &Ca, alpn: &[&[u8]]) -> std::io::Result<Client> {
    let tcp = TcpStream::connect(addr).await?;
    client(ca, alpn).connect(ServerName::try_from("localhost").unwrap(), tcp).await
}

fn served_leaf(stream: &Client) -> CertificateDer<'static> {
    stream.get_ref().1.peer_certificates().unwrap()[0].clone().into_owned()
}

async fn healthz(stream: &mut Client) -> String {
    stream.write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n").await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = stream.read(&mut buf).await.unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn failures(core: &Core, failure: Failure) -> u64 {
    core.tls_handshakes()
        .map(|h| h.failed[Failure::ALL.iter().position(|f| *f == failure).unwrap()].load(Ordering::Relaxed))
        .unwrap_or(0)
}

#[test]
fn alpn_picks_h2_or_http1_and_a_reload_reaches_new_connections_only() {
    let ca = Ca::new();
    let files = Files::new("serve");
    let (chain, key, first_leaf) = ca.leaf((2040, 1, 2));
    files.write(&chain, &key);
    let core = core_with_tls(&files, Duration::from_secs(5), None);
    let addr = core.start("127.0.0.1:0").unwrap();
    clients().block_on(async {
        let h2 = connect(addr, &ca, &[b"h2", b"http/1.1"]).await.unwrap();
        assert_eq!(h2.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let mut old = connect(addr, &ca, &[b"http/1.1"]).await.unwrap();
        assert_eq!(old.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
        assert!(healthz(&mut old).await.starts_with("HTTP/1.1 200"));
        assert_eq!(served_leaf(&old), first_leaf);

        // A broken replacement: refused, counted, the pair in force stays.
        let (_, stranger_key, _) = ca.leaf((2040, 1, 2));
        files.write(&chain, &stranger_key);
        assert!(core.reload_tls().is_err());
        let again = connect(addr, &ca, &[]).await.unwrap();
        assert_eq!(served_leaf(&again), first_leaf);

        let (next_chain, next_key, next_leaf) = ca.leaf((2041, 6, 1));
        files.write(&next_chain, &next_key);
        assert_eq!(core.reload_tls().unwrap(), Reloaded::Swapped);
        assert_eq!(core.reload_tls().unwrap(), Reloaded::Unchanged);
        let fresh = connect(addr, &ca, &[]).await.unwrap();
        assert_eq!(served_leaf(&fresh), next_leaf);
        // The connection opened before the swap carries on with its session.
        assert!(healthz(&mut old).await.starts_with("HTTP/1.1 200"));

        let metrics = core.metrics_json();
        assert!(metrics.contains("\"sluicegate_tls_certificate_reload_failures_total\""));
        let h = core.tls_handshakes().unwrap();
        assert_eq!(h.completed.load(Ordering::Relaxed), 4);
        assert_eq!(h.duration.snapshot().count, 4);
        drop((h2, old, again, fresh));
    });
    core.stop(Duration::ZERO);
}

#[test]
fn silent_plain_and_distrusting_clients_fail_by_reason_and_free_their_permit() {
    let ca = Ca::new();
    let files = Files::new("fail");
    let (chain, key, _) = ca.leaf((2040, 1, 2));
    files.write(&chain, &key);
    let core = core_with_tls(&files, Duration::from_millis(300), None);
    let addr = core.start("127.0.0.1:0").unwrap();
    clients().block_on(async {
        // Silent: the first-request deadline covers the handshake.
        let mut silent = TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 16];
        let closed = tokio::time::timeout(Duration::from_secs(5), silent.read(&mut buf)).await;
        assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "the silent connection was closed");
        // Plain HTTP to the TLS port.
        let mut plain = TcpStream::connect(addr).await.unwrap();
        plain.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
        let _ = tokio::time::timeout(Duration::from_secs(5), plain.read(&mut buf)).await;
        // A client that does not trust the certificate.
        let stranger = Ca::new();
        assert!(connect(addr, &stranger, &[]).await.is_err());

        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while failures(&core, Failure::ClientAlert) == 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(failures(&core, Failure::Timeout), 1);
        assert_eq!(failures(&core, Failure::NotTls), 1);
        assert_eq!(failures(&core, Failure::ClientAlert), 1);
        let open = || core.shared().metrics.global.connections.open.load(Ordering::Relaxed);
        while open() > 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(open(), 0, "every failed handshake gave its connection back");
    });
    core.stop(Duration::ZERO);
}

#[test]
fn the_file_watch_reloads_a_replaced_pair_by_itself() {
    let ca = Ca::new();
    let files = Files::new("watch");
    let (chain, key, _) = ca.leaf((2040, 1, 2));
    files.write(&chain, &key);
    let core = core_with_tls(&files, Duration::from_secs(5), Some(Duration::from_millis(50)));
    let addr = core.start("127.0.0.1:0").unwrap();
    clients().block_on(async {
        tokio::time::sleep(Duration::from_millis(120)).await;
        let (next_chain, next_key, next_leaf) = ca.leaf((2041, 6, 1));
        files.write(&next_chain, &next_key);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let stream = connect(addr, &ca, &[]).await.unwrap();
            if served_leaf(&stream) == next_leaf {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the new pair was not picked up");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    core.stop(Duration::ZERO);
}
