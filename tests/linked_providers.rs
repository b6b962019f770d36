//! Linked providers end to end (§9, Δ B22): a linked resource waits for its link, the same
//! linked provider used twice gives each dependent its own, and a false `when` leaves a
//! linked provider out until it holds. Handles are created directly; the whole operator runs.

mod support;

use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use poolboy::api::ResourceHandle;
use serde_json::json;
use support::fixtures::{
    configmap, create_handle, create_kind_provider, create_provider, guid, handle, handle_status,
    managed_through,
};
use support::operator::TestOperator;
use support::{TIMEOUT, TestEnv, eventually};

/// `base` makes a ConfigMap whose `data.which` is its parameter; `app-a` and `app-b` each link
/// it under a resource name of their own and copy what their link holds.
async fn create_linked_providers(env: &TestEnv) {
    create_kind_provider(
        env,
        "base",
        "v1",
        "ConfigMap",
        json!({
            "parameters": [{"name": "which", "required": true}],
            "template": {"enable": true, "definition": {"data": {"which": "{{ which }}"}}},
        }),
    )
    .await;
    for (app, resource_name) in [("app-a", "first"), ("app-b", "second")] {
        create_provider(
            env,
            app,
            json!({
                "linkedResourceProviders": [{
                    "name": "base",
                    "resourceName": resource_name,
                    "parameterValues": {"which": resource_name},
                    "waitFor": "linked_resource_state.data.which is defined",
                    "templateVars": [
                        {"name": "base_which", "from": "/data/which"},
                        {"name": "base_name", "from": "/metadata/name"},
                    ],
                }],
                "template": {"enable": true},
                "override": {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"namespace": env.namespace},
                    "data": {"which": "{{ base_which }}", "name": "{{ base_name }}"},
                },
            }),
        )
        .await;
    }
}

fn resource_names(handle: &ResourceHandle) -> Vec<(String, String)> {
    handle
        .spec
        .resources
        .iter()
        .flatten()
        .map(|r| (r.name.clone().unwrap_or_default(), r.provider.name.clone()))
        .collect()
}

#[tokio::test]
async fn the_same_linked_provider_twice_each_dependent_finding_its_own() {
    let env = TestEnv::new().await;
    create_linked_providers(&env).await;
    // A linked-only aggregator: no resource of its own, a summary over the others.
    create_provider(
        &env,
        "pair",
        json!({
            "linkedResourceProviders": [{"name": "app-a"}, {"name": "app-b"}],
            "statusSummaryTemplate": {
                "names": "{{ resources | map(attribute='name') | join(',') }}",
            },
        }),
    )
    .await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let pair = create_handle(&env, json!({}), json!({"provider": {"name": "pair"}})).await;
    let name = pair.name_any();
    let g = guid(&pair);

    for (index, expected) in [(1, "first"), (3, "second")] {
        let app = format!("guid{index}-{g}");
        let data = eventually("a dependent ConfigMap", TIMEOUT, || async {
            configmap(&env, &app).await?.data
        })
        .await;
        assert_eq!(data["which"], expected, "{app} found its own link");
        assert_eq!(data["name"], format!("guid{}-{g}", index - 1));
    }
    let base = configmap(&env, &format!("guid2-{g}"))
        .await
        .expect("second base");
    assert_eq!(base.data.expect("data")["which"], "second");
    let live = handle(&env, &name).await.expect("handle");
    let expected: Vec<(String, String)> = [
        ("first", "base"),
        ("app-a", "app-a"),
        ("second", "base"),
        ("app-b", "app-b"),
    ]
    .iter()
    .map(|(n, p)| ((*n).to_owned(), (*p).to_owned()))
    .collect();
    assert_eq!(
        resource_names(&live),
        expected,
        "nothing of the aggregator's own"
    );
    eventually("the aggregator's summary", TIMEOUT, || async {
        let status = handle_status(&env, &name).await?;
        (status["summary"] == json!({"names": "first,app-a,second,app-b"})).then_some(())
    })
    .await;
    assert_eq!(env.configmaps_of_handle(&name).await.len(), 4);

    env.teardown([operator]).await;
}

#[tokio::test]
async fn a_false_when_leaves_a_linked_provider_out_until_it_holds() {
    let env = TestEnv::new().await;
    create_linked_providers(&env).await;
    create_provider(
        &env,
        "bundle",
        json!({
            "parameters": [{"name": "with_b", "default": {"value": false}}],
            "linkedResourceProviders": [
                {"name": "app-a"},
                {"name": "app-b", "when": "with_b | bool"},
            ],
        }),
    )
    .await;
    let operator = TestOperator::start(env.kube_config(), &env.namespace);
    let bundle = create_handle(&env, json!({}), json!({"provider": {"name": "bundle"}})).await;
    let name = bundle.name_any();
    let g = guid(&bundle);
    let app_a = format!("guid1-{g}");
    eventually("app-a's ConfigMap", TIMEOUT, || configmap(&env, &app_a)).await;
    managed_through(&env, &name).await;
    let live = handle(&env, &name).await.expect("handle");
    let names: Vec<String> = resource_names(&live).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["first", "app-a"], "app-b is left out");
    assert_eq!(env.configmaps_of_handle(&name).await.len(), 2);

    let patch = json!({"spec": {"provider": {"parameterValues": {"with_b": true}}}});
    env.api::<ResourceHandle>()
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("turn app-b on");
    let data = eventually("app-b's ConfigMap", TIMEOUT, || async {
        configmap(&env, &format!("guid3-{g}")).await?.data
    })
    .await;
    assert_eq!(data["which"], "second");
    let live = handle(&env, &name).await.expect("handle");
    let names: Vec<String> = resource_names(&live).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["first", "app-a", "second", "app-b"]);

    env.teardown([operator]).await;
}
