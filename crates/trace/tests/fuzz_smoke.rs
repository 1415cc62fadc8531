//! A deterministic smoke run of every decoder on mutated input, in every test run: no panics,
//! only typed errors. The coverage-guided targets in `fuzz/` run the same entry points longer.

use std::io::Cursor;
use std::path::Path;

use cordillera_trace::parse::{parse_line, ParseOptions};
use cordillera_trace::read::{from_read, read_all};
use cordillera_trace::Format;
use cordillera_trace::ReadOptions;

/// Seeded, so failures reproduce from the iteration number.
struct Rng(cordillera_types::SplitMix64);
impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn below(&mut self, n: usize) -> usize {
        self.0.below(n.max(1) as u64) as usize
    }
}

const SEEDS: &[&str] = &[
    "128166481075232275,rsrch,1,Write,281358336,45056,94872",
    "0,20941264,8192,W,0.551706,extra",
    "0.221 5 162947904 16 1",
    "version,time,op,size,lbn",
    "1,5633898,2a,512,42932745",
    "1538323200,4247200,128,1,1058",
    "1456095145.133076000,0.000806000,R,0,899056122368,131072",
    "1842745 64 0 1",
    "  8,0    3        3     0.000011000   697  D  WS 3417048 + 8 [kjournald]",
    "CPU0 (8,0):",
];

const ALPHABET: &[u8] = b"0123456789,.- \t\r\nRWrwDQ+[]abcdefx\x00\xff";

fn mutate(rng: &mut Rng, line: &[u8]) -> Vec<u8> {
    let mut out = line.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(6) {
            0 if !out.is_empty() => {
                let at = rng.below(out.len());
                out[at] = ALPHABET[rng.below(ALPHABET.len())];
            }
            1 => {
                let at = rng.below(out.len() + 1);
                out.insert(at, ALPHABET[rng.below(ALPHABET.len())]);
            }
            2 if !out.is_empty() => {
                let at = rng.below(out.len());
                out.remove(at);
            }
            3 => out.truncate(rng.below(out.len() + 1)),
            4 => {
                let at = rng.below(out.len() + 1);
                let digits = "9".repeat(1 + rng.below(40));
                out.splice(at..at, digits.bytes());
            }
            _ => out = (0..rng.below(80)).map(|_| rng.next_u64() as u8).collect(),
        }
    }
    out
}

#[test]
fn line_parsers_never_panic() {
    let options = ParseOptions::default();
    let mut rng = Rng(cordillera_types::SplitMix64(0xC0DE));
    let mut outcomes = [0u64; 2];
    for i in 0..40_000 {
        let seed = SEEDS[i % SEEDS.len()].as_bytes();
        let line = mutate(&mut rng, seed);
        for format in Format::ALL {
            let ok = parse_line(format, &line, &options).is_ok();
            outcomes[ok as usize] += 1;
        }
    }
    // Both outcomes occur: the mutations reach past the first check.
    assert!(outcomes[0] > 1_000 && outcomes[1] > 1_000, "{outcomes:?}");
}

#[test]
fn readers_never_panic_on_mutated_files() {
    let mut rng = Rng(cordillera_types::SplitMix64(0xF11E));
    for i in 0..2_000 {
        let mut text = Vec::new();
        for _ in 0..1 + rng.below(8) {
            let seed = SEEDS[rng.below(SEEDS.len())].as_bytes();
            text.extend(if rng.below(3) == 0 {
                mutate(&mut rng, seed)
            } else {
                seed.to_vec()
            });
            text.push(b'\n');
        }
        let options = ReadOptions {
            format: if i % 2 == 0 {
                None
            } else {
                Some(Format::ALL[rng.below(8)])
            },
            skip_invalid: i % 3 == 0,
            ..ReadOptions::default()
        };
        if let Ok(mut reader) = from_read(Path::new("fuzz"), Box::new(Cursor::new(text)), &options)
        {
            let _ = read_all(reader.as_mut());
        }
    }
}

#[test]
fn binary_reader_never_panics_on_mutated_files() {
    use cordillera_trace::binary::BinaryWriter;
    use cordillera_trace::synth::{generate, SynthOptions};
    let (info, volumes, records) = generate(&SynthOptions {
        duration_s: 600,
        ..SynthOptions::default()
    });
    let mut writer = BinaryWriter::new(Vec::new(), Path::new("mem")).unwrap();
    for r in &records {
        writer.write(r, &volumes, &info).unwrap();
    }
    let good = writer.finish(&info).unwrap();
    let mut rng = Rng(cordillera_types::SplitMix64(0xB1B1));
    for _ in 0..3_000 {
        let mut bad = good.clone();
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(bad.len());
            match rng.below(3) {
                0 => bad[at] = rng.next_u64() as u8,
                1 => bad.truncate(at),
                _ => bad.insert(at, rng.next_u64() as u8),
            }
        }
        let options = ReadOptions {
            format: Some(Format::Binary),
            ..ReadOptions::default()
        };
        if let Ok(mut reader) = from_read(Path::new("fuzz"), Box::new(Cursor::new(bad)), &options) {
            let _ = read_all(reader.as_mut());
        }
    }
}

#[test]
fn oracle_general_reader_never_panics_on_mutated_files() {
    let mut rng = Rng(cordillera_types::SplitMix64(0x0AC1));
    let mut good = Vec::new();
    for i in 0..200u64 {
        good.extend_from_slice(&(i as u32 / 10).to_le_bytes());
        good.extend_from_slice(&(i % 17).to_le_bytes());
        good.extend_from_slice(&4096u32.to_le_bytes());
        good.extend_from_slice(&(-1i64).to_le_bytes());
    }
    let (mut ok, mut failed) = (0, 0);
    for _ in 0..3_000 {
        let mut bad = good.clone();
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(bad.len());
            match rng.below(3) {
                0 => bad[at] = rng.next_u64() as u8,
                1 => bad.truncate(at),
                _ => bad.insert(at, rng.next_u64() as u8),
            }
        }
        let options = ReadOptions {
            format: Some(Format::OracleGeneral),
            ..ReadOptions::default()
        };
        let mut reader =
            from_read(Path::new("fuzz"), Box::new(Cursor::new(bad)), &options).unwrap();
        match read_all(reader.as_mut()) {
            Ok(_) => ok += 1,
            Err(_) => failed += 1,
        }
    }
    // Both outcomes occur: mutations that keep 24-byte framing and plausible fields read, the
    // rest are refused.
    assert!(ok > 100 && failed > 100, "{ok} read, {failed} refused");
}
