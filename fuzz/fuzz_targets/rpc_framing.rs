#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| maia_fuzz::rpc_framing(data));
