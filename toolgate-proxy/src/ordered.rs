//! The upstream transport, wrapped so the server's notifications are relayed
//! to the client in the order they arrived, before the message after them.
//!
//! `rmcp` hands each notification to its handler on a task of its own while
//! a response goes straight to the waiting request, so a call's last progress
//! notification could reach the client after the call's result (the official
//! conformance scenario `tools-call-with-progress` saw it). Relaying from
//! `receive`, and finishing before the next message is read, keeps the order.

use rmcp::model::{GetMeta, JsonRpcMessage};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use std::future::Future;
use std::sync::Weak;

use crate::gateway::{CLIENT_PROGRESS_META, SessionState};

pub struct Ordered<T> {
    inner: T,
    session: Weak<SessionState>,
}

impl<T> std::fmt::Debug for Ordered<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ordered").finish_non_exhaustive()
    }
}

impl<T> Ordered<T> {
    pub fn new(inner: T, session: Weak<SessionState>) -> Ordered<T> {
        Ordered { inner, session }
    }
}

#[allow(clippy::manual_async_fn, reason = "the trait asks for `impl Future + Send`")]
impl<T: Transport<RoleClient>> Transport<RoleClient> for Ordered<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // A forwarded request's progress token is mapped to the client's
        // before the upstream can see the request, so its first progress
        // notification finds the mapping.
        if let JsonRpcMessage::Request(r) = &mut item {
            let meta = r.request.get_meta_mut();
            if let Some(client) = meta.remove(CLIENT_PROGRESS_META)
                && let (Some(upstream), Ok(client)) = (meta.get_progress_token(), serde_json::from_value(client))
                && let Some(session) = self.session.upgrade()
            {
                session.map_progress(upstream, client);
            }
        }
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        async move {
            let message = self.inner.receive().await?;
            if let JsonRpcMessage::Notification(n) = &message
                && let Some(session) = self.session.upgrade()
            {
                session.relay_notification(n.notification.clone()).await;
            }
            Some(message)
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
