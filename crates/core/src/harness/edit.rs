//! Taking code from a reply (the `edit_format` component) and the loop
//! guard's fingerprint of it.

use crate::experiment::EditFormat;
use sha2::{Digest, Sha256};

/// A fenced code block: its info string and body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Block {
    pub info: String,
    pub body: String,
}

/// Every complete ``` fenced block in `text`, in order.
pub(crate) fn fenced_blocks(text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut current: Option<(String, Vec<&str>)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        match current.take() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    current = Some((info.trim().to_string(), Vec::new()));
                }
            }
            Some((info, mut body)) => {
                if trimmed.starts_with("```") && trimmed.trim_end() == "```" {
                    // "```" then the language alone on the next line, as small
                    // models often write it: the line is the info string, not code.
                    let (info, body) = match body.first().map(|l| l.trim()) {
                        Some(lang)
                            if info.is_empty() && matches!(lang, "python" | "python3" | "py") =>
                        {
                            (lang.to_string(), body[1..].to_vec())
                        }
                        _ => (info, body),
                    };
                    blocks.push(Block { info, body: body.join("\n") + "\n" });
                } else {
                    body.push(line);
                    current = Some((info, body));
                }
            }
        }
    }
    blocks
}

/// Whether `text` ends inside a fenced block (an odd number of fence lines).
pub(crate) fn ends_in_open_fence(text: &str) -> bool {
    text.lines().filter(|l| l.trim_start().starts_with("```")).count() % 2 == 1
}

/// The text outside fenced blocks (where "DONE" is looked for).
pub(crate) fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            inside = !inside;
            continue;
        }
        if !inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The model says it is done: DONE as a word outside code blocks.
pub(crate) fn says_done(text: &str) -> bool {
    prose(text).split(|c: char| !c.is_ascii_alphanumeric()).any(|w| w == "DONE")
}

/// What a reply asks to write: (file name, content).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Extracted {
    None,
    Edit {
        file: String,
        content: String,
    },
    /// A block whose target file cannot be told (several editable files and
    /// no name in the fence).
    Ambiguous(String),
}

pub(crate) fn extract(text: &str, format: EditFormat, editable: &[String]) -> Extracted {
    let blocks = fenced_blocks(text);
    let block = match format {
        EditFormat::LastFenced => blocks.last(),
        EditFormat::FirstFenced => blocks.first(),
    };
    let Some(block) = block else { return Extracted::None };
    if block.body.trim().is_empty() {
        return Extracted::None;
    }
    let named = block.info.split_whitespace().find_map(|w| {
        let w = w.trim_start_matches("./");
        editable.iter().find(|e| e.as_str() == w || e.rsplit('/').next() == Some(w))
    });
    match (named, editable) {
        (Some(file), _) => Extracted::Edit { file: file.clone(), content: block.body.clone() },
        (None, [only]) => Extracted::Edit { file: only.clone(), content: block.body.clone() },
        _ => Extracted::Ambiguous(block.info.clone()),
    }
}

/// A normalized fingerprint of submitted code: comments, blank lines and
/// whitespace runs do not change it, so a resubmission in new clothes is
/// still a repeat.
pub fn fingerprint(code: &str) -> String {
    let mut norm = String::new();
    for line in code.lines() {
        let line = match line.find('#') {
            // A '#' inside a string would also cut; rare, and only makes the
            // guard a little more eager.
            Some(i) => &line[..i],
            None => line,
        };
        let collapsed = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if !collapsed.is_empty() {
            norm.push_str(&collapsed);
            norm.push('\n');
        }
    }
    hex::encode(Sha256::digest(norm.as_bytes()))[..16].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_language_alone_on_the_first_line_is_the_info_string() {
        let b = fenced_blocks("```\npython\ndef f():\n    return 1\n```\n");
        assert_eq!(
            b,
            vec![Block { info: "python".into(), body: "def f():\n    return 1\n".into() }]
        );
        // Only when the fence itself names nothing, and only a bare language name.
        let b = fenced_blocks("```python\npython\n```\n```\npython = 3\n```\n");
        assert_eq!(b[0].body, "python\n");
        assert_eq!(b[1], Block { info: String::new(), body: "python = 3\n".into() });
    }

    #[test]
    fn picks_last_or_first_block_and_the_named_file() {
        let text = "a\n```python\nfirst = 1\n```\nb\n```python m.py\nsecond = 2\n```\nDONE";
        let ed = vec!["m.py".to_string()];
        assert_eq!(
            extract(text, EditFormat::LastFenced, &ed),
            Extracted::Edit { file: "m.py".into(), content: "second = 2\n".into() }
        );
        assert_eq!(
            extract(text, EditFormat::FirstFenced, &ed),
            Extracted::Edit { file: "m.py".into(), content: "first = 1\n".into() }
        );
        let two = vec!["a.py".to_string(), "b.py".to_string()];
        assert!(matches!(
            extract("```python\nx\n```", EditFormat::LastFenced, &two),
            Extracted::Ambiguous(_)
        ));
        assert_eq!(
            extract("```python b.py\nx\n```", EditFormat::LastFenced, &two),
            Extracted::Edit { file: "b.py".into(), content: "x\n".into() }
        );
        assert_eq!(extract("no code here", EditFormat::LastFenced, &ed), Extracted::None);
        assert_eq!(extract("```python\nunclosed", EditFormat::LastFenced, &ed), Extracted::None);
    }

    #[test]
    fn done_only_outside_code() {
        assert!(says_done("All good.\nDONE"));
        assert!(!says_done("```python\nDONE = 1\n```"));
        assert!(!says_done("I am not done yet"));
    }

    #[test]
    fn fingerprint_ignores_comments_and_whitespace() {
        let a = fingerprint("def f(x):\n    return x+1\n");
        let b = fingerprint("# new try\ndef f(x):   # same\n\n        return x+1\n");
        assert_eq!(a, b);
        assert_ne!(a, fingerprint("def f(x):\n    return x+2\n"));
    }
}
