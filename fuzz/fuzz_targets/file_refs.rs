#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| maia_fuzz::file_refs(data));
