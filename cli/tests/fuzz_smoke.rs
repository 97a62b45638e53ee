//! The fuzz target on stable, as a short deterministic smoke run for CI: the fixture dumps,
//! mutated a few thousand ways (byte flips, truncations, insertions, spliced chunks, and
//! structural edits that keep the JSON valid so the renderers are reached), each through
//! `cudaleak_cli::fuzz_target::render_all`, the same function `fuzz/` fuzzes with libFuzzer.

use std::path::Path;

use cudaleak_cli::fuzz_target::render_all;
use serde_json::Value;

/// xorshift64*: deterministic, so a failure reproduces with the same case number.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn corpus() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut files = Vec::new();
    for sub in ["", "growth", "snapshots", "multi", "frameworks"] {
        let d = dir.join(sub);
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "json") {
                files.push(p);
            }
        }
    }
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

const INTERESTING: &[u8] = b"\"{}[],:-0123456789.eE\\\x1b\xff\x00nulltruefalse";

fn mutate_bytes(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        if b.is_empty() {
            b.push(b'{');
        }
        let at = rng.below(b.len());
        match rng.below(5) {
            0 => b[at] ^= 1 << rng.below(8),
            1 => b[at] = INTERESTING[rng.below(INTERESTING.len())],
            2 => b.truncate(at),
            3 => {
                let from = rng.below(b.len());
                let len = rng.below(64).min(b.len() - from);
                let chunk = b[from..from + len].to_vec();
                b.splice(at..at, chunk);
            }
            _ => {
                let len = rng.below(16).min(b.len() - at);
                b.drain(at..at + len);
            }
        }
    }
    b
}

/// Every leaf and container in `v`, as JSON pointers.
fn pointers(v: &Value, here: String, out: &mut Vec<String>) {
    out.push(here.clone());
    match v {
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                pointers(x, format!("{here}/{i}"), out);
            }
        }
        Value::Object(o) => {
            for (k, x) in o {
                pointers(x, format!("{here}/{k}"), out);
            }
        }
        _ => {}
    }
}

fn odd_value(rng: &mut Rng) -> Value {
    let long = "x".repeat(70_000);
    let choices: [Value; 14] = [
        Value::from(-1),
        Value::from(0),
        Value::from(u64::MAX),
        Value::from(1u64 << 53),
        Value::from(7),
        Value::from(1e300),
        Value::from("0xzz"),
        Value::from("0xffffffffffffffff"),
        Value::from("\u{1b}[31mred\u{1b}[0m|`*_<script>&[x](y)\n#"),
        Value::from("abc\u{202e}fed"),
        Value::from(long),
        Value::Null,
        Value::Array(vec![]),
        Value::from("snapshot"),
    ];
    choices[rng.below(choices.len())].clone()
}

fn mutate_structure(rng: &mut Rng, input: &[u8]) -> Option<Vec<u8>> {
    let mut v: Value = serde_json::from_slice(input).ok()?;
    for _ in 0..1 + rng.below(3) {
        let mut ps = Vec::new();
        pointers(&v, String::new(), &mut ps);
        let p = ps[rng.below(ps.len())].clone();
        let mut new = odd_value(rng);
        if let Some(slot) = v.pointer_mut(&p) {
            // Mostly keep the type, so the edit gets past the schema.
            for _ in 0..8 {
                let same = matches!(
                    (&*slot, &new),
                    (Value::Number(_), Value::Number(_)) | (Value::String(_), Value::String(_))
                );
                if same || rng.below(8) == 0 {
                    break;
                }
                new = odd_value(rng);
            }
            match slot {
                // Duplicate an array element, or replace a value.
                Value::Array(a) if !a.is_empty() && rng.below(2) == 0 => {
                    let x = a[rng.below(a.len())].clone();
                    a.push(x);
                }
                _ => *slot = new,
            }
        }
    }
    if rng.below(4) != 0 {
        fix_summary(&mut v);
    }
    serde_json::to_vec(&v).ok()
}

/// Makes the summary agree with the live list again, so an edit elsewhere reaches the
/// renderers instead of stopping at the consistency check.
fn fix_summary(v: &mut Value) {
    let Some(live) = v.get("live").and_then(Value::as_array) else {
        return;
    };
    let n = live.len() as u64;
    let bytes = live
        .iter()
        .map(|r| r.get("size").and_then(Value::as_u64))
        .try_fold(0u64, |a, s| s.and_then(|s| a.checked_add(s)));
    if let (Some(bytes), Some(summary)) =
        (bytes, v.get_mut("summary").and_then(Value::as_object_mut))
    {
        summary.insert("live_allocations".into(), n.into());
        summary.insert("live_bytes".into(), bytes.into());
    }
}

#[test]
fn the_fuzz_target_survives_thousands_of_mutated_dumps() {
    let corpus = corpus();
    assert!(corpus.len() >= 10);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let cases = 3000;
    let start = std::time::Instant::now();
    let mut rendered = 0;
    for case in 0..cases {
        let seed = &corpus[rng.below(corpus.len())];
        let input = if case % 3 != 0 {
            mutate_structure(&mut rng, seed).unwrap_or_else(|| mutate_bytes(&mut rng, seed))
        } else {
            mutate_bytes(&mut rng, seed)
        };
        rendered += usize::from(cudaleak_format::from_slice(&input).is_ok());
        let r = std::panic::catch_unwind(|| render_all(&input));
        assert!(
            r.is_ok(),
            "case {case} panicked; input starts {:?}",
            String::from_utf8_lossy(&input[..input.len().min(300)])
        );
    }
    // The unmutated corpus too: every fixture reaches the renderers or fails cleanly.
    for seed in &corpus {
        render_all(seed);
    }
    eprintln!(
        "{cases} cases, {rendered} reached the renderers, in {:?}",
        start.elapsed()
    );
    // The structural edits keep a good share of the cases readable.
    assert!(
        rendered * 10 >= cases,
        "only {rendered} of {cases} were readable"
    );
}
