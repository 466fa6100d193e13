//! Decode arbitrary bytes as `bee serve` frames: a header, then a request (as the service
//! reads it) and a response (as a client reads it). Nothing may panic, a length outside the
//! bounds is refused, and a request that decodes survives its own frame unchanged.
#![no_main]

use bee::serve::protocol::{self, HEADER, Request, Response};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(header) = data.get(..HEADER) {
        let header = [header[0], header[1], header[2], header[3]];
        if let Ok(n) = protocol::body_length(header) {
            assert!((1..=protocol::MAX_FRAME).contains(&n));
        }
    }
    let body = data.get(HEADER..).unwrap_or_default();
    if let Ok(request) = protocol::decode::<Request>(body) {
        let frame = protocol::encode(&request).unwrap_or_default();
        let again = protocol::decode::<Request>(frame.get(HEADER..).unwrap_or_default());
        assert_eq!(again.ok().as_ref(), Some(&request));
        // A policy that arrives as data is checked, never trusted; checking cannot panic.
        if let Request::Create { policy, .. } | Request::Replace { policy, .. } = &request {
            let _ = policy.check_normal_form();
        }
    }
    let _ = protocol::decode::<Response>(body);
});
