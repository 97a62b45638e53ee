//! The one fuzz target, shared by `fuzz/fuzz_targets/report.rs` (cargo-fuzz, nightly) and the
//! stable smoke test `tests/fuzz_smoke.rs`: bytes → the dump readers → if a dump comes out,
//! every report, diff and growth rendering in every format, into memory.
//!
//! It must panic only where the code under test is wrong: when the compact reader the CLI uses
//! (`cudaleak_format::from_reader`) and `cudaleak_format::from_slice` disagree, or when a
//! renderer panics.

use std::path::Path;

use cudaleak_format as format;

use crate::analyze::{self, Config};
use crate::analyze::{Gate, View};
use crate::growth;
use crate::report;
use crate::report::Format;

const FORMATS: [Format; 6] = [
    Format::Text,
    Format::Json,
    Format::Markdown,
    Format::Sarif,
    Format::Html,
    Format::Folded,
];

/// Two views, each with whether the text report paints.
fn views() -> [(View, bool); 2] {
    let plain = View {
        top: None,
        frames: None,
        stats: true,
        show_internal: false,
        native: false,
        show_cached: false,
        source_root: Some("/work/".into()),
    };
    let cut = View {
        top: Some(1),
        frames: Some(2),
        stats: false,
        show_internal: true,
        native: true,
        show_cached: true,
        source_root: None,
    };
    [(plain, false), (cut, true)]
}

/// Runs the readers and, on success, every renderer over `bytes`.
pub fn render_all(bytes: &[u8]) {
    let sliced = format::from_slice(bytes);
    let streamed = format::from_reader(bytes, || Some(bytes));
    match (&sliced, &streamed) {
        (Ok(a), Ok(b)) => {
            let (mut x, mut y) = (Vec::new(), Vec::new());
            format::write(a, &mut x).expect("write to memory");
            format::write(b, &mut y).expect("write to memory");
            assert!(x == y, "the two readers read different dumps");
        }
        (Err(_), Err(_)) => {}
        (a, b) => panic!(
            "the readers disagree: from_slice {:?}, from_reader {:?}",
            a.as_ref().err(),
            b.as_ref().err()
        ),
    }
    let Ok(dump) = streamed else { return };
    let source = Path::new("fuzz.json");
    let mut sink = Vec::new();
    for (view, color) in views() {
        let cfg = Config {
            view: view.clone(),
            rules: vec![crate::suppressions::Rule::new(
                "*leak*",
                Path::new("fuzz.supp"),
                1,
            )],
            caches: crate::caches::rules(&[crate::suppressions::Rule::with_kind(
                crate::suppressions::RuleKind::Cache,
                "*pool*",
                Path::new("fuzz.supp"),
                2,
            )])
            .unwrap_or_default(),
            min_bytes: 1,
            gate: Gate::default(),
            hide_quiet: true,
            pools_emptied: false,
            framework_records: false,
        };
        let findings = analyze::finish(
            vec![analyze::analyze_process(dump.clone(), source, &cfg)],
            &cfg,
        );
        let d = analyze::diff(&dump, source, &dump, source, &view);
        let mut b = growth::Builder::new(&cfg);
        b.add(&dump, source);
        b.add(&dump, source);
        let g = b.finish();
        for f in FORMATS {
            let r = report::reporter(f, color);
            sink.clear();
            let _ = r.report(&findings, &view, &mut sink);
            let _ = r.diff(&d, &view, &mut sink);
            if let Ok(g) = &g {
                let _ = r.growth(g, &view, &mut sink);
            }
        }
        if let Ok(g) = &g {
            sink.clear();
            let both = report::Page::Report {
                exit: &findings,
                series: Some(g),
            };
            let _ = report::reporter(Format::Html, false).page(both, &view, &mut sink);
        }
    }
}
