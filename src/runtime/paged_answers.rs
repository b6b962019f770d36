//! A watch's first LIST asked of the API server whole and handed on in the pages the watcher
//! asked for ([`PagedAnswers`]).
//!
//! kube-runtime lists 500 objects a page. The API server serves a first page from its watch
//! cache, but a page after it only from a snapshot of the cache at the list's resourceVersion,
//! which it keeps from the collection's last change until the next etcd compaction: a
//! collection unchanged for five minutes has none, and each later page is read from etcd
//! (docs/design.md, "runtime::paged_answers"). A list without `limit` is served from the cache
//! in one answer. So a first page asked for with a `limit` and the most recent state (no
//! `resourceVersion`) goes to the API server without its `limit`, and the answer is cut into
//! pages as it streams in (`screening::list_pages`): the first is the answer to the request,
//! the others answer the requests that continue from it, with tokens of this client's own, while
//! the rest of the answer waits on the connection. An answer that cannot be cut (not a list, or
//! cut off: the API server ends a request it could not write out within its request timeout)
//! fails the list, and its collection is listed page by page from then on; an answer no
//! request continues within [`HOLD_LIMIT`] is dropped.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tower::{BoxError, Service};

use crate::screening::list_pages::{CutError, Page, PageCutter};
use crate::screening::request::CollectionRead;

/// How long an answer waits for the request of its next page. The API server ends a list
/// that has not been written out within its request timeout (60 s by default) anyway.
const HOLD_LIMIT: Duration = Duration::from_secs(60);

/// The smallest page asked for that is asked whole: a watch walks every page (kube-runtime's
/// watcher asks 500 at a time, each watch of the broker does), while a smaller `limit` may be a
/// probe that reads one page and stops, for which the whole collection would be served.
const WHOLE_FROM: usize = 100;

/// Begins every continue token this client makes (the API server's are base64 of JSON).
const TOKEN_PREFIX: &str = "poolboy-answer-";

/// The layer: first lists asked whole, their answers held between pages.
pub(crate) struct PagedAnswers<S, B> {
    inner: S,
    held: Arc<Held<B>>,
}

impl<S, B> PagedAnswers<S, B> {
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            held: Arc::new(Held {
                answers: Mutex::new(HashMap::new()),
                paged: Mutex::new(HashSet::new()),
                tokens: AtomicU64::new(0),
            }),
        }
    }
}

/// The answers waiting for their next page's request, and the collections listed page by
/// page.
struct Held<B> {
    answers: Mutex<HashMap<String, Answer<B>>>,
    /// The paths of collections whose whole answer failed.
    paged: Mutex<HashSet<String>>,
    tokens: AtomicU64,
}

/// One answer being handed on.
struct Answer<B> {
    body: B,
    ended: bool,
    cutter: PageCutter,
    /// The answer's headers, for each page.
    headers: HeaderMap,
    /// The collection's path.
    collection: String,
    /// When the last page was handed on.
    since: Instant,
}

impl<B> Held<B> {
    fn take(&self, token: &str) -> Option<Answer<B>> {
        let mut answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        answers.remove(token)
    }

    /// Drops the answers no request continued in time (their watcher went away, or stalled):
    /// each holds a connection and up to a page of bytes.
    fn forget_stale(&self) {
        let mut answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        answers.retain(|_, answer| answer.since.elapsed() < HOLD_LIMIT);
    }

    /// A continue token no answer had.
    fn token(&self) -> String {
        let number = self.tokens.fetch_add(1, Ordering::Relaxed);
        format!("{TOKEN_PREFIX}{number}")
    }

    /// Keeps `answer` for the request that continues with `token`.
    fn hold(&self, token: String, mut answer: Answer<B>) {
        answer.since = Instant::now();
        let mut answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        answers.insert(token, answer);
    }

    fn is_paged(&self, collection: &str) -> bool {
        let paged = self.paged.lock().unwrap_or_else(PoisonError::into_inner);
        paged.contains(collection)
    }

    fn page_from_now_on(&self, collection: &str, error: &dyn std::fmt::Display) {
        tracing::warn!(%error, collection, "a whole list answer failed; listing page by page");
        let mut paged = self.paged.lock().unwrap_or_else(PoisonError::into_inner);
        paged.insert(collection.to_owned());
    }
}

/// What a request asks of this layer.
#[derive(Debug, PartialEq, Eq)]
enum Ask {
    /// A first page of at most `limit` items of the most recent state: asked whole with
    /// `query`.
    Whole {
        query: String,
        limit: usize,
    },
    /// A page after one this layer handed on.
    Next {
        token: String,
    },
    Other,
}

/// What the LIST `query` asks of this layer.
fn ask(query: &str) -> Ask {
    let mut limit = None;
    let mut whole = true;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "limit" => {
                limit = value.parse::<usize>().ok().filter(|limit| *limit > 0);
                continue;
            }
            "continue" if value.starts_with(TOKEN_PREFIX) => {
                return Ask::Next {
                    token: value.to_owned(),
                };
            }
            // A page after the API server's own, a read of a given version, or a watch.
            "continue" | "resourceVersion" | "resourceVersionMatch" | "sendInitialEvents" => {
                whole &= value.is_empty();
            }
            "watch" => whole &= !matches!(value, "true" | "1"),
            _ => {}
        }
        kept.push(pair);
    }
    match limit {
        Some(limit) if whole && limit >= WHOLE_FROM => Ask::Whole {
            query: kept.join("&"),
            limit,
        },
        _ => Ask::Other,
    }
}

impl<S, B> Service<Request<kube::client::Body>> for PagedAnswers<S, B>
where
    S: Service<Request<kube::client::Body>, Response = Response<B>, Error = BoxError>,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<PagedBody<B>>;
    type Error = BoxError;
    type Future = Paged<B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<kube::client::Body>) -> Self::Future {
        let uri = request.uri();
        let list = request.method() == Method::GET
            && CollectionRead::of_get(uri.path(), uri.query()).is_some_and(|read| !read.watch);
        let ask = match uri.query() {
            Some(query) if list => ask(query),
            _ => Ask::Other,
        };
        let held = self.held.clone();
        held.forget_stale();
        match ask {
            Ask::Next { token } => Box::pin(async move { Ok(next(&held, &token).await) }),
            Ask::Whole { query, limit } if !held.is_paged(uri.path()) => {
                let collection = uri.path().to_owned();
                let (mut parts, body) = request.into_parts();
                let whole = format!("{collection}?{query}");
                match whole.parse() {
                    Ok(whole) => parts.uri = whole,
                    Err(error) => {
                        tracing::debug!(%error, whole, "cannot ask a list whole");
                        return passed(self.inner.call(Request::from_parts(parts, body)));
                    }
                }
                let answer = self.inner.call(Request::from_parts(parts, body));
                Box::pin(async move {
                    let response = answer.await?;
                    if !response.status().is_success() {
                        return Ok(response.map(PagedBody::Inner));
                    }
                    let (parts, body) = response.into_parts();
                    let answer = Answer {
                        body,
                        ended: false,
                        cutter: PageCutter::new(limit),
                        headers: parts.headers,
                        collection,
                        since: Instant::now(),
                    };
                    first(&held, answer).await
                })
            }
            _ => passed(self.inner.call(request)),
        }
    }
}

/// The answer to a request, as this layer gives it.
type Paged<B> = Pin<Box<dyn Future<Output = Result<Response<PagedBody<B>>, BoxError>> + Send>>;

/// The answer to a request this layer leaves as it is.
fn passed<F, B>(response: F) -> Paged<B>
where
    F: Future<Output = Result<Response<B>, BoxError>> + Send + 'static,
{
    Box::pin(async move { Ok(response.await?.map(PagedBody::Inner)) })
}

/// The first page of `answer`; the answer is held for the next if there is one. An answer
/// that cannot be cut fails the request.
async fn first<B>(held: &Held<B>, answer: Answer<B>) -> Result<Response<PagedBody<B>>, BoxError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let collection = answer.collection.clone();
    page(held, answer).await.inspect_err(|error| {
        held.page_from_now_on(&collection, error);
    })
}

/// The page after the one that handed on `token`: `410 Gone` when there is none (the answer
/// was left unread too long, or failed), as the API server answers an expired token, so that
/// the watcher lists again from the start.
async fn next<B>(held: &Held<B>, token: &str) -> Response<PagedBody<B>>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let Some(answer) = held.take(token) else {
        return gone("the list's answer is no longer held: list again");
    };
    let collection = answer.collection.clone();
    match page(held, answer).await {
        Ok(response) => response,
        Err(error) => {
            held.page_from_now_on(&collection, &error);
            gone(&format!("the list's answer failed: {error}"))
        }
    }
}

/// The next page of `answer` as a response; the answer is held if another page follows.
async fn page<B>(held: &Held<B>, mut answer: Answer<B>) -> Result<Response<PagedBody<B>>, BoxError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let page = read_page(&mut answer).await?;
    let mut headers = answer.headers.clone();
    headers.remove(http::header::CONTENT_LENGTH);
    headers.remove(http::header::TRANSFER_ENCODING);
    let body = if page.last {
        answer.cutter.body(&page, None)?
    } else {
        let token = held.token();
        let body = answer.cutter.body(&page, Some(&token))?;
        held.hold(token, answer);
        body
    };
    Ok(response(StatusCode::OK, headers, body))
}

/// Reads `answer` until its next page is cut.
async fn read_page<B>(answer: &mut Answer<B>) -> Result<Page, BoxError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    loop {
        if let Some(page) = answer.cutter.next_page(answer.ended)? {
            return Ok(page);
        }
        if answer.ended {
            return Err(CutError::Truncated.into());
        }
        match answer.body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    answer.cutter.push(&data);
                }
            }
            Some(Err(error)) => return Err(error.into()),
            None => answer.ended = true,
        }
    }
}

fn response<B>(status: StatusCode, headers: HeaderMap, body: Vec<u8>) -> Response<PagedBody<B>> {
    let mut response = Response::new(PagedBody::Page(Some(Bytes::from(body))));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// A `410 Gone` with the API server's `Status` for an expired continue token.
fn gone<B>(message: &str) -> Response<PagedBody<B>> {
    let status = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Expired",
        "code": 410,
    });
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response(StatusCode::GONE, headers, status.to_string().into_bytes())
}

/// A response body: the API server's, or a page cut from its answer.
pub(crate) enum PagedBody<B> {
    Inner(B),
    Page(Option<Bytes>),
}

impl<B> Body for PagedBody<B>
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
        match self.get_mut() {
            Self::Inner(inner) => Pin::new(inner).poll_frame(cx).map_err(Into::into),
            Self::Page(page) => Poll::Ready(page.take().map(|page| Ok(Frame::data(page)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Inner(inner) => inner.is_end_stream(),
            Self::Page(page) => page.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Inner(inner) => inner.size_hint(),
            Self::Page(Some(page)) => SizeHint::with_exact(page.len() as u64),
            Self::Page(None) => SizeHint::with_exact(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use bytes::Bytes;
    use futures::executor::block_on;
    use http::{HeaderMap, Response, StatusCode};
    use http_body_util::{BodyExt, Full};
    use serde_json::{Value, json};

    use super::{Answer, Ask, Held, PagedAnswers, PagedBody, ask, first, next};
    use crate::screening::list_pages::PageCutter;

    const CONFIGMAPS: &str = "/api/v1/namespaces/a/configmaps";

    fn layer() -> PagedAnswers<(), Full<Bytes>> {
        PagedAnswers::new(())
    }

    fn answer(text: &'static str, limit: usize) -> Answer<Full<Bytes>> {
        Answer {
            body: Full::new(Bytes::from_static(text.as_bytes())),
            ended: false,
            cutter: PageCutter::new(limit),
            headers: HeaderMap::new(),
            collection: CONFIGMAPS.to_owned(),
            since: Instant::now(),
        }
    }

    fn json_of(response: Response<PagedBody<Full<Bytes>>>) -> (StatusCode, Value) {
        let status = response.status();
        let body = block_on(response.into_body().collect()).expect("a body");
        (
            status,
            serde_json::from_slice(&body.to_bytes()).expect("JSON"),
        )
    }

    #[test]
    fn an_answer_is_handed_on_page_by_page_then_forgotten() {
        let layer = layer();
        let held = &layer.held;
        let text =
            r#"{"kind":"L","metadata":{"resourceVersion":"5"},"items":[{"a":1},{"a":2},{"a":3}]}"#;
        let (status, page) = json_of(block_on(first(held, answer(text, 2))).expect("a page"));
        assert_eq!(status, StatusCode::OK);
        assert_eq!(page["items"], json!([{"a": 1}, {"a": 2}]));
        let token = page["metadata"]["continue"]
            .as_str()
            .expect("a token")
            .to_owned();
        let (status, page) = json_of(block_on(next(held, &token)));
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            page,
            json!({"kind": "L", "metadata": {"resourceVersion": "5"}, "items": [{"a": 3}]})
        );
        assert!(held.answers.lock().expect("unpoisoned").is_empty());
        assert_eq!(json_of(block_on(next(held, &token))).0, StatusCode::GONE);
        assert!(!held.is_paged(CONFIGMAPS));
    }

    #[test]
    fn an_answer_that_cannot_be_cut_fails_and_its_collection_is_listed_page_by_page() {
        let layer = layer();
        let held = &layer.held;
        assert!(block_on(first(held, answer("[1]", 2))).is_err());
        assert!(held.is_paged(CONFIGMAPS));

        let layer = self::layer();
        let held = &layer.held;
        let text = r#"{"kind":"L","metadata":{},"items":[{"a":1},{"a":2},{"a":"#;
        let (_, page) = json_of(block_on(first(held, answer(text, 2))).expect("a page"));
        let token = page["metadata"]["continue"]
            .as_str()
            .expect("a token")
            .to_owned();
        let (status, gone) = json_of(block_on(next(held, &token)));
        assert_eq!(
            (status, &gone["reason"]),
            (StatusCode::GONE, &json!("Expired"))
        );
        assert!(held.is_paged(CONFIGMAPS));
    }

    fn whole(query: &str, limit: usize) -> Ask {
        Ask::Whole {
            query: query.to_owned(),
            limit,
        }
    }

    #[test]
    fn only_a_first_page_of_the_most_recent_state_is_asked_whole() {
        assert_eq!(ask("limit=500"), whole("", 500));
        assert_eq!(
            ask("labelSelector=a%3Db&limit=500&timeoutSeconds=290"),
            whole("labelSelector=a%3Db&timeoutSeconds=290", 500)
        );
        assert_eq!(
            ask("limit=500&resourceVersion="),
            whole("resourceVersion=", 500)
        );
        for other in [
            "",
            "labelSelector=a%3Db",
            "limit=0",
            "limit=x",
            "limit=500&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ",
            "limit=500&resourceVersion=0",
            "limit=500&resourceVersion=12&resourceVersionMatch=Exact",
            "limit=500&watch=true",
            "limit=500&sendInitialEvents=true",
        ] {
            assert_eq!(ask(other), Ask::Other, "{other}");
        }
        assert_eq!(
            ask("limit=500&continue=poolboy-answer-7"),
            Ask::Next {
                token: "poolboy-answer-7".to_owned()
            }
        );
    }

    #[test]
    fn a_token_whose_answer_is_not_held_is_gone_as_an_expired_one() {
        let layer = layer();
        let held: &Held<Full<Bytes>> = &layer.held;
        let response = block_on(next(held, "poolboy-answer-3"));
        assert_eq!(response.status(), http::StatusCode::GONE);
        let body = block_on(response.into_body().collect()).expect("a body");
        let status: kube::core::Status =
            serde_json::from_slice(&body.to_bytes()).expect("a Status");
        assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    }
}
