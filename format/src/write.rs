//! Writing a dump: whole through serde, or with its live records made one at a time
//! ([`write_streamed`], the shim at exit).

use std::io;

use serde::Serialize;

use super::*;

/// Writes a dump as compact JSON followed by a newline.
pub fn write<S: Serialize, W: io::Write>(dump: &Dump<S>, mut w: W) -> io::Result<()> {
    serde_json::to_writer(&mut w, dump)?;
    w.write_all(b"\n")
}

/// Everything of a dump but its live records, for [`write_streamed`].
pub struct DumpParts<'a, S = String> {
    pub cudaleak_dump: u32,
    pub process: &'a Process,
    pub summary: &'a Summary,
    pub unnamed: bool,
    pub modules: &'a [Module],
    pub stacks: &'a [Stack<S>],
    pub events: &'a [Event<S>],
    pub floors: Option<&'a [StackCounts]>,
    pub finalizing: Option<&'a Finalizing<S>>,
    pub handles: &'a [Handle<S>],
    pub frameworks: Option<&'a Frameworks>,
    pub shim: Option<&'a ShimInfo>,
}

/// Writes a dump whose live records are made one at a time as they are written, so a writer
/// with millions of them never holds them all (the shim at exit). The bytes are exactly those
/// [`write`] writes for the same [`Dump`] (a test holds the two to it): the parts go through
/// serde, the live records are laid out here, field for field as `LiveRecord` derives them —
/// serde's per-field escaping was most of a million-record dump's writing time.
pub fn write_streamed<'r, S, L, W>(parts: &DumpParts<'_, S>, live: L, mut w: W) -> io::Result<()>
where
    S: Serialize,
    L: IntoIterator<Item = LiveRecord<&'r str>>,
    W: io::Write,
{
    let p = parts;
    let mut num = itoa::Buffer::new();
    w.write_all(b"{\"cudaleak_dump\":")?;
    w.write_all(num.format(p.cudaleak_dump).as_bytes())?;
    w.write_all(b",\"process\":")?;
    serde_json::to_writer(&mut w, p.process)?;
    w.write_all(b",\"summary\":")?;
    serde_json::to_writer(&mut w, p.summary)?;
    if p.unnamed {
        w.write_all(b",\"unnamed\":true")?;
    }
    if !p.modules.is_empty() {
        w.write_all(b",\"modules\":")?;
        serde_json::to_writer(&mut w, p.modules)?;
    }
    w.write_all(b",\"stacks\":")?;
    serde_json::to_writer(&mut w, p.stacks)?;
    w.write_all(b",\"live\":[")?;
    let mut rec = Vec::with_capacity(256);
    for (i, r) in live.into_iter().enumerate() {
        rec.clear();
        if i > 0 {
            rec.push(b',');
        }
        live_record(&mut rec, &r, &mut num)?;
        w.write_all(&rec)?;
    }
    w.write_all(b"],\"events\":")?;
    serde_json::to_writer(&mut w, p.events)?;
    if let Some(floors) = p.floors {
        w.write_all(b",\"floors\":")?;
        serde_json::to_writer(&mut w, floors)?;
    }
    if let Some(f) = p.finalizing {
        w.write_all(b",\"finalizing\":")?;
        serde_json::to_writer(&mut w, f)?;
    }
    if !p.handles.is_empty() {
        w.write_all(b",\"handles\":")?;
        serde_json::to_writer(&mut w, p.handles)?;
    }
    if let Some(f) = p.frameworks {
        w.write_all(b",\"frameworks\":")?;
        serde_json::to_writer(&mut w, f)?;
    }
    if let Some(shim) = p.shim {
        w.write_all(b",\"shim\":")?;
        serde_json::to_writer(&mut w, shim)?;
    }
    w.write_all(b"}\n")
}

/// One live record as serde_json writes a `LiveRecord` (compact, fields in declaration order,
/// `bytes_held` only when present).
fn live_record(out: &mut Vec<u8>, r: &LiveRecord<&str>, num: &mut itoa::Buffer) -> io::Result<()> {
    let mut hex = [0u8; 18];
    out.extend_from_slice(b"{\"address\":\"");
    out.extend_from_slice(hex_str(r.address.0, &mut hex).as_bytes());
    out.extend_from_slice(b"\",\"size\":");
    out.extend_from_slice(num.format(r.size).as_bytes());
    if let Some(h) = r.bytes_held {
        out.extend_from_slice(b",\"bytes_held\":");
        out.extend_from_slice(num.format(h).as_bytes());
    }
    out.extend_from_slice(b",\"api\":");
    // Function names need no escaping; anything else goes through serde_json's.
    if r.api
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        out.push(b'"');
        out.extend_from_slice(r.api.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, r.api)?;
    }
    out.extend_from_slice(b",\"kind\":\"");
    out.extend_from_slice(r.kind.as_str().as_bytes());
    out.extend_from_slice(b"\",\"device\":");
    match r.device {
        Some(d) => out.extend_from_slice(num.format(d).as_bytes()),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"thread\":");
    out.extend_from_slice(num.format(r.thread).as_bytes());
    out.extend_from_slice(b",\"seq\":");
    out.extend_from_slice(num.format(r.seq).as_bytes());
    out.extend_from_slice(b",\"time_ms\":");
    out.extend_from_slice(num.format(r.time_ms).as_bytes());
    out.extend_from_slice(b",\"stack\":");
    out.extend_from_slice(num.format(r.stack).as_bytes());
    out.push(b'}');
    Ok(())
}
