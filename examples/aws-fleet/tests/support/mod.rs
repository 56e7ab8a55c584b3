//! Runs the aws-fleet binary as a person would, in an environment the test controls.

#![allow(dead_code, unreachable_pub)]

use std::path::Path;
use std::process::Command;

/// What one run left: its exit code and its two streams.
pub struct Run {
    pub code: i32,
    pub out: String,
    pub err: String,
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.out, self.err
        )
    }
}

/// The binary, with every AWS and infra variable of the test's own environment removed,
/// `HOME` pointed at `home` (so that no `~/.aws` of the machine is read), the instance
/// metadata endpoint turned off, no colour, and `vars` set.
pub fn binary(home: &Path, vars: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_aws-fleet"));
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("AWS_") || name.starts_with("INFRA_") || name == "SECRET_ACCESS_KEY" {
            command.env_remove(&*name);
        }
    }
    command
        .env("HOME", home)
        .env("USERPROFILE", home)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE");
    for (name, value) in vars {
        command.env(name, value);
    }
    command
}

/// Runs `command` with `args` after it.
pub fn run(mut command: Command, args: &[&str]) -> Run {
    let output = command
        .args(args)
        .output()
        .expect("the aws-fleet binary runs");
    Run {
        code: output.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&output.stdout).into_owned(),
        err: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}
