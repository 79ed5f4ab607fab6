//! The ClickHouse HTTP interface served over the embedded engine.
//!
//! Enough of the interface for the `clickhouse` crate and for people with curl
//! (`../shared/CLICKHOUSE_HTTP.md`, section 5): `POST /` (or `GET /?query=`) where the
//! statement is the `query` URL parameter followed by the body; `INSERT … FORMAT F` takes the
//! body as data, LZ4-compressed in ClickHouse's native blocks when `decompress=1`; results use
//! the statement's own FORMAT, else `default_format`, else TabSeparated; a failure is HTTP 500
//! with the message as the body and `X-ClickHouse-Exception-Code`. It lets tests run the
//! ClickHouse server sink against the real engine, and lets other processes (Grafana's
//! ClickHouse data source, `curl`) read the embedded store while `epicenter run` holds it.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;

use crate::embedded::EmbeddedStore;

/// Largest request body accepted: one insert batch (the writer's `max_bytes` is 256 MiB by
/// default; compressed it is smaller).
pub const MAX_BODY_BYTES: usize = 1 << 30;

/// Router answering ClickHouse HTTP requests on `/` from `store`.
pub fn router(store: Arc<EmbeddedStore>) -> Router {
    Router::new()
        .route("/", any(handle))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(store)
}

fn failure(message: &str) -> Response {
    let code = message
        .split("Code: ")
        .nth(1)
        .and_then(|rest| rest.split(|character: char| !character.is_ascii_digit()).next())
        .filter(|digits| !digits.is_empty())
        .unwrap_or("1000")
        .to_string();
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(&code) {
        headers.insert("X-ClickHouse-Exception-Code", value);
    }
    (StatusCode::INTERNAL_SERVER_ERROR, headers, format!("{message}\n")).into_response()
}

/// Decodes ClickHouse's compressed native blocks: 16-byte checksum, method byte (0x82 LZ4,
/// 0x02 none), compressed size (u32 LE, header included), uncompressed size (u32 LE), payload.
/// The checksum is not verified (loopback test traffic).
fn decompress_blocks(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while !data.is_empty() {
        if data.len() < 25 {
            return Err("truncated compressed block header".to_string());
        }
        let method = data[16];
        let compressed_size = u32::from_le_bytes([data[17], data[18], data[19], data[20]]) as usize;
        let uncompressed_size = u32::from_le_bytes([data[21], data[22], data[23], data[24]]) as usize;
        if compressed_size < 9 || data.len() < 16 + compressed_size {
            return Err("truncated compressed block".to_string());
        }
        let payload = &data[25..16 + compressed_size];
        match method {
            0x82 => out.extend_from_slice(
                &lz4_flex::block::decompress(payload, uncompressed_size).map_err(|error| format!("lz4: {error}"))?,
            ),
            0x02 => out.extend_from_slice(payload),
            other => return Err(format!("unsupported compression method 0x{other:02x}")),
        }
        data = &data[16 + compressed_size..];
    }
    Ok(out)
}

/// Splits `INSERT INTO t (cols) FORMAT F` into the statement without FORMAT and `F`.
fn split_insert(statement: &str) -> Option<(String, String)> {
    let trimmed = statement.trim();
    if !trimmed.get(..6).is_some_and(|head| head.eq_ignore_ascii_case("insert")) {
        return None;
    }
    let upper = trimmed.to_ascii_uppercase();
    let at = upper.rfind(" FORMAT ")?;
    let format = trimmed[at + 8..].trim().to_string();
    Some((trimmed[..at].to_string(), format))
}

async fn handle(
    State(store): State<Arc<EmbeddedStore>>,
    Query(params): Query<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    if params.keys().any(|name| name.starts_with("param_")) {
        return failure("Code: 48. server-side query parameters are not supported by this endpoint");
    }
    let query = params.get("query").cloned().unwrap_or_default();
    let decompress = params.get("decompress").is_some_and(|value| value == "1");
    let result = if let Some((insert, format)) = split_insert(&query) {
        let data = if decompress {
            decompress_blocks(&body)
        } else {
            Ok(body.to_vec())
        };
        match data {
            Ok(data) => {
                tokio::task::spawn_blocking(move || store.insert_raw(&insert, &format, &data).map(|_| Vec::new()))
                    .await
                    .map_err(|error| error.to_string())
                    .and_then(|result| result.map_err(|error| error.to_string()))
            }
            Err(error) => Err(format!("Code: 271. cannot decompress the request body: {error}")),
        }
    } else {
        let mut statement = query;
        if !body.is_empty() {
            if !statement.is_empty() {
                statement.push('\n');
            }
            statement.push_str(&String::from_utf8_lossy(&body));
        }
        let format = params
            .get("default_format")
            .cloned()
            .unwrap_or_else(|| "TabSeparated".to_string());
        let database = params.get("database").cloned();
        tokio::task::spawn_blocking(move || store.query_in(database.as_deref(), &statement, &format))
            .await
            .map_err(|error| error.to_string())
            .and_then(|result| result.map_err(|error| error.to_string()))
    };
    match result {
        Ok(output) => (StatusCode::OK, output).into_response(),
        Err(message) => failure(&message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserts_are_split_from_their_format() {
        assert_eq!(
            split_insert("INSERT INTO db.samples (a, b) FORMAT RowBinary"),
            Some(("INSERT INTO db.samples (a, b)".to_string(), "RowBinary".to_string()))
        );
        assert_eq!(split_insert("SELECT 1 FORMAT TabSeparated"), None);
    }

    #[test]
    fn uncompressed_blocks_pass_through_and_lz4_blocks_decode() {
        let payload = b"hello hello hello hello";
        let compressed = lz4_flex::block::compress(payload);
        let mut block = vec![0u8; 16];
        block.push(0x82);
        block.extend_from_slice(&((compressed.len() + 9) as u32).to_le_bytes());
        block.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        block.extend_from_slice(&compressed);
        let twice = [block.clone(), block].concat();
        assert_eq!(
            decompress_blocks(&twice).unwrap(),
            [payload.as_slice(), payload].concat()
        );
        assert!(decompress_blocks(&twice[..30]).is_err());
    }
}
