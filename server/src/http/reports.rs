//! `POST /v1/sessions/{id}/reports`: a client's top N, admitted here (the
//! session, its rate, the body) and checked and stored by the service
//! (`crate::service`'s `reports`: tickets, plausible times, recomputed
//! output samples, one transaction). The answer (200) comes only after the
//! measurements and the re-elected winners committed.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::error::{ApiError, ApiResult};
use super::protocol::{ErrorBody, ReportRequest, ReportResponse};
use super::{App, json_body};

/// Report the top N (1 to 5) kernels of one op, shape and target, fastest first.
#[utoipa::path(post, path = "/v1/sessions/{id}/reports", params(("id" = String, Path, pattern = "^[0-9a-f]{32}$")),
    request_body = ReportRequest, responses(
    (status = 200, description = "Stored; the winners after this report", body = ReportResponse),
    (status = 400, response = ErrorBody), (status = 403, response = ErrorBody), (status = 404, response = ErrorBody), (status = 409, response = ErrorBody), (status = 413, response = ErrorBody), (status = 422, response = ErrorBody), (status = 429, response = ErrorBody), (status = 503, response = ErrorBody)))]
pub(super) async fn report(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let r = record(&app, &id, body).await;
    match &r {
        Ok(_) => app.service.metrics.reports_accepted.fetch_add(1, Ordering::Relaxed),
        Err(_) => app.service.metrics.reports_rejected.fetch_add(1, Ordering::Relaxed),
    };
    r.map(|b| Json(b).into_response())
}

async fn record(app: &App, id: &str, body: Result<Bytes, BytesRejection>) -> ApiResult<ReportResponse> {
    let session = app.service.session(id).await?;
    if let Err(wait) = app.per_session.take(id) {
        app.service.metrics.rate_limited.fetch_add(1, Ordering::Relaxed);
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!("too many reports from this session; retry in {} s", wait.as_secs().max(1)),
        ));
    }
    let req: ReportRequest = json_body(body)?;
    Ok(app.service.record_report(&session, &req).await?)
}
