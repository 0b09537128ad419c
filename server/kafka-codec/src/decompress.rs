//! Decompression of produced record batches with a bound: a batch may not
//! expand beyond the log's largest batch (`max_batch_bytes`), whatever its
//! codec claims, so a small request cannot make the server allocate
//! gigabytes (a "zip bomb"). Streams are read through `take(limit + 1)`;
//! snappy's announced lengths are checked before anything is allocated.

use std::io::Read;

use anyhow::{bail, Context};
use bytes::{Buf, Bytes};
use kafka_protocol::records::Compression;

/// The xerial framing header Kafka's Java client writes before snappy blocks.
const XERIAL_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";

/// `compressed` decompressed with `codec`, at most `limit` bytes.
pub fn bounded(compressed: &mut Bytes, codec: Compression, limit: usize) -> anyhow::Result<Bytes> {
    let input = compressed.copy_to_bytes(compressed.remaining());
    let stream: Box<dyn Read> = match codec {
        Compression::None => return Ok(input),
        Compression::Snappy => return snappy(&input, limit),
        Compression::Gzip => Box::new(flate2::read::GzDecoder::new(input.reader())),
        Compression::Lz4 => Box::new(lz4::Decoder::new(input.reader()).context("lz4 header")?),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(input.reader())?),
    };
    let mut out = Vec::new();
    stream
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .with_context(|| format!("{codec:?} data is damaged"))?;
    if out.len() > limit {
        bail!("{codec:?} batch expands beyond {limit} bytes (max_batch_bytes)");
    }
    Ok(out.into())
}

/// Raw snappy, or xerial-framed blocks (as the Java client writes).
fn snappy(input: &[u8], limit: usize) -> anyhow::Result<Bytes> {
    let one = |block: &[u8], room: usize| -> anyhow::Result<Vec<u8>> {
        let len = snap::raw::decompress_len(block).context("snappy header")?;
        if len > room {
            bail!("snappy batch expands beyond {limit} bytes (max_batch_bytes)");
        }
        Ok(snap::raw::Decoder::new().decompress_vec(block)?)
    };
    if !input.starts_with(XERIAL_MAGIC) {
        return Ok(one(input, limit)?.into());
    }
    let mut rest = &input[XERIAL_MAGIC.len()..];
    let mut out = Vec::new();
    while !rest.is_empty() {
        if rest.len() < 4 {
            bail!("snappy block length cut short");
        }
        let size = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let block = rest.get(4..4 + size).context("snappy block cut short")?;
        out.extend(one(block, limit - out.len())?);
        rest = &rest[4 + size..];
    }
    Ok(out.into())
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn gzip(data: &[u8]) -> Bytes {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(data).unwrap();
        e.finish().unwrap().into()
    }

    #[test]
    fn a_batch_within_the_limit_decompresses_with_every_codec() {
        let data = vec![7u8; 10_000];
        let zstd = zstd::encode_all(&data[..], 3).unwrap();
        let mut lz4 = lz4::EncoderBuilder::new().build(Vec::new()).unwrap();
        lz4.write_all(&data).unwrap();
        let lz4 = lz4.finish().0;
        let snappy = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        for (codec, bytes) in [
            (Compression::Gzip, gzip(&data)),
            (Compression::Zstd, zstd.into()),
            (Compression::Lz4, lz4.into()),
            (Compression::Snappy, snappy.into()),
        ] {
            let mut input = bytes;
            assert_eq!(
                bounded(&mut input, codec, 10_000).unwrap(),
                data,
                "{codec:?}"
            );
        }
    }

    #[test]
    fn a_batch_that_expands_beyond_the_limit_is_refused_without_expanding_it() {
        // 64 MiB of zeros: about 64 KiB of gzip.
        let bomb = gzip(&vec![0u8; 64 << 20]);
        let error = bounded(&mut bomb.clone(), Compression::Gzip, 1 << 20).unwrap_err();
        assert!(error.to_string().contains("beyond"), "{error}");
        // A raw snappy header announcing 4 GiB is refused before allocating.
        let mut lie = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0]);
        let error = bounded(&mut lie, Compression::Snappy, 1 << 20).unwrap_err();
        assert!(error.to_string().contains("beyond"), "{error}");
    }
}
