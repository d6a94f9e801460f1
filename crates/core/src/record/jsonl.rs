//! Append-only JSON Lines: one record per line, flushed and synced before the
//! writer returns, so a crash loses at most the record being written. The
//! reader keeps everything before a torn last line and reports the tear.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub struct JsonlWriter {
    file: File,
    path: PathBuf,
}

impl JsonlWriter {
    /// Open for appending, creating the file. A torn last line (a crash in the
    /// middle of a write) is moved to `<file>.torn` and cut off, so the next
    /// record starts on a line of its own.
    pub fn open(path: &Path) -> io::Result<JsonlWriter> {
        let mut file = OpenOptions::new().create(true).read(true).append(true).open(path)?;
        repair_tail(&mut file, path)?;
        Ok(JsonlWriter { file, path: path.to_path_buf() })
    }

    /// Append one record as a line; flushed and synced to disk on return.
    pub fn append<T: Serialize>(&mut self, record: &T) -> io::Result<()> {
        let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.file.flush()?;
        self.file.sync_data()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn repair_tail(file: &mut File, path: &Path) -> io::Result<()> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(());
    }
    // Read back from the end only as far as the last newline: opening a
    // trials.jsonl of a million records must not read all of it.
    let mut chunk = 64 * 1024u64;
    let (bytes, base) = loop {
        let from = len.saturating_sub(chunk);
        file.seek(SeekFrom::Start(from))?;
        let mut bytes = Vec::with_capacity((len - from) as usize);
        file.read_to_end(&mut bytes)?;
        // A newline before the last byte, or the start of the file, bounds the last line.
        if from == 0 || bytes[..bytes.len() - 1].contains(&b'\n') {
            break (bytes, from);
        }
        chunk *= 4;
    };
    if bytes.last() == Some(&b'\n') {
        return Ok(());
    }
    let start = bytes.iter().rposition(|&b| b == b'\n').map(|i| i + 1).unwrap_or(0);
    let fragment = &bytes[start..];
    if serde_json::from_slice::<serde_json::Value>(fragment).is_ok() {
        // Complete record, only the newline was lost.
        file.write_all(b"\n")?;
    } else {
        let mut torn_name = path.as_os_str().to_owned();
        torn_name.push(".torn");
        let mut torn =
            OpenOptions::new().create(true).append(true).open(PathBuf::from(torn_name))?;
        torn.write_all(fragment)?;
        torn.write_all(b"\n")?;
        file.set_len(base + start as u64)?;
    }
    file.sync_data()
}

/// A line that could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct BadLine {
    /// 1-based line number.
    pub line: usize,
    pub error: String,
}

#[derive(Debug, Clone)]
pub struct JsonlRead<T> {
    pub records: Vec<T>,
    /// The last line, when it is incomplete (no newline and not valid JSON).
    pub torn_tail: Option<BadLine>,
    /// Complete lines that do not parse as a record.
    pub bad_lines: Vec<BadLine>,
}

/// Hand every readable record to `f`, one line at a time, without keeping
/// them; lines that do not parse (a torn tail, a bad line) are skipped, as
/// `read` sets them apart. A missing file has no records.
pub fn for_each<T: DeserializeOwned>(path: &Path, mut f: impl FnMut(T)) -> io::Result<()> {
    use std::io::BufRead;
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for line in io::BufReader::with_capacity(1 << 20, file).split(b'\n') {
        if let Ok(record) = serde_json::from_slice::<T>(&line?) {
            f(record);
        }
    }
    Ok(())
}

/// Read every record; a missing file reads as empty.
pub fn read<T: DeserializeOwned>(path: &Path) -> io::Result<JsonlRead<T>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    let ends_clean = bytes.last().is_none_or(|&b| b == b'\n');
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.split_terminator('\n').collect();
    let mut out = JsonlRead { records: Vec::new(), torn_tail: None, bad_lines: Vec::new() };
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<T>(line) {
            Ok(r) => out.records.push(r),
            Err(e) => {
                let bad = BadLine { line: i + 1, error: e.to_string() };
                if i + 1 == lines.len() && !ends_clean {
                    out.torn_tail = Some(bad);
                } else {
                    out.bad_lines.push(bad);
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct R {
        n: u32,
        s: String,
    }

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let mut w = JsonlWriter::open(&p).unwrap();
        for n in 0..3 {
            w.append(&R { n, s: format!("line\nwith newline {n}") }).unwrap();
        }
        drop(w);
        let r: JsonlRead<R> = read(&p).unwrap();
        assert_eq!(r.records.len(), 3);
        assert_eq!(r.records[2], R { n: 2, s: "line\nwith newline 2".into() });
        assert!(r.torn_tail.is_none() && r.bad_lines.is_empty());
        // reopening appends after the existing records
        let mut w = JsonlWriter::open(&p).unwrap();
        w.append(&R { n: 3, s: "x".into() }).unwrap();
        assert_eq!(read::<R>(&p).unwrap().records.len(), 4);
    }

    #[test]
    fn torn_last_line_is_reported_and_everything_before_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let mut w = JsonlWriter::open(&p).unwrap();
        w.append(&R { n: 1, s: "a".into() }).unwrap();
        w.append(&R { n: 2, s: "b".into() }).unwrap();
        drop(w);
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(br#"{"n":3,"s":"unfini"#).unwrap();
        drop(f);

        let r: JsonlRead<R> = read(&p).unwrap();
        assert_eq!(r.records.iter().map(|r| r.n).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(r.torn_tail.as_ref().map(|t| t.line), Some(3));
        assert!(r.bad_lines.is_empty());

        // The writer moves the fragment aside and continues on a clean line.
        let mut w = JsonlWriter::open(&p).unwrap();
        w.append(&R { n: 4, s: "d".into() }).unwrap();
        let r: JsonlRead<R> = read(&p).unwrap();
        assert_eq!(r.records.iter().map(|r| r.n).collect::<Vec<_>>(), vec![1, 2, 4]);
        assert!(r.torn_tail.is_none());
        let torn = std::fs::read_to_string(dir.path().join("t.jsonl.torn")).unwrap();
        assert!(torn.contains("unfini"));
    }

    #[test]
    fn a_torn_tail_after_more_than_the_read_window_is_cut_at_the_right_byte() {
        // 3,000 records (well over the 64 KiB read back from the end), then a
        // fragment; and a file whose only line is a fragment longer than the window.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let mut w = JsonlWriter::open(&p).unwrap();
        for n in 0..3000 {
            w.append(&R { n, s: "x".repeat(40) }).unwrap();
        }
        drop(w);
        let clean_len = std::fs::metadata(&p).unwrap().len();
        assert!(clean_len > 128 * 1024);
        OpenOptions::new()
            .append(true)
            .open(&p)
            .unwrap()
            .write_all(br#"{"n":3000,"s":"cut"#)
            .unwrap();
        let mut w = JsonlWriter::open(&p).unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().len(),
            clean_len,
            "cut exactly after the last whole line"
        );
        w.append(&R { n: 3001, s: "y".into() }).unwrap();
        let r: JsonlRead<R> = read(&p).unwrap();
        assert_eq!(r.records.len(), 3001);
        assert_eq!(r.records.last().unwrap().n, 3001);
        assert!(r.bad_lines.is_empty() && r.torn_tail.is_none());

        let q = dir.path().join("long.jsonl");
        let long = format!(r#"{{"n":1,"s":"{}"#, "z".repeat(300 * 1024));
        std::fs::write(&q, &long).unwrap();
        drop(JsonlWriter::open(&q).unwrap());
        assert_eq!(std::fs::metadata(&q).unwrap().len(), 0);
        assert_eq!(
            std::fs::read(dir.path().join("long.jsonl.torn")).unwrap().len(),
            long.len() + 1
        );
    }

    #[test]
    fn for_each_streams_the_readable_records() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        std::fs::write(&p, "{\"n\":1,\"s\":\"a\"}\ngarbage\n{\"n\":2,\"s\":\"b\"}\n{\"n\":3")
            .unwrap();
        let mut seen = Vec::new();
        for_each::<R>(&p, |r| seen.push(r.n)).unwrap();
        assert_eq!(seen, vec![1, 2]);
        for_each::<R>(&dir.path().join("none.jsonl"), |_| panic!("no records")).unwrap();
    }

    #[test]
    fn complete_record_missing_only_its_newline_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        std::fs::write(&p, "{\"n\":1,\"s\":\"a\"}\n{\"n\":2,\"s\":\"b\"}").unwrap();
        assert_eq!(read::<R>(&p).unwrap().records.len(), 2);
        let mut w = JsonlWriter::open(&p).unwrap();
        w.append(&R { n: 3, s: "c".into() }).unwrap();
        assert_eq!(read::<R>(&p).unwrap().records.len(), 3);
    }

    #[test]
    fn bad_middle_line_is_reported_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        std::fs::write(&p, "{\"n\":1,\"s\":\"a\"}\ngarbage\n{\"n\":2,\"s\":\"b\"}\n").unwrap();
        let r = read::<R>(&p).unwrap();
        assert_eq!(r.records.len(), 2);
        assert_eq!(r.bad_lines, vec![BadLine { line: 2, error: r.bad_lines[0].error.clone() }]);
    }
}
