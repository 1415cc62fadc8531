//! The text of `lab sierra`'s microbenchmarks (§4.6): Table 5, what holds its streaming reads
//! (`--table5-causes`), and Figure 12's rebuild rates.

use std::fmt::Write as _;

use crate::sierra::micro::MicroReport;

/// Table 5's streaming reads changed one respect at a time (`--table5-causes`).
fn causes_table(out: &mut String, m: &MicroReport) {
    if m.causes.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nTable 5 streaming reads, one change at a time (paper: 348 MB/s, 37 – 41 per client; the preset: 256 KiB read ahead on a miss, whole messages forwarded, 1 read outstanding)"
    );
    let _ = writeln!(
        out,
        "    variant                              MB/s    per client       mean ms   median ms   disks busy"
    );
    for c in &m.causes {
        let _ = writeln!(
            out,
            "    {:<34} {:>6.0}    {:>5.1} – {:<5.1}    {:>7.2}   {:>9.2}   {:>9.0} %",
            c.variant,
            c.aggregate,
            c.per_client_min,
            c.per_client_max,
            c.mean_ms,
            c.median_ms,
            100.0 * c.disk_busy
        );
    }
}

pub(super) fn micro_table(out: &mut String, m: &MicroReport) {
    let _ = writeln!(
        out,
        "\nTable 5: 9 clients on 9 chunk servers, 64 KB requests, {} s each (in brackets the ideal: 9 × one server for reads, a third of that for writes){}{}",
        m.measure_s,
        m.table5_setup
            .read_ahead_bytes
            .map_or(String::new(), |b| format!("; read-ahead {} KiB, not the preset's", b >> 10)),
        if m.table5_setup.read_ahead_async {
            "; read ahead asynchronously, not only on a miss"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "    workload            ours (ideal)          per client      paper (ideal)     failed   timeouts"
    );
    for row in &m.table5 {
        let _ = writeln!(
            out,
            "    {:<18} {:>7.0} ({:>5.0}) {:<5}  {:>6.1} – {:<6.1}   {:>5.0} ({:>5.0})      {:<8} {}",
            row.workload,
            row.aggregate,
            row.ideal,
            row.unit,
            row.per_client_min,
            row.per_client_max,
            row.paper,
            row.paper_ideal,
            row.failed,
            row.client_timeouts
        );
    }
    causes_table(out, m);
    let _ = writeln!(
        out,
        "\nFigure 12: rebuild of a failed server's {:.1} GB onto its gear-group peers (paper: about 200 GB; linear in the servers written to, 64 MB chunks substantially faster)",
        m.data_per_server_bytes as f64 / 1e9
    );
    let _ = writeln!(
        out,
        "    chunk   servers   written to   rebuilt GB   seconds    MB/s"
    );
    for p in &m.figure12 {
        let _ = writeln!(
            out,
            "    {:>3} MB   {:>7}   {:>10}   {:>10.2}   {:>7.1}   {:>5.1}",
            p.chunk_bytes >> 20,
            p.servers,
            p.write_servers,
            p.rebuilt_bytes as f64 / 1e9,
            p.seconds,
            p.mb_per_s
        );
    }
}
