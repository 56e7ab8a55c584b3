//! Compiles the Talos machine-API and COSI protobuf subset in `proto/` (feature `grpc`).
//!
//! Only the message types are generated: no generated client or server exists in this
//! crate, so the only code that names a remote method is the crate's own allowlisted
//! calls. The compiled descriptor set is written beside the generated code so that
//! tests can enumerate every method the protocol declares.

#[cfg(feature = "grpc")]
/// The protobuf files, relative to `proto/`.
const PROTO_FILES: &[&str] = &[
    "common/common.proto",
    "machine/machine.proto",
    "cosi/resource.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_GRPC").is_none() {
        return Ok(());
    }
    #[cfg(feature = "grpc")]
    generate()?;
    Ok(())
}

#[cfg(feature = "grpc")]
fn generate() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    for file in PROTO_FILES {
        println!("cargo:rerun-if-changed=proto/{file}");
    }
    let out_dir =
        std::path::PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?);

    let mut compiler = protox::Compiler::new(["proto"])?;
    compiler.include_imports(true).include_source_info(false);
    compiler.open_files(PROTO_FILES.iter().copied())?;
    std::fs::write(
        out_dir.join("talos_api_descriptor.bin"),
        compiler.encode_file_descriptor_set(),
    )?;

    tonic_prost_build::configure()
        .build_client(false)
        .build_server(false)
        .build_transport(false)
        .out_dir(&out_dir)
        .compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}
