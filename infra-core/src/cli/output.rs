//! `output`: the fleet's outputs, from the last observation the records keep.
//!
//! No cloud is reached, except with `--refresh` (observe first, as `refresh` does) and
//! for the one value `--show-secret NAME` asks for, read from its cloud: no record ever
//! holds a secret value, and nothing here writes one anywhere but standard output.

use super::console::Io;
use super::render::error;
use crate::output::{Output, Reading, outputs_json, read_outputs};
use crate::{Engine, Fleet};

/// The flags of `output`.
pub(super) struct OutputVerb {
    pub(super) name: Option<String>,
    pub(super) json: bool,
    pub(super) refresh: bool,
    pub(super) show_secret: Option<String>,
}

pub(super) async fn output(
    io: &mut Io<'_>,
    engine: &Engine,
    fleet: &Fleet,
    verb: OutputVerb,
) -> u8 {
    for (flag, name) in [("output", &verb.name), ("--show-secret", &verb.show_secret)] {
        if let Some(name) = name
            && let Err(why) = known(fleet, flag, name)
        {
            return error(io, &why);
        }
    }
    if verb.refresh {
        match engine.refresh(&fleet.plan()).await {
            Ok(report) if !report.is_complete() => io.err(
                "warning: some resources could not be observed; their outputs are read from \
                 older observations, or are not known",
            ),
            Ok(_) => {}
            Err(e) => return error(io, &e),
        }
    }
    let (mut outputs, site) =
        match read_outputs(fleet, &**engine.store(), verb.show_secret.as_deref()) {
            Ok(read) => read,
            Err(e) => return error(io, &e),
        };
    if let Some(name) = &verb.show_secret {
        let Some(o) = outputs.iter_mut().find(|o| &o.name == name) else {
            return error(io, &format!("no output is named `{name}`"));
        };
        if !matches!(o.reading, Reading::Sensitive | Reading::Unknown(_)) {
            return error(
                io,
                &format!("output `{name}` is not a secret: it is shown without --show-secret"),
            );
        }
        if let Some((provider, region, handle)) = site {
            o.reading = match engine.backends().get(provider) {
                None => Reading::Unknown(format!("no {provider} backend was given")),
                Some(backend) => match backend.secret_value(region, &handle).await {
                    Ok(value) => Reading::Secret(value),
                    Err(e) => Reading::Unknown(format!("its value could not be read: {e}")),
                },
            };
        }
    }
    if let Some(name) = &verb.name {
        outputs.retain(|o| &o.name == name);
        // Its value alone is for a script: a placeholder in its place would be taken
        // for the value.
        if !verb.json
            && outputs
                .iter()
                .any(|o| matches!(o.reading, Reading::Sensitive))
        {
            return error(
                io,
                &format!(
                    "output `{name}` is a secret: `output {name} --show-secret {name}` prints its value"
                ),
            );
        }
    }
    print(io, fleet, &outputs, &verb);
    let unknown = outputs
        .iter()
        .any(|o| matches!(o.reading, Reading::Unknown(_)));
    if unknown { 1 } else { 0 }
}

/// Refuses a name no output has, with the nearest ones.
fn known(fleet: &Fleet, flag: &str, name: &str) -> Result<(), String> {
    if fleet.outputs().any(|o| o == name) {
        return Ok(());
    }
    let mut near: Vec<(usize, &str)> = fleet
        .outputs()
        .map(|o| (crate::names::distance(name, o), o))
        .filter(|(d, _)| *d <= (name.chars().count() / 2).max(3))
        .collect();
    near.sort();
    let hint = match near.first() {
        Some((_, o)) => format!("; did you mean `{o}`?"),
        None => String::new(),
    };
    Err(format!(
        "{flag} {name:?}: fleet `{}` declares no output of that name{hint}",
        fleet.name()
    ))
}

fn print(io: &mut Io<'_>, fleet: &Fleet, outputs: &[Output], verb: &OutputVerb) {
    if verb.json {
        let json = outputs_json(fleet.name(), outputs);
        io.out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&json).expect("JSON")
        ));
        return;
    }
    if outputs.is_empty() {
        io.out(&format!("fleet `{}` declares no outputs\n", fleet.name()));
        return;
    }
    // One output asked for by name: its value alone, for a script.
    let alone = verb.name.is_some();
    for o in outputs {
        let value = match &o.reading {
            Reading::Value(serde_json::Value::String(s)) if alone => s.clone(),
            Reading::Value(v) => v.to_string(),
            Reading::Secret(s) => s.expose().to_owned(),
            Reading::Sensitive => {
                format!("(sensitive: `output --show-secret {}` shows it)", o.name)
            }
            Reading::Unknown(why) => {
                io.err(&format!("warning: output `{}` is not known: {why}", o.name));
                continue;
            }
        };
        if alone {
            io.out(&format!("{value}\n"));
        } else {
            io.out(&format!("{} = {value}\n", o.name));
        }
    }
}
