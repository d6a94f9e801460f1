//! Properties checked over generated inputs (proptest): the JSONL reader and
//! writer under truncation at any byte, the sandbox's path resolver, the
//! local model's tool-call parser, the config, task and baseline parsers (a cut or a
//! value of the wrong type is read or refused naming file and key, never a
//! panic), and invariants of the statistics.

use crate::common;

use ablate::model::chat_format::{parse_fenced_tool_calls, parse_tool_calls};
use ablate::record::jsonl::{self, JsonlWriter};
use ablate::report::stats;
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Rec {
    id: u32,
    text: String,
    nested: Vec<Vec<u8>>,
}

fn rec() -> impl Strategy<Value = Rec> {
    (any::<u32>(), ".{0,12}", prop::collection::vec(prop::collection::vec(any::<u8>(), 0..3), 0..3))
        .prop_map(|(id, text, nested)| Rec { id, text, nested })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// A file cut at any byte reads back as exactly its complete lines, with
    /// the cut line (if any) as the torn tail and nothing else lost; a writer
    /// opened on it drops the torn tail, and what it appends reads back after
    /// the complete lines.
    #[test]
    fn jsonl_survives_truncation_at_any_byte(records in prop::collection::vec(rec(), 1..6), cut in any::<prop::sample::Index>()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let mut bytes = Vec::new();
        for r in &records {
            bytes.extend(serde_json::to_vec(r).unwrap());
            bytes.push(b'\n');
        }
        let k = cut.index(bytes.len() + 1);
        std::fs::write(&path, &bytes[..k]).unwrap();
        // Independent count: the newlines before the cut are the complete lines;
        // a cut exactly at a line's end (before its newline) leaves a whole record.
        let complete = bytes[..k].iter().filter(|&&b| b == b'\n').count();
        let whole_unterminated = k > 0 && bytes[k - 1] != b'\n' && bytes.get(k) == Some(&b'\n');
        let partial = k > 0 && bytes[k - 1] != b'\n' && !whole_unterminated;
        let read = jsonl::read::<Rec>(&path).unwrap();
        let expect = complete + whole_unterminated as usize;
        prop_assert_eq!(&read.records[..], &records[..expect]);
        prop_assert!(read.bad_lines.is_empty());
        prop_assert_eq!(read.torn_tail.is_some(), partial);

        let extra = Rec { id: 7, text: "after".into(), nested: vec![] };
        let mut w = JsonlWriter::open(&path).unwrap();
        w.append(&extra).unwrap();
        drop(w);
        let again = jsonl::read::<Rec>(&path).unwrap();
        prop_assert!(again.bad_lines.is_empty() && again.torn_tail.is_none());
        prop_assert_eq!(again.records.last(), Some(&extra));
        prop_assert_eq!(&again.records[..again.records.len() - 1], &records[..expect]);
    }

    /// The resolver accepts exactly the relative paths that stay inside the
    /// sandbox without passing through a symlink, and what it returns is
    /// inside the sandbox.
    #[test]
    fn sandbox_resolver_keeps_paths_inside(parts in prop::collection::vec(prop::sample::select(vec!["a", "b", "..", ".", "", "link", "add.py"]), 1..6), absolute in any::<bool>()) {
        let suite = ablate::suite::load(&common::fixture("tiny")).unwrap();
        let sandbox = ablate::sandbox::Sandbox::create(&suite.tasks[0]).unwrap();
        std::os::unix::fs::symlink("/etc", sandbox.path().join("link")).unwrap();
        let rel = format!("{}{}", if absolute { "/" } else { "" }, parts.join("/"));
        // Independent model of the rule.
        let comps: Vec<&str> = rel.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
        // (`.` is the sandbox's own folder: inside it.)
        let accept = !rel.starts_with('/') && !rel.is_empty() && !comps.contains(&"..") && comps.first() != Some(&"link");
        let got = sandbox.resolve(&rel);
        prop_assert_eq!(got.is_ok(), accept, "{:?} -> {:?}", rel, got);
        if let Ok(p) = got {
            prop_assert!(p.starts_with(sandbox.path()));
            prop_assert!(!p.components().any(|c| c == std::path::Component::ParentDir));
        }
    }

    /// Any generated text is parsed without a panic, and a call block written
    /// the way the model writes it comes back with its name and its argument
    /// text exactly as generated.
    #[test]
    fn tool_call_blocks_round_trip(noise in ".{0,40}", name in "[a-z_]{1,12}", keys in prop::collection::vec("[a-z]{1,5}", 0..4), vals in prop::collection::vec(any::<i32>(), 4)) {
        let _ = parse_tool_calls(&noise);
        let _ = parse_fenced_tool_calls(&noise, &[]);
        let args = format!("{{{}}}", keys.iter().zip(&vals).map(|(k, v)| format!("\"{k}\": {v}")).collect::<Vec<_>>().join(", "));
        let raw = format!("<tool_call>\n{{\"name\": \"{name}\", \"arguments\": {args}}}\n</tool_call>");
        let (text, calls, unparsed) = parse_tool_calls(&raw);
        prop_assert!(text.is_empty() && unparsed.is_empty());
        prop_assert_eq!(calls.len(), 1);
        prop_assert_eq!(&calls[0].name, &name);
        prop_assert_eq!(&calls[0].arguments, &args);
    }

    /// Wilson's interval lies in [0, 1] and holds the observed rate.
    #[test]
    fn wilson_bounds(n in 1u64..500, frac in 0.0f64..=1.0, conf in 0.5f64..0.999) {
        let x = ((n as f64) * frac).floor() as u64;
        let (lo, hi) = stats::wilson(x, n, conf);
        let p = x as f64 / n as f64;
        prop_assert!((0.0..=1.0).contains(&lo) && (0.0..=1.0).contains(&hi));
        prop_assert!(lo <= p + 1e-12 && p <= hi + 1e-12, "{} not in [{}, {}]", p, lo, hi);
    }

    /// Swapping the arms negates the effect and mirrors its interval; the
    /// p-value stays the same, and the interval lies within [-1, 1].
    #[test]
    fn swapping_arms_negates_the_effect(tasks in prop::collection::vec((prop::collection::vec(any::<bool>(), 1..6), prop::collection::vec(any::<bool>(), 1..6)), 1..9)) {
        let as_f = |v: &Vec<bool>| v.iter().map(|&b| b as u8 as f64).collect::<Vec<f64>>();
        let control: Vec<Vec<f64>> = tasks.iter().map(|(c, _)| as_f(c)).collect();
        let treatment: Vec<Vec<f64>> = tasks.iter().map(|(_, t)| as_f(t)).collect();
        let ab = stats::paired_inference(&control, &treatment, 0.95);
        let ba = stats::paired_inference(&treatment, &control, 0.95);
        prop_assert!((ab.mean_diff + ba.mean_diff).abs() < 1e-12);
        prop_assert!((ab.lo + ba.hi).abs() < 1e-9 && (ab.hi + ba.lo).abs() < 1e-9, "{:?} vs {:?}", ab, ba);
        prop_assert!((ab.p_value - ba.p_value).abs() < 1e-9);
        prop_assert!(ab.lo >= -1.0 && ab.hi <= 1.0 && ab.lo <= ab.mean_diff + 1e-12 && ab.mean_diff <= ab.hi + 1e-12);
    }

    /// Every verdict is a function of the data and the seed: the tasks put in another order
    /// (renaming tasks reorders them) give the same equivalence verdict, the same averaged
    /// capitals to the bit, and the same effect.
    #[test]
    fn task_order_never_moves_a_verdict(
        tasks in prop::collection::vec((0u8..=5, 0u8..=5), 2..60),
        rotate in 0usize..60,
        seed in any::<u64>(),
    ) {
        let trials = |k: u8| (0..5).map(|i| f64::from(u8::from(i < k))).collect::<Vec<f64>>();
        let arms = |ts: &[(u8, u8)]| -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
            ts.iter().map(|&(c, t)| (trials(c), trials(t))).unzip()
        };
        let mut other = tasks.clone();
        other.reverse();
        let k = rotate % other.len();
        other.rotate_left(k);
        let ((c1, t1), (c2, t2)) = (arms(&tasks), arms(&other));
        prop_assert_eq!(
            stats::paired_equivalent(&c1, &t1, 0.05, 0.1, seed),
            stats::paired_equivalent(&c2, &t2, 0.05, 0.1, seed)
        );
        let d = |c: &[Vec<f64>], t: &[Vec<f64>]| -> Vec<f64> {
            c.iter().zip(t).map(|(c, t)| stats::mean(t) - stats::mean(c)).collect()
        };
        prop_assert_eq!(
            stats::order_free_capital(&d(&c1, &t1), 0.05, 0.1, seed),
            stats::order_free_capital(&d(&c2, &t2), 0.05, 0.1, seed)
        );
        let (a, b) = (stats::paired_inference(&c1, &t1, 0.95), stats::paired_inference(&c2, &t2, 0.95));
        prop_assert!((a.p_value - b.p_value).abs() < 1e-12 && (a.lo - b.lo).abs() < 1e-12 && (a.hi - b.hi).abs() < 1e-12, "{:?} {:?}", a, b);
    }
}

/// Known values beside the property above: Wilson's score interval
/// `(p + z^2/(2n) -/+ z sqrt(p(1-p)/n + z^2/(4n^2))) / (1 + z^2/n)`, evaluated in mpmath at
/// 40 digits with z = sqrt(2) erfinv(conf) (the interval R's prop.test(x, n, correct = FALSE)
/// gives), at three levels, away from 0 and 1.
#[test]
fn wilson_known_cases() {
    for (x, n, conf, lo, hi) in [
        (1, 3, 0.90, 0.0782657263337284, 0.746466131718776),
        (37, 100, 0.99, 0.257386290078033, 0.498791088728081),
        (250, 499, 0.50, 0.485910844872199, 0.516091337761457),
    ] {
        let (l, h) = stats::wilson(x, n, conf);
        assert!(
            (l - lo).abs() < 1e-9 && (h - hi).abs() < 1e-9,
            "wilson({x}, {n}, {conf}) = ({l}, {h}), expected ({lo}, {hi})"
        );
    }
}

/// A sound config for the parser properties: the tiny suite, an OpenAI-compatible
/// model (no file to find), two arms.
const CONFIG: &str = r#"[experiment]
name = "props"
suite = "SUITE"
tasks = ["add-two"]
trials = 2
seed = 7
alpha = 0.05

[budget]
max_steps = 3
max_output_tokens_per_step = 256
max_total_tokens = 12000
max_working_seconds = 90

[harness]
session_steps = 2
feedback_tail_bytes = 1200

[[models]]
name = "m"
provider = "openai"
model = "m"
endpoint = "http://127.0.0.1:9/v1"
temperature = 0.7

[arms.bare]
base = "bare"

[arms.full]
base = "full"
"#;

/// Values of other types and out of range, for a key's value.
const ODD_VALUES: [&str; 12] = [
    "\"x\"",
    "\"\"",
    "-1",
    "0",
    "1e309",
    "nan",
    "[]",
    "{}",
    "true",
    "18446744073709551616",
    "0.0",
    "[1, \"a\"]",
];

/// Each one-line `key = value` of `text`: (line index, key).
fn keyed_lines(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            l.split_once(" = ")
                .filter(|(_, v)| !v.starts_with("\"\"\""))
                .map(|(k, _)| (i, k.trim().to_string()))
        })
        .collect()
}

/// `text` with line `line`'s value replaced by `value`.
fn with_value(text: &str, line: usize, value: &str) -> String {
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            if i == line {
                format!("{} = {value}", l.split_once(" = ").unwrap().0)
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// A config cut at any byte, or with any key's value swapped for one of
    /// another type or out of range, is read or refused, never a panic; a
    /// refusal names the file, and a swapped value's refusal names its key.
    #[test]
    fn a_config_is_read_or_refused_naming_file_and_key(cut in any::<prop::sample::Index>(), pick in any::<prop::sample::Index>(), value in prop::sample::select(ODD_VALUES.to_vec())) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/props.toml");
        let text = CONFIG.replace("SUITE", &common::fixture("tiny").display().to_string());
        prop_assert!(ablate::experiment::config::load_str(&path, &text).is_ok(), "the sound config loads");
        let k = cut.index(text.len() + 1);
        if text.is_char_boundary(k)
            && let Err(e) = ablate::experiment::config::load_str(&path, &text[..k])
        {
            prop_assert!(e.to_string().starts_with(&format!("{}: ", path.display())), "{e}");
        }
        let lines = keyed_lines(&text);
        let (line, key) = &lines[pick.index(lines.len())];
        if let Err(e) = ablate::experiment::config::load_str(&path, &with_value(&text, *line, value)) {
            let shown = e.to_string();
            prop_assert!(shown.starts_with(&format!("{}: ", path.display())), "{shown}");
            // A value TOML itself refuses (1e309 overflows) is named by its line and column.
            prop_assert!(shown.contains(key.as_str()) || shown.contains(&format!("at line {}, column", line + 1)), "`{key} = {value}` refused without naming `{key}`: {shown}");
        }
    }

    /// A task.toml with any value swapped, or cut at any byte, is loaded or
    /// refused naming the task file (and the key, for a swapped value).
    #[test]
    fn a_task_is_read_or_refused_naming_file_and_key(cut in any::<prop::sample::Index>(), pick in any::<prop::sample::Index>(), value in prop::sample::select(ODD_VALUES.to_vec())) {
        let dir = tempfile::tempdir().unwrap();
        let task = dir.path().join("add-two");
        ablate::sandbox::copy_tree(&common::fixture("tiny").join("add-two"), &task).unwrap();
        let file = task.join("task.toml");
        let text = std::fs::read_to_string(&file).unwrap();
        let k = cut.index(text.len() + 1);
        if text.is_char_boundary(k) {
            std::fs::write(&file, &text[..k]).unwrap();
            if let Err(e) = ablate::suite::load_task(&task) {
                prop_assert!(e.to_string().contains(&file.display().to_string()), "{e}");
            }
        }
        let lines = keyed_lines(&text);
        let (line, key) = &lines[pick.index(lines.len())];
        std::fs::write(&file, with_value(&text, *line, value)).unwrap();
        if let Err(e) = ablate::suite::load_task(&task) {
            let shown = e.to_string();
            prop_assert!(shown.contains(&file.display().to_string()), "{shown}");
            prop_assert!(shown.contains(key.as_str()) || shown.contains(&format!("at line {}, column", line + 1)), "`{key} = {value}` refused without naming `{key}`: {shown}");
        }
    }

    /// A baseline CSV with any cell replaced, or cut at any byte, is read or
    /// refused naming the file; a refused replaced cell names its row and a
    /// column (the cell's, or the one it contradicts: passes 0 of 4 against a
    /// pass rate of 0.75 names `pass_rate`).
    #[test]
    fn a_baseline_is_read_or_refused_naming_row_and_column(cut in any::<prop::sample::Index>(), row in 0usize..2, col in 0usize..10, cell in prop::sample::select(vec!["", "-1", "x", "1.5", "99", "NaN", "\"a,b\"", "0"])) {
        let header = "task,trials,passes,pass_rate,arm,model,model_identity,suite_digest,budget,run_id";
        let rows = ["a,4,3,0.75,full,m,,d,b,r", "b,4,1,0.25,full,m,,d,b,r"];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("base.csv");
        let text = format!("{header}\n{}\n{}\n", rows[0], rows[1]);
        let k = cut.index(text.len() + 1);
        std::fs::write(&path, &text[..k]).unwrap();
        if let Err(e) = ablate::gate::read_baseline(&path) {
            prop_assert!(e.to_string().starts_with(&format!("{}: ", path.display())), "{e}");
        }
        let mut cells: Vec<String> = rows[row].split(',').map(str::to_string).collect();
        cells[col] = cell.to_string();
        let mut lines = [header.to_string(), rows[0].to_string(), rows[1].to_string()];
        lines[row + 1] = cells.join(",");
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        if let Err(e) = ablate::gate::read_baseline(&path) {
            let shown = e.to_string();
            let name = header.split(',').nth(col).unwrap();
            prop_assert!(shown.starts_with(&format!("{}: row ", path.display())), "cell {name} = {cell}: {shown}");
            prop_assert!(shown.contains(", column `") || shown.contains(": CSV error"), "cell {name} = {cell}: {shown}");
        }
    }
}
