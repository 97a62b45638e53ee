//! Unit tests of the frameworks' own counts (schema 6) in `report --growth`: a count judged at
//! its record's line, warm-ups, the rule that one growth is not counted twice, JAX's and
//! zero-block counts, a run without the bootstrap's end.

use super::*;

/// A Python frame of `file`.
fn py(function: &str, file: &str, line: u32) -> cudaleak_format::Frame {
    cudaleak_format::Frame {
        kind: Some(format::FrameKind::Python),
        ip: format::Hex(0),
        module: None,
        offset: None,
        function: Some(function.into()),
        file: Some(file.into()),
        line: Some(line),
    }
}

/// A native frame of `module`, as the CLI holds it.
fn native(function: &str, module: &str) -> format::Frame {
    format::Frame {
        kind: None,
        ip: format::Hex(0x7f00_0000_1000),
        module: Some(module.into()),
        offset: Some(format::Hex(0x1000)),
        function: Some(function.into()),
        file: None,
        line: None,
    }
}

/// A driver stack under the script's line `line` of train.py: a segment of PyTorch's caching
/// allocator (`pool`), or a tensor of its own (`cudaMallocAsync`, as under --exact-pools).
fn driver_stack(pool: bool, line: u32) -> Vec<format::Frame> {
    let c10 = "/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so";
    let mut f = vec![native(
        if pool {
            "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::alloc_block(AllocParams&, bool)"
        } else {
            "c10::cuda::CUDACachingAllocator::CudaMallocAsync::mallocAsync(void**, signed char, unsigned long, CUstream_st*)"
        },
        c10,
    )];
    f.push(native("_PyEval_EvalFrameDefault", "/usr/bin/python3.12"));
    let p = py("train_step", "/home/u/train.py", line);
    f.push(format::Frame {
        kind: p.kind,
        ip: p.ip,
        module: None,
        offset: None,
        function: Some("train_step".into()),
        file: Some("/home/u/train.py".into()),
        line: Some(line),
    });
    f.push(native("main", "/usr/bin/python3.12"));
    f
}

/// A framework's count: (bytes, blocks) at its last read, and at its floor.
type Read = ((u64, Option<u64>), (u64, Option<u64>));

/// One dump of a made-up series: the framework's count, and driver blocks live per stack
/// (stack, blocks, bytes each).
#[derive(Clone, Default)]
struct Pt {
    count: Option<Read>,
    live: Vec<(usize, u64, u64)>,
}

/// A count that reads `floor` through the interval and `floor` plus a block in flight at the
/// dump.
fn count(floor: u64, blocks: Option<u64>) -> Option<Read> {
    Some(((floor + 512, blocks.map(|b| b + 1)), (floor, blocks)))
}

/// The series of a Python process: a snapshot per point one second apart, the last point the
/// exit dump (written after the bootstrap's end, when `ended`, with `records`). `framework` is
/// `torch`, or with its backend `torch:cudaMallocAsync`.
fn framework_series(
    cfg: &Config,
    framework: &str,
    stacks: &[Vec<format::Frame>],
    pts: &[Pt],
    ended: bool,
    records: &[format::FrameworkRecord],
) -> GrowthFindings {
    const T0: u64 = 1_764_682_800_000;
    let mut b = Builder::new(cfg);
    let n = pts.len();
    for (i, p) in pts.iter().enumerate() {
        let exit = i + 1 == n;
        let mut d = crate::fixture("clean.json");
        d.cudaleak_dump = 6;
        d.process.pid = 5005;
        d.process.exe = "/usr/bin/python3.12".into();
        d.process.argv = vec!["python3".into(), "train.py".into()];
        d.process.start_unix_ms = T0;
        d.process.end_unix_ms = T0 + 1000 * (i as u64 + 1) + if exit { 800 } else { 0 };
        d.process.end = if exit {
            format::End::Exit
        } else {
            format::End::Snapshot
        };
        d.process.snapshot = (!exit).then_some(i as u64 + 1);
        d.stacks = stacks
            .iter()
            .map(|f| format::Stack {
                frames: f.clone(),
                python: Vec::new(),
            })
            .collect();
        d.live = Vec::new();
        for &(stack, blocks, size) in &p.live {
            for _ in 0..blocks {
                let seq = d.live.len() as u64 + 1;
                d.live.push(format::LiveRecord {
                    address: format::Hex(0x7f00_0000_0000 + seq * 0x10_0000),
                    size,
                    bytes_held: None,
                    api: "cudaMalloc".into(),
                    kind: format::Kind::Device,
                    device: Some(0),
                    thread: 1,
                    seq,
                    time_ms: 0,
                    stack,
                });
            }
        }
        d.summary.live_allocations = d.live.len() as u64;
        d.summary.live_bytes = d.live.iter().map(|r| r.size).sum();
        d.floors = Some(Vec::new());
        let counters = p
            .count
            .iter()
            .map(
                |&((bytes, blocks), (floor_bytes, floor_blocks))| format::FrameworkCounter {
                    framework: framework.split(':').next().unwrap().into(),
                    backend: framework.split_once(':').map(|(_, b)| b.into()),
                    device: 0,
                    bytes,
                    floor_bytes,
                    blocks,
                    floor_blocks,
                    samples: 10,
                    unix_ms: d.process.end_unix_ms - 100,
                    ..Default::default()
                },
            )
            .collect();
        d.frameworks = Some(format::Frameworks {
            counters,
            ended_unix_ms: (exit && ended).then_some(T0 + 1000 * (n as u64 - 1) + 500),
            records: if exit { records.to_vec() } else { Vec::new() },
        });
        d.validate().unwrap();
        b.add(&d, Path::new(&format!("d{i}.json")));
    }
    b.finish().unwrap()
}

/// PyTorch's record: the most blocks kept at train.py:31, a few at line 40.
fn torch_record() -> format::FrameworkRecord {
    let tensor = py(
        "Tensor.clone",
        "/venv/lib/python3.12/site-packages/torch/_tensor.py",
        1412,
    );
    format::FrameworkRecord {
        framework: "torch".into(),
        since_unix_ms: 1,
        unix_ms: 2,
        groups: vec![
            format::FrameworkGroup {
                blocks: 12,
                bytes: 6144,
                device: Some(0),
                frames: vec![
                    tensor,
                    py("train_step", "/home/u/train.py", 31),
                    py("<module>", "/home/u/train.py", 50),
                ],
            },
            format::FrameworkGroup {
                blocks: 2,
                bytes: 1024,
                device: Some(0),
                frames: vec![
                    py("train_step", "/home/u/train.py", 40),
                    py("<module>", "/home/u/train.py", 50),
                ],
            },
        ],
        note: None,
    }
}

#[test]
fn a_framework_count_that_rises_every_step_is_a_suspect_at_its_record_s_line() {
    // `losses.append(loss)`: 512 B a step inside segments the cache already had, so the driver
    // sees nothing; PyTorch's count rises by 16 tensors a second. Its pool is flat.
    let c = builtin_caches();
    let stacks = [driver_stack(true, 12)];
    let pts: Vec<Pt> = (0..16u64)
        .map(|i| Pt {
            count: count((8 << 20) + i * 8192, Some(100 + 16 * i)),
            live: vec![(0, 1, 20 << 20)],
        })
        .collect();
    let g = framework_series(&c, "torch", &stacks, &pts, true, &[torch_record()]);
    let s = &g.series[0];
    assert_eq!((g.suspects, g.exit_code), (1, 23));
    let r = &s.rows[0];
    assert!(r.is_suspect());
    assert_eq!(r.api, "torch.cuda.memory_allocated()");
    let f = r.framework.as_ref().unwrap();
    assert_eq!(
        (f.framework.as_str(), f.device, f.note.as_deref()),
        ("torch", 0, None)
    );
    // The record's largest group is the stack, PyTorch's own file folded away.
    let own = crate::report::own_frame(&r.stack).unwrap();
    assert_eq!(
        (own.function.as_deref(), own.line),
        (Some("train_step"), Some(31))
    );
    assert_eq!(f.groups.len(), 2);
    assert_eq!(f.groups[1].stack.frames[0].line, Some(40));
    let held = r.held_by.as_ref().unwrap();
    assert_eq!((held.id.as_str(), held.segments), ("torch", false));
    // Judged on its floors up to the script's end: 14 intervals' floors between snapshots and
    // the one from the last snapshot to the script's end.
    let e = r.evidence.as_ref().unwrap();
    assert!(e.ends_at_finalizing);
    assert_eq!(e.kept.len(), 15);
    assert_eq!(r.growth_bytes(), 14 * 8192);
    assert_eq!(r.growth_blocks(), 14 * 16);
    // Nothing else grew, and the flat pool gives no granularity note: the count judged it.
    assert_eq!(s.rows.len(), 1);
    assert!(s.coarse_pools.is_empty(), "{:?}", s.coarse_pools);
}

#[test]
fn a_framework_count_that_warms_up_and_levels_off_is_not_a_suspect() {
    // The model, then the optimizer's state at the first step, activations of the largest batch
    // so far: new highs at 1, 2, 4 and 7, then level for the rest of the run.
    let c = builtin_caches();
    let mib = 1u64 << 20;
    let level = [
        10, 20, 30, 30, 40, 40, 40, 45, 45, 45, 45, 45, 45, 45, 45, 45,
    ];
    let pts: Vec<Pt> = level
        .iter()
        .map(|&m| Pt {
            count: count(m * mib, Some(m * 4)),
            live: vec![(0, 1, 64 * mib)],
        })
        .collect();
    let g = framework_series(&c, "torch", &[driver_stack(true, 12)], &pts, true, &[]);
    assert_eq!((g.suspects, g.exit_code), (0, 0));
    let rows = framework_rows(&g);
    assert_eq!(rows.len(), 1);
    assert!(
        matches!(
            rows[0].not_suspect,
            Some(NotSuspect::Settled | NotSuspect::NoTrend)
        ),
        "{:?}",
        rows[0].not_suspect
    );
    // A count that only ever falls after its first point is not listed.
    let falls: Vec<Pt> = (0..12u64)
        .map(|i| Pt {
            count: count((40 - i) * mib, Some(100 - i)),
            live: vec![],
        })
        .collect();
    let g = framework_series(&c, "torch", &[driver_stack(true, 12)], &falls, true, &[]);
    assert!(framework_rows(&g).is_empty());
}

#[test]
fn a_framework_count_that_per_tensor_driver_suspects_explain_is_not_counted_twice() {
    // --exact-pools: every kept tensor is its own cudaMallocAsync at train.py:31, and PyTorch's
    // count rises by the same bytes. The callsite names the line; the count is explained.
    let c = builtin_caches();
    let kib = 1u64 << 10;
    let pts: Vec<Pt> = (0..12u64)
        .map(|i| Pt {
            count: count(1024 * kib + i * 64 * kib, Some(4 + i * 2)),
            live: vec![(0, 2 * i + 1, 32 * kib)],
        })
        .collect();
    let g = framework_series(&c, "torch", &[driver_stack(false, 31)], &pts, true, &[]);
    let s = &g.series[0];
    assert_eq!(g.suspects, 1, "{:#?}", s.rows);
    let suspect = &s.rows[0];
    assert!(suspect.framework.is_none());
    assert_eq!(first_function(suspect), "train_step");
    let fw = framework_rows(&g);
    assert_eq!(fw[0].not_suspect, Some(NotSuspect::ExplainedByCallsites));
    assert!(fw[0].counted_elsewhere());
    // Only the driver suspect's growth is counted.
    assert_eq!(
        s.suspect_growth_bytes,
        u64::try_from(suspect.growth_bytes()).unwrap()
    );
}

#[test]
fn a_pool_s_driver_suspect_is_the_framework_count_s_growth_when_that_is_a_suspect() {
    // Default pools: the tensors kept fill one more 2 MiB segment per second, and PyTorch's count
    // rises by 2 MiB a second too. The count leads (it has the line); the pool's row is
    // the same growth seen at the driver.
    let c = builtin_caches();
    let mib = 1u64 << 20;
    let pts: Vec<Pt> = (0..12u64)
        .map(|i| Pt {
            count: count(20 * mib + i * 2 * mib, Some(8 + 4 * i)),
            live: vec![(0, 1 + i, 2 * mib)],
        })
        .collect();
    let g = framework_series(
        &c,
        "torch",
        &[driver_stack(true, 12)],
        &pts,
        true,
        &[torch_record()],
    );
    let s = &g.series[0];
    assert_eq!(g.suspects, 1, "{:#?}", s.rows);
    assert!(s.rows[0].framework.is_some());
    let pool = s.rows.iter().find(|r| r.framework.is_none()).unwrap();
    assert_eq!(pool.held_by.as_ref().unwrap().id, "pytorch-native");
    assert_eq!(pool.not_suspect, Some(NotSuspect::InFrameworkCount));
    assert_eq!(
        s.suspect_growth_bytes,
        u64::try_from(s.rows[0].growth_bytes()).unwrap()
    );
    // Without the framework's count the pool's row is the suspect, as before schema 6.
    let bare: Vec<Pt> = pts
        .iter()
        .map(|p| Pt {
            count: None,
            ..p.clone()
        })
        .collect();
    let g = framework_series(&c, "torch", &[driver_stack(true, 12)], &bare, true, &[]);
    assert_eq!(g.suspects, 1);
    assert_eq!(
        g.series[0].rows[0].held_by.as_ref().unwrap().id,
        "pytorch-native"
    );
}

#[test]
fn a_jax_count_without_blocks_is_judged_as_a_pool_s_and_says_no_line_is_known() {
    // JAX preallocates its pool: the driver sees one block, flat; bytes_in_use rises by 4 KiB a
    // second with no count of buffers.
    let c = builtin_caches();
    let pts: Vec<Pt> = (0..12u64)
        .map(|i| Pt {
            count: count((1 << 20) + i * 4096, None),
            live: vec![],
        })
        .collect();
    let g = framework_series(&c, "jax", &[], &pts, true, &[]);
    assert_eq!(g.suspects, 1);
    let r = &g.series[0].rows[0];
    assert_eq!(r.api, "jax Device.memory_stats() bytes_in_use");
    assert_eq!(r.growth_blocks(), 0, "no blocks, and no FewBlocks verdict");
    assert!(r.held_by.as_ref().unwrap().segments);
    assert!(r.stack.frames.is_empty());
    let note = r.framework.as_ref().unwrap().note.as_deref().unwrap();
    assert!(note.starts_with("JAX keeps no record"), "{note}");
    assert!(note.contains("--exact-pools"), "{note}");
    let grows = r.held_by.as_ref().unwrap().grows.as_deref().unwrap();
    assert!(grows.ends_with(note), "{grows}");
}

#[test]
fn a_count_of_zero_blocks_holding_bytes_is_judged_as_a_pool_s() {
    // PyTorch's cudaMallocAsync backend answers `allocation.all.current` 0 while it holds
    // bytes (the H200's exact-mode runs): not three blocks short of a suspect, but uncounted.
    let c = builtin_caches();
    let pts: Vec<Pt> = (0..12u64)
        .map(|i| Pt {
            count: Some((
                ((1 << 20) + i * 8192, Some(0)),
                ((1 << 20) + i * 8192, Some(0)),
            )),
            live: vec![],
        })
        .collect();
    let g = framework_series(&c, "torch:cudaMallocAsync", &[], &pts, true, &[]);
    let r = framework_rows(&g)[0];
    assert!(r.is_suspect(), "{:?}", r.not_suspect);
    assert!(r.held_by.as_ref().unwrap().segments);
    assert_eq!(r.growth_blocks(), 0);
}

#[test]
fn without_the_bootstrap_s_end_a_count_that_fell_at_exit_is_judged_on_its_run() {
    // The bootstrap never stopped reading (killed): the exit dump's count, after teardown freed
    // the tensors, is left out like a callsite's teardown.
    let c = builtin_caches();
    let mut pts: Vec<Pt> = (0..12u64)
        .map(|i| Pt {
            count: count(4096 + i * 4096, Some(1 + i * 4)),
            live: vec![],
        })
        .collect();
    pts.push(Pt {
        count: count(0, Some(0)),
        live: vec![],
    });
    let g = framework_series(&c, "torch", &[], &pts, false, &[]);
    let r = framework_rows(&g)[0];
    assert!(r.is_suspect(), "{:?}", r.not_suspect);
    assert!(!r.evidence.as_ref().unwrap().ends_at_finalizing);
    let note = r.framework.as_ref().unwrap().note.as_deref().unwrap();
    assert!(note.starts_with("PyTorch kept no Python stack"), "{note}");
}

#[test]
fn under_exact_pools_a_count_without_a_line_points_at_the_callsites_not_at_exact_pools() {
    // Every tensor its own cudaMallocAsync, but kept one or two at a time at many lines: no
    // callsite is a suspect, PyTorch's count is, and its record was never on.
    let c = builtin_caches();
    let stacks: Vec<Vec<format::Frame>> = (0..12).map(|l| driver_stack(false, 100 + l)).collect();
    let pts: Vec<Pt> = (0..12u64)
        .map(|i| Pt {
            count: count(4096 + i * 8192, Some(1 + i * 2)),
            live: (0..i as usize).map(|s| (s, 2, 4096)).collect(),
        })
        .collect();
    let g = framework_series(&c, "torch:cudaMallocAsync", &stacks, &pts, true, &[]);
    let r = framework_rows(&g)[0];
    assert!(r.is_suspect(), "{:#?}", g.series[0].rows);
    let note = r.framework.as_ref().unwrap().note.as_deref().unwrap();
    assert!(
        note.contains("was its own driver allocation here"),
        "{note}"
    );
    assert!(!note.contains("--exact-pools"), "{note}");
}
