//! `GET /v1/rho`: the kernel pairs of NNJIT's primitive vector ρ
//! (`webtune_tuner::rho`), compiled and stored like every other kernel, so
//! that a client fetches them by content address, times each pair on the
//! device and opens its session with the bits.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use webtune_compiler::Target;

use super::App;
use super::error::{ApiError, ApiResult};
use super::protocol::{ErrorBody, RhoQuery, RhoResponse};

/// The kernel pairs of the on-device microbenchmark ρ: time each pair, one
/// bit per pair (1: variant / base < 1 − margin), and send the bits as
/// `fingerprint.rho`.
#[utoipa::path(get, path = "/v1/rho", params(RhoQuery), responses(
    (status = 200, description = "The pairs, in bit order (none for wgsl yet)", body = RhoResponse),
    (status = 400, response = ErrorBody)))]
pub async fn rho(State(app): State<Arc<App>>, q: Result<Query<RhoQuery>, QueryRejection>) -> ApiResult<Json<RhoResponse>> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(format!("{}; expected ?target=wasm or ?target=wgsl", e.body_text())))?;
    let target: Target = q.target.parse().map_err(|e: String| ApiError::bad_request(e))?;
    Ok(Json(app.service.rho(target).await?))
}
