//! `toolgate proxy`: an MCP gateway that puts toolgate's policy in front of
//! any MCP server.
//!
//! The client speaks MCP to the proxy (stdio, or Streamable HTTP with
//! `--listen`); the proxy speaks MCP to the upstream server (a child process
//! over stdio, or Streamable HTTP with `--upstream URL`). Both sides use the
//! official Rust SDK (`rmcp`). Everything that is not a tool decision passes
//! through; `tools/list` is answered from the policy engine over the
//! upstream's live catalog, and every `tools/call` is evaluated before it is
//! forwarded.

#[macro_use]
mod say;
pub mod approve;
mod audit;
pub mod auth;
pub mod catalog;
mod cli;
pub mod codes;
pub mod confirm;
mod cors;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod gate;
mod gateway;
mod headers;
mod http;
pub mod ledger;
mod listen;
pub mod metrics;
mod ordered;
pub mod outbound;
mod owners;
pub mod policy;
pub mod seal;
pub mod stdio;
mod tasks;
pub mod tls;
mod upstream;

pub use audit::Audit;
pub use cli::{ProxyArgs, SurfaceArg, main_with, run};
pub use error::ProxyError;
pub use gateway::{Config, Connector, Gateway, HttpUpstream, UpstreamLink, UpstreamSpec};
