//! The broker's Kubernetes client: kube's default stack (built here, with the connection pool
//! and read buffers the broker needs: `http_service`), with the screening of collection
//! reads ([`crate::screening`]) on top, so that no object can fail the LIST or WATCH of the
//! others. Controllers use it as any `kube::Client` and never see an object that
//! does not decode: it is absent from their stores, and reported by [`super::quarantine`].
//!
//! A LIST body is collected, screened and handed on whole (kube collects it anyway); a WATCH
//! body is screened line by line as it streams, each complete event as soon as its newline
//! arrives. A watch's first list goes to the API server as one request, its pages cut from the
//! answer ([`super::paged_answers`]). Any other JSON answer (one object: a write's, a GET's) is
//! collected and handed on without its `metadata.managedFields`, which kube would otherwise
//! decode for nothing.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{Method, Request, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::retry::RetryPolicy;
use kube::client::{ClientBuilder, ConfigExt, DynBody};
use tower::layer::layer_fn;
use tower::retry::RetryLayer;
use tower::util::BoxService;
use tower::{BoxError, Service, ServiceBuilder};
use tower_http::ServiceExt as _;
use tower_http::trace::TraceLayer;

use super::fence::{Fenced, WriteFence};
use super::paged_answers::PagedAnswers;
use super::quarantine::Quarantine;
use crate::api::OperatorDomain;
use crate::api::kinds::{
    ClaimObject, HandleObject, Kinds, PoolObject, ProviderObject, ScalingObject, WatchObject,
};
use crate::metrics::Metrics;
use crate::screening::request::{CollectionRead, verb};
use crate::screening::{Line, TypedDecode, screen_event, screen_list};
use crate::store::health::WatchHealth;

/// How long a response from the API server may stay silent before the request fails (and is
/// retried): longer than any request (60 s) or watch (`store::shared_watch::WATCH_TIMEOUT_SECS`)
/// the server keeps open.
const API_READ_TIMEOUT: Duration = Duration::from_secs(90);

/// `config` with the broker's read timeout. kube sets none, so a response lost on the way
/// would stall its reconcile (or a watch's initial list) for good; the API server ends every
/// request and every watch of the broker within 60 s, so nothing legitimate is this quiet.
pub fn with_read_timeout(mut config: kube::Config) -> kube::Config {
    config.read_timeout = Some(API_READ_TIMEOUT);
    config.reset_reader_on_write = true;
    config
}

/// The client every operator process uses, and the registry of what its screening set aside.
pub fn broker_client(
    config: kube::Config,
    domain: &OperatorDomain,
) -> Result<(kube::Client, Quarantine), kube::Error> {
    build(config, domain, Reporting::default(), IDLE_CONNECTIONS, None)
}

/// Where a client reports what it sees, besides its logs.
#[derive(Default)]
pub(crate) struct Reporting {
    /// Each request, by verb.
    pub(crate) metrics: Option<Arc<Metrics>>,
    /// Each watch the API server accepted ([`WatchHealth::answered`]).
    pub(crate) health: Option<WatchHealth>,
}

/// [`broker_client`], reporting to `reporting`, keeping up to `idle_connections` connections
/// for a next request: as many as the requests the broker may have in flight at once, or each
/// burst past them opens connections (a TLS handshake each, on both sides) that a pool already
/// full closes as soon as they are done. With `fence`, its writes go only while the replica's
/// Lease holds.
pub(crate) fn counted_broker_client(
    config: kube::Config,
    domain: &OperatorDomain,
    reporting: Reporting,
    idle_connections: usize,
    fence: Option<WriteFence>,
) -> Result<(kube::Client, Quarantine), kube::Error> {
    build(config, domain, reporting, idle_connections, fence)
}

fn build(
    mut config: kube::Config,
    domain: &OperatorDomain,
    Reporting { metrics, health }: Reporting,
    idle_connections: usize,
    fence: Option<WriteFence>,
) -> Result<(kube::Client, Quarantine), kube::Error> {
    // The API server names the field manager of a write without `fieldManager` after the
    // client's User-Agent up to its first `/`: `poolboy` in every object's managedFields,
    // where kube's client, which sends none, leaves `unknown`.
    config
        .headers
        .retain(|(name, _)| *name != http::header::USER_AGENT);
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(USER_AGENT),
    ));
    let quarantine = Quarantine::default();
    let screening = Arc::new(Screening::new(domain, quarantine.clone()));
    let builder = match config.proxy_url {
        // kube's own stack knows the proxies a kubeconfig may name.
        Some(_) => ClientBuilder::try_from(config)?,
        None => {
            let namespace = config.default_namespace.clone();
            ClientBuilder::new(http_service(&config, idle_connections)?, namespace)
        }
    };
    // Innermost first: the requests counted are those the API server sees, and the pages cut
    // from a whole answer are screened as any page.
    let client = builder
        .with_layer(&layer_fn(|inner| Counted {
            inner,
            metrics: metrics.clone(),
        }))
        .with_layer(&layer_fn(PagedAnswers::<_, Box<DynBody>>::new))
        .with_layer(&layer_fn(|inner| ScreenedService {
            inner,
            screening: screening.clone(),
            health: health.clone(),
        }))
        .with_layer(&layer_fn(|inner| Fenced::new(inner, fence.clone())))
        .build();
    Ok((client, quarantine))
}

/// How long a connection to the API server is kept idle for a next request (hyper-util's
/// default: 90 s). Each keeps its buffers and TLS state: after a busy minute the broker held 21
/// idle connections against 6 to 8 at rest. A steady load reuses its connections well within
/// it; a burst's are closed 5 to 10 s after it (the pool looks once per timeout): at 10 s, those
/// of `make soak`'s final deletions were still open when it measured the broker at rest.
const IDLE_CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);

/// The idle connections a client keeps at most when its caller does not say (hyper-util's
/// default: no bound). The broker says: the requests it may have in flight, since at 4 it
/// opened 99 connections a minute under `make soak` (a TLS handshake each, on both sides) as
/// its passes and Events went past 4 at once, and 3 at 24, its controllers' share
/// (docs/operations.md, "Where the CPU goes").
const IDLE_CONNECTIONS: usize = 8;

/// The size of each connection's read buffer. hyper's default (adaptive) buffer doubles
/// whenever a read fills it, up to 400 KiB, and keeps that size for the connection's life: a
/// heap profile after 12 minutes of `make soak` found 0.79 MiB in the read buffers of 7
/// connections, against 0.08 MiB in 8 after 5 minutes, so the broker's memory followed the
/// bursts it had seen. At a fixed size a large LIST takes more reads, each of them cheap.
const READ_BUFFER_BYTES: usize = 32 * 1024;

/// What kube's `ClientBuilder::try_from` builds (kube names it `GenericService`).
type HttpService = BoxService<Request<kube::client::Body>, Response<Box<DynBody>>, BoxError>;

/// kube's default HTTP stack (`ClientBuilder::try_from`: TLS, timeouts, base URI, retries of
/// 429/503/504, authentication, extra headers, request spans), with hyper-util's client built
/// here: kube's leaves its connection pool and read buffer at their defaults.
fn http_service(
    config: &kube::Config,
    idle_connections: usize,
) -> Result<HttpService, kube::Error> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let mut connector = TimeoutConnector::new(config.rustls_https_connector_with_connector(http)?);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let client: HttpClient<_, kube::client::Body> = HttpClient::builder(TokioExecutor::new())
        .pool_idle_timeout(IDLE_CONNECTION_TIMEOUT)
        .pool_max_idle_per_host(idle_connections)
        .http1_read_buf_exact_size(READ_BUFFER_BYTES)
        .build(connector);
    let retry = config
        .default_retry
        .then(|| RetryLayer::new(RetryPolicy::server_retry()));
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(retry)
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .layer(TraceLayer::new_for_http())
        .map_err(BoxError::from)
        .service(client)
        .map_response_body(|body| Box::new(BodyExt::map_err(body, BoxError::from)) as Box<DynBody>);
    Ok(BoxService::new(service))
}

/// Counts the requests the broker makes, by verb (`poolboy_api_requests_total`).
#[derive(Clone)]
struct Counted<S> {
    inner: S,
    metrics: Option<Arc<Metrics>>,
}

impl<S, R> Service<Request<R>> for Counted<S>
where
    S: Service<Request<R>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<R>) -> S::Future {
        if let Some(metrics) = &self.metrics {
            let uri = request.uri();
            metrics.api_request(verb(request.method().as_str(), uri.path(), uri.query()));
        }
        self.inner.call(request)
    }
}

/// `poolboy/<version>`: the field manager of every write is `poolboy`.
const USER_AGENT: &str = concat!("poolboy/", env!("CARGO_PKG_VERSION"));

/// What the screening of one client knows: the typed decode of each of the broker's kinds,
/// by group and then plural (so that each event's lookup copies neither), and where set-aside
/// objects are reported.
struct Screening {
    typed: HashMap<String, HashMap<String, TypedDecode>>,
    quarantine: Quarantine,
}

impl Screening {
    fn new(domain: &OperatorDomain, quarantine: Quarantine) -> Self {
        let kinds = Kinds::new(domain);
        let mut typed: HashMap<String, HashMap<String, TypedDecode>> = HashMap::new();
        for (resource, decode) in [
            (&kinds.claim, TypedDecode::of::<ClaimObject>()),
            (&kinds.handle, TypedDecode::of::<HandleObject>()),
            (&kinds.pool, TypedDecode::of::<PoolObject>()),
            (&kinds.provider, TypedDecode::of::<ProviderObject>()),
            (&kinds.scaling, TypedDecode::of::<ScalingObject>()),
            (&kinds.watch, TypedDecode::of::<WatchObject>()),
        ] {
            typed
                .entry(resource.group.clone())
                .or_default()
                .insert(resource.plural.clone(), decode);
        }
        Self { typed, quarantine }
    }

    fn decode_of(&self, read: &CollectionRead) -> Option<TypedDecode> {
        if read.metadata_only {
            return None;
        }
        self.typed.get(&read.group)?.get(&read.plural).copied()
    }

    /// The LIST body `body`, without the items that do not decode.
    fn list(&self, read: &CollectionRead, body: Bytes) -> Bytes {
        let Ok(text) = std::str::from_utf8(&body) else {
            return body;
        };
        let names = self.quarantine.holds_any_of(read);
        let Some(screen) = screen_list(text, self.decode_of(read), names) else {
            return body;
        };
        // A complete list shows every object of its scope: not narrowed by a selector, not
        // one page of several.
        let complete = names && !read.selective && !read.continued && !screen.paged;
        self.quarantine.record(read, screen.seen, complete);
        match screen.body {
            Some(rewritten) => Bytes::from(rewritten),
            None => body,
        }
    }

    /// One WATCH event line (without its newline).
    fn event(&self, read: &CollectionRead, line: &[u8]) -> Line {
        let Ok(text) = std::str::from_utf8(line) else {
            return Line::Keep;
        };
        let names = self.quarantine.holds_any_of(read);
        let screen = screen_event(text, self.decode_of(read), names);
        if let Some(seen) = screen.seen {
            self.quarantine.record(read, vec![seen], false);
        }
        screen.line
    }
}

/// Screens the responses of collection reads, and tells `health` of the watches accepted.
#[derive(Clone)]
pub(crate) struct ScreenedService<S> {
    inner: S,
    screening: Arc<Screening>,
    health: Option<WatchHealth>,
}

impl<S, B> Service<Request<kube::client::Body>> for ScreenedService<S>
where
    S: Service<Request<kube::client::Body>, Response = Response<B>>,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<ScreenedBody<B>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<kube::client::Body>) -> Self::Future {
        let read = if request.method() == Method::GET {
            CollectionRead::of_get(request.uri().path(), request.uri().query())
        } else {
            None
        };
        let read = read.map(|read| CollectionRead {
            metadata_only: request
                .headers()
                .get(http::header::ACCEPT)
                .and_then(|accept| accept.to_str().ok())
                .is_some_and(|accept| accept.contains("as=PartialObjectMetadata")),
            ..read
        });
        let screening = self.screening.clone();
        // A LIST says nothing of a WATCH: the rights to one may come without the other.
        let accepted = match (&self.health, &read) {
            (Some(health), Some(read)) if read.watch => {
                Some((health.clone(), request.uri().path().to_owned()))
            }
            _ => None,
        };
        let response = self.inner.call(request);
        Box::pin(async move {
            let mut response = response.await?;
            if let Some((health, path)) = accepted
                && response.status().is_success()
            {
                health.answered(&path);
            }
            let screened =
                response.status().is_success() && (read.is_some() || is_json(response.headers()));
            if screened {
                // The body may change length.
                response.headers_mut().remove(http::header::CONTENT_LENGTH);
            }
            Ok(response.map(|inner| {
                let mode = match read {
                    _ if !screened => Mode::Pass,
                    Some(read) if read.watch => Mode::Watch(WatchLines::new(read, screening)),
                    Some(read) => Mode::Whole(WholeBody::new(Whole::List(read, screening))),
                    None => Mode::Whole(WholeBody::new(Whole::Object)),
                };
                ScreenedBody { inner, mode }
            }))
        })
    }
}

/// Whether a response says it is JSON (not a log stream, not a protobuf or a Table).
fn is_json(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"))
}

/// A response body: untouched, or screened as a LIST, a WATCH or one object.
pub(crate) struct ScreenedBody<B> {
    inner: B,
    mode: Mode,
}

enum Mode {
    Pass,
    Whole(WholeBody),
    Watch(WatchLines),
}

/// A body collected whole, then screened.
struct WholeBody {
    screen: Whole,
    collected: BytesMut,
    trailers: Option<Frame<Bytes>>,
    done: bool,
}

/// What a whole body is screened as.
enum Whole {
    List(CollectionRead, Arc<Screening>),
    /// One object: it loses its managed fields and is otherwise handed on as it came.
    Object,
}

struct WatchLines {
    read: CollectionRead,
    screening: Arc<Screening>,
    /// Bytes after the last complete line.
    pending: BytesMut,
    /// How much of `pending` is known to hold no newline.
    scanned: usize,
    /// What is ready to hand on.
    out: VecDeque<Bytes>,
    ended: bool,
}

impl<B> Body for ScreenedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match &mut this.mode {
            Mode::Pass => Pin::new(&mut this.inner).poll_frame(cx).map_err(Into::into),
            Mode::Whole(whole) => whole.poll(&mut this.inner, cx),
            Mode::Watch(watch) => watch.poll(&mut this.inner, cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.mode {
            Mode::Pass => self.inner.is_end_stream(),
            Mode::Whole(whole) => whole.done && whole.trailers.is_none(),
            Mode::Watch(watch) => watch.ended && watch.out.is_empty(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.mode {
            Mode::Pass => self.inner.size_hint(),
            Mode::Whole(_) | Mode::Watch(_) => SizeHint::default(),
        }
    }
}

impl WholeBody {
    fn new(screen: Whole) -> Self {
        Self {
            screen,
            collected: BytesMut::new(),
            trailers: None,
            done: false,
        }
    }

    fn poll<B>(
        &mut self,
        inner: &mut B,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: Into<BoxError>,
    {
        loop {
            if self.done {
                return Poll::Ready(self.trailers.take().map(Ok));
            }
            match ready!(Pin::new(&mut *inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => self.collected.extend_from_slice(&data),
                    Err(trailers) => self.trailers = Some(trailers),
                },
                Some(Err(error)) => return Poll::Ready(Some(Err(error.into()))),
                None => {
                    self.done = true;
                    let body = self.collected.split().freeze();
                    if body.is_empty() {
                        continue;
                    }
                    let body = match &self.screen {
                        Whole::List(read, screening) => screening.list(read, body),
                        Whole::Object => without_managed_fields(body),
                    };
                    return Poll::Ready(Some(Ok(Frame::data(body))));
                }
            }
        }
    }
}

/// `body`, one object, without its managed fields (as it came when it has none, or is not
/// an object).
fn without_managed_fields(body: Bytes) -> Bytes {
    std::str::from_utf8(&body)
        .ok()
        .and_then(crate::screening::without_managed_fields)
        .map_or(body, Bytes::from)
}

impl WatchLines {
    fn new(read: CollectionRead, screening: Arc<Screening>) -> Self {
        Self {
            read,
            screening,
            pending: BytesMut::new(),
            scanned: 0,
            out: VecDeque::new(),
            ended: false,
        }
    }

    fn poll<B>(
        &mut self,
        inner: &mut B,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: Into<BoxError>,
    {
        loop {
            if let Some(chunk) = self.out.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(chunk))));
            }
            if self.ended {
                return Poll::Ready(None);
            }
            match ready!(Pin::new(&mut *inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => self.push(data),
                    Err(trailers) => return Poll::Ready(Some(Ok(trailers))),
                },
                Some(Err(error)) => return Poll::Ready(Some(Err(error.into()))),
                None => {
                    self.ended = true;
                    // A last event without its newline (kube decodes it at EOF too).
                    if !self.pending.is_empty() {
                        let rest = self.pending.split().freeze();
                        match self.screening.event(&self.read, &rest) {
                            Line::Keep => self.out.push_back(rest),
                            Line::Replace(line) => self.out.push_back(Bytes::from(line)),
                            Line::Drop => {}
                        }
                    }
                }
            }
        }
    }

    /// Takes `data` in; every line it completes is screened, and the lines that pass are
    /// handed on as they came, in runs. The API server writes each event whole, so a chunk
    /// usually starts a line: its complete lines go on as slices of it, and only a line cut
    /// in two is copied, into `pending`, which keeps no buffer once it is empty again.
    fn push(&mut self, data: Bytes) {
        let complete = if self.pending.is_empty() {
            let end = data
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |at| at + 1);
            self.pending.extend_from_slice(&data[end..]);
            data.slice(..end)
        } else {
            self.pending.extend_from_slice(&data);
            let end = self.pending[self.scanned..]
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |at| self.scanned + at + 1);
            let complete = self.pending.split_to(end).freeze();
            if self.pending.is_empty() {
                self.pending = BytesMut::new();
            }
            complete
        };
        self.scanned = self.pending.len();
        self.screen_lines(complete);
    }

    /// Screens `complete`, whole lines each ending in a newline, into `out`.
    fn screen_lines(&mut self, complete: Bytes) {
        let mut run_start = 0;
        let mut line_start = 0;
        while let Some(newline) = complete[line_start..]
            .iter()
            .position(|b| *b == b'\n')
            .map(|at| line_start + at)
        {
            let line = &complete[line_start..newline];
            match self.screening.event(&self.read, line) {
                Line::Keep => {}
                changed => {
                    if line_start > run_start {
                        self.out.push_back(complete.slice(run_start..line_start));
                    }
                    if let Line::Replace(line) = changed {
                        self.out.push_back(Bytes::from(line));
                    }
                    run_start = newline + 1;
                }
            }
            line_start = newline + 1;
        }
        if line_start > run_start {
            self.out.push_back(complete.slice(run_start..line_start));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use futures::executor::block_on;
    use futures::future::poll_fn;
    use proptest::prelude::*;

    use super::*;

    /// A body that hands out `chunks` one per frame.
    struct Chunks(VecDeque<Bytes>);

    impl Body for Chunks {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(self.0.pop_front().map(|chunk| Ok(Frame::data(chunk))))
        }
    }

    fn screened(path: &str, query: &str, chunks: Vec<Bytes>) -> (Vec<Bytes>, Quarantine) {
        let quarantine = Quarantine::default();
        let screening = Arc::new(Screening::new(
            &OperatorDomain::default(),
            quarantine.clone(),
        ));
        let read = CollectionRead::of_get(path, Some(query)).expect("a collection read");
        let mode = if read.watch {
            Mode::Watch(WatchLines::new(read, screening))
        } else {
            Mode::Whole(WholeBody::new(Whole::List(read, screening)))
        };
        (drained(mode, chunks), quarantine)
    }

    /// The frames a body of `chunks` screened in `mode` hands on.
    fn drained(mode: Mode, chunks: Vec<Bytes>) -> Vec<Bytes> {
        let mut body = ScreenedBody {
            inner: Chunks(chunks.into()),
            mode,
        };
        let mut frames = Vec::new();
        while let Some(frame) = block_on(poll_fn(|cx| Pin::new(&mut body).poll_frame(cx))) {
            let data = frame.expect("no error").into_data().expect("data");
            frames.push(data);
        }
        frames
    }

    /// A write's answer, one object, reaches kube without its managed fields, whatever its
    /// chunks; an answer without them, or not an object, as it came.
    #[test]
    fn an_object_answer_loses_its_managed_fields() {
        let answer = r#"{"kind":"ResourceClaim","metadata":{"name":"c","managedFields":[{"manager":"poolboy","fieldsV1":{"f:status":{}}}],"resourceVersion":"7"},"spec":{}}"#;
        let object = || Mode::Whole(WholeBody::new(Whole::Object));
        let frames = drained(object(), split(answer, &[10, 60]));
        assert_eq!(
            frames,
            [Bytes::from_static(
                br#"{"kind":"ResourceClaim","metadata":{"name":"c","resourceVersion":"7"},"spec":{}}"#
            )]
        );
        for kept in [
            r#"{"kind":"ResourceClaim","metadata":{"name":"c"}}"#,
            r#"{"kind":"Status","status":"Success"}"#,
            "not json",
        ] {
            assert_eq!(
                drained(object(), split(kept, &[3])),
                [Bytes::from(kept.to_owned())]
            );
        }
    }

    #[test]
    fn only_json_answers_are_screened_as_objects() {
        let mut headers = http::HeaderMap::new();
        assert!(!is_json(&headers));
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        assert!(is_json(&headers));
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/plain"),
        );
        assert!(!is_json(&headers));
    }

    const CLAIMS: &str = "/apis/poolboy.gpte.redhat.com/v1/namespaces/ns/resourceclaims";

    /// The API server accepting a watch of a collection (such as the one a watcher resumes
    /// with) tells the health that the collection's watches work; a refused watch, a list of
    /// the collection or a read of one object does not.
    #[test]
    fn an_accepted_watch_tells_the_health_its_collections_watches_work() {
        let health = WatchHealth::default();
        health.failed("ResourceClaim", CLAIMS, &"connection refused");
        let inner = tower::service_fn(|request: Request<kube::client::Body>| {
            let status = match request.uri().query() {
                Some(query) if query.contains("refused") => 403,
                _ => 200,
            };
            let response = Response::builder()
                .status(status)
                .body(Chunks(VecDeque::new()))
                .expect("a response");
            std::future::ready(Ok::<_, std::convert::Infallible>(response))
        });
        let mut service = ScreenedService {
            inner,
            screening: Arc::new(Screening::new(
                &OperatorDomain::default(),
                Quarantine::default(),
            )),
            health: Some(health.clone()),
        };
        let mut get = |uri: String| {
            let request = Request::get(uri)
                .body(kube::client::Body::from(Vec::new()))
                .expect("a request");
            block_on(service.call(request)).expect("an answer");
            health.failing().len()
        };
        assert_eq!(get(format!("{CLAIMS}?watch=true&refused")), 1);
        assert_eq!(get(format!("{CLAIMS}/claim-a")), 1);
        assert_eq!(get(format!("{CLAIMS}?limit=500")), 1);
        assert_eq!(get(format!("{CLAIMS}?watch=true&resourceVersion=7")), 0);
    }

    fn claim(name: &str, depth: usize) -> String {
        let template = format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
        format!(
            r#"{{"apiVersion":"poolboy.gpte.redhat.com/v1","kind":"ResourceClaim","metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"1"}},"spec":{{"resources":[{{"template":{template}}}]}}}}"#
        )
    }

    fn event(type_: &str, object: &str) -> String {
        format!(r#"{{"type":"{type_}","object":{object}}}"#) + "\n"
    }

    fn split(text: &str, cuts: &[usize]) -> Vec<Bytes> {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (text.len() + 1)).collect();
        cuts.sort_unstable();
        let mut chunks = Vec::new();
        let mut start = 0;
        for cut in cuts.into_iter().chain([text.len()]) {
            chunks.push(Bytes::copy_from_slice(&text.as_bytes()[start..cut]));
            start = cut;
        }
        chunks
    }

    proptest! {
        /// However the stream is cut into chunks, the events that decode come out byte for
        /// byte, and the one that does not comes out as a deletion, in its place.
        #[test]
        fn a_watch_stream_is_screened_line_by_line(cuts in prop::collection::vec(0usize..4000, 0..12)) {
            let before = event("ADDED", &claim("a", 3));
            let deep = event("MODIFIED", &claim("deep", 300));
            let after = event("MODIFIED", &claim("b", 3));
            let bookmark = r#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}"#;
            let stream = format!("{before}{deep}{after}{bookmark}");
            let (frames, quarantine) = screened(CLAIMS, "watch=true", split(&stream, &cuts));
            let output = String::from_utf8(frames.concat()).expect("UTF-8");
            let lines: Vec<&str> = output.split_inclusive('\n').collect();
            prop_assert_eq!(lines.len(), 4);
            prop_assert_eq!(lines[0], before.as_str());
            prop_assert!(lines[1].starts_with(r#"{"type":"DELETED","object":{"apiVersion":"poolboy.gpte.redhat.com/v1","kind":"ResourceClaim","metadata":{"name":"deep""#), "{}", lines[1]);
            prop_assert_eq!(lines[2], after.as_str());
            prop_assert_eq!(lines[3], bookmark);
            let set_aside: Vec<String> = quarantine.objects().into_iter().map(|s| s.object.name).collect();
            prop_assert_eq!(set_aside, ["deep"]);
        }
    }

    #[test]
    fn whole_events_go_on_uncopied_and_a_watch_keeps_no_buffer_between_them() {
        let screening = Arc::new(Screening::new(
            &OperatorDomain::default(),
            Quarantine::default(),
        ));
        let read = CollectionRead::of_get(CLAIMS, Some("watch=true")).expect("a watch");
        let mut lines = WatchLines::new(read, screening);

        let cut = event("ADDED", &claim("a", 3));
        let (head, tail) = cut.split_at(40);
        lines.push(Bytes::copy_from_slice(head.as_bytes()));
        assert!(
            lines.out.is_empty() && lines.pending.capacity() > 0,
            "half a line waits"
        );
        lines.push(Bytes::copy_from_slice(tail.as_bytes()));
        assert_eq!(lines.out.pop_front().as_deref(), Some(cut.as_bytes()));
        assert_eq!(
            lines.pending.capacity(),
            0,
            "nothing kept once the line is whole"
        );

        let whole =
            Bytes::from(event("MODIFIED", &claim("a", 3)) + &event("MODIFIED", &claim("b", 3)));
        lines.push(whole.clone());
        let handed = lines.out.pop_front().expect("the two events");
        assert_eq!(handed, whole);
        assert_eq!(handed.as_ptr(), whole.as_ptr(), "handed on, not copied");
        assert!(lines.out.is_empty());
        assert_eq!(lines.pending.capacity(), 0);
    }

    #[test]
    fn a_list_loses_its_undecodable_items_and_the_quarantine_follows_the_lists() {
        let list = |items: &[String]| {
            format!(
                r#"{{"apiVersion":"poolboy.gpte.redhat.com/v1","items":[{}],"kind":"ResourceClaimList","metadata":{{"resourceVersion":"5"}}}}"#,
                items.join(",")
            )
        };
        let body = list(&[claim("a", 3), claim("deep", 300)]);
        let (frames, quarantine) = screened(CLAIMS, "limit=500", split(&body, &[100, 2000]));
        assert_eq!(frames.len(), 1);
        let text = String::from_utf8(frames.concat()).expect("UTF-8");
        assert_eq!(text, list(&[claim("a", 3)]));
        assert_eq!(quarantine.objects().len(), 1);

        // A complete list without the deep claim (deleted or fixed) empties the quarantine.
        let screening = Screening::new(&OperatorDomain::default(), quarantine.clone());
        let read = CollectionRead::of_get(CLAIMS, None).expect("a collection read");
        let untouched = Bytes::from(list(&[claim("a", 3)]));
        assert_eq!(screening.list(&read, untouched.clone()), untouched);
        assert!(quarantine.objects().is_empty());
    }

    #[test]
    fn metadata_only_lists_are_not_decoded_as_the_kind() {
        let body = Bytes::from(
            r#"{"apiVersion":"meta.k8s.io/v1","items":[{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata","metadata":{"name":"a","namespace":"ns"}}],"kind":"PartialObjectMetadataList","metadata":{}}"#,
        );
        let screening = Screening::new(&OperatorDomain::default(), Quarantine::default());
        let read = CollectionRead::of_get(CLAIMS, None).expect("a collection read");
        let metadata_only = CollectionRead {
            metadata_only: true,
            ..read.clone()
        };
        assert_eq!(screening.list(&metadata_only, body.clone()), body);
        // Read as claims, the same items would be set aside: they have no spec.
        assert_ne!(screening.list(&read, body.clone()), body);
    }
}
