//! `Api`s of the kinds a claim test touches, and the waits it needs on them.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use poolboy::api::{ResourceClaim, ResourceHandle, ResourceProvider};
use serde_json::{Value, json};

use super::objects::handle_name;
use super::{TIMEOUT, TestEnv, create, wait_for};

/// The admin client's `Api`s of one test's namespace.
pub struct Apis {
    pub claims: Api<ResourceClaim>,
    pub handles: Api<ResourceHandle>,
    pub providers: Api<ResourceProvider>,
    pub configmaps: Api<ConfigMap>,
}

impl Apis {
    pub fn new(env: &TestEnv) -> Self {
        Self {
            claims: env.api(),
            handles: env.api(),
            providers: env.api(),
            configmaps: env.api(),
        }
    }

    pub async fn create_providers(&self, providers: Vec<ResourceProvider>) {
        for provider in providers {
            create(&self.providers, &provider).await;
        }
    }

    pub async fn create_claim(&self, claim: &ResourceClaim) {
        create(&self.claims, claim).await;
    }

    pub async fn create_handle(&self, handle: &ResourceHandle) {
        create(&self.handles, handle).await;
    }

    /// Waits until claim `name` satisfies `check`, and returns it.
    pub async fn claim_when(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&ResourceClaim) -> bool,
    ) -> ResourceClaim {
        wait_for(&self.claims, name, what, TIMEOUT, check).await
    }

    /// Waits until claim `name` is bound (its status names a handle), and returns it.
    pub async fn bound_claim(&self, name: &str) -> ResourceClaim {
        self.claim_when(name, "bound", |c| handle_name(c).is_some())
            .await
    }

    /// Waits until claim `name` is bound, and returns it with its handle.
    pub async fn bound(&self, name: &str) -> (ResourceClaim, ResourceHandle) {
        let claim = self.bound_claim(name).await;
        let handle = self
            .handles
            .get(handle_name(&claim).unwrap_or_default())
            .await
            .expect("the bound handle exists");
        (claim, handle)
    }

    /// Once claim `name` is bound and its handle has made its ConfigMap: (handle, ConfigMap).
    pub async fn provisioned(&self, env: &TestEnv, name: &str) -> (String, String) {
        let handle = bound(env, name).await;
        let configmap = env.configmap_of(&handle, TIMEOUT).await;
        (handle, configmap)
    }

    pub async fn patch_claim_status(&self, name: &str, status: Value) {
        self.claims
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .expect("patching claim status");
    }
}

/// The name of the handle claim `claim` is bound to, once its status says so.
pub async fn bound(env: &TestEnv, claim: &str) -> String {
    let claim = Apis::new(env).bound_claim(claim).await;
    handle_name(&claim).unwrap_or_default().to_owned()
}
