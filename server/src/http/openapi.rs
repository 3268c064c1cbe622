//! `/v1/openapi.json`: the OpenAPI 3.1 document, derived by utoipa from the
//! wire types of [`super::protocol`] (their `ToSchema` and `IntoParams`) and
//! from the `#[utoipa::path]` on each handler, so that it describes what the
//! server parses and sends rather than a copy kept by hand.
//!
//! Tests here check it against the router's table (every route documented,
//! nothing documented that is not served) and keep the copy in
//! `client-runtime/web/openapi.json` current, against which the browser
//! runtime's wire types are checked (`client-runtime/web/test/wire.test.mjs`).

use axum::Json;
use utoipa::OpenApi;
use utoipa::openapi::{OpenApi as Document, PathItem};

use super::BODY_LIMIT;
use super::protocol::{CandidateEvent, ErrorBody, QueueDone};

#[derive(OpenApi)]
#[openapi(
    info(title = "webtune"),
    paths(
        super::create_session,
        super::queue::queue,
        super::reports::report,
        super::reports::report_batch,
        super::best,
        super::kernel_bytes,
        super::rho::rho,
        super::models::list,
        super::models::manifest,
        super::models::graph,
        super::models::blob,
        super::models::latency,
        super::models::plan,
        openapi,
        super::pages::metrics,
        super::healthz,
        super::pages::dashboard,
        super::web::demo,
        super::web::file,
    ),
    // The queue's events travel as SSE text, so no handler names them.
    components(schemas(CandidateEvent, QueueDone), responses(ErrorBody)),
    modifiers(&Extras)
)]
struct ApiDoc;

/// What the derive cannot say: the limits in the description, and `/`,
/// which serves the dashboard under a second path. It also drops the tags
/// utoipa names after the handlers' Rust modules (`super::models`), which
/// tell a reader of the API nothing and would change with every move.
struct Extras;

impl utoipa::Modify for Extras {
    fn modify(&self, doc: &mut Document) {
        doc.info.description = Some(format!(
            "Just-in-time kernel tuning with a crowdsourced kernel database. Request bodies are limited to {BODY_LIMIT} bytes. \
             A request must send its headers, and its body, within the server's timeouts (10 s each by default; 408 past the request timeout). \
             Pages of other origins may call the API only where the server was started with --allow-origin."
        ));
        for item in doc.paths.paths.values_mut() {
            for op in [item.get.as_mut(), item.post.as_mut()].into_iter().flatten() {
                op.tags = None;
            }
        }
        if let Some(dashboard) = doc.paths.paths.get("/dashboard") {
            let mut root: PathItem = dashboard.clone();
            if let Some(op) = root.get.as_mut() {
                op.operation_id = Some("root".into());
                op.summary = Some("The dashboard, as /dashboard".into());
            }
            doc.paths.paths.insert("/".into(), root);
        }
    }
}

/// The document the server serves.
pub fn document() -> Document {
    ApiDoc::openapi()
}

/// This document.
#[utoipa::path(get, path = "/v1/openapi.json", responses((status = 200, description = "OpenAPI 3.1", body = Object)))]
pub async fn openapi() -> Json<Document> {
    Json(document())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn documented() -> BTreeSet<(String, String)> {
        let doc = serde_json::to_value(document()).unwrap();
        let mut out = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                out.insert((path.clone(), method.to_uppercase()));
            }
        }
        out
    }

    #[test]
    fn the_document_lists_exactly_the_routes_served() {
        let served: BTreeSet<(String, String)> =
            super::super::routes().into_iter().map(|(p, m, _)| (p.to_string(), m.to_string())).collect();
        let documented = documented();
        let undocumented: Vec<_> = served.difference(&documented).collect();
        let unserved: Vec<_> = documented.difference(&served).collect();
        assert!(undocumented.is_empty(), "served but not in the OpenAPI document: {undocumented:?}");
        assert!(unserved.is_empty(), "in the OpenAPI document but not served: {unserved:?}");
    }

    /// The browser runtime's wire types are checked against this copy;
    /// `BLESS=1 cargo test -p webtune --lib openapi` rewrites it.
    #[test]
    fn the_committed_copy_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../client-runtime/web/openapi.json");
        let want = serde_json::to_string_pretty(&document()).unwrap() + "\n";
        if std::env::var_os("BLESS").is_some() {
            std::fs::write(path, &want).unwrap();
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(have == want, "client-runtime/web/openapi.json is stale: run `BLESS=1 cargo test -p webtune --lib openapi`");
    }
}
