//! ClickHouse's HTTP conventions: errors (`Code: N. DB::Exception: ...`,
//! the HTTP status ClickHouse gives each code, `X-ClickHouse-Exception-Code`),
//! URL parameters, credentials, content types.

/// An error as ClickHouse reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChError {
    /// ClickHouse's error code.
    pub code: i32,
    /// HTTP status.
    pub status: u16,
    /// The message body (`Code: N. DB::Exception: ... (NAME)`).
    pub message: String,
}

impl ChError {
    /// An error of code `code` (named `name`) saying `what`.
    pub fn new(code: i32, name: &str, what: impl std::fmt::Display) -> ChError {
        ChError {
            code,
            status: status_of(code),
            message: format!("Code: {code}. DB::Exception: {what}. ({name})"),
        }
    }

    /// With another HTTP status than the code's.
    #[must_use]
    pub fn with_status(mut self, status: u16) -> ChError {
        self.status = status;
        self
    }

    /// A request body over the limit.
    pub fn too_large(limit: u64) -> ChError {
        ChError::new(
            36,
            "BAD_ARGUMENTS",
            format!("The request body is larger than the server's limit of {limit} bytes (--max-body-bytes)"),
        )
        .with_status(413)
    }

    /// An error message from the engine (`Code: N. DB::Exception: ...`).
    pub fn from_engine(message: &str) -> ChError {
        let code = message
            .strip_prefix("Code: ")
            .and_then(|r| r.split('.').next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(1001);
        // One prefix and one trailer, as a server says it.
        let message = crate::storage::engine::clean_error(message);
        let message = message.as_str();
        let message = if message.starts_with("Code: ") {
            message.to_string()
        } else {
            format!("Code: {code}. DB::Exception: {message}. (STD_EXCEPTION)")
        };
        ChError {
            code,
            status: status_of(code),
            message,
        }
    }
}

/// The HTTP status ClickHouse's HTTP handler gives an error code
/// (`exceptionCodeToHTTPStatus`).
pub fn status_of(code: i32) -> u16 {
    match code {
        194 => 401,                   // REQUIRED_PASSWORD
        192 | 193 | 516 | 497 => 403, // UNKNOWN_USER, WRONG_PASSWORD, AUTHENTICATION_FAILED, ACCESS_DENIED
        // CANNOT_PARSE_*, SYNTAX_ERROR, INCORRECT_DATA, TYPE_MISMATCH, AST errors
        6 | 25 | 26 | 27 | 38 | 41 | 62 | 72 | 117 | 53 | 167 | 168 | 36 | 456 | 457 => 400,
        // UNKNOWN_TABLE, _FUNCTION, _IDENTIFIER, _TYPE, _STORAGE, _DATABASE,
        // _SETTING, _AGGREGATE_FUNCTION, _FORMAT
        60 | 46 | 47 | 50 | 56 | 81 | 115 | 63 | 73 => 404,
        48 => 501,  // NOT_IMPLEMENTED
        159 => 408, // TIMEOUT_EXCEEDED
        202 => 503, // TOO_MANY_SIMULTANEOUS_QUERIES
        _ => 500,
    }
}

/// Decodes an `application/x-www-form-urlencoded` query string.
pub fn parse_query(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(b[i + 1]), hex(b[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The user and password of a `Basic` `Authorization` header.
pub fn basic_credentials(header: &str) -> Option<(String, String)> {
    use base64::Engine as _;
    let (scheme, rest) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (u, p) = text.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

/// The `Content-Type` ClickHouse sends for an output format.
pub fn content_type(format: &str) -> &'static str {
    let f = format.to_ascii_lowercase();
    if f.starts_with("json") && !f.contains("compact") || f == "jsoncompact" {
        "application/json; charset=UTF-8"
    } else if f.starts_with("json") {
        "application/x-ndjson; charset=UTF-8"
    } else if f.starts_with("tabseparated") || f.starts_with("tsv") {
        "text/tab-separated-values; charset=UTF-8"
    } else if f.starts_with("csv") {
        "text/csv; charset=UTF-8; header=absent"
    } else if matches!(
        f.as_str(),
        "pretty" | "prettycompact" | "vertical" | "markdown" | "values"
    ) || f.starts_with("pretty")
    {
        "text/plain; charset=UTF-8"
    } else if f == "xml" {
        "application/xml; charset=UTF-8"
    } else {
        "application/octet-stream"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_and_credentials() {
        assert_eq!(
            parse_query("query=SELECT+1%2C%202&param_x=a%26b&empty&bad=%zz%4"),
            vec![
                ("query".into(), "SELECT 1, 2".into()),
                ("param_x".into(), "a&b".into()),
                ("empty".into(), String::new()),
                ("bad".into(), "%zz%4".into()),
            ]
        );
        assert_eq!(
            basic_credentials("Basic dXNlcjpwYTpzcw=="),
            Some(("user".into(), "pa:ss".into()))
        );
        assert_eq!(basic_credentials("Bearer x"), None);
    }

    #[test]
    fn engine_errors_keep_their_code() {
        let e = ChError::from_engine("Code: 60. DB::Exception: Unknown table. (UNKNOWN_TABLE)");
        assert_eq!((e.code, e.status), (60, 404));
        let e = ChError::from_engine(
            "Code: 164. DB::Exception: Code: 164. DB::Exception: Cannot modify. (READONLY)",
        );
        assert_eq!(
            e.message,
            "Code: 164. DB::Exception: Cannot modify. (READONLY)"
        );
        let e = ChError::from_engine(
            "Code: 73. DB::Exception: Unknown format Nope. (UNKNOWN_FORMAT) (version 26.5.1.1). \
             (UNKNOWN_FORMAT) (version 26.5.1.1). (UNKNOWN_FORMAT)",
        );
        assert_eq!(
            e.message,
            "Code: 73. DB::Exception: Unknown format Nope. (UNKNOWN_FORMAT) (version 26.5.1.1)"
        );
        let e = ChError::from_engine("the engine is closed");
        assert_eq!((e.code, e.status), (1001, 500));
        assert!(e
            .message
            .starts_with("Code: 1001. DB::Exception: the engine is closed"));
    }
}
