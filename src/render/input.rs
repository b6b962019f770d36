//! The input of `poolboy render`: YAML documents sorted into providers, at most one pool and
//! at most one claim. Reading files is the CLI's job; this only interprets their text.

use serde_json::Value;

use crate::api::{ResourceClaim, ResourcePool, ResourceProvider};

#[derive(Debug, thiserror::Error)]
pub(crate) enum RenderInputError {
    #[error("{source_name}: not valid YAML: {message}")]
    Yaml {
        source_name: String,
        message: String,
    },
    #[error("{source_name}: document {index}: {kind} {name}: {message}")]
    Invalid {
        source_name: String,
        index: usize,
        kind: String,
        name: String,
        message: String,
    },
    #[error(
        "{source_name}: document {index}: kind {kind} is not one `poolboy render` reads (ResourceProvider, ResourcePool, ResourceClaim)"
    )]
    UnexpectedKind {
        source_name: String,
        index: usize,
        kind: String,
    },
    #[error("more than one {0} given; render one at a time")]
    MoreThanOne(&'static str),
    #[error("nothing to render: give a ResourceClaim, or a ResourcePool")]
    NothingToRender,
    #[error("no ResourceProvider given")]
    NoProviders,
}

/// The objects `poolboy render` works on.
#[derive(Debug, Default)]
pub(crate) struct RenderInput {
    pub providers: Vec<ResourceProvider>,
    pub pool: Option<ResourcePool>,
    pub claim: Option<ResourceClaim>,
}

impl RenderInput {
    /// Adds the documents of one YAML stream; `source_name` names it in messages.
    pub(crate) fn add_yaml(
        &mut self,
        source_name: &str,
        text: &str,
    ) -> Result<(), RenderInputError> {
        let documents: Vec<Value> =
            serde_saphyr::from_multiple(text).map_err(|e| RenderInputError::Yaml {
                source_name: source_name.to_owned(),
                message: e.to_string(),
            })?;
        for (index, document) in documents.into_iter().enumerate() {
            if document.is_null() {
                continue;
            }
            let kind = document
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("(no kind)")
                .to_owned();
            let name = document
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("(no name)")
                .to_owned();
            let invalid = |e: serde_json::Error| RenderInputError::Invalid {
                source_name: source_name.to_owned(),
                index,
                kind: kind.clone(),
                name: name.clone(),
                message: e.to_string(),
            };
            match kind.as_str() {
                "ResourceProvider" => self
                    .providers
                    .push(serde_json::from_value(document).map_err(invalid)?),
                "ResourcePool" => {
                    if self.pool.is_some() {
                        return Err(RenderInputError::MoreThanOne("ResourcePool"));
                    }
                    self.pool = Some(serde_json::from_value(document).map_err(invalid)?);
                }
                "ResourceClaim" => {
                    if self.claim.is_some() {
                        return Err(RenderInputError::MoreThanOne("ResourceClaim"));
                    }
                    self.claim = Some(serde_json::from_value(document).map_err(invalid)?);
                }
                _ => {
                    return Err(RenderInputError::UnexpectedKind {
                        source_name: source_name.to_owned(),
                        index,
                        kind,
                    });
                }
            }
        }
        Ok(())
    }

    /// Checks that there is something to render.
    pub(crate) fn check_complete(&self) -> Result<(), RenderInputError> {
        if self.providers.is_empty() {
            return Err(RenderInputError::NoProviders);
        }
        if self.claim.is_none() && self.pool.is_none() {
            return Err(RenderInputError::NothingToRender);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROVIDER: &str = "apiVersion: poolboy.gpte.redhat.com/v1\nkind: ResourceProvider\nmetadata: {name: p}\nspec: {}\n";
    const CLAIM: &str = "apiVersion: poolboy.gpte.redhat.com/v1\nkind: ResourceClaim\nmetadata: {name: c}\nspec: {provider: {name: p}}\n";
    const POOL: &str = "apiVersion: poolboy.gpte.redhat.com/v1\nkind: ResourcePool\nmetadata: {name: gold}\nspec: {minAvailable: 1}\n";

    #[test]
    fn documents_are_sorted_by_kind_across_streams() {
        let mut input = RenderInput::default();
        input
            .add_yaml("a.yaml", &format!("{PROVIDER}---\n{PROVIDER}---\n"))
            .unwrap();
        input
            .add_yaml("b.yaml", &format!("---\n{POOL}---\n{CLAIM}"))
            .unwrap();
        assert_eq!(input.providers.len(), 2);
        assert_eq!(
            input.pool.as_ref().unwrap().metadata.name.as_deref(),
            Some("gold")
        );
        assert_eq!(
            input.claim.as_ref().unwrap().metadata.name.as_deref(),
            Some("c")
        );
        assert!(input.check_complete().is_ok());
    }

    #[test]
    fn bad_yaml_names_the_source() {
        let mut input = RenderInput::default();
        let error = input.add_yaml("bad.yaml", "kind: [unclosed").unwrap_err();
        assert!(
            error.to_string().starts_with("bad.yaml: not valid YAML: "),
            "{error}"
        );
    }

    #[test]
    fn an_unexpected_kind_names_source_document_and_kind() {
        let mut input = RenderInput::default();
        let error = input
            .add_yaml(
                "x.yaml",
                &format!("{PROVIDER}---\nkind: ConfigMap\napiVersion: v1\n"),
            )
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "x.yaml: document 1: kind ConfigMap is not one `poolboy render` reads \
             (ResourceProvider, ResourcePool, ResourceClaim)"
        );
        let error = input.add_yaml("y.yaml", "just: a map\n").unwrap_err();
        assert!(error.to_string().contains("kind (no kind)"), "{error}");
        let error = input.add_yaml("z.yaml", "a scalar\n").unwrap_err();
        assert!(error.to_string().contains("kind (no kind)"), "{error}");
    }

    #[test]
    fn an_invalid_object_names_kind_and_name() {
        let mut input = RenderInput::default();
        let error = input
            .add_yaml(
                "c.yaml",
                "apiVersion: poolboy.gpte.redhat.com/v1\nkind: ResourceClaim\nmetadata: {name: c}\nspec: {provider: {name: [not, a, string]}}\n",
            )
            .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("c.yaml: document 0: ResourceClaim c: "),
            "{error}"
        );
    }

    #[test]
    fn one_claim_and_one_pool_at_most() {
        let mut input = RenderInput::default();
        let error = input
            .add_yaml("c.yaml", &format!("{CLAIM}---\n{CLAIM}"))
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "more than one ResourceClaim given; render one at a time"
        );
        let mut input = RenderInput::default();
        input.add_yaml("p.yaml", POOL).unwrap();
        let error = input.add_yaml("q.yaml", POOL).unwrap_err();
        assert_eq!(
            error.to_string(),
            "more than one ResourcePool given; render one at a time"
        );
    }

    #[test]
    fn something_must_be_rendered_with_providers() {
        let mut input = RenderInput::default();
        assert_eq!(
            input.check_complete().unwrap_err().to_string(),
            "no ResourceProvider given"
        );
        input.add_yaml("p.yaml", PROVIDER).unwrap();
        assert_eq!(
            input.check_complete().unwrap_err().to_string(),
            "nothing to render: give a ResourceClaim, or a ResourcePool"
        );
        input.add_yaml("empty.yaml", "").unwrap();
        input.add_yaml("c.yaml", CLAIM).unwrap();
        assert!(input.check_complete().is_ok());
    }
}
