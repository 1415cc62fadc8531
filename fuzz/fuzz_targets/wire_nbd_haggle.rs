//! NBD option haggling on arbitrary client bytes: the first byte picks the port's TLS policy
//! (off, allow, require) and whether a STARTTLS's TLS handshake succeeds; the rest is a stream
//! of options. Nothing panics, and on a port that requires TLS no export is chosen or looked
//! up, and no list given, before TLS has started.
#![no_main]

use cordillera_wire::nbd::haggle::{split_option, BlockSizes, Found, Haggle, Step, TlsPolicy};
use cordillera_wire::nbd::{ClientFlags, FLAG_HAS_FLAGS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&first, mut rest)) = data.split_first() else {
        return;
    };
    let policy = [TlsPolicy::Off, TlsPolicy::Allow, TlsPolicy::Require][(first % 3) as usize];
    let handshake_succeeds = first & 0x80 == 0;
    let client = ClientFlags {
        fixed_newstyle: true,
        no_zeroes: first & 0x40 != 0,
    };
    let block = BlockSizes {
        minimum: 512,
        preferred: 4096,
        maximum: 32 << 20,
    };
    let mut h = Haggle::new(policy, client, FLAG_HAS_FLAGS, block);
    while let Some(Ok((header, payload, after))) = split_option(rest) {
        rest = after;
        let guarded = policy == TlsPolicy::Require && !h.tls_active();
        let mut consulted = false;
        let step = h.option(
            header,
            payload,
            |name| {
                consulted = true;
                (name == "vol" || name.is_empty()).then_some(Found {
                    export: (),
                    length_bytes: 1 << 20,
                })
            },
            || vec!["vol".to_owned()],
        );
        assert!(!(guarded && consulted), "exports looked up before TLS");
        match step {
            Step::Chosen { .. } => {
                assert!(!guarded, "an export chosen before TLS");
                return;
            }
            Step::StartTls(_) => {
                assert!(policy != TlsPolicy::Off && !h.tls_active());
                if !handshake_succeeds {
                    return;
                }
                h.tls_started();
            }
            Step::Reply(bytes) => assert!(bytes.len() >= 20, "an option reply"),
            Step::Abort(_) | Step::Close(_) => return,
        }
    }
});
