//! The operator's HTTP endpoint: `/metrics` (Prometheus), `/healthz` (the process serves) and
//! `/readyz` (providers are loaded, the watches have listed once, and none keeps failing).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::metrics::Metrics;
use crate::store::health::WatchHealth;

#[derive(Clone)]
struct Shared {
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
    health: WatchHealth,
}

/// Serves until `shutdown` completes.
pub(crate) async fn serve(
    address: SocketAddr,
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
    health: WatchHealth,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readiness))
        .with_state(Shared {
            metrics,
            ready,
            health,
        });
    let listener = tokio::net::TcpListener::bind(address).await?;
    tracing::info!(%address, "serving /metrics, /healthz and /readyz");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn metrics_text(State(shared): State<Shared>) -> impl IntoResponse {
    match shared.metrics.encode() {
        Ok(text) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

async fn readiness(State(shared): State<Shared>) -> impl IntoResponse {
    if !shared.ready.load(Ordering::Relaxed) {
        return (StatusCode::SERVICE_UNAVAILABLE, "starting".to_owned());
    }
    let failing = shared.health.failing();
    if failing.is_empty() {
        return (StatusCode::OK, "ready".to_owned());
    }
    let report: Vec<String> = failing
        .iter()
        .map(|(watch, error)| format!("watch {watch} failing: {error}"))
        .collect();
    (StatusCode::SERVICE_UNAVAILABLE, report.join("\n"))
}
