//! Compression on the wire: HTTP `Content-Encoding` (gzip, deflate, zstd,
//! lz4 frames) of request bodies and, with `enable_http_compression=1`, of
//! responses; and ClickHouse's own compressed-block framing (`decompress=1`
//! request bodies, `compress=1` responses): per block a CityHash128 (v1.0.2)
//! of the rest, a method byte (0x82 LZ4, 0x90 ZSTD, 0x02 none), the
//! compressed size with the 9-byte header and the decompressed size (u32
//! little-endian), then the data.

use super::http::ChError;
use std::io::{Read, Write};

/// ClickHouse's method byte for LZ4.
const LZ4: u8 = 0x82;
/// ClickHouse's method byte for ZSTD.
const ZSTD: u8 = 0x90;
/// ClickHouse's method byte for uncompressed blocks.
const NONE: u8 = 0x02;
/// Uncompressed bytes per block of a `compress=1` response (ClickHouse's
/// `max_compress_block_size`).
const BLOCK: usize = 1 << 20;

/// Decodes a request body sent with `Content-Encoding: name`, refusing to
/// produce more than `limit` bytes.
pub fn decode_content(name: &str, body: &[u8], limit: u64) -> Result<Vec<u8>, ChError> {
    let name = name.trim().to_ascii_lowercase();
    let mut out = Vec::new();
    let read = |r: &mut dyn Read, out: &mut Vec<u8>| -> Result<(), ChError> {
        r.take(limit.saturating_add(1))
            .read_to_end(out)
            .map_err(|e| {
                ChError::new(
                    271,
                    "CANNOT_DECOMPRESS",
                    format!("Cannot decompress the request body ({name}): {e}"),
                )
            })?;
        if out.len() as u64 > limit {
            return Err(ChError::too_large(limit));
        }
        Ok(())
    };
    match name.as_str() {
        "" | "identity" | "none" => return Ok(body.to_vec()),
        "gzip" | "x-gzip" => read(&mut flate2::read::MultiGzDecoder::new(body), &mut out)?,
        "deflate" => read(&mut flate2::read::ZlibDecoder::new(body), &mut out)?,
        "zstd" => {
            let mut d = zstd::stream::read::Decoder::new(body)
                .map_err(|e| ChError::new(271, "CANNOT_DECOMPRESS", format!("zstd: {e}")))?;
            read(&mut d, &mut out)?
        }
        "lz4" => read(&mut lz4_flex::frame::FrameDecoder::new(body), &mut out)?,
        other => {
            return Err(ChError::new(
                36,
                "BAD_ARGUMENTS",
                format!("Unknown Content-Encoding '{other}' (supported: gzip, deflate, zstd, lz4)"),
            ))
        }
    }
    Ok(out)
}

/// The response encoding to use for an `Accept-Encoding` header, if any
/// (preferring gzip, which every client has).
pub fn choose_encoding(accept: &str) -> Option<&'static str> {
    let accept = accept.to_ascii_lowercase();
    let listed = |n: &str| {
        accept
            .split(',')
            .any(|p| p.split(';').next().is_some_and(|m| m.trim() == n))
    };
    ["gzip", "deflate", "zstd", "lz4"]
        .into_iter()
        .find(|n| listed(n))
}

/// Encodes a response body with `name` (one of [`choose_encoding`]'s).
pub fn encode_content(name: &str, data: &[u8]) -> std::io::Result<Vec<u8>> {
    match name {
        "gzip" => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data)?;
            e.finish()
        }
        "deflate" => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data)?;
            e.finish()
        }
        "zstd" => zstd::bulk::compress(data, 1),
        "lz4" => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(data)?;
            e.finish().map_err(std::io::Error::other)
        }
        _ => Ok(data.to_vec()),
    }
}

/// Decodes a `decompress=1` body: ClickHouse compressed blocks, each checked
/// against its checksum, at most `limit` bytes in all.
pub fn decode_blocks(mut body: &[u8], limit: u64) -> Result<Vec<u8>, ChError> {
    let mut out = Vec::new();
    let mut offset = 0usize;
    while !body.is_empty() {
        let truncated = || {
            ChError::new(
                33,
                "CANNOT_READ_ALL_DATA",
                format!(
                    "Cannot read all data: the compressed block at byte {offset} of the request \
                     body is truncated"
                ),
            )
        };
        if body.len() < 25 {
            return Err(truncated());
        }
        let checksum = u128::from_le_bytes(body[..16].try_into().expect("16 bytes"));
        let method = body[16];
        let compressed = u32::from_le_bytes(body[17..21].try_into().expect("4 bytes")) as usize;
        let size = u32::from_le_bytes(body[21..25].try_into().expect("4 bytes")) as usize;
        if compressed < 9 {
            return Err(ChError::new(
                271,
                "CANNOT_DECOMPRESS",
                format!("Bad compressed size {compressed} in the block at byte {offset}"),
            ));
        }
        if body.len() < 16 + compressed {
            return Err(truncated());
        }
        let framed = &body[16..16 + compressed];
        let expected = cityhash_rs::cityhash_102_128(framed).rotate_right(64);
        if checksum != expected {
            return Err(ChError::new(
                40,
                "CHECKSUM_DOESNT_MATCH",
                format!(
                    "Checksum doesn't match: corrupted data in the compressed block at byte \
                     {offset}. Reference: {expected:032x}. Actual: {checksum:032x}."
                ),
            ));
        }
        if (out.len() + size) as u64 > limit {
            return Err(ChError::too_large(limit));
        }
        let data = &framed[9..];
        let bad = |e: String| {
            ChError::new(
                271,
                "CANNOT_DECOMPRESS",
                format!("Cannot decompress the block at byte {offset}: {e}"),
            )
        };
        match method {
            LZ4 => {
                let d = lz4_flex::block::decompress(data, size).map_err(|e| bad(e.to_string()))?;
                if d.len() != size {
                    return Err(bad(format!("{} bytes instead of {size}", d.len())));
                }
                out.extend_from_slice(&d);
            }
            ZSTD => {
                let d = zstd::bulk::decompress(data, size).map_err(|e| bad(e.to_string()))?;
                if d.len() != size {
                    return Err(bad(format!("{} bytes instead of {size}", d.len())));
                }
                out.extend_from_slice(&d);
            }
            NONE => {
                if data.len() != size {
                    return Err(bad(format!("{} bytes instead of {size}", data.len())));
                }
                out.extend_from_slice(data);
            }
            m => return Err(bad(format!("unknown compression method 0x{m:02x}"))),
        }
        offset += 16 + compressed;
        body = &body[16 + compressed..];
    }
    Ok(out)
}

/// Encodes a `compress=1` response: LZ4 blocks of at most 1 MiB.
pub fn encode_blocks(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() / 2 + 64);
    for chunk in data.chunks(BLOCK) {
        let packed = lz4_flex::block::compress(chunk);
        let mut framed = Vec::with_capacity(9 + packed.len());
        framed.push(LZ4);
        framed.extend_from_slice(&((9 + packed.len()) as u32).to_le_bytes());
        framed.extend_from_slice(&(chunk.len() as u32).to_le_bytes());
        framed.extend_from_slice(&packed);
        let sum = cityhash_rs::cityhash_102_128(&framed).rotate_right(64);
        out.extend_from_slice(&sum.to_le_bytes());
        out.extend_from_slice(&framed);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_trip_and_damage_is_named() {
        let data: Vec<u8> = (0..3_000_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let enc = encode_blocks(&data);
        assert_eq!(decode_blocks(&enc, u64::MAX).unwrap(), data);
        let e = decode_blocks(&enc[..enc.len() - 1], u64::MAX).unwrap_err();
        assert_eq!(e.code, 33, "{e:?}");
        let mut bad = enc.clone();
        bad[30] ^= 1;
        assert_eq!(decode_blocks(&bad, u64::MAX).unwrap_err().code, 40);
        assert_eq!(decode_blocks(&enc, 1000).unwrap_err().status, 413);
    }

    #[test]
    fn content_encodings_round_trip() {
        let data = b"INSERT INTO t FORMAT TSV\n1\n2\n".repeat(100);
        for name in ["gzip", "deflate", "zstd", "lz4"] {
            let enc = encode_content(name, &data).unwrap();
            assert_eq!(
                decode_content(name, &enc, u64::MAX).unwrap(),
                data,
                "{name}"
            );
            assert_eq!(decode_content(name, &enc, 10).unwrap_err().status, 413);
        }
        assert_eq!(
            decode_content("gzip", b"garbage", 100).unwrap_err().code,
            271
        );
        assert_eq!(choose_encoding("br, gzip;q=1.0, deflate"), Some("gzip"));
        assert_eq!(choose_encoding("br"), None);
    }
}
