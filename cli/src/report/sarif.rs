//! The SARIF 2.1.0 report, for code-scanning UIs: one result per leak group (and per bad-free,
//! failed-allocation and managed-memory group), located at the first user frame with a source
//! file, with the whole visible stack attached.
//!
//! Must always produce the required SARIF structure (`$schema`, `version`, `runs[0].tool.driver`
//! with `rules`), even with no findings at all. Writes as it goes: each result is built, written
//! and dropped before the next (never a document tree of all results).

use std::io::{self, Write};

use serde::ser::{SerializeSeq, Serializer};
use serde::Serialize;
use serde_json::{json, Value};

use super::change_text_paren;
use super::wording::{
    address_text, bad_free_what, errors_text, framework_kept_text, group_text, held_by_text,
    steps_text, Holds, Plain, FAILED_ADVICE, MANAGED_ADVICE, SHUTTING_DOWN, TEARDOWN_NOTE_HELP,
};
use super::{clean, growth_api, rate_text};
use super::{frame_text, human_bytes, plural, Reporter, VERSION};
use crate::analyze::View;
use crate::analyze::{DiffFindings, Findings, FrameView, LeakGroup, StackView};
use crate::callsite::Callsite;
use crate::growth::{GrowthFindings, GrowthRow};
use cudaleak_format::EventType;

pub struct Sarif;

pub const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";
const DEFAULT_INFORMATION_URI: &str = "https://github.com/cudaleak/cudaleak";

fn information_uri() -> &'static str {
    match env!("CARGO_PKG_REPOSITORY") {
        "" => DEFAULT_INFORMATION_URI,
        repo => repo,
    }
}

/// (id, name, level, short description, help)
const RULES: [(&str, &str, &str, &str, &str); 8] = [
    ("cudaleak/leak", "CudaMemoryLeak", "error",
     "CUDA memory allocated here was never freed",
     "Free the block on every path out of the function, including early returns and error paths; an RAII wrapper whose destructor calls cudaFree makes that automatic."),
    ("cudaleak/double-free", "CudaDoubleFree", "error",
     "CUDA memory freed twice",
     "Free each block exactly once; set the pointer to nullptr after freeing it."),
    ("cudaleak/invalid-free", "CudaInvalidFree", "error",
     "Free of an address that was never allocated by CUDA",
     "Pass only pointers returned by the matching CUDA allocation call."),
    ("cudaleak/failed-allocation", "CudaFailedAllocation", "warning",
     "A CUDA allocation failed",
     FAILED_ADVICE),
    ("cudaleak/managed-memory", "CudaManagedMemory", "note",
     "Managed (unified) memory: a migration and capacity risk",
     MANAGED_ADVICE),
    ("cudaleak/growth", "CudaLiveMemoryGrowth", "warning",
     "Live CUDA memory from this callsite grew across dumps of a running program",
     "A callsite whose live memory keeps growing while the program runs is a leak in the making; check that every allocation in the loop is freed."),
    ("cudaleak/cached-memory", "CudaMemoryHeldByCache", "note",
     "CUDA memory still held at exit by a cache or library handle (not a leak)",
     "A framework's caching allocator or a library handle keeps this memory until it is released (the result names what releases it); it is not counted by the gate unless --fail-on strict."),
    ("cudaleak/teardown", "CudaTeardownFailure", "note",
     "A CUDA call failed because the runtime or driver was shutting down",
     TEARDOWN_NOTE_HELP),
];

fn rule_index(id: &str) -> usize {
    RULES.iter().position(|r| r.0 == id).unwrap_or(0)
}

fn rules() -> Vec<Value> {
    RULES
        .iter()
        .map(|(id, name, level, short, help)| {
            json!({
                "id": id,
                "name": name,
                "shortDescription": {"text": short},
                "fullDescription": {"text": help},
                "help": {"text": help},
                "defaultConfiguration": {"level": level},
            })
        })
        .collect()
}

/// A SARIF `uri`: relative paths stay relative (resolved against the checkout), absolute ones
/// become `file://` URIs; characters outside RFC 3986's unreserved set and `/` are escaped.
pub fn uri(path: &str) -> String {
    let mut out = String::new();
    if path.starts_with('/') {
        out.push_str("file://");
    }
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// An artifact location; under `root` it is relative, with `uriBaseId` SRCROOT.
fn artifact(path: &str, root: Option<&str>) -> Value {
    match root
        .and_then(|r| path.strip_prefix(r))
        .filter(|rel| !rel.is_empty())
    {
        Some(rel) => json!({"uri": uri(rel), "uriBaseId": SRCROOT}),
        None => json!({"uri": uri(path)}),
    }
}

const SRCROOT: &str = "SRCROOT";

fn physical(f: &FrameView, root: Option<&str>) -> Option<Value> {
    if let Some(file) = &f.file {
        let mut loc = json!({"artifactLocation": artifact(file, root)});
        if let Some(line) = f.line.filter(|&l| l > 0) {
            loc["region"] = json!({"startLine": line});
        }
        return Some(loc);
    }
    f.module
        .as_deref()
        .map(|m| json!({"artifactLocation": artifact(m, root)}))
}

fn location(f: &FrameView, root: Option<&str>) -> Value {
    let mut loc = json!({});
    if let Some(p) = physical(f, root) {
        loc["physicalLocation"] = p;
    }
    if let Some(func) = &f.function {
        loc["logicalLocations"] = json!([{"fullyQualifiedName": clean(func), "kind": "function"}]);
    }
    loc
}

/// The first Python frame, else the first user frame with a source file, else the first user
/// frame, else the first frame.
fn primary(s: &StackView) -> Option<&FrameView> {
    let user = || s.frames.iter().map(|f| &**f).filter(|f| !f.internal);
    user()
        .find(|f| f.python && f.file.is_some())
        .or_else(|| user().find(|f| f.file.is_some()))
        .or_else(|| user().next())
        .or_else(|| s.frames.first().map(|f| &**f))
}

fn stack_value(s: &StackView, root: Option<&str>) -> Value {
    json!({
        "message": {"text": "allocation stack, innermost frame first"},
        "frames": s.frames.iter().map(|f| {
            let mut v = json!({"location": location(f, root)});
            v["location"]["message"] = json!({"text": frame_text(f)});
            if let Some(m) = &f.module {
                v["module"] = json!(m);
            }
            v
        }).collect::<Vec<_>>(),
    })
}

fn result(
    root: Option<&str>,
    id: &str,
    level: &str,
    text: String,
    stacks: &[&StackView],
    callsite: &Callsite,
    props: Value,
) -> Value {
    let mut r = json!({
        "ruleId": id,
        "ruleIndex": rule_index(id),
        "level": level,
        "message": {"text": text},
        "partialFingerprints": {"cudaleakCallsite/v1": callsite.fingerprint(id)},
        "properties": props,
    });
    if let Some(f) = stacks.first().and_then(|s| primary(s)) {
        r["locations"] = json!([location(f, root)]);
    }
    r["stacks"] = Value::Array(stacks.iter().map(|s| stack_value(s, root)).collect());
    r
}

/// The results array, written one result at a time as `produce` hands them over.
struct Results<F>(F);

impl<F: Fn(&mut dyn FnMut(Value))> Serialize for Results<F> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        let mut failed = None;
        (self.0)(&mut |v| {
            if failed.is_none() {
                failed = seq.serialize_element(&v).err();
            }
        });
        match failed {
            Some(e) => Err(e),
            None => seq.end(),
        }
    }
}

/// The document; fields in alphabetical order, as SARIF viewers and our snapshots have them.
#[derive(Serialize)]
struct Envelope<R> {
    #[serde(rename = "$schema")]
    schema: &'static str,
    runs: [Run<R>; 1],
    version: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Run<R> {
    #[serde(skip_serializing_if = "Option::is_none")]
    original_uri_base_ids: Option<Value>,
    results: R,
    tool: Value,
}

fn envelope<R: Serialize>(results: R, root: Option<&str>) -> Envelope<R> {
    Envelope {
        schema: SCHEMA,
        runs: [Run {
            original_uri_base_ids: root.map(|r| json!({SRCROOT: {"uri": uri(r)}})),
            results,
            tool: json!({"driver": {
                "name": "cudaleak",
                "version": VERSION,
                "semanticVersion": VERSION,
                "informationUri": information_uri(),
                "rules": rules(),
            }}),
        }],
        version: "2.1.0",
    }
}

/// Writes the document, the results as `produce` emits them.
fn write_streamed(
    produce: impl Fn(&mut dyn FnMut(Value)),
    root: Option<&str>,
    out: &mut dyn Write,
) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &envelope(Results(produce), root))
        .map_err(io::Error::from)?;
    out.write_all(b"\n")
}

impl Reporter for Sarif {
    fn report(&self, f: &Findings, view: &View, out: &mut dyn Write) -> io::Result<()> {
        let root = view.source_root.as_deref();
        write_streamed(|emit| report_results(f, view, emit), root, out)
    }

    fn growth(&self, g: &GrowthFindings, view: &View, out: &mut dyn Write) -> io::Result<()> {
        let root = view.source_root.as_deref();
        write_streamed(|emit| growth_results(g, root, emit), root, out)
    }

    fn diff(&self, d: &DiffFindings, view: &View, out: &mut dyn Write) -> io::Result<()> {
        let root = view.source_root.as_deref();
        write_streamed(|emit| diff_results(d, root, emit), root, out)
    }
}

/// A leak's properties; a group of library handles also gives their library and count.
fn leak_properties(g: &LeakGroup, pid: u32) -> Value {
    let mut v = json!({"bytes": g.bytes, "allocations": g.allocations, "api": clean(&g.api), "kind": g.kind.as_str(), "pid": pid});
    if let Some(h) = &g.handles {
        v["handles"] = json!({"library": h.library, "count": h.count});
    }
    if let Some(id) = &g.framework {
        v["framework"] = json!(clean(id));
    }
    v
}

fn report_results(f: &Findings, view: &View, emit: &mut dyn FnMut(Value)) {
    for p in &f.processes {
        let pid = p.process.pid;
        for g in &p.leaks {
            emit(result(
                view.source_root.as_deref(),
                "cudaleak/leak",
                "error",
                format!(
                    "{} never freed (pid {pid}){}",
                    group_text(g, Holds::Handles, &Plain),
                    g.framework.as_deref().map_or(String::new(), |id| format!(
                        "; {}",
                        framework_kept_text(&clean(id))
                    ))
                ),
                &[&g.stack],
                &g.callsite,
                leak_properties(g, pid),
            ));
        }
        for g in &p.bad_frees {
            let id = if g.kind == EventType::DoubleFree {
                "cudaleak/double-free"
            } else {
                "cudaleak/invalid-free"
            };
            let mut stacks = vec![&g.stack];
            if let Some(a) = &g.alloc_stack {
                stacks.push(a);
            }
            emit(result(
                view.source_root.as_deref(),
                id,
                "error",
                format!(
                    "{}({}) {}, {} (pid {pid})",
                    clean(&g.api),
                    address_text(g.address),
                    bad_free_what(g.kind),
                    plural(g.count, "time", "times")
                ),
                &stacks,
                &g.callsite,
                json!({"count": g.count, "api": clean(&g.api), "pid": pid}),
            ));
        }
        for g in &p.failed {
            emit(result(
                view.source_root.as_deref(),
                "cudaleak/failed-allocation",
                "warning",
                format!(
                    "{} failed {} (returned {}) (pid {pid})",
                    clean(&g.api),
                    plural(g.count, "time", "times"),
                    if g.errors.is_empty() {
                        "an error".into()
                    } else {
                        errors_text(&g.api, &g.errors)
                    }
                ),
                &[&g.stack],
                &g.callsite,
                json!({"count": g.count, "bytes": g.bytes, "api": clean(&g.api), "pid": pid}),
            ));
        }
        for g in &p.cached {
            let Some(r) = g.held_by.and_then(|i| f.caches.get(i)) else {
                continue;
            };
            emit(result(
                view.source_root.as_deref(),
                "cudaleak/cached-memory",
                // Counted as leaked under --fail-on strict.
                if f.gate.count_cached { "error" } else { "note" },
                format!(
                    "{} {} (pid {pid}); released by: {}",
                    group_text(g, Holds::Allocations, &Plain),
                    held_by_text(&clean(&r.name), &clean(&r.id), None),
                    clean(&r.release)
                ),
                &[&g.stack],
                &g.callsite,
                json!({"bytes": g.bytes, "allocations": g.allocations, "api": clean(&g.api), "cache": clean(&r.id), "pid": pid}),
            ));
        }
        for g in &p.teardown {
            emit(result(
                view.source_root.as_deref(),
                "cudaleak/teardown",
                "note",
                format!(
                    "{} returned {} {} {SHUTTING_DOWN} (pid {pid}): not an error",
                    clean(&g.api),
                    errors_text(&g.api, &g.errors),
                    plural(g.count, "time", "times"),
                ),
                &[&g.stack],
                &g.callsite,
                json!({"count": g.count, "during_exit": g.during_exit, "api": clean(&g.api), "pid": pid}),
            ));
        }
        for g in &p.managed {
            emit(result(
                    view.source_root.as_deref(),
                    "cudaleak/managed-memory",
                    "note",
                    format!(
                        "{} of managed memory in {} via {} (pid {pid}): prefer device memory plus explicit copies when only the GPU touches it",
                        human_bytes(g.bytes),
                        plural(g.allocations, "allocation", "allocations"),
                        clean(&g.api)
                    ),
                    &[&g.stack],
                    &g.callsite,
                    json!({"bytes": g.bytes, "allocations": g.allocations, "api": clean(&g.api), "pid": pid}),
                ));
        }
    }
}

fn growth_results(g: &GrowthFindings, root: Option<&str>, emit: &mut dyn FnMut(Value)) {
    for s in &g.series {
        let pid = s.process.pid;
        for r in s.rows.iter().filter(|r| r.is_suspect()) {
            emit(result(
                root,
                "cudaleak/growth",
                "warning",
                format!(
                    "live memory via {} grew by {} over {} dumps, {}, {}: {} → {} (pid {pid}){}",
                    clean(&growth_api(r)),
                    change_text_paren(r.growth_bytes(), r.growth_blocks()),
                    r.series.len(),
                    rate_text(r.bytes_per_hour),
                    steps_text(r),
                    human_bytes(r.first().bytes),
                    human_bytes(r.last().bytes),
                    r.held_by.as_ref().map_or(String::new(), |h| format!(
                        "; {}",
                        held_by_text(&h.name, &h.id, h.grows.as_deref())
                    ))
                ),
                &[&r.stack],
                &r.callsite,
                growth_properties(r, pid),
            ));
        }
    }
}

/// A growth suspect's properties; a framework's count also gives the framework and device.
fn growth_properties(r: &GrowthRow, pid: u32) -> Value {
    let mut v = json!({
        "first_bytes": r.first().bytes,
        "last_bytes": r.last().bytes,
        "growth_bytes": r.growth_bytes(),
        "bytes_per_hour": r.bytes_per_hour.filter(|x| x.is_finite()).map(f64::round),
        "intervals": r.intervals(),
        "grew_intervals": r.grew_intervals,
        "api": clean(&r.api),
        "pid": pid,
    });
    if let Some(f) = &r.framework {
        v["framework"] = json!({"name": clean(&f.framework), "device": f.device});
    }
    v
}

fn diff_results(d: &DiffFindings, root: Option<&str>, emit: &mut dyn FnMut(Value)) {
    for r in d.rows.iter().filter(|r| r.trend() > 0) {
        emit(result(
            root,
            "cudaleak/growth",
            "warning",
            format!(
                "live memory via {} grew by {}: {} → {}",
                clean(&r.api),
                change_text_paren(r.delta_bytes(), r.delta_blocks()),
                human_bytes(r.old.bytes),
                human_bytes(r.new.bytes)
            ),
            &[&r.stack],
            &r.callsite,
            json!({"old_bytes": r.old.bytes, "new_bytes": r.new.bytes, "api": clean(&r.api)}),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_keep_relative_paths_and_escape_odd_characters() {
        assert_eq!(uri("cuda-samples/leak.cu"), "cuda-samples/leak.cu");
        assert_eq!(uri("/home/dev/my app.cu"), "file:///home/dev/my%20app.cu");
        assert_eq!(uri("a#b"), "a%23b");
    }

    #[test]
    fn absolute_paths_under_the_source_root_become_relative_to_srcroot() {
        let root = Some("/work/main/");
        assert_eq!(
            artifact("/work/main/cuda-samples/leak.cu", root),
            json!({"uri": "cuda-samples/leak.cu", "uriBaseId": "SRCROOT"})
        );
        assert_eq!(
            artifact("/usr/include/cuda_runtime.h", root),
            json!({"uri": "file:///usr/include/cuda_runtime.h"})
        );
        assert_eq!(artifact("rel/x.cu", root), json!({"uri": "rel/x.cu"}));
        let doc = |root| serde_json::to_value(envelope(Vec::<Value>::new(), root)).unwrap();
        assert_eq!(
            doc(root)["runs"][0]["originalUriBaseIds"]["SRCROOT"]["uri"],
            "file:///work/main/"
        );
        assert!(doc(None)["runs"][0].get("originalUriBaseIds").is_none());
    }
}
