//! Shared driver of the fuzz targets.

use std::io::Cursor;
use std::path::Path;

use cordillera_trace::parse::{parse_line, ParseOptions};
use cordillera_trace::read::from_read;
use cordillera_trace::{Format, ReadOptions};

/// Parses every line of `data` alone, then reads `data` as a whole file twice (stopping at the
/// first error, and skipping invalid lines).
pub fn read_all(format: Format, data: &[u8]) {
    if format != Format::Binary {
        for line in data.split(|b| *b == b'\n') {
            let _ = parse_line(format, line, &ParseOptions::default());
        }
    }
    for skip_invalid in [false, true] {
        let options = ReadOptions { format: Some(format), skip_invalid, ..ReadOptions::default() };
        if let Ok(mut reader) = from_read(Path::new("fuzz"), Box::new(Cursor::new(data.to_vec())), &options) {
            while let Ok(Some(_)) = reader.next_record() {}
        }
    }
}
