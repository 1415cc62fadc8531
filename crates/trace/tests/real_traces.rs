//! Every file of `../shared/traces/` parses with no malformed line, and its record count, read
//! fraction and span match `INVENTORY.md`.

mod common;

use cordillera_trace::detect::UnitSource;
use cordillera_trace::read::{open, read_all};
use cordillera_trace::{Format, ReadOptions, TimeUnit};
use cordillera_types::Op;

struct Expected {
    path: &'static str,
    format: Format,
    time_unit: Option<TimeUnit>,
    records: u64,
    /// Read percentage as INVENTORY prints it, and the rounding of that figure.
    read_pct: f64,
    read_pct_rounding: f64,
    /// Span as INVENTORY prints it, in seconds, and the tolerance of that figure.
    span_s: f64,
    span_tolerance_s: f64,
}

const H: f64 = 3600.0;

fn inventory() -> Vec<Expected> {
    use Format::*;
    let e = |path,
             format,
             time_unit,
             records,
             read_pct,
             read_pct_rounding,
             span_s,
             span_tolerance_s| Expected {
        path,
        format,
        time_unit,
        records,
        read_pct,
        read_pct_rounding,
        span_s,
        span_tolerance_s,
    };
    // path, format, time unit, records, read %, its rounding, span (s), its tolerance (s)
    #[rustfmt::skip]
    let rows = vec![
        e("msr/rsrch_1.full.csv", Msr, None, 13_780, 0.3, 0.05, 160.0 * H, 0.5 * H),
        e("msr/wdev_1.full.csv", Msr, None, 1_055, 0.0, 0.5, 165.0 * H, 0.5 * H),
        e("msr/hm_1.writes_subset.csv", Msr, None, 13_069, 0.0, 0.5, 90.0 * H, 0.5 * H),
        e("msr/hm_0.chunk_1000_caffeine.csv", Msr, None, 1_000, 51.0, 0.5, 127.0, 0.5),
        e("msr/hm_0.chunk_148s.csv", Msr, None, 7_016, 83.0, 0.5, 148.0, 0.5),
        e("msr/wdev_3.partial.csv", Msr, None, 200, 0.5, 0.05, 48.0 * H, 0.5 * H),
        e("msr_production/msnfs_slice.ms.trace", Ascii5, Some(TimeUnit::Ms), 149_999, 87.0, 0.5, 143.0, 0.5),
        e("umass/umass_websearch_small.mqsim.trace", Ascii5, Some(TimeUnit::Ns), 24_783, 100.0, 0.5, 60.0, 0.5),
        e("umass/tpcc_small.mqsim.trace", Ascii5, Some(TimeUnit::Ns), 6_999, 63.0, 0.5, 0.14, 0.005),
        e("cloudphysics/cloudphysics_vscsi_sample.csv", CloudPhysics, None, 113_872, 41.0, 0.5, 2.0 * H, 0.5 * H),
        e("tencent/tencent_cbs_sample.csv.bz2", Tencent, None, 50_000, 49.0, 0.5, 2.0, 1.0),
        e("systor17/systor17_vdi_sample1.csv.gz", Systor17, None, 999, 83.0, 0.5, 1.5, 1.0),
        e("systor17/systor17_vdi_sample2.csv.gz", Systor17, None, 999, 70.0, 0.5, 1.5, 1.0),
    ];
    rows
}

#[test]
fn every_inventory_file_parses_with_its_listed_counts() {
    let Some(dir) = common::traces_dir("every_inventory_file_parses_with_its_listed_counts") else {
        return;
    };
    for e in inventory() {
        let path = dir.join(e.path);
        let options = ReadOptions::default();
        let mut reader = open(&path, &options).unwrap_or_else(|err| panic!("{err}"));
        // The inventory's time unit, judged from the content: MQSim's integer nanoseconds are
        // detected; DiskSim's fractional milliseconds are assumed (seconds fit them too), and
        // say so.
        let choice = reader.summary().time_unit.clone();
        match (e.time_unit, choice) {
            (None, None) => {}
            (Some(unit), Some(c)) => {
                assert_eq!(c.unit, unit, "{}: {}", e.path, c.reason);
                let expected = if unit == TimeUnit::Ns {
                    UnitSource::Detected
                } else {
                    UnitSource::Assumed
                };
                assert_eq!(c.how, expected, "{}: {}", e.path, c.reason);
            }
            (want, got) => panic!("{}: unit {want:?}, chosen {got:?}", e.path),
        }
        assert_eq!(
            reader.info().format,
            e.format,
            "{}: detected format",
            e.path
        );
        let records = read_all(reader.as_mut()).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(reader.summary().invalid_skipped, 0);
        assert_eq!(records.len() as u64, e.records, "{}: records", e.path);
        let reads = records.iter().filter(|r| r.op == Op::Read).count();
        let read_pct = 100.0 * reads as f64 / records.len() as f64;
        assert!(
            (read_pct - e.read_pct).abs() <= e.read_pct_rounding,
            "{}: read {read_pct:.3} %, inventory {} %",
            e.path,
            e.read_pct
        );
        let min = records.iter().map(|r| r.time_ns).min().unwrap();
        let max = records.iter().map(|r| r.time_ns).max().unwrap();
        let span_s = (max - min) as f64 / 1e9;
        assert!(
            (span_s - e.span_s).abs() <= e.span_tolerance_s,
            "{}: span {span_s} s, inventory {} s",
            e.path,
            e.span_s
        );
    }
}

#[test]
fn msr_write_only_samples_parse() {
    let Some(dir) = common::traces_dir("msr_write_only_samples_parse") else {
        return;
    };
    for name in ["mds_0", "proj_0", "rsrch_2"] {
        let path = dir.join(format!("msr/samples_writeonly/{name}.w1000.csv"));
        let mut reader = open(&path, &ReadOptions::default()).unwrap();
        let records = read_all(reader.as_mut()).unwrap();
        assert_eq!(records.len(), 1000, "{name}");
        assert_eq!(reader.volumes().len(), 1);
        assert_eq!(reader.volumes().names().next().unwrap().1, name);
        let reads = records.iter().filter(|r| r.op == Op::Read).count();
        assert!(reads <= 10, "{name}: {reads} reads in a write-only sample");
    }
}

#[test]
fn arc_traces_parse() {
    let Some(dir) = common::traces_dir("arc_traces_parse") else {
        return;
    };
    for name in ["OLTP", "P2", "P3", "P6", "P12"] {
        let path = dir.join(format!("arc/{name}.lis.zst"));
        let mut reader = open(&path, &ReadOptions::default()).unwrap();
        assert_eq!(reader.info().format, Format::Arc);
        assert!(!reader.info().has_time);
        let mut count = 0u64;
        while let Some(r) = reader.next_record().unwrap() {
            assert_eq!(r.time_ns, 0);
            assert_eq!(r.op, Op::Read, "ARC references are reads");
            assert_eq!(r.length_bytes % 512, 0);
            count += 1;
        }
        assert_eq!(reader.summary().invalid_skipped, 0);
        // INVENTORY: 0.24–0.91 M each, to two decimals.
        assert!(
            (235_000..915_000).contains(&count),
            "{name}: {count} records"
        );
    }
}

#[test]
fn msr_first_record_matches_the_inventory_check() {
    let Some(dir) = common::traces_dir("msr_first_record_matches_the_inventory_check") else {
        return;
    };
    let mut reader = open(&dir.join("msr/rsrch_1.full.csv"), &ReadOptions::default()).unwrap();
    let first = reader.next_record().unwrap().unwrap();
    assert_eq!(first.time_ns, 0);
    assert_eq!(
        (first.op, first.offset_bytes, first.length_bytes),
        (Op::Write, 281_358_336, 45_056)
    );
    let origin = reader.info().origin_unix_ns.unwrap();
    assert_eq!(
        cordillera_types::units::format_unix_ns(origin),
        "2007-02-22 20:01:47"
    );
}

#[test]
fn volume_selection_keeps_only_the_named_volumes() {
    let Some(dir) = common::traces_dir("volume_selection_keeps_only_the_named_volumes") else {
        return;
    };
    let path = dir.join("tencent/tencent_cbs_sample.csv.bz2");
    let mut all = open(&path, &ReadOptions::default()).unwrap();
    let records = read_all(all.as_mut()).unwrap();
    assert_eq!(all.volumes().len(), 2_038, "INVENTORY: 2,038 volumes");
    let id = all.volumes().lookup("1063").unwrap();
    let want = records.iter().filter(|r| r.volume == id).count() as u64;
    let options = ReadOptions {
        volumes: vec!["1063".into()],
        ..ReadOptions::default()
    };
    let mut one = open(&path, &options).unwrap();
    let kept = read_all(one.as_mut()).unwrap();
    assert!(want > 0);
    assert_eq!(kept.len() as u64, want);
    assert!(kept.iter().all(|r| one.volumes().name(r.volume) == "1063"));
    assert_eq!(one.summary().filtered_out, 50_000 - want);
}
