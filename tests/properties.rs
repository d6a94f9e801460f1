//! Properties checked over generated inputs (proptest): the JSONL reader and
//! writer under truncation at any byte, the sandbox's path resolver, the
//! local model's tool-call parser, and invariants of the statistics.

mod common;

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
    (any::<u32>(), ".{0,12}", prop::collection::vec(prop::collection::vec(any::<u8>(), 0..3), 0..3)).prop_map(|(id, text, nested)| Rec { id, text, nested })
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

    /// Holm's adjusted p-values are at least the raw ones, at most 1, and in
    /// the order of the raw p-values.
    #[test]
    fn holm_is_monotone(ps in prop::collection::vec(0.0f64..=1.0, 1..12)) {
        let adj = stats::holm(&ps);
        for i in 0..ps.len() {
            prop_assert!(adj[i] >= ps[i] - 1e-15 && adj[i] <= 1.0);
            for j in 0..ps.len() {
                if ps[i] < ps[j] {
                    prop_assert!(adj[i] <= adj[j] + 1e-15, "p {} < {} but adjusted {} > {}", ps[i], ps[j], adj[i], adj[j]);
                }
            }
        }
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
        assert!((l - lo).abs() < 1e-9 && (h - hi).abs() < 1e-9, "wilson({x}, {n}, {conf}) = ({l}, {h}), expected ({lo}, {hi})");
    }
}
