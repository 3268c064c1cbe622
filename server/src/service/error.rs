//! The service's one error type: what kind of failure (the edge maps each
//! kind to a status code) and a message that says what was wrong and how to
//! fix it. Internal errors are logged with their detail where they are made
//! and carry a generic message, so no database or compiler text leaks to
//! clients.

/// What went wrong, as the edge needs to know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request is malformed (a query or field that does not parse).
    BadRequest,
    /// A ticket that does not hold (signature, expiry, session, kernel).
    Forbidden,
    /// No such session, kernel or model.
    NotFound,
    /// A ticket used twice.
    Conflict,
    /// Well-formed, but the rules refuse it.
    Unprocessable,
    /// The service failed; the detail was logged.
    Internal,
}

#[derive(Debug)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, message: message.into() }
    }
    pub fn bad_request(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::BadRequest, message)
    }
    pub fn forbidden(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Forbidden, message)
    }
    pub fn not_found(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::NotFound, message)
    }
    pub fn unprocessable(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Unprocessable, message)
    }
    /// Logs `detail` and carries a generic message without it.
    pub fn internal(detail: impl std::fmt::Display) -> Error {
        eprintln!("webtune serve: internal error: {detail}");
        Error::new(ErrorKind::Internal, "internal error; the server logged the details")
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<webtune_kernel_db::DbError> for Error {
    fn from(e: webtune_kernel_db::DbError) -> Error {
        use webtune_kernel_db::DbError;
        match e {
            DbError::TicketReused(sha) => Error::new(
                ErrorKind::Conflict,
                format!(
                    "the ticket for kernel {sha} was already used; each ticket counts once: take the kernel from a new queue to measure it again"
                ),
            ),
            DbError::UnknownKernel(sha) => {
                Error::unprocessable(format!("kernel {sha} is not known to this server; report only kernels received from its queue"))
            }
            e @ DbError::WrongKind { .. } => Error::unprocessable(format!("{e}; report each op, shape and target separately")),
            other => Error::internal(other),
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// An error and its sources, `: `-separated (what a log line needs).
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        text.push_str(": ");
        text.push_str(&s.to_string());
        next = s.source();
    }
    text
}
