use std::path::PathBuf;

/// Everything that stops the proxy from starting or serving. Errors that
/// happen while serving a request are answered to the client instead.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("{}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("the policy engine could not start: {0}")]
    Engine(Box<toolgate::Error>),
    #[error("{}: {source}", path.display())]
    Policy {
        path: PathBuf,
        source: Box<toolgate::Error>,
    },
    #[error("the audit log {}: {source}", path.display())]
    Audit { path: PathBuf, source: std::io::Error },
    #[error("could not start the upstream server `{command}`: {source}")]
    Spawn { command: String, source: std::io::Error },
    #[error("could not listen on {addr}: {source}")]
    Listen { addr: String, source: std::io::Error },
    #[error("{0}")]
    Usage(String),
    /// An input the gateway needs at start could not be reached or loaded
    /// (the confirmation store of `--store`, the issuer's key set of
    /// `--jwks`): it does not start (exit 2, as for a policy it cannot read).
    #[error("{0}")]
    Input(String),
    #[error("could not read the server's tool catalog: {0}")]
    Catalog(String),
    #[error("serving the client failed: {0}")]
    Serve(String),
    #[error("could not start the async runtime: {0}")]
    Runtime(std::io::Error),
}
