//! GGUF header, metadata and tensor table (`kvplan_runtime::gguf`), then every tensor the table
//! declares read and dequantised: a file the reader accepts must read whole.
#![no_main]

use kvplan_runtime::gguf::GgufFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(file) = GgufFile::from_bytes(data.to_vec()) else {
        return;
    };
    for value in file.metadata.values() {
        let _ = value.summary();
    }
    for t in &file.tensors {
        // The table was checked against the file's length when it was read.
        let (values, shape) = match file.tensor_f32(&t.name) {
            Ok(read) => read,
            Err(e) => panic!("accepted tensor {:?} does not read: {e}", t.name),
        };
        assert_eq!(values.len() as u64, t.n_elements());
        assert_eq!(shape.iter().product::<usize>(), values.len());
    }
});
