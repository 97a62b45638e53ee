//! Unit tests of the dump schema: reading, writing, versions, validation.

use super::*;

#[test]
fn a_streamed_dump_is_byte_for_byte_the_written_one() {
    for mut dump in [
        sample(),
        unnamed_sample(),
        from_slice(include_bytes!("../tests/v1-sample.json")).unwrap(),
    ] {
        // The fields written only sometimes, and a name that needs escaping.
        dump.live.push(LiveRecord {
            bytes_held: Some(0),
            device: None,
            api: "odd \"api\"\n".into(),
            kind: Kind::Reserved,
            ..dump.live[0].clone()
        });
        dump.handles.push(Handle {
            library: "cublas".into(),
            create: "cublasCreate_v2".into(),
            handle: Hex(0x5000),
            thread: 7,
            device: Some(0),
            seq: 3,
            time_ms: 1,
            stack: 0,
            blocks: vec![dump.live[0].seq],
            destroyed: false,
        });
        dump.frameworks = Some(Frameworks {
            counters: vec![FrameworkCounter {
                framework: "torch".into(),
                backend: Some("native".into()),
                device: 0,
                bytes: 4096,
                floor_bytes: 512,
                blocks: Some(8),
                floor_blocks: Some(1),
                active_bytes: None,
                reserved_bytes: Some(2 << 20),
                samples: 20,
                unix_ms: 1,
            }],
            ended_unix_ms: Some(2),
            records: vec![FrameworkRecord {
                framework: "torch".into(),
                since_unix_ms: 1,
                unix_ms: 2,
                groups: vec![FrameworkGroup {
                    blocks: 7,
                    bytes: 3584,
                    device: Some(0),
                    frames: vec![Frame {
                        kind: Some(FrameKind::Python),
                        file: Some("loss \"keep\".py".into()),
                        line: Some(10),
                        ..Frame::default()
                    }],
                }],
                note: None,
            }],
        });
        for shim in [None, Some(ShimInfo::default())] {
            dump.shim = shim;
            let mut whole = Vec::new();
            write(&dump, &mut whole).unwrap();
            let parts = DumpParts {
                cudaleak_dump: dump.cudaleak_dump,
                process: &dump.process,
                summary: &dump.summary,
                unnamed: dump.unnamed,
                modules: &dump.modules,
                stacks: &dump.stacks,
                events: &dump.events,
                floors: dump.floors.as_deref(),
                finalizing: dump.finalizing.as_ref(),
                handles: &dump.handles,
                frameworks: dump.frameworks.as_ref(),
                shim: dump.shim.as_ref(),
            };
            let live = dump.live.iter().map(|r| LiveRecord {
                address: r.address,
                size: r.size,
                bytes_held: r.bytes_held,
                api: r.api.as_str(),
                kind: r.kind,
                device: r.device,
                thread: r.thread,
                seq: r.seq,
                time_ms: r.time_ms,
                stack: r.stack,
            });
            let mut streamed = Vec::new();
            write_streamed(&parts, live, &mut streamed).unwrap();
            assert!(!dump.live.is_empty());
            assert_eq!(String::from_utf8(streamed), String::from_utf8(whole));
        }
    }
}

fn sample() -> Dump {
    Dump {
        cudaleak_dump: SCHEMA_VERSION,
        process: Process {
            pid: 4711,
            ppid: 1,
            exe: "/bin/app".into(),
            argv: vec!["app".into(), "--n".into()],
            rank: Some(3),
            start_unix_ms: 1_700_000_000_000,
            end_unix_ms: 1_700_000_000_250,
            end: End::Exit,
            signal: None,
            snapshot: None,
            forked_from: None,
            recording_stopped: None,
        },
        summary: Summary {
            allocations: 2,
            frees: 1,
            live_allocations: 1,
            live_bytes: 4096,
            peak_live_bytes: 8192,
            bytes_allocated: 8192,
            ..Summary::default()
        },
        unnamed: false,
        modules: Vec::new(),
        stacks: vec![Stack {
            frames: vec![Frame {
                kind: None,
                ip: Hex(0x55aa_0000_1234),
                module: Some("/bin/app".into()),
                offset: Some(Hex(0x1234)),
                function: Some("process_data(float*)".into()),
                file: Some("app.cu".into()),
                line: Some(18),
            }],
            python: Vec::new(),
        }],
        live: vec![LiveRecord {
            address: Hex(0x7f00_0000_0000),
            size: 4096,
            bytes_held: None,
            api: "cudaMalloc".into(),
            kind: Kind::Device,
            device: Some(0),
            thread: 4711,
            seq: 1,
            time_ms: 12,
            stack: 0,
        }],
        events: vec![Event {
            kind: EventType::DoubleFree,
            api: "cudaFree".into(),
            address: Some(Hex(0x7f00_0000_1000)),
            size: None,
            error: Some(1),
            seq: 3,
            stack: 0,
            alloc_stack: Some(0),
            during_exit: false,
        }],
        floors: Some(vec![StackCounts {
            stack: 0,
            allocations: 0,
            bytes: 0,
        }]),
        finalizing: Some(Finalizing {
            unix_ms: 1_700_000_000_500,
            seq: 2,
            held: vec![Held {
                stack: 0,
                api: "cudaMalloc".into(),
                allocations: 2,
                bytes: 2048,
            }],
            floors: Vec::new(),
        }),
        handles: Vec::new(),
        frameworks: None,
        shim: Some(ShimInfo {
            version: "0.1.0".into(),
            stack_walks: 3,
            stack_reuses: 1,
            attach: None,
        }),
    }
}

/// What the shim writes since version 3: addresses, modules and unspliced Python runs.
fn unnamed_sample() -> Dump {
    let mut d = sample();
    d.unnamed = true;
    d.modules = vec![Module {
        path: "/bin/app".into(),
        base: Hex(0x55aa_0000_0000),
        build_id: Some("8d3f0c2a".into()),
    }];
    let f = &mut d.stacks[0].frames[0];
    (f.function, f.file, f.line) = (None, None, None);
    d.stacks[0].python = vec![vec![Frame {
        kind: Some(FrameKind::Python),
        ip: Hex(0),
        module: None,
        offset: Some(Hex(0x1c)),
        function: Some("step".into()),
        file: Some("/work/train.py".into()),
        line: Some(8),
    }]];
    d.cudaleak_dump = version_for(&d.stacks, &d.modules, d.unnamed, false, false, false);
    d
}

#[test]
fn an_unnamed_dump_is_version_3_and_round_trips() {
    let d = unnamed_sample();
    assert_eq!(d.cudaleak_dump, 3);
    let mut out = Vec::new();
    write(&d, &mut out).unwrap();
    let text = String::from_utf8(out.clone()).unwrap();
    assert!(
        text.contains(r#""unnamed":true,"modules":[{"path":"/bin/app","base":"0x55aa00000000","build_id":"8d3f0c2a"}]"#),
        "{text}"
    );
    assert!(text.contains(r#""frames":[{"ip":"0x55aa00001234","module":"/bin/app","offset":"0x1234","function":null,"file":null,"line":null}],"python":[[{"kind":"python""#), "{text}");
    assert_eq!(from_slice(&out).unwrap(), d);
    // A named dump writes neither field.
    let mut named = Vec::new();
    write(&sample(), &mut named).unwrap();
    let named = String::from_utf8(named).unwrap();
    assert!(!named.contains("unnamed") && !named.contains("modules") && !named.contains("python"));
}

#[test]
fn round_trip_preserves_every_field() {
    let d = sample();
    let mut out = Vec::new();
    write(&d, &mut out).unwrap();
    assert_eq!(from_slice(&out).unwrap(), d);
}

#[test]
fn the_compact_reader_reads_the_same_dump_with_names_shared() {
    let mut d = sample();
    d.stacks.push(d.stacks[0].clone());
    d.live.push(LiveRecord {
        stack: 1,
        ..d.live[0].clone()
    });
    d.summary.live_allocations = 2;
    d.summary.live_bytes = 8192;
    let mut bytes = Vec::new();
    write(&d, &mut bytes).unwrap();
    let c = from_reader(&bytes[..], || Some(&bytes[..])).unwrap();
    let mut again = Vec::new();
    write(&c, &mut again).unwrap();
    assert_eq!(again, bytes);
    let f = |s: usize| c.stacks[s].frames[0].function.clone().unwrap();
    assert_eq!(f(0), "process_data(float*)");
    // One allocation per distinct name, however many frames carry it.
    assert!(std::ptr::eq(f(0).as_ptr(), f(1).as_ptr()));
    assert!(std::ptr::eq(c.live[0].api.as_ptr(), c.live[1].api.as_ptr()));
    // Errors are the same as from_slice's.
    let cut = &bytes[..bytes.len() / 2];
    assert!(matches!(
        from_reader(cut, || Some(cut)),
        Err(ReadError::Syntax { line: 1, .. })
    ));
}

#[test]
fn empty_binary_and_non_object_inputs_say_what_they_are() {
    assert!(matches!(from_slice(b""), Err(ReadError::Empty)));
    assert!(matches!(from_slice(b" \n\t "), Err(ReadError::Empty)));
    let e = from_slice(b"\x7fELF\x02\x01").unwrap_err();
    assert!(matches!(
        e,
        ReadError::NotJson {
            line: 1,
            column: 1,
            byte: 0x7f
        }
    ));
    assert_eq!(
        e.to_string(),
        "1:1: not JSON (it starts with byte 0x7f); a cudaleak dump is a JSON object"
    );
    let e = from_slice(b"\n  # notes").unwrap_err();
    assert_eq!(
        e.to_string(),
        "2:3: not JSON (it starts with byte 0x23, '#'); a cudaleak dump is a JSON object"
    );
    assert_eq!(
        from_slice(b"[1,2]").unwrap_err().to_string(),
        "not a cudaleak dump: the file holds an array, and a cudaleak dump is a JSON object"
    );
    assert!(matches!(
        from_slice(b"2\n"),
        Err(ReadError::NotAnObject("a number"))
    ));
    // An object keeps the reader's own errors.
    assert!(matches!(from_slice(b"{}"), Err(ReadError::Version(None))));
    assert!(matches!(
        from_slice(b"{\"cudaleak_dump\""),
        Err(ReadError::Syntax { .. })
    ));
}

#[test]
fn hex_is_a_string_with_0x_prefix() {
    let mut buf = [0u8; 18];
    assert_eq!(hex_str(0, &mut buf), "0x0");
    assert_eq!(hex_str(u64::MAX, &mut buf), "0xffffffffffffffff");
    assert_eq!(serde_json::to_string(&Hex(0xabc)).unwrap(), "\"0xabc\"");
    assert!(serde_json::from_str::<Hex>("\"abc\"").is_err());
    assert!(serde_json::from_str::<Hex>("\"0x\"").is_err());
    assert!(serde_json::from_str::<Hex>("\"0x1ffffffffffffffff\"").is_err());
    assert!(serde_json::from_str::<Hex>("4096").is_err());
}

#[test]
fn checked_in_v1_dump_keeps_parsing() {
    let d = from_slice(include_bytes!("../tests/v1-sample.json")).unwrap();
    assert_eq!(d.live.len(), 2);
    assert_eq!(d.live[0].api, "cudaMalloc");
    assert_eq!(
        d.stacks[d.live[0].stack].frames[0].function.as_deref(),
        Some("process_data(float*)")
    );
}

#[test]
fn python_frames_round_trip_and_make_the_dump_version_2() {
    let mut d = sample();
    assert_eq!(
        version_for(&d.stacks, &d.modules, d.unnamed, false, false, false),
        1,
        "no Python frame: version 1"
    );
    d.stacks[0].frames.push(Frame {
        kind: Some(FrameKind::Python),
        ip: Hex(0),
        module: None,
        offset: Some(Hex(0x1c)),
        function: Some("Trainer.train_step".into()),
        file: Some("/work/train.py".into()),
        line: Some(8),
    });
    d.cudaleak_dump = version_for(&d.stacks, &d.modules, d.unnamed, false, false, false);
    assert_eq!(d.cudaleak_dump, 2);
    let mut out = Vec::new();
    write(&d, &mut out).unwrap();
    let text = String::from_utf8(out.clone()).unwrap();
    assert!(
        text.contains(r#"{"kind":"python","ip":"0x0","module":null,"offset":"0x1c","function":"Trainer.train_step","file":"/work/train.py","line":8}"#),
        "{text}"
    );
    assert!(
        !text.contains(r#"{"kind":null"#),
        "native frames carry no kind"
    );
    assert_eq!(from_slice(&out).unwrap(), d);
    // A version 1 dump is read as before.
    let mut v1 = sample();
    v1.cudaleak_dump = 1;
    let bytes = serde_json::to_vec(&v1).unwrap();
    assert_eq!(from_slice(&bytes).unwrap(), v1);
}

#[test]
fn truncated_input_reports_line_and_column() {
    let mut out = Vec::new();
    write(&sample(), &mut out).unwrap();
    match from_slice(&out[..out.len() / 2]) {
        Err(ReadError::Syntax {
            line,
            column,
            message,
        }) => {
            assert_eq!(line, 1);
            assert!(column > 1);
            assert!(
                message.starts_with("the file ends early, inside ")
                    && message.ends_with(": it is truncated"),
                "{message}"
            );
        }
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn other_versions_are_refused_by_name() {
    let mut v = serde_json::to_value(sample()).unwrap();
    v["cudaleak_dump"] = (SCHEMA_VERSION + 1).into();
    let bytes = serde_json::to_vec(&v).unwrap();
    assert!(matches!(
        from_slice(&bytes),
        Err(ReadError::Version(Some(v))) if v == u64::from(SCHEMA_VERSION) + 1
    ));
    v.as_object_mut()
        .unwrap()
        .insert("new_field".into(), 1.into());
    let bytes = serde_json::to_vec(&v).unwrap();
    assert!(matches!(
        from_slice(&bytes),
        Err(ReadError::Version(Some(v))) if v == u64::from(SCHEMA_VERSION) + 1
    ));
    assert!(matches!(
        from_slice(b"{\"hello\": 1}"),
        Err(ReadError::Version(None))
    ));
}

#[test]
fn a_version_field_of_another_type_is_named_not_called_missing() {
    let mut v = serde_json::to_value(sample()).unwrap();
    v["cudaleak_dump"] = "1".into();
    let bytes = serde_json::to_vec(&v).unwrap();
    let e = from_slice(&bytes).unwrap_err();
    assert!(
        matches!(&e, ReadError::VersionNotANumber(j) if j == "\"1\""),
        "{e:?}"
    );
    assert!(e
        .to_string()
        .starts_with("the \"cudaleak_dump\" version field is \"1\", not a number"));
}

#[test]
fn dangling_stack_index_is_inconsistent() {
    let mut d = sample();
    d.live[0].stack = 5;
    let bytes = serde_json::to_vec(&d).unwrap();
    match from_slice(&bytes) {
        Err(ReadError::Inconsistent(m)) => assert!(m.contains("live[0].stack"), "{m}"),
        other => panic!("expected inconsistency, got {other:?}"),
    }
}

#[test]
fn a_dangling_index_message_counts_stacks_in_the_right_number() {
    assert_eq!(only_stacks(0), "are no stacks");
    assert_eq!(only_stacks(1), "is only 1 stack");
    assert_eq!(only_stacks(2), "are only 2 stacks");
    let mut d = sample();
    d.stacks.truncate(1);
    d.live[0].stack = 1;
    let bytes = serde_json::to_vec(&d).unwrap();
    match from_slice(&bytes) {
        Err(ReadError::Inconsistent(m)) => {
            assert_eq!(m, "live[0].stack is 1 but there is only 1 stack")
        }
        other => panic!("expected inconsistency, got {other:?}"),
    }
}

#[test]
fn negative_size_is_a_syntax_error() {
    let text = serde_json::to_string(&sample())
        .unwrap()
        .replace("\"size\":4096", "\"size\":-4096");
    assert!(matches!(
        from_slice(text.as_bytes()),
        Err(ReadError::Syntax { .. })
    ));
}

#[test]
fn summary_must_match_live_list() {
    let mut d = sample();
    d.summary.live_bytes = 1;
    let bytes = serde_json::to_vec(&d).unwrap();
    assert!(matches!(
        from_slice(&bytes),
        Err(ReadError::Inconsistent(_))
    ));
}

#[test]
fn live_bytes_count_what_records_hold_not_their_ranges() {
    let mut d = sample();
    let mut reserved = d.live[0].clone();
    reserved.kind = Kind::Reserved;
    reserved.size = 1 << 30;
    reserved.bytes_held = Some(0);
    d.live.push(reserved);
    d.summary.live_allocations = 2;
    let bytes = serde_json::to_vec(&d).unwrap();
    assert!(String::from_utf8_lossy(&bytes).contains(r#""size":1073741824,"bytes_held":0,"#));
    assert_eq!(from_slice(&bytes).unwrap(), d, "live_bytes stays 4096");
    d.summary.live_bytes += 1 << 30;
    let bytes = serde_json::to_vec(&d).unwrap();
    assert!(matches!(
        from_slice(&bytes),
        Err(ReadError::Inconsistent(_))
    ));
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let text = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(from_slice(text.as_bytes()).is_err());
}
