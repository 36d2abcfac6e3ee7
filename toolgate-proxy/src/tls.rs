//! TLS on `--listen` (`--tls-cert`, `--tls-key`) and, with
//! `--tls-client-ca`, client certificates asked of every client (mutual
//! TLS): the gateway can face a network without a TLS-terminating proxy in
//! front of it, and bearer tokens never cross it in clear text.
//!
//! The certificate is read again when its files change (looked at, at most
//! every `RECHECK`, by the handshake that comes after): a renewed
//! certificate (cert-manager, certbot) is served without a restart. A pair
//! that does not load (half written, a key of another certificate) is said
//! and the one before is kept.

use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};
use tokio_rustls::TlsAcceptor;

use crate::ProxyError;
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
pub fn acceptor(files: &ListenTls) -> Result<TlsAcceptor, ProxyError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certificate = Arc::new(Reloading::new(files.cert.clone(), files.key.clone())?);
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

/// The server certificate, read again when its files change.
#[derive(Debug)]
struct Reloading {
    cert: PathBuf,
    key: PathBuf,
    state: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    key: Arc<CertifiedKey>,
    /// The files' modification times when `key` was read.
    stamps: (Option<SystemTime>, Option<SystemTime>),
    checked: Instant,
}

impl Reloading {
    fn new(cert: PathBuf, key: PathBuf) -> Result<Reloading, ProxyError> {
        let stamps = stamps(&cert, &key);
        let (loaded, _) = key_pair(("--tls-cert", &cert), ("--tls-key", &key))?;
        Ok(Reloading {
            state: Mutex::new(Loaded {
                key: Arc::new(loaded),
                stamps,
                checked: Instant::now(),
            }),
            cert,
            key,
        })
    }

    fn current(&self) -> Arc<CertifiedKey> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.checked.elapsed() >= RECHECK {
            state.checked = Instant::now();
            let now = stamps(&self.cert, &self.key);
            if now != state.stamps {
                match key_pair(("--tls-cert", &self.cert), ("--tls-key", &self.key)) {
                    Ok((loaded, _)) => {
                        tracing::warn!(cert = %self.cert.display(), "the TLS certificate changed: serving the new one");
                        state.key = Arc::new(loaded);
                        state.stamps = now;
                    }
                    // Retried at the next check: the files may be half written.
                    Err(e) => {
                        tracing::error!("the TLS certificate changed but does not load (the one before is kept): {e}")
                    }
                }
            }
        }
        state.key.clone()
    }
}

fn stamps(cert: &Path, key: &Path) -> (Option<SystemTime>, Option<SystemTime>) {
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    (modified(cert), modified(key))
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}
