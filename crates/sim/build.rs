//! Embeds every device preset of `configs/devices/*.toml` in the binary, so `--device NAME`
//! works wherever qoslab is installed. Adding a preset is adding a file there.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    // The crate's directory as cargo gives it to this run, not as it was when this script was
    // compiled (`env!`): a build tree copied from another checkout re-runs the script without
    // compiling it again, and would read that checkout's presets, or none once it is gone.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&manifest).join("../../configs/devices");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd.filter_map(Result::ok).map(|e| e.path()).collect(),
        Err(err) => panic!("{}: cannot read the device presets: {err}", dir.display()),
    };
    files.retain(|p| p.extension().is_some_and(|e| e == "toml"));
    // Without a preset every `--device NAME` fails at run time; fail the build instead.
    assert!(
        !files.is_empty(),
        "{}: no device preset (*.toml)",
        dir.display()
    );
    files.sort();
    let mut out = String::from(
        "/// (preset name, TOML text) of every file in configs/devices.\npub static PRESETS: &[(&str, &str)] = &[\n",
    );
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let name = f.file_stem().unwrap().to_string_lossy();
        let path = f.canonicalize().unwrap();
        writeln!(
            out,
            "    ({name:?}, include_str!({:?})),",
            path.display().to_string()
        )
        .unwrap();
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("presets.rs");
    std::fs::write(dest, out).unwrap();
}
