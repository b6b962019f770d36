//! The input of `poolboy render`: YAML documents sorted into providers, at most one pool and
//! at most one claim. Reading files is the CLI's job; this only interprets their text.

use serde_json::Value;

use crate::api::{ResourceClaim, ResourcePool, ResourceProvider};

#[derive(Debug, thiserror::Error)]
pub enum RenderInputError {
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
pub struct RenderInput {
    pub providers: Vec<ResourceProvider>,
    pub pool: Option<ResourcePool>,
    pub claim: Option<ResourceClaim>,
}

impl RenderInput {
    /// Adds the documents of one YAML stream; `source_name` names it in messages.
    pub fn add_yaml(&mut self, source_name: &str, text: &str) -> Result<(), RenderInputError> {
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
    pub fn check_complete(&self) -> Result<(), RenderInputError> {
        if self.providers.is_empty() {
            return Err(RenderInputError::NoProviders);
        }
        if self.claim.is_none() && self.pool.is_none() {
            return Err(RenderInputError::NothingToRender);
        }
        Ok(())
    }
}
