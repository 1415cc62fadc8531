//! Table 1 (§3.3) on generated layouts: for N = 15, 30 and 300 servers with r = 3, how many
//! servers each layout can turn off in every gear and over how many servers a failed server's
//! contents can be rebuilt.
//!
//! Units are chunks, as many as a 1 TB disk per server holds in 64 MB chunks (16,384 per server,
//! r copies each). The paper's naive-random "r − g" is what remains when every r − g + 1 servers
//! share some chunk, which such a count of chunks ensures for N = 15 and 30 (the exact search
//! confirms it); at N = 300 the C(300, 3) = 4.5 M triples outnumber the 1.6 M chunks, so a few
//! more servers can be off (the greedy search finds how many), still a tiny fraction of the
//! N(r − g)/r that grouping allows.

use cordillera_gears::layout::{Layout, LayoutKind, LayoutSpec, RackPolicy};
use cordillera_gears::model::Topology;
use cordillera_types::rng::SplitMix64;

const R: usize = 3;
const CHUNKS_PER_SERVER: usize = 16_384;

fn layout(kind: LayoutKind, racks: RackPolicy, servers: u32, seed: u64) -> Layout {
    let topology = Topology::racks(3, servers / 3);
    let units = servers as usize * CHUNKS_PER_SERVER / R;
    let spec = LayoutSpec {
        kind,
        racks,
        replicas: R,
    };
    Layout::generate(spec, &topology, units, &mut SplitMix64(seed)).expect("a layout")
}

#[test]
fn table_1_holds_on_generated_layouts() {
    println!("layout                 N   off in gear 0/1/2/3 (plan | exact)        rebuild  paper: off in gear g, rebuild");
    for servers in [15u32, 30, 300] {
        let n = servers as usize;
        for kind in LayoutKind::ALL {
            let report = layout(kind, RackPolicy::Ignored, servers, 7).report();
            let paper_off: Vec<usize> = (0..=R)
                .map(|g| match kind {
                    LayoutKind::NaiveRandom => R - g,
                    _ => n * (R - g) / R,
                })
                .collect();
            let paper_rebuild = match kind {
                LayoutKind::NaiveRandom => format!("N = {n}"),
                LayoutKind::NaiveGrouping => "1".into(),
                LayoutKind::PowerAware => format!("N/r = {}", n / R),
            };
            println!(
                "{:<22} {n:>3}   {:?} | {:?}   {:>4}     {:?}, {paper_rebuild}",
                kind.name(),
                report.off_in_gear,
                report.max_off_in_gear,
                report.rebuild_parallelism,
                paper_off,
            );
            match kind {
                LayoutKind::NaiveRandom => {
                    // Every server can go only in gear 0; no server in gear r.
                    assert_eq!(report.off_in_gear[0], n);
                    assert_eq!(report.off_in_gear[R], 0);
                    // Table 1's r − g is for gears 1 to r (in gear 0 everything can be off).
                    if n <= 64 {
                        for (g, &expected) in paper_off.iter().enumerate().skip(1) {
                            assert_eq!(report.max_off_in_gear[g], Some(expected), "gear {g}");
                            assert_eq!(report.off_in_gear[g], expected, "gear {g}");
                        }
                    } else {
                        // More than r − g, far below grouping's N(r − g)/r.
                        for g in 1..R {
                            assert!(report.off_in_gear[g] >= R - g);
                            assert!(report.off_in_gear[g] * 20 < n * (R - g) / R, "gear {g}");
                        }
                    }
                    // Any other server can take a failed server's chunks: N − 1.
                    assert_eq!(report.rebuild_parallelism, n - 1);
                }
                LayoutKind::NaiveGrouping | LayoutKind::PowerAware => {
                    assert_eq!(report.off_in_gear, paper_off);
                    if n <= 64 {
                        let exact: Vec<Option<usize>> =
                            paper_off.iter().map(|&o| Some(o)).collect();
                        assert_eq!(report.max_off_in_gear, exact);
                    }
                    let rebuild = if kind == LayoutKind::NaiveGrouping {
                        1
                    } else {
                        n / R - 1
                    };
                    assert_eq!(report.rebuild_parallelism, rebuild);
                }
            }
        }
    }
}

/// With replicas on distinct racks (3 racks), both forms of power-aware grouping keep Table 1's
/// counts; rack-aligned turns off whole racks, rotated an equal share of every rack.
#[test]
fn rack_aligned_and_rotated_turn_off_the_same_count_in_different_places() {
    for servers in [15u32, 30] {
        let n = servers as usize;
        for racks in [RackPolicy::Aligned, RackPolicy::Rotated] {
            let layout = layout(LayoutKind::PowerAware, racks, servers, 11);
            for i in 0..layout.unit_count() {
                let mut unit_racks: Vec<u32> = layout
                    .unit(i)
                    .iter()
                    .map(|&s| layout.topology.rack_of(s))
                    .collect();
                unit_racks.sort_unstable();
                unit_racks.dedup();
                assert_eq!(unit_racks.len(), R, "replicas on distinct racks");
            }
            let report = layout.report();
            assert_eq!(report.off_in_gear, vec![n, 2 * n / 3, n / 3, 0]);
            // A new replica must stay in the gear group and off the racks of the unit's other
            // replicas: with r = 3 racks, that is the failed server's own rack. Rack-aligned
            // groups are whole racks (N/r − 1 peers); rotated ones have only the servers of the
            // gear group that share the failed server's rack.
            let rebuild = match racks {
                RackPolicy::Aligned => n / R - 1,
                _ => (0..servers)
                    .map(|s| {
                        (0..servers)
                            .filter(|&t| {
                                t != s
                                    && layout.gear_group(t) == layout.gear_group(s)
                                    && layout.topology.rack_of(t) == layout.topology.rack_of(s)
                            })
                            .count()
                    })
                    .min()
                    .unwrap(),
            };
            println!(
                "{racks:?} N = {n}: rebuild parallelism {}",
                report.rebuild_parallelism
            );
            assert_eq!(report.rebuild_parallelism, rebuild);
            let off = layout.off_plan(1, &[0, 1, 2]);
            let mut racks_off: Vec<usize> = vec![0; 3];
            for s in off {
                racks_off[layout.topology.rack_of(s) as usize] += 1;
            }
            match racks {
                RackPolicy::Aligned => assert_eq!(racks_off, vec![n / 3, n / 3, 0]),
                _ => assert!(racks_off.iter().all(|&c| c > 0), "{racks_off:?}"),
            }
        }
    }
}

/// A layout that cannot be built is a typed error, not a panic.
#[test]
fn impossible_layouts_are_refused() {
    let spec = |kind, racks| LayoutSpec {
        kind,
        racks,
        replicas: R,
    };
    let mut rng = SplitMix64(1);
    let two_racks = Topology::racks(2, 3);
    assert!(Layout::generate(
        spec(LayoutKind::PowerAware, RackPolicy::Aligned),
        &two_racks,
        10,
        &mut rng
    )
    .is_err());
    let uneven = Topology::racks(1, 7);
    assert!(Layout::generate(
        spec(LayoutKind::PowerAware, RackPolicy::Ignored),
        &uneven,
        10,
        &mut rng
    )
    .is_err());
    assert!(Layout::generate(
        spec(LayoutKind::NaiveGrouping, RackPolicy::Ignored),
        &uneven,
        10,
        &mut rng
    )
    .is_err());
    let tiny = Topology::racks(1, 2);
    assert!(Layout::generate(
        spec(LayoutKind::NaiveRandom, RackPolicy::Ignored),
        &tiny,
        10,
        &mut rng
    )
    .is_err());
    let zero = LayoutSpec {
        kind: LayoutKind::NaiveRandom,
        racks: RackPolicy::Ignored,
        replicas: 0,
    };
    assert!(Layout::generate(zero, &uneven, 10, &mut rng).is_err());
}
