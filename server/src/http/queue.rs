//! The candidate queue: `GET /v1/sessions/{id}/queue?op=&shape=&target=`,
//! streamed as Server-Sent Events.
//!
//! The queue itself (NNJIT's extended space, each candidate compiled just in
//! time and ticketed) is the service's ([`crate::service::Queue`]); this
//! edge admits it (per-session rate, queue slots), then pulls one candidate
//! at a time into a bounded channel, which keeps the compiler at most a
//! couple of kernels ahead of the client: a client that disconnects stops
//! the producer at its next send. Each candidate is one `candidate` event; a
//! final `done` event closes the queue.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use axum::response::sse::{Event, KeepAlive, Sse};

use super::error::ApiResult;
use super::limits::{self, Slot};
use super::protocol::{ErrorBody, KernelQuery};
use super::{App, query};
use crate::service::QueueItem;

/// Candidates compiled ahead of the client.
const AHEAD: usize = 2;

/// Candidate queue as Server-Sent Events: `candidate` events (data:
/// CandidateEvent JSON), then one `done` event (data: QueueDone JSON).
#[utoipa::path(get, path = "/v1/sessions/{id}/queue", params(("id" = String, Path, pattern = "^[0-9a-f]{32}$"), KernelQuery), responses(
    (status = 200, description = "Event stream of `candidate` (CandidateEvent) and `done` (QueueDone) events", body = String, content_type = "text/event-stream"),
    (status = 400, response = ErrorBody), (status = 404, response = ErrorBody), (status = 422, response = ErrorBody), (status = 429, response = ErrorBody), (status = 503, response = ErrorBody)))]
pub async fn queue(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    q: Result<Query<KernelQuery>, QueryRejection>,
) -> ApiResult<axum::response::Response> {
    let session = app.service.session(&id).await?;
    let q = query(q)?;
    if let Err(wait) = app.per_session.take(&id) {
        app.service.metrics.rate_limited.fetch_add(1, Ordering::Relaxed);
        return Ok(limits::too_many("too many queues from this session", wait));
    }
    // Bounded: a few queues per session, a bounded number in all. The slots
    // travel with the producer task and are released when it ends, which a
    // client that disconnects causes at the next candidate.
    let per_session = {
        let mut map = app.session_queues.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() > 100_000 {
            map.retain(|_, n| n.load(Ordering::Acquire) > 0);
        }
        map.entry(id.clone()).or_default().clone()
    };
    let Some(session_slot) = Slot::try_take(&per_session, app.config.limits.max_queues_per_session) else {
        return Ok(limits::too_many(
            "this session already streams its limit of queues; finish or close one",
            std::time::Duration::from_secs(1),
        ));
    };
    let Some(global_slot) = Slot::try_take(&app.queues, app.config.limits.max_queues) else {
        app.service.metrics.overloaded.fetch_add(1, Ordering::Relaxed);
        return Ok(limits::overloaded("the server streams its limit of candidate queues"));
    };
    let mut queue = app.service.queue(&session, &q.op, &q.shape, &q.target).await?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(AHEAD);
    tokio::spawn(async move {
        let _slots = (session_slot, global_slot);
        while let Some(item) = queue.next(&app.service).await {
            let candidate = matches!(item, QueueItem::Candidate(_));
            let event = match item {
                QueueItem::Candidate(c) => {
                    let Ok(data) = serde_json::to_string(&c) else { continue };
                    Event::default().event("candidate").id(c.index.to_string()).data(data)
                }
                QueueItem::Done(done) => Event::default().event("done").data(serde_json::to_string(&done).unwrap_or_default()),
            };
            if tx.send(event).await.is_err() {
                return; // the client went away
            }
            if candidate {
                app.service.metrics.candidates_streamed.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx)) });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}
