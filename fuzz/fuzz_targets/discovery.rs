//! Fuzz target: file_sd target files (`epicenter_collector::discovery::read_target_file`).
//!
//! The loader takes a path and picks JSON or YAML by extension, so each input is written to
//! two files of this process's own (in the temporary directory) and read as both. A file that
//! reads must give one group per input group, each labelled with `__meta_filepath`.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use epicenter_collector::discovery::read_target_file;
use libfuzzer_sys::fuzz_target;

fn paths() -> &'static [PathBuf; 2] {
    static PATHS: OnceLock<[PathBuf; 2]> = OnceLock::new();
    PATHS.get_or_init(|| {
        let directory = std::env::temp_dir();
        let stem = format!("epicenter-fuzz-discovery-{}", std::process::id());
        [
            directory.join(format!("{stem}.json")),
            directory.join(format!("{stem}.yml")),
        ]
    })
}

fuzz_target!(|data: &[u8]| {
    for path in paths() {
        std::fs::write(path, data).expect("cannot write the fuzz input to the temporary directory");
        if let Ok(groups) = read_target_file(path) {
            let file = path.display().to_string();
            for group in &groups {
                assert_eq!(group.labels.get("__meta_filepath"), Some(&file));
            }
        }
    }
});
