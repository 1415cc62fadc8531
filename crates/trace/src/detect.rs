//! Which text format a trace is in, judged from its first lines.

use crate::format::Format;
use crate::parse::{parse_line, Line, ParseOptions};

/// Lines of a sample that detection looks at.
const DETECT_LINES_MAX: usize = 64;

/// The text format of a trace, judged from its first bytes (already decompressed): the format
/// under which the most sampled lines are records, provided malformed lines are fewer than a
/// tenth of them (so one bad line does not hide the format); ties go to the earlier format in
/// a fixed order. `at_eof` says whether `sample` is the whole input (so its last line is
/// complete even without a newline).
pub fn detect_text(sample: &[u8], at_eof: bool) -> Option<Format> {
    const ORDER: [Format; 8] = [
        Format::CloudPhysics,
        Format::Systor17,
        Format::Msr,
        Format::Spc,
        Format::Tencent,
        Format::Blkparse,
        Format::Ascii5,
        Format::Arc,
    ];
    let complete = if at_eof {
        sample
    } else {
        match memchr::memrchr(b'\n', sample) {
            Some(end) => &sample[..end],
            None => return None,
        }
    };
    let lines: Vec<&[u8]> = complete
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(|b| b.is_ascii_whitespace()))
        .take(DETECT_LINES_MAX)
        .collect();
    let options = ParseOptions::default();
    let mut best: Option<(Format, usize)> = None;
    for format in ORDER {
        let (mut records, mut malformed) = (0, 0);
        for line in &lines {
            match parse_line(format, line, &options) {
                Ok(Line::Record(_)) => records += 1,
                Ok(Line::Ignore) => {}
                Ok(Line::End) => break,
                Err(_) => malformed += 1,
            }
        }
        let plausible = records > 0 && malformed * 10 <= records;
        if plausible && best.is_none_or(|(_, most)| records > most) {
            best = Some((format, records));
        }
    }
    best.map(|(format, _)| format)
}
