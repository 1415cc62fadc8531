//! Every preset meets its published figures within ±15 %, and docs/SIMULATION.md shows the
//! table the command generates now.

use cordillera_models::calibration::{markdown, table, DOC_BEGIN, DOC_END, TOLERANCE};

#[test]
fn every_calibration_target_within_tolerance_and_documented() {
    let rows = table();
    assert!(rows.len() >= 14);
    for row in &rows {
        assert!(
            (row.measured - row.published).abs() <= TOLERANCE * row.published,
            "{} {}: measured {:.3}, published {} ({:+.1} %)",
            row.device,
            row.metric,
            row.measured,
            row.published,
            row.error_pct
        );
    }
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/SIMULATION.md"
    ))
    .unwrap();
    let begin = doc.find(DOC_BEGIN).expect("table start marker") + DOC_BEGIN.len();
    let end = doc.find(DOC_END).expect("table end marker");
    assert_eq!(
        doc[begin..end].trim(),
        markdown(&rows).trim(),
        "docs/SIMULATION.md is stale: regenerate with `cordillera sim calibrate --markdown`"
    );
}
