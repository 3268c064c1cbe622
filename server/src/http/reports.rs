//! `POST /v1/sessions/{id}/reports`: a client's top N, admitted here (the
//! session, its rate, the body) and checked and stored by the service
//! (`crate::service`'s `reports`: tickets, plausible times, recomputed
//! output samples, one transaction). The answer (200) comes only after the
//! measurements and the re-elected winners committed.
//!
//! `POST /v1/sessions/{id}/reports/batch`: up to
//! [`MAX_BATCH_REPORTS`] reports in one request, which costs the session one
//! request of its rate; each is checked and stored as if sent alone (the
//! database's writers commit them together), and answered with its own
//! status. A rate-limited request is answered 429 with `Retry-After`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::error::{ApiError, ApiResult};
use super::protocol::{ErrorBody, MAX_BATCH_REPORTS, ReportBatch, ReportBatchResponse, ReportRequest, ReportResponse, ReportResult};
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
        return Err(ApiError::too_many("too many reports from this session", wait));
    }
    let req: ReportRequest = json_body(body)?;
    Ok(app.service.record_report(&session, &req).await?)
}

/// Report several kernels' top N at once (1 to 16 reports); one request of the session's rate.
#[utoipa::path(post, path = "/v1/sessions/{id}/reports/batch", params(("id" = String, Path, pattern = "^[0-9a-f]{32}$")),
    request_body = ReportBatch, responses(
    (status = 200, description = "Each report's status (200: stored) with its answer or error, in the batch's order", body = ReportBatchResponse),
    (status = 400, response = ErrorBody), (status = 404, response = ErrorBody), (status = 413, response = ErrorBody), (status = 422, response = ErrorBody), (status = 429, response = ErrorBody), (status = 503, response = ErrorBody)))]
pub(super) async fn report_batch(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let session = app.service.session(&id).await?;
    if let Err(wait) = app.per_session.take(&id) {
        app.service.metrics.rate_limited.fetch_add(1, Ordering::Relaxed);
        return Err(ApiError::too_many("too many reports from this session", wait));
    }
    let batch: ReportBatch = json_body(body)?;
    let n = batch.reports.len();
    if n == 0 || n > MAX_BATCH_REPORTS {
        return Err(ApiError::unprocessable(format!("reports has {n} items; send 1 to {MAX_BATCH_REPORTS} reports in a batch")));
    }
    // Side by side, so that the database's writers commit them in one group.
    let answers = futures_util::future::join_all(batch.reports.iter().map(|r| app.service.record_report(&session, r))).await;
    let results = answers
        .into_iter()
        .map(|a| match a {
            Ok(report) => {
                app.service.metrics.reports_accepted.fetch_add(1, Ordering::Relaxed);
                ReportResult { status: StatusCode::OK.as_u16(), report: Some(report), error: None }
            }
            Err(e) => {
                app.service.metrics.reports_rejected.fetch_add(1, Ordering::Relaxed);
                let e = ApiError::from(e);
                ReportResult { status: e.status.as_u16(), report: None, error: Some(e.message) }
            }
        })
        .collect();
    Ok(Json(ReportBatchResponse { results }).into_response())
}
