//! One pure line parser per text format: bytes of one line in, a raw record (or a reason it is
//! malformed) out. No allocation, no panics, on any input (see the fuzz targets).

use cordillera_types::units::{FILETIME_TICKS_AT_UNIX_EPOCH, NS_PER_S, SECTOR_BYTES};
use cordillera_types::Op;

use crate::format::{Format, TimeUnit};

/// Per-format settings that the line itself does not carry.
#[derive(Clone, Copy, Debug)]
pub struct ParseOptions {
    /// Unit of ASCII5 timestamps.
    pub ascii5_time_unit: TimeUnit,
    /// Size of one ARC `.lis` block.
    pub arc_block_bytes: u64,
}

impl Default for ParseOptions {
    fn default() -> ParseOptions {
        ParseOptions {
            ascii5_time_unit: TimeUnit::default(),
            arc_block_bytes: SECTOR_BYTES,
        }
    }
}

/// One line's record, before the reader interns its volume and shifts its time to the trace start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawRecord<'a> {
    /// In the format's own epoch: Unix ns for wall-clock formats, the trace's zero otherwise.
    pub time_ns: i64,
    pub volume: &'a [u8],
    /// Joined to `volume` with `_` to name it (MSR `host_disk`).
    pub volume_suffix: Option<&'a [u8]>,
    pub op: Op,
    pub offset_bytes: u64,
    pub length_bytes: u64,
    pub response_ns: Option<u64>,
}

/// What one well-formed line means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line<'a> {
    Record(RawRecord<'a>),
    /// Blank lines, comments, headers, and events that are not reads or writes.
    Ignore,
    /// The line starts a trailer (blkparse's per-CPU summary): no records follow.
    End,
}

/// Why a line is malformed; the reader adds file, line number and text.
pub type Reason = &'static str;

/// Parses one line (without its newline; a trailing `\r` is allowed).
pub fn parse_line<'a>(
    format: Format,
    line: &'a [u8],
    options: &ParseOptions,
) -> Result<Line<'a>, Reason> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(|b| b.is_ascii_whitespace()) || line.first() == Some(&b'#') {
        return Ok(Line::Ignore);
    }
    match format {
        Format::Msr => parse_msr(line),
        Format::Spc => parse_spc(line),
        Format::Ascii5 => parse_ascii5(line, options.ascii5_time_unit),
        Format::CloudPhysics => parse_cloudphysics(line),
        Format::Tencent => parse_tencent(line),
        Format::Systor17 => parse_systor17(line),
        Format::Arc => parse_arc(line, options.arc_block_bytes),
        Format::Blkparse => parse_blkparse(line),
        Format::Binary | Format::OracleGeneral => Err("a binary trace has no text lines"),
    }
}

/// `128166481075232275,rsrch,1,Write,281358336,45056,94872`
fn parse_msr(line: &[u8]) -> Result<Line<'_>, Reason> {
    let [ts, host, disk, kind, offset, size, response] =
        split_exact::<7>(line, b',').ok_or("expected 7 comma-separated fields")?;
    let ticks = parse_u64(ts).ok_or("timestamp is not an integer")?;
    let unix_ticks = (ticks as i128) - FILETIME_TICKS_AT_UNIX_EPOCH as i128;
    let time_ns = i64::try_from(unix_ticks * 100).map_err(|_| "timestamp out of range")?;
    if host.is_empty() {
        return Err("empty hostname");
    }
    parse_u64(disk).ok_or("disk number is not an integer")?;
    let op = match kind {
        b"Read" => Op::Read,
        b"Write" => Op::Write,
        _ => return Err("type is neither Read nor Write"),
    };
    let response_ticks = parse_u64(response).ok_or("response time is not an integer")?;
    Ok(Line::Record(RawRecord {
        time_ns,
        volume: host,
        volume_suffix: Some(disk),
        op,
        offset_bytes: parse_u64(offset).ok_or("offset is not an integer")?,
        length_bytes: parse_u64(size).ok_or("size is not an integer")?,
        response_ns: Some(
            response_ticks
                .checked_mul(100)
                .ok_or("response time out of range")?,
        ),
    }))
}

/// `0,20941264,8192,W,0.551706[,…]`
fn parse_spc(line: &[u8]) -> Result<Line<'_>, Reason> {
    let mut fields = line.split(|b| *b == b',');
    let asu = fields.next().ok_or("expected at least 5 fields")?;
    let lba = fields.next().ok_or("expected at least 5 fields")?;
    let size = fields.next().ok_or("expected at least 5 fields")?;
    let opcode = fields.next().ok_or("expected at least 5 fields")?;
    let ts = fields.next().ok_or("expected at least 5 fields")?;
    let asu = trim(asu);
    parse_u64(asu).ok_or("ASU is not an integer")?;
    let op = match trim(opcode) {
        b"r" | b"R" => Op::Read,
        b"w" | b"W" => Op::Write,
        _ => return Err("opcode is neither r nor w"),
    };
    let time_ns = parse_decimal_ns(trim(ts), NS_PER_S).ok_or("timestamp is not a number")?;
    Ok(Line::Record(RawRecord {
        time_ns,
        volume: asu,
        volume_suffix: None,
        op,
        offset_bytes: sectors_to_bytes(parse_u64(trim(lba)).ok_or("LBA is not an integer")?)?,
        length_bytes: parse_u64(trim(size)).ok_or("size is not an integer")?,
        response_ns: None,
    }))
}

/// `0.221 5 162947904 16 1` — time, device, LBA, sectors, flags (bit 0 set = read).
fn parse_ascii5(line: &[u8], unit: TimeUnit) -> Result<Line<'_>, Reason> {
    let [ts, dev, lba, sectors, flags] =
        split_whitespace_exact::<5>(line).ok_or("expected 5 whitespace-separated fields")?;
    let time_ns = parse_decimal_ns(ts, unit.ns_per_unit()).ok_or("time is not a number")?;
    parse_u64(dev).ok_or("device is not an integer")?;
    let flags = parse_u64(flags).ok_or("type is not an integer")?;
    Ok(Line::Record(RawRecord {
        time_ns,
        volume: dev,
        volume_suffix: None,
        op: if flags & 1 == 1 { Op::Read } else { Op::Write },
        offset_bytes: sectors_to_bytes(parse_u64(lba).ok_or("LBA is not an integer")?)?,
        length_bytes: sectors_to_bytes(
            parse_u64(sectors).ok_or("sector count is not an integer")?,
        )?,
        response_ns: None,
    }))
}

/// `1,5633898,2a,512,42932745` after the header `version,time,op,size,lbn`.
fn parse_cloudphysics(line: &[u8]) -> Result<Line<'_>, Reason> {
    if line == b"version,time,op,size,lbn" {
        return Ok(Line::Ignore);
    }
    let [version, ts, opcode, size, lbn] =
        split_exact::<5>(line, b',').ok_or("expected 5 comma-separated fields")?;
    parse_u64(version).ok_or("version is not an integer")?;
    let time_ns = parse_decimal_ns(ts, NS_PER_S).ok_or("time is not a number")?;
    let opcode = parse_hex_u8(opcode).ok_or("op is not a hexadecimal SCSI opcode")?;
    let op = match opcode {
        // READ(6), READ(10), READ(12), READ(16)
        0x08 | 0x28 | 0xa8 | 0x88 => Op::Read,
        // WRITE(6), WRITE(10), WRITE(12), WRITE(16)
        0x0a | 0x2a | 0xaa | 0x8a => Op::Write,
        _ => return Ok(Line::Ignore),
    };
    Ok(Line::Record(RawRecord {
        time_ns,
        volume: b"0",
        volume_suffix: None,
        op,
        offset_bytes: sectors_to_bytes(parse_u64(lbn).ok_or("lbn is not an integer")?)?,
        length_bytes: parse_u64(size).ok_or("size is not an integer")?,
        response_ns: None,
    }))
}

/// `1538323200,4247200,128,1,1058` — seconds, sector offset, sectors, 0 read / 1 write, volume.
fn parse_tencent(line: &[u8]) -> Result<Line<'_>, Reason> {
    let [ts, offset, size, kind, volume] =
        split_exact::<5>(line, b',').ok_or("expected 5 comma-separated fields")?;
    let secs = parse_u64(ts).ok_or("timestamp is not an integer")?;
    let time_ns = i64::try_from(secs)
        .ok()
        .and_then(|s| s.checked_mul(NS_PER_S))
        .ok_or("timestamp out of range")?;
    let op = match kind {
        b"0" => Op::Read,
        b"1" => Op::Write,
        _ => return Err("IOType is neither 0 nor 1"),
    };
    parse_u64(volume).ok_or("volume id is not an integer")?;
    Ok(Line::Record(RawRecord {
        time_ns,
        volume,
        volume_suffix: None,
        op,
        offset_bytes: sectors_to_bytes(parse_u64(offset).ok_or("offset is not an integer")?)?,
        length_bytes: sectors_to_bytes(parse_u64(size).ok_or("size is not an integer")?)?,
        response_ns: None,
    }))
}

/// `1456095145.133076000,0.000806000,R,0,899056122368,131072` after the header.
fn parse_systor17(line: &[u8]) -> Result<Line<'_>, Reason> {
    if line == b"Timestamp,Response,IOType,LUN,Offset,Size" {
        return Ok(Line::Ignore);
    }
    let [ts, response, kind, lun, offset, size] =
        split_exact::<6>(line, b',').ok_or("expected 6 comma-separated fields")?;
    let time_ns = parse_decimal_ns(ts, NS_PER_S).ok_or("timestamp is not a number")?;
    let response_ns = parse_decimal_ns(response, NS_PER_S).ok_or("response is not a number")?;
    let op = match kind {
        b"R" | b"r" => Op::Read,
        b"W" | b"w" => Op::Write,
        _ => return Err("IOType is neither R nor W"),
    };
    parse_u64(lun).ok_or("LUN is not an integer")?;
    Ok(Line::Record(RawRecord {
        time_ns,
        volume: lun,
        volume_suffix: None,
        op,
        offset_bytes: parse_u64(offset).ok_or("offset is not an integer")?,
        length_bytes: parse_u64(size).ok_or("size is not an integer")?,
        response_ns: Some(u64::try_from(response_ns).map_err(|_| "negative response time")?),
    }))
}

/// `230027 8 0 0` — start block, block count, two ignored integers. No time, no direction: every
/// reference is a read (the cache simulator counts hits on reads).
fn parse_arc(line: &[u8], block_bytes: u64) -> Result<Line<'_>, Reason> {
    let [start, count, a, b] =
        split_whitespace_exact::<4>(line).ok_or("expected 4 whitespace-separated fields")?;
    let start = parse_u64(start).ok_or("start block is not an integer")?;
    let count = parse_u64(count).ok_or("block count is not an integer")?;
    parse_u64(a).ok_or("third field is not an integer")?;
    parse_u64(b).ok_or("fourth field is not an integer")?;
    Ok(Line::Record(RawRecord {
        time_ns: 0,
        volume: b"0",
        volume_suffix: None,
        op: Op::Read,
        offset_bytes: start
            .checked_mul(block_bytes)
            .ok_or("offset out of range")?,
        length_bytes: count.checked_mul(block_bytes).ok_or("size out of range")?,
        response_ns: None,
    }))
}

/// `  8,0    3        3     0.000011000   697  D  WS 3417048 + 8 [kjournald]`
fn parse_blkparse(line: &[u8]) -> Result<Line<'_>, Reason> {
    let mut fields = line
        .split(|b| *b == b' ' || *b == b'\t')
        .filter(|f| !f.is_empty());
    let dev = fields.next().ok_or("empty line")?;
    if dev == b"CPU" || dev.starts_with(b"CPU") || dev == b"Total" {
        return Ok(Line::End);
    }
    let comma = memchr::memchr(b',', dev).ok_or("device is not major,minor")?;
    parse_u64(&dev[..comma]).ok_or("device major is not an integer")?;
    parse_u64(&dev[comma + 1..]).ok_or("device minor is not an integer")?;
    let _cpu = parse_u64(fields.next().ok_or("missing cpu")?).ok_or("cpu is not an integer")?;
    let _seq =
        parse_u64(fields.next().ok_or("missing sequence")?).ok_or("sequence is not an integer")?;
    let time_ns = parse_decimal_ns(fields.next().ok_or("missing time")?, NS_PER_S)
        .ok_or("time is not a number")?;
    let _pid = parse_u64(fields.next().ok_or("missing pid")?).ok_or("pid is not an integer")?;
    let action = fields.next().ok_or("missing action")?;
    if action != b"D" {
        return Ok(Line::Ignore);
    }
    let rwbs = fields.next().ok_or("missing RWBS")?;
    let (Some(sector), Some(plus), Some(count)) = (fields.next(), fields.next(), fields.next())
    else {
        // A dispatch without a range (a flush).
        return Ok(Line::Ignore);
    };
    if plus != b"+" {
        return Ok(Line::Ignore);
    }
    let op = if rwbs.contains(&b'D') || rwbs.contains(&b'N') {
        return Ok(Line::Ignore);
    } else if rwbs.contains(&b'R') {
        Op::Read
    } else if rwbs.contains(&b'W') {
        Op::Write
    } else {
        return Ok(Line::Ignore);
    };
    Ok(Line::Record(RawRecord {
        time_ns,
        volume: dev,
        volume_suffix: None,
        op,
        offset_bytes: sectors_to_bytes(parse_u64(sector).ok_or("sector is not an integer")?)?,
        length_bytes: sectors_to_bytes(parse_u64(count).ok_or("sector count is not an integer")?)?,
        response_ns: None,
    }))
}

fn sectors_to_bytes(sectors: u64) -> Result<u64, Reason> {
    sectors
        .checked_mul(SECTOR_BYTES)
        .ok_or("sector number out of range")
}

fn trim(field: &[u8]) -> &[u8] {
    field.trim_ascii()
}

/// Exactly `N` fields separated by `sep`, or `None`.
fn split_exact<const N: usize>(line: &[u8], sep: u8) -> Option<[&[u8]; N]> {
    let mut out: [&[u8]; N] = [&[]; N];
    let mut rest = line;
    for (i, slot) in out.iter_mut().enumerate() {
        match memchr::memchr(sep, rest) {
            Some(at) if i + 1 < N => {
                *slot = &rest[..at];
                rest = &rest[at + 1..];
            }
            Some(_) => return None,
            None if i + 1 == N => *slot = rest,
            None => return None,
        }
    }
    Some(out)
}

/// Exactly `N` fields separated by runs of spaces or tabs, or `None`.
fn split_whitespace_exact<const N: usize>(line: &[u8]) -> Option<[&[u8]; N]> {
    let mut out: [&[u8]; N] = [&[]; N];
    let mut fields = line
        .split(|b| *b == b' ' || *b == b'\t')
        .filter(|f| !f.is_empty());
    for slot in out.iter_mut() {
        *slot = fields.next()?;
    }
    fields.next().is_none().then_some(out)
}

/// A non-empty run of ASCII digits that fits in a u64.
pub(crate) fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    let mut value: u64 = 0;
    for &b in digits {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(value)
}

fn parse_hex_u8(digits: &[u8]) -> Option<u8> {
    let text = std::str::from_utf8(digits).ok()?;
    if text.is_empty() || text.len() > 2 {
        return None;
    }
    u8::from_str_radix(text, 16).ok()
}

/// A decimal number (`-12.345`) of units of `ns_per_unit` ns, converted exactly (digits below
/// 1 ns are truncated). `None` for anything else or out of range.
pub(crate) fn parse_decimal_ns(text: &[u8], ns_per_unit: i64) -> Option<i64> {
    let (negative, text) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let (int_part, frac_part) = match memchr::memchr(b'.', text) {
        Some(dot) => (&text[..dot], &text[dot + 1..]),
        None => (text, &text[..0]),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let int_value = if int_part.is_empty() {
        0
    } else {
        parse_u64(int_part)?
    };
    let mut value = (int_value as i128).checked_mul(ns_per_unit as i128)?;
    if !frac_part.is_empty() {
        // Digits past the 18th are below 1 ns for every unit up to seconds: check, then drop them.
        if !frac_part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let kept = &frac_part[..frac_part.len().min(18)];
        let mut frac: i128 = 0;
        let mut pow10: i128 = 1;
        for &b in kept {
            frac = frac * 10 + (b - b'0') as i128;
            pow10 *= 10;
        }
        // frac / 10^k units = frac * ns_per_unit / 10^k ns.
        value += frac * ns_per_unit as i128 / pow10;
    }
    if negative {
        value = -value;
    }
    i64::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(format: Format, line: &str) -> RawRecord<'_> {
        match parse_line(format, line.as_bytes(), &ParseOptions::default()) {
            Ok(Line::Record(r)) => r,
            other => panic!("{line:?}: {other:?}"),
        }
    }

    fn invalid(format: Format, line: &str) -> Reason {
        parse_line(format, line.as_bytes(), &ParseOptions::default())
            .expect_err("line should be malformed")
    }

    #[test]
    fn msr_line() {
        let r = record(
            Format::Msr,
            "128166481075232275,rsrch,1,Write,281358336,45056,94872",
        );
        assert_eq!(r.volume, b"rsrch");
        assert_eq!(r.volume_suffix, Some(&b"1"[..]));
        assert_eq!(r.op, Op::Write);
        assert_eq!(r.offset_bytes, 281_358_336);
        assert_eq!(r.length_bytes, 45_056);
        assert_eq!(r.response_ns, Some(9_487_200));
        assert_eq!(
            r.time_ns,
            (128_166_481_075_232_275 - FILETIME_TICKS_AT_UNIX_EPOCH) * 100
        );
        assert_eq!(
            invalid(Format::Msr, "128166481075232275,rsrch,1,Wrote,1,2,3"),
            "type is neither Read nor Write"
        );
        invalid(Format::Msr, "128166481075232275,rsrch,1,Write,1,2");
        invalid(Format::Msr, "128166481075232275,rsrch,1,Write,1,2,3,4");
        invalid(Format::Msr, "x,rsrch,1,Write,1,2,3");
        invalid(Format::Msr, "1,rsrch,1,Write,-1,2,3");
        invalid(Format::Msr, "1,,1,Write,1,2,3");
        invalid(Format::Msr, "99999999999999999999999,h,1,Write,1,2,3");
    }

    #[test]
    fn spc_line() {
        let r = record(Format::Spc, "0,20941264,8192,W,0.551706");
        assert_eq!((r.volume, r.op), (&b"0"[..], Op::Write));
        assert_eq!(r.offset_bytes, 20_941_264 * 512);
        assert_eq!(r.length_bytes, 8192);
        assert_eq!(r.time_ns, 551_706_000);
        let r = record(Format::Spc, "2,1,512,r,10.5,extra,fields");
        assert_eq!(
            (r.volume, r.op, r.time_ns),
            (&b"2"[..], Op::Read, 10_500_000_000)
        );
        assert_eq!(
            invalid(Format::Spc, "0,1,512,x,1.0"),
            "opcode is neither r nor w"
        );
        invalid(Format::Spc, "0,1,512,r");
        invalid(Format::Spc, "0,1,512,r,1.2.3");
    }

    #[test]
    fn ascii5_line_in_every_unit() {
        let r = record(Format::Ascii5, "0.221 5 162947904 16 1");
        assert_eq!(r.time_ns, 221_000);
        assert_eq!(
            (r.volume, r.op, r.length_bytes),
            (&b"5"[..], Op::Read, 8192)
        );
        for (unit, ns) in [
            (TimeUnit::Ns, 938_513_000),
            (TimeUnit::Us, 938_513_000_000),
            (TimeUnit::S, 938_513_000_000_000_000),
        ] {
            let options = ParseOptions {
                ascii5_time_unit: unit,
                ..ParseOptions::default()
            };
            let Ok(Line::Record(r)) =
                parse_line(Format::Ascii5, b"938513000 4 264719034 16 0", &options)
            else {
                panic!()
            };
            assert_eq!((r.time_ns, r.op), (ns, Op::Write));
        }
        invalid(Format::Ascii5, "1 2 3 4");
        invalid(Format::Ascii5, "1 2 3 4 x");
        invalid(Format::Ascii5, "1 2 3 4 5 6");
    }

    #[test]
    fn cloudphysics_line() {
        assert_eq!(
            parse_line(
                Format::CloudPhysics,
                b"version,time,op,size,lbn",
                &Default::default()
            ),
            Ok(Line::Ignore)
        );
        let r = record(Format::CloudPhysics, "1,5633898,2a,512,42932745");
        assert_eq!(
            (r.op, r.length_bytes, r.offset_bytes),
            (Op::Write, 512, 42_932_745 * 512)
        );
        assert_eq!(r.time_ns, 5_633_898 * NS_PER_S);
        assert_eq!(record(Format::CloudPhysics, "1,1,28,4096,0").op, Op::Read);
        assert_eq!(
            parse_line(Format::CloudPhysics, b"1,1,35,0,0", &Default::default()),
            Ok(Line::Ignore),
            "SYNCHRONIZE CACHE is neither read nor write"
        );
        invalid(Format::CloudPhysics, "1,1,zz,4096,0");
        invalid(Format::CloudPhysics, "1,1,28,4096");
    }

    #[test]
    fn tencent_line() {
        let r = record(Format::Tencent, "1538323200,4247200,128,1,1058");
        assert_eq!((r.volume, r.op), (&b"1058"[..], Op::Write));
        assert_eq!((r.offset_bytes, r.length_bytes), (4_247_200 * 512, 65_536));
        assert_eq!(r.time_ns, 1_538_323_200 * NS_PER_S);
        assert_eq!(record(Format::Tencent, "1538323199,1,8,0,7").op, Op::Read);
        invalid(Format::Tencent, "1538323199,1,8,2,7");
        invalid(Format::Tencent, "1538323199,1,8,0");
    }

    #[test]
    fn systor17_line() {
        let r = record(
            Format::Systor17,
            "1456095145.133076000,0.000806000,R,0,899056122368,131072",
        );
        assert_eq!(r.time_ns, 1_456_095_145_133_076_000);
        assert_eq!(r.response_ns, Some(806_000));
        assert_eq!(
            (r.volume, r.op, r.length_bytes),
            (&b"0"[..], Op::Read, 131_072)
        );
        invalid(Format::Systor17, "1456095145.1,0.1,X,0,1,1");
        invalid(Format::Systor17, "1456095145.1,-0.1,R,0,1,1");
    }

    #[test]
    fn arc_line() {
        let r = record(Format::Arc, "1842745 64 0 1");
        assert_eq!(
            (r.offset_bytes, r.length_bytes, r.op),
            (1_842_745 * 512, 64 * 512, Op::Read)
        );
        invalid(Format::Arc, "1842745 64 0");
        invalid(Format::Arc, "1842745 64 0 x");
    }

    #[test]
    fn blkparse_lines() {
        let r = record(
            Format::Blkparse,
            "  8,0    3        3     0.000011000   697  D  WS 3417048 + 8 [kjournald]",
        );
        assert_eq!(
            (r.volume, r.op, r.time_ns),
            (&b"8,0"[..], Op::Write, 11_000)
        );
        assert_eq!((r.offset_bytes, r.length_bytes), (3_417_048 * 512, 4096));
        let r = record(
            Format::Blkparse,
            "259,0    1       10     1.500000000  1234  D   R 2048 + 256 [fio]",
        );
        assert_eq!(
            (r.op, r.length_bytes, r.time_ns),
            (Op::Read, 131_072, 1_500_000_000)
        );
        fn ignore(l: &str) -> Result<Line<'_>, Reason> {
            parse_line(Format::Blkparse, l.as_bytes(), &ParseOptions::default())
        }
        assert_eq!(
            ignore("  8,0    3        1     0.000000000   697  Q  WS 3417048 + 8 [kjournald]"),
            Ok(Line::Ignore)
        );
        assert_eq!(
            ignore("  8,0    3        9     0.000000000   697  D  FN [kjournald]"),
            Ok(Line::Ignore)
        );
        assert_eq!(
            ignore("  8,0    3        9     0.000000000   697  D  DS 8 + 8 [fstrim]"),
            Ok(Line::Ignore)
        );
        assert_eq!(ignore("CPU0 (8,0):"), Ok(Line::End));
        assert_eq!(ignore("Total (8,0):"), Ok(Line::End));
        invalid(Format::Blkparse, "  8.0 3 1 0.0 697 D WS 1 + 8 [x]");
        invalid(Format::Blkparse, "  8,0 3 1 zero 697 D WS 1 + 8 [x]");
    }

    #[test]
    fn decimals_are_exact() {
        assert_eq!(
            parse_decimal_ns(b"1456095145.133076000", NS_PER_S),
            Some(1_456_095_145_133_076_000)
        );
        assert_eq!(parse_decimal_ns(b".5", NS_PER_S), Some(500_000_000));
        assert_eq!(parse_decimal_ns(b"3.", 1_000), Some(3_000));
        assert_eq!(parse_decimal_ns(b"0.0000000019", NS_PER_S), Some(1));
        assert_eq!(parse_decimal_ns(b"-2.25", NS_PER_S), Some(-2_250_000_000));
        assert_eq!(parse_decimal_ns(b".", NS_PER_S), None);
        assert_eq!(parse_decimal_ns(b"", NS_PER_S), None);
        assert_eq!(parse_decimal_ns(b"1e5", NS_PER_S), None);
        assert_eq!(parse_decimal_ns(b"99999999999999999999", NS_PER_S), None);
    }
}
