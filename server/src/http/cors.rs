//! Cross-origin requests: which other origins' pages may call the API.
//!
//! The common deployment serves an app from its own origin and the tuning
//! service from another, so the app's page must be allowed to open
//! sessions, read queues and post reports across origins. By default no
//! origin is (the server's own pages need no permission); `webtune serve
//! --allow-origin ORIGIN`, repeatable, allows each given origin, and
//! `--allow-origin '*'` any. tower-http's `CorsLayer` answers preflights
//! (`OPTIONS` with `Access-Control-Request-Method`) and adds the headers to
//! responses.
//!
//! Credentials are never allowed and never needed: a session is named by
//! its id in the URL, and no endpoint reads a cookie or an `Authorization`
//! header, so a page of an allowed origin can do nothing that a script
//! calling the API directly could not. Kernel bytes, model blobs and the
//! client runtime (`/web/*`) are public and carry
//! `Access-Control-Allow-Origin: *` of their own whatever this says.
//!
//! Cross-origin isolated pages (COOP + COEP `require-corp`, which Wasm
//! threads need) load a no-cors resource of another origin only when it
//! says `Cross-Origin-Resource-Policy: cross-origin` (CORS fetches need
//! only the CORS headers). [`resource_policy`] adds that header to every
//! response another origin may read: all of them under `--allow-origin`,
//! and the public resources always.

use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderName, HeaderValue, Method, header};
use axum::response::Response;
use tower_http::cors::{AllowOrigin, CorsLayer};

/// The origins allowed to call the API from a page.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Origins {
    /// Same origin only: no CORS headers at all.
    #[default]
    None,
    /// These origins, exactly as browsers send them (`https://app.example`).
    List(Vec<HeaderValue>),
    /// Any origin (`--allow-origin '*'`).
    Any,
}

impl Origins {
    /// Reads `--allow-origin` values: `*`, or origins of the form
    /// `scheme://host[:port]`, as a browser's `Origin` header spells them.
    pub fn parse(values: &[String]) -> Result<Origins, String> {
        if values.is_empty() {
            return Ok(Origins::None);
        }
        if values.iter().any(|v| v == "*") {
            return Ok(Origins::Any);
        }
        let mut list = Vec::with_capacity(values.len());
        for v in values {
            list.push(origin(v)?);
        }
        Ok(Origins::List(list))
    }
}

fn origin(v: &str) -> Result<HeaderValue, String> {
    let shown = v.chars().take(80).collect::<String>().escape_debug().to_string();
    let bad = |why: &str| {
        format!(
            "--allow-origin `{shown}`: {why}; give an origin as a browser sends it, e.g. https://app.example or http://localhost:5173, or `*`"
        )
    };
    let Some((scheme, rest)) = v.split_once("://") else { return Err(bad("no scheme")) };
    if scheme != "http" && scheme != "https" {
        return Err(bad("the scheme must be http or https"));
    }
    if rest.is_empty() || rest.contains('/') {
        return Err(bad(if rest.is_empty() { "no host" } else { "an origin has no path, not even a trailing /" }));
    }
    if v.len() > 253 + 16 || !rest.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b)) {
        return Err(bad("the host has characters an origin cannot have"));
    }
    // Browsers send origins in lower case.
    HeaderValue::from_str(&v.to_ascii_lowercase()).map_err(|_| bad("not a valid header value"))
}

/// The layer for `origins`: empty (no headers) for [`Origins::None`].
pub fn layer(origins: &Origins) -> CorsLayer {
    let allow = match origins {
        Origins::None => return CorsLayer::new(),
        Origins::List(list) => AllowOrigin::list(list.iter().cloned()),
        Origins::Any => AllowOrigin::any(),
    };
    CorsLayer::new()
        .allow_origin(allow)
        .allow_methods([Method::GET, Method::POST])
        .allow_headers([header::CONTENT_TYPE, header::IF_NONE_MATCH])
        .expose_headers([header::RETRY_AFTER, header::ETAG])
        .allow_credentials(false)
        .max_age(Duration::from_secs(600))
}

/// Adds `Cross-Origin-Resource-Policy: cross-origin` to a response that
/// other origins may read: any response when `cross_origin` (the server has
/// `--allow-origin`), else a public one (its handler's own
/// `Access-Control-Allow-Origin: *`). A policy the handler set is kept.
pub async fn resource_policy(State(cross_origin): State<bool>, mut res: Response) -> Response {
    const CORP: HeaderName = HeaderName::from_static("cross-origin-resource-policy");
    let public = res.headers().get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_some_and(|v| v == "*");
    if (cross_origin || public) && !res.headers().contains_key(CORP) {
        res.headers_mut().insert(CORP, HeaderValue::from_static("cross-origin"));
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_parse_and_refuse() {
        assert_eq!(Origins::parse(&[]).unwrap(), Origins::None);
        assert_eq!(Origins::parse(&["*".into()]).unwrap(), Origins::Any);
        let l = Origins::parse(&["https://App.example".into(), "http://localhost:5173".into()]).unwrap();
        assert_eq!(
            l,
            Origins::List(vec![HeaderValue::from_static("https://app.example"), HeaderValue::from_static("http://localhost:5173")])
        );
        for bad in ["app.example", "ftp://a", "https://a/", "https://", "https://a b", "https://a\n"] {
            let e = Origins::parse(&[bad.into()]).unwrap_err();
            assert!(e.starts_with("--allow-origin") && !e.contains('\n'), "{bad}: {e}");
        }
    }
}
