//! Who asked for a claim (§5.7, §12.3 step 7): the `openshift.io/requester` annotation of the
//! claim's namespace names an OpenShift `User`, whose `identities` name `Identity` objects.
//! Templates see them as `requester_user`, `requester_identity` and `requester_identities`, and
//! resources get the requester annotations.
//!
//! A namespace without the annotation has no requester; a User or Identity that cannot be found
//! is replaced by a stub, as Poolboy does (docs/design.md, "controller::requester").

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::core::handle::definition::Requester;

const REQUESTER_ANNOTATION: &str = "openshift.io/requester";
const USER_GROUP: &str = "user.openshift.io";

/// How long a namespace's requester is remembered. A handle is reconciled several times while
/// its claim binds and becomes ready, and every one of those reconciles needs the requester:
/// looked up each time, it would be a third of the reads of a bind. The annotation is set
/// when a project is requested and does not change after; a change shows within this time.
const REMEMBERED_FOR: Duration = Duration::from_secs(60);

/// Namespaces remembered at most; past it, the forgotten are dropped first, then everything.
const REMEMBERED_AT_MOST: usize = 10_000;

/// Looks requesters up; remembers them for a while, and whether the cluster serves the User API.
#[derive(Default)]
pub(crate) struct RequesterLookup {
    user_api: OnceCell<bool>,
    remembered: Mutex<HashMap<String, (Instant, Option<Requester>)>>,
}

impl RequesterLookup {
    /// The requester of claims in `namespace`, or `None`.
    pub(crate) async fn requester(
        &self,
        client: &Client,
        namespace: &str,
    ) -> Result<Option<Requester>, kube::Error> {
        if let Some(requester) = self.remembered(namespace) {
            return Ok(requester);
        }
        let requester = self.look_up(client, namespace).await?;
        self.remember(namespace, &requester);
        Ok(requester)
    }

    fn remembered(&self, namespace: &str) -> Option<Option<Requester>> {
        let remembered = self
            .remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        remembered
            .get(namespace)
            .filter(|(at, _)| at.elapsed() < REMEMBERED_FOR)
            .map(|(_, requester)| requester.clone())
    }

    fn remember(&self, namespace: &str, requester: &Option<Requester>) {
        let mut remembered = self
            .remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if remembered.len() >= REMEMBERED_AT_MOST {
            remembered.retain(|_, (at, _)| at.elapsed() < REMEMBERED_FOR);
            if remembered.len() >= REMEMBERED_AT_MOST {
                remembered.clear();
            }
        }
        remembered.insert(namespace.to_owned(), (Instant::now(), requester.clone()));
    }

    async fn look_up(
        &self,
        client: &Client,
        namespace: &str,
    ) -> Result<Option<Requester>, kube::Error> {
        let namespace = match Api::<Namespace>::all(client.clone())
            .get_opt(namespace)
            .await?
        {
            Some(namespace) => namespace,
            None => return Ok(None),
        };
        let annotations = namespace.metadata.annotations.unwrap_or_default();
        let Some(user_name) = annotations
            .get(REQUESTER_ANNOTATION)
            .filter(|n| !n.is_empty())
        else {
            return Ok(None);
        };
        // Poolboy's GET would answer 404: the stub, without asking.
        if !self.user_api_exists(client).await? {
            return Ok(Some(Requester {
                user: Some(stub_user(user_name)),
                identities: Vec::new(),
            }));
        }
        let users = Api::<DynamicObject>::all_with(client.clone(), &resource("User", "users"));
        let user = match users.get_opt(user_name).await? {
            Some(user) => serde_json::to_value(user).unwrap_or_else(|_| stub_user(user_name)),
            None => stub_user(user_name),
        };
        let identities_api =
            Api::<DynamicObject>::all_with(client.clone(), &resource("Identity", "identities"));
        let mut identities = Vec::new();
        let names: Vec<String> = user
            .get("identities")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|n| n.as_str().map(str::to_owned))
            .collect();
        for name in names {
            let identity = match identities_api.get_opt(&name).await? {
                Some(identity) => {
                    serde_json::to_value(identity).unwrap_or_else(|_| stub_identity(&name))
                }
                None => stub_identity(&name),
            };
            identities.push(identity);
        }
        Ok(Some(Requester {
            user: Some(user),
            identities,
        }))
    }

    async fn user_api_exists(&self, client: &Client) -> Result<bool, kube::Error> {
        self.user_api
            .get_or_try_init(|| async {
                let groups = client.list_api_groups().await?;
                Ok(groups.groups.iter().any(|g| g.name == USER_GROUP))
            })
            .await
            .copied()
    }
}

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(USER_GROUP, "v1", kind), plural)
}

fn stub_user(name: &str) -> Value {
    json!({"metadata": {"name": name}, "identities": []})
}

fn stub_identity(name: &str) -> Value {
    json!({"metadata": {"name": name}, "extra": {}})
}
