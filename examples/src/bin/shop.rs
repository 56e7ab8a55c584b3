//! Prints the plan of the `shop` example fleet: `cargo run -p examples --bin shop`,
//! or with `--json` for the machine-readable plan.

use std::process::ExitCode;

fn main() -> ExitCode {
    let json = std::env::args().skip(1).any(|a| a == "--json");
    match examples::shop::fleet() {
        Ok(fleet) => {
            let plan = fleet.plan();
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&plan.to_json()).expect("JSON")
                );
            } else {
                print!("{}", plan.render());
            }
            ExitCode::SUCCESS
        }
        Err(report) => {
            eprintln!("{report}");
            ExitCode::from(2)
        }
    }
}
