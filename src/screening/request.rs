//! Which requests read a collection: a GET of `/api/v1[/namespaces/<ns>]/<plural>` or
//! `/apis/<group>/<version>[/namespaces/<ns>]/<plural>`, with no object name, as a LIST or,
//! with `watch=true`, as a WATCH.

/// A collection GET.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CollectionRead {
    /// The API group, empty for the core group.
    pub group: String,
    pub version: String,
    pub plural: String,
    /// The namespace the read is confined to; `None` across all namespaces (or for a
    /// cluster-scoped kind).
    pub namespace: Option<String>,
    /// A WATCH (newline-delimited events) rather than a LIST.
    pub watch: bool,
    /// A label or field selector narrows the read: a LIST does not show every object of its
    /// scope.
    pub selective: bool,
    /// A LIST page after the first (`continue=`).
    pub continued: bool,
    /// Metadata only (`Accept: …;as=PartialObjectMetadataList`): items have no spec to
    /// decode. Set from the request's headers, not its path.
    pub metadata_only: bool,
}

impl CollectionRead {
    /// The collection a GET of `path?query` reads, if it reads one.
    pub(crate) fn of_get(path: &str, query: Option<&str>) -> Option<Self> {
        let mut segments = path.trim_matches('/').split('/');
        let (group, version) = match segments.next()? {
            "api" => (String::new(), segments.next()?),
            "apis" => (segments.next()?.to_owned(), segments.next()?),
            _ => return None,
        };
        let rest: Vec<&str> = segments.collect();
        let (namespace, plural) = match rest.as_slice() {
            [plural] => (None, *plural),
            // `/api/v1/namespaces/<name>/<subresource>` reads one Namespace.
            ["namespaces", _, "status" | "finalize"] if group.is_empty() => return None,
            ["namespaces", namespace, plural] => (Some((*namespace).to_owned()), *plural),
            _ => return None,
        };
        if plural.is_empty() || version.is_empty() {
            return None;
        }
        let mut watch = false;
        let mut selective = false;
        let mut continued = false;
        for pair in query.unwrap_or_default().split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "watch" => watch = matches!(value, "true" | "1"),
                "labelSelector" | "fieldSelector" => selective |= !value.is_empty(),
                "continue" => continued |= !value.is_empty(),
                _ => {}
            }
        }
        Some(Self {
            group,
            version: version.to_owned(),
            plural: plural.to_owned(),
            namespace,
            watch,
            selective,
            continued,
            metadata_only: false,
        })
    }
}

/// The verb the API server names a request of `method` to `path?query` by: a GET of a
/// collection is a `list` or a `watch`, of one object a `get`.
pub(crate) fn verb(method: &str, path: &str, query: Option<&str>) -> &'static str {
    match method {
        "GET" => match CollectionRead::of_get(path, query) {
            Some(read) if read.watch => "watch",
            Some(_) => "list",
            None => "get",
        },
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::verb;

    #[test]
    fn a_request_is_named_by_the_verb_the_api_server_counts() {
        let handles = "/apis/poolboy.gpte.redhat.com/v1/namespaces/poolboy/resourcehandles";
        assert_eq!(verb("GET", handles, None), "list");
        assert_eq!(
            verb("GET", handles, Some("watch=true&resourceVersion=7")),
            "watch"
        );
        assert_eq!(verb("GET", &format!("{handles}/guid-a"), None), "get");
        assert_eq!(verb("GET", "/api/v1/namespaces/user", None), "get");
        assert_eq!(verb("POST", handles, None), "create");
        assert_eq!(
            verb("PATCH", &format!("{handles}/guid-a/status"), None),
            "patch"
        );
        assert_eq!(verb("DELETE", &format!("{handles}/guid-a"), None), "delete");
        assert_eq!(verb("PUT", &format!("{handles}/guid-a"), None), "update");
    }
}
