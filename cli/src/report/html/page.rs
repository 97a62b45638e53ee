//! The page under construction: its skeleton (the head with the stylesheet, the footer with
//! the script), the escaping every string from a dump goes through, and the pieces each section
//! writes with (a stack, a group in `<details>`, a note of what is not shown).
//!
//! The stylesheet and the script are files of their own (`style.css`, `script.js`), embedded
//! whole: the page still fetches nothing. Nothing here decides what is shown.

use std::fmt::Write as _;

use super::{MAX_FRAMES, MAX_GROUPS};
use crate::analyze::{FrameView, StackView, View};
use crate::report::wording::{folded_line, more_frames_text, not_shown_text, where_text, Markup};
use crate::report::{clean, human_bytes, VERSION};

/// The page's stylesheet, written into its `<style>`.
const STYLE: &str = include_str!("style.css");

/// Click a flame-graph node to zoom into it (the root zooms out); hover or click a timeline's
/// legend row to pick out its band. The page reads the same without it.
const SCRIPT: &str = include_str!("script.js");

/// How the page lays out a sentence's pieces: sizes in bold, words escaped, program text
/// escaped in `<code>`.
impl Markup for super::Html {
    fn size(&self, bytes: u64) -> String {
        format!("<b>{}</b>", human_bytes(bytes))
    }
    fn words(&self, s: &str) -> String {
        esc_text(s)
    }
    fn code(&self, s: &str) -> String {
        format!("<code>{}</code>", esc(s))
    }
}

/// Program text made safe for HTML text and attribute values: control characters written
/// visibly (as in text reports), then `&`, `<`, `>`, `"` and `'` as entities.
pub fn esc(s: &str) -> String {
    let c = clean(s);
    let mut out = String::with_capacity(c.len() + 8);
    for ch in c.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(ch),
        }
    }
    out
}

/// Text the report wrote itself (already cleaned where it holds program names): escaped only.
pub(super) fn esc_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `1.5`, `12`, `0.25`: short, fixed coordinates (no `-0`, no exponent).
pub(super) fn num(v: f64) -> String {
    let v = if v.is_finite() { v } else { 0.0 };
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" || s.is_empty() {
        "0".into()
    } else {
        s.to_string()
    }
}

/// The page under construction. Writing to a `String` cannot fail; the whole page is written
/// out at the end.
pub(super) struct Page {
    pub(super) s: String,
    pub(super) root: Option<String>,
    /// Groups listed per section and process.
    pub(super) groups: usize,
    /// Frames listed per stack.
    pub(super) frames: usize,
    /// Ids of SVG elements, so every one is unique in the page.
    next_id: usize,
}

impl Page {
    pub(super) fn new(view: &View) -> Self {
        Page {
            s: String::with_capacity(64 << 10),
            root: view.source_root.clone(),
            groups: view.top.map_or(MAX_GROUPS, |t| t.min(MAX_GROUPS)),
            frames: view.frames.map_or(MAX_FRAMES, |f| f.min(MAX_FRAMES)),
            next_id: 0,
        }
    }

    pub(super) fn id(&mut self, what: &str) -> String {
        self.next_id += 1;
        format!("{what}-{}", self.next_id)
    }

    pub(super) fn head(&mut self, title: &str) {
        let _ = write!(
            self.s,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <meta name=\"generator\" content=\"cudaleak {VERSION}\">\n\
             <title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n",
            esc_text(title)
        );
    }

    pub(super) fn tail(&mut self, inputs: &[String]) {
        self.s.push_str("<footer>\n<p>Made by cudaleak ");
        self.s.push_str(VERSION);
        self.s.push_str(
            " from the dumps below. One self-contained file: nothing is fetched; \
             the script only adds zooming and highlighting.</p>\n",
        );
        if !inputs.is_empty() {
            let shown = inputs.len().min(12);
            self.s.push_str("<p class=\"mono\">");
            for (i, f) in inputs.iter().take(shown).enumerate() {
                if i > 0 {
                    self.s.push_str("<br>");
                }
                self.s.push_str(&esc(f));
            }
            if inputs.len() > shown {
                let _ = write!(self.s, "<br>… {} more", inputs.len() - shown);
            }
            self.s.push_str("</p>\n");
        }
        let _ = write!(
            self.s,
            "</footer>\n<script>\n{SCRIPT}</script>\n</body>\n</html>\n"
        );
    }

    /// A stack as a list: `#i frame` lines, folded runs and cuts as unnumbered lines.
    pub(super) fn stack(&mut self, st: &StackView) {
        self.s.push_str("<ul class=\"stack\">");
        let shown = st.frames.len().min(self.frames);
        for (i, f) in st.frames.iter().take(shown).enumerate() {
            self.folded(st, i);
            let py = if f.python { " class=\"py\"" } else { "" };
            let badge = if f.python {
                "<span class=\"badge\">py</span>"
            } else {
                ""
            };
            let _ = write!(
                self.s,
                "<li{py}><span class=\"n\">#{i}</span>{badge}{}</li>",
                frame_html(f, self.root.as_deref())
            );
        }
        if shown == st.frames.len() {
            self.folded(st, st.frames.len());
        }
        let more = st.omitted + (st.frames.len() - shown);
        if more > 0 {
            let _ = write!(
                self.s,
                "<li class=\"more\">… {}</li>",
                more_frames_text(more as u64)
            );
        }
        self.s.push_str("</ul>\n");
    }

    fn folded(&mut self, st: &StackView, at: usize) {
        for r in st.folded.iter().filter(|r| r.at == at) {
            let _ = write!(
                self.s,
                "<li class=\"fold\">{}</li>",
                esc_text(&folded_line(r))
            );
        }
    }

    /// A stack's innermost frame for one-line listings, C++ template arguments of long names
    /// elided as in text output (the stack below it has the whole name).
    pub(super) fn where_text(&self, st: &StackView) -> String {
        where_text(st, self.root.as_deref())
    }

    /// One group as a `<details>` element: size and API in the summary line, the stack inside.
    pub(super) fn group(&mut self, head: &str, st: &StackView, open: bool) {
        let _ = writeln!(
            self.s,
            "<details{}><summary>{head} <span class=\"muted\">at</span> <code>{}</code></summary>",
            if open { " open" } else { "" },
            esc_text(&self.where_text(st))
        );
        self.stack(st);
        self.s.push_str("</details>\n");
    }

    pub(super) fn not_shown(&mut self, n: usize, what: (&str, &str), why: &str) {
        if n > 0 {
            let _ = writeln!(
                self.s,
                "<p class=\"note\">… {}</p>",
                not_shown_text(n as u64, what, why)
            );
        }
    }
}

/// A frame as HTML: function (or address), `at file:line`, `(module)`; all escaped.
fn frame_html(f: &FrameView, root: Option<&str>) -> String {
    let mut s = String::new();
    match &f.function {
        Some(name) => {
            let _ = write!(s, "<span class=\"fn\">{}</span>", esc(name));
        }
        None => {
            let _ = write!(s, "<span class=\"fn\">{:#x}</span>", f.ip);
        }
    }
    if let Some(file) = &f.file {
        let shown = root
            .and_then(|r| file.strip_prefix(r))
            .filter(|rel| !rel.is_empty())
            .unwrap_or(file);
        let _ = write!(s, " at <span class=\"file\">{}", esc(shown));
        if let Some(line) = f.line {
            let _ = write!(s, ":{line}");
        }
        s.push_str("</span>");
    }
    match (f.module_name(), f.function.is_none(), f.offset()) {
        (Some(m), true, Some(off)) => {
            let _ = write!(s, " <span class=\"muted\">({}+{off:#x})</span>", esc(m));
        }
        (Some(m), _, _) => {
            let _ = write!(s, " <span class=\"muted\">({})</span>", esc(m));
        }
        (None, _, _) => {}
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_text_is_escaped_for_html() {
        assert_eq!(
            esc("std::vector<int, A<&x>>::f\"'"),
            "std::vector&lt;int, A&lt;&amp;x&gt;&gt;::f&quot;&#39;"
        );
        assert_eq!(
            esc("a\x1bb"),
            "a\\x1bb",
            "control characters are shown, not kept"
        );
    }

    #[test]
    fn coordinates_are_short_and_never_negative_zero() {
        assert_eq!(num(1.0), "1");
        assert_eq!(num(1.256), "1.26");
        assert_eq!(num(-0.001), "0");
        assert_eq!(num(f64::NAN), "0");
        assert_eq!(num(12.5), "12.5");
    }
}
