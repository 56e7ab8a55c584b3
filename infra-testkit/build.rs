//! Compiles the Talos machine-API and COSI protobuf subset kept in
//! `proto/` (a link to `../infra-talos/proto`, so that the published package carries the
//! files) into the simulator's server side (feature `talos`).

#[cfg(feature = "talos")]
/// The protobuf files, relative to the proto directory.
const PROTO_FILES: &[&str] = &[
    "common/common.proto",
    "machine/machine.proto",
    "cosi/resource.proto",
];

#[cfg(feature = "talos")]
/// Where the protobuf files live, relative to this crate.
const PROTO_DIR: &str = "proto";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_TALOS").is_none() {
        return Ok(());
    }
    #[cfg(feature = "talos")]
    generate()?;
    Ok(())
}

#[cfg(feature = "talos")]
fn generate() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed={PROTO_DIR}");
    for file in PROTO_FILES {
        println!("cargo:rerun-if-changed={PROTO_DIR}/{file}");
    }
    let out_dir =
        std::path::PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?);

    let mut compiler = protox::Compiler::new([PROTO_DIR])?;
    compiler.include_imports(true).include_source_info(false);
    compiler.open_files(PROTO_FILES.iter().copied())?;

    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .build_transport(false)
        .out_dir(&out_dir)
        .compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}
