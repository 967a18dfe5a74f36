//! The gRPC service (`apache.rocketmq.v2.MessagingService`) over a [`Frontend`]: request
//! metadata, the per-RPC handlers of `route`, `send`, `txn`, the client registration
//! RPCs (Heartbeat, NotifyClientTermination) and the Telemetry stream's settings
//! exchange (docs/design/pop-grpc.md §3.3–3.4), and [`serve`] on a listener.
//!
//! Invariants: every backend call ends within `FrontendConfig::backend_timeout_ms`; a
//! Telemetry stream's outbound queue holds at most `TELEMETRY_OUTBOUND_MAX` commands
//! (a full queue drops the server command, counted in the log: the client re-sends
//! settings, and a check-back is retried by the broker); inbound messages are at most
//! `INBOUND_MESSAGE_BYTES_MAX`; at most `GRPC_CONNECTIONS_MAX` connections are served
//! at once; RPCs WP7 serves (receive, ack, change invisible, DLQ)
//! answer NOT_IMPLEMENTED until then.

use crate::backend::{Backend, BackendError, Target};
use crate::metadata::ClientMeta;
use crate::pb::messaging_service_server::{MessagingService, MessagingServiceServer};
use crate::pb::{self, ClientType, Code};
use crate::route::{validate_group, validate_topic, MetadataCache};
use crate::settings::{self, ClientTable};
use crate::status::{self, GrpcError};
use crate::txn::{TxnData, TxnTable};
use crate::Clock;
use ringmq_client::remoting::RemotingCommand;
use std::pin::Pin;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

/// RingMQ's frame limit plus headroom (not Apache's 130 MiB).
pub const INBOUND_MESSAGE_BYTES_MAX: usize = 16 * 1024 * 1024 + 64 * 1024;
/// HTTP/2 streams per connection.
pub const MAX_CONCURRENT_STREAMS: u32 = 1024;
/// Server commands waiting to be written on one Telemetry stream.
pub const TELEMETRY_OUTBOUND_MAX: usize = 64;

/// The front end's settings.
#[derive(Debug, Clone)]
pub struct FrontendConfig {
    /// `maxMessageSize` (4 MiB by default).
    pub max_message_bytes: usize,
    /// Longest delay a delivery timestamp may ask (`maxDelayTimeMills`, 1 day).
    pub max_delay_ms: i64,
    /// Longest wait for one backend answer.
    pub backend_timeout_ms: u64,
}

impl Default for FrontendConfig {
    fn default() -> Self {
        Self { max_message_bytes: 4 * 1024 * 1024, max_delay_ms: crate::send::MAX_DELAY_MS_DEFAULT, backend_timeout_ms: 3_000 }
    }
}

/// Everything the RPC handlers share.
pub struct Frontend {
    pub backend: Arc<dyn Backend>,
    pub clock: Arc<dyn Clock>,
    pub config: FrontendConfig,
    pub metadata: MetadataCache,
    pub clients: Mutex<ClientTable>,
    pub transactions: Mutex<TxnTable>,
    /// Round-robin position of sends without a message group.
    pub send_rr: AtomicUsize,
}

impl Frontend {
    pub fn new(backend: Arc<dyn Backend>, clock: Arc<dyn Clock>, config: FrontendConfig) -> Self {
        Self {
            backend,
            clock,
            config,
            metadata: MetadataCache::default(),
            clients: Mutex::new(ClientTable::default()),
            transactions: Mutex::new(TxnTable::default()),
            send_rr: AtomicUsize::new(0),
        }
    }

    /// One backend call, bounded by `backend_timeout_ms`.
    pub async fn call(&self, target: Target, cmd: RemotingCommand) -> Result<RemotingCommand, BackendError> {
        let ms = self.config.backend_timeout_ms;
        match tokio::time::timeout(Duration::from_millis(ms), self.backend.call(target, cmd)).await {
            Ok(r) => r,
            Err(_) => Err(BackendError::Timeout { ms }),
        }
    }

    pub fn record_transaction(&self, group: &str, transaction_id: &str, data: TxnData) {
        let now = self.clock.now_ms();
        if let Ok(mut t) = self.transactions.lock() {
            t.insert(group, transaction_id, data, now);
        }
    }

    pub fn take_transaction(&self, group: &str, transaction_id: &str) -> Option<TxnData> {
        let now = self.clock.now_ms();
        self.transactions.lock().ok()?.take(group, transaction_id, now)
    }

    fn client(&self, client_id: &str) -> Option<settings::ClientEntry> {
        let now = self.clock.now_ms();
        self.clients.lock().ok()?.touch(client_id, now).cloned()
    }

    /// Registers a client with the brokers as its settings say (Apache
    /// `processAndWriteClientSettings` / `heartbeat`); `group` overrides the settings'
    /// group (a Heartbeat names it).
    async fn register(&self, meta: &ClientMeta, s: &pb::Settings, group: Option<String>) -> Result<(), GrpcError> {
        let client_type = ClientType::try_from(s.client_type.unwrap_or(0)).unwrap_or(ClientType::Unspecified);
        let cmd = match (&s.pub_sub, client_type) {
            (Some(pb::settings::PubSub::Publishing(_)), _) | (_, ClientType::Producer) => {
                let topics = settings::publishing_topics(meta, s);
                for t in &topics {
                    validate_topic(t)?;
                }
                settings::producer_heartbeat(meta, &topics)
            }
            (Some(pb::settings::PubSub::Subscription(_)), ClientType::PushConsumer | ClientType::SimpleConsumer) => {
                let group = group.or_else(|| settings::subscription_group(meta, s)).unwrap_or_default();
                validate_group(&group)?;
                settings::consumer_heartbeat(meta, &group, client_type, settings::subscriptions(s), self.clock.now_ms())
            }
            _ => return Err(GrpcError::new(Code::UnrecognizedClientType, client_type.as_str_name())),
        };
        status::expect_success(self.call(Target::EveryBroker, cmd).await?)?;
        Ok(())
    }

    /// The settings answer: the client's merged with the front end's (Apache
    /// `GrpcClientSettingsManager.getClientSettings`).
    async fn merged_settings(&self, meta: &ClientMeta, s: pb::Settings) -> Result<pb::Settings, GrpcError> {
        let merged = match &s.pub_sub {
            Some(pb::settings::PubSub::Publishing(_)) => settings::merge_producer(s, i32::try_from(self.config.max_message_bytes).unwrap_or(i32::MAX)),
            Some(pb::settings::PubSub::Subscription(_)) => {
                let group = settings::subscription_group(meta, &s).unwrap_or_default();
                let view = self.group_view(&group).await?;
                settings::merge_consumer(s, view.as_ref())
            }
            None => s,
        };
        Ok(settings::merge_metric(merged))
    }

    /// A Telemetry `Settings` command: store, register, answer.
    pub async fn on_settings(&self, meta: &ClientMeta, s: pb::Settings, telemetry: Option<settings::TelemetrySender>) -> Result<pb::TelemetryCommand, GrpcError> {
        if s.pub_sub.is_none() {
            return Err(GrpcError::new(Code::BadRequest, "there is no publishing or subscription data in settings"));
        }
        self.register(meta, &s, None).await?;
        let now = self.clock.now_ms();
        self.clients.lock().map_err(|_| GrpcError::new(Code::InternalServerError, "client table poisoned"))?.upsert(&meta.client_id, s.clone(), meta.language, telemetry, now)?;
        let merged = self.merged_settings(meta, s).await?;
        Ok(pb::TelemetryCommand { status: Some(status::ok()), command: Some(pb::telemetry_command::Command::Settings(merged)) })
    }

    /// Heartbeat.
    pub async fn heartbeat(&self, meta: &ClientMeta, req: pb::HeartbeatRequest) -> Result<pb::HeartbeatResponse, GrpcError> {
        let entry = self.client(&meta.client_id).ok_or_else(|| GrpcError::new(Code::UnrecognizedClientType, "cannot find client settings for this client"))?;
        let group = match entry.client_type() {
            ClientType::PushConsumer | ClientType::SimpleConsumer => Some(meta.resource_name(&req.group.unwrap_or_default())),
            ClientType::Producer => None,
            other => return Err(GrpcError::new(Code::UnrecognizedClientType, other.as_str_name())),
        };
        self.register(meta, &entry.settings, group).await?;
        Ok(pb::HeartbeatResponse { status: Some(status::ok()) })
    }

    /// NotifyClientTermination: unregister and forget the client.
    pub async fn notify_client_termination(&self, meta: &ClientMeta, req: pb::NotifyClientTerminationRequest) -> Result<pb::NotifyClientTerminationResponse, GrpcError> {
        let entry = self
            .clients
            .lock()
            .map_err(|_| GrpcError::new(Code::InternalServerError, "client table poisoned"))?
            .remove(&meta.client_id)
            .ok_or_else(|| GrpcError::new(Code::UnrecognizedClientType, "cannot find client settings for this client"))?;
        match entry.client_type() {
            ClientType::Producer => {
                for topic in settings::publishing_topics(meta, &entry.settings) {
                    status::expect_success(self.call(Target::EveryBroker, settings::unregister(meta, Some(&topic), None)).await?)?;
                }
            }
            ClientType::PushConsumer | ClientType::SimpleConsumer => {
                let group = meta.resource_name(&req.group.unwrap_or_default());
                validate_group(&group)?;
                status::expect_success(self.call(Target::EveryBroker, settings::unregister(meta, None, Some(&group))).await?)?;
            }
            other => return Err(GrpcError::new(Code::UnrecognizedClientType, other.as_str_name())),
        }
        Ok(pb::NotifyClientTerminationResponse { status: Some(status::ok()) })
    }
}

/// The tonic service over a shared [`Frontend`].
#[derive(Clone)]
pub struct Service {
    fe: Arc<Frontend>,
}

impl Service {
    pub fn new(fe: Arc<Frontend>) -> Self {
        Self { fe }
    }

    /// The tonic server with the front end's limits.
    pub fn into_server(self) -> MessagingServiceServer<Self> {
        MessagingServiceServer::new(self).max_decoding_message_size(INBOUND_MESSAGE_BYTES_MAX)
    }
}

fn meta_of<T>(req: &Request<T>) -> Result<ClientMeta, GrpcError> {
    let mut meta = ClientMeta::from_metadata(req.metadata())?;
    meta.peer = req.remote_addr().map(|a| a.to_string()).unwrap_or_default();
    Ok(meta)
}

fn not_implemented(rpc: &str) -> pb::Status {
    status::status(Code::NotImplemented, format!("{rpc} is not implemented by RingMQ yet"))
}

/// Runs a unary handler; an error becomes the response's status (`with_status`).
macro_rules! unary {
    ($self:ident, $req:ident, $resp:ty, |$fe:ident, $meta:ident, $body:ident| $call:expr) => {{
        let meta = meta_of(&$req);
        let $body = $req.into_inner();
        let $fe = &$self.fe;
        let result: Result<$resp, GrpcError> = match meta {
            Ok($meta) => {
                let $meta = &$meta;
                $call.await
            }
            Err(e) => Err(e),
        };
        Ok(Response::new(result.unwrap_or_else(|e| <$resp>::default().with_status(e.to_status()))))
    }};
}

/// Responses whose first field is a `Status`.
pub trait WithStatus {
    fn with_status(self, status: pb::Status) -> Self;
}

macro_rules! with_status {
    ($($t:ty),*) => {$(
        impl WithStatus for $t {
            fn with_status(mut self, status: pb::Status) -> Self {
                self.status = Some(status);
                self
            }
        }
    )*};
}
with_status!(
    pb::QueryRouteResponse,
    pb::HeartbeatResponse,
    pb::SendMessageResponse,
    pb::QueryAssignmentResponse,
    pb::AckMessageResponse,
    pb::ForwardMessageToDeadLetterQueueResponse,
    pb::UpdateOffsetResponse,
    pb::GetOffsetResponse,
    pb::QueryOffsetResponse,
    pb::EndTransactionResponse,
    pb::NotifyClientTerminationResponse,
    pb::ChangeInvisibleDurationResponse,
    pb::RecallMessageResponse,
    pb::SyncLiteSubscriptionResponse
);

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

fn status_stream<T: Send + 'static>(item: T) -> BoxStream<T> {
    Box::pin(tokio_stream::once(Ok(item)))
}

#[tonic::async_trait]
impl MessagingService for Service {
    async fn query_route(&self, req: Request<pb::QueryRouteRequest>) -> Result<Response<pb::QueryRouteResponse>, Status> {
        unary!(self, req, pb::QueryRouteResponse, |fe, meta, body| crate::route::query_route(fe, meta, body))
    }

    async fn heartbeat(&self, req: Request<pb::HeartbeatRequest>) -> Result<Response<pb::HeartbeatResponse>, Status> {
        unary!(self, req, pb::HeartbeatResponse, |fe, meta, body| fe.heartbeat(meta, body))
    }

    async fn send_message(&self, req: Request<pb::SendMessageRequest>) -> Result<Response<pb::SendMessageResponse>, Status> {
        unary!(self, req, pb::SendMessageResponse, |fe, meta, body| crate::send::send_message(fe, meta, body))
    }

    async fn query_assignment(&self, req: Request<pb::QueryAssignmentRequest>) -> Result<Response<pb::QueryAssignmentResponse>, Status> {
        unary!(self, req, pb::QueryAssignmentResponse, |fe, meta, body| crate::route::query_assignment(fe, meta, body))
    }

    type ReceiveMessageStream = BoxStream<pb::ReceiveMessageResponse>;

    async fn receive_message(&self, _req: Request<pb::ReceiveMessageRequest>) -> Result<Response<Self::ReceiveMessageStream>, Status> {
        let status = pb::ReceiveMessageResponse { content: Some(pb::receive_message_response::Content::Status(not_implemented("ReceiveMessage"))) };
        Ok(Response::new(status_stream(status)))
    }

    async fn ack_message(&self, _req: Request<pb::AckMessageRequest>) -> Result<Response<pb::AckMessageResponse>, Status> {
        Ok(Response::new(pb::AckMessageResponse::default().with_status(not_implemented("AckMessage"))))
    }

    async fn forward_message_to_dead_letter_queue(&self, _req: Request<pb::ForwardMessageToDeadLetterQueueRequest>) -> Result<Response<pb::ForwardMessageToDeadLetterQueueResponse>, Status> {
        Ok(Response::new(pb::ForwardMessageToDeadLetterQueueResponse::default().with_status(not_implemented("ForwardMessageToDeadLetterQueue"))))
    }

    type PullMessageStream = BoxStream<pb::PullMessageResponse>;

    async fn pull_message(&self, _req: Request<pb::PullMessageRequest>) -> Result<Response<Self::PullMessageStream>, Status> {
        let status = pb::PullMessageResponse { content: Some(pb::pull_message_response::Content::Status(not_implemented("PullMessage"))) };
        Ok(Response::new(status_stream(status)))
    }

    async fn update_offset(&self, _req: Request<pb::UpdateOffsetRequest>) -> Result<Response<pb::UpdateOffsetResponse>, Status> {
        Ok(Response::new(pb::UpdateOffsetResponse::default().with_status(not_implemented("UpdateOffset"))))
    }

    async fn get_offset(&self, _req: Request<pb::GetOffsetRequest>) -> Result<Response<pb::GetOffsetResponse>, Status> {
        Ok(Response::new(pb::GetOffsetResponse::default().with_status(not_implemented("GetOffset"))))
    }

    async fn query_offset(&self, _req: Request<pb::QueryOffsetRequest>) -> Result<Response<pb::QueryOffsetResponse>, Status> {
        Ok(Response::new(pb::QueryOffsetResponse::default().with_status(not_implemented("QueryOffset"))))
    }

    async fn end_transaction(&self, req: Request<pb::EndTransactionRequest>) -> Result<Response<pb::EndTransactionResponse>, Status> {
        unary!(self, req, pb::EndTransactionResponse, |fe, meta, body| crate::txn::end_transaction(fe, meta, body))
    }

    type TelemetryStream = BoxStream<pb::TelemetryCommand>;

    async fn telemetry(&self, req: Request<Streaming<pb::TelemetryCommand>>) -> Result<Response<Self::TelemetryStream>, Status> {
        let meta = meta_of(&req).map_err(|e| Status::invalid_argument(e.message))?;
        let mut inbound = req.into_inner();
        let (tx, rx) = mpsc::channel(TELEMETRY_OUTBOUND_MAX);
        let fe = self.fe.clone();
        tokio::spawn(async move {
            while let Some(cmd) = inbound.next().await {
                let cmd = match cmd {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::debug!(client = %meta.client_id, error = %e, "telemetry stream failed");
                        break;
                    }
                };
                match cmd.command {
                    Some(pb::telemetry_command::Command::Settings(s)) => match fe.on_settings(&meta, s, Some(tx.clone())).await {
                        Ok(answer) => {
                            if tx.try_send(Ok(answer)).is_err() {
                                tracing::warn!(client = %meta.client_id, "telemetry outbound queue full: settings answer dropped");
                            }
                        }
                        Err(e) => {
                            // Apache processTelemetryException: 4xxxx codes are the client's fault.
                            let msg = format!("process client telemetryCommand failed. {}", e.message);
                            let status = if (Code::BadRequest as i32..Code::InternalError as i32).contains(&(e.code as i32)) { Status::invalid_argument(msg) } else { Status::internal(msg) };
                            let _ = tx.try_send(Err(status));
                            break;
                        }
                    },
                    Some(pb::telemetry_command::Command::ThreadStackTrace(_)) | Some(pb::telemetry_command::Command::VerifyMessageResult(_)) => {
                        // Answers to broker→client commands RingMQ does not send to gRPC clients yet (WP7).
                        tracing::debug!(client = %meta.client_id, "telemetry report ignored");
                    }
                    _ => {}
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn notify_client_termination(&self, req: Request<pb::NotifyClientTerminationRequest>) -> Result<Response<pb::NotifyClientTerminationResponse>, Status> {
        unary!(self, req, pb::NotifyClientTerminationResponse, |fe, meta, body| fe.notify_client_termination(meta, body))
    }

    async fn change_invisible_duration(&self, _req: Request<pb::ChangeInvisibleDurationRequest>) -> Result<Response<pb::ChangeInvisibleDurationResponse>, Status> {
        Ok(Response::new(pb::ChangeInvisibleDurationResponse::default().with_status(not_implemented("ChangeInvisibleDuration"))))
    }

    async fn recall_message(&self, _req: Request<pb::RecallMessageRequest>) -> Result<Response<pb::RecallMessageResponse>, Status> {
        Ok(Response::new(pb::RecallMessageResponse::default().with_status(not_implemented("RecallMessage"))))
    }

    async fn sync_lite_subscription(&self, _req: Request<pb::SyncLiteSubscriptionRequest>) -> Result<Response<pb::SyncLiteSubscriptionResponse>, Status> {
        Ok(Response::new(pb::SyncLiteSubscriptionResponse::default().with_status(not_implemented("SyncLiteSubscription"))))
    }
}

/// Most client connections served at once; further ones wait in the listen backlog
/// until one closes.
pub const GRPC_CONNECTIONS_MAX: usize = 4096;
/// Pause after a failed accept (EMFILE and the like) before the next one.
pub const ACCEPT_ERROR_BACKOFF_MS: u64 = 100;

/// Serves the front end on `listener` until `shutdown` completes.
pub async fn serve(listener: tokio::net::TcpListener, fe: Arc<Frontend>, shutdown: impl std::future::Future<Output = ()> + Send) -> Result<(), tonic::transport::Error> {
    serve_with_limit(listener, fe, GRPC_CONNECTIONS_MAX, shutdown).await
}

/// [`serve`] with at most `connections_max` connections at once.
pub async fn serve_with_limit(listener: tokio::net::TcpListener, fe: Arc<Frontend>, connections_max: usize, shutdown: impl std::future::Future<Output = ()> + Send) -> Result<(), tonic::transport::Error> {
    let permits = Arc::new(tokio::sync::Semaphore::new(connections_max));
    // One accepted connection at a time is handed over; the permit is taken before the
    // accept, so a full server leaves new connections in the kernel's backlog.
    let (tx, rx) = mpsc::channel::<std::io::Result<limit::Limited>>(1);
    tokio::spawn(async move {
        loop {
            let permit = tokio::select! {
                p = permits.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
                _ = tx.closed() => return,
            };
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = tx.closed() => return,
            };
            match accepted {
                Ok((stream, _)) => {
                    if tx.send(Ok(limit::Limited { inner: stream, _permit: permit })).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "gRPC accept failed");
                    tokio::time::sleep(Duration::from_millis(ACCEPT_ERROR_BACKOFF_MS)).await;
                }
            }
        }
    });
    tonic::transport::Server::builder()
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .add_service(Service::new(fe).into_server())
        .serve_with_incoming_shutdown(ReceiverStream::new(rx), shutdown)
        .await
}

mod limit {
    //! A TCP stream that holds a connection permit until it is dropped.
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
    use tonic::transport::server::{Connected, TcpConnectInfo};

    pub struct Limited {
        pub inner: tokio::net::TcpStream,
        pub _permit: tokio::sync::OwnedSemaphorePermit,
    }

    impl Connected for Limited {
        type ConnectInfo = TcpConnectInfo;
        fn connect_info(&self) -> TcpConnectInfo {
            self.inner.connect_info()
        }
    }

    impl AsyncRead for Limited {
        fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for Limited {
        fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
            Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
        }
        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_flush(cx)
        }
        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
        }
        fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[std::io::IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
            Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
        }
        fn is_write_vectored(&self) -> bool {
            self.inner.is_write_vectored()
        }
    }
}
