//! The one error type of the HTTP edge. Every failure becomes a status code
//! and `{"error": "..."}` saying what was wrong and how to fix it. Internal
//! errors are logged with their detail and answered with a generic message,
//! so no database or compiler text leaks to clients.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::protocol::ErrorBody;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// Seconds for a `Retry-After` header (a rate limit's 429).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError { status, message: message.into(), retry_after: None }
    }
    /// A rate limit's 429: `what`, and when to come back, in the message and
    /// in `Retry-After` (whole seconds, at least 1), which clients wait out.
    pub fn too_many(what: &str, wait: std::time::Duration) -> ApiError {
        let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
        ApiError { status: StatusCode::TOO_MANY_REQUESTS, message: format!("{what}; retry in {secs} s"), retry_after: Some(secs) }
    }
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }
    pub fn unprocessable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message)
    }
    /// Logs `detail` and answers 500 without it.
    pub fn internal(detail: impl std::fmt::Display) -> ApiError {
        eprintln!("webtune serve: internal error: {detail}");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error; the server logged the details")
    }
}

impl From<crate::service::Error> for ApiError {
    /// The service's errors, as statuses (an internal one was logged where it was made).
    fn from(e: crate::service::Error) -> ApiError {
        use crate::service::ErrorKind;
        let status = match e.kind {
            ErrorKind::BadRequest => StatusCode::BAD_REQUEST,
            ErrorKind::Forbidden => StatusCode::FORBIDDEN,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::Conflict => StatusCode::CONFLICT,
            ErrorKind::Unprocessable => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, Json(ErrorBody { error: self.message })).into_response();
        if let Some(secs) = self.retry_after {
            r.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from(secs));
        }
        if self.status == StatusCode::PAYLOAD_TOO_LARGE {
            // The body was not read to its end, so this connection cannot
            // carry another request: say so, or a client may reuse it from
            // its pool and see it closed under its next request.
            r.headers_mut().insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
        }
        r
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
