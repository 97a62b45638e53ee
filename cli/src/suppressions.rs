//! LeakSanitizer-style suppression files: parsing (`leak:PATTERN` and `cache:PATTERN` lines, `#`
//! comments) and matching a pattern against one name. The built-in cache rules (`caches.rs`) use
//! the same [`Pattern`].
//!
//! Pattern semantics (docs/report-format.md): `*` matches any run of characters; without anchors a
//! pattern matches anywhere in the name (a substring match, as in LSan); a leading `^` anchors it
//! at the start and a trailing `$` at the end. Never panics, whatever the file holds.

use std::fmt;
use std::path::{Path, PathBuf};

/// A name pattern: `*` wildcards, substring match unless anchored with `^` / `$`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// The pattern exactly as written.
    pub text: String,
    anchored_start: bool,
    anchored_end: bool,
    /// The pattern between the anchors, split at `*`.
    pieces: Vec<String>,
}

/// What a suppression line does with the blocks it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    /// `leak:` — the leak is suppressed (counted per rule, never reported).
    Leak,
    /// `cache:` — the blocks are held by a cache of the program's own (reported apart from leaks,
    /// not counted by the gate by default); matched anchored, like the built-in cache rules.
    Cache,
}

impl RuleKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::Leak => "leak",
            RuleKind::Cache => "cache",
        }
    }
}

/// One `leak:` or `cache:` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub kind: RuleKind,
    /// The pattern exactly as written after `leak:` / `cache:`.
    pub pattern: String,
    /// Where the rule was written, for messages and reports.
    pub file: PathBuf,
    pub line: usize,
    matcher: Pattern,
}

/// A suppression file's rules, by kind, each in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Suppressions {
    pub leak: Vec<Rule>,
    pub cache: Vec<Rule>,
}

#[derive(Debug)]
pub struct ParseError {
    pub file: PathBuf,
    /// 0 when the file itself could not be read.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
        }
    }
}

impl std::error::Error for ParseError {}

/// Reads a suppression file: a regular file, opened without blocking (`load::open_regular`).
pub fn read(path: &Path) -> Result<Suppressions, ParseError> {
    let cannot = |message: String| ParseError {
        file: path.to_path_buf(),
        line: 0,
        message: format!("cannot read suppressions: {message}"),
    };
    let (mut file, _) = crate::load::open_regular(path).map_err(|e| {
        if let crate::load::LoadErrorKind::NotAFile(what) = e.kind {
            return cannot(format!(
                "is {what}, not a regular file; a suppression file must be a regular file"
            ));
        }
        // The error's text starts with the path, which ParseError shows itself.
        let text = e.to_string();
        let prefix = format!("{}: ", path.display());
        cannot(text.strip_prefix(&prefix).unwrap_or(&text).to_string())
    })?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut bytes).map_err(|e| cannot(e.to_string()))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| ParseError {
        file: path.to_path_buf(),
        line: 1 + bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count(),
        message: "not valid UTF-8".into(),
    })?;
    parse(text, path)
}

/// Parses suppression text; `file` is only used in errors and rule locations.
pub fn parse(text: &str, file: &Path) -> Result<Suppressions, ParseError> {
    let mut rules = Suppressions::default();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fail = |message: String| ParseError {
            file: file.to_path_buf(),
            line: i + 1,
            message,
        };
        let Some((kind, pattern)) = line.split_once(':') else {
            return Err(fail(format!("expected \"leak:PATTERN\", found {line:?}")));
        };
        let kind = match kind.trim() {
            "leak" => RuleKind::Leak,
            "cache" => RuleKind::Cache,
            other => {
                return Err(fail(format!(
                    "unsupported suppression type {other:?} (cudaleak understands \"leak:\" and \"cache:\")"
                )))
            }
        };
        let pattern = pattern.trim();
        if pattern.is_empty() || pattern == "^" || pattern == "$" || pattern == "^$" {
            return Err(fail(format!("empty pattern after \"{}:\"", kind.as_str())));
        }
        let rule = Rule::with_kind(kind, pattern, file, i + 1);
        match kind {
            RuleKind::Leak => rules.leak.push(rule),
            RuleKind::Cache => rules.cache.push(rule),
        }
    }
    Ok(rules)
}

impl Rule {
    /// A `leak:` rule.
    pub fn new(pattern: &str, file: &Path, line: usize) -> Rule {
        Rule::with_kind(RuleKind::Leak, pattern, file, line)
    }

    pub fn with_kind(kind: RuleKind, pattern: &str, file: &Path, line: usize) -> Rule {
        Rule {
            kind,
            pattern: pattern.to_string(),
            file: file.to_path_buf(),
            line,
            matcher: Pattern::new(pattern),
        }
    }

    /// How the rule is written in a suppression file.
    pub fn text(&self) -> String {
        format!("{}:{}", self.kind.as_str(), self.pattern)
    }

    /// Whether the pattern matches `name` (an empty name never matches, as in LSan).
    pub fn matches(&self, name: &str) -> bool {
        self.matcher.matches(name)
    }
}

impl Pattern {
    pub fn new(pattern: &str) -> Pattern {
        let mut core = pattern;
        let anchored_start = core.starts_with('^');
        if anchored_start {
            core = &core[1..];
        }
        let anchored_end = core.ends_with('$');
        if anchored_end {
            core = &core[..core.len() - 1];
        }
        Pattern {
            text: pattern.to_string(),
            anchored_start,
            anchored_end,
            pieces: core.split('*').map(str::to_string).collect(),
        }
    }

    /// Whether the pattern matches `name` (an empty name never matches, as in LSan).
    pub fn matches(&self, name: &str) -> bool {
        if name.is_empty() {
            return false;
        }
        let n = self.pieces.len();
        let mut rest = name;
        for (i, piece) in self.pieces.iter().enumerate() {
            let first = i == 0;
            let last = i + 1 == n;
            if first && self.anchored_start {
                match rest.strip_prefix(piece.as_str()) {
                    Some(r) => rest = r,
                    None => return false,
                }
                if last && self.anchored_end {
                    return rest.is_empty();
                }
                continue;
            }
            if last && self.anchored_end {
                // The last piece must end the name; everything before it was matched leftmost,
                // which leaves the most room, so this is exact.
                return rest.len() >= piece.len() && rest.ends_with(piece.as_str());
            }
            match rest.find(piece.as_str()) {
                Some(at) => rest = &rest[at + piece.len()..],
                None => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(p: &str) -> Rule {
        Rule::new(p, Path::new("s.supp"), 1)
    }

    #[test]
    fn unanchored_patterns_match_substrings() {
        assert!(rule("process_data").matches("process_data(float*)"));
        assert!(rule("data").matches("process_data(float*)"));
        assert!(!rule("Process").matches("process_data(float*)"));
        assert!(!rule("x").matches(""));
    }

    #[test]
    fn wildcards_match_any_run_including_none() {
        assert!(rule("process*float").matches("process_data(float*)"));
        assert!(rule("a*b").matches("ab"));
        assert!(rule("*").matches("anything"));
        assert!(!rule("float*process").matches("process_data(float*)"));
    }

    #[test]
    fn anchors_pin_start_and_end() {
        assert!(rule("^process").matches("process_data"));
        assert!(!rule("^data").matches("process_data"));
        assert!(rule("data$").matches("process_data"));
        assert!(!rule("process$").matches("process_data"));
        assert!(rule("^process_data$").matches("process_data"));
        assert!(!rule("^process_data$").matches("process_data2"));
        // Leftmost matching before an end anchor must not give up too early.
        assert!(rule("a*b$").matches("abxb"));
        assert!(rule("^a*b*c$").matches("axbxbxc"));
        assert!(!rule("^ab*ba$").matches("aba"));
    }

    #[test]
    fn file_syntax_comments_blank_lines_and_errors_with_line_numbers() {
        let rules = parse(
            "# third-party\n\n  leak:libfoo.so  \nleak:^init_*$\ncache: MyPool::*\n",
            Path::new("x.supp"),
        )
        .unwrap();
        assert_eq!(rules.leak.len(), 2);
        assert_eq!(rules.leak[0].pattern, "libfoo.so");
        assert_eq!(rules.leak[0].line, 3);
        assert_eq!(rules.leak[1].text(), "leak:^init_*$");
        assert_eq!(rules.cache.len(), 1);
        assert_eq!(rules.cache[0].kind, RuleKind::Cache);
        assert_eq!(rules.cache[0].text(), "cache:MyPool::*");
        assert_eq!(rules.cache[0].line, 5);
        assert!(rules.cache[0].matches("MyPool::grow(unsigned long)"));

        let e = parse("leak:a\nrace:b\n", Path::new("x.supp")).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e
            .to_string()
            .starts_with("x.supp:2: unsupported suppression type \"race\""));
        let e = parse("just text\n", Path::new("x.supp")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.supp:1: expected \"leak:PATTERN\", found \"just text\""
        );
        let e = parse("\nleak:  \n", Path::new("x.supp")).unwrap_err();
        assert_eq!(e.line, 2);
        let e = parse("cache:^\n", Path::new("x.supp")).unwrap_err();
        assert_eq!(e.to_string(), "x.supp:1: empty pattern after \"cache:\"");
    }
}
