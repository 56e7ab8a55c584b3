//! T: this engine and Terraform on the same work, as whole processes
//! (`benches/side-by-side/run.py`, which runs this program in the modes below and
//! writes its figures where [`print()`] finds them).

use std::path::PathBuf;

use benches::side_by_side;
use infra_testkit::sim::SimCloud;

/// The environment variable that makes this program the runner of the side-by-side
/// work of that many nodes (version in [`VERSION`], 1 when unset).
pub(crate) const AS_GRAPH: &str = "INFRA_BENCH_AS_GRAPH";

/// The version of the work the runner declares.
pub(crate) const VERSION: &str = "INFRA_BENCH_GRAPH_VERSION";

/// When [`AS_GRAPH`] is set, runs the runner on the side-by-side fleet with the
/// simulated cloud of `INFRA_SIM_WORLD`, on this process's arguments; `None` otherwise.
pub(crate) fn as_graph() -> Option<std::process::ExitCode> {
    let n: usize = std::env::var(AS_GRAPH).ok()?.parse().ok()?;
    let version = std::env::var(VERSION)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    Some(infra_core::cli::run(
        Ok(side_by_side::fleet(n, version)),
        |_| SimCloud::backends_at(infra_testkit::sim::world_file()),
    ))
}

/// `--terraform N VERSION`: prints the work as a Terraform configuration.
pub(crate) fn terraform(n: usize, version: u32) {
    print!("{}", side_by_side::terraform(n, version));
}

/// `--world-len PATH`: prints how many resources the simulated world at `PATH` holds.
pub(crate) fn world_len(path: &str) -> std::process::ExitCode {
    match SimCloud::open(path) {
        Ok(cloud) => {
            println!("{}", cloud.len());
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Where the side-by-side script writes its figures: `side-by-side/figures.txt` in
/// the target directory this program was built in (`INFRA_BENCH_SIDE_BY_SIDE` to
/// read another file).
fn figures() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("INFRA_BENCH_SIDE_BY_SIDE") {
        return Some(PathBuf::from(path));
    }
    let exe = std::env::current_exe().ok()?;
    Some(
        exe.parent()?
            .parent()?
            .join("side-by-side")
            .join("figures.txt"),
    )
}

/// Prints the `T` lines of the side-by-side script's last run, or where to get them.
pub(crate) fn print() {
    let path = figures();
    match path.as_ref().map(std::fs::read_to_string) {
        Some(Ok(text)) => {
            for line in text.lines().filter(|l| l.starts_with("T ")) {
                println!("{line}");
            }
            eprintln!(
                "T: from {} (run benches/side-by-side/run.py to measure again)",
                path.expect("read").display()
            );
        }
        _ => eprintln!(
            "T infra_vs_terraform: not measured here; run `python3 benches/side-by-side/run.py` \
             (it installs Terraform in a scratch directory), which writes {}",
            path.map_or_else(|| "its figures".into(), |p| p.display().to_string())
        ),
    }
}
