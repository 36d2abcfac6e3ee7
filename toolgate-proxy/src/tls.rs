//! TLS on `--listen` (`--tls-cert`, `--tls-key`) and, with
//! `--tls-client-ca`, client certificates asked of every client (mutual
//! TLS): the gateway can face a network without a TLS-terminating proxy in
//! front of it, and bearer tokens never cross it in clear text.
//!
//! The certificate is read again when its files change (looked at every
//! `RECHECK`): a renewed certificate (cert-manager, certbot) is served
//! without a restart. A pair that does not load (half written, a key of
//! another certificate) is said and the one before is kept. The client CA
//! file is read once, at start; every certificate in it is a trust anchor,
//! and no revocation list is read.

use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime};
use tokio_rustls::TlsAcceptor;

use crate::ProxyError;
use crate::metrics::Metrics;
use crate::outbound::key_pair;

/// How often the certificate's files are looked at for a change.
const RECHECK: Duration = Duration::from_secs(10);

/// The files of `--listen`'s TLS.
#[derive(Debug, Clone)]
pub struct ListenTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Client certificates must chain to one of these roots.
    pub client_ca: Option<PathBuf>,
}

/// The acceptor for `files`: reads and checks everything now, so a wrong
/// file is a usage error at start.
pub fn acceptor(files: &ListenTls, metrics: Arc<Metrics>) -> Result<TlsAcceptor, ProxyError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certificate = Reloading::new(files.cert.clone(), files.key.clone(), metrics)?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| ProxyError::Usage(format!("TLS could not be set up: {e}")))?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let flag = format!("--tls-client-ca {}", path.display());
            let mut roots = rustls::RootCertStore::empty();
            for cert in read_certificates(&flag, path)? {
                roots
                    .add(cert)
                    .map_err(|e| ProxyError::Usage(format!("{flag}: not a CA certificate: {e}")))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| ProxyError::Usage(format!("{flag}: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(certificate);
    // The gateway serves HTTP/1.1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn read_certificates(flag: &str, path: &Path) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, ProxyError> {
    use rustls::pki_types::pem::PemObject;
    let pem = std::fs::read(path).map_err(|source| ProxyError::Read {
        path: path.to_owned(),
        source,
    })?;
    let certs = rustls::pki_types::CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ProxyError::Usage(format!("{flag}: not readable as PEM: {e}")))?;
    if certs.is_empty() {
        return Err(ProxyError::Usage(format!("{flag}: no PEM certificate in the file")));
    }
    Ok(certs)
}

/// The server certificate, read again when its files change: a background
/// task looks at them every `RECHECK` and reads them off the runtime's
/// threads, so a handshake only clones what is loaded (a filesystem that
/// stalls delays a renewal, never a handshake).
#[derive(Debug)]
struct Reloading {
    current: RwLock<Arc<CertifiedKey>>,
}

impl Reloading {
    fn new(cert: PathBuf, key: PathBuf, metrics: Arc<Metrics>) -> Result<Arc<Reloading>, ProxyError> {
        let stamps = stamps(&cert, &key);
        let (loaded, _) = key_pair(("--tls-cert", &cert), ("--tls-key", &key))?;
        serving(&loaded, &metrics);
        let reloading = Arc::new(Reloading {
            current: RwLock::new(Arc::new(loaded)),
        });
        tokio::spawn(watch(Arc::downgrade(&reloading), (cert, key), stamps, metrics));
        Ok(reloading)
    }

    fn current(&self) -> Arc<CertifiedKey> {
        self.current.read().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// Reads the pair again whenever the files' stamps change, until the
/// certificate is dropped. A pair that does not load (half written, a key
/// of another certificate) is said, the one before kept, and read again at
/// the next look.
async fn watch(
    reloading: std::sync::Weak<Reloading>,
    (cert, key): (PathBuf, PathBuf),
    mut seen: Stamps,
    metrics: Arc<Metrics>,
) {
    let mut ticks = tokio::time::interval(RECHECK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        if reloading.strong_count() == 0 {
            return;
        }
        let (cert, key) = (cert.clone(), key.clone());
        let read = tokio::task::spawn_blocking(move || {
            let now = stamps(&cert, &key);
            if now == seen {
                return (now, None);
            }
            let loaded = key_pair(("--tls-cert", &cert), ("--tls-key", &key)).map(|(loaded, _)| loaded);
            (now, Some((cert, loaded)))
        })
        .await;
        let Ok((now, changed)) = read else { continue };
        let Some((cert, loaded)) = changed else { continue };
        let Some(reloading) = reloading.upgrade() else { return };
        match loaded {
            Ok(loaded) => {
                tracing::warn!(cert = %cert.display(), "the TLS certificate changed: serving the new one");
                serving(&loaded, &metrics);
                *reloading.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(loaded);
                seen = now;
            }
            Err(e) => tracing::error!("the TLS certificate changed but does not load (the one before is kept): {e}"),
        }
    }
}

/// How long before its expiry a served certificate is warned about.
const EXPIRY_WARNING: Duration = Duration::from_secs(14 * 24 * 3600);

/// Reports the certificate about to be served: its expiry in the metrics
/// (`toolgate_tls_certificate_expiry_timestamp_seconds`, for an alert), and
/// a warning when it has expired or expires within `EXPIRY_WARNING`.
fn serving(certified: &CertifiedKey, metrics: &Metrics) {
    use x509_cert::der::Decode as _;
    let not_after = certified
        .cert
        .first()
        .and_then(|leaf| x509_cert::Certificate::from_der(leaf.as_ref()).ok())
        .map(|leaf| SystemTime::UNIX_EPOCH + leaf.tbs_certificate.validity.not_after.to_unix_duration());
    let Some(not_after) = not_after else { return };
    let seconds = not_after
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    metrics.tls_certificate_expires("mcp", seconds);
    match not_after.duration_since(SystemTime::now()) {
        Err(_) => tracing::error!("the TLS certificate of --listen has expired: clients will refuse it"),
        Ok(left) if left < EXPIRY_WARNING => tracing::warn!(
            days = left.as_secs() / 86_400,
            "the TLS certificate of --listen expires soon: renew it (its files are read again when they change)"
        ),
        Ok(_) => {}
    }
}

/// The files' modification times and lengths: a change of either is a
/// change (a rewrite within one clock tick changes the length, mostly).
type Stamps = [Option<(SystemTime, u64)>; 2];

fn stamps(cert: &Path, key: &Path) -> Stamps {
    let stamp = |path: &Path| {
        std::fs::metadata(path)
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())))
    };
    [stamp(cert), stamp(key)]
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}
