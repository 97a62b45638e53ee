//! End-to-end tests of broken and hostile dumps: each exits 2 with a message naming the file
//! (and the line and column where there is one), never panics, never reads what is not a
//! regular file or is too big, and program text never reaches the terminal or a page unescaped.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use predicates::prelude::*;

use common::{bin, fixture, fx, mkfifo, report};

#[test]
fn broken_inputs_exit_2_with_file_line_and_column() {
    let cases = [
        ("malformed.json", ":14:5: missing field \"size\""),
        (
            "truncated.json",
            ":145:15: the file ends early, inside an object: it is truncated",
        ),
        ("non_utf8.json", ":49:24: invalid unicode code point"),
        (
            "wrong_version.json",
            ": dump schema version 99 is not supported",
        ),
        (
            "dangling_stack.json",
            ": inconsistent dump: live[3].stack is 7",
        ),
    ];
    for (name, msg) in cases {
        report(&[&fx(name)])
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(format!(
                "cudaleak: {}{msg}",
                fx(name)
            )))
            .stderr(predicate::str::contains("panicked").not());
    }
    report(&["/nonexistent/cudaleak.1.json"])
        .code(2)
        .stderr("cudaleak: /nonexistent/cudaleak.1.json: No such file or directory\n");
}

#[test]
fn an_empty_a_binary_and_a_non_dump_json_file_each_say_what_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[u8], &str); 5] = [
        ("empty.json", b"", ": the file is empty; a cudaleak dump is a JSON object\n"),
        ("blank.json", b"  \n", ": the file is empty; a cudaleak dump is a JSON object\n"),
        (
            "binary.json",
            b"\x7fELF\x02\x01\x01\x00",
            ":1:1: not JSON (it starts with byte 0x7f); a cudaleak dump is a JSON object\n",
        ),
        (
            "array.json",
            b"[1, 2]",
            ": not a cudaleak dump: the file holds an array, and a cudaleak dump is a JSON object\n",
        ),
        (
            "object.json",
            b"{\"process\": 2}",
            ": not a cudaleak dump (no \"cudaleak_dump\" version field)\n",
        ),
    ];
    for (name, bytes, msg) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        report(&[p.to_str().unwrap()])
            .code(2)
            .stdout("")
            .stderr(format!("cudaleak: {}{msg}", p.display()));
    }
}

#[test]
fn garbage_of_every_kind_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let inputs: [&[u8]; 7] = [
        b"",
        b"\xff\xfe\x00",
        b"[]",
        b"null",
        b"{\"cudaleak_dump\": \"1\"}",
        b"{\"cudaleak_dump\": 1}",
        &[b'['; 100_000],
    ];
    for (i, bytes) in inputs.iter().enumerate() {
        let p = dir.path().join(format!("g{i}.json"));
        std::fs::write(&p, bytes).unwrap();
        report(&[p.to_str().unwrap()])
            .code(2)
            .stderr(predicate::str::starts_with(format!(
                "cudaleak: {}",
                p.display()
            )))
            .stderr(predicate::str::contains("panicked").not());
    }
}

/// `leak_loop.json` with `edit` applied, written into `dir` as `name`.
fn edited(dir: &Path, name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("leak_loop.json")).unwrap()).unwrap();
    edit(&mut v);
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
    p.display().to_string()
}

#[test]
fn hostile_dumps_exit_2_with_a_message_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let negative = edited(dir.path(), "negative.json", |v| {
        v["live"][0]["size"] = (-4096).into()
    });
    let not_hex = edited(dir.path(), "not_hex.json", |v| {
        v["live"][0]["address"] = "7f00zz".into()
    });
    let dangling_event = edited(dir.path(), "dangling_event.json", |v| {
        v["events"] = serde_json::json!([{"type": "double_free", "api": "cudaFree",
            "address": "0x1", "size": null, "error": 1, "seq": 99, "stack": 0, "alloc_stack": 42}]);
    });
    let summary_lies = edited(dir.path(), "summary_lies.json", |v| {
        v["summary"]["live_bytes"] = 1.into()
    });
    let deep = dir.path().join("deep.json");
    std::fs::write(
        &deep,
        format!(
            "{{\"cudaleak_dump\": 1, \"process\": {}",
            "[".repeat(200_000)
        ),
    )
    .unwrap();
    let deep = deep.display().to_string();
    let deep_unknown = dir.path().join("deep_unknown.json");
    std::fs::write(
        &deep_unknown,
        format!("{{\"cudaleak_dump\": 1, \"x\": {}", "[".repeat(200_000)),
    )
    .unwrap();
    let deep_unknown = deep_unknown.display().to_string();
    let cases = [
        (&negative, "invalid value: integer \"-4096\", expected u64"),
        (&not_hex, "a string \"0x\" + 1 to 16 hex digits"),
        (
            &dangling_event,
            "inconsistent dump: events[0].alloc_stack is 42",
        ),
        (&summary_lies, "inconsistent dump: summary.live_bytes is 1"),
        (&deep, ":1:34: invalid type: sequence"),
        (&deep_unknown, ":1:"),
    ];
    for (path, msg) in cases {
        for sub in [
            &["report"][..],
            &["report", "--growth"],
            &["diff", path.as_str()],
        ] {
            bin()
                .args(sub)
                .arg(path)
                .assert()
                .code(2)
                .stdout("")
                .stderr(predicate::str::starts_with(format!("cudaleak: {path}")))
                .stderr(predicate::str::contains(msg))
                .stderr(predicate::str::contains("panicked").not());
        }
    }
}

#[test]
fn files_over_4_gib_are_refused_before_reading_and_a_big_bad_file_stops_at_the_first_byte() {
    let dir = tempfile::tempdir().unwrap();
    // Sparse: no disk space, no time.
    let huge = dir.path().join("cudaleak.1.json");
    let f = std::fs::File::create(&huge).unwrap();
    f.set_len((4 << 30) + 1).unwrap();
    drop(f);
    let t = Instant::now();
    report(&[huge.to_str().unwrap()])
        .code(2)
        .stderr(format!(
            "cudaleak: {}: the file is 4294967297 bytes; cudaleak reads dumps of at most 4294967296 bytes (4 GiB)\n",
            huge.display()
        ));
    // A 1 GB file of zeros: the first byte is already wrong.
    let gig = dir.path().join("zeros.json");
    let f = std::fs::File::create(&gig).unwrap();
    f.set_len(1 << 30).unwrap();
    drop(f);
    let p = gig.to_str().unwrap();
    report(&[p])
        .code(2)
        .stderr(predicate::str::starts_with(format!("cudaleak: {p}:1:1: ")));
    // An endless stream of zeros is not even opened for reading.
    report(&["/dev/zero"]).code(2).stderr(
        "cudaleak: /dev/zero: is a character device, not a regular file; cudaleak reads dumps only from regular files\n",
    );
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    bin()
        .args(["diff", dir.path().to_str().unwrap(), &fx("clean.json")])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "is a directory, not a regular file",
        ));
}

#[test]
fn a_100_mb_function_name_is_cut_in_every_format_and_the_report_stays_small() {
    let dir = tempfile::tempdir().unwrap();
    // 100 MB once (text; a debug build parses it in seconds), 1 MiB for every format.
    for (mib, formats) in [
        (100, &["text"][..]),
        (1, &["text", "json", "markdown", "sarif"]),
    ] {
        let name = "A".repeat(mib << 20);
        let path = edited(dir.path(), &format!("big_name_{mib}.json"), |v| {
            v["stacks"][0]["frames"][2]["function"] = name.clone().into();
        });
        drop(name);
        for format in formats {
            let out = report(&["--format", format, &path]).code(23);
            let stdout = &out.get_output().stdout;
            assert!(stdout.len() < 1 << 20, "{format}: {} bytes", stdout.len());
            let text = String::from_utf8_lossy(stdout);
            assert!(
                text.contains(&format!("{} more bytes", (mib << 20) - (64 << 10))),
                "{format}"
            );
        }
    }
}

#[test]
fn program_names_cannot_inject_terminal_escapes_markdown_or_html() {
    let dir = tempfile::tempdir().unwrap();
    let evil = "evil\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}31m|`*_<img src=x>[a](b)\u{202e}";
    let path = edited(dir.path(), "evil.json", |v| {
        v["stacks"][0]["frames"][2]["function"] = evil.into();
        v["stacks"][0]["frames"][2]["file"] = "src/\u{1b}[31mred.cu".into();
        v["process"]["argv"] = serde_json::json!(["./app", "\u{1b}[8mhidden"]);
        for r in v["live"].as_array_mut().unwrap() {
            r["api"] = "cudaMalloc\u{1b}[1A".into();
        }
    });
    for color in ["never", "always"] {
        let out = report(&["--color", color, &path]).code(23);
        let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        assert!(
            text.contains("evil\\x1b]0;owned\\x07\\x1b[2J\\x9b31m|`*_<img src=x>[a](b)\\u{202e}"),
            "{text}"
        );
        assert!(text.contains("\\x1b[8mhidden"), "{text}");
        assert!(text.contains("via cudaMalloc\\x1b[1A"), "{text}");
        // The only escape sequences left are cudaleak's own colours: ESC [ digits ; m.
        for (i, _) in text.match_indices('\u{1b}') {
            let rest = &text[i + 1..];
            let end = rest.find('m').unwrap();
            assert!(
                rest.starts_with('[')
                    && rest[1..end].chars().all(|c| c.is_ascii_digit() || c == ';'),
                "foreign escape at {i}: {:?}",
                &rest[..end.min(20)]
            );
        }
        assert!(!text.contains('\u{9b}') && !text.contains('\u{7}') && !text.contains('\u{202e}'));
    }
    let out = report(&["--format", "markdown", &path]).code(23);
    let md = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(md.contains("evil\\\\x1b\\]0;owned"), "{md}");
    assert!(
        md.contains("\\|\\`\\*\\_&lt;img src=x&gt;\\[a\\](b)"),
        "{md}"
    );
    assert!(!md.contains("<img") && !md.contains('\u{1b}'));
    let out = report(&["--format", "sarif", &path]).code(23);
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let r = &v["runs"][0]["results"][0];
    let message = r["message"]["text"].as_str().unwrap();
    assert!(message.contains("via cudaMalloc\\x1b[1A"), "{message}");
    let fqn = r["locations"][0]["logicalLocations"][0]["fullyQualifiedName"]
        .as_str()
        .unwrap();
    assert!(fqn.starts_with("evil\\x1b]0;owned"), "{fqn}");
    // Every string in the SARIF is free of control characters.
    fn walk(v: &serde_json::Value) {
        match v {
            serde_json::Value::String(s) => {
                assert!(!s.chars().any(|c| c.is_control() && c != '\n'), "{s:?}")
            }
            serde_json::Value::Array(a) => a.iter().for_each(walk),
            serde_json::Value::Object(o) => o.values().for_each(walk),
            _ => {}
        }
    }
    walk(&v["runs"][0]["results"]);
}

#[test]
fn a_fifo_planted_as_a_dump_is_skipped_in_a_directory_and_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture("leak_loop.json"),
        dir.path().join("cudaleak.1001.json"),
    )
    .unwrap();
    let fifo = dir.path().join("cudaleak.6666.json");
    mkfifo(&fifo);
    // Before: `report DIR` blocked forever opening the FIFO.
    report(&[dir.path().to_str().unwrap()])
        .code(23)
        .stdout(predicate::str::contains("pid 1001"))
        .stderr(format!(
            "cudaleak: skipping {}: it is a FIFO (named pipe), not a regular file\n",
            fifo.display()
        ));
    bin()
        .args(["report", fifo.to_str().unwrap()])
        .timeout(Duration::from_secs(20))
        .assert()
        .code(2)
        .stderr(format!(
            "cudaleak: {}: is a FIFO (named pipe), not a regular file; cudaleak reads dumps only from regular files\n",
            fifo.display()
        ));
    bin()
        .args(["diff", fifo.to_str().unwrap(), &fx("leak_loop.json")])
        .timeout(Duration::from_secs(20))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is a FIFO (named pipe)"));
    let supp = dir.path().join("supp.txt");
    mkfifo(&supp);
    bin()
        .args(["report", "--suppressions", supp.to_str().unwrap()])
        .arg(fx("leak_loop.json"))
        .timeout(Duration::from_secs(20))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is a FIFO (named pipe)"));
}

#[test]
fn a_version_field_that_is_a_string_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("leak_loop.json")).unwrap();
    let bad = dir.path().join("v.json");
    std::fs::write(
        &bad,
        text.replacen("\"cudaleak_dump\": 1,", "\"cudaleak_dump\": \"1\",", 1),
    )
    .unwrap();
    report(&[bad.to_str().unwrap()])
        .code(2)
        .stderr(predicate::str::contains(
            "v.json: the \"cudaleak_dump\" version field is \"1\", not a number",
        ));
}
