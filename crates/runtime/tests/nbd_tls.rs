//! NBD over TLS against unmodified clients (nbdinfo, nbdcopy, qemu-io) and our own client:
//! pre-shared keys in psktool's format and X.509 certificates; with `--tls require`, a client
//! without the key learns no export name and reaches no data. Tests that need a client
//! program say SKIPPED when it is absent (`scripts/test.sh` installs them).

mod common {
    pub mod certs;
}

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use cordillera_runtime::nbd_server::{serve_in_background, Backend, ExportConfig, FileBackend};
use cordillera_runtime::tls::{nbd_tls, TlsClient};
use cordillera_testkit::process::{have, Bounded, COMMAND_LIMIT};
use cordillera_wire::nbd;
use cordillera_wire::nbd::haggle::TlsPolicy;

const EXPORT_BYTES: u64 = 16 << 20;
const KEY_HEX: &str = "8cd2a4b1c8e5f30e2d9a6b7c4e1f0a3d5b6c7d8e9f00112233445566778899aa";
const WRONG_HEX: &str = "00d2a4b1c8e5f30e2d9a6b7c4e1f0a3d5b6c7d8e9f00112233445566778899aa";

/// A server exporting a fresh file as "vol" with `policy` and the credentials given.
fn start(
    policy: TlsPolicy,
    psk: Option<&Path>,
    certs: Option<&Path>,
) -> (SocketAddr, tempfile::NamedTempFile) {
    let file = tempfile::NamedTempFile::new().unwrap();
    file.as_file().set_len(EXPORT_BYTES).unwrap();
    let backend: Arc<dyn Backend> = Arc::new(FileBackend::open(file.path()).unwrap());
    let config = ExportConfig {
        name: "vol".into(),
        tls: nbd_tls(policy, psk, certs, certs.is_some()).unwrap(),
        ..ExportConfig::default()
    };
    (serve_in_background(backend, config).unwrap(), file)
}

/// A folder with `keys.psk` holding `alice` with `hex` (qemu reads that name from a folder).
fn keys(hex: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("keys.psk"), format!("alice:{hex}\n")).unwrap();
    dir
}

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output_within(COMMAND_LIMIT)
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn psk_url(addr: SocketAddr, keys: &Path) -> String {
    format!(
        "nbds://alice@{addr}/vol?tls-psk-file={}",
        keys.join("keys.psk").display()
    )
}

#[test]
fn libnbd_tools_with_the_key_read_and_write_and_without_it_learn_nothing() {
    if !have("nbdinfo") || !have("nbdcopy") {
        return;
    }
    let good = keys(KEY_HEX);
    let wrong = keys(WRONG_HEX);
    let (addr, _file) = start(
        TlsPolicy::Require,
        Some(&good.path().join("keys.psk")),
        None,
    );

    let info = run("nbdinfo", &["--json", &psk_url(addr, good.path())]);
    assert!(info.status.success(), "{}", text(&info));
    assert!(
        text(&info).contains(&format!("\"export-size\": {EXPORT_BYTES}")),
        "{}",
        text(&info)
    );

    // 4 MiB in and out again through nbdcopy, both ways inside TLS.
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in"), dir.path().join("out"));
    let data: Vec<u8> = (0..4u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&input, &data).unwrap();
    let url = psk_url(addr, good.path());
    let copy_in = run("nbdcopy", &[input.to_str().unwrap(), &url]);
    assert!(copy_in.status.success(), "{}", text(&copy_in));
    let copy_out = run("nbdcopy", &[&url, output.to_str().unwrap()]);
    assert!(copy_out.status.success(), "{}", text(&copy_out));
    let back = std::fs::read(&output).unwrap();
    assert_eq!(back.len() as u64, EXPORT_BYTES);
    assert!(back[..data.len()] == data[..], "the bytes read back differ");

    // A wrong key fails the TLS handshake.
    let refused = run("nbdinfo", &[&psk_url(addr, wrong.path())]);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(text(&refused).contains("TLS"), "{}", text(&refused));
    // Without TLS: no export, and the list is refused (no names leak).
    let plain = run("nbdinfo", &[&format!("nbd://{addr}/vol")]);
    assert!(!plain.status.success(), "{}", text(&plain));
    let list = run("nbdinfo", &["--list", &format!("nbd://{addr}")]);
    assert!(!list.status.success(), "{}", text(&list));
    assert!(!text(&list).contains("\"vol\""), "{}", text(&list));
}

#[test]
fn qemu_io_writes_and_reads_back_with_a_psk_and_is_refused_with_another() {
    if !have("qemu-io") {
        return;
    }
    let good = keys(KEY_HEX);
    let wrong = keys(WRONG_HEX);
    let (addr, _file) = start(
        TlsPolicy::Require,
        Some(&good.path().join("keys.psk")),
        None,
    );
    let qemu = |keys: &Path, commands: &[&str]| {
        let object = format!(
            "tls-creds-psk,id=tls0,endpoint=client,dir={},username=alice",
            keys.display()
        );
        let image = format!(
            "driver=nbd,host={},port={},export=vol,tls-creds=tls0",
            addr.ip(),
            addr.port()
        );
        let mut args = vec!["--object", &object, "--image-opts", &image];
        for c in commands {
            args.extend(["-c", c]);
        }
        run("qemu-io", &args)
    };
    let out = qemu(
        good.path(),
        &[
            "write -P 0x5a 1048576 65536",
            "flush",
            "read -P 0x5a 1048576 65536",
            "read -P 0 0 4096",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let t = text(&out);
    assert!(!t.contains("Pattern verification failed"), "{t}");
    assert_eq!(t.matches("read ").count(), 2, "{t}");
    let out = qemu(wrong.path(), &["read 0 4096"]);
    assert!(
        !out.status.success() || text(&out).contains("Could not open"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("read 4096/4096"), "{}", text(&out));
}

#[test]
fn x509_clients_need_a_certificate_from_the_authority() {
    if !have("nbdinfo") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good");
    common::certs::write_certificates(&good, "alice");
    let (addr, _file) = start(TlsPolicy::Require, None, Some(&good));
    let url = |certs: &Path| {
        format!(
            "nbds://localhost:{}/vol?tls-certificates={}",
            addr.port(),
            certs.display()
        )
    };
    let info = run("nbdinfo", &["--json", &url(&good)]);
    assert!(info.status.success(), "{}", text(&info));
    assert!(text(&info).contains("export-size"), "{}", text(&info));
    // A client certificate from another authority (trusting the server's): refused.
    let other = dir.path().join("other");
    common::certs::write_certificates(&other, "mallory");
    std::fs::copy(good.join("ca-cert.pem"), other.join("ca-cert.pem")).unwrap();
    let refused = run("nbdinfo", &[&url(&other)]);
    assert!(!refused.status.success(), "{}", text(&refused));
}

#[test]
fn allow_serves_clients_with_and_without_tls() {
    if !have("nbdinfo") {
        return;
    }
    let good = keys(KEY_HEX);
    let (addr, _file) = start(TlsPolicy::Allow, Some(&good.path().join("keys.psk")), None);
    let plain = run("nbdinfo", &[&format!("nbd://{addr}/vol")]);
    assert!(plain.status.success(), "{}", text(&plain));
    assert!(text(&plain).contains("without TLS"), "{}", text(&plain));
    let tls = run("nbdinfo", &[&psk_url(addr, good.path())]);
    assert!(tls.status.success(), "{}", text(&tls));
    assert!(text(&tls).contains("with TLS"), "{}", text(&tls));
}

/// Sends one option on a raw socket and returns the reply's type.
fn option(stream: &mut TcpStream, option: u32, payload: &[u8]) -> std::io::Result<u32> {
    let mut out = nbd::IHAVEOPT.to_be_bytes().to_vec();
    out.extend_from_slice(&option.to_be_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    stream.write_all(&out)?;
    let mut header = [0u8; 20];
    stream.read_exact(&mut header)?;
    let length = u32::from_be_bytes(header[16..20].try_into().unwrap());
    let mut data = vec![0u8; length as usize];
    stream.read_exact(&mut data)?;
    Ok(u32::from_be_bytes(header[12..16].try_into().unwrap()))
}

fn greeted(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut greeting = [0u8; 18];
    s.read_exact(&mut greeting).unwrap();
    s.write_all(&(nbd::FLAG_C_FIXED_NEWSTYLE | nbd::FLAG_C_NO_ZEROES).to_be_bytes())
        .unwrap();
    s
}

#[test]
fn before_tls_a_raw_client_gets_tls_required_and_export_name_closes() {
    let good = keys(KEY_HEX);
    let (addr, _file) = start(
        TlsPolicy::Require,
        Some(&good.path().join("keys.psk")),
        None,
    );
    let mut s = greeted(addr);
    assert_eq!(
        option(&mut s, nbd::OPT_LIST, &[]).unwrap(),
        nbd::REP_ERR_TLS_REQD
    );
    let mut go = 3u32.to_be_bytes().to_vec();
    go.extend_from_slice(b"vol");
    go.extend_from_slice(&0u16.to_be_bytes());
    assert_eq!(
        option(&mut s, nbd::OPT_GO, &go).unwrap(),
        nbd::REP_ERR_TLS_REQD
    );
    assert_eq!(
        option(&mut s, nbd::OPT_STARTTLS, b"junk").unwrap(),
        nbd::REP_ERR_INVALID
    );
    // EXPORT_NAME cannot be refused with a reply: the server closes.
    let mut out = nbd::IHAVEOPT.to_be_bytes().to_vec();
    out.extend_from_slice(&nbd::OPT_EXPORT_NAME.to_be_bytes());
    out.extend_from_slice(&3u32.to_be_bytes());
    out.extend_from_slice(b"vol");
    s.write_all(&out).unwrap();
    let mut rest = Vec::new();
    let n = s.read_to_end(&mut rest).unwrap_or(0);
    assert_eq!(n, 0, "the server answered EXPORT_NAME before TLS: {rest:?}");
}

/// Our own client (the one daemons' links use): the right key reaches the export, a wrong one
/// fails in the handshake.
#[test]
fn our_tls_client_needs_the_right_key() {
    let good = keys(KEY_HEX);
    let (addr, _file) = start(
        TlsPolicy::Require,
        Some(&good.path().join("keys.psk")),
        None,
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let key = |hex: &str| -> Vec<u8> {
        (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    };
    let attempt = |hex: &str| {
        let client = TlsClient::psk("alice", &key(hex)).unwrap();
        runtime.block_on(async {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut s = greeted(addr);
            assert_eq!(
                option(&mut s, nbd::OPT_STARTTLS, &[]).unwrap(),
                nbd::REP_ACK
            );
            s.set_nonblocking(true).unwrap();
            let stream = tokio::net::TcpStream::from_std(s).unwrap();
            let mut tls = client.connect(stream).await?;
            let mut out = nbd::IHAVEOPT.to_be_bytes().to_vec();
            out.extend_from_slice(&nbd::OPT_LIST.to_be_bytes());
            out.extend_from_slice(&0u32.to_be_bytes());
            tls.write_all(&out).await.unwrap();
            let mut header = [0u8; 20];
            tls.read_exact(&mut header).await.unwrap();
            Ok::<u32, cordillera_runtime::tls::TlsError>(u32::from_be_bytes(
                header[12..16].try_into().unwrap(),
            ))
        })
    };
    assert_eq!(
        attempt(KEY_HEX).unwrap(),
        nbd::REP_SERVER,
        "the export's name"
    );
    let e = attempt(WRONG_HEX).expect_err("a wrong key is refused");
    assert!(e.to_string().contains("handshake"), "{e}");
}
