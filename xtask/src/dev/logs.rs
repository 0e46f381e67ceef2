//! The terminal gets a short, prefixed stream of each process's log; the full logs stay in
//! `<state dir>/<name>.log`.

use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Longest line shown on the terminal; the log file has the rest.
const MAX_LINE: usize = 200;

/// Follow `path` from its current end, printing each new line as `[name] line`.
pub fn follow(name: &'static str, path: PathBuf, stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let mut offset = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        while !stop.load(Ordering::Relaxed) {
            if let Ok(mut file) = std::fs::File::open(&path)
                && file.seek(SeekFrom::Start(offset)).is_ok()
            {
                let mut reader = BufReader::new(file);
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 0 {
                    if !line.ends_with('\n') {
                        break; // partial line: read it whole next time
                    }
                    offset += line.len() as u64;
                    let text = line.trim_end();
                    let shown: String = text.chars().take(MAX_LINE).collect();
                    let more = if shown.len() < text.len() { " …" } else { "" };
                    eprintln!("[{name}] {shown}{more}");
                    line.clear();
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
}
