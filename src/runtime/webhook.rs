//! The admission webhook's HTTPS endpoint: `POST /validate-resourceclaim`
//! answers an `admission.k8s.io/v1` AdmissionReview of a ResourceClaim create or update
//! (`runtime::admission`). Its certificate and key are `tls.crt` and `tls.key` of a
//! directory (a mounted `kubernetes.io/tls` Secret), read again when they change, so a rotated
//! certificate is served without a restart.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum_server::tls_rustls::RustlsConfig;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::controller::context::Context;
use crate::runtime::admission;

/// The path the webhook configuration names.
pub const VALIDATE_CLAIM_PATH: &str = "/validate-resourceclaim";
/// The files of the certificate directory, as a `kubernetes.io/tls` Secret names them.
pub const CERT_FILE: &str = "tls.crt";
pub const KEY_FILE: &str = "tls.key";

/// How often the certificate files are looked at for a change. A mounted Secret changes
/// within about a minute of its update anyway.
const RELOAD_INTERVAL: Duration = Duration::from_secs(30);
/// How long in-flight reviews may finish after shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// An AdmissionReview carries the claim twice (old and new) and the API server takes requests
/// of up to 3 MiB: axum's default of 2 MiB would refuse the largest ones.
const BODY_LIMIT: usize = 8 << 20;

/// Where the webhook listens, and its certificate.
#[derive(Clone, Debug)]
pub struct WebhookOptions {
    pub address: SocketAddr,
    /// Holds `tls.crt` (the certificate, then its chain) and `tls.key` (PEM).
    pub cert_dir: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("no PEM certificate in {0}")]
    NoCertificate(PathBuf),
    #[error("{path} holds no usable PEM private key: {source}")]
    Key {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("{path}: {source}")]
    Certificate {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("the certificate and key of {dir} do not make a TLS server: {source}")]
    Tls {
        dir: PathBuf,
        #[source]
        source: rustls::Error,
    },
}

/// A certificate directory as last read.
struct Loaded {
    files: (Vec<u8>, Vec<u8>),
    config: Arc<ServerConfig>,
}

/// Reads and checks the certificate and key of `dir`: a broker told to serve the webhook
/// refuses to start without a usable certificate.
fn load(dir: &Path) -> Result<Loaded, WebhookError> {
    let files = read_files(dir)?;
    let config = server_config(dir, &files.0, &files.1)?;
    Ok(Loaded {
        files,
        config: Arc::new(config),
    })
}

fn read_files(dir: &Path) -> Result<(Vec<u8>, Vec<u8>), WebhookError> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path).map_err(|source| WebhookError::Read { path, source })
    };
    Ok((read(CERT_FILE)?, read(KEY_FILE)?))
}

fn server_config(dir: &Path, cert: &[u8], key: &[u8]) -> Result<ServerConfig, WebhookError> {
    let cert_path = dir.join(CERT_FILE);
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| WebhookError::Certificate {
            path: cert_path.clone(),
            source,
        })?;
    if chain.is_empty() {
        return Err(WebhookError::NoCertificate(cert_path));
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|source| WebhookError::Key {
        path: dir.join(KEY_FILE),
        source,
    })?;
    // The provider named here, not a process-wide default: kube's client brings ring, and
    // nothing installs a default.
    let tls = |source| WebhookError::Tls {
        dir: dir.to_owned(),
        source,
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(tls)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(tls)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The webhook server, its certificate read and checked, ready to [`WebhookServer::serve`].
pub(crate) struct WebhookServer {
    options: WebhookOptions,
    loaded: Loaded,
}

impl WebhookServer {
    /// Reads the certificate of `options.cert_dir`.
    pub(crate) fn new(options: WebhookOptions) -> Result<Self, WebhookError> {
        let loaded = load(&options.cert_dir)?;
        Ok(Self { options, loaded })
    }

    /// Serves reviews with the providers of `ctx` until `shutdown` completes.
    pub(crate) async fn serve(
        self,
        ctx: Arc<Context>,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let WebhookServer { options, loaded } = self;
        let tls = RustlsConfig::from_config(loaded.config.clone());
        let app = Router::new()
            .route(VALIDATE_CLAIM_PATH, post(validate_claim))
            .layer(DefaultBodyLimit::max(BODY_LIMIT))
            .with_state(ctx);
        let handle = axum_server::Handle::new();
        let stopping = handle.clone();
        tokio::spawn(async move {
            shutdown.await;
            stopping.graceful_shutdown(Some(SHUTDOWN_GRACE));
        });
        let reload = tokio::spawn(reload(options.cert_dir.clone(), loaded.files, tls.clone()));
        tracing::info!(address = %options.address, path = VALIDATE_CLAIM_PATH, "serving admission reviews");
        let served = axum_server::bind_rustls(options.address, tls)
            .http1_only()
            .handle(handle)
            .serve(app.into_make_service())
            .await;
        reload.abort();
        served
    }
}

/// Serves the certificate of `dir` anew whenever its files change; a bad new one is logged and
/// the last good one kept.
async fn reload(dir: PathBuf, mut files: (Vec<u8>, Vec<u8>), tls: RustlsConfig) {
    let mut interval = tokio::time::interval(RELOAD_INTERVAL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    interval.tick().await;
    loop {
        interval.tick().await;
        let current = match read_files(&dir) {
            Ok(current) => current,
            Err(error) => {
                tracing::warn!(%error, "cannot read the webhook certificate; serving the last one");
                continue;
            }
        };
        if current == files {
            continue;
        }
        match server_config(&dir, &current.0, &current.1) {
            Ok(config) => {
                tls.reload_from_config(Arc::new(config));
                tracing::info!(dir = %dir.display(), "serving the webhook's new certificate");
            }
            Err(error) => {
                tracing::warn!(%error, "the webhook's new certificate is unusable; serving the last one");
            }
        }
        files = current;
    }
}

async fn validate_claim(
    State(ctx): State<Arc<Context>>,
    review: Result<
        axum::Json<AdmissionReview<DynamicObject>>,
        axum::extract::rejection::JsonRejection,
    >,
) -> Response {
    // A review that cannot be read cannot be answered (no uid): the API server then applies
    // the webhook's failure policy, which lets the claim in.
    let request: AdmissionRequest<DynamicObject> = match review.map(|r| r.0.try_into()) {
        Ok(Ok(request)) => request,
        Ok(Err(error)) => {
            tracing::warn!(%error, "an admission review without a request");
            return (StatusCode::BAD_REQUEST, error.to_string()).into_response();
        }
        Err(rejection) => {
            tracing::warn!(error = %rejection.body_text(), "cannot read an admission review");
            return rejection.into_response();
        }
    };
    let response: AdmissionResponse = admission::review(&ctx, &request).await;
    axum::Json(response.into_review()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A certificate directory with `cert` and `key` (PEM), removed when dropped.
    struct Dir(PathBuf);

    impl Dir {
        fn with(cert: &str, key: Option<&str>) -> Self {
            let dir = std::env::temp_dir().join(format!(
                "poolboy-webhook-unit-{}-{}",
                std::process::id(),
                rand::random::<u64>()
            ));
            std::fs::create_dir_all(&dir).expect("a directory");
            std::fs::write(dir.join(CERT_FILE), cert).expect("tls.crt");
            if let Some(key) = key {
                std::fs::write(dir.join(KEY_FILE), key).expect("tls.key");
            }
            Dir(dir)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn certificate() -> (String, String) {
        let key = rcgen::KeyPair::generate().expect("a key");
        let params =
            rcgen::CertificateParams::new(vec!["poolboy.test".to_owned()]).expect("parameters");
        let cert = params.self_signed(&key).expect("a certificate");
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn a_certificate_and_its_key_make_a_server() {
        let (cert, key) = certificate();
        let dir = Dir::with(&cert, Some(&key));
        assert!(load(&dir.0).is_ok());
    }

    /// `poolboy run --webhook-cert-dir` refuses to start with anything less, saying why.
    #[test]
    fn a_broken_certificate_directory_is_refused_with_the_reason() {
        let (cert, key) = certificate();
        let (_, other_key) = certificate();
        let cases: [(&str, Option<&str>, &str); 4] = [
            (&cert, None, "cannot read "),
            ("", Some(&key), "no PEM certificate in "),
            (&cert, Some("not a key"), "holds no usable PEM private key"),
            (&cert, Some(&other_key), "do not make a TLS server"),
        ];
        for (cert, key, expected) in cases {
            let dir = Dir::with(cert, key);
            let error = load(&dir.0).err().map(|e| e.to_string());
            assert!(
                error.as_deref().is_some_and(|e| e.contains(expected)),
                "{expected}: {error:?}"
            );
        }
    }
}
