//! The store protocol decoder on arbitrary bytes: frames decode or fail with a typed error, and
//! whatever decodes encodes back to the same bytes. The write-head decoder (a server reads a
//! write's data straight into its own buffer after it) agrees with the whole-frame decoder.
#![no_main]

use cordillera_wire::store::{decode, decode_write_head, encode, Frame, WriteHead};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let whole = decode(data);
    if let Ok(Some((frame, used))) = &whole {
        let mut again = Vec::new();
        encode(frame, &mut again);
        assert_eq!(&again[..], &data[..*used], "decode ∘ encode is the identity");
    }
    match decode_write_head(data) {
        Ok(Some(head)) => {
            if let Ok(Some((frame, used))) = whole {
                let expected = Frame::Request {
                    id: head.id,
                    request: head.request(data[WriteHead::BYTES..used].to_vec()),
                };
                assert_eq!(frame, expected, "the head agrees with the whole frame");
            } else {
                // A head that decodes belongs to a frame that decodes once it is all there.
                assert!(whole.is_ok(), "an accepted head, a refused frame");
            }
        }
        Ok(None) => assert!(
            !matches!(
                whole,
                Ok(Some((
                    Frame::Request {
                        request: cordillera_vstore::store::Request::Write { .. },
                        ..
                    },
                    _
                )))
            ),
            "a whole write frame has a head"
        ),
        Err(_) => assert!(!matches!(whole, Ok(Some(_))), "a refused head, an accepted frame"),
    }
});
