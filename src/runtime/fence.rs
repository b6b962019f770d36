//! A replica writes only while the Lease it holds cannot have expired for the others.
//!
//! Leader election alone does not stop a holder that was paused past its Lease's expiry (a
//! stopped process, a frozen node) from acting, when it wakes, on what it saw before the
//! pause, for the moment it takes to learn that another replica holds the Lease now. Most of
//! its writes are guarded by the version of the object they change and conflict; the update of
//! a managed resource is guarded by the resource's version alone, and rendered from a handle
//! as it was before the pause it would set back what the new holder wrote there.
//!
//! So the writes of a replica that runs with `--lease` pass a fence, open only until the Lease
//! as this process last renewed it could have expired: the fence reads the API server's answer
//! to each of this process's writes of the Lease, and one that names this process as holder
//! opens it until the moment the write was sent plus the Lease's duration, less a margin for
//! the replicas' clocks; an answer that names another holder shuts it. Reads, and the Lease's
//! own requests, always pass.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body::Body;
use http_body_util::{BodyExt, Either, Full};
use serde::Deserialize;
use tower::{BoxError, Service};

/// Taken off the Lease's duration: how much sooner than the others this replica stops
/// writing, for their clocks and its own to disagree by (another replica takes the Lease when
/// the renew time this one wrote, plus the duration, is past by its own clock).
const CLOCK_MARGIN: Duration = Duration::from_secs(2);

/// A write refused because this replica's Lease may have expired.
#[derive(Debug, thiserror::Error)]
#[error(
    "not written: Lease {lease} was not renewed by this replica within the last {seconds} s, \
     so another replica may hold it"
)]
pub(crate) struct LeaseNotHeld {
    lease: String,
    seconds: u64,
}

/// When the writes of one replica may go, from what the API server answered to its Lease's
/// requests.
#[derive(Clone)]
pub(crate) struct WriteFence {
    state: Arc<FenceState>,
}

struct FenceState {
    lease: String,
    /// The Lease's URL path, and its namespace's Leases' (where it is created): its requests
    /// pass, and their answers are read.
    lease_path: String,
    leases_path: String,
    identity: String,
    /// How long after a renewal the writes may go.
    open_for: Duration,
    open_until: Mutex<Option<Instant>>,
}

impl WriteFence {
    /// The fence of the replica `identity` holding Lease `lease` of `namespace`, which lasts
    /// `duration` from each renewal; shut until a renewal opens it.
    pub(crate) fn new(namespace: &str, lease: &str, identity: &str, duration: Duration) -> Self {
        Self {
            state: Arc::new(FenceState {
                lease: lease.to_owned(),
                lease_path: format!(
                    "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{lease}"
                ),
                leases_path: format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"),
                identity: identity.to_owned(),
                open_for: duration.saturating_sub(CLOCK_MARGIN),
                open_until: Mutex::new(None),
            }),
        }
    }

    fn open_until(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.state
            .open_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a `method` request of `path` is one of the Lease's own: a read or write of it,
    /// or its creation.
    fn is_lease_request(&self, method: &Method, path: &str) -> bool {
        path == self.state.lease_path || (*method == Method::POST && path == self.state.leases_path)
    }

    fn admits(&self, method: &Method, path: &str, now: Instant) -> Result<(), LeaseNotHeld> {
        let reads = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
        if reads
            || self.is_lease_request(method, path)
            || self.open_until().is_some_and(|t| now < t)
        {
            return Ok(());
        }
        Err(LeaseNotHeld {
            lease: self.state.lease.clone(),
            seconds: self.state.open_for.as_secs(),
        })
    }

    /// What the API server answered (`body`, a Lease) to a `method` request of the Lease sent
    /// at `sent`: a write that leaves this replica the holder opens the fence from `sent`;
    /// any answer that names another holder, or none, shuts it.
    fn learn(&self, method: &Method, sent: Instant, body: &[u8]) {
        #[derive(Deserialize)]
        struct Lease {
            metadata: LeaseMeta,
            spec: Option<LeaseSpec>,
        }
        #[derive(Deserialize)]
        struct LeaseMeta {
            name: Option<String>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct LeaseSpec {
            holder_identity: Option<String>,
        }
        let Ok(lease) = serde_json::from_slice::<Lease>(body) else {
            return;
        };
        if lease.metadata.name.as_deref() != Some(self.state.lease.as_str()) {
            return;
        }
        let holder = lease.spec.and_then(|spec| spec.holder_identity);
        let mut open_until = self.open_until();
        if holder.as_deref() != Some(self.state.identity.as_str()) {
            *open_until = None;
        } else if *method != Method::GET {
            *open_until = Some(sent + self.state.open_for);
        }
    }
}

/// `fence`, if there is one, before every request of `inner`.
#[derive(Clone)]
pub(crate) struct Fenced<S> {
    inner: S,
    fence: Option<WriteFence>,
}

impl<S> Fenced<S> {
    pub(crate) fn new(inner: S, fence: Option<WriteFence>) -> Self {
        Self { inner, fence }
    }
}

type FencedFuture<B> =
    Pin<Box<dyn Future<Output = Result<Response<Either<B, Full<Bytes>>>, BoxError>> + Send>>;

impl<S, R, B> Service<Request<R>> for Fenced<S>
where
    S: Service<Request<R>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<Either<B, Full<Bytes>>>;
    type Error = BoxError;
    type Future = FencedFuture<B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<R>) -> FencedFuture<B> {
        let Some(fence) = self.fence.clone() else {
            return passed(self.inner.call(request));
        };
        let now = Instant::now();
        let path = request.uri().path();
        if !fence.is_lease_request(request.method(), path) {
            if let Err(refused) = fence.admits(request.method(), path, now) {
                return Box::pin(async move { Err(refused.into()) });
            }
            return passed(self.inner.call(request));
        }
        let method = request.method().clone();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await.map_err(Into::into)?;
            if !response.status().is_success() {
                return Ok(response.map(Either::Left));
            }
            let (parts, body) = response.into_parts();
            let body = body.collect().await.map_err(Into::into)?.to_bytes();
            fence.learn(&method, now, &body);
            Ok(Response::from_parts(parts, Either::Right(Full::new(body))))
        })
    }
}

/// `response`, untouched.
fn passed<F, B, E>(response: F) -> FencedFuture<B>
where
    F: Future<Output = Result<Response<B>, E>> + Send + 'static,
    E: Into<BoxError>,
{
    Box::pin(async move { Ok(response.await.map_err(Into::into)?.map(Either::Left)) })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/ops/leases/poolboy";
    const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/ops/leases";
    const WRITE: &str = "/apis/poolboy.gpte.redhat.com/v1/namespaces/user/resourceclaims/c";

    fn fence() -> WriteFence {
        WriteFence::new("ops", "poolboy", "me-1", Duration::from_secs(15))
    }

    fn lease(holder: Option<&str>) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "poolboy", "namespace": "ops"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
        }))
        .unwrap_or_default()
    }

    #[test]
    fn writes_go_only_while_a_renewal_this_replica_made_lasts() {
        let fence = fence();
        let start = Instant::now();
        assert!(
            fence.admits(&Method::GET, WRITE, start).is_ok(),
            "reads pass"
        );
        assert!(
            fence.admits(&Method::PATCH, PATH, start).is_ok(),
            "the Lease's own writes pass"
        );
        assert!(
            fence.admits(&Method::POST, LEASES, start).is_ok(),
            "and its creation"
        );
        let refused = fence.admits(&Method::PATCH, WRITE, start);
        assert!(refused.is_err(), "shut until the Lease is held");

        fence.learn(&Method::PATCH, start, &lease(Some("me-1")));
        for method in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            assert!(fence.admits(&method, WRITE, start).is_ok(), "{method} goes");
        }
        let near_expiry = start + Duration::from_secs(12);
        assert!(fence.admits(&Method::PATCH, WRITE, near_expiry).is_ok());
        let past = start + Duration::from_secs(13);
        let refused = fence.admits(&Method::PATCH, WRITE, past);
        assert_eq!(
            refused.map_err(|e| e.to_string()),
            Err(
                "not written: Lease poolboy was not renewed by this replica within the last \
                 13 s, so another replica may hold it"
                    .to_owned()
            ),
            "shut 2 s before the others may take the Lease"
        );
        assert!(fence.admits(&Method::GET, WRITE, past).is_ok());
    }

    #[test]
    fn a_read_of_the_lease_never_opens_it_and_another_holder_shuts_it() {
        let fence = fence();
        let start = Instant::now();
        fence.learn(&Method::GET, start, &lease(Some("me-1")));
        assert!(
            fence.admits(&Method::PATCH, WRITE, start).is_err(),
            "a read says who held it, not that a renewal went through"
        );
        fence.learn(&Method::PATCH, start, &lease(Some("me-1")));
        fence.learn(&Method::GET, start, &lease(Some("other-2")));
        assert!(fence.admits(&Method::PATCH, WRITE, start).is_err());
        fence.learn(&Method::PATCH, start, &lease(Some("me-1")));
        fence.learn(&Method::PATCH, start, &lease(None));
        assert!(
            fence.admits(&Method::DELETE, WRITE, start).is_err(),
            "released"
        );
        fence.learn(&Method::POST, start, &lease(Some("me-1")));
        assert!(
            fence.admits(&Method::DELETE, WRITE, start).is_ok(),
            "created"
        );
        fence.learn(&Method::PATCH, start, b"not a lease");
        let mut another =
            serde_json::from_slice::<serde_json::Value>(&lease(None)).unwrap_or_default();
        another["metadata"]["name"] = "another".into();
        let another = serde_json::to_vec(&another).unwrap_or_default();
        fence.learn(&Method::PATCH, start, &another);
        assert!(
            fence.admits(&Method::DELETE, WRITE, start).is_ok(),
            "an answer it cannot read, or of another Lease, changes nothing"
        );
    }
}
