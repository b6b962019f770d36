//! A watch's first list through the broker's client: asked of the API server in one request,
//! handed to kube-runtime's watcher in the pages it asked for, and watched on from the last
//! page's resourceVersion. Against the local control plane, whose request counts say how many
//! LISTs reached it.

mod support;

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource, ResourceExt};
use poolboy::api::OperatorDomain;
use poolboy::api::ResourceHandle;
use poolboy::runtime::client::broker_client;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use support::TestEnv;

const TIMEOUT: Duration = Duration::from_secs(60);

/// The LISTs of `resource` in one namespace that the API server has served, by its metrics.
async fn namespaced_lists(client: &Client, resource: &str) -> u64 {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("a request");
    let metrics = client
        .request_text(request)
        .await
        .expect("the API server's metrics");
    let resource = format!("resource=\"{resource}\"");
    metrics
        .lines()
        .filter(|line| line.starts_with("apiserver_request_total{"))
        .filter(|line| line.contains("verb=\"LIST\"") && line.contains("scope=\"namespace\""))
        .filter(|line| line.contains(&resource))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Whether a namespace is being deleted. The namespace controller LISTs every namespaced
/// resource of a namespace it deletes, again and again while finalizers hold one, and those
/// LISTs count with the watch's.
async fn a_namespace_terminating(client: &Client) -> bool {
    let namespaces = Api::<Namespace>::all(client.clone());
    match namespaces.list(&ListParams::default()).await {
        Ok(listed) => listed
            .items
            .iter()
            .any(|namespace| namespace.metadata.deletion_timestamp.is_some()),
        Err(_) => true,
    }
}

/// How many times [`counted_first_list`] measures a first list that other LISTs may have
/// joined.
const ATTEMPTS: usize = 5;

/// [`first_list`] of `api`, asserting that the API server served it with one LIST of
/// `resource`. The count is the API server's for the resource in every namespace: when it says
/// more while a namespace is being deleted, the list is measured again.
async fn counted_first_list<K>(
    client: &Client,
    resource: &str,
    api: Api<K>,
) -> (
    BTreeSet<String>,
    impl futures::Stream<Item = Result<Event<K>, watcher::Error>> + use<K>,
)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    for attempt in 1..=ATTEMPTS {
        let others_before = a_namespace_terminating(client).await;
        let before = namespaced_lists(client, resource).await;
        let (listed, events) = first_list(api.clone(), 100).await;
        let lists = namespaced_lists(client, resource).await - before;
        if lists == 1 {
            return (listed, events);
        }
        let others = others_before || a_namespace_terminating(client).await;
        assert!(
            lists > 1 && others,
            "{lists} LISTs of {resource} for one first list in pages of 100 \
             (attempt {attempt}; a namespace being deleted: {others})"
        );
        eprintln!("{lists} LISTs of {resource} while a namespace was deleted: measuring again");
    }
    panic!("more than one LIST of {resource} for one first list in each of {ATTEMPTS} attempts");
}

/// Creates `count` objects made by `object`, ten at a time.
async fn create_many<K>(api: &Api<K>, count: usize, object: impl Fn(usize) -> K)
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug,
{
    futures::stream::iter((0..count).map(object))
        .map(|object| async move { api.create(&PostParams::default(), &object).await })
        .buffer_unordered(10)
        .try_collect::<Vec<_>>()
        .await
        .expect("objects created");
}

/// Watches `api` through the broker's client, pages of `page` objects: the names its first
/// list brings, and the stream, past that list.
async fn first_list<K>(
    api: Api<K>,
    page: u32,
) -> (
    BTreeSet<String>,
    impl futures::Stream<Item = Result<Event<K>, watcher::Error>>,
)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let mut events = watcher::watcher(api, watcher::Config::default().page_size(page)).boxed();
    let mut listed = BTreeSet::new();
    loop {
        let event = tokio::time::timeout(TIMEOUT, events.try_next())
            .await
            .expect("the list within a minute")
            .expect("no watch error")
            .expect("the watch goes on");
        match event {
            Event::Init => {}
            Event::InitApply(object) => {
                listed.insert(object.name_any());
            }
            Event::InitDone => return (listed, events),
            other => panic!("{other:?} during the first list"),
        }
    }
}

#[tokio::test]
async fn a_watchs_first_list_reaches_the_api_server_once_and_the_watch_goes_on_from_its_end() {
    let env = TestEnv::new().await;
    let (client, _) =
        broker_client(env.kube_config(), &OperatorDomain::default()).expect("the broker's client");

    // A built-in kind: the API server writes `metadata` before `items`.
    let configmaps: Api<ConfigMap> = env.api();
    let configmap = |i: usize| ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("cm-{i:03}")),
            ..ObjectMeta::default()
        },
        data: Some([("i".to_owned(), i.to_string())].into()),
        ..ConfigMap::default()
    };
    create_many(&configmaps, 250, configmap).await;
    let watched = Api::<ConfigMap>::namespaced(client.clone(), &env.namespace);
    let (listed, mut events) = counted_first_list(&env.client, "configmaps", watched).await;
    // With the one every namespace gets.
    let mut expected: BTreeSet<String> = (0..250).map(|i| format!("cm-{i:03}")).collect();
    expected.insert("kube-root-ca.crt".to_owned());
    assert_eq!(listed, expected);
    configmaps
        .create(&PostParams::default(), &configmap(250))
        .await
        .expect("one more");
    let event = tokio::time::timeout(TIMEOUT, events.try_next())
        .await
        .expect("the watch's event within a minute")
        .expect("no watch error");
    assert!(
        matches!(&event, Some(Event::Apply(cm)) if cm.name_any() == "cm-250"),
        "{event:?}"
    );

    // A custom resource: its list writes `metadata` after `items` (keys in order).
    let handles: Api<ResourceHandle> = env.api();
    let handle = |i: usize| {
        support::objects::handle(
            json!({"name": format!("guid-{i:03}"), "namespace": env.namespace}),
            json!({"resources": [{"provider": support::objects::provider_ref("none", &env.namespace)}]}),
        )
    };
    create_many(&handles, 250, handle).await;
    let watched = Api::<ResourceHandle>::namespaced(client, &env.namespace);
    let (listed, _) = counted_first_list(&env.client, "resourcehandles", watched).await;
    assert_eq!(listed.len(), 250);
    env.cleanup().await;
}
