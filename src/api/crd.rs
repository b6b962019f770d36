//! The CustomResourceDefinitions of the six kinds, for any operator domain.
//!
//! The derive fixes the group at [`super::DEFAULT_GROUP`]; this module rewrites the group and
//! adds what the derive cannot express: Poolboy's `metadata.name` patterns (§3) and the missing
//! status subresource of ResourceWatch (Δ§2.2).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::CustomResourceExt;

use super::{
    OperatorDomain, ResourceClaim, ResourceHandle, ResourcePool, ResourcePoolScaling,
    ResourceProvider, ResourceWatch,
};

/// Names of claims, pools, providers, scalings and watches (§3).
const OBJECT_NAME_PATTERN: &str = r"^[a-z0-9A-Z]([a-z0-9A-Z\-._]*[a-z0-9A-Z])?$";
/// Handles are always `guid-…` (§3).
const HANDLE_NAME_PATTERN: &str = r"^guid-[a-z0-9\-]*[a-z0-9]$";

/// All six CRDs for `domain`, in a stable order (alphabetical by kind).
pub fn all(domain: &OperatorDomain) -> Vec<CustomResourceDefinition> {
    [
        (ResourceClaim::crd(), OBJECT_NAME_PATTERN),
        (ResourceHandle::crd(), HANDLE_NAME_PATTERN),
        (ResourcePool::crd(), OBJECT_NAME_PATTERN),
        (ResourcePoolScaling::crd(), OBJECT_NAME_PATTERN),
        (ResourceProvider::crd(), OBJECT_NAME_PATTERN),
        (ResourceWatch::crd(), OBJECT_NAME_PATTERN),
    ]
    .into_iter()
    .map(|(crd, name_pattern)| for_domain(crd, domain, name_pattern))
    .collect()
}

fn for_domain(
    mut crd: CustomResourceDefinition,
    domain: &OperatorDomain,
    name_pattern: &str,
) -> CustomResourceDefinition {
    crd.spec.group = domain.group().to_owned();
    crd.metadata.name = Some(format!("{}.{}", crd.spec.names.plural, domain.group()));
    let is_watch = crd.spec.names.kind == "ResourceWatch";
    for version in &mut crd.spec.versions {
        if is_watch {
            version.subresources = None;
        }
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            schema
                .properties
                .get_or_insert_with(Default::default)
                .insert("metadata".to_owned(), metadata_schema(name_pattern));
        }
    }
    crd
}

fn metadata_schema(name_pattern: &str) -> JSONSchemaProps {
    let name = JSONSchemaProps {
        type_: Some("string".to_owned()),
        max_length: Some(63),
        pattern: Some(name_pattern.to_owned()),
        ..Default::default()
    };
    JSONSchemaProps {
        type_: Some("object".to_owned()),
        properties: Some([("name".to_owned(), name)].into()),
        ..Default::default()
    }
}

/// The file a CRD is committed as under `crds/`: `<plural>.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.spec.names.plural)
}

/// The CRDs as multi-document YAML, as `poolboy crd` prints them.
pub fn to_yaml(crds: &[CustomResourceDefinition]) -> Result<String, serde_saphyr::ser::Error> {
    let mut out = String::new();
    for crd in crds {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(crd)?);
    }
    Ok(out)
}
