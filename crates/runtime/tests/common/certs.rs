//! Throw-away X.509 credentials for TLS tests: a certificate authority, a server certificate
//! for `localhost` and `127.0.0.1`, and a client certificate, written in the directory layout
//! nbdkit, qemu and libnbd read (`ca-cert.pem`, `server-cert.pem`, `server-key.pem`,
//! `client-cert.pem`, `client-key.pem`).

use std::path::Path;

use openssl::asn1::Asn1Time;
use openssl::bn::{BigNum, MsbOption};
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::x509::extension::{
    BasicConstraints, ExtendedKeyUsage, KeyUsage, SubjectAlternativeName,
};
use openssl::x509::{X509NameBuilder, X509};

fn key() -> PKey<Private> {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
    PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap()
}

/// A certificate for `common_name`, signed by `issuer` (self-signed when `None`).
fn certificate(
    common_name: &str,
    key: &PKey<Private>,
    issuer: Option<(&X509, &PKey<Private>)>,
    role: Role,
) -> X509 {
    let mut name = X509NameBuilder::new().unwrap();
    name.append_entry_by_nid(Nid::COMMONNAME, common_name)
        .unwrap();
    let name = name.build();
    let mut b = X509::builder().unwrap();
    b.set_version(2).unwrap();
    let mut serial = BigNum::new().unwrap();
    serial.rand(64, MsbOption::MAYBE_ZERO, false).unwrap();
    b.set_serial_number(&serial.to_asn1_integer().unwrap())
        .unwrap();
    b.set_subject_name(&name).unwrap();
    b.set_issuer_name(issuer.map_or(&name, |(cert, _)| cert.subject_name()))
        .unwrap();
    b.set_pubkey(key).unwrap();
    b.set_not_before(&Asn1Time::days_from_now(0).unwrap())
        .unwrap();
    b.set_not_after(&Asn1Time::days_from_now(30).unwrap())
        .unwrap();
    match role {
        Role::Authority => {
            b.append_extension(BasicConstraints::new().critical().ca().build().unwrap())
                .unwrap();
            let usage = KeyUsage::new()
                .critical()
                .key_cert_sign()
                .crl_sign()
                .build();
            b.append_extension(usage.unwrap()).unwrap();
        }
        Role::Server | Role::Client => {
            b.append_extension(BasicConstraints::new().build().unwrap())
                .unwrap();
            let usage = KeyUsage::new().critical().digital_signature().build();
            b.append_extension(usage.unwrap()).unwrap();
            let mut ext = ExtendedKeyUsage::new();
            if role == Role::Server {
                ext.server_auth();
            } else {
                ext.client_auth();
            }
            b.append_extension(ext.build().unwrap()).unwrap();
        }
    }
    if role == Role::Server {
        let context = b.x509v3_context(issuer.map(|(c, _)| c.as_ref()), None);
        let san = SubjectAlternativeName::new()
            .dns("localhost")
            .ip("127.0.0.1")
            .build(&context)
            .unwrap();
        b.append_extension(san).unwrap();
    }
    let signer = issuer.map_or(key, |(_, k)| k);
    b.sign(signer, MessageDigest::sha256()).unwrap();
    b.build()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Authority,
    Server,
    Client,
}

fn write(dir: &Path, name: &str, pem: Vec<u8>) {
    std::fs::write(dir.join(name), pem).unwrap();
}

/// Writes a fresh authority, a server certificate (`localhost`, `127.0.0.1`) and a client
/// certificate (common name `client_name`) into `dir`.
pub fn write_certificates(dir: &Path, client_name: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let ca_key = key();
    let ca = certificate("cordillera test authority", &ca_key, None, Role::Authority);
    write(dir, "ca-cert.pem", ca.to_pem().unwrap());
    for (role, name, file) in [
        (Role::Server, "localhost", "server"),
        (Role::Client, client_name, "client"),
    ] {
        let k = key();
        let cert = certificate(name, &k, Some((&ca, &ca_key)), role);
        write(dir, &format!("{file}-cert.pem"), cert.to_pem().unwrap());
        write(
            dir,
            &format!("{file}-key.pem"),
            k.private_key_to_pem_pkcs8().unwrap(),
        );
    }
}
